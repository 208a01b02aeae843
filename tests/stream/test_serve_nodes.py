"""Three ``holomem serve --journal nats://...`` processes serve one set of tenants: any
of them answers reads for any tenant, a write sent to any of them reaches the lease
holder (a 307 the client follows), and when it dies another takes the lease and writes
resume (docs/scale-out.md §8.7)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from holomem.client import AsyncClient, Client
from holomem.errors import StoreLockedError, UnavailableError
from tests import web

from ..serve.conftest import API_KEY, Server, start
from .cluster import Cluster, needs_server

pytestmark = needs_server


def _eventually(check: object, seconds: float = 15.0) -> None:
    """Bounded: ``check()`` true within ``seconds`` (followers catch up on each read)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            if check():  # type: ignore[operator]
                return
        except (StoreLockedError, UnavailableError):  # the dead writer's lease lasts
            pass
        if time.monotonic() > deadline:
            raise AssertionError("not within the bound")
        time.sleep(0.1)


async def _remember_async(url: str, text: str) -> str:
    async with AsyncClient(url, api_key=API_KEY, tenant="acme.team") as client:
        return (await client.remember(text)).id


def test_three_servers_share_tenants_writes_reach_the_writer_and_resume_after_it_dies(
        single: Cluster, tmp_path: Path) -> None:
    journal = single.url("srv") + "?lease=2"
    servers: list[Server] = []
    clients: list[Client] = []
    try:
        for i in range(3):  # one after another: each gets start()'s whole bound
            servers.append(start(tmp_path / f"node{i}", "--journal", journal))
        a, b, c = (Client(s.url, api_key=API_KEY, tenant="acme.team") for s in servers)
        clients += [a, b, c]
        first = a.remember("the grebe dives under the ice").id  # server 0: the writer
        # Any server answers reads for the tenant, from its follower.
        _eventually(lambda: b.get(first) is not None and c.get(first) is not None)
        # A write sent to a server that is not the writer is a 307 to the writer's
        # advertised URL, naming the holder (nothing written by the follower itself) ...
        raw = web.post(servers[1].url + "/api/v1/memory/remember",
                       json={"text": "sent raw to a follower"},
                       headers={"authorization": f"Bearer {API_KEY}",
                                "x-tenant-id": "acme.team"}, timeout=30)
        assert raw.status_code == 307, raw.text
        assert raw.headers["location"] == servers[0].url + "/api/v1/memory/remember"
        assert raw.json()["error"]["code"] == "locked"
        assert raw.json()["error"]["writer"] == servers[0].url
        assert raw.json()["error"]["holder"]
        # ... which both clients follow: the write lands, and every server sees it.
        second = b.remember("the grebe shakes off the water").id
        third = asyncio.run(_remember_async(servers[2].url, "the grebe preens"))
        for client in (a, b, c):
            _eventually(lambda cl=client: cl.get(second) is not None  # type: ignore[misc]
                        and cl.get(third) is not None)
        servers[0].proc.kill()  # the writer dies; its lease runs out
        servers[0].proc.wait(10)
        later: list[str] = []
        # Meanwhile a write is sent to the dead writer (unavailable) until its lease
        # runs out; then the server it was sent to becomes the writer and serves it.
        _eventually(lambda: later.append(b.remember("the grebe surfaces").id) or True)
        # A write sent to the third server now reaches the new writer (server 1).
        later.append(c.remember("the grebe dives again").id)
        for client in (b, c):
            _eventually(lambda cl=client: all(  # type: ignore[misc]
                cl.get(i) is not None for i in (first, second, third, *later)))
        # Another tenant is independent: server 2 becomes its writer.
        other = Client(servers[2].url, api_key=API_KEY, tenant="other")
        clients.append(other)
        assert other.remember("a fact of another tenant").id
    finally:
        for client in clients:
            client.close()
        for s in servers:
            if s.proc.poll() is None:
                s.stop()
