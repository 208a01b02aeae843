"""Filters (docs/contract.md §4b) select exactly what a brute-force evaluator selects.

Hypothesis draws a store of facts with random metadata (numbers, strings, booleans,
nulls, lists and objects under a few keys, or no key at all), ingest and event times,
and random filters over the whole grammar ($eq $ne $gt $gte $lt $lte $in $nin
$exists, $and $or $not, the time bounds). Every filter's result — through ``list``
(exhaustive) and ``recall`` (the ranking restricted to what it holds for) — must be
exactly what a plain Python evaluation of the same filter over each fact's metadata
gives. Filters that cannot be evaluated are refused with ``invalid_request`` or
``limit``, and nothing else.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import InvalidError, LimitError, ManualClock, Memory, Store
from holomem.api.memory import filters
from holomem.projections.catalog import Catalog
from holomem.projections.metadata import MetadataIndex

KEYS = ["a", "b", "c"]
scalars = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, -1.5, 2.0]),
                    st.sampled_from(["x", "y", "z", ""]), st.booleans(), st.none())
values = st.one_of(scalars, st.lists(scalars, max_size=2),
                   st.dictionaries(st.sampled_from(["p", "q"]), scalars, max_size=2))
metadata = st.dictionaries(st.sampled_from(KEYS), values, max_size=3)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    return bool(a == b)


def number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def holds(cond: Any, meta: dict[str, Any], key: str) -> bool:
    ops = cond if isinstance(cond, dict) and any(k.startswith("$") for k in cond) \
        else {"$eq": cond}
    for op, arg in ops.items():
        present = key in meta
        v = meta.get(key)
        if op == "$eq":
            ok = present and same(v, arg)
        elif op == "$ne":
            ok = not (present and same(v, arg))
        elif op == "$in":
            ok = present and any(same(v, x) for x in arg)
        elif op == "$nin":
            ok = not (present and any(same(v, x) for x in arg))
        elif op == "$exists":
            ok = present == arg
        else:
            comparable = present and ((number(v) and number(arg)) or
                                      (isinstance(v, str) and isinstance(arg, str)))
            ok = comparable and {"$gt": v > arg, "$gte": v >= arg, "$lt": v < arg,
                                 "$lte": v <= arg}[op] if comparable else False
        if not ok:
            return False
    return True


def brute(flt: dict[str, Any], fact: dict[str, Any]) -> bool:
    event = fact["event"]
    checks = {
        "metadata": lambda item: all(holds(c, fact["metadata"], k) for k, c in item.items()),
        "ingestedAfter": lambda item: fact["ingest"] > item,
        "ingestedBefore": lambda item: fact["ingest"] < item,
        "eventAfter": lambda item: event is not None and event > item,
        "eventBefore": lambda item: event is not None and event < item,
        "$and": lambda item: all(brute(f, fact) for f in item),
        "$or": lambda item: any(brute(f, fact) for f in item),
        "$not": lambda item: not brute(item, fact),
    }
    return all(checks[key](item) for key, item in flt.items())


def conditions() -> st.SearchStrategy[Any]:
    compare = st.sampled_from(["$gt", "$gte", "$lt", "$lte"])
    ordered = st.one_of(st.integers(-3, 3), st.sampled_from([0.5, "y", ""]))
    return st.one_of(
        values,
        st.dictionaries(compare, ordered, min_size=1, max_size=2),
        st.fixed_dictionaries({"$eq": values}), st.fixed_dictionaries({"$ne": values}),
        st.fixed_dictionaries({"$in": st.lists(values, max_size=3)}),
        st.fixed_dictionaries({"$nin": st.lists(values, max_size=3)}),
        st.fixed_dictionaries({"$exists": st.booleans()}))


leaf = st.one_of(
    st.fixed_dictionaries({"metadata": st.dictionaries(st.sampled_from(KEYS), conditions(),
                                                       min_size=1, max_size=2)}),
    st.fixed_dictionaries({"ingestedAfter": st.integers(1_000, 1_040)}),
    st.fixed_dictionaries({"ingestedBefore": st.integers(1_000, 1_040)}),
    st.fixed_dictionaries({"eventAfter": st.integers(0, 40)}),
    st.fixed_dictionaries({"eventBefore": st.integers(0, 40)}))
filter_trees = st.recursive(leaf, lambda inner: st.one_of(
    st.fixed_dictionaries({"$and": st.lists(inner, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"$or": st.lists(inner, min_size=1, max_size=3)}),
    st.fixed_dictionaries({"$not": inner})), max_leaves=6)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(facts=st.lists(st.tuples(metadata, st.one_of(st.none(), st.integers(0, 40))),
                      min_size=1, max_size=25),
       flts=st.lists(filter_trees, min_size=1, max_size=4))
def test_filter_results_equal_a_brute_force_evaluation(
        tmp_path_factory: pytest.TempPathFactory, facts: list[tuple[dict[str, Any], int | None]],
        flts: list[dict[str, Any]]) -> None:
    clock = ManualClock(1_000)
    with Store.open(tmp_path_factory.mktemp("f") / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        truth = []
        for i, (meta, event) in enumerate(facts):
            memory.remember(id=f"f{i}", text=f"shared word fact {i}", metadata=meta or None,
                            event_time=event)
            truth.append({"id": f"f{i}", "metadata": meta, "ingest": clock.now_ms(),
                          "event": event})
            clock.advance(1)
        for flt in flts:
            expected = [t["id"] for t in truth if brute(flt, t)]
            listed = [f.id for f in memory.list(filter=flt_list(flt), limit=1000).facts]
            assert listed == expected, flt
            recalled = sorted((r.id for r in memory.recall("shared word", k=1000, filter=flt)),
                              key=lambda i: int(i[1:]))
            assert recalled == expected, flt


def flt_list(flt: dict[str, Any]) -> dict[str, Any]:
    """The same filter as ``list`` takes it: its keys in the list filter's object."""
    return dict(flt)


