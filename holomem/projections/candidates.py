"""Contradiction candidates kept between calls: the groups pairs come from, how many
later partners each fact has, and the best-scoring pairs (issue 16).

Owns: :class:`Candidates` — the groups of every stored fact
(:mod:`holomem.projections.groups`: its subject slot, each of its entities within its
namespace), each fact's number of *later partners* (facts in a later slot sharing at
least one group with it, each counted once however many groups they share), and the
best pairs under a caller's score. Imports numpy, :mod:`holomem.events` and the other
projections.

Kept up to date by what changed: once built, ``apply`` notes the entities of every
document written, and the next :meth:`Candidates.ensure` scores only the pairs of each
new fact with the facts before it and takes back those of each fact gone. It is built
on the first ``ensure`` (from the entity postings and the fact index), so a replay, a
checkpoint's restore and a store that never asks pay nothing; nothing here is
persisted (a restored or replayed state starts unbuilt).

Memory is linear in memberships: a fact's groups and a group's members are stored
once each, and at most :data:`CAPACITY` pairs are kept; a group's pairs never are.
The kept pairs are every pair that passes the scorer, is not joined by a supersession
chain and ranks before :attr:`floor` (the best pair ever dropped for room; None while
nothing was), in rank order (score descending, then slots ascending). A chain's pairs
are never scored: no answer holds them (the scan leaves them out too). Chains only
grow, except when a fact in one is removed; a removal that splits a chain builds the
candidates again (the pairs it parts were never scored).
"""

from __future__ import annotations

from collections.abc import Callable

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
        #: per slot below ``done`` (scored): a stored fact then; its later partners
        self.member = GrowArray(np.bool_)
        self.later = GrowArray(np.int64)
        self.done = 0
        #: the kept pairs (``pair_key``), in rank order, and their measures
        self.keys = np.zeros(0, dtype=np.int64)
        self.score = np.zeros(0)
        self.overlap = np.zeros(0)
        self.similarity = np.zeros(0)
        self.floor: tuple[float, int] | None = None
        #: the supersession chains (``FactIndex.components``) the pairs were scored under
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
    def ensure(self, scorer: Scorer, budget: int, block: int) -> bool:
        """Catch up with the store: build on first use, then take back the pairs of the
        facts gone and score those of the facts written since — at most about
        ``budget`` raw pairs per call, ``block`` at a time. True when every slot is
        scored (the answer can come from here)."""
        if not self.built:
            self._build()
        self.groups.add_rows(self._stored())
        removed = self._gone()
        chains = None
        if self.done < self.catalog.slots or removed:
            chains = self.facts.components()
            if self._split(chains):
                self.built = False
        if not self.built:  # too few kept pairs left, or a chain split: start again
            self._build()
            self.groups.add_rows(self._stored())
        if chains is not None:
            self.chains = chains
        self._add(scorer, budget, block)
        return self.done == self.catalog.slots

    def _split(self, chains: np.ndarray) -> bool:
        """Whether two stored facts that shared a chain when their pairs were scored
        no longer do (only a removal parts them)."""
        old = self.chains[: self.done]
        if not len(old):
            return False
        kept = np.flatnonzero(self.member.view() & self._stored()[: self.done])
        first = np.full(len(old), len(old), dtype=np.int64)  # per old chain: its first kept
        np.minimum.at(first, old[kept], kept)
        return bool((chains[kept] != chains[first[old[kept]]]).any())

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

    def _gone(self) -> bool:
        """Take back the pairs of every scored fact that is no longer stored; whether
        there was one."""
        done = self.done
        if not done:
            return False
        member = self.member.view()
        gone = np.flatnonzero(member & ~self._stored()[:done])
        if not len(gone):
            return False
        allow = np.zeros(self.catalog.slots, dtype=bool)
        allow[:done] = member
        later = self.later.view()
        for a, _b, _shared in self.groups.earlier_pairs(gone, allow, 1 << 18):
            later -= np.bincount(a, minlength=len(later))
        member[gone] = False
        dead = np.isin(self.keys >> 32, gone) | np.isin(self.keys & LOW, gone)
        if dead.any():
            self._take(~dead)
            if self.floor is not None and len(self.keys) < self.capacity // 2:
                self.built = False  # too few kept pairs left to answer from: rebuild
        return True

    def _add(self, scorer: Scorer, budget: int, block: int) -> None:
        """Score the pairs of the facts in slots ``done``.. with the facts before them."""
        start, stop = self.done, self.catalog.slots
        if start == stop:
            return
        stored = self._stored()
        new = np.flatnonzero(stored[start:stop]) + start
        t_of, g_of = self.groups.rows(new)
        # Raw pairs of each new fact: its groups' members before it (by group sizes).
        sizes = self.groups.group_size.view()
        order = np.lexsort((t_of, g_of))
        g_sorted = g_of[order]
        run = np.flatnonzero(np.concatenate(([True], g_sorted[1:] != g_sorted[:-1])))
        rank = np.arange(len(order)) - np.repeat(run, np.diff(np.append(run, len(order))))
        work = np.zeros(len(order), dtype=np.int64)
        work[order] = sizes[g_sorted] + rank
        per_fact = np.bincount(np.searchsorted(new, t_of), weights=work, minlength=len(new))
        take = max(1, int(np.searchsorted(np.cumsum(per_fact), budget, side="right")))
        end = int(new[take - 1]) + 1 if take < len(new) else stop
        new = new[:take]
        inside = t_of < end
        # Members first: a new fact pairs with the new facts before it too.
        self.groups.add_members(t_of[inside], g_of[inside])
        self.member.extend(np.isin(np.arange(start, end), new))
        self.later.extend(np.zeros(end - start, dtype=np.int64))
        self.done = end
        later = self.later.view()
        chains = self.chains
        for a, b, shared in self.groups.earlier_pairs(new, stored, block):
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
        return (self.groups.memory_bytes() + self.member.nbytes + self.later.nbytes
                + 32 * len(self.keys))
