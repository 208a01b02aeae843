"""BM25 over in-memory posting lists (no file ever stores a term).

Owns: the vocabulary, the posting lists, document lengths and BM25 scoring.
Imports numpy, :mod:`holomem.events` and the other projections.

Scoring (Lucene's BM25, the variant tantivy and Elasticsearch use)::

    score(d, q) = sum over distinct query terms t present in d of
                  idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avglen))
    idf(t)      = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

with k1 = 1.2 and b = 0.4; N, df and avglen count live documents only. A query
term repeated in the query counts once; query stopwords are left out (see
:mod:`holomem.projections.tokenize`). b = 0.4 rather than the customary 0.75: on
the LoCoMo development set, whose facts are short dialogue turns, it raised
recall_any@10 by 0.014 (benchmarks/tokenizer_locomo.py).

Layout: a compressed sparse row *base* (``indptr`` per term, then slot and term
frequency per posting, sorted by term then slot) plus a *delta* of the token
occurrences added since the last merge (flat term and slot arrays). Queries read
both; vacated slots are masked by the catalog's liveness and dropped at the next
merge. A merge is linear in the postings (no sort of the base), and runs when the
delta holds ``MERGE_DOCS`` documents, or once at the end of a replay.
"""

from __future__ import annotations

import contextlib
import math
from array import array
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections.base import Change, GrowArray, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.tokenize import query_words, stem, tokenize

K1 = 1.2
B = 0.4
MERGE_DOCS = 2048


class MatchedTerm(NamedTuple):
    term: str
    tf: int
    idf: float
    score: float


