"""What fsck reports: its findings, its report, its exit statuses.

Owns: :class:`Finding` (one problem, located), :class:`Report` (a check of one store)
and the e2fsck exit statuses. Imports only the standard library, so that the checker
(:mod:`holomem.fsck.checker`), the advice (:mod:`holomem.fsck.advice`) and the command
line (:mod:`holomem.fsck.cli`) share them without importing one another.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: e2fsck's exit statuses: clean, errors corrected, errors left uncorrected, operational
#: error (no store, unreadable, wrong key, locked; for a salvage: nothing written).
EXIT_CLEAN, EXIT_CORRECTED, EXIT_UNCORRECTED, EXIT_OPERATIONAL = 0, 1, 4, 8


@dataclass
class Finding:
    """One problem: its kind (``code``), where it is, what it means, and what to do.

    ``durable`` marks damage that hides transactions the watermark says were
    acknowledged; ``next_step`` says what to do about it (empty once repaired).
    """

    code: str
    path: str
    offset: int
    length: int
    message: str
    repairable: bool
    repaired: bool = False
    backup: str | None = None
    durable: bool = False
    next_step: str = ""


@dataclass
class Report:
    """A check of the store at ``store``; ``next_step`` is the advice for the whole of it."""

    store: str
    generation: int = 0
    segments: int = 0
    transactions: int = 0
    documents: int = 0
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    #: the holomem error code of ``error`` (``locked``, ``key.wrong``, ``io`` ...)
    error_code: str | None = None
    exit_code: int = EXIT_CLEAN
    seconds: float = 0.0
    next_step: str = ""

    @property
    def clean(self) -> bool:
        return not self.findings and self.error is None

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["clean"] = self.clean
        return out
