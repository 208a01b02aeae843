"""``holomem serve`` says where it listens and logs every request (issue 15, item 4): one
startup line on stderr (address, data directory, auth, the tenants' bounds) once it
listens, then one access line per request — method, route template, op, tenant,
status, milliseconds — and never a body, a query, a path's id or a header's value
other than a valid tenant id."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

import holomem.api.doors.http.tenants as tenants_door
from holomem.api.doors.http.server import create_app

from .conftest import API_KEY, headers, start

ACCESS = re.compile(r"^\S+ \S+ (?P<method>[A-Z]+) (?P<route>\S+)(?: op=(?P<op>\S+))? "
                    r"tenant=(?P<tenant>\S+) status=(?P<status>\d+|-) ms=\d+\.\d$")


def lines(log: str) -> tuple[list[str], list[dict[str, str | None]]]:
    text = [line for line in log.splitlines() if line.strip()]
    access = [m.groupdict() for m in map(ACCESS.match, text) if m is not None]
    return text, access


def test_serve_prints_where_it_listens_and_one_access_line_per_request(tmp_path: Path) -> None:
    srv = start(tmp_path / "data", "--max-tenants", "7")
    marker, secret = "BODYMARKER4711", "HEADERVALUE0815"
    sent: list[tuple[str, str, str | None, str, str]] = []
    try:
        with httpx.Client(base_url=srv.url, timeout=30) as http:
            def call(method: str, path: str, route: str, op: str | None, tenant: str,
                     status: int, **kwargs: object) -> None:
                r = http.request(method, path, **kwargs)
                assert r.status_code == status, (path, r.text)
                sent.append((method, route, op, tenant, str(status)))

            auth = headers("alice")
            call("POST", "/api/v1/memory/remember", "/api/v1/memory/{op}", "remember",
                 "alice", 200, json={"id": "DOCID1", "text": f"Alice {marker}"},
                 headers={**auth, "x-custom": secret})
            call("POST", "/api/v1/memory/recall", "/api/v1/memory/{op}", "recall", "alice",
                 200, json={"query": marker}, headers=auth)
            call("POST", "/api/v1/memory/get", "/api/v1/memory/{op}", "get", "default", 200,
                 json={"id": "DOCID1"}, headers=headers())
            call("POST", "/api/v1/memory/NOPE" + marker, "/api/v1/memory/{op}", "?",
                 "alice", 422, json={}, headers=auth)
            call("POST", "/api/v1/memory/recall", "/api/v1/memory/{op}", "recall",
                 "alice", 401, json={"query": marker}, headers={"x-tenant-id": "alice"})
            call("POST", "/api/v1/memory/recall", "/api/v1/memory/{op}", "recall",
                 "(invalid)", 422, json={"query": "x"}, headers=headers("../" + marker))
            call("POST", "/api/v1/documents", "/api/v1/documents", None, "bob", 200,
                 json={"id": "DOCID2", "text": marker}, headers=headers("bob"))
            call("DELETE", f"/api/v1/documents/DOCID2?purge=true&{marker}=1",
                 "/api/v1/documents/{doc_id}", None, "bob", 200, headers=headers("bob"))
            call("GET", "/api/v1/memory/recall", "/api/v1/memory/{op}", "recall", "default",
                 405, headers=headers())
            call("GET", "/nowhere/" + marker, "-", None, "default", 404, headers=headers())
            call("GET", "/healthz", "/healthz", None, "default", 403,
                 headers={"host": f"evil.example:{srv.url.rsplit(':', 1)[1]}"})
            call("GET", "/openapi.json", "/openapi.json", None, "default", 200)
    finally:
        srv.stop()
    log = srv.log()
    text, access = lines(log)
    port = srv.url.rsplit(":", 1)[1]
    startup = [line for line in text if "listening on" in line]
    assert len(startup) == 1 and text.index(startup[0]) == 0, text[:3]
    assert f"http://127.0.0.1:{port}" in startup[0]
    assert f"data {srv.data.resolve()};" in startup[0] and "auth on" in startup[0]
    assert "at most 1000 stores" in startup[0] and "at most 7 open" in startup[0]
    # The start-up's own health check, then each request in order, the stop's two lines,
    # and nothing else.
    assert access[0] == {"method": "GET", "route": "/healthz", "op": None,
                         "tenant": "default", "status": "200"}
    assert [tuple(a.values()) for a in access[1:]] == sent
    others = [t for t in text if not ACCESS.match(t)]
    assert len(others) == 3 and text[-2:] == others[1:], others
    assert "holomem serve stopping on SIGTERM" in others[1], others
    assert "holomem serve stopped in" in others[2], others
    for value in (marker, secret, API_KEY, "DOCID", "purge", "evil.example"):
        assert value not in log, value


def test_a_server_without_a_key_says_auth_off(tmp_path: Path) -> None:
    srv = start(tmp_path / "data", api_key=None)
    srv.stop()
    (startup,) = [line for line in srv.log().splitlines() if "listening on" in line]
    assert "auth off" in startup and "0 of at most 1000 stores exist" in startup


def test_each_record_carries_its_fields_and_a_failure_is_logged_as_500(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """In process, for handlers of one's own: the record's attributes; the status of a
    request the server failed is the 500 the client got."""
    def fail(*args: object) -> object:
        raise RuntimeError("boom: internal detail")

    monkeypatch.setattr(tenants_door.Memory, "call", fail)
    app = create_app(str(tmp_path / "data"))
    with caplog.at_level(logging.INFO, logger="holomem.http"), \
            TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False) as c:
        assert c.post("/api/v1/memory/recall", json={"query": "x"},
                      headers={"x-tenant-id": "t1"}).status_code == 500
        assert c.get("/api/v1/documents/some-id").status_code == 404
    first, second = [r for r in caplog.records if r.name == "holomem.http"]
    assert (first.method, first.route, first.op, first.tenant, first.status) == \
        ("POST", "/api/v1/memory/{op}", "recall", "t1", 500)
    assert isinstance(first.duration_ms, float) and "boom" not in first.getMessage()
    assert (second.route, second.op, second.status) == ("/api/v1/documents/{doc_id}", None, 404)
