"""Contradiction pairs: what a candidate pair is, how it scores, and every candidate pair
of the current facts compared a block at a time.

Owns: the thresholds and weights of a contradiction, :func:`measure` (a pair's overlap,
content similarity and score), :class:`Page` (one page's answer, by slots), and
:func:`scan` — candidate pairs enumerated from the groups the current facts share,
scored on their HRR content vectors, in pair order, ``max_pairs`` at a time. The scan
is the straightforward answer: it holds nothing between calls, and
:mod:`holomem.api.memory.holographic.kept` must answer exactly as it does. Imports the
engine's view and the HRR projection.

Bounded work: at most about ``budget`` raw candidate pairs are held at once, instead
of building every pair of the store before cutting a page.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from holomem.api.engine import View
from holomem.api.memory.holographic.algebra import BLOCK
from holomem.projections import hrr

#: Contradiction: subject/entity overlap at least this, and content similarity within
#: [MIN_CONTENT_SIMILARITY, MAX_CONTENT_SIMILARITY]: the same frame ("Alice lives in
#: ..."), not the same statement.
MIN_OVERLAP = 0.6
MIN_CONTENT_SIMILARITY = 0.2
MAX_CONTENT_SIMILARITY = 0.9
ENTITY_ONLY_WEIGHT = 0.5


class Page(NamedTuple):
    """One page: the best pairs (a, b, score, overlap, similarity) by slots, best first;
    the pairs compared; whether pairs are left; the last pair compared (a, b)."""

    ranked: list[tuple[int, int, float, float, float]]
    compared: int
    more: bool
    last: tuple[int, int]


def measure(a: np.ndarray, b: np.ndarray, shared: np.ndarray, subj: np.ndarray,
            counts: np.ndarray, content: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(passes, score, overlap, content similarity) of the pairs (a, b) that share
    ``shared`` entities; ``counts`` is each slot's number of entities. ``passes``
    leaves out only what the pair itself says (not a shared supersession chain)."""
    # Overlap: 1 for one subject slot, else the Jaccard of the entity sets.
    union = counts[a] + counts[b] - shared
    overlap = np.where(union > 0, shared / np.maximum(union, 1), 0.0)
    overlap = np.where((subj[a] >= 0) & (subj[a] == subj[b]), 1.0, np.minimum(overlap, 0.999))
    x = np.bitwise_xor(content[a].view(np.uint64), content[b].view(np.uint64))
    sim = 1.0 - 2.0 * np.bitwise_count(x).sum(axis=1) / hrr.D
    passes = ((overlap >= MIN_OVERLAP) & (sim >= MIN_CONTENT_SIMILARITY)
              & (sim <= MAX_CONTENT_SIMILARITY))
    # One subject is a single-valued slot (docs/contract.md §3): two current facts in it
    # contradict by definition. Sharing only entities is weaker evidence (one can
    # like two things), so such pairs weigh half.
    weight = np.where(overlap >= 1.0, 1.0, ENTITY_ONLY_WEIGHT * overlap)
    score = weight * 4.0 * sim * (1.0 - sim)
    return passes, score, overlap, sim


