"""Through ``holomem serve``, each op of the contract runs in an OpenTelemetry span named
for it, with no fact text, query or key in it (docs/http.md "Metrics and traces").

In process (the spans are read from the SDK's ``InMemorySpanExporter``, through a
tracer provider of the test's own put in place of the library's tracer), over
Starlette's HTTP test client; the small remember the server runs on its event loop
and the calls it runs in worker threads are both traced.
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.testclient import TestClient

from holomem.api.doors.http.server import create_app

KEY = "span-test-key-0123456789"
SECRET = "Quetzal-4417 opens the north door"


def test_each_http_op_runs_in_a_span_named_for_it_without_text(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    app = create_app(str(tmp_path / "data"), api_key=KEY)
    auth = {"authorization": f"Bearer {KEY}", "x-tenant-id": "t1"}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        # The tenant's first write (rehearsed on an empty store first, then run).
        assert client.post("/api/v1/memory/remember", json={"text": "a first fact"},
                           headers=auth).status_code == 200
        spans.clear()
        assert client.post("/api/v1/memory/remember", headers=auth, json={
            "text": SECRET, "namespace": ["doors"]}).status_code == 200
        found = client.post("/api/v1/memory/recall", headers=auth,
                            json={"query": "Quetzal north door"})
        assert found.status_code == 200
        bad = client.post("/api/v1/memory/setConfidence", headers=auth,
                          json={"id": "f-nope", "confidence": 0.5})
        assert bad.status_code == 404
    names = [s.name for s in spans.get_finished_spans()]
    assert names == ["holomem.remember", "holomem.recall", "holomem.set_confidence"]
    remember, recall, failed = spans.get_finished_spans()
    assert remember.attributes is not None
    assert remember.attributes["holomem.namespace"] == "doors"
    assert recall.attributes is not None
    assert recall.attributes["holomem.result.count"] == len(found.json()["results"]) >= 1
    assert failed.attributes is not None and failed.attributes["error.type"] == "not_found"
    for span in spans.get_finished_spans():
        text = " ".join(str(v) for v in (span.attributes or {}).values())
        assert "Quetzal" not in text and "north" not in text and KEY not in text
        assert "f-nope" not in text and not span.events
