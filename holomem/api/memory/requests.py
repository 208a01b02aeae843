"""The JSON contract's request shapes (docs/contract.md §5b): what each op's body decodes into.

Owns: one Struct per op request (camelCase on the wire, unknown fields refused), the page
of an export, and the per-request bounds on export and import. The op table
(:mod:`.ops`) names which op takes which; :mod:`.contract` decodes. Imports the memory
API's types and the limits of the modules whose calls they carry.
"""

from __future__ import annotations

from typing import Any

import msgspec

from holomem.api.memory.conversation.types import Message
from holomem.api.memory.entities.profile import DEFAULT_LIMIT as PROFILE_LIMIT
from holomem.api.memory.shapes import Request
from holomem.api.memory.transfer import exchange
from holomem.api.memory.transfer.pages import MAX_EXPORT_PAGE
from holomem.api.memory.types import (
    ForgetScope,
    History,
    ListFilter,
    NamespaceArg,
    RecallOptions,
    RememberInput,
)
from holomem.api.memory.window.budget import DEFAULT_K, ContextFragment
from holomem.errors import LimitError

#: The most records one ``import`` request carries (a client sends more as several).
MAX_IMPORT_RECORDS = 1000


#: Relations one ``import`` request takes besides its records' own.
MAX_IMPORT_RELATIONS = 1000


class RememberMany(Request, frozen=True, kw_only=True):
    facts: list[RememberInput]


class RememberConversationRequest(Request, frozen=True, kw_only=True):
    """``rememberConversation``: the messages of one session (docs/contract.md §4g).
    An extractor of one's own is Python code, which a request cannot carry;
    ``extractor`` may name a built-in one (``"rules"``)."""

    messages: list[Message]
    session: str
    time: int | None = None
    namespace: NamespaceArg = None
    start: int = 0
    extractor: str | None = None


class RecallRequest(RecallOptions, frozen=True, kw_only=True):
    """A query and every RecallOptions field (one flat object, as docs/contract.md §5
    shows)."""

    query: str


class ExplainRequest(RecallRequest, frozen=True, kw_only=True):
    id: str


class ForgetRequest(Request, frozen=True, kw_only=True):
    scope: ForgetScope
    include_chain: bool = False
    dry_run: bool = False
    purge: bool = False
    within: NamespaceArg = None


class IdRequest(Request, frozen=True, kw_only=True):
    id: str


class FactRequest(IdRequest, frozen=True, kw_only=True):
    """``get`` and ``history``: one fact, its status at ``as_of`` (default now) knowing
    only what was ingested by ``known_at``."""

    as_of: int | None = None
    known_at: int | None = None


class EntityRequest(Request, frozen=True, kw_only=True):
    entity: str
    k: int = 10
    namespace: NamespaceArg = None


class EntityProfileRequest(Request, frozen=True, kw_only=True):
    """``entityProfile``: what is known about ``name``, a page at a time (§4h)."""

    name: str
    as_of: int | None = None
    known_at: int | None = None
    namespace: NamespaceArg = None
    limit: int = PROFILE_LIMIT
    cursor: str | None = None


class ReasonRequest(Request, frozen=True, kw_only=True):
    entities: list[str]
    k: int = 10
    namespace: NamespaceArg = None


class ContradictRequest(Request, frozen=True, kw_only=True):
    subject: str | None = None
    entity: str | None = None
    k: int = 10
    max_pairs: int = 100_000
    cursor: str | None = None
    namespace: NamespaceArg = None
    filter: dict[str, Any] | None = None


class FeedbackRequest(Request, frozen=True, kw_only=True):
    id: str
    helpful: bool
    note: str | None = None


class ConfidenceRequest(Request, frozen=True, kw_only=True):
    id: str
    confidence: float


class ListRequest(Request, frozen=True, kw_only=True):
    cursor: str | None = None
    limit: int = 100
    filter: ListFilter | None = None
    history: History = "all"
    namespace: NamespaceArg = None
    as_of: int | None = None
    known_at: int | None = None


class ListNamespacesRequest(Request, frozen=True, kw_only=True):
    prefix: NamespaceArg = None
    max_depth: int | None = None
    limit: int = 100
    cursor: str | None = None


class RelateRequest(Request, frozen=True, kw_only=True):
    from_id: str
    to_id: str
    relation: str
    metadata: dict[str, Any] | None = None
    namespace: NamespaceArg = None


class RelateManyRequest(Request, frozen=True, kw_only=True):
    """``relateMany``: at most ``relations.MAX_RELATE_MANY`` links, one transaction."""

    links: list[Any]
    namespace: NamespaceArg = None


class UnrelateRequest(Request, frozen=True, kw_only=True):
    from_id: str
    to_id: str
    relation: str
    namespace: NamespaceArg = None


class LinksRequest(Request, frozen=True, kw_only=True):
    id: str
    relation: str | None = None
    direction: str = "out"
    as_of: int | None = None
    known_at: int | None = None
    namespace: NamespaceArg = None


class WhyRequest(Request, frozen=True, kw_only=True):
    """``query``: a fact's id, or a query whose best match starts the walk."""

    query: str
    max_hops: int = 2
    relation: str | list[str] | None = None
    filter: dict[str, Any] | None = None
    as_of: int | None = None
    known_at: int | None = None
    namespace: NamespaceArg = None


class InfoRequest(Request, frozen=True, kw_only=True):
    """``info`` takes nothing (an empty object)."""


class ExportRequest(Request, frozen=True, kw_only=True):
    namespace: NamespaceArg = None
    cursor: str | None = None
    limit: int = MAX_EXPORT_PAGE


class ImportRequest(Request, frozen=True, kw_only=True):
    """Export records (objects, as ``export`` gives them), written ``batchSize`` per
    transaction; at most :data:`MAX_IMPORT_RECORDS` of them."""

    records: list[Any]
    batch_size: int = exchange.IMPORT_BATCH
    drop_embeddings: bool = False
    #: Typed relations made after the records (at most :data:`MAX_IMPORT_RELATIONS`).
    relations: list[Any] = msgspec.field(default_factory=list)


class CompileContextRequest(Request, frozen=True, kw_only=True):
    """``compileContext``: the query, the budget, the caller's fragments and the recall
    options that choose the candidate facts."""

    query: str
    budget_tokens: int
    namespace: NamespaceArg = None
    fragments: list[ContextFragment] | None = None
    k: int = DEFAULT_K
    as_of: int | None = None
    known_at: int | None = None
    history: History = "current"
    filter: dict[str, Any] | None = None


class ExplainContextRequest(CompileContextRequest, frozen=True, kw_only=True):
    id: str


class SaveWorkingContextRequest(Request, frozen=True, kw_only=True):
    session: str
    state: Any
    namespace: NamespaceArg = None


class LoadWorkingContextRequest(Request, frozen=True, kw_only=True):
    session: str
    namespace: NamespaceArg = None
    save: int | None = None


class ListWorkingContextsRequest(Request, frozen=True, kw_only=True):
    namespace: NamespaceArg = None


def import_records(req: ImportRequest) -> list[Any]:
    """An import request's records, once its records and relations are within the
    bounds of one request. Errors: ``limit``."""
    if len(req.records) > MAX_IMPORT_RECORDS:
        raise LimitError(f"import: at most {MAX_IMPORT_RECORDS} records per request "
                         f"(got {len(req.records)}); send the rest in further requests")
    if len(req.relations) > MAX_IMPORT_RELATIONS:
        raise LimitError(f"import: at most {MAX_IMPORT_RELATIONS} relations per request "
                         f"(got {len(req.relations)}); send the rest in further requests")
    return req.records
