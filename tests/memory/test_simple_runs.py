"""remember_many plans the simple inputs of a batch of new ids (a text and maybe an
id, nothing else) a column at a time: the same events, the same results and the same
errors as planning each input on its own — with repeated texts and ids in the batch,
ids already stored (as facts, with the same payload or another, or as plain
documents), inputs of other kinds between the simple ones (subjects, supersession),
and an entity extractor that finds something. Under latest-by-subject, a batch whose
other inputs each add only a subject is planned a column at a time too.

The same calls go to two stores, one of which has the column path turned off."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from unittest import mock

import hypothesis.strategies as st
import msgspec
import pytest
from hypothesis import HealthCheck, example, given, settings

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.remember.planner import Planner

T0 = 1_700_000_000_000

_word = st.sampled_from(["Alice met Bob", "rain", "rain again", "Paris in May"])
_text = st.builds("{} {}".format, _word, st.integers(0, 40))  # mostly distinct
_input = st.one_of(
    st.builds(lambda t: {"text": t}, _text),
    st.builds(lambda t: {"text": t}, _text),
    st.builds(lambda t: {"text": t}, _word),  # a text (and so an id) met again
    st.builds(lambda i, t: {"id": i, "text": t}, st.sampled_from(["a", "b", "doc", "c"]),
              _word),
    st.builds(lambda s, t: {"subject": s, "text": t}, st.sampled_from(["x", "y"]), _text),
    st.builds(lambda s, t: {"subject": s, "text": t}, st.sampled_from(["x", "y"]), _text),
    # A subject fact that begins later than the facts after it (out of order), and one
    # in a namespace: neither is a plain subject input.
    st.builds(lambda s, t: {"subject": s, "text": t, "valid_from": T0 + 1000},
              st.sampled_from(["x", "y"]), _text),
    st.builds(lambda t: {"subject": "x", "text": t, "namespace": ["n"]}, _text),
    st.builds(lambda t: {"text": t, "metadata": {"k": 1}}, _text),
    st.just({"id": "a", "text": "rain", "confidence": 0.5}),
    st.builds(lambda t: {"text": t, "supersedes": ["a"]}, _text),
)
_calls = st.lists(st.lists(_input, min_size=1, max_size=12), min_size=1, max_size=4)


def _run(store: Store, memory: Memory, calls: list[list[dict[str, Any]]]
         ) -> list[object]:
    out: list[object] = []
    for inputs in calls:
        try:
            out.append([msgspec.to_builtins(r) for r in memory.remember_many(inputs)])
        except Exception as exc:  # the error is part of the answer
            out.append((type(exc).__name__, str(exc)))
    out.append([[msgspec.to_builtins(e) for e in events] for _, events in store.events()])
    return out


def picky(text: str) -> list[str]:
    """An extractor that fails on some texts (its first failure must be the same)."""
    if "again" in text:
        raise ValueError(f"cannot read {text!r}")
    return [w for w in text.split() if w.istitle()]


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=_calls, extractor=st.sampled_from(["none", "regex", "custom:picky"]))
# An input that fails before a simple one the extractor fails on: the first error wins.
@example(calls=[[{"text": "rain"}, {"text": "later", "supersedes": ["b"]},
                 {"text": "rain again"}]], extractor="custom:picky")
# An input of another kind supersedes a simple one of the same batch, after it and
# (an error: it is not stored yet) before it.
@example(calls=[[{"id": "a", "text": "rain"}, {"text": "later", "supersedes": ["a"]}]],
         extractor="none")
@example(calls=[[{"text": "sooner", "supersedes": ["a"]}, {"id": "a", "text": "rain"}]],
         extractor="none")
def test_a_run_of_simple_inputs_plans_as_each_input_alone(
        tmp_path_factory: pytest.TempPathFactory, calls: list[list[dict[str, Any]]],
        extractor: str) -> None:
    d = tmp_path_factory.mktemp("runs")
    config = MemoryConfig(supersession="latest-by-subject", entity_extractor=extractor)
    answers = []
    for name, column_path in (("columns", True), ("one-by-one", False)):
        with Store.open(d / name, sync="none") as store:
            store.add_documents([{"id": "doc", "text": "a plain document"}])
            memory = Memory(store, config, clock=ManualClock(T0), policies={"picky": picky})
            if column_path:
                answers.append(_run(store, memory, calls))
            else:
                with mock.patch.object(Planner, "_plan_new", return_value=None):
                    answers.append(_run(store, memory, calls))
    assert answers[0] == answers[1]


def test_a_batch_of_simple_inputs_takes_the_column_path(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(T0))
        with mock.patch.object(Planner, "_one", side_effect=AssertionError):
            got = memory.remember_many([{"text": f"fact {i}"} for i in range(50)])
        assert [r.created for r in got] == [True] * 50
        assert len(store) == 50


def test_a_batch_of_simple_and_subject_inputs_takes_the_column_path(tmp_path: Path) -> None:
    """Under latest-by-subject, inputs that add only a subject are planned with the simple
    ones: each supersedes its subject's stored head, or its input before it."""
    with Store.open(tmp_path / "s", sync="none") as store:
        clock = ManualClock(T0)
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        batch = [{"id": f"a{i}", "text": f"fact {i}", **({"subject": f"s{i % 3}"}
                                                         if i % 2 else {})}
                 for i in range(12)]
        with mock.patch.object(Planner, "_one", side_effect=AssertionError):
            first = memory.remember_many(batch)
            clock.advance(10)
            second = memory.remember_many([{**x, "id": f"b{x['id']}"} for x in batch])
        assert [r.superseded for r in first] == [
            [], [], [], [], [], [], [], ["a1"], [], ["a3"], [], ["a5"]]
        assert [r.superseded for r in second][1::2] == [
            ["a7"], ["a9"], ["a11"], ["ba1"], ["ba3"], ["ba5"]]
