"""holomem: an embedded, event-sourced memory for AI agents.

The public surface is :data:`__all__` (pinned by tests/contract/test_public_api.py).
"""

from holomem.api.engine import Document, DocumentInput, Hit, Store, StoreStats
from holomem.api.memory.aio import AsyncMemory
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.memory import Memory
from holomem.api.memory.policies import Clock, ManualClock, Observation, SystemClock
from holomem.api.memory.progress import ProgressLines
from holomem.api.memory.transfer.records import FactExport, ImportReport
from holomem.api.memory.types import (
    ChainEntry,
    ConsolidateOptions,
    ConsolidationReport,
    Explanation,
    FactRecord,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    MaintenanceOptions,
    Recalled,
    RecallOptions,
    Remembered,
    RememberInput,
)
from holomem.errors import (
    ConflictError,
    CorruptError,
    HolomemError,
    InvalidError,
    LimitError,
    NotFoundError,
    StoreLockedError,
    UnavailableError,
    WrongKeyError,
)
from holomem.log import Journal

__all__ = [
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
    "LimitError",
    "Journal",
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
__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    if name == "MemoryError":  # the first release's contract error; deprecated
        from holomem import errors

        return errors.__getattr__(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
