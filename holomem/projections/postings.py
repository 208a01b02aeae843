"""Posting segments: the compressed sparse rows BM25 reads, and how they are merged.

Owns: :class:`Segment` (the postings of a run of consecutive slots, by term) and the
merge that folds newer postings into a segment while dropping vacated slots.
Imports numpy, the impact groups (:mod:`holomem.projections.impact`) and the base;
:mod:`holomem.projections.bm25` decides when to merge.

A segment holds, for every term id below ``terms``, the slots containing the term
(ascending) and the term's frequency in each, laid out term after term
(``indptr[t]:indptr[t + 1]``): 6 bytes per posting, 8 per term. A long list's
:class:`~holomem.projections.impact.Impact` (its documents grouped by frequency and
length, what pruned queries start from) and dense frequency column are built on a
query's first use of them and kept with the segment, which never changes: 4 bytes per
posting of the lists queried, and one or two per slot for the few terms found in an
eighth of the documents or more.

Merging is linear in the postings and never sorts the segment's: every slot of the
newer postings is above every slot of the segment, so within a term the segment's
postings come first, then the newer ones. Only the newer postings' places are
computed; the segment's postings, which keep their order, fill the places left in one
sequential copy (a place computed for each of them cost four times as much). It works
in chunks of ``CHUNK`` postings, so its temporaries stay a few megabytes whatever the
segment's size (a merge of a million documents' postings once needed five times
their size).
"""

from __future__ import annotations

import numpy as np

from holomem.projections import impact as grouping
from holomem.projections.base import compaction_check
from holomem.projections.impact import Impact

#: Postings moved per step of a merge (bounds the merge's temporaries).
CHUNK = 1 << 20
#: Old postings copied per step of :func:`compacted`: small enough that each step's
#: temporaries are the last one's memory again rather than pages mapped afresh (a
#: purge at 100,000 facts spent 0.11 s against 0.045 s with steps of 1 << 18).
COMPACT_CHUNK = 1 << 18

_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_U16 = np.zeros(0, dtype=np.uint16)
_EMPTY_I64 = np.zeros(0, dtype=np.int64)


class Segment:
    """Postings of the slots ``[lo, hi)`` by term (vacated slots may linger)."""

    __slots__ = ("_columns", "_impacts", "docs", "hi", "indptr", "lo", "slot", "tf")

    def __init__(self, lo: int, hi: int, indptr: np.ndarray, slot: np.ndarray, tf: np.ndarray,
                 docs: int) -> None:
        self.lo, self.hi = lo, hi
        self.indptr = indptr  # int64, terms + 1
        self.slot = slot  # int32
        self.tf = tf  # uint16
        self.docs = docs  # live slots in [lo, hi) when it was built
        # Built on first use, per term (a dict's assignment is atomic: two readers
        # building the same entry at once only build it twice).
        self._impacts: dict[int, Impact] = {}
        self._columns: dict[int, np.ndarray | None] = {}

    @property
    def terms(self) -> int:
        return len(self.indptr) - 1

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tfs) of term ``tid`` — views, not copies."""
        if tid >= self.terms:
            return _EMPTY_I32, _EMPTY_U16
        lo, hi = int(self.indptr[tid]), int(self.indptr[tid + 1])
        return self.slot[lo:hi], self.tf[lo:hi]

    def count(self, tid: int) -> int:
        return int(self.indptr[tid + 1] - self.indptr[tid]) if tid < self.terms else 0

    def impact(self, tid: int, doclen: np.ndarray) -> Impact | None:
        """Term ``tid``'s postings grouped by frequency and document length (None for
        a list shorter than ``GROUPED_MIN``); ``doclen``: every slot's length."""
        got = self._impacts.get(tid)
        if got is None:
            slots, tfs = self.postings(tid)
            if len(slots) < grouping.GROUPED_MIN:
                return None
            got = self._impacts[tid] = grouping.group(slots, tfs, doclen[slots])
        return got

    def column(self, tid: int) -> np.ndarray | None:
        """Term ``tid``'s frequency in each slot ``lo ..`` of the segment, for a term in
        at least one slot in ``DENSE`` (None otherwise)."""
        if tid in self._columns:
            return self._columns[tid]
        slots, tfs = self.postings(tid)
        span = self.hi - self.lo
        got = (grouping.column(slots, tfs, self.lo, span)
               if len(slots) >= grouping.GROUPED_MIN and len(slots) * grouping.DENSE >= span
               else None)
        self._columns[tid] = got
        return got

    def triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(term, slot, tf) of every posting, sorted by term then slot."""
        term = np.repeat(np.arange(self.terms, dtype=np.int32), np.diff(self.indptr))
        return term, self.slot, self.tf

    @property
    def nbytes(self) -> int:
        built = sum(i.nbytes for i in list(self._impacts.values()))
        built += sum(c.nbytes for c in list(self._columns.values()) if c is not None)
        return int(self.indptr.nbytes + self.slot.nbytes + self.tf.nbytes + built)


def tokens_to_postings(terms: np.ndarray, lengths: np.ndarray, first_slot: int,
                       n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(term, slot, tf) of documents given as their tokens' term ids, back to back
    (document i is slot ``first_slot + i`` and holds ``lengths[i]`` tokens), sorted
    by term then slot."""
    slots = np.repeat(np.arange(first_slot, first_slot + len(lengths), dtype=np.int32), lengths)
    # A stable sort keeps slot order within a term; on 16-bit keys it is a radix sort.
    keys = terms.astype(np.uint16) if n_terms <= 1 << 16 else terms
    order = np.argsort(keys, kind="stable")
    dt, ds = terms[order], slots[order]
    del order, keys, slots
    if not len(dt):
        return _EMPTY_I32, _EMPTY_I32, _EMPTY_U16
    edge = np.empty(len(dt), dtype=bool)
    edge[0] = True
    np.not_equal(dt[1:], dt[:-1], out=edge[1:])
    edge[1:] |= ds[1:] != ds[:-1]
    starts = np.flatnonzero(edge)
    del edge
    tf = np.diff(np.append(starts, len(dt))).astype(np.uint16)
    return dt[starts], ds[starts], tf


