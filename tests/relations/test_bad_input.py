"""Guarantee: every relations call answers bad input with a holomem error (invalid /
limit / not found / conflict), never an internal one, and a refused call writes
nothing."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import HolomemError, Memory

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
