"""Guarantee: every relations call answers bad input with a holomem error (invalid /
limit / not found / conflict), never an internal one, and a refused call writes
nothing."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import HolomemError, InvalidError, Memory, NotFoundError
from holomem.api.memory.facts import records as fact_records
from holomem.api.memory.graph import evidence

_values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                    st.binary(max_size=5), st.lists(st.text(max_size=5), max_size=3),
                    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
                    st.sampled_from(["a", "b", "", "a\x00", "x" * 600]))


def _prepared(memory: Memory) -> None:
    if memory.get("a") is None:
        memory.remember("alpha fact", id="a")
        memory.remember("beta fact", id="b")
        memory.relate("a", "b", "cites")


def _refused_or_answered(memory: Memory, call: Any) -> None:
    """Run ``call``: an answer, or a holomem error after which nothing was written."""
    revision = memory.store.revision
    try:
        call()
    except HolomemError:
        assert memory.store.revision == revision


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(args=st.lists(_values, min_size=3, max_size=4))
def test_relate_and_unrelate_refuse_bad_input_cleanly(memory: Memory, args: list[Any]) -> None:
    _prepared(memory)
    _refused_or_answered(memory, lambda: memory.unrelate(*args[:3]))
    _refused_or_answered(memory, lambda: memory.relate(*args))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=_values, b=_values, c=_values, d=_values, e=_values)
def test_links_and_why_refuse_bad_input_cleanly(memory: Memory, a: Any, b: Any, c: Any,
                                                d: Any, e: Any) -> None:
    _prepared(memory)
    _refused_or_answered(memory, lambda: memory.links(a, b, c, as_of=d, known_at=e))
    _refused_or_answered(memory, lambda: memory.links("a", b, c))
    _refused_or_answered(memory, lambda: memory.why(a, b, c, d))
    _refused_or_answered(memory, lambda: memory.why("a", b, c, d, as_of=e))
    _refused_or_answered(memory, lambda: memory.why("alpha", 2, None, e, namespace=d))


def test_an_imported_relation_time_out_of_range_is_refused_and_links_stay_readable(
        memory: Memory) -> None:
    _prepared(memory)
    memory.remember("gamma fact", id="c")
    for time in (2**62, 2**62 + 5, 2**63, 2**70, -1):
        revision = memory.store.revision
        with pytest.raises(InvalidError, match="time must be"):
            memory.call("import", {"records": [], "relations": [
                {"fromId": "a", "toId": "c", "relation": "late", "time": time}]})
        assert memory.store.revision == revision
    assert [link.relation for link in memory.links("a").links] == ["cites"]
    assert memory.why("a").start == "a"
    assert len(list(memory.export())) == 3


def test_why_of_a_fact_forgotten_between_its_two_reads_answers_as_a_query(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    # why() looks the id up in one read and walks in another: a forget between them
    # (simulated: the first look-up still saw the fact) must not reach a vacated slot.
    _prepared(memory)
    memory.forget({"ids": ["a"]})
    real = evidence.is_start
    calls = iter([True])
    monkeypatch.setattr(evidence, "is_start",
                        lambda *args: next(calls, None) or real(*args))
    result = memory.why("a")
    assert result.start != "a" and result.query == "a"


def test_set_confidence_of_a_fact_forgotten_just_after_is_not_found(
        memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    _prepared(memory)
    # (simulated: the record read after the write finds the fact gone)
    monkeypatch.setattr(fact_records, "get", lambda *args: None)
    with pytest.raises(NotFoundError, match="forgotten"):
        memory.set_confidence("a", 0.5)
