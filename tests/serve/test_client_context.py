"""The context-window calls through the real clients (issue 19): a served store answers
compile_context, explain_context and the working contexts exactly as the embedded
library does, and a remember's ttlMs reaches the server; the async client the same.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from holomem import InvalidError, Memory, NotFoundError, Store
from holomem.client import AsyncClient, Client

from .conftest import API_KEY, start

FRAGMENTS = [{"id": "goal", "text": "plan the trip to Paris", "pinned": True},
             {"id": "note", "text": "alice prefers trains", "score": 0.4,
              "time": "2024-05-01T09:30:00Z"}]
STATE = {"goal": "plan the trip", "open": ["hotel", "tickets"]}


def _story(memory: object) -> None:
    m = memory
    m.remember(id="t1", text="alice drinks tea in paris", namespace=["a"])  # type: ignore[attr-defined]
    m.remember(id="t2", text="alice visits paris in may", namespace=["a"],  # type: ignore[attr-defined]
               ttl_ms=3_600_000)


def test_a_served_store_compiles_and_saves_as_the_library_does(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "local", sync="none")
    local = Memory(store)
    srv = start(tmp_path / "data")
    client = Client(srv.url, api_key=API_KEY, tenant="shared")
    try:
        answers = []
        for m in (local, client):
            _story(m)
            got = m.get("t2")
            assert got is not None and got.ttl_ms == 3_600_000
            out = m.compile_context("alice paris", 400, ["a"], FRAGMENTS, k=5)
            assert out.tokens <= 400 and out.counter == "estimate"
            d = m.explain_context("alice paris", 400, "note", ["a"], FRAGMENTS, k=5)
            saved = m.save_working_context(["a"], "trip", STATE)
            loaded = m.load_working_context(["a"], "trip")
            listed = m.list_working_contexts(["a"])
            with pytest.raises(NotFoundError, match="'trip'"):
                m.load_working_context(["a"], "trp")
            with pytest.raises(InvalidError, match="empty"):
                m.save_working_context(["a"], "trip", {})
            answers.append((out.decisions, d, loaded.state, saved.save,
                            [s.session for s in listed.sessions]))
        # The texts differ only by ingest times; the decisions, states and lists agree.
        assert answers[0][1:] == answers[1][1:]
        assert [(x.id, x.decision, x.tokens) for x in answers[0][0]] == [
            (x.id, x.decision, x.tokens) for x in answers[1][0]]
    finally:
        client.close()
        srv.stop()
        store.close()


def test_the_async_client_compiles_and_saves(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")

    async def main() -> None:
        async with AsyncClient(srv.url, api_key=API_KEY, tenant="shared") as m:
            await m.remember("alice drinks tea", ttl_ms=10_000)
            out = await m.compile_context("alice tea", 300, fragments=FRAGMENTS)
            assert out.decisions[0].id == "goal"
            d = await m.explain_context("alice tea", 300, "goal", fragments=FRAGMENTS)
            assert d.decision == "kept"
            await m.save_working_context(None, "s", STATE)
            assert (await m.load_working_context(None, "s")).state == STATE
            assert [s.session for s in (await m.list_working_contexts()).sessions] == ["s"]

    try:
        asyncio.run(main())
    finally:
        srv.stop()
