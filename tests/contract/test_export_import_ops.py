"""The contract's ``export``, ``import`` and ``info`` ops (issue 15, item 6): what the
Python client speaks to move facts over the wire, a bounded page at a time.

An export walk of pages gives what ``Memory.export`` gives; interleaved with writes
and forgets it still sees every fact stored when it began exactly once (and none
written since), and after a purge compacted the store it resumes after the last fact
it gave. Its cursor is checked like every cursor: anything it did not give out is
``invalid_request``. An import request carries at most ``MAX_IMPORT_RECORDS`` records.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.engine import validate
from holomem.api.memory import requests
from holomem.errors import HolomemError, InvalidError, LimitError


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    previous = logging.getLogger("holomem").level
    logging.getLogger("holomem").setLevel(logging.ERROR)
    store = Store.open(tmp_path / "s", sync="none")
    memory = Memory(store, MemoryConfig(supersession="latest-by-subject"),
                    clock=ManualClock(1_000_000))
    memory.remember_many([{"id": f"f{i}", "text": f"fact number {i}", "subject": f"s{i % 3}",
                           "namespace": ["a"] if i % 2 else ["b", str(i % 4)],
                           "embedding": [1.0, float(i), 0.5]} for i in range(12)])
    memory.feedback("f3", True, note="good")
    memory.set_confidence("f4", 0.5)
    yield memory
    store.close()
    logging.getLogger("holomem").setLevel(previous)


def walk(memory: Memory, limit: int, namespace: list[str] | None = None,
         between: Any = None) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        page = memory.call("export", {"namespace": namespace, "cursor": cursor,
                                      "limit": limit})
        assert len(page["records"]) <= limit
        out += page["records"]
        cursor = page["nextCursor"]
        if cursor is None:
            return out
        pages += 1
        if between is not None:
            between(pages)


@pytest.mark.parametrize("limit", [1, 2, 5, 12, 1000])
@pytest.mark.parametrize("namespace", [None, ["a"], ["b"], ["b", "1"], ["nowhere"]])
def test_a_walk_of_export_pages_gives_what_memory_export_gives(
        memory: Memory, limit: int, namespace: list[str] | None) -> None:
    assert walk(memory, limit, namespace) == list(memory.export(namespace))


def test_an_export_walk_sees_each_fact_stored_when_it_began_exactly_once(
        memory: Memory) -> None:
    at_start = {r["id"] for r in memory.export()}
    forgotten = set()

    def meanwhile(page: int) -> None:
        memory.clock.advance(1)  # type: ignore[attr-defined]
        memory.remember(id=f"new-{page}", text=f"written during page {page}")
        memory.remember(id=f"f{page + 5}", text=f"fact number {page + 5}",
                        subject=f"s{(page + 5) % 3}",
                        namespace=["a"] if (page + 5) % 2 else ["b", str((page + 5) % 4)],
                        embedding=[1.0, float(page + 5), 0.5])  # the same again: a no-op
        gone = f"f{11 - page}"
        memory.forget({"ids": [gone]})
        forgotten.add(gone)

    ids = [r["id"] for r in walk(memory, 2, between=meanwhile)]
    assert len(ids) == len(set(ids))  # exactly once
    assert not any(i.startswith("new-") for i in ids)  # nothing written since it began
    # Every fact of the start that was not forgotten before its page came.
    assert at_start - forgotten <= set(ids) <= at_start


def test_an_export_walk_resumes_after_a_purge_compacted_the_store(memory: Memory) -> None:
    first = memory.call("export", {"limit": 4})
    generation = memory.store.read(lambda view: view.generation)
    memory.forget({"ids": ["f9"]}, purge=True)  # compaction: new generation, new slots
    assert memory.store.read(lambda view: view.generation) != generation
    rest = walk_from(memory, first["nextCursor"])
    ids = [r["id"] for r in first["records"] + rest]
    assert ids == [f"f{i}" for i in range(12) if i != 9]
    # A cursor whose fact a purge removed cannot say where it was: start again.
    page = memory.call("export", {"limit": 2})
    memory.forget({"ids": ["f1"]}, purge=True)
    with pytest.raises(InvalidError, match="start the export again"):
        memory.call("export", {"limit": 2, "cursor": page["nextCursor"]})


def walk_from(memory: Memory, cursor: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while cursor is not None:
        page = memory.call("export", {"limit": 3, "cursor": cursor})
        out += page["records"]
        cursor = page["nextCursor"]
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture])
@given(cursor=st.text(max_size=40) | st.builds(
    lambda fields: validate.encode_cursor(**fields),
    st.dictionaries(st.sampled_from(["g", "s", "e", "id", "x"]),
                    st.integers(-3, 2**70) | st.text(max_size=5), max_size=5)))
def test_an_export_cursor_it_did_not_give_out_is_an_invalid_request(
        memory: Memory, cursor: str) -> None:
    try:
        page = memory.call("export", {"cursor": cursor, "limit": 5})
    except HolomemError as exc:
        assert type(exc) in (InvalidError, LimitError), exc
        return
    # The odd forged cursor names a real place (the right generation, slots in range):
    # it is then answered like the one export would have given there.
    assert len(page["records"]) <= 5


def test_an_export_cursor_is_bounded_like_every_cursor(memory: Memory) -> None:
    with pytest.raises(LimitError):
        memory.call("export", {"cursor": "x" * (validate.MAX_CURSOR_CHARS + 1)})
    for bad in ({"limit": 0}, {"limit": requests.MAX_EXPORT_PAGE + 1}, {"limit": "5"},
                {"namespace": "a//b"}, {"namespace": [""]}, {"cursor": 5}, {"colour": 1}):
        with pytest.raises(InvalidError):
            memory.call("export", bad)


def test_an_import_request_carries_at_most_its_documented_number_of_records(
        memory: Memory, tmp_path: Path) -> None:
    records = list(memory.export())
    with Store.open(tmp_path / "t", sync="none") as store:
        target = Memory(store)
        many = [{**records[0], "id": f"copy-{i}", "digest": None}
                for i in range(requests.MAX_IMPORT_RECORDS + 1)]
        with pytest.raises(LimitError, match="at most 1000 records per request"):
            target.call("import", {"records": many})
        assert target.info().facts == 0  # refused before anything was written
        report = target.call("import", {"records": many[:-1], "batchSize": 400})
        assert report == {"imported": 1000, "unchanged": 0, "batches": 3,
                          "unresolvedLinks": 0, "relations": 0,
                          "unresolvedRelations": 0}
        again = target.call("import", {"records": records, "dropEmbeddings": True})
        assert again["imported"] == 12
        assert all(r["embedding"] is None for r in target.export(["a"]))
        for bad in ({}, {"records": "x"}, {"records": [{"id": "x"}]},
                    {"records": [], "batchSize": 0}, {"records": [], "unknown": 1}):
            with pytest.raises(InvalidError):
                target.call("import", bad)


def test_info_is_memory_info_and_takes_nothing(memory: Memory) -> None:
    assert memory.call("info", {}) == msgspec.to_builtins(memory.info())
    with pytest.raises(InvalidError):
        memory.call("info", {"facts": True})
