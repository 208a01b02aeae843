"""The JSON contract (SPEC §5): ``Memory.call(op, request) -> response``.

Owns: the request and response shapes of every op, their decoding (camelCase,
unknown fields rejected) and the mapping of errors to the contract's three codes.
Every door — HTTP, CLI, MCP — goes through :func:`call`, so they all speak the same
contract. A client's input can only ever produce a response or a caller error of
the library's one vocabulary (:mod:`holomem.errors`): ``invalid_request``,
``limit``, ``not_found``, ``conflict``, and ``read_only`` on a follower.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from holomem.api.types import (
    ConsolidateOptions,
    ForgetScope,
    History,
    ListFilter,
    MaintenanceOptions,
    RecallOptions,
    RememberInput,
)
from holomem.errors import InvalidError, LimitError

if TYPE_CHECKING:
    from holomem.api.memory import Memory

#: How deeply a request may nest (objects and arrays). The deepest legitimate one, a
#: remember of facts whose metadata nests 32 levels, reaches 36.
MAX_REQUEST_DEPTH = 64


class _Req(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
           forbid_unknown_fields=True):
    pass


class RememberMany(_Req, frozen=True, kw_only=True):
    facts: list[RememberInput]


class RecallRequest(RecallOptions, frozen=True, kw_only=True):
    """A query and every RecallOptions field (one flat object, as SPEC §5 shows)."""

    query: str


class ExplainRequest(RecallRequest, frozen=True, kw_only=True):
    id: str


class ForgetRequest(_Req, frozen=True, kw_only=True):
    scope: ForgetScope
    include_chain: bool = False
    dry_run: bool = False
    purge: bool = False


class IdRequest(_Req, frozen=True, kw_only=True):
    id: str


class EntityRequest(_Req, frozen=True, kw_only=True):
    entity: str
    k: int = 10


class ReasonRequest(_Req, frozen=True, kw_only=True):
    entities: list[str]
    k: int = 10


class ContradictRequest(_Req, frozen=True, kw_only=True):
    subject: str | None = None
    entity: str | None = None
    k: int = 10
    max_pairs: int = 100_000
    cursor: str | None = None


class FeedbackRequest(_Req, frozen=True, kw_only=True):
    id: str
    helpful: bool
    note: str | None = None


class ConfidenceRequest(_Req, frozen=True, kw_only=True):
    id: str
    confidence: float


class ListRequest(_Req, frozen=True, kw_only=True):
    cursor: str | None = None
    limit: int = 100
    filter: ListFilter | None = None
    history: History = "all"


def _options(req: RecallRequest) -> dict[str, Any]:
    return {f: getattr(req, f) for f in RecallOptions.__struct_fields__}


def _remember(m: Memory, request: dict[str, Any]) -> Any:
    if "facts" in request:
        many = _decode(request, RememberMany)
        return {"remembered": m.remember_many(many.facts)}
    return {"remembered": [m.remember(_decode(request, RememberInput))]}


def _recall(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, RecallRequest)
    return {"results": m.recall(req.query, _options(req))}


def _explain(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, ExplainRequest)
    return {"explanation": m.explain(req.query, req.id, _options(req))}


def _forget(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, ForgetRequest)
    return m.forget(req.scope, {"include_chain": req.include_chain, "dry_run": req.dry_run,
                                "purge": req.purge})


def _get(m: Memory, request: dict[str, Any]) -> Any:
    return {"fact": m.get(_decode(request, IdRequest).id)}


def _history(m: Memory, request: dict[str, Any]) -> Any:
    return {"history": m.history(_decode(request, IdRequest).id)}


def _apply_forgetting(m: Memory, request: dict[str, Any]) -> Any:
    return m.apply_forgetting(_decode(request, MaintenanceOptions))


def _consolidate(m: Memory, request: dict[str, Any]) -> Any:
    return m.consolidate(_decode(request, ConsolidateOptions))


def _probe(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, EntityRequest)
    return m.probe(req.entity, req.k)


def _related(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, EntityRequest)
    return m.related(req.entity, req.k)


def _reason(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, ReasonRequest)
    return m.reason(req.entities, req.k)


def _contradict(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, ContradictRequest)
    return m.contradict(subject=req.subject, entity=req.entity, k=req.k,
                        max_pairs=req.max_pairs, cursor=req.cursor)


def _feedback(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, FeedbackRequest)
    return m.feedback(req.id, req.helpful, req.note)


def _set_confidence(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, ConfidenceRequest)
    return {"fact": m.set_confidence(req.id, req.confidence)}


def _list(m: Memory, request: dict[str, Any]) -> Any:
    req = _decode(request, ListRequest)
    return m.list(req.cursor, req.limit, req.filter, req.history)


#: op -> handler. The ops of SPEC §5, then those added by the holographic
#: operations, feedback and the audit listing (documented in the README).
OPS: dict[str, Callable[[Memory, dict[str, Any]], Any]] = {
    "remember": _remember,
    "recall": _recall,
    "explain": _explain,
    "forget": _forget,
    "get": _get,
    "history": _history,
    "applyForgetting": _apply_forgetting,
    "consolidate": _consolidate,
    "probe": _probe,
    "related": _related,
    "reason": _reason,
    "contradict": _contradict,
    "feedback": _feedback,
    "setConfidence": _set_confidence,
    "list": _list,
}


def _decode(request: dict[str, Any], cls: type[Any]) -> Any:
    try:
        return msgspec.convert(request, cls, strict=True)
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


def call(memory: Memory, op: object, request: object) -> dict[str, Any]:
    """Run one op of the contract; the response is plain JSON-ready data (camelCase).

    A request nesting deeper than :data:`MAX_REQUEST_DEPTH` is refused (``limit``)
    before it is decoded. Errors: ``invalid_request`` (HTTP 422), ``limit`` (422),
    ``not_found`` (404), ``conflict`` (409), ``read_only`` (403) — the library's own
    classes.
    """
    if not isinstance(op, str) or op not in OPS:
        raise InvalidError(f"unknown op {op!r}; ops are {', '.join(OPS)}")
    if not isinstance(request, dict) or not all(isinstance(k, str) for k in request):
        raise InvalidError("the request must be a JSON object")
    check_depth(request)
    try:
        out: dict[str, Any] = msgspec.to_builtins(OPS[op](memory, request))
    except RecursionError as exc:  # a last guard: check_depth should make this unreachable
        raise InvalidError("the request nests too deeply") from exc
    return out
