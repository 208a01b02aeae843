"""The distinct words of a run of texts, in the order a replay first meets them.

Owns: :class:`FirstWords`. A compaction renumbers the old BM25 index instead of
indexing the kept texts again (:meth:`~holomem.projections.bm25.BM25.compacted`), but a
posting (slot, frequency) cannot say in which order a replay of the new journal would
meet the words, which numbers the vocabulary: a word first met in a removed document
moves. So the kept texts are read once more, here, in slot order, and only each word's
first occurrence becomes a Python string: a word is found by its key
(:func:`~holomem.projections.wordtable.word_keys`) in a table of the keys already met,
as BM25's bulk load finds its words. Imports numpy and the tokenizer's parts.
"""

from __future__ import annotations

import itertools

import numpy as np

from holomem.projections.tokenize import ascii_spans, tokenize_many
from holomem.projections.wordtable import KEY_BYTES, WordTable, word_keys


class FirstWords:
    """Feed it texts in order (:meth:`add`); ``words`` is then every distinct word of
    them, as :func:`~holomem.projections.tokenize.tokenize` gives words, in order of
    first occurrence."""

    def __init__(self) -> None:
        self.words: list[str] = []
        self._known: set[str] = set()  # the truth: ``words`` as a set
        #: the keys of the short words of ``words`` met through a batch's spans (a
        #: filter: a key missing here may still be a known word, met one by one)
        self._keys = WordTable()

    def add(self, texts: list[str]) -> None:
        """Note the words of ``texts``, the texts in order."""
        spans = ascii_spans(texts)
        if spans is None:  # not plain ASCII (or a single text): one string per word
            for word in itertools.chain.from_iterable(tokenize_many(texts)):
                self._note(word)
            return
        raw, starts, lengths = spans.raw, spans.starts, spans.lengths
        low, high = word_keys(raw, starts, lengths)
        short = lengths <= KEY_BYTES
        maybe_new = np.flatnonzero(~short | (self._keys.lookup(low, high) < 0))
        # The first occurrence of each distinct key among them (a stable sort keeps the
        # first of equal keys first), and every word too long for a key.
        keyed = maybe_new[short[maybe_new]]
        order = np.lexsort((high[keyed], low[keyed]))
        lo, hi = low[keyed][order], high[keyed][order]
        first = np.ones(len(order), dtype=bool)
        first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
        firsts = keyed[order[first]]
        picks = np.sort(np.concatenate([firsts, maybe_new[~short[maybe_new]]]))
        for start, n in zip(starts[picks].tolist(), lengths[picks].tolist(), strict=True):
            self._note(raw[start : start + n].decode("ascii"))
        self._keys.insert(low[firsts], high[firsts], np.zeros(len(firsts), dtype=np.int32))

    def _note(self, word: str) -> None:
        if word not in self._known:
            self._known.add(word)
            self.words.append(word)
