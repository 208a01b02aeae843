"""With the ``otel`` extra, each ``Memory`` op runs in one OpenTelemetry span named for
it (docs/http.md "Metrics and traces"), from Python and through ``Memory.call`` alike;
its attributes say the op, the namespace, how many results and the error's code, and
never a query, a fact's text or an error's message. Without OpenTelemetry installed
nothing is imported and the methods are not wrapped.

The spans are read with the SDK's ``InMemorySpanExporter``, from a tracer provider of
the test's own (put in place of :data:`holomem.api.memory.tracing.TRACER`), so no
process-wide provider is set; one test runs in a child process to show the
application's global provider is followed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from holomem import Memory, Store
from holomem.api.memory import tracing
from holomem.errors import InvalidError

SECRET = "Zanzibar-7731 is the vault code"


def _values(span: ReadableSpan) -> list[str]:
    return [str(v) for v in (span.attributes or {}).values()]


def test_each_op_runs_in_one_span_named_for_it_with_no_text(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        memory = Memory(store)
        spans.clear()  # the open's own work is not an op
        memory.remember({"text": SECRET, "namespace": ["users", "u-42"]})
        results = memory.recall("Zanzibar vault", {"namespace": ["users", "u-42"]})
        memory.call("remember", {"facts": [{"text": "a second fact"},
                                           {"text": "a third fact"}]})
        memory.call("list", {})
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert list(by_name) == ["holomem.remember", "holomem.recall", "holomem.remember_many",
                             "holomem.list"]
    remember, recall, many, listed = by_name.values()
    # One fact remembered answers one result, not a collection: no count.
    assert remember.attributes == {"holomem.op": "remember",
                                   "holomem.namespace": "users/u-42"}
    assert recall.attributes == {"holomem.op": "recall", "holomem.namespace": "users/u-42",
                                 "holomem.result.count": len(results)}
    assert many.attributes == {"holomem.op": "remember_many", "holomem.result.count": 2}
    assert listed.attributes == {"holomem.op": "list", "holomem.result.count": 3}
    for span in (remember, recall, many, listed):
        assert span.status.status_code is StatusCode.UNSET
        assert not span.events  # no exception event, no log line with text
        assert not any("Zanzibar" in v or "vault" in v for v in _values(span))


def test_a_failed_op_says_its_error_code_and_not_its_message(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        memory = Memory(store)
        spans.clear()
        with pytest.raises(InvalidError):
            memory.remember({"text": SECRET, "confidence": 7})
    (span,) = spans.get_finished_spans()
    assert span.name == "holomem.remember"
    assert span.attributes is not None and span.attributes["error.type"] == "invalid_request"
    assert span.status.status_code is StatusCode.ERROR
    assert not span.status.description and not span.events
    assert not any("Zanzibar" in v for v in _values(span))


#: What a span's attributes may hold: these keys, the op, the call's own namespace.
ATTRIBUTES = {"holomem.op", "holomem.namespace", "holomem.result.count", "error.type"}
NAMESPACE = ["users", "u-42"]

#: Strings a caller sends as content: each begins with a mark no attribute could hold.
_content = st.text(min_size=1, max_size=24).map(lambda s: "Qx7-" + s)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | _content,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_content, inner, max_size=3),
    max_leaves=8)
#: A mapping as a caller sends it (not empty: a working context's state may not be),
#: often with a "namespace" key of its own (a string,
#: a list of strings, anything).
_mapping = st.builds(
    lambda d, has, ns: {**d, "namespace": ns} if has else d,
    st.dictionaries(_content, _json, min_size=1, max_size=4), st.booleans(),
    _content | st.lists(_content, min_size=1, max_size=3) | _json)


def _contents(value: object) -> set[str]:
    """Every string inside ``value`` (keys too)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_contents(k) | _contents(v) for k, v in value.items()))
    if isinstance(value, list):
        return set().union(*map(_contents, value))
    return set()


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(metadata=_mapping, state=_mapping, text=_content, query=_content)
def test_no_span_attribute_holds_metadata_state_text_or_a_query(
        tmp_path_factory: pytest.TempPathFactory, spans: InMemorySpanExporter,
        metadata: dict[str, object], state: dict[str, object], text: str,
        query: str) -> None:
    # A fact's metadata and a working context's state may hold a "namespace" key of
    # their own: only the call's own namespace parameter (or its request's field) is
    # the namespace it names.
    sent = _contents(metadata) | _contents(state) | {text, query}
    with Store.open(tmp_path_factory.mktemp("spans") / "s", sync="batch") as store:
        memory = Memory(store)
        a = memory.remember({"text": text, "metadata": metadata, "namespace": NAMESPACE}).id
        b = memory.remember(text + " again", namespace=NAMESPACE).id
        memory.relate(a, b, "cites", metadata, namespace=NAMESPACE)
        memory.relate(a, b, "quotes", metadata)
        memory.save_working_context(NAMESPACE, "s1", state)
        memory.save_working_context(None, "s2", state)
        memory.recall(query, {"namespace": NAMESPACE})
        memory.recall(query, namespace=NAMESPACE)
        memory.call("relate", {"fromId": a, "toId": b, "relation": "answers",
                               "metadata": metadata})
        memory.call("saveWorkingContext", {"session": "s3", "state": state})
        memory.call("remember", {"text": text, "metadata": metadata})
    named = {"remember": 2, "relate": 1, "save_working_context": 1, "recall": 2}
    for span in spans.get_finished_spans():
        attributes = dict(span.attributes or {})
        assert set(attributes) <= ATTRIBUTES, attributes
        assert span.name == f"holomem.{attributes['holomem.op']}"
        assert "error.type" not in attributes
        assert not sent & {v for v in attributes.values() if isinstance(v, str)}, attributes
        if "holomem.namespace" in attributes:
            assert attributes["holomem.namespace"] == "users/u-42", attributes
            named[str(attributes["holomem.op"])] -= 1
    # The calls that named the namespace said it, the others said none.
    assert set(named.values()) == {0}, named
    spans.clear()


