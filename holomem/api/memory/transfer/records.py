"""The records export writes and import reads (docs/contract.md §4d): a fact with its whole
history, its supersession links, typed relations and feedback, and the import's report.

Owns: :class:`FactExport` and its parts, the export format's versions and
:class:`ImportReport`. Imports the memory tier's base shapes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from holomem.api.memory.shapes import Request, Response


# -- export and import (docs/contract.md §4d) ------------------------------------------
class LinkRecord(Request, frozen=True):
    """A supersession link, kept in the successor's record: this fact supersedes
    ``supersedes``, known from ``known_at`` (ms) on."""

    supersedes: str
    known_at: int


class RelationRecord(Request, frozen=True):
    """A typed relation ``from_id -[relation]-> to_id`` in an export record (format 2):
    kept in the record of whichever end the export writes later, so the other end is
    always on an earlier line. ``time``: when the source store learned it; ``order``:
    its place in the order the source made its links (import makes them in that
    order, so ``links`` and ``why`` answer as the source did)."""

    from_id: str
    to_id: str
    relation: str
    time: int
    metadata: dict[str, Any] | None = None
    order: int | None = None


class FeedbackRecord(Request, frozen=True):
    helpful: bool
    time: int
    note: str | None = None


class ConfidenceRecord(Request, frozen=True):
    """A confidence set on a fact: ``confidence`` from ``time`` (ms) on."""

    time: int
    confidence: float


class ConfidenceHistory(Request, frozen=True):
    """How a fact's confidence came to be (format 3): the one it was remembered with,
    then each one set on it since, in order (the last is the record's ``confidence``)."""

    remembered: float
    changes: list[ConfidenceRecord]


#: The version of :class:`FactExport`'s form an export writes (2: records carry
#: ``relations``; 3: ``confidenceHistory``); import reads :data:`EXPORT_FORMATS`, any
#: other is refused.
EXPORT_FORMAT = 3


EXPORT_FORMATS = (1, 2, 3)


class FactExport(Request, frozen=True):
    """One fact as ``Memory.export`` writes it and ``Memory.import_`` reads it: all it
    takes to rebuild the fact exactly (JSON: camelCase, one object per line).

    ``embedding`` is the caller's vector as written; ``requested`` the caller's own
    ``supersedes`` list; ``links`` every supersession link this fact holds as the
    successor (its own, a policy's, re-pointed ones), each with its known-at time;
    ``digest`` the hex payload digest that makes a retried remember idempotent;
    ``relations`` the typed links whose later-written end this fact is (format 2);
    ``confidence_history`` each confidence set on it with its time, when one was
    (format 3), so a look back with ``known_at`` answers as on the source.
    """

    id: str
    text: str
    ingest_time: int
    namespace: list[str] = msgspec.field(default_factory=list)
    subject: str | None = None
    entities: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    event_time: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    requested: list[str] = msgspec.field(default_factory=list)
    links: list[LinkRecord] = msgspec.field(default_factory=list)
    confidence: float = 1.0
    feedback: list[FeedbackRecord] = msgspec.field(default_factory=list)
    digest: str | None = None
    format: int = EXPORT_FORMAT
    ttl_ms: int | None = None
    relations: list[RelationRecord] = msgspec.field(default_factory=list)
    #: Its conversation turn, when it is one (docs/contract.md §4g).
    speaker: str | None = None
    session: str | None = None
    position: int | None = None
    confidence_history: ConfidenceHistory | None = None


class ImportReport(Response, frozen=True):
    """What ``import_`` did: facts written, facts already there with the same payload
    (no-ops), transactions, supersession links whose other fact never arrived (not
    written), typed relations written, and relations an end of which is not a stored
    fact (not written)."""

    imported: int
    unchanged: int
    batches: int
    unresolved_links: int = 0
    relations: int = 0
    unresolved_relations: int = 0
