"""Explanations agree with what recall did (docs/contract.md §4 Explain): a result's explanation
says it was retrieved, its rank follows the result order, its lexical score is the
document hit's, the matched terms add up to it, and the multipliers multiply to the
score. A fact that did not come back is explained with the reason.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, NotFoundError, Store
from holomem.api.memory.config import (
    ContextConfig,
    Exponential,
    FusionConfig,
    Neighbors,
    RecencyConfig,
)

HOUR = 3_600_000


def fill(memory: Memory, clock: ManualClock) -> None:
    clock.set(100 * HOUR)
    rows = [
        ("p1", "peggy lives in paris near the river", "peggy/city", 10 * HOUR),
        ("p2", "peggy lives in berlin by the park", "peggy/city", 20 * HOUR),
        ("p3", "peggy lives in madrid close to the river", "peggy/city", 30 * HOUR),
        ("q1", "quentin likes the river and the sea", None, 15 * HOUR),
        ("q2", "quentin likes mountains", None, 25 * HOUR),
        ("r1", "rupert repairs bicycles in paris", "rupert/job", 5 * HOUR),
        ("r2", "rupert repairs clocks in berlin", "rupert/job", 35 * HOUR),
        ("s1", "sybil collects stamps", None, 40 * HOUR),
    ]
    for fid, text, subject, start in rows:
        memory.remember(id=fid, text=text, subject=subject, valid_from=start,
                        embedding=[float(len(text) % 7) + 1, float(len(fid)), 1.0])
        clock.advance(1_000)
    clock.set(50 * HOUR)


@pytest.fixture
def recency_memory(store: Store, clock: ManualClock) -> Memory:
    config = MemoryConfig(supersession="latest-by-subject",
                          recency=RecencyConfig(exponential=Exponential(half_life_ms=10 * HOUR)),
                          historical_weight=0.25)
    memory = Memory(store, config, clock=clock)
    fill(memory, clock)
    return memory


QUERIES = ["peggy lives river", "paris", "berlin river", "rupert repairs", "the",
           "quentin likes the sea", "lives in paris by the river"]


@pytest.mark.parametrize("history", ["current", "all", "historical"])
@pytest.mark.parametrize("as_of", [None, 12 * HOUR, 22 * HOUR, 32 * HOUR])
def test_explanations_of_recall_results_agree_with_the_results(
        recency_memory: Memory, store: Store, history: str, as_of: int | None) -> None:
    memory = recency_memory
    for q in QUERIES:
        results = memory.recall(q, history=history, as_of=as_of, explain=True, k=20)
        hits = {h.id: h for h in store.search_documents(q, k=100)}
        ranks = []
        for r in results:
            e = r.explanation
            assert e is not None and e.id == r.id
            assert e.retrieved and e.reason == "retrieved"
            assert e.status == r.status
            assert e.rank is not None
            ranks.append(e.rank)
            # The lexical score is document search's, to the bit.
            assert e.lexical_score == hits[r.id].lexical_score
            assert e.fusion.fused_score == hits[r.id].score
            assert e.fusion.method == "bm25"
            # Matched terms add up to the lexical score.
            total = math.fsum(m.score for m in e.matched_terms)
            assert abs(total - e.lexical_score) <= 1e-12
            assert all(m.tf >= 1 and m.idf > 0 for m in e.matched_terms)
            # The multipliers multiply to the score.
            product = (e.fusion.fused_score * e.recency_multiplier * e.history_multiplier
                       * e.usefulness_multiplier)
            assert e.score == r.score
            assert math.isclose(product, r.score, rel_tol=1e-12, abs_tol=0.0)
            assert e.history_multiplier == (1.0 if r.status == "current" else 0.25)
            assert e.valid_at == (as_of if as_of is not None else memory.clock.now_ms())
            # A standalone explain of the same fact says the same thing.
            alone = memory.explain(q, r.id, history=history, as_of=as_of, k=20)
            assert alone == e
        # Results come back in rank order (rank counts every candidate, history
        # included, so it may skip the ones filtered out).
        assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)
        if history == "all":
            assert ranks == list(range(1, len(ranks) + 1))
        assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_recency_multiplier_is_reported(recency_memory: Memory) -> None:
    memory = recency_memory
    # s1 began at 40h; evaluated at 50h it is one half-life old.
    e = memory.explain("sybil stamps", "s1")
    assert e.recency_multiplier == 0.5
    assert e.score == e.fusion.fused_score * 0.5


def test_explanations_with_an_embedding(recency_memory: Memory, store: Store) -> None:
    memory = recency_memory
    emb = [1.0, 2.0, 0.5]
    for q in QUERIES:
        hits = {h.id: h for h in store.search_documents(q, k=100, embedding=emb)}
        for r in memory.recall(q, embedding=emb, explain=True, history="all", k=20):
            e = r.explanation
            assert e is not None
            assert e.fusion.method == "bm25+cosine"
            assert (e.fusion.lexical_weight, e.fusion.semantic_weight) == (0.5, 0.5)
            assert e.lexical_score == hits[r.id].lexical_score
            assert e.semantic_score == hits[r.id].semantic_score
            assert e.fusion.fused_score == hits[r.id].score


def test_identity_path_explanations(store: Store, clock: ManualClock) -> None:
    """No links, windows or recency: ranks are the search positions, multipliers 1."""
    memory = Memory(store, clock=clock)
    for n in range(30):
        memory.remember(text=f"walter note {n} about {'tea' if n % 3 else 'coffee'}")
    hits = store.search_documents("walter tea", k=10)
    results = memory.recall("walter tea", explain=True)
    assert [r.id for r in results] == [h.id for h in hits]
    for pos, (r, h) in enumerate(zip(results, hits, strict=True), start=1):
        e = r.explanation
        assert e is not None
        assert e.retrieved and e.rank == pos
        assert e.lexical_score == h.lexical_score and e.score == h.score == r.score
        assert (e.recency_multiplier, e.history_multiplier, e.usefulness_multiplier) == (
            1.0, 1.0, 1.0)
        assert abs(math.fsum(m.score for m in e.matched_terms) - e.lexical_score) <= 1e-12
    # A fact ranked below k is explained as such.
    below = store.search_documents("walter tea", k=20)[15].id
    e = memory.explain("walter tea", below)
    assert not e.retrieved and e.rank == 16
    assert "k=10" in e.reason


def test_superseded_fact_is_explained_with_its_status_and_chain(memory: Memory,
                                                                clock: ManualClock) -> None:
    memory.remember(id="old", text="trent drives a sedan", subject="trent/car", valid_from=10)
    clock.advance(5)
    memory.remember(id="new", text="trent drives a truck", subject="trent/car",
                    valid_from=20)
    e = memory.explain("trent drives", "old")
    assert not e.retrieved
    assert e.status == "superseded"
    assert "superseded" in e.reason
    assert e.rank is not None  # it was a candidate, filtered out by its status
    assert [(c.id, c.status, c.effective_time) for c in e.chain] == [
        ("old", "superseded", 10), ("new", "current", 20)]
    assert memory.explain("trent drives", "new").chain == e.chain
    # With history="all" it does come back.
    assert memory.explain("trent drives", "old", history="all").retrieved
    # Before the new fact began, the old one is current and retrieved.
    e = memory.explain("trent drives", "old", as_of=15)
    assert e.retrieved and e.status == "current"
    assert [c.status for c in e.chain] == ["current", "not-yet-valid"]


def test_expired_and_not_yet_valid_facts_name_their_status(memory: Memory) -> None:
    memory.remember(id="x", text="ursula is in rome", valid_from=100, valid_to=200)
    assert "expired" in memory.explain("ursula rome", "x", as_of=300).reason
    assert "not-yet-valid" in memory.explain("ursula rome", "x", as_of=50).reason
    assert memory.explain("ursula rome", "x", as_of=150).retrieved


def test_fact_without_matching_terms_says_so(memory: Memory) -> None:
    memory.remember(id="v1", text="victor sings opera")
    memory.remember(id="v2", text="wendy paints murals")
    e = memory.explain("opera", "v2")
    assert not e.retrieved
    assert e.matched_terms == []
    assert e.lexical_score == 0.0 and e.rank is None and e.score == 0.0
    assert "no query term" in e.reason
    assert e.status == "current"


RESTRICTIONS = st.fixed_dictionaries({}, optional={
    "subject": st.sampled_from(["s1", "s2", "holomem:working/w"]),
    "entities": st.lists(st.sampled_from(["e1", "e2"]), min_size=1, max_size=2, unique=True),
    "filter": st.sampled_from([{"metadata": {"k": 1}}, {"speaker": "bob"},
                               {"$not": {"metadata": {"k": 1}}}]),
})


@settings(max_examples=40, deadline=None)
@given(restriction=RESTRICTIONS, query=st.sampled_from(["alice river", "alice", "state"]))
def test_a_fact_the_restrictions_leave_out_is_not_said_to_match_no_query_term(
        tmp_path_factory: pytest.TempPathFactory, restriction: dict[str, object],
        query: str) -> None:
    """The reason "no query term matches it" was given to every fact a subject,
    entities, filter or the reserved-subject rule left out, even one whose matched terms
    the same explanation listed; the reason now names the restriction."""
    with Store.open(tmp_path_factory.mktemp("x") / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(1000))
        memory.remember(id="a", text="alice river paris", subject="s1", entities=["e1"],
                        metadata={"k": 1}, speaker="bob", session="x", position=0)
        memory.remember(id="b", text="alice stuff", subject="s2", entities=["e2"])
        memory.remember(id="w", text="alice state river", subject="holomem:working/w")
        for fid in ("a", "b", "w"):
            e = memory.explain(query, fid, **restriction)
            if e.retrieved:
                continue
            if "no query term" in e.reason:
                assert e.matched_terms == []
            else:
                assert e.reason.startswith("not a candidate: ")
                assert fid not in {r.id for r in memory.recall(query, k=10, **restriction)}


def test_each_restriction_is_named_as_the_reason(memory: Memory) -> None:
    memory.remember(id="a", text="alice river", subject="s1", entities=["e1"],
                    metadata={"k": 1})
    memory.remember(id="w", text="alice state", subject="holomem:working/w")
    assert "(subject)" in memory.explain("alice", "a", subject="s2").reason
    assert "(entities)" in memory.explain("alice", "a", entities=["e2"]).reason
    assert "filter" in memory.explain("alice", "a", filter={"metadata": {"k": 2}}).reason
    assert "reserved" in memory.explain("alice", "w").reason
    assert memory.explain("alice", "w", subject="holomem:working/w").retrieved


def test_explain_of_an_unknown_id_is_not_found(memory: Memory) -> None:
    memory.remember(id="y1", text="yvonne knits")
    with pytest.raises(NotFoundError):
        memory.explain("knits", "nope")
    memory.forget({"ids": ["y1"]})
    with pytest.raises(NotFoundError):
        memory.explain("knits", "y1")


def test_nothing_is_explained_unless_asked(memory: Memory) -> None:
    memory.remember(id="z1", text="zara swims daily")
    assert all(r.explanation is None for r in memory.recall("zara swims"))


#: Vectors of 3 dimensions, never all zeros.
VECTORS = st.lists(st.floats(-1.0, 1.0), min_size=2, max_size=2).map(lambda v: [*v, 0.5])


@settings(max_examples=30, deadline=None)
@given(method=st.sampled_from(["linear", "bounded", "floored"]),
       weight=st.floats(0.0, 1.0),
       vectors=st.lists(st.one_of(st.none(), VECTORS), min_size=4, max_size=10),
       query=st.sampled_from(["alice", "river tea", "paris alice tea"]),
       at=VECTORS)
def test_the_fusion_parts_and_the_context_bonus_add_up_to_the_fused_score(
        tmp_path_factory: pytest.TempPathFactory, method: str, weight: float,
        vectors: list[list[float] | None], query: str, at: list[float]) -> None:
    """w x lexicalPart + (1 - w) x semanticPart + contextBonus is each result's fused
    score. A neighbour that neither the query's words nor its vector made a candidate
    (a fact stored without a vector) was given, by the bounded and floored fusions,
    the semantic part of a cosine of 0, which its score never held."""
    words = ["alice", "river", "tea", "paris", "stamps", "clock"]
    config = MemoryConfig(fusion=FusionConfig(method=method, lexical_weight=weight),
                          context=ContextConfig(neighbors=Neighbors(weight=0.4, window=2)))
    with Store.open(tmp_path_factory.mktemp("f") / "s", sync="none") as store:
        memory = Memory(store, config, clock=ManualClock(1000))
        for i, vector in enumerate([[0.0, 0.0, 1.0], *vectors]):
            memory.remember(text=f"{words[i % 6]} {words[(i * 5 + 1) % 6]} n{i}",
                            embedding=vector)
        for r in memory.recall(query, k=10, explain=True, embedding=at):
            e = r.explanation
            assert e is not None and e.fusion.lexical_part is not None
            own = (e.fusion.lexical_weight * e.fusion.lexical_part
                   + e.fusion.semantic_weight * (e.fusion.semantic_part or 0.0))
            assert math.isclose(own + e.context_bonus, e.fusion.fused_score,
                                rel_tol=1e-9, abs_tol=1e-12)
            assert math.isclose(e.score, r.score, rel_tol=1e-12)
