"""Three ``holomem serve --journal nats://...`` processes serve one set of tenants: any
of them answers reads for any tenant, writes go to the lease holder, and when it dies
another takes the lease and writes resume (docs/scale-out.md §8.7)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from holomem.client import Client
from holomem.errors import StoreLockedError

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
        except StoreLockedError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("not within the bound")
        time.sleep(0.1)


def test_three_servers_share_tenants_and_writes_resume_after_the_writer_dies(
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
        with pytest.raises(StoreLockedError):  # writes go to the lease holder
            b.remember("not here: server 0 holds the lease")
        servers[0].proc.kill()  # the writer dies; its lease runs out
        servers[0].proc.wait(10)
        later: list[str] = []
        _eventually(lambda: later.append(b.remember("the grebe surfaces").id) or True)
        _eventually(lambda: c.get(later[0]) is not None)
        assert b.get(first) is not None
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
