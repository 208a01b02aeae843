"""The public surface is ``holomem.__all__``, pinned (STYLE §2, httpx): a name added
or removed is a deliberate change to this list, never an accident."""

from __future__ import annotations

import pytest

import holomem

PUBLIC = [
    "AsyncMemory",
    "ChainEntry",
    "Clock",
    "ConflictError",
    "ConsolidateOptions",
    "ConsolidationReport",
    "CorruptError",
    "Document",
    "DocumentInput",
    "Explanation",
    "FactExport",
    "FactRecord",
    "ForgetOptions",
    "ForgetReport",
    "ForgetScope",
    "Hit",
    "HolomemError",
    "ImportReport",
    "InvalidError",
    "Journal",
    "LimitError",
    "MaintenanceOptions",
    "ManualClock",
    "Memory",
    "MemoryConfig",
    "NotFoundError",
    "Observation",
    "ProgressLines",
    "RecallOptions",
    "Recalled",
    "RememberInput",
    "Remembered",
    "Store",
    "StoreLockedError",
    "StoreStats",
    "SystemClock",
    "UnavailableError",
    "WrongKeyError",
]


def test_all_is_pinned() -> None:
    assert sorted(holomem.__all__) == PUBLIC
    assert len(set(holomem.__all__)) == len(holomem.__all__)


def test_every_exported_name_exists_and_is_the_defining_object() -> None:
    from holomem import errors
    from holomem.api import engine
    from holomem.api.memory import config, memory, policies, types

    for name in holomem.__all__:
        assert hasattr(holomem, name), name
    homes = {"Memory": memory, "Store": engine, "ManualClock": policies,
             "MemoryConfig": config, "RememberInput": types, "LimitError": errors,
             "UnavailableError": errors,
             "NotFoundError": errors, "ConflictError": errors, "InvalidError": errors}
    for name, module in homes.items():
        assert getattr(holomem, name) is getattr(module, name), name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from holomem import *", namespace)
    assert sorted(k for k in namespace if k != "__builtins__") == PUBLIC


def test_one_error_vocabulary_from_library_to_http() -> None:
    from holomem.errors import HTTP_STATUS, from_code

    for cls, code, status in ((holomem.InvalidError, "invalid_request", 422),
                              (holomem.LimitError, "limit", 422),
                              (holomem.NotFoundError, "not_found", 404),
                              (holomem.ConflictError, "conflict", 409),
                              (holomem.StoreLockedError, "locked", 423),
                              (holomem.UnavailableError, "unavailable", 503)):
        err = cls("m")
        assert (err.code, err.status, HTTP_STATUS[code]) == (code, status, status)
        assert type(from_code(code, "m")) is cls
    assert issubclass(holomem.LimitError, holomem.InvalidError)


def test_no_public_name_shadows_a_builtin() -> None:
    import builtins

    assert not [n for n in holomem.__all__ if hasattr(builtins, n)]
    with pytest.warns(DeprecationWarning):
        assert holomem.MemoryError is holomem.HolomemError
