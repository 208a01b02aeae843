"""The JSON contract (SPEC §5): ``Memory.call(op, request) -> response``.

Owns: the request shapes of every op and their decoding (camelCase, unknown fields
rejected, depth bounded) into the Memory call they name (:func:`decode`), and the
encoding of results (:func:`encode`). ``Memory.call`` runs the two around its own
method; every door — HTTP, CLI, MCP — goes through it, so they all speak the same
contract. A client's input can only ever produce a response or a caller error of
the library's one vocabulary (:mod:`holomem.errors`): ``invalid_request``,
``limit``, ``not_found``, ``conflict``, and ``read_only`` on a follower. A time may be
milliseconds or an ISO 8601 string. Imports the memory API's types and its time
conversion (:func:`holomem.api.validate.to_ms`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from holomem.api import validate
from holomem.api.types import (
    ConsolidateOptions,
    ForgetScope,
    History,
    ListFilter,
    MaintenanceOptions,
    RecallOptions,
    RememberInput,
    Request,
)
from holomem.errors import InvalidError, LimitError

#: How deeply a request may nest (objects and arrays). The deepest legitimate one, a
#: remember of facts whose metadata nests 32 levels, reaches 36.
MAX_REQUEST_DEPTH = 64


class RememberMany(Request, frozen=True, kw_only=True):
    facts: list[RememberInput]


class RecallRequest(RecallOptions, frozen=True, kw_only=True):
    """A query and every RecallOptions field (one flat object, as SPEC §5 shows)."""

    query: str


class ExplainRequest(RecallRequest, frozen=True, kw_only=True):
    id: str


class ForgetRequest(Request, frozen=True, kw_only=True):
    scope: ForgetScope
    include_chain: bool = False
    dry_run: bool = False
    purge: bool = False
    within: list[str] | None = None


class IdRequest(Request, frozen=True, kw_only=True):
    id: str


class EntityRequest(Request, frozen=True, kw_only=True):
    entity: str
    k: int = 10
    namespace: list[str] | None = None


class ReasonRequest(Request, frozen=True, kw_only=True):
    entities: list[str]
    k: int = 10
    namespace: list[str] | None = None


class ContradictRequest(Request, frozen=True, kw_only=True):
    subject: str | None = None
    entity: str | None = None
    k: int = 10
    max_pairs: int = 100_000
    cursor: str | None = None
    namespace: list[str] | None = None
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
    namespace: list[str] | None = None


class ListNamespacesRequest(Request, frozen=True, kw_only=True):
    prefix: list[str] | None = None
    max_depth: int | None = None
    limit: int = 100
    cursor: str | None = None


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


def _list(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ListRequest)
    return Invocation("list", (req.cursor, req.limit, req.filter, req.history, req.namespace),
                      {}, _same)


def _list_namespaces(request: dict[str, Any]) -> Invocation:
    req = _decode(request, ListNamespacesRequest)
    return Invocation("list_namespaces", (req.prefix, req.max_depth, req.limit, req.cursor), {},
                      _same)


#: op -> decoder. The ops of SPEC §5, then those added by the holographic
#: operations, feedback and the audit listing (documented in the README).
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
}


#: The fields that hold a time, by JSON name, and the fields whose objects hold some
#: (a list of facts, a forget scope, a filter). A request may give a time as
#: milliseconds or as an ISO 8601 string; the Structs take milliseconds, so strings are
#: converted first (:func:`holomem.api.validate.to_ms`), only where a time can be.
_TIMES = frozenset({"eventTime", "validFrom", "validTo", "asOf", "knownAt", "ingestedAfter",
                    "ingestedBefore", "eventAfter", "eventBefore"})
_HOLDING_TIMES = ("facts", "scope", "filter")


def _times(obj: dict[str, Any], where: str) -> dict[str, Any]:
    out = {k: validate.to_ms(v, where + k) if k in _TIMES and isinstance(v, str) else v
           for k, v in obj.items()}
    for key in _HOLDING_TIMES:
        held = out.get(key)
        if isinstance(held, dict):
            out[key] = _times(held, f"{where}{key}.")
        elif key == "facts" and isinstance(held, list):
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


def check_depth(request: object, limit: int = MAX_REQUEST_DEPTH) -> None:
    """``limit`` unless ``request`` nests at most ``limit`` levels of objects and arrays.

    Iterative (an explicit stack), so no nesting, however deep, and no cycle can
    exhaust Python's recursion limit here; depth first, so a cycle is caught as soon
    as it has been followed ``limit`` times.
    """
    stack: list[tuple[object, int]] = [(request, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            continue
        if depth > limit:
            raise LimitError(f"the request nests deeper than {limit} levels")
        stack.extend((child, depth + 1) for child in children)


def decode(op: object, request: object) -> Invocation:
    """The Memory call a contract request asks for.

    A request nesting deeper than :data:`MAX_REQUEST_DEPTH` is refused (``limit``)
    before it is decoded. Errors: ``invalid_request`` (HTTP 422), ``limit`` (422).
    """
    if not isinstance(op, str) or op not in OPS:
        raise InvalidError(f"unknown op {op!r}; ops are {', '.join(OPS)}")
    if not isinstance(request, dict) or not all(isinstance(k, str) for k in request):
        raise InvalidError("the request must be a JSON object")
    check_depth(request)
    try:
        return OPS[op](request)
    except RecursionError as exc:  # a last guard: check_depth should make this unreachable
        raise InvalidError("the request nests too deeply") from exc


def encode(response: object) -> dict[str, Any]:
    """A response object as plain JSON-ready data (camelCase)."""
    out: dict[str, Any] = msgspec.to_builtins(response)
    return out
