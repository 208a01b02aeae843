"""The suite's options: ``--exhaustive`` (tests/exhaustive.py) and the parallel run.

The README's command runs the suite on every core (pytest-xdist, ``-n auto`` in
pyproject's addopts); each worker is its own process with its own temporary
directories (``tmp_path``), free ports (bound to port 0), and environment. Tests that
share an expensive module fixture (a NATS cluster, the crash matrix's reference runs)
are kept on one worker by ``pytest.mark.xdist_group`` (``--dist loadgroup``). Every
process of the run writes and reuses Python's bytecode caches (see pytest_configure).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests import exhaustive


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exhaustive", action="store_true", default=False,
        help="run every matrix whole (every bit of every byte, every crash point at every "
             f"hit count, the soaks); the same as {exhaustive.ENV}=1")


def pytest_configure(config: pytest.Config) -> None:
    # Before collection, so that the matrices read it when their modules load; the
    # xdist workers start after this and inherit it (and run this hook themselves).
    if config.getoption("exhaustive"):
        os.environ[exhaustive.ENV] = "1"
    # The suite starts hundreds of interpreters (the command line, servers, the crash
    # harness's pools): with PYTHONDONTWRITEBYTECODE set, each one compiled holomem's
    # sources again (a third of its start), and each worker every test module. The
    # suite's processes write and reuse the bytecode caches (``__pycache__``, which git
    # ignores) whatever the calling shell asked.
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        sys.dont_write_bytecode = False


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that uses a module-scoped fixture runs on the worker that runs the rest of
    its module: the fixture (a server, a cluster, reference runs) is built once, as in a
    serial run. Other tests go to whichever worker is free."""
    for item in items:
        info = getattr(item, "_fixtureinfo", None)  # pytest's own record of the fixtures
        defs = info.name2fixturedefs.values() if info is not None else ()
        # baseid "": a plugin's fixture (tmp_path_factory is session-scoped, and cheap).
        if any(d[-1].scope == "module" and d[-1].baseid for d in defs if d):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def pytest_report_header(config: pytest.Config) -> str:
    form = "exhaustive" if exhaustive.on() else f"CI sample ({exhaustive.ENV} unset)"
    return f"holomem matrices: {form}"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The spans holomem's ops make, kept by the OpenTelemetry SDK's in-memory exporter
    (an ``InMemorySpanExporter``), from a tracer provider of the test's own put in place
    of :data:`holomem.api.memory.tracing.TRACER`: no process-wide provider is set. The
    SDK is imported here, when a test asks for it (the ``test`` extra has it)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from holomem.api.memory import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(tracing, "TRACER", provider.get_tracer("holomem"))
    yield exporter
    provider.shutdown()