@pytest.mark.parametrize("namespace", [
    "users//" + SECRET, "a/" + "x" * 5000, ["users", ""], ["users", SECRET + "\x00"],
    ["n"] * 9, [1, 2]])
def test_a_namespace_validation_refuses_is_never_put_on_a_span(
        tmp_path: Path, spans: InMemorySpanExporter, namespace: object) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        memory = Memory(store)
        spans.clear()
        with pytest.raises(InvalidError):
            memory.remember({"text": "a fact", "namespace": namespace})
        with pytest.raises(InvalidError):
            memory.save_working_context(namespace, "s", {"a": 1})  # type: ignore[arg-type]
    for span in spans.get_finished_spans():
        attributes = span.attributes or {}
        assert "holomem.namespace" not in attributes, attributes
        assert attributes["error.type"] in ("invalid_request", "limit")


def test_async_memory_makes_the_spans_memory_makes(
        tmp_path: Path, spans: InMemorySpanExporter) -> None:
    import asyncio

    from holomem import AsyncMemory

    async def main(am: AsyncMemory) -> None:
        await am.remember(SECRET, namespace=NAMESPACE)
        assert len([r async for r in am.export(NAMESPACE)]) == 1
        with pytest.raises(InvalidError):
            [r async for r in am.export(no_such_argument=1)]  # type: ignore[call-arg]

    with Store.open(tmp_path / "s", sync="batch") as store:
        am = AsyncMemory(store)
        spans.clear()
        asyncio.run(main(am))
    assert [(s.name, dict(s.attributes or {})) for s in spans.get_finished_spans()] == [
        ("holomem.remember", {"holomem.op": "remember", "holomem.namespace": "users/u-42"}),
        ("holomem.export", {"holomem.op": "export", "holomem.namespace": "users/u-42"}),
        ("holomem.export", {"holomem.op": "export", "error.type": "invalid_request"})]


def test_the_applications_global_tracer_provider_is_followed(tmp_path: Path) -> None:
    # A process of its own: a global provider can be set only once per process.
    script = textwrap.dedent(f"""
        import json
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
        from holomem import Memory, Store   # imported before the provider is set
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        with Store.open({str(tmp_path / "s")!r}, sync="batch") as store:
            memory = Memory(store)
            exporter.clear()
            memory.call("remember", {{"text": "one fact"}})
            memory.call("info", {{}})
        print(json.dumps([s.name for s in exporter.get_finished_spans()]))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert json.loads(out.strip().splitlines()[-1]) == ["holomem.remember", "holomem.info"]


def test_without_opentelemetry_nothing_is_imported_or_wrapped() -> None:
    # With the extra (this process), each op method is the tracing wrapper...
    assert tracing.enabled() and Memory.recall.__code__.co_name == "run"
    # ... and in a process where opentelemetry cannot be imported, the plain method.
    script = textwrap.dedent("""
        import json, sys
        sys.modules["opentelemetry"] = None   # as if the otel extra were not installed
        from holomem import Memory
        from holomem.api.memory import tracing
        loaded = sorted(m for m in sys.modules
                        if m.startswith("opentelemetry") and sys.modules[m] is not None)
        print(json.dumps({"enabled": tracing.enabled(), "loaded": loaded,
                          "method": Memory.recall.__code__.co_name}))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert json.loads(out.strip().splitlines()[-1]) == {
        "enabled": False, "loaded": [], "method": "method"}
