"""The HTTP door speaks the contract, keeps tenants apart, and never weakens a guarantee."""

from __future__ import annotations

import concurrent.futures
import os
import random
import signal
import time
from pathlib import Path

import httpx

from holomem import Store
from tests import exhaustive, web

from .conftest import API_KEY, Server, headers, start


def post(srv: Server, path: str, body: object, tenant: str | None = None,
         key: str | None = API_KEY) -> httpx.Response:
    return web.post(srv.url + path, json=body, headers=headers(tenant, key), timeout=30)


def test_every_op_of_the_contract_answers_over_http(server: Server) -> None:
    r = post(server, "/api/v1/memory/remember",
             {"id": "p", "text": "Alice lives in Paris", "subject": "alice/city",
              "validFrom": 1000, "entities": ["Alice"]})
    assert r.status_code == 200 and r.json()["remembered"][0]["created"] is True
    r = post(server, "/api/v1/memory/remember",
             {"facts": [{"id": "b", "text": "Alice lives in Berlin", "subject": "alice/city",
                         "validFrom": 2000, "supersedes": ["p"], "entities": ["Alice"]}]})
    assert r.json()["remembered"][0]["superseded"] == ["p"]
    results = post(server, "/api/v1/memory/recall", {"query": "where does Alice live"}).json()
    assert [x["id"] for x in results["results"]] == ["b"]
    past = post(server, "/api/v1/memory/recall", {"query": "Alice", "asOf": 1500}).json()
    assert [x["id"] for x in past["results"]] == ["p"]
    expl = post(server, "/api/v1/memory/explain", {"query": "Alice", "id": "p"}).json()
    assert expl["explanation"]["retrieved"] is False
    assert expl["explanation"]["status"] == "superseded"
    assert post(server, "/api/v1/memory/get", {"id": "p"}).json()["fact"]["status"] == \
        "superseded"
    hist = post(server, "/api/v1/memory/history", {"id": "b"}).json()["history"]
    assert [h["id"] for h in hist] == ["p", "b"]
    for op, body in (("applyForgetting", {}), ("consolidate", {}),
                     ("probe", {"entity": "Alice"}), ("related", {"entity": "Alice"}),
                     ("reason", {"entities": ["Alice"]}), ("contradict", {}),
                     ("feedback", {"id": "b", "helpful": True}), ("list", {"limit": 5}),
                     ("setConfidence", {"id": "b", "confidence": 0.5})):
        r = post(server, f"/api/v1/memory/{op}", body)
        assert r.status_code == 200, (op, r.text)
    report = post(server, "/api/v1/memory/forget", {"scope": {"ids": ["b"]}}).json()
    assert report["removed"] == ["b"]
    assert post(server, "/api/v1/memory/get", {"id": "b"}).json()["fact"] is None


def test_errors_have_the_contract_codes_statuses_and_body(server: Server) -> None:
    cases = [
        ("recall", {"query": "x", "bogus": 1}, 422, "invalid_request"),
        ("recall", {"query": 5}, 422, "invalid_request"),
        ("recall", {"query": "x", "k": 100000}, 422, "invalid_request"),
        ("recall", {"query": "x", "candidateLimit": 5000}, 422, "invalid_request"),
        ("nope", {}, 422, "invalid_request"),
        ("history", {"id": "missing"}, 404, "not_found"),
        ("explain", {"query": "x", "id": "missing"}, 404, "not_found"),
    ]
    post(server, "/api/v1/memory/remember", {"id": "c", "text": "one"})
    cases.append(("remember", {"id": "c", "text": "two"}, 409, "conflict"))
    for op, body, status, code in cases:
        r = post(server, f"/api/v1/memory/{op}", body)
        assert r.status_code == status, (op, r.text)
        assert r.json()["error"]["code"] == code and r.json()["error"]["message"]
    as_json = {**headers(), "content-type": "application/json"}
    r = web.post(server.url + "/api/v1/memory/recall", content=b"{not json",
                 headers=as_json)
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = web.post(server.url + "/api/v1/memory/recall", content=b"[1, 2]", headers=as_json)
    assert r.status_code == 422


def test_an_api_key_is_required_and_compared_exactly(server: Server) -> None:
    assert post(server, "/api/v1/memory/recall", {"query": "x"}, key=None).status_code == 401
    assert post(server, "/api/v1/memory/recall", {"query": "x"},
                key=API_KEY + "x").status_code == 401
    r = web.post(server.url + "/api/v1/memory/recall", json={"query": "x"},
                 headers={"x-api-key": API_KEY})
    assert r.status_code == 200
    assert r.json() == {"results": []}


