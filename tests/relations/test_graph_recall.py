"""Guarantee: graph recall is off unless asked for (recall without the option is bit
for bit what it was, links or not), and when on it adds facts reached from the top
hits through links and shared entities, scored own + weight^hop x the seed's score,
restricted like every result, with explain showing the path."""

from __future__ import annotations

import pytest

from holomem import InvalidError, LimitError, ManualClock, Memory, Store
from holomem.api.engine import View
from holomem.api.memory.graph import reach, walk
from holomem.api.memory.graph.types import GraphRecall
from tests.relations.test_graph_recall_reference import reference_reach


def _facts(memory: Memory) -> None:
    memory.remember("alice moved to paris last year", id="a", entities=["alice"])
    memory.remember("the city has a famous museum", id="b")
    memory.remember("bob adopted a dog", id="c", entities=["alice"])
    memory.remember("the museum opens at nine", id="d")
    memory.remember("weather report for monday", id="e", namespace=["other"],
                    entities=["alice"])
    memory.relate("a", "b", "mentions")
    memory.relate("b", "d", "about")


def _ranked(results: list) -> list[tuple[str, float]]:  # type: ignore[type-arg]
    return [(r.id, r.score) for r in results]


def test_recall_without_the_option_is_unchanged_by_links(memory: Memory) -> None:
    for fid, text in (("a", "alice moved to paris"), ("b", "paris is big"),
                      ("c", "alice likes paris")):
        memory.remember(text, id=fid)
    queries = ("alice paris", "paris", "big city", "alice")
    before = {q: _ranked(memory.recall(q, k=3)) for q in queries}
    docs = {q: [(h.id, h.score) for h in memory.store.search_documents(q, k=3)]
            for q in queries}
    memory.relate("a", "b", "mentions")
    memory.relate("c", "a", "agrees")
    for q in queries:
        assert _ranked(memory.recall(q, k=3)) == before[q] == docs[q]  # bit for bit
        assert _ranked(memory.recall(q, k=3, graph=None)) == before[q]


def test_reached_facts_score_their_bonus_and_explain_the_path(memory: Memory) -> None:
    _facts(memory)
    plain = memory.recall("where did alice move")
    assert [r.id for r in plain] == ["a"]
    top = plain[0].score
    found = memory.recall("where did alice move", graph={"hops": 1, "weight": 0.5},
                          explain=True)
    assert [r.id for r in found] == ["a", "b", "c"]  # e is in another namespace
    assert found[0].score == top and found[0].explanation.graph is None
    for r in found[1:]:
        assert r.score == pytest.approx(0.5 * top)
    why_b = found[1].explanation.graph
    assert why_b.seed == "a" and why_b.hops == 1
    assert [(s.from_id, s.to_id, s.via, s.relation) for s in why_b.path] == [
        ("a", "b", "link", "mentions")]
    why_c = found[2].explanation.graph
    assert [(s.via, s.entity) for s in why_c.path] == [("entity", "alice")]
    two = memory.recall("where did alice move", graph={"hops": 2, "weight": 0.5,
                                                       "entities": False})
    assert [(r.id, r.score) for r in two] == [("a", top), ("b", pytest.approx(0.5 * top)),
                                              ("d", pytest.approx(0.25 * top))]
    assert memory.explain("where did alice move", "d",
                          graph={"hops": 2, "entities": False}).graph.hops == 2


def test_a_reached_fact_adds_its_bonus_to_its_own_score(memory: Memory) -> None:
    memory.remember("rocket launch delayed by the storm", id="x")
    memory.remember("the launch of the rocket", id="y")
    memory.remember("storm clouds over the coast", id="z")
    memory.remember("an unrelated line", id="n")
    memory.relate("x", "z", "caused_by")
    q = "rocket launch storm"
    plain = dict(_ranked(memory.recall(q, k=3)))
    assert list(plain) == ["x", "y", "z"]
    found = memory.recall(q, k=2, graph={"weight": 0.5, "entities": False})
    # z is no seed (the seeds are the top k = 2): its own score plus 0.5 x x's score.
    assert [r.id for r in found] == ["x", "z"]
    assert found[1].score == pytest.approx(plain["z"] + 0.5 * plain["x"])
    assert found[0].score == plain["x"]


def test_a_direct_hit_is_never_displaced_by_the_bonus_alone(memory: Memory) -> None:
    for i in range(5):
        memory.remember(f"rocket launch report number {i}", id=f"r{i}")
        memory.remember(f"unrelated filler text {i}", id=f"f{i}")
        memory.relate(f"r{i}", f"f{i}", "next")
    plain = memory.recall("rocket launch", k=5)
    found = memory.recall("rocket launch", k=5, graph={"weight": 0.9})
    assert [r.id for r in found] == [r.id for r in plain]  # five strong hits stay
    assert memory.recall("rocket launch", k=10, graph={"weight": 0.9})[5].id.startswith("f")