class BM25:
    """Posting lists and BM25 scores for the catalog's slots."""

    def __init__(self, catalog: Catalog, *, stemming: bool = True, stopwords: bool = True,
                 k1: float = K1, b: float = B) -> None:
        self.catalog = catalog
        self.stemming = stemming
        self.stopwords = stopwords
        self.k1 = k1
        self.b = b
        self._word_term: dict[str, int] = {}  # word as tokenized -> term id
        self._term_id: dict[str, int] = {}  # term (folded word) -> term id
        self.terms: list[str] = []  # term id -> term
        self._indptr = np.zeros(1, dtype=np.int64)
        self._post_slot = np.zeros(0, dtype=np.int32)
        self._post_tf = np.zeros(0, dtype=np.uint16)
        self._d_term: array[int] = array("i")  # term of every token of the delta's documents
        self._d_start = 0  # first slot of the delta; its documents are slots _d_start..
        self.doclen = GrowArray(np.int32)
        self.total_len = 0
        self._holding = False  # inside bulk(): merge once, at the end
        self._norm_key: tuple[int, int, int] = (-1, -1, -1)
        self._norm_cache = np.zeros(0)

    # -- vocabulary -------------------------------------------------------------------
    def _term_of(self, word: str) -> int:
        tid = self._word_term.get(word)
        if tid is None:
            term = stem(word) if self.stemming else word
            tid = self._term_id.get(term)
            if tid is None:
                tid = len(self.terms)
                # A copy, so the key does not pin the (much larger) text it came from.
                term = "".join(term)
                self._term_id[term] = tid
                self.terms.append(term)
            self._word_term["".join(word)] = tid
        return tid

    def query_terms(self, query: str) -> list[int]:
        """Distinct known term ids of ``query``, in first-occurrence order."""
        seen: dict[int, None] = {}
        for word in query_words(query) if self.stopwords else tokenize(query):
            tid = self._word_term.get(word)
            if tid is None:
                term = stem(word) if self.stemming else word
                tid = self._term_id.get(term)
            if tid is not None:
                seen.setdefault(tid, None)
        return list(seen)

    # -- events -----------------------------------------------------------------------
    def apply(self, seq: int, event: Event, change: Change) -> None:
        if change.old >= 0:
            self.total_len -= int(self.doclen[change.old])
        if change.new < 0 or not isinstance(event, (DocumentAdded, DocumentReplaced)):
            return
        words = tokenize(event.text)
        found = list(map(self._word_term.get, words))
        tids: list[int] = (
            [self._term_of(w) for w in words] if None in found else found  # type: ignore[assignment]
        )
        assert self.doclen.n == change.new  # one length per slot, in slot order
        self.doclen.append(len(tids))
        self.total_len += len(tids)
        self._d_term.extend(tids)
        if self.doclen.n - self._d_start >= MERGE_DOCS and not self._holding:
            self.merge()

    def add_run(self, events: list[DocumentAdded], first: int) -> None:
        """Index new documents in slots ``first``.. (as ``apply`` of each would)."""
        assert self.doclen.n == first
        known = self._word_term.get
        lengths = []
        extend = self._d_term.extend
        for e in events:
            words = tokenize(e.text)
            tids = list(map(known, words))
            if None in tids:
                tids = [self._term_of(w) for w in words]
            extend(tids)  # type: ignore[arg-type]
            lengths.append(len(tids))
        self.doclen.extend(np.array(lengths, dtype=np.int32))
        self.total_len += sum(lengths)
        if self.doclen.n - self._d_start >= MERGE_DOCS and not self._holding:
            self.merge()

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Apply many events with no merge until the block ends, then one (replay)."""
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        self.merge()

    def merge(self) -> None:
        """Fold the delta into the base and drop postings of vacated slots."""
        alive = self.catalog.alive.view()
        n_terms = len(self.terms)
        # Delta postings: sort occurrences by term (stable keeps slot order), then
        # count runs of equal (term, slot) to get term frequencies.
        dt = np.frombuffer(self._d_term, dtype=np.int32)
        ds = self._delta_slots()
        # A stable sort of 16-bit keys is a radix sort: several times faster.
        keys = dt.astype(np.uint16) if n_terms <= 1 << 16 else dt
        order = np.argsort(keys, kind="stable")
        dt, ds = dt[order], ds[order]
        if len(dt):
            edge = np.empty(len(dt), dtype=bool)
            edge[0] = True
            np.not_equal(dt[1:], dt[:-1], out=edge[1:])
            edge[1:] |= ds[1:] != ds[:-1]
            starts = np.flatnonzero(edge)
            d_tf = np.diff(np.append(starts, len(dt))).astype(np.uint16)
            d_term, d_slot = dt[starts], ds[starts]
        else:
            d_tf = np.zeros(0, dtype=np.uint16)
            d_term = d_slot = np.zeros(0, dtype=np.int32)
        keep = alive[d_slot]
        d_term, d_slot, d_tf = d_term[keep], d_slot[keep], d_tf[keep]
        # Base postings that survive.
        base_counts = np.diff(self._indptr)
        base_term = np.repeat(np.arange(len(base_counts), dtype=np.int32), base_counts)
        keep = alive[self._post_slot]
        b_term, b_slot, b_tf = base_term[keep], self._post_slot[keep], self._post_tf[keep]
        # Merge without sorting: every delta slot is newer than every base slot, so
        # within a term the base postings come first, then the delta's.
        b_cnt = np.bincount(b_term, minlength=n_terms)
        d_cnt = np.bincount(d_term, minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(b_cnt + d_cnt, out=indptr[1:])
        total = int(indptr[-1])
        slots = np.empty(total, dtype=np.int32)
        tfs = np.empty(total, dtype=np.uint16)
        # With both sides sorted by term, a posting's new position is its old one
        # shifted by how many postings of the other side belong to earlier terms
        # (for the delta: to earlier terms or to the same term in the base).
        b_before = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(b_cnt, out=b_before[1:])
        d_before = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(d_cnt, out=d_before[1:])
        b_pos = np.arange(len(b_term)) + d_before[b_term]
        slots[b_pos], tfs[b_pos] = b_slot, b_tf
        d_pos = np.arange(len(d_term)) + b_before[1:][d_term]
        slots[d_pos], tfs[d_pos] = d_slot, d_tf
        self._indptr, self._post_slot, self._post_tf = indptr, slots, tfs
        self._d_term = array("i")
        self._d_start = self.doclen.n

    def _delta_slots(self) -> np.ndarray:
        """The slot of every token in the delta (its documents are consecutive slots)."""
        lengths = self.doclen.view()[self._d_start :]
        out: np.ndarray = np.repeat(
            np.arange(self._d_start, self._d_start + len(lengths), dtype=np.int32), lengths)
        return out

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The base arrays are replaced whole by a merge, never changed in place, and
        document lengths are written once per slot: all shared. The vocabulary and
        the delta are copied."""
        words = list(self._word_term)
        return {
            "terms": list(self.terms), "words": words,
            "word_terms": np.fromiter(self._word_term.values(), dtype=np.int32,
                                      count=len(words)),
            "indptr": self._indptr, "post_slot": self._post_slot, "post_tf": self._post_tf,
            "delta_terms": np.frombuffer(self._d_term, dtype=np.int32).copy(),
            "delta_start": self._d_start, "doclen": self.doclen.view(),
            "total_len": self.total_len,
        }

    def restore(self, snap: Snapshot) -> None:
        self.terms = snap["terms"]
        self._term_id = {term: tid for tid, term in enumerate(self.terms)}
        self._word_term = dict(zip(snap["words"], snap["word_terms"].tolist(), strict=True))
        self._indptr = np.array(snap["indptr"], dtype=np.int64)
        self._post_slot = np.array(snap["post_slot"], dtype=np.int32)
        self._post_tf = np.array(snap["post_tf"], dtype=np.uint16)
        self._d_term = array("i")
        self._d_term.frombytes(np.ascontiguousarray(snap["delta_terms"], dtype=np.int32).tobytes())
        self._d_start = int(snap["delta_start"])
        self.doclen = GrowArray.of(snap["doclen"], np.int32)
        self.total_len = int(snap["total_len"])
        if (len(self._indptr) - 1 > len(self.terms) or int(self._indptr[-1]) != len(self._post_slot)
                or len(self._post_tf) != len(self._post_slot) or self._d_start > len(self.doclen)):
            raise ValueError("bm25: posting arrays disagree")

    # -- scoring ----------------------------------------------------------------------
    def _postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tfs) of term ``tid``, vacated slots included."""
        if tid + 1 < len(self._indptr):
            lo, hi = int(self._indptr[tid]), int(self._indptr[tid + 1])
            b_slot, b_tf = self._post_slot[lo:hi], self._post_tf[lo:hi]
        else:
            b_slot = np.zeros(0, dtype=np.int32)
            b_tf = np.zeros(0, dtype=np.uint16)
        if not len(self._d_term):
            return b_slot, b_tf
        pos = np.flatnonzero(np.frombuffer(self._d_term, dtype=np.int32) == tid)
        if not len(pos):
            return b_slot, b_tf
        ends = np.cumsum(self.doclen.view()[self._d_start :])
        ds = (self._d_start + np.searchsorted(ends, pos, side="right")).astype(np.int32)
        edge = np.empty(len(ds), dtype=bool)
        edge[0] = True
        np.not_equal(ds[1:], ds[:-1], out=edge[1:])
        starts = np.flatnonzero(edge)
        d_tf = np.diff(np.append(starts, len(ds))).astype(np.uint16)
        return np.concatenate((b_slot, ds[starts])), np.concatenate((b_tf, d_tf))

    def _stats(self) -> tuple[int, float]:
        n = self.catalog.live
        return n, (self.total_len / n if n else 0.0)

    @staticmethod
    def idf(n: int, df: int) -> float:
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def _norms(self) -> np.ndarray:
        """k1 * (1 - b + b * len(d) / avglen) for every slot, cached until a write."""
        key = (self.total_len, self.catalog.live, self.doclen.n)
        if self._norm_key != key:
            _, avglen = self._stats()
            self._norm_cache = self.k1 * (1.0 - self.b + self.b * self.doclen.view()
                                          / (avglen or 1.0))
            self._norm_key = key
        return self._norm_cache

    def _live_postings(self, tid: int, alive: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        slots, tfs = self._postings(tid)
        if alive is not None:
            live = alive[slots]
            slots, tfs = slots[live], tfs[live]
        return slots, tfs

    def score(self, query: str, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """BM25 of every live document matching ``query``: (slots, scores), slots ascending.

        ``allowed`` (a boolean mask over slots) restricts which documents are
        returned; collection statistics still count every live document.
        """
        n, _ = self._stats()
        # Vacated slots only need masking when there are any.
        alive = None if self.catalog.live == self.catalog.slots else self.catalog.alive.view()
        norms = self._norms()
        parts_s: list[np.ndarray] = []
        parts_v: list[np.ndarray] = []
        for tid in self.query_terms(query):
            slots, tfs = self._live_postings(tid, alive)
            if not len(slots):
                continue
            weight = self.idf(n, len(slots)) * (self.k1 + 1.0)
            if allowed is not None:
                keep = allowed[slots]
                slots, tfs = slots[keep], tfs[keep]
            tf = tfs.astype(np.float64)
            parts_s.append(slots)
            parts_v.append(weight * tf / (tf + norms[slots]))
        if not parts_s:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        all_s = np.concatenate(parts_s)
        all_v = np.concatenate(parts_v)
        if len(all_s) * 8 < len(norms):
            uniq, inv = np.unique(all_s, return_inverse=True)
            return uniq.astype(np.int64), np.bincount(inv, weights=all_v)
        dense = np.bincount(all_s, weights=all_v, minlength=len(norms))
        uniq = np.flatnonzero(dense)
        return uniq, dense[uniq]

    def matched(self, query: str, slot: int) -> list[MatchedTerm]:
        """The query terms document ``slot`` contains, with their BM25 contributions.

        Each contribution is computed exactly as :meth:`score` computes it, so they
        add up (in query order) to the document's score bit for bit.
        """
        return self.matched_many(query, [slot])[0]

    def matched_many(self, query: str, slots: list[int]) -> list[list[MatchedTerm]]:
        """:meth:`matched` for several documents, reading each term's postings once."""
        n, _ = self._stats()
        all_alive = self.catalog.alive.view()
        alive = None if self.catalog.live == self.catalog.slots else all_alive
        norms = self._norms()
        wanted = np.array([s if 0 <= s < len(all_alive) and all_alive[s] else -1
                           for s in slots], dtype=np.int64)
        out: list[list[MatchedTerm]] = [[] for _ in slots]
        for tid in self.query_terms(query):
            posting, tfs = self._live_postings(tid, alive)  # slots ascending
            if not len(posting):
                continue
            at = np.minimum(np.searchsorted(posting, wanted), len(posting) - 1)
            hits = np.flatnonzero((wanted >= 0) & (posting[at] == wanted))
            if not len(hits):
                continue
            idf = self.idf(n, len(posting))
            for i in hits.tolist():
                tf = np.float64(tfs[at[i]])
                out[i].append(MatchedTerm(self.terms[tid], int(tf), idf, float(
                    idf * (self.k1 + 1.0) * tf / (tf + norms[int(wanted[i])]))))
        return out

    def memory_bytes(self) -> int:
        return int(self._indptr.nbytes + self._post_slot.nbytes + self._post_tf.nbytes
                   + self.doclen.nbytes + self._d_term.itemsize * len(self._d_term))
