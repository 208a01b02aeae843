"""No client input makes the HTTP door answer 500, and every answer is the JSON error
shape: issue 11, item 4 (the HTTP parts).

Deeply nested bodies are refused by depth before they are decoded (msgspec's decoder
recurses until RecursionError); a tenant whose store another process holds is
``locked`` (423) and the others are still served; a bad memory configuration stops
``holomem serve`` at start; a tenant the pool failed to set up is closed again; and
unknown routes and wrong methods answer ``{"error": {"code", "message"}}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

import holomem.api.doors.http.tenants as tenants_door
from holomem import Store
from holomem.api.doors.http.server import create_app
from holomem.api.doors.http.tenants import TenantPool
from holomem.api.engine.nesting import MAX_REQUEST_DEPTH as MAX_DEPTH
from holomem.api.engine.nesting import check_depth, nesting_depth
from holomem.api.memory.config import Exponential, MemoryConfig, RecencyConfig
from holomem.api.memory.contract import decode_body
from holomem.errors import InvalidError, StoreLockedError
from tests import web

from .conftest import Server, free_port, headers


def post(srv: Server, path: str, content: bytes, tenant: str | None = None) -> httpx.Response:
    return web.post(srv.url + path, content=content, timeout=60,
                    headers={**headers(tenant), "content-type": "application/json"})


def nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * (depth - 1) + b"{}" + b"}" * (depth - 1)


def depth_of(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    return 0


def test_bodies_nested_past_the_limit_are_refused_on_every_route(server: Server) -> None:
    routes = ["/api/v1/memory/" + op for op in ("recall", "remember", "forget", "reason")]
    routes += ["/api/v1/documents", "/api/v1/documents/search"]
    for depth in (MAX_DEPTH + 1, 100, 1000, 100_000):
        for kind in ("array", "object"):
            inner = nested(depth - 1, kind)
            for route in routes:
                for body in (nested(depth, kind), b'{"query": ' + inner + b"}",
                             b'{"text": "x", "metadata": ' + inner + b"}"):
                    r = post(server, route, body)
                    assert r.status_code == 422, (depth, kind, route, r.text[:300])
                    err = r.json()["error"]
                    assert err["code"] == "limit"  # the contract's own depth limit
                    assert f"nests deeper than {MAX_DEPTH}" in err["message"]
    # At the limit, a body is decoded and the op answers (here: a bad field).
    r = post(server, "/api/v1/memory/recall", b'{"query": "x", "k": ' +
             nested(MAX_DEPTH - 1, "array") + b"}")
    assert r.status_code == 422 and "nests" not in r.text
    # Brackets inside strings are text, not nesting.
    r = post(server, "/api/v1/memory/remember",
             json.dumps({"text": "[{" * 2000 + '\\"]', "metadata": {"k": "[[[" * 1000}}).encode())
    assert r.status_code == 200, r.text


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.text(alphabet='[]{}"\\:, ab\n\u00e9'),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), inner, max_size=3),
    max_leaves=80)


@settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, wrap=st.integers(0, 80))
def test_the_depth_check_agrees_with_the_structure(value: object, wrap: int) -> None:
    """Any JSON value, wrapped in more arrays: its depth is counted exactly (brackets in
    strings are text), and it is decoded iff it nests at most MAX_DEPTH; the check of
    decoded requests (Memory.call's, import's) agrees."""
    doc = {"v": json.loads("[" * wrap + json.dumps(value) + "]" * wrap)}
    raw = json.dumps(doc, ensure_ascii=bool(wrap % 2)).encode()
    assert nesting_depth(raw) == depth_of(doc)
    if depth_of(doc) <= MAX_DEPTH:
        assert decode_body(raw) == doc
        check_depth(doc)
    else:
        with pytest.raises(InvalidError, match="nests deeper"):
            decode_body(raw)
        with pytest.raises(InvalidError, match="nests deeper"):
            check_depth(doc)


@settings(max_examples=300, deadline=None)
@given(raw=st.binary(max_size=300) | st.text(alphabet='[]{}"\\:,1 ').map(str.encode),
       wrap=st.integers(0, 3000))
def test_any_body_decodes_to_an_object_or_an_invalid_request(raw: bytes, wrap: int) -> None:
    for body in (raw, b"[" * wrap + raw, b'{"a":' * wrap + raw):
        try:
            out = decode_body(body)
        except InvalidError as exc:  # LimitError (too deep) is one too
            assert exc.code in ("invalid_request", "limit")
        else:
            assert isinstance(out, dict)


def test_a_locked_tenant_is_423_and_the_others_are_served(server: Server) -> None:
    busy = server.data / "tenants" / "busy"
    busy.parent.mkdir(parents=True, exist_ok=True)
    held = Store.open(busy)  # another process is this tenant's writer
    try:
        for _ in range(3):
            r = post(server, "/api/v1/memory/remember", b'{"text": "x"}', tenant="busy")
            assert r.status_code == 423, r.text
            assert r.json()["error"]["code"] == "locked"
            r = post(server, "/api/v1/memory/remember", b'{"text": "y"}', tenant="free")
            assert r.status_code == 200, r.text
    finally:
        held.close()
    r = post(server, "/api/v1/memory/remember", b'{"text": "x"}', tenant="busy")
    assert r.status_code == 200, r.text


def bad_config() -> MemoryConfig:
    return MemoryConfig(recency=RecencyConfig(exponential=Exponential(half_life_ms=-5)))


def test_a_bad_memory_config_stops_serve_before_it_listens(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"recency": {"exponential": {"halfLifeMs": -5}}}')
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "holomem", "serve", "--data",
                           str(tmp_path / "data"), "--port", str(port),
                           "--memory-config", str(bad)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert str(bad) in done.stderr and "halfLifeMs" in done.stderr
    assert not (tmp_path / "data").exists()
    # The same check guards the Python entry points, where nothing parsed JSON first.
    with pytest.raises(InvalidError, match="halfLifeMs"):
        create_app(str(tmp_path / "data"), config=bad_config())


def test_serve_refuses_bad_options_at_start(tmp_path: Path) -> None:
    for args in (["--max-tenants", "0"], ["--max-tenant-stores", "0"], ["--port", "70000"],
                 ["--allow-origin", "app.example"], ["--allow-origin", "https://a.example/x"],
                 ["--allow-host", "a b"], ["--allow-host", "a.example:http"],
                 ["--advertise", "http://10.0.0.7:8080"],  # without --journal
                 ["--advertise", "ftp://x", "--journal", "nats://127.0.0.1:4222/p"]):
        done = subprocess.run([sys.executable, "-m", "holomem", "serve", "--data",
                               str(tmp_path / "data"), *args],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("error: ") and args[0] in done.stderr, done.stderr


def test_a_tenant_that_fails_after_opening_is_closed_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = TenantPool(str(tmp_path), key=None, config=MemoryConfig(), max_open=4)

    def broken(*args: object, **kwargs: object) -> object:
        raise InvalidError("the memory could not be set up")

    real = tenants_door.Memory
    monkeypatch.setattr(tenants_door, "Memory", broken)
    for _ in range(2):
        with pytest.raises(InvalidError):
            pool.acquire("t")
    monkeypatch.setattr(tenants_door, "Memory", real)
    t = pool.acquire("t")  # not StoreLockedError: the failed attempts closed the store
    pool.release(t)
    with pytest.raises(StoreLockedError):
        Store.open(tmp_path / "tenants" / "t")
    pool.close()
    Store.open(tmp_path / "tenants" / "t").close()


def test_unknown_routes_and_wrong_methods_answer_json_errors(server: Server) -> None:
    for method, path in (("GET", "/nope"), ("POST", "/api/v1/nope"), ("GET", "/api/v2/x"),
                         ("GET", "/"), ("DELETE", "/api/v1/memory")):
        r = web.request(method, server.url + path, headers=headers(), timeout=30)
        assert r.status_code == 404, (method, path, r.text)
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == "not_found" and r.json()["error"]["message"]
    for method, path, allowed in (("GET", "/api/v1/memory/recall", "POST"),
                                  ("PUT", "/healthz", "GET"),
                                  ("PATCH", "/api/v1/documents", "POST"),
                                  ("POST", "/api/v1/documents/d1", "DELETE")):
        r = web.request(method, server.url + path, headers=headers(), timeout=30)
        assert r.status_code == 405, (method, path, r.text)
        assert r.headers["content-type"] == "application/json"
        assert r.json()["error"]["code"] == "invalid_request"
        assert allowed in r.headers["allow"]


def test_an_internal_failure_is_still_the_json_shape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object) -> object:
        raise RuntimeError("boom: internal detail")

    monkeypatch.setattr(tenants_door.Memory, "call", fail)
    app = create_app(str(tmp_path / "data"))
    with TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        r = c.post("/api/v1/memory/recall", json={"query": "x"})
    assert r.status_code == 500
    assert r.json() == {"error": {"code": "error", "message": "internal server error"}}


def test_serve_exits_with_status_3_when_its_port_is_taken(server: Server) -> None:
    port = server.url.rsplit(":", 1)[1]
    done = subprocess.run([sys.executable, "-m", "holomem", "serve", "--data",
                           str(server.data.parent / "other"), "--port", port],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 3, done.stderr
    assert "address already in use" in done.stderr and "listening on" not in done.stderr
    assert web.get(server.url + "/healthz", timeout=5).status_code == 200
