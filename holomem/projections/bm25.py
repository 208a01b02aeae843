"""BM25 over in-memory posting lists (no file ever stores a term).

Owns: BM25 scoring (the formula below, exhaustive and pruned), indexing a document's
words, and when the postings are merged. Composes the parts that own the rest:
:mod:`~holomem.projections.vocabulary` (the term of every word) and
:mod:`~holomem.projections.postinglists` (every term's postings and every slot's
length, laid out as below). Imports numpy, :mod:`holomem.events` and the other
projections.

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
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections import exhaustive
from holomem.projections.base import Change, Kept, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.exhaustive import Memo, QueryTerm
from holomem.projections.postinglists import PostingLists
from holomem.projections.pruning import Part, Term
from holomem.projections.pruning import top as prune
from holomem.projections.tokenize import ascii_spans, query_words, tokenize, tokenize_many
from holomem.projections.vocabulary import Vocabulary

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
        self.stopwords = stopwords
        self.k1 = k1
        self.b = b
        #: the term of every word indexed
        self.vocabulary = Vocabulary(stemming)
        #: every term's postings, every slot's length
        self.postings = PostingLists(catalog)
        self._holding = False  # inside bulk(): merge every BULK_DOCS and at the end
        self._norm_key: tuple[int, int, int] = (-1, -1, -1)
        self._norm_cache = np.zeros(0)
        self._df_key: tuple[int, int] = (-1, -1)
        self._df: dict[int, int] = {}
        self._memo = Memo((-1,))

    def query_terms(self, query: str) -> list[int]:
        """Distinct known term ids of ``query``, in first-occurrence order."""
        return self.vocabulary.known(query_words(query) if self.stopwords else tokenize(query))

    # -- events -----------------------------------------------------------------------
    def apply(self, seq: int, event: Event, change: Change) -> None:
        tids = None
        if change.new >= 0 and isinstance(event, (DocumentAdded, DocumentReplaced)):
            tids = self.vocabulary.terms_of(tokenize(event.text))
        self.postings.apply(change, tids)
        if tids is not None:
            self._maybe_merge()

    def _maybe_merge(self) -> None:
        pending = self.postings.pending()
        if self._holding:
            if pending >= BULK_DOCS:
                self.merge()
        elif pending >= MERGE_DOCS:
            self.postings.merge_delta(len(self.vocabulary.terms))

    def add_run(self, events: list[DocumentAdded], first: int) -> None:
        """Index new documents in slots ``first``.. (as ``apply`` of each would)."""
        texts = [e.text for e in events]
        spans = ascii_spans(texts)
        if spans is not None:
            tids: np.ndarray | list[int] = self.vocabulary.span_terms(spans)
            lengths = spans.counts
        else:
            per_doc = tokenize_many(texts)
            lengths = np.array(list(map(len, per_doc)), dtype=np.int64)
            tids = self.vocabulary.terms_of(list(itertools.chain.from_iterable(per_doc)))
        self.postings.add_run(first, tids, lengths)
        self._maybe_merge()

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Apply many events merging only every BULK_DOCS documents, then once
        (replay) — unless they added fewer documents than were there before (the
        short tail after a checkpoint): then the ordinary policy decides, so an open
        from a checkpoint does not rewrite every posting."""
        before = self.postings.doclen.n
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
        if self.postings.doclen.n - before >= before:
            self.merge()
        else:
            self._maybe_merge()

    def merge(self) -> None:
        """Fold the mid segment and the delta into the base, dropping vacated slots."""
        self.postings.merge(len(self.vocabulary.terms))

    # -- compaction -------------------------------------------------------------------
    def compacted(self, old: BM25, kept: Kept, words: Sequence[str]) -> None:
        """Fill this fresh index with the documents ``kept`` of ``old``: what a replay of
        the compacted journal builds, without reading a text again.

        ``words``: every distinct word of the kept documents in the order a replay
        meets them first (:class:`~holomem.projections.firstwords.FirstWords` of
        their texts in slot order), which a posting (slot, frequency) cannot tell:
        the word table is kept in that order, and a term is numbered when its first
        word is met (:meth:`Vocabulary.compacted`). The postings are the old ones
        renumbered (:meth:`PostingLists.compacted`).
        """
        self.stopwords, self.k1, self.b = old.stopwords, old.k1, old.b
        new_term = self.vocabulary.compacted(old.vocabulary, words)
        self.postings.compacted(old.postings, kept, new_term, len(self.vocabulary.terms))

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The vocabulary's (:meth:`Vocabulary.snapshot`), then the postings'
        (:meth:`PostingLists.snapshot`)."""
        snap = self.vocabulary.snapshot()
        snap.update(self.postings.snapshot())
        return snap

    def restore(self, snap: Snapshot) -> None:
        self.vocabulary.restore(snap)
        self.postings.restore(snap, len(self.vocabulary.terms))

    # -- scoring ----------------------------------------------------------------------
    def _stats(self) -> tuple[int, float]:
        n = self.catalog.live
        return n, (self.postings.total_len / n if n else 0.0)

    @staticmethod
    def idf(n: int, df: int) -> float:
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def _norms(self) -> np.ndarray:
        """k1 * (1 - b + b * len(d) / avglen) for every slot, cached until a write."""
        doclen = self.postings.doclen
        key = (self.postings.total_len, self.catalog.live, doclen.n)
        if self._norm_key != key:
            _, avglen = self._stats()
            self._norm_cache = self.k1 * (1.0 - self.b + self.b * doclen.view()
                                          / (avglen or 1.0))
            self._norm_key = key
        return self._norm_cache

    def _live_postings(self, tid: int, alive: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        slots, tfs = self.postings.of_term(tid)
        if alive is not None:
            live = alive[slots]
            slots, tfs = slots[live], tfs[live]
        return slots, tfs

    def _live_df(self, tid: int, parts: list[tuple[np.ndarray, np.ndarray]],
                 alive: np.ndarray | None) -> int:
        """Live documents holding ``tid`` (counted once per write, then cached)."""
        if alive is None:
            return sum(len(p[0]) for p in parts)
        key = (self.postings.doclen.n, self.catalog.live)
        if key != self._df_key:
            self._df_key, self._df = key, {}
        df = self._df.get(tid)
        if df is None:
            df = self._df[tid] = sum(int(np.count_nonzero(alive[p[0]])) for p in parts)
        return df

    def _terms(self) -> Memo:
        """This revision's memo of query terms (any write starts a new one: a term's
        weight and contributions depend on the live count and on every length)."""
        key = (self.postings.revision, self.catalog.live, self.catalog.slots)
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
        parts = self.postings.parts(tid)
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

    def word_ceiling(self) -> float:
        """The most one word can add to any document's score: idf * (k1 + 1) of a term
        a single live document holds (the highest idf there is). A term's contribution
        idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen)) stays below
        idf * (k1 + 1), since the length term is positive for a document holding it.
        0.0 on an empty store."""
        n = self.catalog.live
        return self.idf(n, 1) * (self.k1 + 1.0) if n else 0.0

    def top(self, query: str, k: int, allowed: np.ndarray | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
        """Every live document that may be among the ``k`` best for ``query``, with its
        exact score: (slots ascending, scores).

        A subset of :meth:`score`'s answer, with the same scores bit for bit, that
        holds its top k (score descending, then slot ascending): ``top_k`` of
        either gives the same documents. See the module docstring.
        """
        return self._top(query, k, allowed)[:2]

    def _top(self, query: str, k: int, allowed: np.ndarray | None
             ) -> tuple[np.ndarray, np.ndarray, int]:
        """:meth:`top`'s answer, and the postings of the query's terms in all."""
        alive = None if self.catalog.live == self.catalog.slots else self.catalog.alive.view()
        found, total, memo = self._found(query, alive)
        if total <= EXHAUSTIVE or total + self.catalog.slots // 2 <= DENSE_WORK:
            return (*exhaustive.scored(found, alive, allowed, self._norms(), memo, k), total)
        doclen, delta = self.postings.doclen.view(), self.postings.delta_start
        terms = [Term(term.weight, [
            Part(delta, len(doclen), s, t, None, None) if seg is None
            else Part(seg.lo, seg.hi, s, t, seg.impact(term.tid, doclen), seg.column(term.tid))
            for seg, s, t in term.parts]) for term in found]
        keep = alive if allowed is None else allowed if alive is None else alive & allowed
        k1, b, avg = self.k1, self.b, self._stats()[1] or 1.0

        def norm(lengths: np.ndarray) -> np.ndarray:  # as _norms computes it
            out: np.ndarray = k1 * (1.0 - b + b * lengths / avg)
            return out

        got = prune(terms, k, self._norms(), norm, keep)
        return (*(exhaustive.scored(found, alive, allowed, self._norms(), memo)
                  if got is None else got), total)

    def top_bounded(self, query: str, k: int, allowed: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray, float]:
        """:meth:`top`'s answer, and a score no matching document it leaves out reaches
        or passes: 0 when it holds every match (few postings: the exhaustive sum keeps
        them all), else its ``k``-th best score."""
        slots, scores, total = self._top(query, k, allowed)
        if len(slots) < k:
            return slots, scores, 0.0
        if total * 8 < self.catalog.slots:  # exhaustive.scored's sparse sum: every match
            return slots, scores, 0.0
        return slots, scores, float(np.partition(scores, len(scores) - k)[len(scores) - k])

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
        terms = self.vocabulary.terms
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
                out[i].append(MatchedTerm(terms[tid], int(tf), idf, float(
                    idf * (self.k1 + 1.0) * tf / (tf + norms[int(wanted[i])]))))
        return out

    def scores_of(self, query: str, slots: np.ndarray) -> np.ndarray:
        """BM25 of each of a few live ``slots`` (ascending) for ``query`` (0.0 for one
        that matches no query term): :meth:`score`'s, bit for bit (each term's
        contributions, memoised as :meth:`score` keeps them, added in query order as
        the sum over every match adds them)."""
        alive = None if self.catalog.live == self.catalog.slots else self.catalog.alive.view()
        found, _, memo = self._found(query, alive)
        norms = self._norms()
        out = np.zeros(len(slots))
        for term in found:
            held, values = exhaustive.contributions(term, alive, norms, memo)
            if not len(held):
                continue
            at = np.minimum(np.searchsorted(held, slots), len(held) - 1)
            hit = held[at] == slots
            out[hit] += values[at[hit]]
        return out

    def memory_bytes(self) -> int:
        return self.postings.memory_bytes() + self.vocabulary.nbytes
