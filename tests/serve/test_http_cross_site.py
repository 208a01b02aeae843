"""No web page can drive the HTTP door: issue 11, item 5.

A browser lets any page send a "simple request" (a POST whose body is text/plain, a
form, or nothing) to 127.0.0.1 without asking the server first, and DNS rebinding lets
a page on the attacker's name reach the loopback server as if it were its own origin.
So, through a real ``holomem serve`` with no API key (the default): a body route only
accepts ``application/json``; a ``Host`` must be this server; a browser ``Origin``
must be explicitly allowed; ``/healthz`` says nothing beyond liveness without the
key; and the request head is bounded in size and header count.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests import web

from .conftest import API_KEY, Server, headers, start

MARKER = "QUOKKAMARKER"
JSON = {"content-type": "application/json"}


@pytest.fixture
def open_server(tmp_path: Path) -> Iterator[Server]:
    """A server without an API key, as ``holomem serve`` starts by default."""
    srv = start(tmp_path / "data", "--allow-origin", "https://app.example",
                "--allow-host", "memory.internal", api_key=None)
    try:
        yield srv
    finally:
        srv.stop()


def remember_marker(srv: Server) -> None:
    r = web.post(srv.url + "/api/v1/memory/remember",
                 json={"id": "m", "text": f"secret {MARKER}"}, timeout=30)
    assert r.status_code == 200, r.text


def still_there(srv: Server) -> bool:
    r = web.post(srv.url + "/api/v1/memory/get", json={"id": "m"}, timeout=30)
    assert r.status_code == 200, r.text
    return bool(r.json()["fact"]) and MARKER in r.text


def test_a_simple_cross_site_request_cannot_forget_or_purge(open_server: Server) -> None:
    srv = open_server
    remember_marker(srv)
    forget = b'{"scope": {"ids": ["m"]}, "purge": true}'
    for content_type in ("text/plain", "text/plain;charset=UTF-8",
                         "application/x-www-form-urlencoded", "multipart/form-data; b=x",
                         None):
        h = {} if content_type is None else {"content-type": content_type}
        for path, body in (("/api/v1/memory/forget", forget),
                           ("/api/v1/memory/applyForgetting", b""),
                           ("/api/v1/documents", b'{"id": "d", "text": "x"}')):
            r = web.post(srv.url + path, content=body, headers=h, timeout=30)
            assert r.status_code == 415, (path, content_type, r.text)
            assert r.json()["error"]["code"] == "invalid_request"
            assert "application/json" in r.json()["error"]["message"]
    assert still_there(srv)
    r = web.post(srv.url + "/api/v1/memory/forget", content=forget,
                 headers={"content-type": "application/json; charset=utf-8"}, timeout=30)
    assert r.status_code == 200 and r.json()["removed"] == ["m"]


def test_a_browser_origin_that_is_not_allowed_is_refused(open_server: Server) -> None:
    srv = open_server
    remember_marker(srv)
    forget = {"scope": {"ids": ["m"]}, "purge": True}
    for origin in ("https://evil.example", "null", "http://127.0.0.1:1",
                   "https://app.example.evil", srv.url):
        for method, path, body in (("POST", "/api/v1/memory/forget", forget),
                                   ("POST", "/api/v1/memory/recall", {"query": MARKER}),
                                   ("DELETE", "/api/v1/documents/m?purge=true", None),
                                   ("OPTIONS", "/api/v1/memory/forget", None),
                                   ("GET", "/healthz", None)):
            r = web.request(method, srv.url + path, json=body, timeout=30,
                            headers={"origin": origin,
                                       "access-control-request-method": "POST"})
            assert r.status_code == 403, (origin, method, path, r.text)
            assert r.json()["error"]["code"] == "forbidden"
            assert MARKER not in r.text
            assert "access-control-allow-origin" not in r.headers
    assert still_there(srv)
    # The one allowed origin gets a CORS preflight answer and real answers.
    allowed = {"origin": "https://app.example"}
    pre = httpx.options(srv.url + "/api/v1/memory/recall", timeout=30, headers={
        **allowed, "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, x-tenant-id"})
    assert pre.status_code == 200
    assert pre.headers["access-control-allow-origin"] == "https://app.example"
    r = web.post(srv.url + "/api/v1/memory/recall", json={"query": MARKER}, timeout=30,
                 headers=allowed)
    assert r.status_code == 200 and MARKER in r.text
    assert r.headers["access-control-allow-origin"] == "https://app.example"


def test_an_allowed_origin_may_speak_mcp_with_its_session_headers(open_server: Server) -> None:
    srv, allowed = open_server, {"origin": "https://app.example"}
    sent = "content-type, mcp-session-id, mcp-protocol-version, x-holomem-namespace"
    pre = httpx.options(srv.url + "/mcp", timeout=30, headers={
        **allowed, "access-control-request-method": "POST",
        "access-control-request-headers": sent})
    assert pre.status_code == 200, pre.text
    granted = {h.strip() for h in pre.headers["access-control-allow-headers"].split(",")}
    assert {"mcp-session-id", "mcp-protocol-version", "x-holomem-namespace"} <= granted
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "page", "version": "0"}}}
    r = web.post(srv.url + "/mcp", json=hello, timeout=30, headers={
        **allowed, "accept": "application/json, text/event-stream"})
    assert r.status_code == 200 and r.headers["mcp-session-id"]
    # A page can read the session id only when it is exposed.
    assert "mcp-session-id" in r.headers["access-control-expose-headers"].lower()
    r = web.post(srv.url + "/mcp", json=hello, timeout=30, headers={
        "origin": "https://evil.example", "accept": "application/json, text/event-stream"})
    assert r.status_code == 403


def test_a_host_that_is_not_this_server_is_refused(open_server: Server) -> None:
    """DNS rebinding: the attacker's name resolves to 127.0.0.1, so the request arrives
    on the loopback socket, but its Host is still the attacker's name."""
    srv = open_server
    remember_marker(srv)
    port = srv.url.rsplit(":", 1)[1]
    body = {"scope": {"ids": ["m"]}, "purge": True}
    for host in (f"evil.example:{port}", "evil.example", f"localhost.evil.example:{port}",
                 f"127.0.0.1:{int(port) + 1}", "127.0.0.1", f"memory.internal.evil:{port}",
                 "", f"127.0.0.1:{port}:1", f"[::1:{port}"):
        for path in ("/api/v1/memory/forget", "/healthz", "/nowhere"):
            r = web.post(srv.url + path, json=body, headers={"host": host}, timeout=30)
            assert r.status_code == 403, (host, path, r.text)
            assert r.json()["error"]["code"] == "forbidden"
    assert still_there(srv)
    # This server's own names: its address, localhost, any IP literal (an address
    # cannot be rebound), and the names given with --allow-host (any port).
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}",
                 f"[::1]:{port}", f"10.1.2.3:{port}", "memory.internal",
                 "memory.internal:443"):
        r = web.post(srv.url + "/api/v1/memory/get", json={"id": "m"},
                     headers={"host": host}, timeout=30)
        assert r.status_code == 200, (host, r.text)


