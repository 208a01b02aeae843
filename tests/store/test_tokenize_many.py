"""Tokenizing a batch of texts at once gives each text the words tokenizing it alone
gives (the bulk index path and a one-document apply must agree on every term)."""

from __future__ import annotations

import hypothesis.strategies as st
from hypothesis import given, settings

from holomem.projections.tokenize import MAX_TERM, ascii_spans, tokenize, tokenize_many

# ASCII punctuation and controls (NUL, the batch separator, among them), apostrophes,
# letters outside ASCII and runs longer than a term: every branch of the fast path.
PIECES = st.sampled_from(["alice", "Bob", "x" * (MAX_TERM + 3), "a_b", "42", " ", "\x00",
                          "\n", "'s", "don't", "Straße", "東京", "ﬁ", ",", "-", "\x7f"])
TEXT = st.lists(PIECES, max_size=8).map("".join) | st.text(max_size=30)


@settings(max_examples=400, deadline=None)
@given(st.lists(TEXT, max_size=6))
def test_a_batch_tokenizes_as_its_texts_one_by_one(texts: list[str]) -> None:
    assert tokenize_many(texts) == [tokenize(t) for t in texts]


@given(st.lists(st.lists(st.sampled_from(["alice", "Bob", "x" * (MAX_TERM + 1), "7", " ",
                                          ".", "\t", "__"]), max_size=8).map("".join),
                min_size=2, max_size=6))
def test_plain_ascii_batches_take_the_fast_path_and_agree(texts: list[str]) -> None:
    assert tokenize_many(texts) == [tokenize(t) for t in texts]


@settings(max_examples=400, deadline=None)
@given(st.lists(TEXT, max_size=6))
def test_a_batch_s_words_and_counts_are_its_texts_words(texts: list[str]) -> None:
    found = ascii_spans(texts)
    if found is not None:
        assert found.counts.tolist() == [len(tokenize(t)) for t in texts]
        assert found.words() == [w for t in texts for w in tokenize(t)]


def test_plain_english_with_possessives_takes_the_word_pass() -> None:
    texts = ["Alice's cat doesn't sleep", "Bob's", "it's 42 o'clock, isn't it?", ""]
    found = ascii_spans(texts)
    assert found is not None
    assert found.words() == [w for t in texts for w in tokenize(t)]
    assert found.counts.tolist() == [4, 1, 5, 0]
