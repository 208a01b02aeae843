"""The Python client is a drop-in Memory: the same assertions hold locally and over HTTP."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holomem import (
    ConflictError,
    InvalidError,
    Memory,
    MemoryConfig,
    NotFoundError,
    Store,
)
from holomem.client import AsyncClient, Client

from .conftest import API_KEY, start


@pytest.fixture(params=["local", "remote"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A Memory, or a Client's .memory against a real server: the same code drives both."""
    if request.param == "local":
        store = Store.open(tmp_path / "local", sync="none")
        yield Memory(store, MemoryConfig())
        store.close()
    else:
        srv = start(tmp_path / "data")
        client = Client(srv.url, api_key=API_KEY, tenant="t1")
        yield client.memory
        client.close()
        srv.stop()


def test_remember_is_idempotent_and_conflicts_have_the_same_code(memory: Any) -> None:
    first = memory.remember(id="a", text="Alice lives in Paris", subject="alice/city",
                            valid_from=dt.datetime(2020, 1, 1, tzinfo=dt.UTC))
    again = memory.remember(id="a", text="Alice lives in Paris", subject="alice/city",
                            valid_from=1_577_836_800_000)
    assert first.created and not again.created and again.ingest_time == first.ingest_time
    with pytest.raises(ConflictError) as info:
        memory.remember(id="a", text="Alice lives in Rome")
    assert info.value.code == "conflict" and info.value.status == 409
    # The client raises exactly the library's class for the code, nothing of its own.
    assert type(info.value) is ConflictError


def test_recall_explain_history_get_and_forget_agree_locally_and_remotely(memory: Any) -> None:
    memory.remember(id="p", text="Alice lives in Paris", subject="alice/city", valid_from=1000)
    out = memory.remember_many([{"id": "b", "text": "Alice lives in Berlin",
                                 "subject": "alice/city", "valid_from": 2000,
                                 "supersedes": ["p"]}])
    assert out[0].superseded == ["p"]
    assert [r.id for r in memory.recall("Alice lives")] == ["b"]
    assert [r.id for r in memory.recall("Alice lives", as_of=1500)] == ["p"]
    assert [r.status for r in memory.recall("Alice", history="all")] == \
        ["current", "superseded"] or sorted(r.status for r in memory.recall(
            "Alice", history="all")) == ["current", "superseded"]
    e = memory.explain("Alice lives", "p")
    assert e.retrieved is False and e.status == "superseded"
    assert [f.id for f in memory.history("b")] == ["p", "b"]
    assert memory.get("missing") is None
    assert memory.get("p").superseded_by == ["b"]
    report = memory.forget({"ids": ["b"]})
    assert report.removed == ["b"]
    assert [r.id for r in memory.recall("Alice lives")] == ["p"]


def test_bad_input_raises_the_same_memory_error_codes(memory: Any) -> None:
    for call in (lambda: memory.history("missing"),
                 lambda: memory.explain("x", "missing")):
        with pytest.raises(NotFoundError) as info:
            call()
        assert info.value.code == "not_found" and info.value.status == 404
    with pytest.raises(InvalidError) as info2:
        memory.recall("x", k=0)
    assert info2.value.status == 422


def test_the_async_client_speaks_the_same_contract(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")

    async def main() -> None:
        async with AsyncClient(srv.url, api_key=API_KEY) as client:
            r = await client.memory.remember(text="Bob owes Alice ten euros")
            got = await client.memory.get(r.id)
            assert got is not None and got.text == "Bob owes Alice ten euros"
            hits = await client.memory.recall("Bob owes")
            assert [h.id for h in hits] == [r.id]
            with pytest.raises(NotFoundError) as info:
                await client.memory.history("nope")
            assert type(info.value) is NotFoundError and info.value.status == 404

    try:
        asyncio.run(main())
    finally:
        srv.stop()
