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

Layout: the postings of older documents are in at most two
:class:`~holomem.projections.postings.Segment` s (a large *base* and a smaller
*mid*, covering consecutive slot ranges), those of the documents added since the
last merge in a *delta* (the term of every token, flat). Queries read all three;
vacated slots are masked by the catalog's liveness and dropped at the next merge.
The delta is folded into the mid segment when it holds ``MERGE_DOCS`` documents,
the mid segment into the base when it passes an eighth of it (so a write costs
amortised constant merge work, not a pass over the base); a replay merges every
``BULK_DOCS`` documents and once at the end, into a single base (a replay of a
checkpoint's short tail keeps the ordinary policy). A bulk load (:meth:`BM25.add_run`)
finds its words' terms through a numpy table of word keys
(:mod:`holomem.projections.wordtable`), a cache of the word dict, without a string
per word.

Top-k (:meth:`BM25.top`) is exact. A query with few postings, or any query on a store
small enough that summing every posting costs less than pruning, is scored
exhaustively (:mod:`holomem.projections.exhaustive`, with each term's contributions
kept until the next write). Otherwise it reads only the postings that can matter: a
term's contribution to a document depends on the document only through the term's
frequency in it and its length, so a long list, grouped by (frequency, length), is read
best group first, and what a document outside the groups taken can get from the term
is bounded by the best group left. Once k documents are known to score θ, heads whose
bounds sum below θ hold every document that can be among the k best (see
:mod:`holomem.projections.pruning`). Scores are summed in the same order as
:meth:`BM25.score`'s, so both give the same top k bit for bit
(tests/store/test_search_pruning.py).
"""

from __future__ import annotations

import contextlib
import itertools
import math
from array import array
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections import exhaustive
from holomem.projections.base import Change, GrowArray, Kept, Later, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.exhaustive import Memo, QueryTerm
from holomem.projections.postings import Segment, merge, tokens_to_postings
from holomem.projections.postings import compacted as compact_postings
from holomem.projections.pruning import Part, Term
from holomem.projections.pruning import top as prune
from holomem.projections.tokenize import (
    Spans,
    ascii_spans,
    query_words,
    stem,
    tokenize,
    tokenize_many,
)
from holomem.projections.wordtable import KEY_BYTES, WordTable, word_keys

K1 = 1.2
B = 0.4
MERGE_DOCS = 2048
BULK_DOCS = 131072
#: Queries with at most this many postings are scored exhaustively (pruning would not pay).
EXHAUSTIVE = 16384
#: So are those whose postings plus half the slots are at most this many: summing every
#: posting costs about one unit a posting plus half of one a slot (the sum and the cut
#: run over every slot), a pruned evaluation about this many. Measured per query, CPU
#: time, with no contribution kept yet: at 100,000 facts the sum took 0.55x the pruned
#: evaluation's time at 16,000-50,000 postings, 0.9x at 50,000-100,000 and 1.1-1.4x at
#: 100,000-200,000 (0.3x, 0.45x, 0.5-0.7x with them kept); at 300,000 facts, 0.85-1.25x
#: already at 16,000-50,000. From 300,000 slots up, only ``EXHAUSTIVE`` decides.
DENSE_WORK = 150_000

_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_U16 = np.zeros(0, dtype=np.uint16)


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
        #: the short words of _word_term that bulk loads looked up, for numpy (a cache)
        self._word_keys = WordTable()
        self.terms: list[str] = []  # term id -> term
        self._base: Segment | None = None
        self._mid: Segment | None = None
        self._d_term: array[int] = array("i")  # term of every token of the delta's documents
        self._d_start = 0  # first slot of the delta; its documents are slots _d_start..
        self.doclen = GrowArray(np.int32)
        self.total_len = 0
        self.min_len = 1 << 30  # shortest document length ever added (a bound, see top())
        self._holding = False  # inside bulk(): merge every BULK_DOCS and at the end
        self._norm_key: tuple[int, int, int] = (-1, -1, -1)
        self._norm_cache = np.zeros(0)
        self._df_key: tuple[int, int] = (-1, -1)
        self._df: dict[int, int] = {}
        self._version = 0  # counts the changes of postings and lengths (the memo's key)
        self._memo = Memo((-1,))
        self._d_slots: tuple[int, np.ndarray] = (-1, _EMPTY_I32)  # see _delta_slots()

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
        self._version += 1
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
        self.min_len = min(self.min_len, len(tids))
        self._d_term.extend(tids)
        self._maybe_merge()

    def _maybe_merge(self) -> None:
        pending = self.doclen.n - self._d_start
        if self._holding:
            if pending >= BULK_DOCS:
                self.merge()
        elif pending >= MERGE_DOCS:
            self._merge_delta()

    def add_run(self, events: list[DocumentAdded], first: int) -> None:
        """Index new documents in slots ``first``.. (as ``apply`` of each would)."""
        self._version += 1
        assert self.doclen.n == first
        texts = [e.text for e in events]
        spans = ascii_spans(texts)
        if spans is not None:
            tids = self._span_terms(spans)
            self._d_term.frombytes(tids.tobytes())
            lengths = spans.counts
        else:
            per_doc = tokenize_many(texts)
            lengths = np.array(list(map(len, per_doc)), dtype=np.int64)
            words = list(itertools.chain.from_iterable(per_doc))
            found = list(map(self._word_term.get, words))
            if None in found:
                # New words get their terms in order of first occurrence, as one
                # document at a time would give them.
                term_of = self._term_of
                found = [term_of(w) if t is None else t for w, t in zip(words, found,
                                                                        strict=True)]
            self._d_term.fromlist(found)  # type: ignore[arg-type]
        self.doclen.extend(lengths.astype(np.int32))
        self.total_len += int(lengths.sum())
        if len(lengths):
            self.min_len = min(self.min_len, int(lengths.min()))
        self._maybe_merge()

    def _span_terms(self, spans: Spans) -> np.ndarray:
        """The term id of every word of ``spans`` (int32): short words through the
        word-key table, the rest (and the words it does not hold yet) through
        :meth:`_term_of`, called in order of first occurrence so that new terms get
        the ids one document at a time would give them."""
        raw, starts, lengths = spans.raw, spans.starts, spans.lengths
        low, high = word_keys(raw, starts, lengths)
        keyed = lengths <= KEY_BYTES
        tids = self._word_keys.lookup(low, high)
        tids[~keyed] = -1
        missing = np.flatnonzero(tids < 0)
        if not len(missing):
            return tids
        short, long = missing[keyed[missing]], missing[~keyed[missing]]
        # The distinct short words among the missing, each at its first occurrence (a
        # stable sort keeps the first of equal keys first).
        order = np.lexsort((high[short], low[short]))
        lo, hi = low[short][order], high[short][order]
        new = np.ones(len(order), dtype=bool)
        new[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
        firsts = short[order[new]]
        group = np.empty(len(order), dtype=np.intp)
        group[order] = np.cumsum(new) - 1
        calls = np.sort(np.concatenate([firsts, long]))
        term_of = self._term_of
        got = [term_of(raw[s : s + n].decode("ascii"))
               for s, n in zip(starts[calls].tolist(), lengths[calls].tolist(), strict=True)]
        tids[calls] = got
        tids[short] = tids[firsts][group]
        self._word_keys.insert(low[firsts], high[firsts], tids[firsts])
        return tids

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Apply many events merging only every BULK_DOCS documents, then once
        (replay) — unless they added fewer documents than were there before (the
        short tail after a checkpoint): then the ordinary policy decides, so an open
        from a checkpoint does not rewrite every posting."""
        before = self.doclen.n
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self.doclen.n - before >= before:
            self.merge()
        else:
            self._maybe_merge()

    def _delta_triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return tokens_to_postings(np.frombuffer(self._d_term, dtype=np.int32),
                                  self.doclen.view()[self._d_start :], self._d_start,
                                  len(self.terms))

    def _merge_delta(self) -> None:
        """Fold the delta into the mid segment, and the mid segment into the base once
        it passes an eighth of it."""
        self._version += 1
        alive = self.catalog.alive.view()
        n_terms, end = len(self.terms), self.doclen.n
        if self._base is None:
            self._base = merge(None, [self._delta_triples()], n_terms, alive, 0, end)
        elif (end - self._base.hi) * 8 > self._base.hi - self._base.lo:
            # The mid segment would pass an eighth of the base: the base takes it and
            # the delta in one merge (the same postings as two, one pass fewer).
            newer = [] if self._mid is None else [self._mid.triples()]
            newer.append(self._delta_triples())
            self._base = merge(self._base, newer, n_terms, alive, 0, end)
            self._mid = None
        else:
            lo = self._base.hi
            self._mid = merge(self._mid, [self._delta_triples()], n_terms, alive, lo, end)
        self._d_term = array("i")
        self._d_start = end

    def merge(self) -> None:
        """Fold the mid segment and the delta into the base, dropping vacated slots."""
        self._version += 1
        alive = self.catalog.alive.view()
        newer = [] if self._mid is None else [self._mid.triples()]
        newer.append(self._delta_triples())
        self._base = merge(self._base, newer, len(self.terms), alive, 0, self.doclen.n)
        self._mid = None
        self._d_term = array("i")
        self._d_start = self.doclen.n

    def _segments(self) -> list[Segment]:
        return [seg for seg in (self._base, self._mid) if seg is not None]

    # -- compaction -------------------------------------------------------------------
    def compacted(self, old: BM25, kept: Kept, words: Sequence[str]) -> None:
        """Fill this fresh index with the documents ``kept`` of ``old``: what a replay of
        the compacted journal builds, without reading a text again.

        ``words``: every distinct word of the kept documents in the order a replay
        meets them first (:class:`~holomem.projections.firstwords.FirstWords` of
        their texts in slot order), which a posting (slot, frequency) cannot tell:
        the word table is kept in that order, and a term is numbered when its first
        word is met. The postings are the old
        ones renumbered (:func:`~holomem.projections.postings.compacted`), in one
        segment, as the replay's final merge leaves them.
        """
        assert not self.terms and not self.doclen.n  # fresh
        self.stemming, self.stopwords, self.k1, self.b = (old.stemming, old.stopwords,
                                                          old.k1, old.b)
        # Every word of a kept document was indexed when it was written.
        old_tids = np.fromiter(map(old._word_term.__getitem__, words), dtype=np.int64,
                               count=len(words))
        distinct, first = np.unique(old_tids, return_index=True)
        order = distinct[np.argsort(first)]  # the old terms, in the order they are met
        new_term = np.full(len(old.terms), -1, dtype=np.int32)
        new_term[order] = np.arange(len(order), dtype=np.int32)
        self.terms = [old.terms[t] for t in order.tolist()]
        self._term_id = {term: tid for tid, term in enumerate(self.terms)}
        self._word_term = dict(zip(words, new_term[old_tids].tolist(), strict=True))
        n = len(kept.slots)
        self._base = compact_postings(old._segments(), old._delta_triples(), kept.new,
                                      new_term, len(self.terms), n)
        doclen = old.doclen.view()[kept.slots]
        self.doclen.extend(doclen)
        self.total_len = int(doclen.sum())
        if n:
            self.min_len = int(doclen.min())
        self._d_start = n

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """A merge replaces a segment whole and never changes one in place, and
        document lengths are written once per slot: all shared. The terms are only
        appended to (cut at their length when encoded); the word table and the delta
        are copied."""
        terms, n_terms, word_term = self.terms, len(self.terms), dict(self._word_term)
        snap: Snapshot = {
            "terms": Later(lambda: terms[:n_terms]),  # only appended to
            "words": Later(lambda: list(word_term)),
            "word_terms": Later(lambda: np.fromiter(word_term.values(), dtype=np.int32,
                                                    count=len(word_term))),
            "segments": len(self._segments()),
            "delta_terms": np.frombuffer(self._d_term, dtype=np.int32).copy(),
            "delta_start": self._d_start, "doclen": self.doclen.lend(),
            "total_len": self.total_len, "min_len": self.min_len,
        }
        for i, seg in enumerate(self._segments()):
            snap[f"seg{i}_range"] = [seg.lo, seg.hi, seg.docs]
            snap[f"seg{i}_indptr"], snap[f"seg{i}_slot"] = seg.indptr, seg.slot
            snap[f"seg{i}_tf"] = seg.tf
        return snap

    def restore(self, snap: Snapshot) -> None:
        self._version += 1
        self.terms = snap["terms"]
        self._term_id = {term: tid for tid, term in enumerate(self.terms)}
        self._word_term = dict(zip(snap["words"], snap["word_terms"].tolist(), strict=True))
        self._word_keys = WordTable()
        segments = []
        for i in range(int(snap["segments"])):
            lo, hi, docs = (int(x) for x in snap[f"seg{i}_range"])
            seg = Segment(lo, hi, np.array(snap[f"seg{i}_indptr"], dtype=np.int64),
                          np.array(snap[f"seg{i}_slot"], dtype=np.int32),
                          np.array(snap[f"seg{i}_tf"], dtype=np.uint16), docs)
            if (seg.terms > len(self.terms) or int(seg.indptr[-1]) != len(seg.slot)
                    or len(seg.tf) != len(seg.slot)):
                raise ValueError("bm25: posting arrays disagree")
            segments.append(seg)
        if len(segments) > 2:
            raise ValueError("bm25: more than two segments")
        self._base = segments[0] if segments else None
        self._mid = segments[1] if len(segments) > 1 else None
        self._d_term = array("i")
        self._d_term.frombytes(np.ascontiguousarray(snap["delta_terms"], dtype=np.int32).tobytes())
        self._d_start = int(snap["delta_start"])
        self.doclen = GrowArray.of(snap["doclen"], np.int32)
        self.total_len = int(snap["total_len"])
        self.min_len = int(snap["min_len"])
        if self._d_start > len(self.doclen):
            raise ValueError("bm25: posting arrays disagree")

    # -- postings ---------------------------------------------------------------------
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
            lengths = self.doclen.view()[self._d_start :]
            got = np.repeat(np.arange(self._d_start, self._d_start + len(lengths),
                                      dtype=np.int32), lengths)
            self._d_slots = (self._version, got)
        return got

    def _parts(self, tid: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """(slots, tfs) of term ``tid`` in each segment and the delta, in slot order
        (vacated slots included)."""
        out = [seg.postings(tid) for seg in self._segments()]
        out.append(self._delta_postings(tid))
        return [p for p in out if len(p[0])]

    def _postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """(slots, tfs) of term ``tid``, vacated slots included."""
        parts = self._parts(tid)
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return _EMPTY_I32, _EMPTY_U16
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))

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

    def _live_df(self, tid: int, parts: list[tuple[np.ndarray, np.ndarray]],
                 alive: np.ndarray | None) -> int:
        """Live documents holding ``tid`` (counted once per write, then cached)."""
        if alive is None:
            return sum(len(p[0]) for p in parts)
        key = (self.doclen.n, self.catalog.live)
        if key != self._df_key:
            self._df_key, self._df = key, {}
        df = self._df.get(tid)
        if df is None:
            df = self._df[tid] = sum(int(np.count_nonzero(alive[p[0]])) for p in parts)
        return df

    def _terms(self) -> Memo:
        """This revision's memo of query terms (any write starts a new one: a term's
        weight and contributions depend on the live count and on every length)."""
        key = (self._version, self.catalog.live, self.catalog.slots)
        memo = self._memo
        if memo.key != key:
            memo = self._memo = Memo(key)
        return memo

    def _term(self, tid: int, alive: np.ndarray | None, memo: Memo) -> QueryTerm | None:
        """Term ``tid`` as this revision's queries read it (None: no live document
        holds it)."""
        got = memo.terms.get(tid)
        if got is not None:
            return got
        parts: list[tuple[Segment | None, np.ndarray, np.ndarray]] = []
        for seg in self._segments():
            slots, tfs = seg.postings(tid)
            if len(slots):
                parts.append((seg, slots, tfs))
        slots, tfs = self._delta_postings(tid)
        if len(slots):
            parts.append((None, slots, tfs))
        df = self._live_df(tid, [(s, t) for _, s, t in parts], alive)
        if not df:
            return None
        got = QueryTerm(tid, self.idf(self.catalog.live, df) * (self.k1 + 1.0), parts)
        memo.keep(got)
        return got

    def _found(self, query: str, alive: np.ndarray | None) -> tuple[list[QueryTerm], int, Memo]:
        """Each query term with live documents, in query order; their postings in all;
        and the memo that holds them."""
        memo = self._terms()
        found: list[QueryTerm] = []
        total = 0
        for tid in self.query_terms(query):
            term = self._term(tid, alive, memo)
            if term is not None:
                found.append(term)
                total += term.postings
        return found, total, memo

    def score(self, query: str, allowed: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """BM25 of every live document matching ``query``: (slots, scores), slots ascending.

        ``allowed`` (a boolean mask over slots) restricts which documents are
        returned; collection statistics still count every live document.
        """
        # Vacated slots only need masking when there are any.
        alive = None if self.catalog.live == self.catalog.slots else self.catalog.alive.view()
        found, _, memo = self._found(query, alive)
        return exhaustive.scored(found, alive, allowed, self._norms(), memo)

    def top(self, query: str, k: int, allowed: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """Every live document that may be among the ``k`` best for ``query``, with its
        exact score: (slots ascending, scores).

        A subset of :meth:`score`'s answer, with the same scores bit for bit, that
        holds its top k (score descending, then slot ascending): ``top_k`` of
        either gives the same documents. See the module docstring.
        """
        alive = None if self.catalog.live == self.catalog.slots else self.catalog.alive.view()
        found, total, memo = self._found(query, alive)
        if total <= EXHAUSTIVE or total + self.catalog.slots // 2 <= DENSE_WORK:
            return exhaustive.scored(found, alive, allowed, self._norms(), memo, k)
        doclen = self.doclen.view()
        terms = [Term(term.weight, [
            Part(self._d_start, self.doclen.n, s, t, None, None) if seg is None
            else Part(seg.lo, seg.hi, s, t, seg.impact(term.tid, doclen), seg.column(term.tid))
            for seg, s, t in term.parts]) for term in found]
        keep = alive if allowed is None else allowed if alive is None else alive & allowed
        k1, b, avg = self.k1, self.b, self._stats()[1] or 1.0

        def norm(lengths: np.ndarray) -> np.ndarray:  # as _norms computes it
            out: np.ndarray = k1 * (1.0 - b + b * lengths / avg)
            return out

        got = prune(terms, k, self._norms(), norm, keep)
        return (exhaustive.scored(found, alive, allowed, self._norms(), memo)
                if got is None else got)

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
        return int(sum(seg.nbytes for seg in self._segments()) + self.doclen.nbytes
                   + self._d_term.itemsize * len(self._d_term) + self._word_keys.nbytes)