def test_limits_refuse_oversized_bodies_and_batches(server: Server) -> None:
    big = {"text": "x" * (2 << 20)}
    r = post(server, "/api/v1/memory/remember", big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "limit"
    batch = {"facts": [{"text": f"fact {i}"} for i in range(1001)]}
    r = post(server, "/api/v1/memory/remember", batch)
    assert r.status_code == 422
    assert post(server, "/api/v1/memory/list", {}).json()["facts"] == []  # nothing written


def test_a_conversation_of_more_messages_than_the_batch_bound_is_refused_with_a_limit_error(
        server: Server) -> None:
    # Each message is a fact: the server's bound of facts per request holds for them too.
    said = [{"role": "user" if i % 2 else "assistant", "text": f"turn {i}"}
            for i in range(1001)]
    r = post(server, "/api/v1/memory/rememberConversation",
             {"messages": said, "session": "s"})
    assert r.status_code == 422 and r.json()["error"]["code"] == "limit", r.text[:300]
    assert "1000 messages" in r.json()["error"]["message"]
    assert post(server, "/api/v1/memory/list", {}).json()["facts"] == []  # nothing written
    r = post(server, "/api/v1/memory/rememberConversation",
             {"messages": said[:1000], "session": "s"})
    assert r.status_code == 200 and len(r.json()["turns"]) == 1000


def test_tenants_are_isolated_in_answers_and_in_files(server: Server) -> None:
    marker = "ZEBRAQUARTZ"
    post(server, "/api/v1/memory/remember", {"text": f"secret {marker}"}, tenant="alpha")
    post(server, "/api/v1/memory/remember", {"text": "plain fact"}, tenant="beta")
    for op, body in (("recall", {"query": f"secret {marker}"}), ("list", {})):
        r = post(server, f"/api/v1/memory/{op}", body, tenant="beta")
        assert marker not in r.text
    assert post(server, "/api/v1/memory/probe", {"entity": marker},
                tenant="beta").json()["results"] == []
    r = post(server, "/api/v1/memory/recall", {"query": marker}, tenant="alpha")
    assert marker in r.text
    beta = server.data / "tenants" / "beta"
    for root, _, files in os.walk(beta):
        for name in files:
            assert marker.encode() not in (Path(root) / name).read_bytes()
    for bad in ("../alpha", "a/b", "..", "", "x" * 65, "-lead"):
        r = post(server, "/api/v1/memory/recall", {"query": "x"}, tenant=bad)
        assert r.status_code == 422, bad
    assert not (server.data / "alpha").exists()


def test_document_routes_add_get_search_and_delete_with_purge(server: Server) -> None:
    r = post(server, "/api/v1/documents", {"documents": [
        {"id": "d1", "text": "the quick brown fox"}, {"id": "d2", "text": "MARKER lazy dog"}]})
    assert r.status_code == 200 and r.json()["revision"] >= 1
    hits = post(server, "/api/v1/documents/search", {"query": "fox", "k": 5}).json()["hits"]
    assert [h["id"] for h in hits] == ["d1"]
    doc = web.get(server.url + "/api/v1/documents/d1", headers=headers()).json()
    assert doc["document"]["text"] == "the quick brown fox"
    assert web.get(server.url + "/api/v1/documents/nope", headers=headers()).status_code == 404
    for odd in ("on", "maybe", ""):  # (not a delete that quietly keeps the text)
        r = web.delete(server.url + f"/api/v1/documents/d2?purge={odd}", headers=headers())
        assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_request"
    r = web.delete(server.url + "/api/v1/documents/d2?purge=true", headers=headers())
    assert r.json() == {"deleted": True}
    store = server.data / "tenants" / "default"
    for root, _, files in os.walk(store):
        for name in files:
            assert b"MARKER" not in (Path(root) / name).read_bytes()


def test_a_restart_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")
    ids = []
    try:
        for i in range(20):
            r = post(srv, "/api/v1/memory/remember", {"text": f"fact number {i}"}, tenant="t")
            ids.append(r.json()["remembered"][0]["id"])
    finally:
        assert srv.stop() in (0, -signal.SIGTERM)
    # The graceful shutdown closed the store: its text segment was sealed, so the
    # next open trusts it instead of reconciling it with the journal.
    with Store.open(tmp_path / "data" / "tenants" / "t") as store:
        assert store.stats().opened_by == "replay"
    srv = start(tmp_path / "data")
    try:
        for fid in ids:
            assert post(srv, "/api/v1/memory/get", {"id": fid}, tenant="t").json()["fact"]
    finally:
        srv.stop()


def test_concurrent_load_has_no_errors_and_loses_no_acknowledged_write(server: Server) -> None:
    rng = random.Random(5)
    # 8 clients at once, 100 requests each in CI, 250 in the exhaustive run.
    per_client = 250 if exhaustive.on() else 100
    plan = [(c, i, rng.random()) for c in range(8) for i in range(per_client)]
    acked: list[str] = []
    errors: list[str] = []

    def client(c: int) -> None:
        with httpx.Client(base_url=server.url, headers=headers(), timeout=30) as http:
            for _, i, roll in (p for p in plan if p[0] == c):
                if roll < 0.5:
                    r = http.post("/api/v1/memory/remember",
                                  json={"text": f"client {c} fact {i} about load"})
                    if r.status_code == 200:
                        acked.append(r.json()["remembered"][0]["id"])
                elif roll < 0.9:
                    r = http.post("/api/v1/memory/recall", json={"query": f"client {c} fact"})
                else:
                    r = http.post("/api/v1/memory/list", json={"limit": 10})
                if r.status_code != 200:
                    errors.append(r.text)

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        list(pool.map(client, range(8)))
    elapsed = time.perf_counter() - t0
    assert errors == []
    print(f"\n{len(plan)} mixed requests from 8 clients: {len(plan) / elapsed:.0f} req/s")
    for fid in acked:
        assert post(server, "/api/v1/memory/get", {"id": fid}).json()["fact"] is not None
