"""The supersession graph of the fact index: which stored fact supersedes which.

Owns: :class:`Supersession` — the links in both directions (successor -> the facts
it supersedes, predecessor -> its successors), each with the time it became known
(:class:`~holomem.projections.temporal.Link`); the count of live links; the links
as slot arrays (:class:`~holomem.projections.chains.LinkSlots`, which it feeds); and
the answers that follow links: a fact's successors and predecessors as known at a
time, its chain, every link; and, for a walk pinned at a transaction (an entity
profile's cursor), the links removals took away and forgets re-pointed since the
generation began, each with its transaction, so a fact's successors as they stood
then can still be told (:meth:`Supersession.successors_then`). Part of the fact index
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
        "departed": dict[str, list[tuple[int, int, int, int]]],
        "relinked": dict[str, list[tuple[str, int]]],
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
        #: What removals changed, so a walk pinned before them can still tell a
        #: fact's successors then (:meth:`successors_then`). Predecessor -> (slot of
        #: a removed successor, the link's known_at, the transaction that made the
        #: link (-1: its fact's own), the one that removed it).
        self.departed: dict[str, list[tuple[int, int, int, int]]] = {}
        #: Predecessor -> (successor, transaction) of each link a forget re-pointed.
        self.relinked: dict[str, list[tuple[str, int]]] = {}

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

    def relink(self, succ: str, pred: str, known_at: int, seq: int) -> tuple[int, str] | None:
        """:meth:`add` for a link a forget (transaction ``seq``) re-points, noted as
        made then."""
        made = self.add(succ, pred, known_at)
        if made is not None:
            p = made[1]
            self.relinked[p] = [*self.relinked.get(p, ()), (succ, seq)]
        return made

    def remove(self, fact_id: str, slot: int = -1, seq: int = -1) -> list[str]:
        """Take away every link of the fact ``fact_id`` (in ``slot``), which transaction
        ``seq`` removes; returns the facts it superseded (without it, they may be
        current again), each of which notes the link that departed."""
        preds = []
        for link in self.supersedes.pop(fact_id, []):
            _drop(self.superseded_by, link.other, fact_id)
            self.count -= 1
            preds.append(link.other)
            made = -1
            relinked = self.relinked.get(link.other)
            if relinked is not None:  # a re-pointed link: made by that forget
                made = max([made, *(at for s, at in relinked if s == fact_id)])
                kept = [(s, at) for s, at in relinked if s != fact_id]
                if kept:
                    self.relinked[link.other] = kept
                else:
                    del self.relinked[link.other]
            if slot >= 0:
                self.departed[link.other] = [*self.departed.get(link.other, ()),
                                             (slot, link.known_at, made, seq)]
        for link in self.superseded_by.pop(fact_id, []):
            _drop(self.supersedes, link.other, fact_id)
            self.count -= 1
        self.departed.pop(fact_id, None)
        self.relinked.pop(fact_id, None)
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

    def successors_then(self, fact_id: str, known_at: int | None, bound: int, seq: int
                        ) -> list[int]:
        """The slots of the facts that superseded the stored fact ``fact_id`` (through
        links known at ``known_at``) just after transaction ``seq``, when the store
        held ``bound`` slots: its successors still stored, linked by then (not
        re-pointed to it by a later forget), and those removed since."""
        later = {s for s, at in self.relinked.get(fact_id, ()) if at > seq}
        out = []
        for link in self.superseded_by.get(fact_id, ()):
            if (known_at is not None and link.known_at > known_at) or link.other in later:
                continue
            slot = self._stored(link.other)
            if 0 <= slot < bound and self._known(slot, known_at):
                out.append(slot)
        for slot, known, made, removed in self.departed.get(fact_id, ()):
            if (made <= seq < removed and slot < bound
                    and (known_at is None or known <= known_at) and self._known(slot, known_at)):
                out.append(slot)
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
        snap: Snapshot = {"supersedes": dict(self.supersedes),
                          "superseded_by": dict(self.superseded_by)}
        # Only when a removal filled them: a store that never forgot a superseding
        # fact writes the payload it wrote before they existed (FORMAT.md §9.2).
        if self.departed:
            snap["departed"] = dict(self.departed)
        if self.relinked:
            snap["relinked"] = dict(self.relinked)
        return snap

    def restore(self, snap: Snapshot, count: int) -> None:
        """The tables of :meth:`snapshot`, with ``count`` live links."""
        self.supersedes.clear()
        self.supersedes.update(snap["supersedes"])
        self.superseded_by.clear()
        self.superseded_by.update(snap["superseded_by"])
        self.departed = dict(snap.get("departed", {}))
        self.relinked = dict(snap.get("relinked", {}))
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
