"""The status of stored facts at a time: the temporal model applied to the fact index.

Owns: :class:`Statuses` — a fact's status at an evaluation time (one at a time, and
for many slots at once over the columns), whether a fact is current, which slots
hold a current fact, when a fact became superseded, and the supersession chains of
every slot. The definitions (when a fact begins and ends, rules 1 to 4 of a status)
are :mod:`holomem.projections.temporal`'s; the links are
:mod:`holomem.projections.supersession`'s. Part of the fact index
(:mod:`holomem.projections.facts`), which lends the columns it reads (which fact
each slot holds, when it begins, when it ends: grown in place, never replaced) and
its lookup of a stored fact's slot. Imports numpy, the catalog and those two parts.
Holds no state of its own: the arrays it keeps between calls are the link slots'.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from holomem.projections.base import GrowArray
from holomem.projections.catalog import Catalog
from holomem.projections.supersession import Supersession
from holomem.projections.temporal import CURRENT, NOT_YET_VALID, STATUSES, UNSET, opt, status_at


class Statuses:
    """Statuses read from the columns ``is_fact``, ``eff`` and ``end`` (see
    :class:`~holomem.projections.facts.FactIndex`) and the ``links``; ``stored(fid)``
    is the slot of a stored fact (-1: none)."""

    def __init__(self, catalog: Catalog, is_fact: GrowArray, eff: GrowArray, end: GrowArray,
                 links: Supersession, stored: Callable[[str], int]) -> None:
        self.catalog = catalog
        self._is_fact = is_fact
        self._eff = eff
        self._end = end
        self._links = links
        self._stored = stored

    def current(self, fact_id: str, at: int) -> bool:
        """Whether the stored fact ``fact_id`` is current at ``at`` (every link known):
        :meth:`status` is ``current``, read straight from the columns and its
        successors' starts."""
        slot = self._stored(fact_id)
        return slot >= 0 and self.current_in(slot, fact_id, at)

    def current_in(self, slot: int, fact_id: str, at: int) -> bool:
        """:meth:`current` of the stored fact ``fact_id``, which is in ``slot``."""
        eff = self._eff
        if at < eff.item(slot):
            return False
        links = self._links.superseded_by.get(fact_id)
        if links is not None:
            for link in links:  # successor_starts, inline: a stored one has begun
                s = self._stored(link.other)
                if s >= 0 and eff.item(s) <= at:
                    return False
        end = self._end.item(slot)
        return bool(end == UNSET or at < end)

    def status(self, slot: int, at: int, known_at: int | None = None) -> str:
        """The status of the fact in ``slot`` at ``at`` (see
        :mod:`holomem.projections.temporal`)."""
        if not self._is_fact.item(slot):
            return CURRENT  # a plain document: no time, no links
        eff = self._eff.item(slot)
        if at < eff:
            return NOT_YET_VALID  # (no need to look at its successors)
        fid = self.catalog.ids[slot]
        assert fid is not None
        return status_at(at, eff, opt(self._end.item(slot)), self.successor_starts(fid,
                                                                                     known_at))

    def statuses(self, slots: np.ndarray, at: int, facts: int, known_at: int | None = None
                 ) -> list[str]:
        """:meth:`status` of each of ``slots`` at once (the same answers); ``facts``:
        how many facts are stored."""
        return [STATUSES[c] for c in self.codes(slots, at, facts, known_at).tolist()]

    def codes(self, slots: np.ndarray, at: int, facts: int, known_at: int | None = None
              ) -> np.ndarray:
        """:meth:`status` of each of ``slots`` as its index in :data:`STATUSES`: the
        time rules over the columns, the links only for the facts that have successors.
        ``facts``: how many facts are stored."""
        is_fact = self._is_fact.view()[slots]
        eff = self._eff.view()[slots]
        end = self._end.view()[slots]
        began = is_fact & (eff <= at)
        codes: np.ndarray = np.where(is_fact & (eff > at), 3,
                                     np.where(began & (end != UNSET) & (end <= at), 2, 0))
        links = self._links
        table = links.superseded_by
        if table and known_at is None:
            first = links.link_slots.first_starts(
                self._is_fact.n, facts,
                lambda: self._is_fact.view() & self.catalog.alive.view(), self._eff.view(),
                links.pairs)
            if first is not None:  # (a stored successor has begun)
                codes[began & (first[slots] <= at)] = 1
                return codes
        if table:
            ids, slot_of, is_f, eff_of = (self.catalog.ids, self.catalog.slot,
                                          self._is_fact.view(), self._eff.view())
            listed = slots.tolist()
            for j in np.flatnonzero(began).tolist():
                fid = ids[listed[j]]
                links_of = table.get(fid) if fid is not None else None
                if links_of is None:
                    continue
                if known_at is not None:  # the links and facts known then (status())
                    if any(s <= at for s in self.successor_starts(fid, known_at)):
                        codes[j] = 1
                    continue
                for link in links_of:  # successor_starts without known_at, inline
                    s = slot_of(link.other)
                    if s >= 0 and is_f[s] and eff_of[s] <= at:
                        codes[j] = 1
                        break
        return codes

    def codes_then(self, slots: np.ndarray, at: int, known_at: int | None, bound: int,
                   seq: int) -> np.ndarray:
        """:meth:`codes` of ``slots`` (stored facts, each below ``bound``) as the store
        stood just after transaction ``seq``, when it held ``bound`` slots: each
        fact's successors are those it had then
        (:meth:`~holomem.projections.supersession.Supersession.successors_then`), so
        what was written or removed since changes no answer."""
        eff = self._eff.view()[slots]
        end = self._end.view()[slots]
        began = eff <= at
        codes: np.ndarray = np.where(eff > at, 3, np.where(began & (end != UNSET)
                                                           & (end <= at), 2, 0))
        links = self._links
        if not (links.superseded_by or links.departed):
            return codes
        ids, eff_of, listed = self.catalog.ids, self._eff.view(), slots.tolist()
        for j in np.flatnonzero(began).tolist():
            fid = ids[listed[j]]
            if fid is None or (fid not in links.superseded_by and fid not in links.departed):
                continue
            if any(eff_of[s] <= at for s in links.successors_then(fid, known_at, bound, seq)):
                codes[j] = 1
        return codes

    def successor_starts(self, fact_id: str, known_at: int | None = None) -> Iterator[int]:
        """When each stored successor of ``fact_id`` (known at ``known_at``) begins."""
        for succ in self._links.successors(fact_id, known_at):
            yield self._eff.item(self._stored(succ))

    def current_mask(self, at: int) -> np.ndarray:
        """Which slots hold a stored fact that is current at ``at`` (vectorised status)."""
        stored = self._is_fact.view() & self.catalog.alive.view()
        vto = self._end.view()
        eff = self._eff.view()
        mask: np.ndarray = stored & (eff <= at) & ((vto == UNSET) | (at < vto))
        succ, pred = self._links.link_slots.live(stored, self._links.pairs)
        mask[pred[eff[succ] <= at]] = False  # a stored successor has begun
        return mask

    def components(self, facts: int) -> np.ndarray:
        """A chain id per slot: slots joined by supersession share one (the smallest of
        them), any other slot is its own; ``facts``: how many facts are stored. Kept
        until the links or the facts change: the caller must not change it."""
        stored = self._is_fact.view() & self.catalog.alive.view()
        return self._links.link_slots.chains(stored, facts, self._links.pairs)

    def superseded_since(self, slot: int, known_at: int | None = None) -> int | None:
        """When the fact in ``slot`` became superseded (earliest successor's start), or None."""
        fid = self.catalog.ids[slot]
        if fid is None:
            return None
        starts = [int(self._eff[self._stored(s)]) for s in self._links.successors(fid, known_at)]
        return min(starts) if starts else None