def test_healthz_shows_only_liveness_without_the_key(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")
    try:
        web.post(srv.url + "/api/v1/memory/remember", json={"text": "x"},
                 headers=headers("t1"), timeout=30).raise_for_status()
        for h in ({}, {"authorization": "Bearer wrong"}, {"x-api-key": API_KEY + "x"}):
            r = web.get(srv.url + "/healthz", headers=h, timeout=30)
            assert r.status_code == 200 and r.json() == {"status": "ok"}, h
        r = web.get(srv.url + "/healthz", headers=headers(), timeout=30)
        assert r.json() == {"status": "ok", "openTenants": 1}
    finally:
        srv.stop()


def raw_request(srv: Server, head: bytes, body: bytes = b"") -> bytes:
    """Send ``head`` (without its blank line) and ``body`` in one write; the whole reply
    (the server closes the connection after it: ``Connection: close``)."""
    port = int(srv.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        # Refused before it had all been read: the reply still waits.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(head + b"Connection: close\r\n\r\n" + body)
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                reply += chunk
        return reply


def test_request_heads_are_bounded_in_size_and_header_count(server: Server) -> None:
    port = server.url.rsplit(":", 1)[1]
    start_line = f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n".encode()
    for extra in (b"X-Big: " + b"a" * (1 << 20) + b"\r\n",                 # one huge header
                  b"".join(b"X-%d: %d\r\n" % (i, i) for i in range(101)),  # too many
                  b"".join(b"X-%d: " % i + b"b" * 1000 + b"\r\n" for i in range(60))):
        reply = raw_request(server, start_line + extra)
        assert reply.startswith(b"HTTP/1.1 431 "), reply[:200]
        assert b'"code":"limit"' in reply
    # The server is still there, and a request with a big body and a normal head,
    # sent in one write, is not mistaken for a big head.
    assert web.get(server.url + "/healthz", timeout=30).status_code == 200
    body = b'{"text": "a fact with padding"' + b" " * 900_000 + b"}"
    head = (f"POST /api/v1/memory/remember HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: Bearer {API_KEY}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n").encode()
    reply = raw_request(server, head, body)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:300]
    ok = b"".join(b"X-%d: %d\r\n" % (i, i) for i in range(90))
    assert raw_request(server, start_line + ok).startswith(b"HTTP/1.1 200 ")
