"""What a caller of the ``"minilm"`` embedder can rely on (issue 14, item 2): the
shape and type of what ``embed`` returns, unit norms, meaning (a paraphrase scores far
above an unrelated pair), truncation of long text at 256 word pieces, and a clear
``InvalidError`` for input that is not a sequence of strings.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.embedders import MiniLM, by_name
from holomem.errors import InvalidError

EMBEDDER = by_name("minilm")


def test_embed_returns_unit_float32_rows_in_order() -> None:
    texts = ["She works as a nurse", "", "x" * 500, "Berlin"]
    vectors = EMBEDDER.embed(texts)
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
    assert vectors.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for i, text in enumerate(texts):
        assert vectors[i].tobytes() == EMBEDDER.embed([text]).tobytes()
    empty = EMBEDDER.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_a_paraphrase_scores_clearly_above_an_unrelated_pair() -> None:
    nurse, nursing, market, recipe = EMBEDDER.embed([
        "She works as a nurse", "Her job is nursing",
        "The stock market fell sharply today", "Add two cups of flour to the bowl"])
    paraphrase = float(nurse @ nursing)
    unrelated = max(float(nurse @ market), float(nurse @ recipe), float(nursing @ market))
    assert paraphrase >= 0.6
    assert unrelated <= 0.3
    assert paraphrase - unrelated >= 0.4


def test_text_past_256_word_pieces_is_truncated() -> None:
    head = "The committee reviewed the annual budget and approved several new projects. " * 40
    words = len(head.split())
    assert words > 256  # each word is at least one word piece
    tail_a = " ".join(["astronomy"] * 10_000)
    tail_b = "completely different words about cooking pasta at home " * 1000
    a, b, c = EMBEDDER.embed([head + tail_a, head + tail_b, head])
    assert a.tobytes() == b.tobytes() == c.tobytes()  # nothing past the limit counts
    short_a, short_b = EMBEDDER.embed(["The committee " + tail_a[:60], "The committee "])
    assert short_a.tobytes() != short_b.tobytes()  # below the limit, the tail counts


def test_token_ids_are_the_truncated_word_pieces_with_special_tokens() -> None:
    minilm = MiniLM()
    assert minilm.token_ids("") == [101, 102]
    ids = minilm.token_ids("word " * 10_000)
    assert len(ids) == 256 and ids[0] == 101 and ids[-1] == 102
    assert len(minilm.token_ids("She works as a nurse")) == 7


@pytest.mark.parametrize("texts", [
    "a lone string", b"bytes", None, 3, [None], ["ok", 3], [b"bytes"], ["a\ud800b"],
    {"a": 1}.keys(),
])
def test_input_that_is_not_a_sequence_of_strings_is_invalid(texts: object) -> None:
    with pytest.raises(InvalidError):
        EMBEDDER.embed(texts)  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=4))
def test_any_text_embeds_or_is_refused_clearly(texts: list[str]) -> None:
    try:
        vectors = EMBEDDER.embed(texts)
    except InvalidError:
        assert any(0xD800 <= ord(ch) <= 0xDFFF for t in texts for ch in t)
        return
    assert vectors.shape == (len(texts), 384)
    assert np.isfinite(vectors).all()
