"""The supersession graph of the fact index: which stored fact supersedes which.

Owns: :class:`Supersession` — the links in both directions (successor -> the facts
it supersedes, predecessor -> its successors), each with the time it became known
(:class:`~holomem.projections.temporal.Link`); the count of live links; the links
as slot arrays (:class:`~holomem.projections.chains.LinkSlots`, which it feeds); and
the answers that follow links: a fact's successors and predecessors as known at a
time, its chain, every link. Part of the fact index
(:mod:`holomem.projections.facts`), which applies the events and lends the lookups
the walks need (the slot of a stored fact, whether a fact was known at a time, its
place in effect order). Imports numpy, the catalog, :mod:`~holomem.projections.chains`
and the temporal model's :class:`Link`.

Rules kept here: a link joins two stored facts, never a fact to itself, and is
written once (a second event naming it changes nothing); links to forgotten or
unknown facts are ignored; a link goes only with one of its facts. The tables' lists
are never changed in place (a change puts a new list in), so a snapshot copies the
tables at the top only. What the links make of a fact's status is
:mod:`holomem.projections.statuses`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np

from holomem.projections.base import Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.chains import LinkSlots
from holomem.projections.subjects import OrderKey
from holomem.projections.temporal import Link


class Supersession:
    """The links between stored facts. ``stored(fid)`` is the slot of a stored fact
    (-1: none), ``known(slot, known_at)`` whether the fact in ``slot`` was known at
    ``known_at``, ``key(fid)`` a stored fact's place in effect order."""

    #: The tables' shapes, for a typed decode (msgspec builds the links).
    SNAPSHOT_TYPES: ClassVar[dict[str, object]] = {
        "supersedes": dict[str, list[Link]], "superseded_by": dict[str, list[Link]],
    }

    def __init__(self, catalog: Catalog, stored: Callable[[str], int],
                 known: Callable[[int, int | None], bool],
                 key: Callable[[str], OrderKey]) -> None:
        self.catalog = catalog
        self._stored = stored
        self._known = known
        self._key = key
        self.supersedes: dict[str, list[Link]] = {}  # successor -> what it supersedes
        self.superseded_by: dict[str, list[Link]] = {}  # predecessor -> its successors
        #: the links as slot arrays, for the status and chains of every slot at once
        self.link_slots = LinkSlots()
        self.count = 0  # live links

    # -- changes (called by the fact index) ---------------------------------------------
    def add(self, succ: str, pred: str, known_at: int,
            slots: tuple[int, int] | None = None) -> tuple[int, str] | None:
        """Link ``succ`` -> ``pred`` (``slots``: their slots, when the caller has
        them); the predecessor's slot and id when a new link was made."""
        ss, ps = slots if slots is not None else (self.catalog.slot(succ),
                                                  self.catalog.slot(pred))
        if ss < 0 or ps < 0 or ss == ps:
            return None  # links to forgotten (or unknown) facts are ignored
        # (The catalog's own strings, so links do not copy ids.)
        s, p = self.catalog.ids[ss], self.catalog.ids[ps]
        assert s is not None and p is not None
        had = self.supersedes.get(s)
        if had is not None and any(link.other == p for link in had):
            return None
        # New lists, never ones changed in place (see the module docstring).
        self.supersedes[s] = [*(had or ()), Link(p, known_at)]
        self.superseded_by[p] = [*self.superseded_by.get(p, ()), Link(s, known_at)]
        self.count += 1
        self.link_slots.add(ss, ps)
        return ps, p

    def remove(self, fact_id: str) -> list[str]:
        """Take away every link of the fact ``fact_id``, which is going; returns the
        facts it superseded (without it, they may be current again)."""
        preds = []
        for link in self.supersedes.pop(fact_id, []):
            _drop(self.superseded_by, link.other, fact_id)
            self.count -= 1
            preds.append(link.other)
        for link in self.superseded_by.pop(fact_id, []):
            _drop(self.supersedes, link.other, fact_id)
            self.count -= 1
        return preds

    def moved(self, fact_id: str | None) -> None:
        """The fact ``fact_id`` moved to a new slot: its links name its old one."""
        if fact_id in self.supersedes or fact_id in self.superseded_by:
            self.link_slots.reset()

    # -- answers ------------------------------------------------------------------------
    def successors(self, fact_id: str, known_at: int | None = None) -> list[str]:
        """Stored facts that supersede ``fact_id`` through links known at ``known_at``."""
        return self._linked(self.superseded_by, fact_id, known_at)

    def predecessors(self, fact_id: str, known_at: int | None = None) -> list[str]:
        """Stored facts that ``fact_id`` supersedes through links known at ``known_at``."""
        return self._linked(self.supersedes, fact_id, known_at)

    def _linked(self, table: dict[str, list[Link]], fact_id: str,
                known_at: int | None) -> list[str]:
        out = []
        for link in table.get(fact_id, ()):
            if known_at is not None and link.known_at > known_at:
                continue
            slot = self._stored(link.other)
            if slot >= 0 and self._known(slot, known_at):
                out.append(link.other)
        return out

    def chain(self, fact_id: str) -> list[str]:
        """Every stored fact connected to ``fact_id`` by supersession, in effect order."""
        if self._stored(fact_id) < 0:
            return []
        seen = {fact_id}
        todo = [fact_id]
        while todo:
            cur = todo.pop()
            for table in (self.supersedes, self.superseded_by):
                for link in table.get(cur, ()):
                    if link.other not in seen and self._stored(link.other) >= 0:
                        seen.add(link.other)
                        todo.append(link.other)
        return sorted(seen, key=self._key)

    def all_links(self) -> list[tuple[str, str, int]]:
        """Every link between stored facts: (successor, predecessor, known_at)."""
        return [(succ, link.other, link.known_at)
                for succ, links in self.supersedes.items() for link in links]

    def pairs(self) -> np.ndarray:
        """(successor slot, predecessor slot) of every link in the tables (-1: an end
        that is not a stored fact), read one link at a time (LinkSlots' first use)."""
        slot = self._stored
        return np.array([(slot(succ), slot(link.other)) for succ, links in
                         self.supersedes.items() for link in links], dtype=np.int64)

    # -- checkpoints and compaction -----------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The tables copied at the top (their lists are never changed in place and
        their entries are tuples)."""
        return {"supersedes": dict(self.supersedes),
                "superseded_by": dict(self.superseded_by)}

    def restore(self, snap: Snapshot, count: int) -> None:
        """The tables of :meth:`snapshot`, with ``count`` live links."""
        self.supersedes.clear()
        self.supersedes.update(snap["supersedes"])
        self.superseded_by.clear()
        self.superseded_by.update(snap["superseded_by"])
        self.count = count

    def compacted(self, old: Supersession) -> None:
        """Fill this fresh graph with every link of ``old`` (a link joins two stored
        facts, all of which a compaction keeps): the successor table in the old order,
        which :meth:`all_links` walks, the predecessor table in the order that walk
        meets its keys. The lists are never changed in place, so they are shared."""
        self.supersedes = dict(old.supersedes)
        for succ, pred, known in old.all_links():
            self.superseded_by[pred] = [*self.superseded_by.get(pred, ()), Link(succ, known)]
        self.count = sum(map(len, self.supersedes.values()))


def _drop(table: dict[str, list[Link]], key: str, other: str) -> None:
    """Take the link to ``other`` out of ``table[key]`` (a new list, or no entry)."""
    links = table.get(key)
    if links is None:
        return
    kept = [link for link in links if link.other != other]
    if kept:
        table[key] = kept
    else:
        del table[key]
