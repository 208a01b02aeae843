"""A cursor a client altered is refused with a caller error, never an internal failure
(docs/contract.md §5).

A cursor is opaque to the caller but not secret: it is URL-safe base64 of a small JSON
object, so a hostile client can decode it, change a field and send it back. Every op
that pages — ``list``, ``entityProfile``, ``contradict``, ``listNamespaces`` and
``export`` — is given its own real cursor with one field replaced by a value of any
JSON type and size (floats outside any integer, ``NaN`` and ``Infinity`` included,
integers past 64 bits, slots past the store's end). It may answer a page, or raise
``invalid_request``; nothing else.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.errors import InvalidError

#: Each paging op, the request that gives a first page with a cursor.
FIRST: dict[str, dict[str, Any]] = {
    "list": {"limit": 1},
    "entityProfile": {"name": "Alice", "limit": 1},
    "contradict": {"entity": "Alice", "maxPairs": 1},
    "listNamespaces": {"limit": 1},
    "export": {"limit": 1},
}


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    path: Path = tmp_path_factory.mktemp("cursors") / "store"
    store = Store.open(path, sync="none")
    memory = Memory(store, MemoryConfig(), clock=ManualClock(1_700_000_000_000))
    for i in range(6):
        memory.remember(text=f"Alice lives in town {i}", entities=["Alice"],
                        subject="alice/city", namespace=[f"ns{i}"])
        memory.remember(text=f"Alice does not live in town {i}", entities=["Alice"],
                        namespace=[f"ns{i}"])
    try:
        yield memory
    finally:
        store.close()


def fields_of(memory: Memory, op: str) -> dict[str, Any]:
    cursor = memory.call(op, FIRST[op])["nextCursor"]
    assert cursor is not None, op
    data = json.loads(base64.urlsafe_b64decode(cursor))
    assert isinstance(data, dict)
    return data


def encoded(fields: dict[str, Any]) -> str:
    # json.dumps writes NaN and Infinity as the bare words, as a hostile client may.
    return base64.urlsafe_b64encode(json.dumps(fields).encode()).decode()


def answers_or_refuses(memory: Memory, op: str, cursor: str) -> None:
    try:
        answer = memory.call(op, {**FIRST[op], "cursor": cursor})
    except InvalidError:  # invalid_request (or limit): a caller error
        return
    assert isinstance(answer, dict)


HOSTILE = (st.integers() | st.floats() | st.sampled_from([2**63, -2**63 - 1, 10**30, -1,
                                                           100_000, 2**62, 1e308, 1.5])
           | st.booleans() | st.none() | st.text(max_size=5) | st.lists(st.integers(),
                                                                         max_size=2))


@pytest.mark.parametrize("op", sorted(FIRST))
@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan"), 2**63,
                                   -2**63 - 1, 10**30, 100_000, -5, 1e308, "1"])
def test_a_cursor_with_a_field_out_of_every_range_is_refused_with_a_clear_error(
        memory: Memory, op: str, value: Any) -> None:
    fields = fields_of(memory, op)
    for name in fields:
        answers_or_refuses(memory, op, encoded({**fields, name: value}))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(sorted(FIRST)), pick=st.integers(min_value=0), value=HOSTILE)
def test_any_altered_cursor_gives_a_page_or_a_caller_error(memory: Memory, op: str,
                                                           pick: int, value: Any) -> None:
    fields = fields_of(memory, op)
    name = sorted(fields)[pick % len(fields)]
    answers_or_refuses(memory, op, encoded({**fields, name: value}))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(op=st.sampled_from(["list", "export"]),
       asked=st.sampled_from([None, ["ns1"], ["ns2"], ["ns3"]]),
       given_with=st.sampled_from([None, ["ns1"], ["ns2"], ["ns3"]]))
def test_a_list_or_export_cursor_given_with_another_namespace_is_refused(
        memory: Memory, op: str, asked: list[str] | None, given_with: list[str] | None) -> None:
    # Such a cursor used to continue at its slot in the other namespace, silently
    # leaving out that namespace's facts written before it.
    cursor = memory.call(op, {"limit": 1, "namespace": asked})["nextCursor"]
    assert cursor is not None
    request = {"limit": 100, "namespace": given_with, "cursor": cursor}
    if (asked or []) == (given_with or []):
        memory.call(op, request)
        return
    with pytest.raises(InvalidError, match="another namespace"):
        memory.call(op, request)


@pytest.mark.parametrize("op", ["list", "export"])
def test_a_list_or_export_cursor_of_another_store_is_refused(tmp_path: Path, op: str) -> None:
    # Both stores are in their first generation, so the cursor's slot is in range in
    # the other: it used to continue there, silently leaving out that store's first facts.
    with Store.open(tmp_path / "one", sync="none") as one, \
            Store.open(tmp_path / "two", sync="none") as two:
        first, other = Memory(one), Memory(two)
        for i in range(4):
            first.remember(id=f"a{i}", text=f"alpha {i}")
        for i in range(8):
            other.remember(id=f"z{i}", text=f"zeta {i}")
        cursor = first.call(op, {"limit": 2})["nextCursor"]
        with pytest.raises(InvalidError, match="this store"):
            other.call(op, {"limit": 100, "cursor": cursor})


@pytest.mark.parametrize("op", ["list", "export"])
def test_a_cursor_whose_last_fact_was_forgotten_still_continues(tmp_path: Path, op: str) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store)
        for i in range(5):
            memory.remember(id=f"a{i}", text=f"alpha {i}")
        page = memory.call(op, {"limit": 2})
        memory.forget({"ids": ["a1"]})
        rest = memory.call(op, {"limit": 100, "cursor": page["nextCursor"]})
        key = "facts" if op == "list" else "records"
        assert [r["id"] for r in rest[key]] == ["a2", "a3", "a4"]


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(asked=st.sampled_from([{}, {"entity": "Alice"}, {"entity": "alice"}]),
       given_with=st.sampled_from([{}, {"namespace": ["ns1"]}, {"entity": "Alice"},
                                   {"subject": "alice/city"}, {"entity": "alice"}]))
def test_a_contradict_cursor_given_with_another_scope_is_refused(
        memory: Memory, asked: dict[str, Any], given_with: dict[str, Any]) -> None:
    # It used to continue at its pair in the other scope, silently leaving out the
    # pairs before it.
    cursor = memory.call("contradict", {**asked, "maxPairs": 1})["nextCursor"]
    assume(cursor is not None)  # a scope of one pair has no second page
    request = {**given_with, "maxPairs": 100_000, "cursor": cursor}
    if asked == given_with:
        memory.call("contradict", request)
        return
    with pytest.raises(InvalidError, match="another contradict"):
        memory.call("contradict", request)
