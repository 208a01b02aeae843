"""Which facts a query's vector proposes (docs/contract.md §4e "Vector search at scale").

Exact search: the best ``candidate_limit`` cosines (ties included) and every lexical
match give the same linear-fusion ranking as every vector would, and the context
policy's sparse pass adds exactly what a pass over every fact adds. Approximate search
(the in-memory HNSW index): results satisfy every restriction (namespace, as_of,
known_at), agree with exact search, lose a forgotten fact's vector at once, and are
rebuilt from replay after a reopen; without the ``ann`` extra the configuration is
refused with the install command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec
import numpy as np
import pytest

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.engine import View
from holomem.api.memory.recall import rank
from holomem.errors import UnavailableError
from holomem.projections import embeddings
from holomem.projections.fusion import FusionParams, top_k

WORDS = ["apple", "river", "stone", "cloud", "lamp", "tiger", "piano", "window", "bread",
         "forest"]
DIM = 16


def vectors(rng: np.random.Generator, n: int, topics: int = 20) -> np.ndarray:
    """Clustered unit vectors (topics plus noise), with exact duplicates for ties."""
    centres = rng.standard_normal((topics, DIM))
    v = centres[rng.integers(0, topics, n)] + 0.6 * rng.standard_normal((n, DIM))
    v[::17] = v[0]  # ties: every 17th fact has the first one's vector
    out: np.ndarray = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return out


def text(rng: np.random.Generator) -> str:
    return " ".join(rng.choice(WORDS, size=4))


def fill(memory: Memory, clock: ManualClock, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vecs = vectors(rng, n)
    for start in range(0, n, 500):
        memory.remember_many(
            {"id": f"f{i}", "text": text(rng), "embedding": vecs[i].tolist(),
             "namespace": ["team", f"t{i % 4}"], "event_time": 1_000 * i}
            for i in range(start, min(n, start + 500)))
        clock.advance(60_000)
    return vecs


def ranked(view: View, query: str, q: np.ndarray, depth: int | None, fusion: FusionParams,
           k: int) -> list[tuple[int, float]]:
    fused = view.fused(query, q.astype("<f4").tobytes(), None, fusion, depth)
    return [(int(fused.slots[i]), float(fused.score[i]))
            for i in top_k(fused.slots, fused.score, k)]


def test_the_best_cosines_rank_a_linear_fusion_as_every_vector_does(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        vecs = fill(memory, clock, 600, seed=1)
        rng = np.random.default_rng(2)
        queries = [vecs[0], -vecs[3], *vectors(rng, 20)]
        for fusion in (FusionParams(), FusionParams("linear", 0.4), FusionParams("linear", 0.0)):
            for n, q in enumerate(queries):
                words = text(rng) if n % 2 else "zzz-no-match"
                for depth in (1, 5, 40):
                    def both(v: View, words: str = words, q: np.ndarray = q,
                             fusion: FusionParams = fusion, depth: int = depth
                             ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
                        return (ranked(v, words, q, None, fusion, depth),
                                ranked(v, words, q, depth, fusion, depth))
                    full, cut = store.read(both)
                    assert cut == full, (fusion, n, depth)


def dense_context(view: View, plain: tuple[np.ndarray, np.ndarray], weight: float,
                  window: int) -> dict[int, float]:
    """The context policy's totals by a pass over every live fact of each namespace, in
    write order (the reference: a fact's neighbours are its own namespace's)."""
    col = view.facts.namespaces.of_slot.view()
    out: dict[int, float] = {}
    for nid in np.unique(col[col >= 0]).tolist():
        live = view.live_slots()
        live = live[col[live] == nid]
        own = np.zeros(len(live))
        mine = plain[0][col[plain[0]] == nid]
        own[np.searchsorted(live, mine)] = plain[1][col[plain[0]] == nid]
        total = own.copy()
        for d in range(1, window + 1):
            total[d:] += weight * own[:-d]
            total[:-d] += weight * own[d:]
        keep = np.flatnonzero(total > 0)
        out.update(zip(live[keep].tolist(), total[keep].tolist(), strict=True))
    return out


@pytest.mark.parametrize("vacated", [False, True])
def test_the_context_policy_adds_what_a_pass_over_every_fact_adds(tmp_path: Path,
                                                                  vacated: bool) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, {"context": {"neighbors": {"window": 2, "weight": 0.3}}},
                        clock=clock)
        vecs = fill(memory, clock, 300, seed=3)
        if vacated:
            memory.forget({"ids": [f"f{i}" for i in range(0, 300, 7)]}, dry_run=False)
        for n, q in enumerate([vecs[5], vecs[100], *vectors(np.random.default_rng(4), 5)]):
            words = text(np.random.default_rng(n))
            options, where = rank.checked(None, {"k": 10, "embedding": q.tolist()})

            def both(view: View, words: str = words, options: rank.RecallOptions = options,
                     where: object = where) -> tuple[dict[int, float], dict[int, float]]:
                ranking = rank.Ranking(view, memory.policies, words, options,
                                         clock.now_ms(), where)
                plain = ranking.plain()
                context = memory.policies.context
                assert context is not None
                ref = dense_context(view, (plain.slots, plain.score), context.weight,
                                    context.window)
                got = ranking.fused()
                return ref, dict(zip(got.slots.tolist(), got.score.tolist(), strict=True))

            ref, got = store.read(both)
            assert got == ref  # the same additions in the same order: equal, not close


APPROX = {"vectorSearch": "approximate"}


def built(store: Store) -> int:
    """Wait for the approximate index (its build starts now if none is under way);
    its size."""
    return store.read(lambda v: len(v.embeddings.ensure_index(timeout=60)))


def test_approximate_search_keeps_every_restriction_and_agrees_with_exact(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        exact = Memory(store, clock=clock)
        vecs = fill(exact, clock, 2_000, seed=5)
        approx = Memory(store, APPROX, clock=clock, persist=True)
        assert store.read(lambda v: v.embeddings.index) is None  # built at first use
        approx.recall("", embedding=vecs[0].tolist(), k=1)  # exact; starts the build
        built(store)
        known_at = 1_000_000 + 60_000 * 2  # the first two batches of 500
        cases: list[dict[str, object]] = [
            {}, {"namespace": ["team", "t1"]}, {"namespace": ["team"]},
            {"as_of": 900_000}, {"known_at": known_at}, {"history": "all"}]
        overlap, total = 0, 0
        rng = np.random.default_rng(6)
        for restricted_exactly in (20_000, 0):  # the exact fallback; the index, filtered
            monkeypatch.setattr(embeddings, "EXACT_RESTRICTED", restricted_exactly)
            for case in cases:
                for q in (vecs[10], vecs[777], *vectors(rng, 4)):
                    kw = case
                    words = text(rng)
                    a = approx.recall(words, embedding=q.tolist(), k=10, **kw)
                    e = exact.recall(words, embedding=q.tolist(), k=10, **kw)
                    for r in a:
                        if "namespace" in kw:
                            assert r.fact.namespace[:len(kw["namespace"])] == kw["namespace"]
                        if "known_at" in kw:
                            assert r.fact.ingest_time <= known_at
                    overlap += len({r.id for r in a} & {r.id for r in e})
                    total += len(e)
                    # The scores are exact cosines: a fact both find scores the same.
                    same = {r.id: r.score for r in e}
                    assert all(r.score == same[r.id] for r in a if r.id in same)
        assert store.read(lambda v: v.embeddings.index) is not None
        assert overlap / total >= 0.95, overlap / total


def test_a_forgotten_facts_vector_leaves_the_index_at_once_and_a_reopen_rebuilds_it(
        tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    path = tmp_path / "s"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, APPROX, clock=clock)
        vecs = fill(memory, clock, 1_000, seed=7)
        assert memory.recall("", embedding=vecs[42].tolist(), k=1)[0].id == "f42"
        size = built(store)
        memory.forget({"ids": ["f42", "f43"]}, dry_run=False)
        assert built(store) == size - 2
        assert "f42" not in {r.id for r in memory.recall("", embedding=vecs[42].tolist(),
                                                          k=50)}
        memory.remember(text="a new one", id="new", embedding=vecs[42].tolist())
        assert memory.recall("", embedding=vecs[42].tolist(), k=1)[0].id == "new"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=clock)  # the recorded configuration: approximate
        assert memory.config.vector_search == "approximate"
        assert store.read(lambda v: v.embeddings.index) is None  # nothing read from a file
        assert memory.recall("", embedding=vecs[42].tolist(), k=1)[0].id == "new"
        assert built(store) == size - 1
    assert not [p for p in path.rglob("*") if "usearch" in p.name or "hnsw" in p.name]


def test_approximate_search_without_the_ann_extra_names_the_install_command(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usearch.index", None)  # import fails
    with Store.open(tmp_path / "s", sync="none") as store, \
            pytest.raises(UnavailableError, match=r"holomem-db\[ann\]"):
        Memory(store, APPROX)


def test_a_fact_the_graph_proposes_outside_bm25s_list_is_scored_with_its_own_bm25(
        tmp_path: Path) -> None:
    # "apple" matches 1,601 facts, more than BM25's first list holds; the one the
    # query's vector is nearest matches it too, less well (a longer text), so only the
    # graph proposes it: it must be fused with its BM25, not as a fact without the word.
    rng = np.random.default_rng(1)
    vecs = rng.standard_normal((2_500, DIM)).astype(np.float32)
    target = rng.standard_normal(DIM).astype(np.float32)
    for fusion in ("default", {"method": "floored", "lexicalWeight": 0.55}):
        with Store.open(tmp_path / str(len(str(fusion))), sync="none") as store:
            exact = Memory(store, {"vectorSearch": "exact", "fusion": fusion},
                           clock=ManualClock(1))
            exact.remember_many({"id": f"a{i}", "text": "apple pie" if i < 1_600 else
                                 "banana bread", "embedding": vecs[i].tolist()}
                                for i in range(2_500))
            exact.remember(id="target", text="apple tart with cream",
                           embedding=target.tolist())
            approx = Memory(store, {**APPROX, "fusion": fusion}, clock=ManualClock(1))
            built(store)
            want = [(r.id, r.score) for r in exact.recall("apple", embedding=target.tolist(),
                                                          k=5)]
            got = approx.recall("apple", embedding=target.tolist(), k=5, explain=True)
            assert want[0][0] == "target"
            assert [(r.id, r.score) for r in got] == want
            assert got[0].explanation is not None and got[0].explanation.retrieved


def test_recall_explains_each_result_with_the_score_it_returned(tmp_path: Path) -> None:
    # With the context policy a fact's score depends on its neighbours' among the
    # candidates: explaining the results must not move the search to other candidates.
    rng = np.random.default_rng(7)
    words = ["apple", "river", "stone", "cloud", "lamp", "tiger", "piano", "window"]
    with Store.open(tmp_path / "s", sync="none") as store:
        config = msgspec.structs.replace(MemoryConfig.conversation(),
                                         vector_search="approximate")
        memory = Memory(store, config, clock=ManualClock(1))
        memory.remember_many({"id": f"f{i}", "text": " ".join(rng.choice(words, 4)),
                              "embedding": rng.standard_normal(DIM).tolist()}
                             for i in range(1_500))
        built(store)
        for _ in range(10):
            q = rng.standard_normal(DIM).tolist()
            plain = memory.recall("apple river", embedding=q, k=5)
            explained = memory.recall("apple river", embedding=q, k=5, explain=True)
            assert [(r.id, r.score) for r in explained] == [(r.id, r.score) for r in plain]
            for r in explained:
                assert r.explanation is not None
                assert (r.explanation.score, r.explanation.retrieved) == (r.score, True)


def test_a_search_for_every_vector_that_comes_back_short_is_answered_exactly(
        tmp_path: Path) -> None:
    # 300 facts share one vector: a graph search for all 1,000 vectors reaches fewer.
    rng = np.random.default_rng(3)
    vecs = rng.standard_normal((1_000, DIM)).astype(np.float32)
    vecs[:300] = vecs[0]
    with Store.open(tmp_path / "s", sync="none") as store:
        exact = Memory(store, {"vectorSearch": "exact"}, clock=ManualClock(1))
        exact.remember_many({"id": f"f{i}", "text": "word", "embedding": vecs[i].tolist()}
                            for i in range(1_000))
        approx = Memory(store, APPROX, clock=ManualClock(1))
        assert built(store) == 1_000
        q = rng.standard_normal(DIM).tolist()
        want = [(r.id, r.score) for r in exact.recall("zzzz", embedding=q, k=1_000)]
        assert len(want) == 1_000
        assert [(r.id, r.score) for r in approx.recall("zzzz", embedding=q, k=1_000)] == want


def test_with_the_context_policy_another_namespaces_nearer_vectors_take_no_candidates_place(
        tmp_path: Path) -> None:
    # Namespace "big" holds 3,000 vectors nearer the query than any of "small"'s; the
    # fact "small" should find has the nearest vector in its namespace and no query word.
    rng = np.random.default_rng(11)
    q = rng.standard_normal(DIM).astype(np.float32)
    near = q + 0.05 * rng.standard_normal((3_000, DIM)).astype(np.float32)
    config = msgspec.structs.replace(MemoryConfig.conversation(), vector_search="exact")
    with Store.open(tmp_path / "s", sync="none") as store:
        exact = Memory(store, config, clock=ManualClock(1))
        exact.remember_many({"id": f"b{i}", "text": "other words", "namespace": ["big"],
                             "embedding": near[i].tolist()} for i in range(3_000))
        far = rng.standard_normal((50, DIM)).astype(np.float32)
        far[7] = q + 0.6 * rng.standard_normal(DIM).astype(np.float32)
        exact.remember_many({"id": f"s{i}", "text": "some note", "namespace": ["small"],
                             "embedding": far[i].tolist()} for i in range(50))
        approx = Memory(store, msgspec.structs.replace(config, vector_search="approximate"),
                        clock=ManualClock(1))
        built(store)
        want = [(r.id, r.score) for r in exact.recall("question", embedding=q.tolist(), k=5,
                                                      namespace=["small"])]
        assert want[0][0] == "s7"
        got = approx.recall("question", embedding=q.tolist(), k=5, namespace=["small"])
        assert [(r.id, r.score) for r in got] == want