def test_a_filter_restricts_the_unfiltered_ranking_without_reordering_it(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(1_000))
        for i in range(40):
            memory.remember(id=f"f{i}", text=" ".join(["tea"] * (1 + i % 7) + ["cup"] * i),
                            metadata={"n": i, "even": i % 2 == 0})
        full = [r.id for r in memory.recall("tea cup", k=40)]
        even = [r.id for r in memory.recall("tea cup", k=40,
                                            filter={"metadata": {"even": True}})]
        assert even == [i for i in full if int(i[1:]) % 2 == 0]
        scores = {r.id: r.score for r in memory.recall("tea cup", k=40)}
        for r in memory.recall("tea cup", k=40, filter={"metadata": {"n": {"$lt": 10}}}):
            assert math.isclose(r.score, scores[r.id])


@pytest.mark.parametrize("bad, error", [
    ({"metadata": {"a": {"$regex": "x"}}}, InvalidError),
    ({"metadata": {"a": {"$gt": True}}}, InvalidError),
    ({"metadata": {"a": {"$gt": [1]}}}, InvalidError),
    ({"metadata": {"a": {"$in": 3}}}, InvalidError),
    ({"metadata": {"a": {"$exists": 1}}}, InvalidError),
    ({"metadata": {"a": {"$eq": 1, "plain": 2}}}, InvalidError),
    ({"colour": "red"}, InvalidError),
    ({"$or": []}, InvalidError),
    ({"ingestedAfter": "yesterday"}, InvalidError),
    ({"metadata": {"a": {"$in": list(range(filters.MAX_IN + 1))}}}, LimitError),
    ({"$or": [{"metadata": {"a": i}} for i in range(filters.MAX_NODES + 1)]}, LimitError),
    # null is {"$eq": null}, which a turn's field refuses: list took it for no clause
    # and listed every fact, while recall refused it.
    ({"speaker": None}, InvalidError),
    ({"session": None}, InvalidError),
    ({"position": None}, InvalidError),
])
def test_a_filter_that_cannot_be_evaluated_is_refused(memory: Memory, bad: dict[str, Any],
                                                      error: type[Exception]) -> None:
    memory.remember(text="anything at all", metadata={"a": 1})
    with pytest.raises(error):
        memory.recall("anything", filter=bad)
    with pytest.raises(error):
        memory.list(filter=bad)
    with pytest.raises(error):
        memory.call("recall", {"query": "anything", "filter": bad})
    with pytest.raises(error):
        memory.call("list", {"filter": bad})


@pytest.mark.parametrize("bad, named", [
    ({"position": 2**70}, "filter.position"),
    ({"speaker": "a", "position": {"$in": [1, -2**65]}}, "filter.position"),
    ({"metadata": {"a": {"$gt": 2**64}}}, "filter.metadata.a"),
    ({"metadata": {"a": {"$eq": {"deep": [float("nan")]}}}}, "filter.metadata.a"),
])
def test_a_filter_value_json_cannot_hold_is_refused_naming_its_field(
        memory: Memory, bad: dict[str, Any], named: str) -> None:
    memory.remember(text="anything at all", metadata={"a": 1}, speaker="a", session="s",
                    position=1)
    with pytest.raises(InvalidError) as refused:
        memory.list(filter=bad)
    assert str(refused.value).startswith(named), str(refused.value)
    assert "metadata.v" not in str(refused.value)