class _Groups:
    """The groups candidate pairs come from — the current facts of one subject, and
    those of one entity — laid out flat, with every membership sorted by slot.

    A pair (a, b), a < b, is a candidate when a and b share a group; it is found
    from a's membership in that group, among the group's members after a. Memory
    is linear in the number of memberships (the entity posting's size).
    """

    def __init__(self, groups: list[np.ndarray], is_entity: list[bool]) -> None:
        groups, flags = ([g for g in groups if len(g) > 1],
                         [f for g, f in zip(groups, is_entity, strict=True) if len(g) > 1])
        lengths = np.array([len(g) for g in groups], dtype=np.int64)
        self.flat = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
        gid = np.repeat(np.arange(len(groups)), lengths)
        start = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) \
            if len(groups) else np.zeros(0, dtype=np.int64)
        end = start + lengths
        pos = np.arange(len(self.flat))
        by_slot = np.argsort(self.flat, kind="stable")
        #: per membership, sorted by slot: the slot, where its partners begin and end
        #: in ``flat``, and whether the group is an entity's (not a subject's).
        self.slot = self.flat[by_slot]
        self.begin = pos[by_slot] + 1
        self.end = end[gid][by_slot] if len(groups) else np.zeros(0, dtype=np.int64)
        self.entity = np.array(flags, dtype=bool)[gid][by_slot] if len(groups) \
            else np.zeros(0, dtype=bool)
        self.raw = np.cumsum(self.end - self.begin)  # raw partners up to each membership

    def blocks(self, from_slot: int, budget: int) -> list[tuple[int, int]]:
        """Membership ranges [i, j) covering slots >= from_slot, whole slots each, of
        about ``budget`` raw pairs (more only when one slot alone has more)."""
        out = []
        i = int(np.searchsorted(self.slot, from_slot, side="left"))
        n = len(self.slot)
        while i < n:
            before = int(self.raw[i - 1]) if i else 0
            j = int(np.searchsorted(self.raw, before + budget, side="right"))
            j = max(j, i + 1)
            j = int(np.searchsorted(self.slot, self.slot[j - 1], side="right"))
            out.append((i, j))
            i = j
        return out

    def pairs(self, i: int, j: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys a * n + b ascending, shared entities) of the pairs from memberships [i, j)."""
        lens = self.end[i:j] - self.begin[i:j]
        total = int(lens.sum())
        if not total:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        offsets = np.cumsum(lens) - lens
        idx = np.arange(total) + np.repeat(self.begin[i:j] - offsets, lens)
        keys = np.repeat(self.slot[i:j], lens) * n + self.flat[idx]
        ent = np.repeat(self.entity[i:j], lens).astype(np.int64)
        order = np.argsort(keys, kind="stable")
        keys, ent = keys[order], ent[order]
        first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        return keys[first], np.add.reduceat(ent, first)


def _by_namespace(slots: np.ndarray, of_ns: np.ndarray) -> list[np.ndarray]:
    """``slots`` (ascending) split into one ascending group per namespace."""
    if len(slots) < 2:
        return [slots]
    ns = of_ns[slots]
    if (ns == ns[0]).all():
        return [slots]
    order = np.argsort(ns, kind="stable")
    cuts = np.flatnonzero(np.diff(ns[order])) + 1
    return list(np.split(slots[order], cuts))


def scan(view: View, current: np.ndarray, k: int, max_pairs: int,
         resume: tuple[int, int] | None, budget: int) -> Page:
    """Every candidate pair of the ``current`` facts after ``resume`` (a, b), in pair
    order, ``max_pairs`` at most: the ``k`` best of them, and how many were compared."""
    facts = view.facts
    index = view.hrr()
    # Candidate pairs share a subject slot or an entity.
    subj = facts.subject.view()
    cur = np.flatnonzero(current)
    with_subject = cur[subj[cur] >= 0]
    order = with_subject[np.argsort(subj[with_subject], kind="stable")]
    cuts = np.flatnonzero(np.diff(subj[order])) + 1
    groups: list[np.ndarray] = list(np.split(order, cuts)) if len(order) else []
    flags = [False] * len(groups)
    counts = np.zeros(view.catalog.slots, dtype=np.int64)
    of_ns = facts.namespaces.of_slot.view()
    for name in view.entities.names():
        g = view.entities.slots(name)
        counts[g] += 1
        for part in _by_namespace(g[current[g]], of_ns):
            groups.append(part)
            flags.append(True)
    grouped = _Groups(groups, flags)
    n = max(1, view.catalog.slots)
    last = resume[0] * n + resume[1] if resume is not None else -1
    content = index.content.view()
    comp = facts.components()
    best = _Best(k)
    compared = 0
    more = False
    for i, j in grouped.blocks(resume[0] if resume is not None else 0, budget):
        keys, shared = grouped.pairs(i, j, n)
        if last >= 0:
            after = keys > last
            keys, shared = keys[after], shared[after]
        if not len(keys):
            continue
        if compared == max_pairs:
            more = True  # a pair is left for the next page
            break
        take = min(len(keys), max_pairs - compared)
        if take < len(keys):
            more = True
        keys, shared = keys[:take], shared[:take]
        for s in range(0, len(keys), BLOCK):
            part, common = keys[s : s + BLOCK], shared[s : s + BLOCK]
            a, b = part // n, part % n
            passes, score, overlap, sim = measure(a, b, common, subj, counts, content)
            keep = passes & (comp[a] != comp[b])
            best.add(part[keep], score[keep], overlap[keep], sim[keep])
        compared += take
        last = int(keys[-1])
        if more:
            break
    ranked = [(key // n, key % n, s, o, c) for key, s, o, c in best.ranked()]
    return Page(ranked, compared, more, (last // n, last % n))


class _Best:
    """The k best pairs seen so far: score descending, then pair order."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.keys = np.zeros(0, dtype=np.int64)
        self.cols = [np.zeros(0) for _ in range(3)]  # score, overlap, similarity

    def add(self, keys: np.ndarray, score: np.ndarray, overlap: np.ndarray,
            sim: np.ndarray) -> None:
        keys = np.concatenate((self.keys, keys))
        cols = [np.concatenate((old, new)) for old, new in zip(self.cols, (score, overlap, sim),
                                                                strict=True)]
        top = np.lexsort((keys, -cols[0]))[: self.k]
        self.keys, self.cols = keys[top], [c[top] for c in cols]

    def ranked(self) -> list[tuple[int, float, float, float]]:
        return [(int(key), float(s), float(o), float(c)) for key, s, o, c in
                zip(self.keys, *self.cols, strict=True)]
