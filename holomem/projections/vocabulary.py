"""BM25's vocabulary: the term of every word it has indexed.

Owns: :class:`Vocabulary` — the word table (a word as the tokenizer gives it -> its
term id), the terms (a word folded by the stemmer when stemming is on; term id ->
term and back), the numpy table of short words' keys that bulk loads find words
through (:mod:`holomem.projections.wordtable`, a cache of the word table, so a bulk
load makes no string per word), their checkpoint and their renumbering by a
compaction. Part of :mod:`holomem.projections.bm25`. Imports numpy and the
tokenizer's parts.

A term is numbered when its first word is met: documents loaded in bulk get the
numbers one document at a time would give them (tests/store/test_word_keys.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from holomem.projections.base import Later, Snapshot
from holomem.projections.tokenize import Spans, stem
from holomem.projections.wordtable import KEY_BYTES, WordTable, word_keys


class Vocabulary:
    def __init__(self, stemming: bool = True) -> None:
        self.stemming = stemming
        self._word_term: dict[str, int] = {}  # word as tokenized -> term id
        self._term_id: dict[str, int] = {}  # term (folded word) -> term id
        #: the short words of _word_term that bulk loads looked up, for numpy (a cache)
        self._word_keys = WordTable()
        self.terms: list[str] = []  # term id -> term

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

    def terms_of(self, words: list[str]) -> list[int]:
        """The term id of each of ``words`` (indexed now): new words get their terms
        in order of first occurrence."""
        found = list(map(self._word_term.get, words))
        if None in found:
            term_of = self._term_of
            found = [term_of(w) if t is None else t for w, t in zip(words, found, strict=True)]
        return found  # type: ignore[return-value]

    def known(self, words: Iterable[str]) -> list[int]:
        """Distinct known term ids of ``words``, in first-occurrence order."""
        seen: dict[int, None] = {}
        for word in words:
            tid = self._word_term.get(word)
            if tid is None:
                term = stem(word) if self.stemming else word
                tid = self._term_id.get(term)
            if tid is not None:
                seen.setdefault(tid, None)
        return list(seen)

    def span_terms(self, spans: Spans) -> np.ndarray:
        """The term id of every word of ``spans`` (int32, indexed now): short words
        through the word-key table, the rest (and the words it does not hold yet)
        through the word table, looked up in order of first occurrence so that new
        terms get the ids one document at a time would give them."""
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

    @property
    def nbytes(self) -> int:
        """Bytes of the word-key table (the dicts are Python objects, not counted)."""
        return self._word_keys.nbytes

    # -- checkpoints and compaction -----------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The terms are only appended to (cut at their length when encoded); the word
        table is copied."""
        terms, n_terms, word_term = self.terms, len(self.terms), dict(self._word_term)
        return {
            "terms": Later(lambda: terms[:n_terms]),  # only appended to
            "words": Later(lambda: list(word_term)),
            "word_terms": Later(lambda: np.fromiter(word_term.values(), dtype=np.int32,
                                                    count=len(word_term))),
        }

    def restore(self, snap: Snapshot) -> None:
        self.terms = snap["terms"]
        self._term_id = {term: tid for tid, term in enumerate(self.terms)}
        self._word_term = dict(zip(snap["words"], snap["word_terms"].tolist(), strict=True))
        self._word_keys = WordTable()

    def compacted(self, old: Vocabulary, words: Sequence[str]) -> np.ndarray:
        """Fill this fresh vocabulary with the words ``words`` of ``old``, given in the
        order a replay meets them first (every word of a kept document was indexed
        when it was written), and their terms numbered in the order their first word
        is met. Returns each old term id's new one (-1: no kept word has it)."""
        assert not self.terms  # fresh
        self.stemming = old.stemming
        old_tids = np.fromiter(map(old._word_term.__getitem__, words), dtype=np.int64,
                               count=len(words))
        distinct, first = np.unique(old_tids, return_index=True)
        order = distinct[np.argsort(first)]  # the old terms, in the order they are met
        new_term = np.full(len(old.terms), -1, dtype=np.int32)
        new_term[order] = np.arange(len(order), dtype=np.int32)
        self.terms = [old.terms[t] for t in order.tolist()]
        self._term_id = {term: tid for tid, term in enumerate(self.terms)}
        self._word_term = dict(zip(words, new_term[old_tids].tolist(), strict=True))
        return new_term