def test_a_filter_nested_too_deeply_is_a_limit(memory: Memory) -> None:
    deep: dict[str, Any] = {"metadata": {"a": 1}}
    for _ in range(filters.MAX_DEPTH):
        deep = {"$not": deep}
    with pytest.raises(LimitError):
        memory.recall("x", filter=deep)


def test_contradict_takes_a_filter(store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)  # no supersession: all three stay current
    memory.remember(text="Lisa lives in Paris", subject="lisa/city", metadata={"src": "a"})
    memory.remember(text="Lisa lives in Rome", subject="lisa/city", metadata={"src": "a"})
    memory.remember(text="Lisa lives in Oslo", subject="lisa/city", metadata={"src": "b"})
    with_b = memory.contradict(k=10)
    only_a = memory.contradict(k=10, filter={"metadata": {"src": "a"}})
    assert len(only_a.pairs) == 1 and len(with_b.pairs) >= len(only_a.pairs)


def test_the_metadata_forget_scope_reads_the_filter_grammar(memory: Memory) -> None:
    for i in range(6):
        memory.remember(id=f"f{i}", text=f"fact {i}", metadata={"n": i, "tag": "x" * (i % 2)})
    report = memory.forget({"metadata": {"n": {"$gte": 4}}}, dry_run=True)
    assert report.removed == ["f4", "f5"]
    assert memory.forget({"metadata": {"n": 1, "tag": "x"}}, dry_run=True).removed == ["f1"]
    with pytest.raises(InvalidError):
        memory.forget({"metadata": {"n": {"$near": 1}}})
    assert len(memory.list().facts) == 6


#: Integers about 2**53, where float64 stops holding every integer, and floats there.
near_edge = st.one_of(
    st.integers(-3, 3).map(lambda d: 2**53 + d), st.integers(-3, 3).map(lambda d: -2**53 + d),
    st.integers(0, 3).map(lambda d: 2**63 - 1 - d), st.sampled_from([2.0**53, -2.0**53,
                                                                      2.0**63, 1.5, 0]))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(stored=st.lists(near_edge, min_size=1, max_size=6), operand=near_edge,
       op=st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin"]))
def test_a_large_integer_compares_exactly_as_json_numbers_do(
        tmp_path_factory: pytest.TempPathFactory, stored: list[int | float],
        operand: int | float, op: str) -> None:
    # Numbers were indexed as float64, so 2**53 + 1 equalled 2**53 (while [2**53 + 1]
    # did not equal [2**53]) and {"$gt": 2**53} missed 2**53 + 1.
    path = tmp_path_factory.mktemp("n") / "s"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=ManualClock(1_000))
        for i, n in enumerate(stored):
            memory.remember(id=f"f{i}", text=f"number {i}", metadata={"n": n})
        cond = {op: [operand] if op in ("$in", "$nin") else operand}
        expected = [f"f{i}" for i, n in enumerate(stored) if holds(cond, {"n": n}, "n")]
        assert [f.id for f in memory.list(filter={"metadata": {"n": cond}}).facts] == expected
        store.checkpoint()  # holds the index the filter built: the numbers as given
    with Store.open(path, sync="none") as again:
        memory = Memory(again, clock=ManualClock(1_000))
        assert [f.id for f in memory.list(filter={"metadata": {"n": cond}}).facts] == expected


def test_a_checkpointed_metadata_index_that_may_have_rounded_an_integer_is_built_again(
) -> None:
    # A checkpoint written when numbers were float64 may hold 2**53 for 2**53 + 1: its
    # index is left out (built again from the text segment on use), never trusted.
    index = MetadataIndex(Catalog())
    index.restore({"built": True, "indexed": 1,
                   "columns": [["n", [0], [[0, float(2**53)]], []]]})
    assert index.column("n") is None
    index.restore({"built": True, "indexed": 0,
                   "columns": [["n", [0], [[0, 2**53 + 1]], []]]})
    column = index.column("n")
    assert column is not None and column.equal(2**53 + 1).tolist() == [0]
    assert column.equal(2**53).tolist() == []


@pytest.mark.parametrize("key", ["", "a\nb", "tab\there", "\x7f", "é 日本 🙂"])
def test_every_metadata_key_a_fact_can_hold_can_be_filtered_on(memory: Memory, key: str) -> None:
    # The filter checked its keys as ids, so a fact stored with the key "" or one
    # holding a control character could never be selected (invalid_request).
    memory.remember(id="with", text="has the key", metadata={key: 1})
    memory.remember(id="without", text="lacks the key", metadata={"other": 1})
    assert [f.id for f in memory.list(filter={"metadata": {key: 1}}).facts] == ["with"]
    assert [f.id for f in memory.list(
        filter={"metadata": {key: {"$exists": False}}}).facts] == ["without"]
    assert memory.forget({"metadata": {key: 1}}, dry_run=True).removed == ["with"]
