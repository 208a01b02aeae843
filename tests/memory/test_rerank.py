"""The reranker seam (issue 19): a reranker sees recall's whole candidate pool before
the cut to k and its order decides the results; its answer is checked; explain
reports both orders; the built-in MMR needs no model, keeps recall's order at λ = 1
and pushes near-duplicates down below it. A reranker is code: never on the wire.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import InvalidError, ManualClock, Memory, Store
from holomem.api.memory.facts.records import wanted
from holomem.api.memory.recall.rerank import MMR, RerankCandidate


def _fill(memory: Memory, n: int = 12) -> list[str]:
    return [memory.remember(f"tea note number {i} " + "tea " * (i % 4)).id for i in range(n)]


def test_the_reranker_gets_the_whole_pool_before_the_k_cut_and_decides_the_top_k(
        memory: Memory) -> None:
    _fill(memory)
    plain = memory.recall("tea", k=3, candidate_limit=50)
    seen: list[list[RerankCandidate]] = []

    def reverse(query: str, candidates: Sequence[RerankCandidate]) -> list[str]:
        seen.append(list(candidates))
        assert query == "tea"
        return [c.id for c in reversed(candidates)]

    got = memory.recall("tea", k=3, candidate_limit=50, rerank=reverse)
    pool = seen[0]
    assert len(pool) == 12  # every candidate, not just k
    assert [c.id for c in pool[:3]] == [r.id for r in plain]  # in recall's order
    assert [c.rank for c in pool] == list(range(1, 13))
    assert all(c.text.startswith("tea note") and c.score > 0 for c in pool)
    assert all(c.vector is None for c in pool)  # not asked for
    assert [r.id for r in got] == [c.id for c in reversed(pool)][:3]
    assert [r.score for r in got] == [c.score for c in reversed(pool)][:3]


def test_a_subset_drops_the_rest(memory: Memory) -> None:
    ids = _fill(memory)
    got = memory.recall("tea", k=5, rerank=lambda q, c: [ids[7]])
    assert [r.id for r in got] == [ids[7]]


@pytest.mark.parametrize(("answer", "message"), [
    ("not-a-list", "sequence of candidate ids"),
    (None, "sequence of candidate ids"),
    (["nope"], "not one of its candidates"),
    ([1], "not a candidate id"),
])
def test_a_bad_answer_is_a_clear_error(memory: Memory, answer: object, message: str) -> None:
    _fill(memory, 3)
    with pytest.raises(InvalidError, match=message):
        memory.recall("tea", rerank=lambda q, c: answer)


def test_a_duplicate_id_is_refused(memory: Memory) -> None:
    _fill(memory, 3)
    with pytest.raises(InvalidError, match="twice"):
        memory.recall("tea", rerank=lambda q, c: [c[0].id, c[0].id])
    with pytest.raises(InvalidError, match="callable"):
        memory.recall("tea", rerank="mmr")  # type: ignore[arg-type]


def test_explain_reports_both_orders(memory: Memory) -> None:
    _fill(memory, 6)

    def reverse(query: str, candidates: Sequence[RerankCandidate]) -> list[str]:
        return [c.id for c in reversed(candidates)][:4]

    got = memory.recall("tea", k=2, explain=True, rerank=reverse)
    for n, r in enumerate(got, start=1):
        e = r.explanation
        assert e is not None and e.retrieved and e.reranked_rank == n
        assert e.rank is not None and e.rank > 2  # recall's own order put it lower
        assert "the reranker placed it" in e.reason
    pool = memory.recall("tea", k=6)
    top = memory.explain("tea", pool[0].id, k=2, rerank=reverse)
    assert (top.retrieved, top.rank, top.reranked_rank) == (False, 1, None)
    assert "left it out" in top.reason
    third = memory.explain("tea", pool[2].id, k=2, rerank=reverse)
    assert (third.retrieved, third.reranked_rank) == (False, 4)
    assert "below the k=2" in third.reason
    plain = memory.explain("tea", pool[0].id, k=2)
    assert (plain.retrieved, plain.reranked_rank) == (True, None)


def test_the_pool_holds_only_what_the_history_filter_lets_through(memory: Memory) -> None:
    old = memory.remember("bob drinks tea", subject="bob/drink", valid_from=1).id
    new = memory.remember("bob drinks green tea", subject="bob/drink", valid_from=2).id
    seen: list[str] = []
    memory.recall("tea", rerank=lambda q, c: seen.extend(x.id for x in c) or [])
    assert seen == [new]
    seen.clear()
    memory.recall("tea", history="all", rerank=lambda q, c: seen.extend(x.id for x in c) or [])
    assert sorted(seen) == sorted([old, new])


def test_mmr_at_lambda_one_keeps_recalls_order_and_is_deterministic(memory: Memory) -> None:
    _fill(memory)
    plain = [r.id for r in memory.recall("tea", k=10)]
    assert [r.id for r in memory.recall("tea", k=10, rerank=MMR(1.0))] == plain
    a = [r.id for r in memory.recall("tea", k=12, rerank=MMR())]
    b = [r.id for r in memory.recall("tea", k=12, rerank=MMR())]
    assert a == b and set(plain) <= set(a)  # a permutation of the whole pool


def test_mmr_pushes_a_near_duplicate_below_a_different_fact(memory: Memory) -> None:
    dup1 = memory.remember("the meeting with alice is on monday at noon").id
    dup2 = memory.remember("the meeting with alice is on monday at noon sharp").id
    other = memory.remember("the meeting room booking for alice").id
    plain = [r.id for r in memory.recall("meeting alice monday noon", k=3)]
    assert plain[:2] == [dup1, dup2] or plain[:2] == [dup2, dup1]
    got = [r.id for r in memory.recall("meeting alice monday noon", k=3, rerank=MMR(0.3))]
    assert got[0] == plain[0] and got[1] == other


def test_mmr_uses_embeddings_when_every_candidate_has_one(store: Store, memory: Memory) -> None:
    memory.remember("apple one", embedding=[1.0, 0.0, 0.0])
    memory.remember("apple two", embedding=[0.99, 0.01, 0.0])
    far = memory.remember("apple three", embedding=[0.0, 0.0, 1.0]).id
    vectors: list[np.ndarray | None] = []

    class Spy(MMR):
        def __call__(self, query: str, candidates: Sequence[RerankCandidate]) -> list[str]:
            vectors.extend(c.vector for c in candidates)
            return super().__call__(query, candidates)

    got = memory.recall("apple", k=2, embedding=[1.0, 0.0, 0.0], rerank=Spy(0.3))
    assert all(v is not None and v.shape == (3,) for v in vectors)
    assert far in [r.id for r in got]


def test_mmr_lambda_is_checked() -> None:
    for bad in (-0.1, 1.5, True, "0.5"):
        with pytest.raises(InvalidError, match="lambda"):
            MMR(bad)  # type: ignore[arg-type]


def test_a_reranker_is_not_on_the_wire(memory: Memory) -> None:
    _fill(memory, 2)
    with pytest.raises(InvalidError):
        memory.call("recall", {"query": "tea", "rerank": "mmr"})


# -- writes while the reranker runs ------------------------------------------------------
def _while_it_runs(write: Callable[[], object], order: Callable[[list[str]], list[str]]
                   = lambda ids: ids) -> Callable[[str, Sequence[RerankCandidate]], list[str]]:
    """A reranker during whose call another thread of the application runs ``write``
    (to its end: no timing involved), then answers ``order`` of the pool's ids."""
    def rerank(query: str, candidates: Sequence[RerankCandidate]) -> list[str]:
        t = threading.Thread(target=write)
        t.start()
        t.join()
        return order([c.id for c in candidates])
    return rerank


