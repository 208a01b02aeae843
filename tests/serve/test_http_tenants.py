"""Only a write creates a tenant's store, and a server holds a bounded number of them
(issue 15, item 4): a read of a tenant with no store answers exactly as an empty store
does (``not_found`` where a missing fact is one) and leaves the disk as it was, and so
does a refused write, whether its shape or the memory refuses it; a new
tenant past ``max_tenant_stores`` is a ``limit`` error (507) while every existing tenant
keeps working, across a restart too. Through a real server process and httpx."""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from holomem import Memory, Store
from holomem.api.doors.http.memoryroute import READ_OPS, WRITE_OPS
from holomem.api.memory.ops import OPS
from holomem.client import Client
from holomem.errors import LimitError
from tests import web

from .conftest import API_KEY, Server, headers, start

#: A body for every read: (route, body); the document reads too.
READS: list[tuple[str, dict[str, object] | None]] = [
    ("recall", {"query": "where does anyone live"}),
    ("recall", {"query": "x", "explain": True, "history": "all", "asOf": "2024-01-01"}),
    ("explain", {"query": "x", "id": "nope"}),
    ("get", {"id": "nope"}),
    ("history", {"id": "nope"}),
    ("list", {}),
    ("list", {"filter": {"status": "current"}, "history": "current"}),
    ("listNamespaces", {"prefix": ["users"]}),
    ("probe", {"entity": "Alice"}),
    ("related", {"entity": "Alice"}),
    ("reason", {"entities": ["Alice", "Paris"]}),
    ("contradict", {}),
    ("info", {}),
    ("capabilities", {}),
    ("export", {"namespace": ["users"]}),
    ("recall", {"query": 5}),  # a bad request is refused, and creates nothing either
    ("nope", {}),  # an op that is none
]


def tree(root: Path) -> list[str]:
    """Every path under ``root`` (directories and files), with each file's size."""
    out = []
    for top, dirs, files in os.walk(root):
        out += [os.path.join(top, d) + "/" for d in dirs]
        out += [f"{os.path.join(top, f)} {os.path.getsize(os.path.join(top, f))}"
                for f in files]
    return sorted(out)


def answers(http: httpx.Client, tenant: str) -> list[tuple[int, object]]:
    out: list[tuple[int, object]] = []
    for op, body in READS:
        r = http.post(f"/api/v1/memory/{op}", json=body, headers={"x-tenant-id": tenant})
        out.append((r.status_code, r.json()))
    r = http.get("/api/v1/documents/nope", headers={"x-tenant-id": tenant})
    out.append((r.status_code, r.json()))
    r = http.post("/api/v1/documents/search", json={"query": "fox"},
                  headers={"x-tenant-id": tenant})
    out.append((r.status_code, r.json()))
    return out


def test_every_op_is_a_read_or_a_write() -> None:
    # A new op of the contract is classified in holomem.api.doors.http.server (a read must not
    # create a store; an op in neither set is served as a write).
    assert set(OPS) == READ_OPS | WRITE_OPS and READ_OPS.isdisjoint(WRITE_OPS)


def test_a_read_of_a_tenant_with_no_store_answers_as_an_empty_store_and_creates_nothing(
        server: Server) -> None:
    with httpx.Client(base_url=server.url, headers=headers(), timeout=30) as http:
        # Nothing at all yet: not even DATA is made by reads, nor by refused writes.
        before = answers(http, "ghost")
        for route, body in (("memory/remember", {"text": "x", "bogus": 1}),
                            ("memory/remember", {"text": "x", "eventTime": "soon"}),
                            ("memory/remember", {"facts": [{"text": 5}]}),
                            ("memory/forget", {"scope": "everything"}),
                            ("memory/feedback", {"id": "x"}),
                            # Refused by the memory, not by the request's shape:
                            ("memory/remember", {"text": ""}),
                            ("memory/remember", {"text": "x", "confidence": 2}),
                            ("memory/remember", {"text": "x", "validFrom": 10,
                                                 "validTo": 5}),
                            ("memory/remember", {"facts": [{"text": "ok"},
                                                           {"text": "x", "id": "a\nb"}]}),
                            ("memory/feedback", {"id": "nope", "helpful": True}),
                            ("memory/setConfidence", {"id": "nope", "confidence": 0.5}),
                            ("memory/import", {"records": [{"id": "a"}]}),
                            ("documents", {"id": "a\nb", "text": "t"}),
                            ("documents", {"id": "d"}),
                            ("documents", {"documents": [{"id": "d", "text": "t", "x": 1}]})):
            r = http.post(f"/api/v1/{route}", json=body, headers={"x-tenant-id": "ghost"})
            assert r.status_code in (404, 422), (route, body, r.text)
        assert not server.data.exists()
        # A tenant made by a write that stores nothing (a forget): an empty store.
        r = http.post("/api/v1/memory/forget", json={"scope": {"ids": ["x"]}},
                      headers={"x-tenant-id": "empty"})
        assert r.status_code == 200 and (server.data / "tenants" / "empty").is_dir()
        r = http.post("/api/v1/memory/remember", json={"text": "Alice lives in Paris",
                                                       "entities": ["Alice", "Paris"]},
                      headers={"x-tenant-id": "full"})
        assert r.status_code == 200
        listing = tree(server.data)
        ghost = answers(http, "ghost")
        assert ghost == answers(http, "empty") == before
        assert tree(server.data) == listing  # the reads created nothing, anywhere
        statuses = [status for status, _ in ghost]
        assert statuses == [200, 200, 404, 200, 404, 200, 200, 200, 200, 200, 200, 200,
                            200, 200, 200, 422, 422, 404, 200]
        assert ghost[3][1] == {"fact": None} and ghost[0][1] == {"results": []}
        assert ghost[-1][1] == {"hits": []}
        # The first write creates the store, and the reads then see what it wrote.
        r = http.post("/api/v1/memory/remember", json={"text": "ghosts exist"},
                      headers={"x-tenant-id": "ghost"})
        assert r.status_code == 200 and (server.data / "tenants" / "ghost").is_dir()
        found = http.post("/api/v1/memory/recall", json={"query": "ghosts"},
                          headers={"x-tenant-id": "ghost"}).json()["results"]
        assert [x["text"] for x in found] == ["ghosts exist"]


