"""Contradiction candidates kept between calls: the groups pairs come from, how many
later partners each current fact has, and the best-scoring pairs (issue 16).

Owns: :class:`Candidates` — the groups of every stored fact
(:mod:`holomem.projections.groups`: its subject slot, each of its entities within its
namespace), the *active* facts (those current at the time of the last catch-up: the
only ones contradict can answer with, docs/contract.md §4), each active fact's number
of *later partners* (active facts in a later slot sharing at least one group with it,
each counted once however many groups they share), and the best pairs of active facts
under a caller's score. Imports numpy, :mod:`holomem.events` and the other projections.

Kept up to date by what changed: once built, ``apply`` notes the entities of every
document written, and the next :meth:`Candidates.ensure`, given the facts current at
its call's time, takes back the pairs of each active fact that is no longer current
(superseded, expired, forgotten, or not begun at a clock moved back) and scores only
the pairs of each current fact that was not active (written since, or current again:
its successor forgotten or not begun yet, its end not reached at a clock moved back)
with the active facts. It is built on the first ``ensure`` (from the entity postings
and the fact index), so a replay, a checkpoint's restore and a store that never asks
pay nothing; nothing here is persisted (a restored or replayed state starts unbuilt).

Memory is linear in memberships: a fact's groups and a group's members are stored
once each (superseded facts' too, so that they can come back), and at most
:data:`CAPACITY` pairs are kept; a group's pairs never are. The kept pairs are every
pair of active facts that passes the scorer, was not joined by a supersession chain
when scored and ranks before :attr:`floor` (the best pair ever dropped for room; None
while nothing was), in rank order (score descending, then slots ascending). A chain's
pairs are never scored: no answer holds them (the scan leaves them out too). Chains
only grow, except when a fact in one is removed; a removal that parts two active
facts of one chain has their pair scored then.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections.base import Change, GrowArray
from holomem.projections.catalog import Catalog
from holomem.projections.entities import Entities
from holomem.projections.facts import FactIndex
from holomem.projections.groups import LOW, Groups, pair_key

#: The most pairs kept.
CAPACITY = 1 << 14
#: (earlier slots, later slots, entity groups shared) of some pairs -> (passes, score,
#: overlap, content similarity) of each.
Scorer = Callable[[np.ndarray, np.ndarray, np.ndarray],
                  tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
#: The raw pairs taken back at once when facts stop being current.
TAKE_BACK_BLOCK = 1 << 18

__all__ = ["CAPACITY", "Candidates", "Scorer", "pair_key"]


class Candidates:
    def __init__(self, catalog: Catalog, facts: FactIndex, entities: Entities,
                 capacity: int | None = None) -> None:
        self.catalog, self.facts, self.entities = catalog, facts, entities
        self.capacity = CAPACITY if capacity is None else capacity
        self._clear()

    def _clear(self) -> None:
        self.built = False
        self.groups = Groups(self.facts)
        #: per slot with a row: whether it is active (current at the last catch-up:
        #: its pairs are counted and kept); an active fact's later partners
        self.active = GrowArray(np.bool_)
        self.later = GrowArray(np.int64)
        #: the kept pairs (``pair_key``), in rank order, and their measures
        self.keys = np.zeros(0, dtype=np.int64)
        self.score = np.zeros(0)
        self.overlap = np.zeros(0)
        self.similarity = np.zeros(0)
        self.floor: tuple[float, int] | None = None
        #: the supersession chains (``FactIndex.components``) the pairs were scored
        #: under: two active facts whose pair was not scored share one
        self.chains = np.zeros(0, dtype=np.int64)

    # -- events -------------------------------------------------------------------------
    def apply(self, event: Event, change: Change) -> None:
        if self.built and change.new >= 0 and isinstance(event, (DocumentAdded,
                                                                  DocumentReplaced)):
            self.groups.note(change.new, event.entities)

    def note(self, slot: int, entities: tuple[str, ...]) -> None:
        """The entities of the document just written in ``slot`` (noted once built)."""
        if self.built:
            self.groups.note(slot, entities)

    # -- catching up --------------------------------------------------------------------
    def ensure(self, current: np.ndarray, scorer: Scorer, budget: int, block: int) -> bool:
        """Catch up with the facts ``current`` marks (the stored facts current at the
        call's time, one flag per slot): build on first use, then take back the pairs
        of the active facts not among them and score those of the ones not active yet
        — at most about ``budget`` raw pairs per call, ``block`` at a time. True when
        the active facts are exactly ``current`` (the answer can come from here)."""
        if not self.built:
            self._build()
        self._grow()
        chains = self.facts.components()  # kept by the fact index while nothing changes
        if chains is not self.chains:
            self._part(chains, current, scorer, block)
        self.chains = chains
        if not self._leave(np.flatnonzero(self.active.view() & ~current)):
            self._restart()  # too few kept pairs left to answer from
            self.chains = chains
        return self._join(np.flatnonzero(current & ~self.active.view()), scorer, budget, block)

    def _restart(self) -> None:
        """Start again: every fact's groups, none active."""
        self._build()
        self._grow()

    def _grow(self) -> None:
        """Rows for the slots written since, none of them active yet."""
        self.groups.add_rows(self._stored())
        new = self.catalog.slots - len(self.active)
        self.active.extend(np.zeros(new, dtype=np.bool_))
        self.later.extend(np.zeros(new, dtype=np.int64))

    def _part(self, chains: np.ndarray, current: np.ndarray, scorer: Scorer,
              block: int) -> None:
        """Score the pairs of active facts that stay current, shared a chain when they
        were scored (so their pair was not) and no longer do: only a removal parts a
        chain (the fact that joined two branches, say)."""
        old = self.chains
        if not len(old):
            return
        stay = np.flatnonzero(self.active.view()[: len(old)] & current[: len(old)])
        first = np.full(len(old), len(old), dtype=np.int64)  # per old chain: its first
        np.minimum.at(first, old[stay], stay)
        moved = chains[stay] != chains[first[old[stay]]]
        if not moved.any():
            return
        parted = np.zeros(len(old) + 1, dtype=bool)
        parted[old[stay[moved]]] = True
        inside = stay[parted[old[stay]]]  # the staying facts of the chains parted
        allow = np.zeros(len(self.active), dtype=bool)
        allow[inside] = True
        for a, b, shared in self.groups.earlier_pairs(inside, allow, block):
            new = (old[a] == old[b]) & (chains[a] != chains[b])
            a, b, shared = a[new], b[new], shared[new]
            passes, score, overlap, sim = scorer(a, b, shared)
            keys = pair_key(a[passes], b[passes])
            fresh = ~np.isin(keys, self.keys)  # kept already: scored apart, joined since
            self.offer(keys[fresh], score[passes][fresh], overlap[passes][fresh],
                       sim[passes][fresh])

    def _stored(self) -> np.ndarray:
        out: np.ndarray = self.catalog.alive.view() & self.facts.is_fact.view()
        return out

    def _build(self) -> None:
        self._clear()
        self.built = True
        stored = self._stored()
        for name, posting in self.entities.postings():
            slots = posting[stored[posting]]
            if len(slots):
                self.groups.note_many(slots, name)

    def _leave(self, gone: np.ndarray) -> bool:
        """Take back the pairs of the active facts ``gone``; False when too few kept
        pairs are left to answer from (some were dropped for room)."""
        if not len(gone):
            return True
        active = self.active.view()
        later = self.later.view()
        for a, _b, _shared in self.groups.earlier_pairs(gone, active, TAKE_BACK_BLOCK):
            later -= np.bincount(a, minlength=len(later))
        active[gone] = False
        dead = np.isin(self.keys >> 32, gone) | np.isin(self.keys & LOW, gone)
        if dead.any():
            self._take(~dead)
            if self.floor is not None and len(self.keys) < self.capacity // 2:
                return False
        return True

    def _join(self, new: np.ndarray, scorer: Scorer, budget: int, block: int) -> bool:
        """Make the facts ``new`` (ascending) active, as many as about ``budget`` raw
        pairs allow: count and score their pairs with the active facts and each other.
        Whether every one of them joined."""
        if not len(new):
            return True
        t_of, g_of = self.groups.rows(new)
        # The work of each: the members of its groups (an upper bound of its pairs).
        work = self.groups.group_size.view()[g_of]
        per_fact = np.bincount(np.searchsorted(new, t_of), weights=work, minlength=len(new))
        take = max(1, int(np.searchsorted(np.cumsum(per_fact), budget, side="right")))
        joining, everyone = new[:take], take == len(new)
        active, later = self.active.view(), self.later.view()
        active[joining] = True
        later[joining] = 0
        # Each pair once: by its later fact when that one joins now, else by its
        # earlier one (joining now, with a partner that was active already).
        self._score(self.groups.earlier_pairs(joining, active, block), scorer)
        before = active.copy()
        before[joining] = False
        if before.any():
            self._score(self.groups.later_pairs(joining, before, block), scorer)
        return everyone

    def _score(self, pairs: Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]],
               scorer: Scorer) -> None:
        later, chains = self.later.view(), self.chains
        for a, b, shared in pairs:
            later += np.bincount(a, minlength=len(later))
            apart = chains[a] != chains[b]
            a, b, shared = a[apart], b[apart], shared[apart]
            passes, score, overlap, sim = scorer(a, b, shared)
            self.offer(pair_key(a[passes], b[passes]), score[passes], overlap[passes],
                       sim[passes])

    # -- kept pairs ---------------------------------------------------------------------
    def _take(self, which: np.ndarray) -> None:
        self.keys, self.score = self.keys[which], self.score[which]
        self.overlap, self.similarity = self.overlap[which], self.similarity[which]

    def offer(self, keys: np.ndarray, score: np.ndarray, overlap: np.ndarray,
              sim: np.ndarray) -> None:
        """Keep those of these passing pairs (distinct from the kept ones) that rank
        among the best :attr:`capacity`, in rank order."""
        if self.floor is not None:  # only what ranks before the best pair dropped
            fs, fk = self.floor
            before = (score > fs) | ((score == fs) & (keys < fk))
            keys, score, overlap, sim = keys[before], score[before], overlap[before], sim[before]
        if not len(keys):
            return
        if 64 * len(keys) < len(self.keys):  # a few: insert them where they rank
            new = np.lexsort((keys, -score))
            keys, score, overlap, sim = keys[new], score[new], overlap[new], sim[new]
            neg = -self.score
            at = np.searchsorted(neg, -score, side="left")
            ties = np.searchsorted(neg, -score, side="right")
            for i in np.flatnonzero(ties > at).tolist():
                lo, hi = int(at[i]), int(ties[i])
                at[i] = lo + int(np.searchsorted(self.keys[lo:hi], keys[i]))
            self.keys = np.insert(self.keys, at, keys)
            self.score = np.insert(self.score, at, score)
            self.overlap = np.insert(self.overlap, at, overlap)
            self.similarity = np.insert(self.similarity, at, sim)
            order = np.arange(len(self.keys))
        else:
            self.keys = np.concatenate((self.keys, keys))
            self.score = np.concatenate((self.score, score))
            self.overlap = np.concatenate((self.overlap, overlap))
            self.similarity = np.concatenate((self.similarity, sim))
            order = np.lexsort((self.keys, -self.score))
        if len(order) > self.capacity:
            cut = int(order[self.capacity])
            self.floor = (float(self.score[cut]), int(self.keys[cut]))
            order = order[: self.capacity]
        self._take(order)

    def memory_bytes(self) -> int:
        return (self.groups.memory_bytes() + self.active.nbytes + self.later.nbytes
                + 32 * len(self.keys))
