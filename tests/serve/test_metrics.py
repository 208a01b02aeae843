"""``GET /metrics`` tells an operator what ``holomem serve`` did (docs/http.md "Metrics
and traces").

Scraped from a real ``holomem serve`` process and parsed with the client library's own
parser: a write raises the acknowledged writes and the fsyncs; requests are counted by
route template, op, method and status (never a raw path, an id or a tenant), and their
durations fill the histogram; the open tenants and the journal bytes are those on
disk; the checkpoint age is there for a store that has a checkpoint; the totals never
go back when a tenant store is closed; /metrics is behind the API key when one is set.
Two servers in one process keep their own figures.
"""

from __future__ import annotations

import itertools
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from holomem import Memory, Store
from holomem.api.doors.http.server import create_app
from tests import web
from tests.serve.conftest import API_KEY, Server, headers, start

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(url: str, key: str | None = API_KEY) -> tuple[str, Samples]:
    r = web.get(url + "/metrics", headers=headers(key=key), timeout=30)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return r.text, samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def remember(url: str, text: str, tenant: str | None = None) -> None:
    r = web.post(url + "/api/v1/memory/remember", json={"text": text},
                 headers=headers(tenant), timeout=30)
    assert r.status_code == 200, r.text


MEMORY = "/api/v1/memory/{op}"


def test_a_write_raises_the_acknowledged_writes_and_the_fsyncs(server: Server) -> None:
    remember(server.url, "Alice lives in Paris")  # the tenant's store exists from here
    _, before = scrape(server.url)
    remember(server.url, "Bob lives in Rome")
    _, after = scrape(server.url)
    # One remember is one transaction, durable (an fsync) before it is answered.
    assert value(after, "holomem_acknowledged_writes_total") == \
        value(before, "holomem_acknowledged_writes_total") + 1
    assert value(after, "holomem_journal_fsyncs_total") >= \
        value(before, "holomem_journal_fsyncs_total") + 1
    # A read writes nothing.
    r = web.post(server.url + "/api/v1/memory/recall", json={"query": "Paris"},
                 headers=headers(), timeout=30)
    assert r.status_code == 200
    _, read = scrape(server.url)
    assert value(read, "holomem_acknowledged_writes_total") == \
        value(after, "holomem_acknowledged_writes_total")


def test_requests_are_counted_by_route_template_op_and_status_without_ids_or_tenants(
        server: Server) -> None:
    remember(server.url, "Carol works at Acme", tenant="tenant-secret-name")
    bad = web.post(server.url + "/api/v1/memory/noSuchOp", json={},
                   headers=headers(), timeout=30)
    assert bad.status_code == 422
    missing = web.get(server.url + "/api/v1/documents/doc-secret-id", headers=headers(),
                      timeout=30)
    assert missing.status_code == 404
    refused = web.post(server.url + "/api/v1/memory/recall", json={"query": "x"},
                       headers=headers(key=None), timeout=30)
    assert refused.status_code == 401
    odd = web.request("PATCH", server.url + "/healthz", timeout=30)
    assert odd.status_code == 405
    text, samples = scrape(server.url)
    count = "holomem_http_requests_total"
    assert value(samples, count, route=MEMORY, op="remember", method="POST",
                 status="200") == 1
    assert value(samples, count, route=MEMORY, op="?", method="POST", status="422") == 1
    assert value(samples, count, route=MEMORY, op="recall", method="POST",
                 status="401") == 1
    assert value(samples, count, route="/api/v1/documents/{doc_id}", op="", method="GET",
                 status="404") == 1
    assert value(samples, count, route="/healthz", op="", method="PATCH",
                 status="405") == 1
    # What clients name stays out: no id, no op name outside the contract, no tenant.
    for secret in ("doc-secret-id", "noSuchOp", "tenant-secret-name"):
        assert secret not in text


def test_the_inspector_pages_are_counted_and_logged_as_their_mounted_route(
        server: Server) -> None:
    remember(server.url, "Dana lives in Lima", tenant="t1")
    for path, status in (("/ui/", 200), ("/ui/fact?id=nobody", 404), ("/ui/store", 200)):
        r = web.get(server.url + path + ("&" if "?" in path else "?") + "tenant=t1",
                    headers=headers(), timeout=30)
        assert r.status_code == status, r.text
    assert web.get(server.url + "/no/such/route", headers=headers(),
                   timeout=30).status_code == 404
    _, samples = scrape(server.url)
    count = "holomem_http_requests_total"
    assert value(samples, count, route="/ui", op="", method="GET", status="200") == 2
    assert value(samples, count, route="/ui", op="", method="GET", status="404") == 1
    # "-" is a request no route matched, and only that.
    assert value(samples, count, route="-", op="", method="GET", status="404") == 1
    lines = [line for line in server.log().splitlines() if " GET " in line]
    assert sum(" GET /ui tenant=" in line for line in lines) == 3, lines
    assert sum(" GET - tenant=" in line for line in lines) == 1, lines


def test_the_duration_histogram_holds_each_request(server: Server) -> None:
    for i in range(3):
        remember(server.url, f"fact number {i}")
    _, samples = scrape(server.url)
    name = "holomem_http_request_duration_seconds"
    labels = {"route": MEMORY, "op": "remember", "method": "POST"}
    assert value(samples, name + "_count", **labels) == 3
    assert value(samples, name + "_sum", **labels) > 0
    buckets = sorted((float(dict(k[1])["le"]), v) for k, v in samples.items()
                     if k[0] == name + "_bucket" and dict(k[1]).get("op") == "remember")
    assert buckets[-1] == (float("inf"), 3)
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(buckets))


