"""The JSON contract (docs/contract.md §5): ``Memory.call(op, request) -> response``.

Owns: the request shapes of every op and their decoding (camelCase, unknown fields
rejected, depth bounded) into the Memory call they name (:func:`decode`), and the
encoding of results (:func:`encode`). ``Memory.call`` runs the two around its own
method; every door — HTTP, CLI, MCP — goes through it, so they all speak the same
contract. A client's input can only ever produce a response or a caller error of
the library's one vocabulary (:mod:`holomem.errors`): ``invalid_request``,
``limit``, ``not_found``, ``conflict``, and ``read_only`` on a follower. A time may be
milliseconds or an ISO 8601 string. Imports the memory API's types and its time
conversion (:func:`holomem.api.validate.to_ms`).

``export`` and ``import`` move facts over the wire a bounded page at a time (an export
page is read with :mod:`.transfer`'s records: :func:`export_page`); ``info`` is
``Memory.info``. For those, this module also imports :mod:`.transfer` and the walk
over live facts of :mod:`.forgetting`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from holomem.api import transfer, transferlinks, validate
from holomem.api.context import DEFAULT_K, ContextFragment
from holomem.api.engine import Store, View
from holomem.api.forgetting import live_facts
from holomem.api.types import (
    ConsolidateOptions,
    FactExport,
    ForgetScope,
    History,
    ListFilter,
    MaintenanceOptions,
    NamespaceArg,
    RecallOptions,
    RememberInput,
    Request,
)
from holomem.errors import InvalidError, LimitError

#: The most records one ``export`` page holds (its ``limit``; the default).
MAX_EXPORT_PAGE = 1000
#: The most records one ``import`` request carries (a client sends more as several).
MAX_IMPORT_RECORDS = 1000
#: Relations one ``import`` request takes besides its records' own.
MAX_IMPORT_RELATIONS = 1000


class RememberMany(Request, frozen=True, kw_only=True):
    facts: list[RememberInput]


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


class EntityRequest(Request, frozen=True, kw_only=True):
    entity: str
    k: int = 10
    namespace: NamespaceArg = None


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


class ExportPage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One page of an export: its records, and the cursor of the next page (None: the
    last)."""

    records: list[FactExport]
    next_cursor: str | None


class ImportRequest(Request, frozen=True, kw_only=True):
    """Export records (objects, as ``export`` gives them), written ``batchSize`` per
    transaction; at most :data:`MAX_IMPORT_RECORDS` of them."""

    records: list[Any]
    batch_size: int = transfer.IMPORT_BATCH
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


def _options(req: RecallRequest) -> dict[str, Any]:
    return {f: getattr(req, f) for f in RecallOptions.__struct_fields__}