def test_a_candidate_superseded_while_the_reranker_runs_is_no_current_result(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    memory.remember("apple note one", id="a1")
    memory.remember("apple note two", id="a2")
    write = _while_it_runs(lambda: memory.remember("pear note", id="n", supersedes=["a1"]))
    got = memory.recall("apple", history="current", rerank=write)
    assert [(r.id, r.status) for r in got] == [("a2", "current")]
    # The first k that still pass are the results: a2 moves up into the k = 1.
    memory.forget({"ids": ["n"]})
    write = _while_it_runs(lambda: memory.remember("pear note", id="n", supersedes=["a1"]),
                           lambda ids: sorted(ids))
    got = memory.recall("apple", k=1, explain=True, rerank=write)
    assert [r.id for r in got] == ["a2"]
    e = got[0].explanation
    assert e is not None and e.retrieved and e.reranked_rank == 2
    memory.forget({"ids": ["n"]})
    e = memory.explain("apple", "a1", rerank=_while_it_runs(
        lambda: memory.remember("pear note", id="n", supersedes=["a1"])))
    assert (e.retrieved, e.reranked_rank, e.status) == (False, 1, "superseded")
    assert "while the reranker ran" in e.reason
    # history "all" keeps it, with the status it has once the reranker returned.
    memory.forget({"ids": ["n"]})
    got = memory.recall("apple", history="all", rerank=_while_it_runs(
        lambda: memory.remember("pear note", id="n", supersedes=["a1"])))
    assert sorted((r.id, r.status) for r in got) == [("a1", "superseded"), ("a2", "current")]


def test_a_candidate_made_current_while_the_reranker_runs_is_no_historical_result(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    memory.remember("apple note old", id="old")
    memory.remember("apple note new", id="new", supersedes=["old"])
    got = memory.recall("apple", history="historical", rerank=_while_it_runs(
        lambda: memory.forget({"ids": ["new"]})))  # old is current again
    assert got == []


def test_an_id_written_again_elsewhere_while_the_reranker_runs_is_left_out(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    memory.remember("apple note", id="a", namespace=["t1"])

    def again() -> None:
        memory.forget({"ids": ["a"]})
        memory.remember("apple note", id="a", namespace=["t2"])

    assert memory.recall("apple", namespace=["t1"], rerank=_while_it_runs(again)) == []
    known = clock.now_ms()

    def later() -> None:
        memory.forget({"ids": ["a"]})
        clock.advance(10)
        memory.remember("apple note", id="a", namespace=["t1"])

    # The a written again was ingested after known_at: the store did not know it then.
    assert memory.recall("apple", known_at=known, rerank=_while_it_runs(later)) == []


@settings(max_examples=40, deadline=None)
@given(history=st.sampled_from(["current", "historical", "all"]),
       superseded=st.sets(st.integers(0, 5)), forgotten=st.sets(st.integers(0, 5)),
       k=st.integers(1, 6), reverse=st.booleans())
def test_every_result_passes_the_history_option_after_the_reranker_ran(
        tmp_path_factory: pytest.TempPathFactory, history: str, superseded: set[int],
        forgotten: set[int], k: int, reverse: bool) -> None:
    clock = ManualClock(1_000)
    store = Store.open(tmp_path_factory.mktemp("rerank") / "s", sync="none")
    try:
        memory = Memory(store, clock=clock)
        ids = [f"f{i}" for i in range(6)]
        for i, fid in enumerate(ids):
            memory.remember(f"plum note {i}", id=fid)
        memory.remember("plum note older", id="g", supersedes=["f5"])  # f5: historical

        def write() -> None:
            for i in sorted(superseded):
                memory.remember(f"pear {i}", id=f"s{i}", supersedes=[ids[i]])
            memory.forget({"ids": [ids[i] for i in sorted(forgotten)] + ["g"]})

        order: list[str] = []

        def rerank(query: str, candidates: Sequence[RerankCandidate]) -> list[str]:
            got = _while_it_runs(write, lambda xs: xs[::-1] if reverse else xs)(query,
                                                                               candidates)
            order.extend(got)
            return got

        got = memory.recall("plum", history=history, k=k, rerank=rerank)
        want = []
        for fid in order:
            rec = memory.get(fid)
            if rec is not None and wanted(history, rec.status):
                want.append((fid, rec.status))
        assert [(r.id, r.status) for r in got] == want[:k]
    finally:
        store.close()