def test_graph_recall_keeps_to_filters_relations_and_known_at(memory: Memory,
                                                               clock: ManualClock) -> None:
    _facts(memory)
    t = clock.now_ms()
    clock.advance(10)
    memory.remember("a late note", id="late")
    memory.relate("a", "late", "mentions")
    q = "where did alice move"
    assert "late" in [r.id for r in memory.recall(q, graph={"entities": False})]
    assert "late" not in [r.id for r in memory.recall(q, known_at=t,
                                                      graph={"entities": False})]
    assert [r.id for r in memory.recall(q, graph={"relation": "about"})] == ["a", "c"]
    assert "b" not in [r.id for r in memory.recall(
        q, graph={"entities": False}, filter={"metadata": {"x": 1}})]


def test_the_graph_option_is_checked(memory: Memory) -> None:
    with pytest.raises(LimitError):
        memory.recall("x", graph={"hops": 3})
    for bad in ({"hops": 0}, {"weight": 1.5}, {"weight": "high"}, {"depth": 1}, "on",
                {"relation": ""}):
        with pytest.raises(InvalidError):
            memory.recall("x", graph=bad)


def test_explain_says_which_bound_cut_the_walk(memory: Memory,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    many = reach.MAX_ENTITY_FANOUT + 1
    memory.remember_many([{"id": f"f{i}", "text": f"filler line {i}", "entities": ["common"]}
                          for i in range(many)])
    memory.remember("the lighthouse keeper", id="seed", entities=["common", "rare"])
    memory.remember("a note on keepers", id="other", entities=["rare"])
    memory.remember("a second note", id="third", entities=["rare"])
    q = "lighthouse"
    found = memory.recall(q, graph={"hops": 1, "weight": 0.5}, explain=True)
    assert [r.id for r in found] == ["seed", "other", "third"]  # "rare" walked, not "common"
    cut = found[0].explanation.graph_bounds
    assert cut is not None and cut.entities_not_walked == {"common": many + 1}
    assert cut.entities_not_walked_count == 1 and not cut.reached_cap
    assert all(r.explanation.graph_bounds == cut for r in found)
    # Nothing cut (no entity walked): no bounds to report.
    plain = memory.recall(q, graph={"hops": 1, "entities": False}, explain=True)
    assert plain[0].explanation.graph_bounds is None
    monkeypatch.setattr(reach, "MAX_REACHED", 1)
    capped = memory.recall(q, graph={"hops": 1, "weight": 0.5}, explain=True)
    assert [r.id for r in capped] == ["seed", "other"]  # the first fact reached, then stop
    cut = capped[0].explanation.graph_bounds
    assert cut is not None and cut.reached_cap and cut.max_reached == 1


def test_another_namespace_never_changes_a_walk_nor_shows_in_its_report(
        memory: Memory) -> None:
    memory.remember("apple pie", id="a1", entities=["alice"], namespace=["t1"])
    memory.remember("a garden", id="a2", entities=["alice"], namespace=["t1"])
    g = {"hops": 1, "weight": 0.5}
    assert [r.id for r in memory.recall("apple", namespace=["t1"], graph=g)] == ["a1", "a2"]
    memory.remember_many([{"text": f"other {i}", "entities": ["alice"], "namespace": ["t2"]}
                          for i in range(reach.MAX_ENTITY_FANOUT + 10)])
    (a1, s1), (a2, s2) = _ranked(memory.recall("apple", namespace=["t1"], graph=g))
    assert (a1, a2) == ("a1", "a2") and s2 == 0.5 * s1  # still reached through "alice"
    explained = memory.explain("apple", "a1", namespace=["t1"], graph=g)
    assert explained.graph_bounds is None  # t2's "alice" is not t1's


def test_a_fact_written_after_known_at_is_no_bridge_for_the_walk(
        memory: Memory, clock: ManualClock) -> None:
    memory.remember("the lighthouse keeper", id="seed", entities=["keeper"])
    memory.remember("an old log book", id="x", entities=["book"])
    then = clock.now_ms()
    clock.advance(1000)
    memory.remember("the keeper's book", id="late", entities=["keeper", "book"])
    g = {"hops": 2, "weight": 0.5}
    now = [r.id for r in memory.recall("lighthouse", graph=g)]
    assert now == ["seed", "late", "x"]
    known = memory.recall("lighthouse", graph=g, known_at=then, explain=True)
    assert [r.id for r in known] == ["seed"]  # "late" was not known, so nor was its path


def test_the_walk_reports_only_bounds_met_by_seeds_it_walked(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach, "MAX_REACHED", 2)
    monkeypatch.setattr(reach, "MAX_ENTITY_FANOUT", 2)
    memory.remember("apple apple apple", id="s1")
    memory.remember("apple pear", id="s2", entities=["zed"])
    for i in range(3):
        memory.remember(f"note {i}", id=f"n{i}")
        memory.relate("s1", f"n{i}", "cites")
    for i in range(2):
        memory.remember("zed", id=f"z{i}", entities=["zed"])
    reports = []
    for batch in (16, 1):  # however many seeds are walked at once
        monkeypatch.setattr(walk, "FIRST_BATCH", batch)
        bounds = memory.explain("apple", "s1", graph={"hops": 1}).graph_bounds
        assert bounds is not None and bounds.reached_cap
        reports.append(bounds)
    # s1's links reach the cap: s2, whose "zed" is too common, is never walked
    assert reports[0] == reports[1] and reports[0].entities_not_walked == {}


def test_a_two_hop_walk_walks_on_from_each_fact_once(memory: Memory) -> None:
    """The second hop's steps are bounded by the facts walked on from, each once, not
    by the seeds times what each reaches (every seed here reaches the same facts)."""
    n, carried, sharing = 100, 8, 10  # fact i carries 8 entities, each held by 10 facts
    kinds = n * carried // sharing
    memory.remember_many([{"id": f"f{i}", "text": f"cats {i}",
                           "entities": [f"e{(i * carried + t) % kinds}" for t in range(carried)]}
                          for i in range(n)])
    out_of_one = carried * (sharing - 1)  # the steps out of any one fact
    k = 50
    seeds = [(r.id, r.score) for r in memory.recall("cats", k=k)]
    g = GraphRecall(hops=2, weight=0.5)

    def walked(view: View) -> tuple[reach.Reach, dict[int, reach.Reached]]:
        slots = [(view.slot(i), s) for i, s in seeds]
        return (walk.reach(view, slots, g, 10**15, None),
                reference_reach(view, slots, g, 10**15, None))

    found, expected = memory.store.read(walked)
    assert found.items() == sorted(expected.items())  # the step-by-step walk's answer
    assert len(found) == n - k  # every other fact is reached
    # each seed walked from once, each fact of its first hop walked on from once
    assert found.steps <= (2 * k + len(found)) * out_of_one


@pytest.mark.parametrize("config", [
    {"fusion": {"method": "linear", "lexicalWeight": 0.5}},
    {"context": {"neighbors": {"weight": 0.3, "window": 1}}},
    {"supersession": "latest-by-subject", "historicalWeight": 0.5,
     "recency": {"exponential": {"halfLifeMs": 5000}}},
])
def test_explain_reports_the_graph_bonus_apart_from_the_fused_score(
        store: Store, clock: ManualClock, config: dict[str, object]) -> None:
    memory = Memory(store, config, clock=clock)
    rows = [("a", "alpha cats", [1.0, 0.0, 0.0]), ("z", "zeta filler", [0.0, 0.0, 1.0]),
            ("b", "beta dogs", [0.0, 1.0, 0.0]), ("c", "gamma cats and more", [0.5, 0.5, 0.0]),
            ("d", "delta birds", [0.2, 0.1, 0.9])]
    for fid, text, vector in rows:
        memory.remember(text, id=fid, embedding=vector, subject="s" if fid == "c" else None)
        clock.advance(1000)
    memory.relate("a", "b", "r")
    memory.relate("c", "d", "r")
    memory.relate("a", "c", "r")
    g = {"hops": 2, "weight": 0.5}
    q = {"embedding": [1.0, 0.1, 0.0], "k": 1}
    scores = {r.id: r.score for r in memory.recall("cats", graph=g, **q)}
    reached = 0
    for fid, _, _ in rows:
        alone = memory.explain("cats", fid, **q)
        both = memory.explain("cats", fid, graph=g, **q)
        # the fact's own fused score, its parts and context bonus, as without the graph
        assert both.fusion == alone.fusion
        assert both.context_bonus == alone.context_bonus
        f = both.fusion
        assert f.lexical_part is not None and f.semantic_part is not None
        # the weights times the parts (and the context policy's share) add up to it
        assert f.lexical_weight * f.lexical_part + f.semantic_weight * f.semantic_part \
            + both.context_bonus == pytest.approx(f.fused_score)
        if both.graph is None:
            continue
        reached += 1
        assert both.score == pytest.approx(
            (f.fused_score + both.graph.bonus) * both.recency_multiplier
            * both.history_multiplier * both.usefulness_multiplier)
        if fid in scores:
            assert both.score == scores[fid]
    assert reached == 3


def test_a_walk_cut_on_its_first_hop_reports_no_entity_of_facts_it_never_walked_on_from(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reach, "MAX_REACHED", 1)
    monkeypatch.setattr(reach, "MAX_ENTITY_FANOUT", 2)
    memory.remember("apple", id="s")
    memory.remember("note one", id="n1", entities=["zed"])
    memory.remember("note two", id="n2")
    for i in range(2):
        memory.remember("zed", id=f"z{i}", entities=["zed"])
    memory.relate("s", "n1", "cites")
    memory.relate("s", "n2", "cites")
    g = {"hops": 2}
    assert memory.explain("apple", "n1", k=1, graph=g).graph is not None
    assert memory.explain("apple", "n2", k=1, graph=g).graph is None  # past the cap
    bounds = memory.explain("apple", "s", k=1, graph=g).graph_bounds
    assert bounds is not None and bounds.reached_cap
    assert bounds.entities_not_walked == {}  # n1's "zed" was never walked on to
