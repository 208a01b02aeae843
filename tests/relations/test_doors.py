"""Guarantee: relate, unrelate, links, why and graph recall answer the same through
every door — the JSON contract, the HTTP Client and AsyncClient against a real
``holomem serve`` process, and the ``holomem links`` / ``holomem why`` commands."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holomem import InvalidError, Memory, NotFoundError, Store
from holomem.client import AsyncClient, Client
from tests.cli.run import holomem
from tests.serve.conftest import API_KEY, Server, start


def _fill(m: Any) -> None:
    m.remember("the launch slipped a week", id="a")
    m.remember("a storm hit the coast", id="b")
    m.remember("storms follow warm water", id="c")
    m.remember("elsewhere entirely", id="x", namespace=["other"])


def _exercise(m: Any) -> dict[str, Any]:
    """The same calls on a Memory or a Client; what they answered, as JSON-ready data."""
    _fill(m)
    out: dict[str, Any] = {}
    out["made"] = m.relate("a", "b", "caused_by", {"confidence": 0.8})
    out["again"] = m.relate("a", "b", "caused_by", {"confidence": 0.8})
    m.relate("b", "c", "explained_by")
    m.relate("c", "a", "scratch")
    out["unrelated"] = m.unrelate("c", "a", "scratch")
    out["links"] = m.links("b", direction="both")
    out["why"] = m.why("launch slipped", max_hops=2)
    out["why_id"] = m.why("a", 1, "caused_by")
    out["graph"] = m.recall("launch", graph={"hops": 2, "weight": 0.5}, explain=True)
    with pytest.raises(NotFoundError):
        m.links("nope")
    with pytest.raises(InvalidError):
        m.relate("a", "x", "caused_by")  # two namespaces
    with pytest.raises(InvalidError):
        m.why("a", max_hops=9)
    return {k: (json.loads(json.dumps(v, default=_plain))) for k, v in out.items()}


def _plain(value: Any) -> Any:
    import msgspec

    return msgspec.to_builtins(value)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = start(tmp_path / "data")
    try:
        yield srv
    finally:
        srv.stop()


_CLOCKED = ("time", "ingestTime", "validAt", "effectiveTime")


def _times_zeroed(value: Any) -> Any:
    """Times are the clock of each store (at remember, relate, recall): left out."""
    if isinstance(value, dict):
        return {k: 0 if k in _CLOCKED else _times_zeroed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_times_zeroed(v) for v in value]
    return value


def test_the_client_answers_exactly_as_memory(tmp_path: Path, server: Server) -> None:
    with Store.open(tmp_path / "local", sync="none") as store:
        local = _exercise(Memory(store))
    with Client(server.url, api_key=API_KEY, tenant="t1") as client:
        remote = _exercise(client)
    assert _times_zeroed(remote) == _times_zeroed(local)
    assert [n["id"] for n in remote["why"]["nodes"]] == ["a", "b", "c"]
    assert remote["unrelated"] == {"removed": True}
    graph = {r["id"]: r["explanation"]["graph"] for r in remote["graph"]}
    assert graph["a"] is None and graph["c"]["hops"] == 2

    async def run() -> None:
        async with AsyncClient(server.url, api_key=API_KEY, tenant="t2") as ac:
            await ac.remember("first fact", id="p")
            await ac.remember("second fact", id="q")
            assert (await ac.relate("p", "q", "next")).created
            assert [x.to_id for x in (await ac.links("p")).links] == ["q"]
            assert [n.id for n in (await ac.why("p")).nodes] == ["p", "q"]
            assert (await ac.unrelate("p", "q", "next")).removed

    asyncio.run(run())


def test_the_cli_lists_links_and_walks_why(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with Store.open(path, sync="none") as store:
        m = Memory(store)
        _fill(m)
        m.relate("a", "b", "caused_by", {"confidence": 0.8})
        m.relate("b", "c", "explained_by")
        want_links = m.call("links", {"id": "b", "direction": "both"})
        want_why = m.call("why", {"query": "launch slipped", "relation": ["caused_by"]})
    done = holomem("links", str(path), "b", "--direction", "both", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want_links
    lines = holomem("links", str(path), "b", "--direction", "in").stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("a -[caused_by]-> b  (made ")
    assert lines[0].endswith('{"confidence": 0.8}')
    jsonl = holomem("links", str(path), "b", "--direction", "both", "--jsonl").stdout
    assert [json.loads(x)["toId"] for x in jsonl.splitlines()] == ["b", "c"]
    done = holomem("why", str(path), "launch slipped", "--relation", "caused_by", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want_why
    text = holomem("why", str(path), "a", "--max-hops", "1").stdout.splitlines()
    assert text == ["[0] a (current) the launch slipped a week",
                    "  [1] b (current) a storm hit the coast",
                    "  a -[caused_by]-> b"]
    missing = holomem("links", str(path), "nope")
    assert missing.returncode == 1 and "not_found" in missing.stderr
    bad = holomem("why", str(path), "a", "--max-hops", "9")
    assert bad.returncode == 2 and "limit" in bad.stderr