def _journal_bytes(data: Path) -> int:
    return sum(p.stat().st_size for p in data.glob("tenants/*/gen-*/seg-*.hlj"))


def test_open_tenants_and_journal_bytes_are_the_stores_on_disk(server: Server) -> None:
    _, empty = scrape(server.url)
    assert value(empty, "holomem_open_tenants") == 0
    assert value(empty, "holomem_tenant_stores") == 0
    for tenant in ("t1", "t2", "t3"):
        remember(server.url, f"a fact of {tenant}", tenant=tenant)
    _, samples = scrape(server.url)
    assert value(samples, "holomem_open_tenants") == 3
    assert value(samples, "holomem_tenant_stores") == 3
    assert value(samples, "holomem_open_tenants_limit") == 64
    assert value(samples, "holomem_tenant_stores_limit") == 1000
    assert value(samples, "holomem_journal_bytes") == _journal_bytes(server.data) > 0


def test_the_totals_never_go_back_when_a_tenant_store_is_closed(tmp_path: Path) -> None:
    srv = start(tmp_path / "data", "--max-tenants", "1")
    try:
        totals = []
        for i, tenant in enumerate(("a", "b", "c", "a")):  # each closes the one open
            remember(srv.url, f"fact {i} about {tenant}", tenant=tenant)
            _, samples = scrape(srv.url)
            assert value(samples, "holomem_open_tenants") == 1
            totals.append((value(samples, "holomem_acknowledged_writes_total"),
                           value(samples, "holomem_journal_fsyncs_total")))
        for earlier, later in itertools.pairwise(totals):
            assert later[0] > earlier[0] and later[1] > earlier[1]
    finally:
        srv.stop()


def test_the_checkpoint_age_is_there_for_a_store_that_has_one(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Store.open(data / "tenants" / "kept") as store:
        Memory(store).remember("Dana lives in Oslo")
        assert store.checkpoint() is not None
    srv = start(data)
    try:
        _, none_open = scrape(srv.url)
        assert ("holomem_checkpoint_age_seconds", frozenset()) not in none_open
        recall = web.post(srv.url + "/api/v1/memory/recall", json={"query": "Oslo"},
                          headers=headers("kept"), timeout=30)
        assert recall.status_code == 200 and recall.json()["results"]
        remember(srv.url, "Eve lives in Lima", tenant="fresh")
        text, samples = scrape(srv.url)
        assert "# TYPE holomem_checkpoint_age_seconds gauge" in text
        age = samples[("holomem_checkpoint_age_seconds", frozenset())]
        assert 0 <= age < 24 * 3600
        assert value(samples, "holomem_open_tenants_without_checkpoint") == 1  # "fresh"
        assert value(samples, "holomem_checkpoint_tail_bytes") > 0
    finally:
        srv.stop()


def test_metrics_need_the_api_key_when_one_is_set(server: Server, tmp_path: Path) -> None:
    for given in ({}, {"authorization": "Bearer wrong"}, {"x-api-key": "wrong"}):
        r = web.get(server.url + "/metrics", headers=given, timeout=30)
        assert r.status_code == 401
        assert r.json()["error"]["code"] == "unauthorized"
        assert "holomem_" not in r.text
    assert web.get(server.url + "/metrics", headers={"x-api-key": API_KEY},
                   timeout=30).status_code == 200
    scrape(server.url)  # the bearer form
    # A server with no key (loopback only, by default) answers anyone, as its API does.
    open_srv = start(tmp_path / "open", api_key=None)
    try:
        scrape(open_srv.url, key=None)
    finally:
        open_srv.stop()


def test_openmetrics_is_answered_when_asked_for(server: Server) -> None:
    r = web.get(server.url + "/metrics", timeout=30,
                headers={**headers(), "accept": "application/openmetrics-text"})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/openmetrics-text")
    assert r.text.rstrip().endswith("# EOF")


def test_two_servers_in_one_process_keep_their_own_metrics(tmp_path: Path) -> None:
    one = create_app(str(tmp_path / "one"))
    two = create_app(str(tmp_path / "two"))
    with TestClient(one, base_url="http://127.0.0.1") as c1, \
            TestClient(two, base_url="http://127.0.0.1") as c2:
        assert c1.post("/api/v1/memory/remember", json={"text": "only in one"}
                       ).status_code == 200
        # A method a client makes up is counted as "other" (labels stay bounded).
        assert c2.request("BREW", "/healthz").status_code == 405
        first = {s.name: s.value for f in text_string_to_metric_families(
            c1.get("/metrics").text) for s in f.samples if not s.labels}
        page = c2.get("/metrics").text
        second = {s.name: s.value for f in text_string_to_metric_families(page)
                  for s in f.samples if not s.labels}
    assert first["holomem_open_tenants"] == 1 and second["holomem_open_tenants"] == 0
    assert first["holomem_acknowledged_writes_total"] >= 1
    assert second["holomem_acknowledged_writes_total"] == 0
    assert 'method="other"' in page and "BREW" not in page