def merge(seg: Segment | None, newer: list[tuple[np.ndarray, np.ndarray, np.ndarray]],
          n_terms: int, alive: np.ndarray, lo: int, hi: int) -> Segment:
    """A segment of the slots ``[lo, hi)``: ``seg``'s postings, then each of ``newer``
    (term, slot, tf) groups', in order — each sorted by term then slot, each group's
    slots above the previous one's — without the postings of vacated slots."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for term, slot, tf in newer:
        keep = alive[slot]
        if not keep.all():
            term, slot, tf = term[keep], slot[keep], tf[keep]
        parts.append((term, slot, tf))
    old_ptr = seg.indptr if seg is not None else np.zeros(1, dtype=np.int64)
    old_slot = seg.slot if seg is not None else _EMPTY_I32
    old_tf = seg.tf if seg is not None else _EMPTY_U16
    b_cnt = np.zeros(n_terms, dtype=np.int64)
    b_cnt[: len(old_ptr) - 1] = np.diff(old_ptr)
    dead = _EMPTY_I64
    # (Whether any slot of the segment was vacated is a pass over its slots, not
    # over its postings.)
    if seg is not None and len(old_slot) and not alive[seg.lo : seg.hi].all():
        dead = np.flatnonzero(~alive[old_slot])
        if len(dead):
            b_cnt -= np.bincount(np.searchsorted(old_ptr, dead, side="right") - 1,
                                 minlength=n_terms)
    counts = [np.bincount(term, minlength=n_terms) for term, _, _ in parts]
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(b_cnt + sum(counts, np.zeros(n_terms, dtype=np.int64)), out=indptr[1:])
    total = int(indptr[-1])
    # Where each newer posting goes: after the segment's surviving postings of its
    # term and those of the groups before it (ascending within a group). Only these
    # places are computed, a chunk at a time: the segment's survivors fill the others
    # in order (they keep their order, and each comes before the newer postings of
    # its term).
    filled = b_cnt
    places: list[np.ndarray] = []
    for (term, _, _), cnt in zip(parts, counts, strict=True):
        before = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(cnt, out=before[1:])
        pos = np.empty(len(term), dtype=np.int64)
        for a in range(0, len(term), CHUNK):
            t = term[a : a + CHUNK]
            pos[a : a + len(t)] = indptr[t] + filled[t] + (np.arange(a, a + len(t))
                                                           - before[t])
        places.append(pos)
        filled = filled + cnt
    slots = np.empty(total, dtype=np.int32)
    tfs = np.empty(total, dtype=np.uint16)
    # Survivor number k is the segment's posting k + (dead postings up to it):
    # searchsorted over each dead posting's place less the dead ones before it.
    lifted = dead - np.arange(len(dead))
    at = taken = 0  # the segment's next posting, and survivors placed so far
    bounds = np.arange(0, total + CHUNK, CHUNK)
    cuts = [np.searchsorted(pos, bounds).tolist() for pos in places]
    for c, start in enumerate(range(0, total, CHUNK)):
        stop = min(total, start + CHUNK)
        out_slot, out_tf = slots[start:stop], tfs[start:stop]
        # Each group's postings placed in [start, stop): a range of it.
        here = [(pos[cut[c] : cut[c + 1]] - start, slot[cut[c] : cut[c + 1]],
                 tf[cut[c] : cut[c + 1]])
                for pos, cut, (_, slot, tf) in zip(places, cuts, parts, strict=True)
                if cut[c] < cut[c + 1]]
        take = (stop - start) - sum(len(h[0]) for h in here)
        if take:
            if len(dead):
                last = taken + take - 1
                end = last + int(np.searchsorted(lifted, last, side="right")) + 1
                keep = alive[old_slot[at:end]]
                src_slot, src_tf = old_slot[at:end][keep], old_tf[at:end][keep]
            else:
                end = at + take
                src_slot, src_tf = old_slot[at:end], old_tf[at:end]
            at, taken = end, taken + take
            if not here:
                out_slot[:] = src_slot
                out_tf[:] = src_tf
            else:
                hole = np.ones(stop - start, dtype=bool)
                for offsets, _, _ in here:
                    hole[offsets] = False
                out_slot[hole] = src_slot
                out_tf[hole] = src_tf
        for offsets, slot, tf in here:
            out_slot[offsets] = slot
            out_tf[offsets] = tf
    docs = int(alive[lo:hi].sum())
    return Segment(lo, hi, indptr, slots, tfs, docs)



def compacted(segments: list[Segment], delta: tuple[np.ndarray, np.ndarray, np.ndarray],
              new_slot: np.ndarray, new_term: np.ndarray, n_terms: int,
              n_docs: int) -> Segment:
    """One segment of the postings of ``segments`` and then of the ``delta`` triples
    (each sorted by term then slot, each one's slots above the previous one's), every
    slot renumbered by ``new_slot`` (-1: dropped) and every term by ``new_term``: the
    segment of ``n_docs`` documents that a replay of a compacted journal builds, whose
    slots are the kept ones in order and whose terms are numbered anew.

    Both renumberings keep the order of what they keep (ascending slots stay
    ascending); terms change places. So a new term's row is its old term's postings in
    each part, in part order, less the dropped slots': it is filled by copying those
    runs, a group of rows at a time (no sort, no pass over every posting to count them:
    the counts are the old ones less the dropped postings'). The temporaries stay about
    ``COMPACT_CHUNK`` postings whatever the size.
    """
    n_old = len(new_term)
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (ptr, slots, tfs)
    for seg in segments:
        # (a segment built before later terms existed has no row for them)
        ptr = np.full(n_old + 1, seg.indptr[-1], dtype=np.int64)
        ptr[: len(seg.indptr)] = seg.indptr
        parts.append((ptr, seg.slot, seg.tf))
    term, slot, tf = delta
    if len(term):
        ptr = np.zeros(n_old + 1, dtype=np.int64)
        np.cumsum(np.bincount(term, minlength=n_old), out=ptr[1:])
        parts.append((ptr, slot, tf))
    known = np.flatnonzero(new_term >= 0)
    old_of = np.empty(n_terms, dtype=np.int64)  # each new term's old term
    old_of[new_term[known]] = known
    compaction_check(len(known) == n_terms,  # numbered 0 .. n_terms - 1 once each
                     "the kept terms are not numbered once each")
    raw, kept = [], []  # per part, each new term's postings: all of them, the kept ones
    for ptr, slots_p, _ in parts:
        dead = [np.flatnonzero(new_slot[slots_p[a : a + COMPACT_CHUNK]] < 0) + a
                for a in range(0, len(slots_p), COMPACT_CHUNK)]
        all_p = np.diff(ptr)
        kept_p = all_p.copy()
        gone = np.concatenate(dead) if dead else _EMPTY_I64
        if len(gone):
            kept_p -= np.bincount(np.searchsorted(ptr, gone, side="right") - 1,
                                  minlength=n_old)
        raw.append(all_p[old_of])
        kept.append(kept_p[old_of])
    counts = sum(kept, np.zeros(n_terms, dtype=np.int64))
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    out_slot = np.empty(int(indptr[-1]), dtype=np.int32)
    out_tf = np.empty(int(indptr[-1]), dtype=np.uint16)
    before = np.zeros(n_terms, dtype=np.int64)  # each row's postings from earlier parts
    for (ptr, slots_p, tfs_p), raw_p, kept_p in zip(parts, raw, kept, strict=True):
        ends = np.cumsum(raw_p)
        g0 = 0
        while g0 < n_terms:  # rows g0 .. g1 - 1: about COMPACT_CHUNK old postings
            done = int(ends[g0 - 1]) if g0 else 0
            g1 = max(g0 + 1, int(np.searchsorted(ends, done + COMPACT_CHUNK, side="right")))
            lens, keeps = raw_p[g0:g1], kept_p[g0:g1]
            if int(lens.sum()):
                src = _runs(ptr[old_of[g0:g1]], lens)
                renumbered = new_slot[slots_p[src]]
                keep = renumbered >= 0
                dst = _runs(indptr[g0:g1] + before[g0:g1], keeps)
                out_slot[dst] = renumbered[keep]
                out_tf[dst] = tfs_p[src[keep]]
            g0 = g1
        before += kept_p
    compaction_check(np.array_equal(before, counts),
                     "a term's postings were not filled exactly (one lost or placed twice)")
    return Segment(0, n_docs, indptr, out_slot, out_tf, n_docs)


def _runs(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The positions ``starts[i] .. starts[i] + lengths[i] - 1`` of each run, in order."""
    total = int(lengths.sum())
    out: np.ndarray = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths) + np.arange(
        total, dtype=np.int64)
    return out
