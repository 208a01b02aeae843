"""BM25's posting lists: every term's postings over the catalog's slots, and where they are.

Owns: :class:`PostingLists` — the layout the module docstring of
:mod:`holomem.projections.bm25` describes: at most two
:class:`~holomem.projections.postings.Segment` s (a *base* and a *mid*, over
consecutive slot ranges) and the *delta* of the documents added since the last merge
(the term of every token, flat); every slot's document length and their total; the
merges (the delta into the mid segment, the mid into the base, or all into one); a
term's postings read across all three; their checkpoint and their renumbering by a
compaction. When to merge is BM25's. Imports numpy and
:mod:`holomem.projections.postings`.

A merge replaces a segment whole and never changes one in place, and a document's
length is written once per slot, so a snapshot shares both; the delta is copied.
"""

from __future__ import annotations

from array import array

import numpy as np

from holomem.projections.base import Change, GrowArray, Kept, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.postings import Segment, merge, tokens_to_postings
from holomem.projections.postings import compacted as compact_postings

_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_U16 = np.zeros(0, dtype=np.uint16)

#: A term's postings in one place: (the segment, or None for the delta; slots; tfs).
TermPart = tuple[Segment | None, np.ndarray, np.ndarray]


class PostingLists:
    """The postings of the catalog's slots (vacated slots are dropped at a merge)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._base: Segment | None = None
        self._mid: Segment | None = None
        self._d_term: array[int] = array("i")  # term of every token of the delta's documents
        self.delta_start = 0  # first slot of the delta; its documents are slots delta_start..
        self.doclen = GrowArray(np.int32)
        self.total_len = 0
        self.min_len = 1 << 30  # shortest document length ever added
        self._version = 0  # counts the changes of postings and lengths
        self._d_slots: tuple[int, np.ndarray] = (-1, _EMPTY_I32)  # see _delta_slots()

    @property
    def revision(self) -> int:
        """Changes with every change of the postings or the lengths (a memo's key)."""
        return self._version

    # -- changes --------------------------------------------------------------------------
    def apply(self, change: Change, tids: list[int] | None) -> None:
        """An event's ``change`` of the slots; ``tids``: the term of every token of the
        document it put in ``change.new`` (None: it put none)."""
        self._version += 1
        if change.old >= 0:
            self.total_len -= int(self.doclen[change.old])
        if tids is None:
            return
        assert self.doclen.n == change.new  # one length per slot, in slot order
        self.doclen.append(len(tids))
        self.total_len += len(tids)
        self.min_len = min(self.min_len, len(tids))
        self._d_term.extend(tids)

    def add_run(self, first: int, tids: np.ndarray | list[int], lengths: np.ndarray) -> None:
        """New documents in slots ``first``..: the term of every token (int32 as an
        array), and each document's length."""
        self._version += 1
        assert self.doclen.n == first
        if isinstance(tids, np.ndarray):
            self._d_term.frombytes(tids.tobytes())
        else:
            self._d_term.fromlist(tids)
        self.doclen.extend(lengths.astype(np.int32))
        self.total_len += int(lengths.sum())
        if len(lengths):
            self.min_len = min(self.min_len, int(lengths.min()))

    def pending(self) -> int:
        """Documents in the delta."""
        return self.doclen.n - self.delta_start

    def _delta_triples(self, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tokens_to_postings(np.frombuffer(self._d_term, dtype=np.int32),
                                  self.doclen.view()[self.delta_start :], self.delta_start,
                                  n_terms)

    def merge_delta(self, n_terms: int) -> None:
        """Fold the delta into the mid segment, and the mid segment into the base once
        it passes an eighth of it. ``n_terms``: how many terms the vocabulary holds."""
        self._version += 1
        alive = self.catalog.alive.view()
        end = self.doclen.n
        if self._base is None:
            self._base = merge(None, [self._delta_triples(n_terms)], n_terms, alive, 0, end)
        elif (end - self._base.hi) * 8 > self._base.hi - self._base.lo:
            # The mid segment would pass an eighth of the base: the base takes it and
            # the delta in one merge (the same postings as two, one pass fewer).
            newer = [] if self._mid is None else [self._mid.triples()]
            newer.append(self._delta_triples(n_terms))
            self._base = merge(self._base, newer, n_terms, alive, 0, end)
            self._mid = None
        else:
            lo = self._base.hi
            self._mid = merge(self._mid, [self._delta_triples(n_terms)], n_terms, alive, lo,
                              end)
        self._d_term = array("i")
        self.delta_start = end

    def merge(self, n_terms: int) -> None:
        """Fold the mid segment and the delta into the base, dropping vacated slots."""
        self._version += 1
        alive = self.catalog.alive.view()
        newer = [] if self._mid is None else [self._mid.triples()]
        newer.append(self._delta_triples(n_terms))
        self._base = merge(self._base, newer, n_terms, alive, 0, self.doclen.n)
        self._mid = None
        self._d_term = array("i")
        self.delta_start = self.doclen.n

    def segments(self) -> list[Segment]:
        return [seg for seg in (self._base, self._mid) if seg is not None]

    # -- reading --------------------------------------------------------------------------
    def _delta_postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tfs) of term ``tid`` among the delta's documents."""
        if not len(self._d_term):
            return _EMPTY_I32, _EMPTY_U16
        pos = (np.frombuffer(self._d_term, dtype=np.int32) == tid).nonzero()[0]
        if not len(pos):
            return _EMPTY_I32, _EMPTY_U16
        ds = self._delta_slots()[pos]  # ascending: the delta's tokens are in slot order
        edge = np.empty(len(ds), dtype=bool)
        edge[0] = True
        np.not_equal(ds[1:], ds[:-1], out=edge[1:])
        starts = edge.nonzero()[0]
        d_tf = np.empty(len(starts), dtype=np.uint16)  # each slot's run of the term
        np.subtract(starts[1:], starts[:-1], out=d_tf[:-1], casting="unsafe")
        d_tf[-1] = len(ds) - starts[-1]
        return ds[starts], d_tf

    def _delta_slots(self) -> np.ndarray:
        """The slot of each token of the delta (int32), kept until the next change (a
        query's terms, and the next queries', all look their tokens up in it)."""
        key, got = self._d_slots
        if key != self._version:
            lengths = self.doclen.view()[self.delta_start :]
            got = np.repeat(np.arange(self.delta_start, self.delta_start + len(lengths),
                                      dtype=np.int32), lengths)
            self._d_slots = (self._version, got)
        return got

    def parts(self, tid: int) -> list[TermPart]:
        """Term ``tid``'s postings in each segment and the delta that hold any, in
        slot order (vacated slots included)."""
        out: list[TermPart] = []
        for seg in self.segments():
            slots, tfs = seg.postings(tid)
            if len(slots):
                out.append((seg, slots, tfs))
        slots, tfs = self._delta_postings(tid)
        if len(slots):
            out.append((None, slots, tfs))
        return out

    def of_term(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tfs) of term ``tid``, vacated slots included."""
        parts = self.parts(tid)
        if len(parts) == 1:
            return parts[0][1:]
        if not parts:
            return _EMPTY_I32, _EMPTY_U16
        return (np.concatenate([p[1] for p in parts]), np.concatenate([p[2] for p in parts]))

    def memory_bytes(self) -> int:
        return int(sum(seg.nbytes for seg in self.segments()) + self.doclen.nbytes
                   + self._d_term.itemsize * len(self._d_term))

    # -- checkpoints and compaction -------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The segments and lengths shared, the delta copied (see the module docstring)."""
        snap: Snapshot = {
            "segments": len(self.segments()),
            "delta_terms": np.frombuffer(self._d_term, dtype=np.int32).copy(),
            "delta_start": self.delta_start, "doclen": self.doclen.lend(),
            "total_len": self.total_len, "min_len": self.min_len,
        }
        for i, seg in enumerate(self.segments()):
            snap[f"seg{i}_range"] = [seg.lo, seg.hi, seg.docs]
            snap[f"seg{i}_indptr"], snap[f"seg{i}_slot"] = seg.indptr, seg.slot
            snap[f"seg{i}_tf"] = seg.tf
        return snap

    def restore(self, snap: Snapshot, n_terms: int) -> None:
        """The postings of :meth:`snapshot`, whose terms are ``n_terms``."""
        self._version += 1
        segments = []
        for i in range(int(snap["segments"])):
            lo, hi, docs = (int(x) for x in snap[f"seg{i}_range"])
            seg = Segment(lo, hi, np.array(snap[f"seg{i}_indptr"], dtype=np.int64),
                          np.array(snap[f"seg{i}_slot"], dtype=np.int32),
                          np.array(snap[f"seg{i}_tf"], dtype=np.uint16), docs)
            if (seg.terms > n_terms or int(seg.indptr[-1]) != len(seg.slot)
                    or len(seg.tf) != len(seg.slot)):
                raise ValueError("bm25: posting arrays disagree")
            segments.append(seg)
        if len(segments) > 2:
            raise ValueError("bm25: more than two segments")
        self._base = segments[0] if segments else None
        self._mid = segments[1] if len(segments) > 1 else None
        self._d_term = array("i")
        self._d_term.frombytes(np.ascontiguousarray(snap["delta_terms"], dtype=np.int32).tobytes())
        self.delta_start = int(snap["delta_start"])
        self.doclen = GrowArray.of(snap["doclen"], np.int32)
        self.total_len = int(snap["total_len"])
        self.min_len = int(snap["min_len"])
        if self.delta_start > len(self.doclen):
            raise ValueError("bm25: posting arrays disagree")

    def compacted(self, old: PostingLists, kept: Kept, new_term: np.ndarray,
                  n_terms: int) -> None:
        """Fill these fresh lists with the documents ``kept`` of ``old``, their terms
        renumbered by ``new_term`` (old id -> new, ``n_terms`` new ones): the old
        postings renumbered (:func:`~holomem.projections.postings.compacted`), in one
        segment, as a replay's final merge leaves them."""
        assert not self.doclen.n  # fresh
        n = len(kept.slots)
        self._base = compact_postings(old.segments(), old._delta_triples(len(new_term)),
                                      kept.new, new_term, n_terms, n)
        doclen = old.doclen.view()[kept.slots]
        self.doclen.extend(doclen)
        self.total_len = int(doclen.sum())
        if n:
            self.min_len = int(doclen.min())
        self.delta_start = n