def test_a_store_made_by_another_process_is_read_not_answered_as_empty(
        server: Server) -> None:
    with httpx.Client(base_url=server.url, headers=headers(), timeout=30) as http:
        assert http.post("/api/v1/memory/list", json={},
                         headers={"x-tenant-id": "late"}).json()["facts"] == []
        path = server.data / "tenants" / "late"
        path.parent.mkdir(parents=True)
        with Store.open(path) as store:  # e.g. a store restored by hand
            Memory(store).remember("made elsewhere")
        facts = http.post("/api/v1/memory/list", json={},
                          headers={"x-tenant-id": "late"}).json()["facts"]
        assert [f["text"] for f in facts] == ["made elsewhere"]


def start_bounded(data: Path, stores: int) -> Server:
    return start(data, "--max-tenant-stores", str(stores))


def remember(srv: Server, tenant: str, text: str) -> httpx.Response:
    return web.post(srv.url + "/api/v1/memory/remember", json={"text": text},
                    headers=headers(tenant), timeout=30)


def test_a_new_tenant_past_the_bound_is_a_limit_error_and_the_others_keep_working(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = start_bounded(data, 3)
    try:
        for name in ("a", "b", "c"):
            assert remember(srv, name, f"fact of {name}").status_code == 200
        r = remember(srv, "d", "one too many")
        assert r.status_code == 507, r.text
        error = r.json()["error"]
        assert error["code"] == "limit" and "--max-tenant-stores 3" in error["message"]
        assert not (data / "tenants" / "d").exists()
        # Every op that writes is refused alike; reads of d answer as empty.
        for op, body in (("forget", {"scope": {"ids": ["x"]}}),
                         ("setConfidence", {"id": "x", "confidence": 0.5})):
            r = web.post(f"{srv.url}/api/v1/memory/{op}", json=body, headers=headers("d"))
            assert r.status_code == 507, r.text
        r = web.post(srv.url + "/api/v1/documents", json={"id": "x", "text": "y"},
                     headers=headers("d"))
        assert r.status_code == 507
        assert web.post(srv.url + "/api/v1/memory/list", json={},
                        headers=headers("d")).json()["facts"] == []
        # The existing tenants are served as before, writes included.
        for name in ("a", "b", "c"):
            assert remember(srv, name, "another fact").status_code == 200
        # The client raises the library's LimitError, with the status.
        with Client(srv.url, api_key=API_KEY, tenant="d") as client, \
                pytest.raises(LimitError) as caught:
            client.memory.remember("x")
        assert caught.value.status == 507
    finally:
        srv.stop()
    # After a restart the stores on disk count: d is still refused, a still served.
    srv = start_bounded(data, 3)
    try:
        assert remember(srv, "d", "one too many").status_code == 507
        assert remember(srv, "a", "after the restart").status_code == 200
    finally:
        srv.stop()
    # A wider bound makes room.
    srv = start_bounded(data, 4)
    try:
        assert remember(srv, "d", "room now").status_code == 200
        assert remember(srv, "e", "and none for this one").status_code == 507
    finally:
        srv.stop()


def test_stores_opened_past_the_bound_while_all_were_busy_are_closed_when_used_again(
        tmp_path: Path) -> None:
    from holomem.api.doors.http.tenants import TenantPool
    from holomem.api.memory.config import MemoryConfig

    pool = TenantPool(str(tmp_path), key=None, config=MemoryConfig(), max_open=2)
    try:
        held = [pool.acquire(f"t{i}") for i in range(4)]  # all in use: over the bound
        assert len(pool) == 4
        for t in held:
            pool.release(t, evict=False)  # (as the event loop releases: nothing closes)
        assert len(pool) == 4
        again = pool.acquire("t3")  # the next use closes the idle ones beyond it
        assert len(pool) == 2
        pool.release(again, evict=False)
    finally:
        pool.close()
