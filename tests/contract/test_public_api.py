"""The public surface is ``holomem.__all__``, pinned (STYLE §2, httpx): a name added
or removed is a deliberate change to this list, never an accident."""

from __future__ import annotations

import holomem

PUBLIC = [
    "ChainEntry",
    "Clock",
    "ConflictError",
    "ConsolidateOptions",
    "ConsolidationReport",
    "CorruptError",
    "Document",
    "DocumentInput",
    "Explanation",
    "FactRecord",
    "ForgetOptions",
    "ForgetReport",
    "ForgetScope",
    "Hit",
    "HolomemError",
    "InvalidError",
    "Journal",
    "MaintenanceOptions",
    "ManualClock",
    "Memory",
    "MemoryConfig",
    "MemoryError",
    "NotFoundError",
    "Observation",
    "RecallOptions",
    "Recalled",
    "RememberInput",
    "Remembered",
    "Store",
    "StoreLockedError",
    "StoreStats",
    "SystemClock",
    "WrongKeyError",
]


def test_all_is_pinned() -> None:
    assert sorted(holomem.__all__) == PUBLIC
    assert len(set(holomem.__all__)) == len(holomem.__all__)


def test_every_exported_name_exists_and_is_the_defining_object() -> None:
    from holomem import errors
    from holomem.api import documents, memory, policies, types

    for name in holomem.__all__:
        assert hasattr(holomem, name), name
    homes = {"Memory": memory, "Store": documents, "ManualClock": policies,
             "MemoryConfig": types, "RememberInput": types, "MemoryError": errors,
             "NotFoundError": errors, "ConflictError": errors, "InvalidError": errors}
    for name, module in homes.items():
        assert getattr(holomem, name) is getattr(module, name), name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from holomem import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == PUBLIC


def test_contract_errors_are_memory_errors_with_http_statuses() -> None:
    from holomem.errors import HTTP_STATUS

    for code, status in (("invalid_request", 422), ("not_found", 404), ("conflict", 409)):
        err = holomem.MemoryError(code, "m")
        assert isinstance(err, holomem.HolomemError)
        assert (err.code, err.status, HTTP_STATUS[code]) == (code, status, status)
