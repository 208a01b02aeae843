"""Each op of the contract is described once, in the op table (holomem/api/memory/ops.py):
everything else that speaks the contract agrees with it — Memory and AsyncMemory, the
JSON decoding, the HTTP door's read and write sets and its OpenAPI document, the scoping
of a confined door, the MCP tools, the Python clients and ``capabilities``.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from holomem import AsyncMemory, ManualClock, Memory, Store
from holomem.api.memory import ops

pytest.importorskip("starlette")

from holomem.api.doors import scoping
from holomem.api.doors.http import memoryroute, openapi
from holomem.api.doors.mcp.tools import TOOLS
from holomem.client import AsyncClient, Client

#: Memory's calls that no op runs: Python-only (an iterator, code, no store involved).
PYTHON_ONLY = {"export", "render_context", "reembed", "notify", "call"}


def _calls(cls: type[Any]) -> set[str]:
    return {n for n in dir(cls) if not n.startswith(("_", "with_")) and callable(getattr(cls, n))}


def test_every_op_runs_a_memory_method_and_every_memory_call_is_an_op() -> None:
    methods = {op.method for op in ops.OPS.values()} | {ops.REMEMBER_MANY.method}
    assert methods <= _calls(Memory)
    assert _calls(Memory) - PYTHON_ONLY == methods


def test_every_op_is_a_coroutine_of_async_memory() -> None:
    for op in ops.OPS.values():
        assert inspect.iscoroutinefunction(getattr(AsyncMemory, op.method)), op.name


def test_every_op_is_a_call_of_both_clients() -> None:
    for op in [*ops.OPS.values(), ops.REMEMBER_MANY]:
        method = "export" if op.name == "export" else op.method
        assert callable(getattr(Client, method, None)), op.name
        assert callable(getattr(AsyncClient, method, None)), op.name


def test_the_http_read_and_write_sets_are_the_tables() -> None:
    assert set(ops.OPS) == memoryroute.READ_OPS | memoryroute.WRITE_OPS
    assert not memoryroute.READ_OPS & memoryroute.WRITE_OPS
    assert {n for n, op in ops.OPS.items() if op.writes} == memoryroute.WRITE_OPS


def test_the_openapi_document_has_every_op_with_its_request_and_response() -> None:
    doc = openapi.build()
    for name, op in ops.OPS.items():
        path = doc["paths"][f"{openapi.API_PREFIX}/memory/{name}"]["post"]
        assert path["summary"] == op.summary
        assert openapi.OPS[name].requests[0] is op.request


def test_a_confined_door_confines_every_op_the_table_lets_through() -> None:
    assert {n for n, op in ops.OPS.items() if op.scope != "none"} == scoping.HANDLED


def test_every_mcp_tool_runs_an_op_with_the_tables_request_and_write_flag() -> None:
    for tool in TOOLS.values():
        assert tool.request is ops.OPS[tool.op].request
        assert tool.writes == ops.OPS[tool.op].writes


def test_capabilities_answers_from_the_table(tmp_path: Any) -> None:
    with Store.open(str(tmp_path / "s")) as store:
        memory = Memory(store, clock=ManualClock(0))
        answer = memory.call("capabilities", {})
        assert answer["ops"] == sorted(ops.OPS)
        assert answer["writes"] == sorted(n for n, op in ops.OPS.items() if op.writes)
        assert set(answer["extras"]) == {"serve", "langgraph", "nats", "ann", "tokens",
                                          "otel"}
        assert memory.capabilities() == memory.capabilities()


def test_an_op_missing_from_the_table_is_unknown_to_every_door(tmp_path: Any) -> None:
    with Store.open(str(tmp_path / "s")) as store:
        memory = Memory(store, clock=ManualClock(0))
        with pytest.raises(Exception, match="unknown op"):
            memory.call("rememberLater", {})