class Invocation(NamedTuple):
    """One decoded request: the Memory method to call, its arguments, and how its
    result becomes the response object."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    wrap: Callable[[Any], Any]


def _same(result: Any) -> Any:
    return result


def _remember(request: dict[str, Any]) -> Invocation:
    if "facts" in request:
        many = _decode(request, RememberMany)
        return Invocation("remember_many", (many.facts,), {}, lambda r: {"remembered": r})
    return Invocation("remember", (_decode(request, RememberInput),), {},
                      lambda r: {"remembered": [r]})


def _recall(request: dict[str, Any]) -> Invocation:
    req = _decode(request, RecallRequest)
    return Invocation("recall", (req.query, _options(req)), {}, lambda r: {"results": r})


def _explain(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ExplainRequest)
    return Invocation("explain", (req.query, req.id, _options(req)), {},
                      lambda r: {"explanation": r})


def _forget(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ForgetRequest)
    return Invocation("forget", (req.scope, {"include_chain": req.include_chain,
                                             "dry_run": req.dry_run, "purge": req.purge,
                                             "within": req.within}),
                      {}, _same)


def _get(request: dict[str, Any]) -> Invocation:
    return Invocation("get", (_decode(request, IdRequest).id,), {}, lambda r: {"fact": r})


def _history(request: dict[str, Any]) -> Invocation:
    return Invocation("history", (_decode(request, IdRequest).id,), {},
                      lambda r: {"history": r})


def _apply_forgetting(request: dict[str, Any]) -> Invocation:
    return Invocation("apply_forgetting", (_decode(request, MaintenanceOptions),), {}, _same)


def _consolidate(request: dict[str, Any]) -> Invocation:
    return Invocation("consolidate", (_decode(request, ConsolidateOptions),), {}, _same)


def _entity_op(method: str) -> Callable[[dict[str, Any]], Invocation]:
    def decode(request: dict[str, Any]) -> Invocation:
        req = _decode(request, EntityRequest)
        return Invocation(method, (req.entity, req.k, req.namespace), {}, _same)
    return decode


def _reason(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ReasonRequest)
    return Invocation("reason", (req.entities, req.k, req.namespace), {}, _same)


def _contradict(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ContradictRequest)
    return Invocation("contradict", (), {"subject": req.subject, "entity": req.entity,
                                         "k": req.k, "max_pairs": req.max_pairs,
                                         "cursor": req.cursor, "namespace": req.namespace,
                                         "filter": req.filter},
                      _same)


def _feedback(request: dict[str, Any]) -> Invocation:
    req = _decode(request, FeedbackRequest)
    return Invocation("feedback", (req.id, req.helpful, req.note), {}, _same)


def _set_confidence(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ConfidenceRequest)
    return Invocation("set_confidence", (req.id, req.confidence), {}, lambda r: {"fact": r})


def _relate(request: dict[str, Any]) -> Invocation:
    req = _decode(request, RelateRequest)
    return Invocation("relate", (req.from_id, req.to_id, req.relation, req.metadata),
                      {"namespace": req.namespace}, _same)


def _relate_many(request: dict[str, Any]) -> Invocation:
    req = _decode(request, RelateManyRequest)
    return Invocation("relate_many", (req.links,), {"namespace": req.namespace}, _same)


def _unrelate(request: dict[str, Any]) -> Invocation:
    req = _decode(request, UnrelateRequest)
    return Invocation("unrelate", (req.from_id, req.to_id, req.relation),
                      {"namespace": req.namespace}, _same)


def _links(request: dict[str, Any]) -> Invocation:
    req = _decode(request, LinksRequest)
    return Invocation("links", (req.id, req.relation, req.direction),
                      {"as_of": req.as_of, "known_at": req.known_at,
                       "namespace": req.namespace}, _same)


def _why(request: dict[str, Any]) -> Invocation:
    req = _decode(request, WhyRequest)
    return Invocation("why", (req.query, req.max_hops, req.relation, req.filter),
                      {"as_of": req.as_of, "known_at": req.known_at,
                       "namespace": req.namespace}, _same)


def _list(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ListRequest)
    return Invocation("list", (req.cursor, req.limit, req.filter, req.history, req.namespace),
                      {}, _same)


def _list_namespaces(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ListNamespacesRequest)
    return Invocation("list_namespaces", (req.prefix, req.max_depth, req.limit, req.cursor), {},
                      _same)


def _info(request: dict[str, Any]) -> Invocation:
    _decode(request, InfoRequest)
    return Invocation("info", (), {}, _same)


def _context_args(req: CompileContextRequest) -> dict[str, Any]:
    recall = {"as_of": req.as_of, "known_at": req.known_at, "history": req.history,
              "filter": req.filter}
    return {"k": req.k, "recall": recall}


def _compile_context(request: dict[str, Any]) -> Invocation:
    req = _decode(request, CompileContextRequest)
    return Invocation("compile_context", (req.query, req.budget_tokens, req.namespace,
                                          req.fragments), _context_args(req), _same)


def _explain_context(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ExplainContextRequest)
    return Invocation("explain_context", (req.query, req.budget_tokens, req.id,
                                          req.namespace, req.fragments),
                      _context_args(req), lambda r: {"decision": r})


def _save_working_context(request: dict[str, Any]) -> Invocation:
    req = _decode(request, SaveWorkingContextRequest)
    return Invocation("save_working_context", (req.namespace, req.session, req.state), {},
                      lambda r: {"workingContext": r})


def _load_working_context(request: dict[str, Any]) -> Invocation:
    req = _decode(request, LoadWorkingContextRequest)
    return Invocation("load_working_context", (req.namespace, req.session, req.save), {},
                      lambda r: {"workingContext": r})


def _list_working_contexts(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ListWorkingContextsRequest)
    return Invocation("list_working_contexts", (req.namespace,), {}, _same)


def _import(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ImportRequest)
    if len(req.records) > MAX_IMPORT_RECORDS:
        raise LimitError(f"import: at most {MAX_IMPORT_RECORDS} records per request "
                         f"(got {len(req.records)}); send the rest in further requests")
    if len(req.relations) > MAX_IMPORT_RELATIONS:
        raise LimitError(f"import: at most {MAX_IMPORT_RELATIONS} relations per request "
                         f"(got {len(req.relations)}); send the rest in further requests")
    return Invocation("import_", (req.records,),
                      {"batch_size": req.batch_size, "drop_embeddings": req.drop_embeddings,
                       "relations": req.relations},
                      _same)


def _export(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ExportRequest)
    prefix = validate.namespace(req.namespace)
    limit = validate.positive_int(req.limit, "limit", MAX_EXPORT_PAGE)
    cursor = validate.cursor(req.cursor, "export")
    # Memory has no method for one page of an export, so the page is read from the
    # Memory's store (its ``store`` attribute, fetched by name like every op's method):
    # the same records Memory.export gives, a bounded page per request.
    return Invocation("__getattribute__", ("store",), {},
                      lambda store: export_page(store, prefix, cursor, limit))


def _export_bounds(view: View, cursor: str | None) -> tuple[int, int]:
    """The slots ``[start, end)`` an export page continues with.

    A cursor names the generation, the next slot, the end (the slot count when the
    export began: slots are given out in write order, so every fact written since lies
    at or past it) and the last fact exported. After a compaction (a purge) renumbered
    the slots, the walk resumes after that fact; the end is then the whole store.
    """
    slots = view.catalog.slots
    if cursor is None:
        return 0, slots
    data = validate.decode_cursor(cursor, "export")
    fields = (data.get("g"), data.get("s"), data.get("e"))
    fid = data.get("id")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in fields) \
            or not isinstance(fid, str) or set(data) != {"g", "s", "e", "id"}:
        raise InvalidError("not a cursor export gave out")
    gen, start, end = (int(v) for v in fields)  # type: ignore[arg-type]
    if gen == view.generation:
        if not start <= end <= slots:
            raise InvalidError("not a cursor export gave out")
        return start, end
    moved = view.slot(fid)
    if moved < 0:
        raise InvalidError("the store was compacted and the fact the export cursor names "
                           "is gone; start the export again")
    return moved + 1, slots


def export_page(store: Store, prefix: tuple[str, ...], cursor: str | None,
                limit: int) -> ExportPage:
    """One page of an export (JSON: ``{"records": [...], "nextCursor"}``).

    The records are those :meth:`holomem.Memory.export` gives (write order, the
    :class:`~holomem.api.types.FactExport` form), ``limit`` at most, read under one
    read block. A walk of pages sees every fact at or under ``prefix`` that was stored
    when its first page was read and still is, exactly once, however writes interleave;
    facts written after the first page are not in it (unless a purge compacted the
    store during the walk: then the rest of the store is). Errors: ``invalid_request``
    (a cursor export did not give out, or one whose fact a compaction removed).
    """
    def read(view: View) -> ExportPage:
        start, end = _export_bounds(view, cursor)
        live = live_facts(view, prefix)
        live = live[(live >= start) & (live < end)]
        page = [int(s) for s in live[:limit]]
        more = len(live) > limit
        next_cursor = (validate.encode_cursor(g=view.generation, s=page[-1] + 1, e=end,
                                              id=view.id_of(page[-1]))
                       if more else None)
        ranks = transferlinks.Ranks(view)
        return ExportPage(records=[transfer.export_record(view, s, ranks=ranks) for s in page],
                          next_cursor=next_cursor)

    return store.read(read)


#: op -> decoder. The ops of docs/contract.md §5, then those added by the holographic
#: operations, feedback and the audit listing, then ``info``, ``export`` and ``import``
#: (which the Python client speaks; documented in the README), then relations (§4f).
OPS: dict[str, Callable[[dict[str, Any]], Invocation]] = {
    "remember": _remember,
    "recall": _recall,
    "explain": _explain,
    "forget": _forget,
    "get": _get,
    "history": _history,
    "applyForgetting": _apply_forgetting,
    "consolidate": _consolidate,
    "probe": _entity_op("probe"),
    "related": _entity_op("related"),
    "reason": _reason,
    "contradict": _contradict,
    "feedback": _feedback,
    "setConfidence": _set_confidence,
    "list": _list,
    "listNamespaces": _list_namespaces,
    "info": _info,
    "export": _export,
    "import": _import,
    "compileContext": _compile_context,
    "explainContext": _explain_context,
    "saveWorkingContext": _save_working_context,
    "loadWorkingContext": _load_working_context,
    "listWorkingContexts": _list_working_contexts,
    "relate": _relate,
    "relateMany": _relate_many,
    "unrelate": _unrelate,
    "links": _links,
    "why": _why,
}


#: The fields that hold a time, by JSON name, and the fields whose objects hold some
#: (a list of facts, a forget scope, a filter). A request may give a time as
#: milliseconds or as an ISO 8601 string; the Structs take milliseconds, so strings are
#: converted first (:func:`holomem.api.validate.to_ms`), only where a time can be.
_TIMES = frozenset({"eventTime", "validFrom", "validTo", "asOf", "knownAt", "ingestedAfter",
                    "ingestedBefore", "eventAfter", "eventBefore", "time"})
_HOLDING_TIMES = ("facts", "fragments", "scope", "filter")


def _times(obj: dict[str, Any], where: str) -> dict[str, Any]:
    out = {k: validate.to_ms(v, where + k) if k in _TIMES and isinstance(v, str) else v
           for k, v in obj.items()}
    for key in _HOLDING_TIMES:
        held = out.get(key)
        if isinstance(held, dict):
            out[key] = _times(held, f"{where}{key}.")
        elif key in ("facts", "fragments") and isinstance(held, list):
            out[key] = [_times(x, f"{where}{key}[{i}].") if isinstance(x, dict) else x
                        for i, x in enumerate(held)]
    return out


def _decode(request: dict[str, Any], cls: type[Any]) -> Any:
    try:
        return msgspec.convert(_times(request, ""), cls, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidError(str(exc)) from exc
    except UnicodeEncodeError as exc:  # msgspec cannot even name a lone surrogate
        raise InvalidError("the request holds text that is not valid Unicode (a lone "
                           "surrogate)") from exc


def decode(op: object, request: object) -> Invocation:
    """The Memory call a contract request asks for.

    A request nesting deeper than :data:`~.validate.MAX_REQUEST_DEPTH` is refused (``limit``)
    before it is decoded. Errors: ``invalid_request`` (HTTP 422), ``limit`` (422).
    """
    if not isinstance(op, str) or op not in OPS:
        raise InvalidError(f"unknown op {op!r}; ops are {', '.join(OPS)}")
    if not isinstance(request, dict) or not all(isinstance(k, str) for k in request):
        raise InvalidError("the request must be a JSON object")
    validate.check_depth(request)
    try:
        return OPS[op](request)
    except RecursionError as exc:  # a last guard: check_depth should make this unreachable
        raise InvalidError("the request nests too deeply") from exc


def encode(response: object) -> dict[str, Any]:
    """A response object as plain JSON-ready data (camelCase)."""
    out: dict[str, Any] = msgspec.to_builtins(response)
    return out
