"""Long posting lists seen by impact: their documents grouped by (frequency, length).

Owns: :class:`Impact`, one posting list reordered into groups of documents that share a
term frequency and a document length (groups in frequency-descending, then
length-ascending order), and the dense frequency column of a list that covers a large
share of its segment. Imports numpy only. :class:`~holomem.projections.postings.Segment`
builds both on first use and keeps them (a segment never changes, nor does the length
of a slot's document); :mod:`holomem.projections.pruning` reads them.

Why groups: a term's BM25 contribution to a document depends on the document only
through the term's frequency in it and the document's length (``w * tf / (tf + k1 *
(1 - b + b * len / avglen))``), so every document of a group gets the same contribution,
whatever the collection's average length is at query time. A query computes one
contribution per group (a few hundred for a list of a million postings) and finds the
documents above any contribution by taking whole groups.

A dense column holds the frequency of the term in every slot of the segment (0 where
absent): looking up a candidate is then one byte gather instead of a binary search. It
is built only for lists holding at least one slot in ``DENSE`` of their segment, where
its bytes (one or two per slot) are at most about 1.4 times the list's own (six per
posting).
"""

from __future__ import annotations

import numpy as np

#: A list gets a dense column when it holds at least one slot in DENSE of its segment.
DENSE = 8
#: Lists shorter than this are never grouped (a query reads them whole).
GROUPED_MIN = 4096
#: The most (frequency, length) pairs a list's grouping ranks through a table.
RANKED_MAX = 1 << 18


class Impact:
    """A posting list's documents by group: ``slots[start[g] : start[g] + size[g]]``
    are the documents with frequency ``tf[g]`` and length ``length[g]``."""

    __slots__ = ("length", "size", "slots", "start", "tf")

    def __init__(self, slots: np.ndarray, tf: np.ndarray, length: np.ndarray,
                 start: np.ndarray, size: np.ndarray) -> None:
        self.slots = slots  # int32, the list's slots in group order
        self.tf = tf  # float64 per group
        self.length = length  # float64 per group
        self.start = start  # int64 per group
        self.size = size  # int64 per group

    @property
    def nbytes(self) -> int:
        return int(self.slots.nbytes + self.tf.nbytes + self.length.nbytes
                   + self.start.nbytes + self.size.nbytes)


def group(slots: np.ndarray, tfs: np.ndarray, lengths: np.ndarray) -> Impact:
    """The :class:`Impact` of a list: ``slots`` and ``tfs`` its postings, ``lengths``
    the length of each one's document."""
    top_tf, top_len = int(tfs.max()), int(lengths.max())
    width = top_len + 1
    span = (top_tf + 1) * width
    if span <= RANKED_MAX:
        # One integer per (tf, length), ordered as the groups are (tf descending, length
        # ascending); a count per integer gives the groups and their sizes, and a stable
        # sort of the postings by their group's rank (8 or 16 bits: a radix sort) their
        # order. The count's table has one entry per possible (tf, length) and is only
        # built while that is small (its bytes are a query's temporaries).
        key = (top_tf - tfs.astype(np.int32)) * width + lengths.astype(np.int32)
        counts = np.bincount(key, minlength=span)
        present = np.flatnonzero(counts)
        if len(present) <= 1 << 16:
            rank = np.zeros(span, dtype=np.uint8 if len(present) <= 1 << 8 else np.uint16)
            rank[present] = np.arange(len(present))
            order = np.argsort(rank[key], kind="stable")
            size = counts[present]
            return Impact(np.ascontiguousarray(slots[order], dtype=np.int32),
                          (top_tf - present // width).astype(np.float64),
                          (present % width).astype(np.float64),
                          (np.cumsum(size) - size).astype(np.int64), size.astype(np.int64))
    # Many (tf, length) pairs (very long documents): a sort of the 64-bit integers.
    wide = (top_tf - tfs.astype(np.int64)) * width + lengths.astype(np.int64)
    order = np.argsort(wide, kind="stable")
    keys = wide[order]
    edge = np.empty(len(keys), dtype=bool)
    edge[0] = True
    np.not_equal(keys[1:], keys[:-1], out=edge[1:])
    start = np.flatnonzero(edge)
    first = keys[start]
    return Impact(np.ascontiguousarray(slots[order], dtype=np.int32),
                  (top_tf - first // width).astype(np.float64),
                  (first % width).astype(np.float64),
                  start.astype(np.int64), np.diff(np.append(start, len(keys))).astype(np.int64))


def column(slots: np.ndarray, tfs: np.ndarray, lo: int, span: int) -> np.ndarray:
    """The frequency of the list's term in each of the slots ``lo .. lo + span`` (0 where
    absent): uint8, or uint16 when some frequency does not fit in a byte."""
    dtype = np.uint8 if not len(tfs) or int(tfs.max()) < 256 else np.uint16
    out = np.zeros(span, dtype=dtype)
    out[slots - lo] = tfs
    return out
