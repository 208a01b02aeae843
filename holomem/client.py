"""The Python client of ``holomem serve``: the methods and types of ``holomem.Memory``.

Owns: turning memory calls into contract requests over HTTP and the answers back
into the library's types and errors. Code written against ``Memory`` runs against a
server by changing one line::

    memory = Memory(Store.open("store"))                   # embedded
    memory = Client("http://127.0.0.1:8080")               # served

:class:`Client` has every public method of ``Memory``, :class:`AsyncClient` every one
of ``AsyncMemory`` (coroutines where AsyncMemory has coroutines), with the same
arguments. ``client.memory`` is the client itself (code written as
``Client(url).memory.recall(...)`` keeps working). Imports the memory API (its
checks, types and contract) and httpx, the ``serve`` extra: without it, importing
this module fails with the command that installs it.

Arguments are checked and converted exactly as ``Memory`` checks them (same types,
datetimes accepted, in filters at any depth too; a namespace any sequence of strings)
before anything is sent, so a bad one raises the same error without a round trip.

Errors: what the server answers raises exactly the class the embedded library raises
for the same code (:func:`holomem.errors.from_code`: ``InvalidError``, ``LimitError``,
``NotFoundError``, ``ConflictError``, ...), with ``status`` the HTTP status; a code the
library has no class for (``unauthorized``, a server fault) raises a ``HolomemError``
carrying it. A server that cannot be reached, that does not answer within
``timeout`` seconds, or that answers something that is not holomem's JSON raises
``UnavailableError`` (code ``unavailable``) naming the URL; never an httpx exception.
A timed-out write may still have been applied: a retried ``remember`` with the same
payload is a no-op (``created=False``).

Several servers sharing tenants over one ``--journal`` (docs/scale-out.md §8.7): a
write sent to a server that is not the tenant's writer is answered with a 307 to the
writer's URL; the client sends the same request there, with its own headers (the API
key, the tenant), following at most :data:`MAX_HOPS` such redirects and only ones
naming an http(s) URL; a writer it cannot reach is ``unavailable`` naming it.

What works differently over the wire:

- ``export(namespace)`` reads pages of at most ``page_size`` (<= 1,000) records
  (the contract's ``export`` op, whose cursor keeps a walk exact under concurrent
  writes); ``import_(records)`` sends requests of at most 1,000 records and about
  1 MB (the contract's ``import`` op; the server's body limit is 1 MiB), each one
  transaction, so a ``batch_size`` above 1,000 writes 1,000 per transaction; a record
  larger than a request is a ``limit`` error naming its line. Every record is checked
  here first, and errors name the line of the caller's input. A supersession link
  needs both of its facts in one import call: a record whose link names a fact not
  yet sent is held back and sent after that fact (or at the end), so its write order
  (which orders ``list`` and breaks exact ties in recall) can differ from the source's.
  Typed relations are taken out of the records and sent once every record is sent
  (the ``import`` op's ``relations``), in the source's order, so ``links`` and
  ``why`` answer as on the source.
- ``remember_many`` sends one request: the HTTP door takes at most 1,000 facts per
  request (``limit`` beyond; ``Memory`` takes 10,000); its ``progress`` is called once,
  with all of them, when the server has written them (the server embeds).
- ``render_context`` runs here (it needs no store).
- ``with_supersession``, ``with_recency``, ``with_entity_extractor``,
  ``with_forgetting``, ``with_consolidation``, ``with_observer`` and ``with_clock``
  raise ``InvalidError``: they change a policy, an observer or the clock of one
  process, and the server's calls run in its own process under the store's recorded
  configuration (change that with ``holomem config STORE --set FILE``). ``reembed``
  and ``notify`` raise ``InvalidError`` too: re-embedding needs the embedder in the
  process that holds the store, and a client has no observers to notify. The
  attributes ``store``, ``config`` and ``embedder`` raise an ``InvalidError`` that is
  also an ``AttributeError`` (so ``hasattr`` says False): ``info()`` gives the server's
  configuration and embedder identity.
"""

from __future__ import annotations

import builtins
import copy
import re
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, NamedTuple, TypeVar

from holomem.errors import missing_extra

try:
    import httpx
except ImportError as _missing:  # the serve extra is not installed
    raise missing_extra(_missing, "holomem.client", "serve") from _missing

import msgspec

from holomem.api.engine import validate
from holomem.api.memory import contract, filters, requests
from holomem.api.memory.facts import listing
from holomem.api.memory.forget import removal
from holomem.api.memory.graph import evidence as why
from holomem.api.memory.graph import relations
from holomem.api.memory.graph.types import (
    LinkList,
    RelateManyResult,
    RelateResult,
    UnrelateResult,
    WhyResult,
)
from holomem.api.memory.progress import Progress, callback
from holomem.api.memory.recall import rank as recall
from holomem.api.memory.transfer import exchange, pages
from holomem.api.memory.transfer.records import ImportReport
from holomem.api.memory.types import (
    Capabilities,
    ConsolidateOptions,
    ConsolidationReport,
    ContradictResult,
    Explanation,
    FactRecord,
    FeedbackReport,
    ForgetOptions,
    ForgetReport,
    ListFilter,
    ListPage,
    MaintenanceOptions,
    MemoryInfo,
    NamespacePage,
    ProbeResult,
    ReasonResult,
    Recalled,
    RelatedResult,
    Remembered,
    RememberInput,
)
from holomem.api.memory.window import render
from holomem.api.memory.window.budget import DEFAULT_K, CompiledContext, ContextDecision
from holomem.api.memory.window.working import WorkingContext, WorkingContextList
from holomem.errors import (
    HolomemError,
    InvalidError,
    LimitError,
    StoreLockedError,
    UnavailableError,
    from_code,
)

__all__ = ["AsyncClient", "Client", "REQUEST_BYTES"]

T = TypeVar("T")
#: What one memory call becomes: the op, its JSON request, and how its answer decodes.
Spec = tuple[str, dict[str, Any], Callable[[Any], Any]]
#: The most bytes of records one import request carries (the server takes 1 MiB bodies).
REQUEST_BYTES = 1_000_000


# -- requests: built and checked like Memory's own arguments --------------------------------
def _as(cls: type[T], value: Any) -> T:
    out: T = msgspec.convert(value, cls)
    return out


def _builtins(struct: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(struct)
    return out


#: The filter keys that are times (docs/contract.md §4b): a caller may give datetimes.
_FILTER_TIMES = ("ingestedAfter", "ingestedBefore", "eventAfter", "eventBefore")


def _wire_filter(value: Any) -> Any:
    """A filter as JSON: checked exactly as ``Memory`` checks it, datetimes made ms."""
    filters.compile_filter(value)
    return _filter_json(value)


def _filter_json(value: Any) -> Any:
    # Only called on a filter compile_filter accepted: its shape and depth are known.
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key in _FILTER_TIMES:
            out[key] = validate.to_ms(item, key)
        elif key in ("$and", "$or"):
            out[key] = [_filter_json(f) for f in item]
        elif key == "$not":
            out[key] = _filter_json(item)
        else:
            out[key] = item
    return out


def _no_code(value: Any, name: str) -> None:
    """A served store runs no code of the caller's: a reranker or counter is refused."""
    if value is not None:
        raise InvalidError(f"{name} is Python code, which a served store cannot run: use an "
                           "embedded Memory for it")


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


def _namespace(value: Any, field: str = "namespace") -> builtins.list[str] | None:
    """A namespace (or prefix) as JSON, checked as ``Memory`` checks it (None: the root)."""
    return None if value is None else builtins.list(validate.namespace(value, field))


def _recall_request(query: str, options: Any, fields: Mapping[str, Any],
                    **extra: Any) -> dict[str, Any]:
    validate.query(query)
    o = recall.options(options, fields)
    out = {"query": query, **extra, **_builtins(o)}
    out["namespace"] = _namespace(o.namespace)
    if o.filter is not None:
        out["filter"] = _filter_json(o.filter)
    return out


def _list_filter(flt: ListFilter) -> dict[str, Any] | None:
    """A checked list filter as JSON: its own keys, then the filter of docs/contract.md
    §4b."""
    out: dict[str, Any] = {k: v for k, v in (("subject", flt.subject), ("entity", flt.entity),
                                             ("status", flt.status)) if v is not None}
    out.update(_filter_json(flt.conditions() or {}))
    return out or None


class _ExportPage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    records: builtins.list[dict[str, Any]]
    next_cursor: str | None


def _same(response: Any) -> Any:
    return response


class _Ops:
    """Every memory call as (op, request, decoder); shared by the sync and async clients."""

    @staticmethod
    def remember(input: Any = None, /, **fields: Any) -> Spec:
        if isinstance(input, str):
            input, fields = None, {"text": input, **fields}
        x = validate.to_struct(RememberInput, input, fields, "remember input",
                               validate.TIME_FIELDS)
        return "remember", _builtins(x), lambda r: _as(builtins.list[Remembered],
                                                       r["remembered"])[0]

    @staticmethod
    def remember_many(inputs: Iterable[Any]) -> Spec:
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
            raise InvalidError("remember_many takes a list of inputs")
        facts = [_builtins(validate.to_struct(RememberInput, x, {}, f"input {i}",
                                                validate.TIME_FIELDS))
                 for i, x in enumerate(inputs)]
        if not facts:
            raise InvalidError("remember_many needs at least one input")
        return ("remember", {"facts": facts},
                lambda r: _as(builtins.list[Remembered], r["remembered"]))

    @staticmethod
    def recall(query: str, options: Any = None, **fields: Any) -> Spec:
        return ("recall", _recall_request(query, options, fields),
                lambda r: _as(builtins.list[Recalled], r["results"]))

    @staticmethod
    def explain(query: str, id: str, options: Any = None, **fields: Any) -> Spec:
        return ("explain", _recall_request(query, options, fields, id=id),
                lambda r: _as(Explanation, r["explanation"]))

    @staticmethod
    def forget(scope: Any, options: Any = None, **fields: Any) -> Spec:
        sc = removal.scope(scope)
        o = validate.to_struct(ForgetOptions, options, fields, "forget options")
        req = {"scope": _builtins(sc), **_builtins(o), "within": _namespace(o.within, "within")}
        if sc.namespace is not None:
            req["scope"]["namespace"] = _namespace(sc.namespace, "scope.namespace")
        return "forget", req, lambda r: _as(ForgetReport, r)

    @staticmethod
    def get(id: str) -> Spec:
        return "get", {"id": id}, lambda r: None if r["fact"] is None else _as(FactRecord,
                                                                               r["fact"])

    @staticmethod
    def history(id: str) -> Spec:
        return "history", {"id": id}, lambda r: _as(builtins.list[FactRecord], r["history"])

    @staticmethod
    def info() -> Spec:
        return "info", {}, lambda r: _as(MemoryInfo, r)

    @staticmethod
    def capabilities() -> Spec:
        return "capabilities", {}, lambda r: _as(Capabilities, r)

    @staticmethod
    def apply_forgetting(options: Any = None, **fields: Any) -> Spec:
        o = validate.to_struct(MaintenanceOptions, options, fields, "apply_forgetting options")
        return ("applyForgetting", {**_builtins(o), "namespace": _namespace(o.namespace)},
                lambda r: _as(ForgetReport, r))

    @staticmethod
    def consolidate(options: Any = None, **fields: Any) -> Spec:
        o = validate.to_struct(ConsolidateOptions, options, fields, "consolidate options")
        return ("consolidate", {**_builtins(o), "namespace": _namespace(o.namespace)},
                lambda r: _as(ConsolidationReport, r))

    @staticmethod
    def probe(entity: str, k: int = 10, namespace: Sequence[str] | None = None) -> Spec:
        return ("probe", {"entity": entity, "k": k, "namespace": _namespace(namespace)},
                lambda r: _as(ProbeResult, r))

    @staticmethod
    def related(entity: str, k: int = 10, namespace: Sequence[str] | None = None) -> Spec:
        return ("related", {"entity": entity, "k": k, "namespace": _namespace(namespace)},
                lambda r: _as(RelatedResult, r))

    @staticmethod
    def reason(entities: Sequence[str], k: int = 10,
               namespace: Sequence[str] | None = None) -> Spec:
        # Refused as holographic.reason refuses it (a string is no list of entities).
        if isinstance(entities, str) or not isinstance(entities, Sequence) or not entities:
            raise InvalidError("entities must be a non-empty list of strings")
        return ("reason", {"entities": builtins.list(entities), "k": k,
                           "namespace": _namespace(namespace)},
                lambda r: _as(ReasonResult, r))

    @staticmethod
    def contradict(*, subject: str | None = None, entity: str | None = None, k: int = 10,
                   max_pairs: int = 100_000, cursor: str | None = None,
                   namespace: Sequence[str] | None = None,
                   filter: Mapping[str, Any] | None = None) -> Spec:
        req = {"subject": subject, "entity": entity, "k": k, "maxPairs": max_pairs,
               "cursor": cursor, "namespace": _namespace(namespace),
               "filter": None if filter is None else _wire_filter(filter)}
        return "contradict", req, lambda r: _as(ContradictResult, r)

    @staticmethod
    def feedback(id: str, helpful: bool, note: str | None = None) -> Spec:
        if not isinstance(helpful, bool):  # as Memory.feedback checks it
            raise InvalidError("helpful must be true or false")
        return ("feedback", {"id": id, "helpful": helpful, "note": note},
                lambda r: _as(FeedbackReport, r))

    @staticmethod
    def compile_context(query: str, budget_tokens: int, namespace: Sequence[str] | None,
                        fragments: Any, k: int, recall: Mapping[str, Any] | None,
                        id: str | None = None) -> Spec:
        req: dict[str, Any] = {
            "query": query, "budgetTokens": budget_tokens, "namespace": _namespace(namespace),
            "fragments": None if fragments is None else [
                _builtins(f) if isinstance(f, msgspec.Struct) else dict(f) for f in fragments],
            "k": k}
        for key, value in (recall or {}).items():  # asOf, knownAt, history, filter
            req[_camel(key)] = value
        if id is None:
            return "compileContext", req, lambda r: _as(CompiledContext, r)
        return ("explainContext", {**req, "id": id},
                lambda r: _as(ContextDecision, r["decision"]))

    @staticmethod
    def save_working_context(namespace: Sequence[str] | None, session: str, state: Any
                             ) -> Spec:
        return ("saveWorkingContext", {"namespace": _namespace(namespace), "session": session,
                                       "state": state},
                lambda r: _as(WorkingContext, r["workingContext"]))

    @staticmethod
    def load_working_context(namespace: Sequence[str] | None, session: str,
                             save: int | None = None) -> Spec:
        return ("loadWorkingContext", {"namespace": _namespace(namespace), "session": session,
                                       "save": save},
                lambda r: _as(WorkingContext, r["workingContext"]))

    @staticmethod
    def list_working_contexts(namespace: Sequence[str] | None = None) -> Spec:
        return ("listWorkingContexts", {"namespace": _namespace(namespace)},
                lambda r: _as(WorkingContextList, r))

    @staticmethod
    def set_confidence(id: str, confidence: float) -> Spec:
        return ("setConfidence", {"id": id, "confidence": confidence},
                lambda r: _as(FactRecord, r["fact"]))

    @staticmethod
    def list(cursor: str | None = None, limit: int = 100, filter: Any = None,
             history: str = "all", namespace: Sequence[str] | None = None) -> Spec:
        req = listing.request(cursor, limit, filter, history, namespace)
        return ("list", {"cursor": req.cursor, "limit": req.limit,
                         "filter": _list_filter(req.filter), "history": req.history,
                         "namespace": builtins.list(req.namespace) or None},
                lambda r: _as(ListPage, r))

    @staticmethod
    def list_namespaces(prefix: Sequence[str] | None = None, max_depth: int | None = None,
                        limit: int = 100, cursor: str | None = None) -> Spec:
        return ("listNamespaces", {"prefix": _namespace(prefix, "prefix"),
                                   "maxDepth": max_depth, "limit": limit, "cursor": cursor},
                lambda r: _as(NamespacePage, r))

    @staticmethod
    def export_page(namespace: builtins.list[str] | None, cursor: str | None,
                    limit: int) -> Spec:
        return ("export", {"namespace": namespace, "cursor": cursor, "limit": limit},
                lambda r: _as(_ExportPage, r))

    @staticmethod
    def page(namespace: Sequence[str] | None, cursor: str | None, limit: int) -> Spec:
        return ("export", {"namespace": _namespace(namespace), "cursor": cursor,
                           "limit": limit}, lambda r: _as(pages.ExportPage, r))

    @staticmethod
    def import_request(records: builtins.list[dict[str, Any]], batch_size: int,
                       drop_embeddings: bool,
                       relations: builtins.list[dict[str, Any]] | None = None) -> Spec:
        body: dict[str, Any] = {"records": records, "batchSize": batch_size,
                                "dropEmbeddings": drop_embeddings}
        if relations:
            body["relations"] = relations
        return ("import", body, lambda r: _as(ImportReport, r))

    @staticmethod
    def relate(from_id: str, to_id: str, relation: str, metadata: Any = None,
               namespace: Sequence[str] | None = None) -> Spec:
        relations.request(from_id, to_id, relation, metadata)  # checked as Memory checks
        return ("relate", {"fromId": from_id, "toId": to_id, "relation": relation,
                           "metadata": None if metadata is None else dict(metadata),
                           "namespace": _namespace(namespace)},
                lambda r: _as(RelateResult, r))

    @staticmethod
    def relate_many(links: Any, namespace: Sequence[str] | None = None) -> Spec:
        reqs = relations.requests(links)  # checked as Memory checks
        body = [{"fromId": r.from_id, "toId": r.to_id, "relation": r.relation,
                 "metadata": validate.load_metadata(r.metadata)} for r in reqs]
        return ("relateMany", {"links": body, "namespace": _namespace(namespace)},
                lambda r: _as(RelateManyResult, r))

    @staticmethod
    def unrelate(from_id: str, to_id: str, relation: str,
                 namespace: Sequence[str] | None = None) -> Spec:
        relations.request(from_id, to_id, relation)
        return ("unrelate", {"fromId": from_id, "toId": to_id, "relation": relation,
                             "namespace": _namespace(namespace)},
                lambda r: _as(UnrelateResult, r))

    @staticmethod
    def links(id: str, relation: str | None = None, direction: str = "out",
              as_of: Any = None, known_at: Any = None,
              namespace: Sequence[str] | None = None) -> Spec:
        return ("links", {"id": id, "relation": relation, "direction": direction,
                          "asOf": validate.to_ms(as_of, "as_of"),
                          "knownAt": validate.to_ms(known_at, "known_at"),
                          "namespace": _namespace(namespace)},
                lambda r: _as(LinkList, r))

    @staticmethod
    def why(query_or_id: str, max_hops: int = 2, relation: Any = None, filter: Any = None,
            as_of: Any = None, known_at: Any = None,
            namespace: Sequence[str] | None = None) -> Spec:
        names = why.relation_names(relation)
        return ("why", {"query": query_or_id, "maxHops": max_hops,
                        "relation": None if names is None else builtins.list(names),
                        "filter": None if filter is None else _wire_filter(filter),
                        "asOf": validate.to_ms(as_of, "as_of"),
                        "knownAt": validate.to_ms(known_at, "known_at"),
                        "namespace": _namespace(namespace)},
                lambda r: _as(WhyResult, r))

    @staticmethod
    def call(op: str, request: dict[str, Any]) -> Spec:
        contract.decode(op, request)  # refused here exactly as Memory.call refuses it
        return op, request, _same


def _encode(op: str, request: dict[str, Any]) -> bytes:
    try:
        return msgspec.json.encode(request)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        # msgspec.EncodeError is a ValueError: a value that is not JSON (an object, NaN ...).
        raise InvalidError(f"{op}: an argument cannot be sent as JSON: {exc}") from exc


# -- the wire: every failure a holomem error -------------------------------------------------
#: Redirects a write follows to reach the tenant's writer (docs/scale-out.md §8.7).
MAX_HOPS = 2
#: What httpx raises for a request that got no usable answer.
_TRANSPORT = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)


class _Wire:
    """The server's address and the translation of whatever comes back into holomem
    errors; shared by the sync and async clients."""

    def __init__(self, url: str, timeout: float) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidError(f"the server URL must start with http:// or https://, "
                               f"not {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout

    @staticmethod
    def path(op: str) -> str:
        return f"/api/v1/memory/{op}"

    def unreachable(self, op: str, exc: Exception, where: str = "") -> UnavailableError:
        """``where``: an absolute URL a redirect named (the tenant's writer), else the
        server's own route."""
        redirected = where.startswith(("http://", "https://"))
        url = where if redirected else self.url
        also = f" (the tenant's writer, to which {self.url} sent it)" if redirected else ""
        if isinstance(exc, httpx.TimeoutException):
            return UnavailableError(
                f"the holomem server at {url}{also} did not answer {op} within "
                f"{self.timeout:g} s (a write may still have been applied; retrying it "
                f"with the same payload is safe)")
        return UnavailableError(f"cannot reach the holomem server at {url}{also} ({op}): "
                                f"{type(exc).__name__}: {exc}")

    def next_hop(self, op: str, response: httpx.Response) -> str | None:
        """Where to send the same request again: the ``Location`` of a 307/308 (a
        server that is not the tenant's writer names the one that is), an absolute
        http(s) URL; None for any other answer. The client's own headers (the API key,
        the tenant) go with it."""
        if response.status_code not in (307, 308):
            return None
        location = str(response.headers.get("location", ""))
        if not location.startswith(("http://", "https://")) or len(location) > 2000:
            raise UnavailableError(f"the holomem server at {self.url} redirected {op} to "
                                   f"{location[:200]!r}, not an http(s) URL")
        return location

    def too_many_hops(self, op: str, where: str) -> StoreLockedError:
        return StoreLockedError(
            f"{op}: the tenant's writer moved more than {MAX_HOPS} times while this "
            f"request followed it (last sent to {where}); try again")

    def answer(self, op: str, response: httpx.Response, decode: Callable[[Any], Any]) -> Any:
        """The decoded answer, or the error the server's answer stands for."""
        if response.status_code >= 400:
            raise self._error(response)
        try:
            payload = response.json()
        except ValueError:
            raise UnavailableError(f"{self.url} answered {op} with something that is not "
                                   f"holomem's JSON (is it a holomem server?)") from None
        try:
            return decode(payload)
        except (msgspec.ValidationError, KeyError, TypeError, IndexError) as exc:
            raise HolomemError(f"the answer of {self.url} to {op} does not have the shape "
                               f"this client expects (another holomem version?): {exc}"
                               ) from None

    def _error(self, response: httpx.Response) -> HolomemError:
        try:
            err = response.json()["error"]
            code, message = str(err["code"]), str(err["message"])
        except (ValueError, KeyError, TypeError):
            if response.status_code in (502, 503, 504):  # a proxy in front of it, say
                return UnavailableError(f"{self.url} answered HTTP {response.status_code}: "
                                        f"{response.text[:200]}")
            code, message = "http", f"HTTP {response.status_code}: {response.text[:500]}"
        out = from_code(code, message)
        out.status = response.status_code
        return out


def _headers(api_key: str | None, tenant: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if tenant:
        headers["x-tenant-id"] = tenant
    return headers


# -- import: records cut into bounded requests ------------------------------------------------
class _Entry(NamedTuple):
    line: int
    id: str
    record: dict[str, Any]
    size: int
    #: The ids its supersession links name.
    targets: frozenset[str]
    #: Its typed relations (JSON form), sent after every record.
    relations: tuple[dict[str, Any], ...] = ()


def _entry(item: exchange.Incoming, drop_embeddings: bool) -> _Entry:
    x = item.record
    links = tuple(msgspec.to_builtins(r) for r in x.relations)
    x = msgspec.structs.replace(x, relations=[])
    if drop_embeddings and x.embedding is not None:
        x = msgspec.structs.replace(x, embedding=None)
    record = exchange.as_dict(x)
    size = len(msgspec.json.encode(record)) + 1
    if size > REQUEST_BYTES:
        raise LimitError(f"line {item.line}: the record is {size} bytes as JSON; "
                                  f"one import request holds at most {REQUEST_BYTES}")
    return _Entry(item.line, x.id, record, size, frozenset(k.supersedes for k in x.links),
                  links)


class _Relations:
    """An import's typed relations, kept while its records are sent, then cut into
    requests in the source's order (``order``; those without one last, as given)."""

    def __init__(self, extra: Iterable[Any]) -> None:
        # (line of the record that carried it, or None: the call's own relations)
        self.items: builtins.list[tuple[int | None, dict[str, Any]]] = [
            (None, msgspec.to_builtins(x.record)) for x in exchange.relation_list(extra)]

    def add(self, entry: _Entry) -> _Entry:
        self.items += [(entry.line, r) for r in entry.relations]
        return entry

    def requests(self) -> Iterator[builtins.list[tuple[int | None, dict[str, Any]]]]:
        ranked = sorted(range(len(self.items)), key=lambda i: (
            self.items[i][1].get("order") is None, self.items[i][1].get("order") or 0, i))
        request: builtins.list[tuple[int | None, dict[str, Any]]] = []
        size = 0
        for i in ranked:
            line, r = self.items[i]
            n = len(msgspec.json.encode(r)) + 1
            if request and (len(request) >= requests.MAX_IMPORT_RELATIONS
                            or size + n > REQUEST_BYTES):
                yield request
                request, size = [], 0
            request.append((line, r))
            size += n
        if request:
            yield request


class _ImportPlan:
    """Cuts an import's records into requests of at most ``per_request`` records and
    :data:`REQUEST_BYTES` bytes.

    One request is one ``Memory.import_`` call on the server, and a call writes a link
    only when both of its facts are stored by its end: so a record is never sent
    before the records its links name (when they are in the input). A request is
    filled in input order; a record whose link names a fact that is neither in the
    request nor sent before is held back, and sent at the front of the request after
    the one that carries that fact (or, if it never comes, at the end, still after the
    held records it names: the fact may be in the target store already, else the link
    is unresolved, as ``Memory`` reports).
    """

    def __init__(self, per_request: int) -> None:
        self.per_request = per_request
        self.sent: set[str] = set()
        self.current: builtins.list[_Entry] = []
        self.held: builtins.list[_Entry] = []

    def add(self, entry: _Entry) -> builtins.list[builtins.list[_Entry]]:
        """The requests ready once ``entry`` is taken."""
        self.current.append(entry)
        out = []
        while self._overfull():
            out += self._cut(final=False)
        return out

    def finish(self) -> builtins.list[builtins.list[_Entry]]:
        """The remaining requests, the held records last (each after what it names)."""
        out = []
        while self.current:
            out += self._cut(final=False)
        # What a held record names and the input does not hold will not come: it may be
        # in the target store; if not, its link is unresolved (as Memory reports it).
        held = {e.id for e in self.held}
        self.sent |= {t for e in self.held for t in e.targets if t not in held}
        self.current, self.held = self.held, []
        while self.current:
            out += self._cut(final=False)
        self.current, self.held = self.held, []  # only links in a cycle are left
        while self.current:
            out += self._cut(final=True)
        return out

    def _overfull(self) -> bool:
        return (len(self.current) > self.per_request
                or sum(e.size for e in self.current) > REQUEST_BYTES)

    def _cut(self, *, final: bool) -> builtins.list[builtins.list[_Entry]]:
        n, size = 0, 0
        for e in self.current[: self.per_request]:
            if size + e.size > REQUEST_BYTES:
                break
            n, size = n + 1, size + e.size
        assert n >= 1  # every entry fits a request on its own (_entry checks it)
        candidate, self.current = self.current[:n], self.current[n:]
        if not final:
            # Whatever names a fact not sent yet waits (and so does what names it).
            moved: set[int] = set()
            changed = True
            while changed:
                changed = False
                here = {e.id for i, e in enumerate(candidate) if i not in moved}
                for i, e in enumerate(candidate):
                    if i not in moved and not e.targets <= self.sent | here:
                        moved.add(i)
                        changed = True
            self.held += [e for i, e in enumerate(candidate) if i in moved]
            candidate = [e for i, e in enumerate(candidate) if i not in moved]
        if not candidate:
            return []
        self.sent.update(e.id for e in candidate)
        ready = [e for e in self.held if e.targets <= self.sent]
        if ready:
            self.held = [e for e in self.held if not e.targets <= self.sent]
            self.current = ready + self.current
        return [candidate]


_LINE = re.compile(r"line (\d+): ")


_RELATION = re.compile(r"relations\[(\d+)\]: ")


def _renumbered(exc: HolomemError,
                request: builtins.list[_Entry] | builtins.list[int | None]) -> HolomemError:
    """``exc`` with the line it names (of the request) made the line of the input
    (``request``: its entries, or the input line of each relation it sent)."""
    m = _LINE.match(exc.message) or _RELATION.match(exc.message)
    if m is None or not 0 <= int(m[1]) - (m.re is _LINE) < len(request):
        return exc
    at = request[int(m[1]) - (m.re is _LINE)]
    if at is None:  # one of the call's own relations: its message names it already
        return exc
    message = f"line {at if isinstance(at, int) else at.line}: {exc.message[m.end():]}"
    out = copy.copy(exc)
    out.message, out.args = message, (message,)
    return out


class _Totals:
    def __init__(self) -> None:
        self.imported = self.unchanged = self.batches = self.unresolved = self.done = 0
        self.relations = self.unresolved_relations = 0

    def add(self, report: ImportReport, records: int) -> None:
        self.imported += report.imported
        self.unchanged += report.unchanged
        self.batches += report.batches
        self.unresolved += report.unresolved_links
        self.relations += report.relations
        self.unresolved_relations += report.unresolved_relations
        self.done += records

    def report(self) -> ImportReport:
        return ImportReport(imported=self.imported, unchanged=self.unchanged,
                            batches=self.batches, unresolved_links=self.unresolved,
                            relations=self.relations,
                            unresolved_relations=self.unresolved_relations)


def _checked(records: Iterable[Any], drop_embeddings: bool) -> Iterator[_Entry]:
    """Every record checked as ``Memory.import_`` checks it (errors name its line)."""
    for batch in exchange.batches(records, 1):
        yield _entry(batch[0], drop_embeddings)


async def _checked_async(records: AsyncIterable[Any], drop_embeddings: bool
                         ) -> AsyncIterator[_Entry]:
    line = 0
    async for item in records:
        line += 1
        if isinstance(item, (str, bytes)) and not item.strip():
            continue  # a blank line, as Memory.import_ skips it
        x = exchange.check(exchange.decode(item, line), line)
        yield _entry(x, drop_embeddings)


# -- what no server can do for a client ------------------------------------------------------
class _NotHere(InvalidError, AttributeError):
    """An attribute of ``Memory`` that only the process holding the store has."""


def _policy_refused(name: str) -> InvalidError:
    return InvalidError(
        f"{name}() changes a policy of one process only; a client's calls run in the "
        "server's process under the store's recorded configuration, so it cannot apply "
        "here. Change that configuration instead (holomem config STORE --set FILE, on "
        "the store the server serves; a custom:NAME policy must be supplied to the "
        "server's own Memory)")


class _Local:
    """The calls a client answers itself, or refuses with a reason (module doc)."""

    render_context = staticmethod(render.render_context)

    @property
    def store(self) -> Any:
        raise _NotHere("a client has no Store: the server holds it (info() tells its "
                       "facts, export() reads them)")

    @property
    def config(self) -> Any:
        raise _NotHere("a client holds no configuration: info().config is the one the "
                       "server applies")

    @property
    def embedder(self) -> Any:
        raise _NotHere("a client has no embedder: the server embeds, and info().embedder "
                       "names the model its store holds vectors of")

    @property
    def clock(self) -> Any:
        raise _NotHere("a client has no clock: the server's clock times every write")

    @property
    def policies(self) -> Any:
        raise _NotHere("a client has no policies: the server's configuration holds them "
                       "(info().config)")

    def with_supersession(self, policy: Any) -> Any:
        raise _policy_refused("with_supersession")

    def with_recency(self, policy: Any) -> Any:
        raise _policy_refused("with_recency")

    def with_entity_extractor(self, extractor: Any) -> Any:
        raise _policy_refused("with_entity_extractor")

    def with_forgetting(self, policy: Any) -> Any:
        raise _policy_refused("with_forgetting")

    def with_consolidation(self, policy: Any) -> Any:
        raise _policy_refused("with_consolidation")

    def with_observer(self, observer: Any) -> Any:
        raise InvalidError("with_observer(): observers are called in the process that "
                           "commits a change, and the server commits in its own; a client "
                           "can watch with list() or export() instead")

    def with_clock(self, clock: Any) -> Any:
        raise InvalidError("with_clock(): the server's clock stamps every write; a client "
                           "cannot replace it (a call's asOf/knownAt options read the past)")

    @staticmethod
    def _reembed_refused() -> InvalidError:
        return InvalidError("reembed() rewrites every vector with an embedder in the "
                            "process that holds the store; run it there: Memory(store, "
                            "embedder=..., reembed=True).reembed()")


# -- the clients ----------------------------------------------------------------------------
class Client(_Local):
    """A connection to ``holomem serve`` with every method of ``holomem.Memory``.

    ``url``: the server (``http://127.0.0.1:8080``); ``api_key``: sent as a bearer
    token; ``tenant``: the ``X-Tenant-ID`` (a separate store; default the server's
    ``default``); ``timeout``: seconds to wait for each answer; ``transport``: an httpx
    transport (tests). Errors: ``invalid_request`` (a URL that is not http(s)).
    """

    def __init__(self, url: str, api_key: str | None = None, tenant: str | None = None, *,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._wire = _Wire(url, timeout)
        self._http = httpx.Client(base_url=self._wire.url, headers=_headers(api_key, tenant),
                                  timeout=timeout, transport=transport)

    @property
    def memory(self) -> Client:
        """The client itself (kept for code written as ``client.memory.recall(...)``)."""
        return self

    def _do(self, spec: Spec) -> Any:
        op, request, decode = spec
        body = _encode(op, request)
        where = self._wire.path(op)
        for _ in range(MAX_HOPS + 1):
            try:
                response = self._http.post(where, content=body)
            except _TRANSPORT as exc:
                raise self._wire.unreachable(op, exc, where) from exc
            following = self._wire.next_hop(op, response)
            if following is None:
                return self._wire.answer(op, response, decode)
            where = following
        raise self._wire.too_many_hops(op, where)

    def healthz(self) -> dict[str, Any]:
        """The server's ``/healthz`` answer. Errors: ``unavailable``."""
        try:
            response = self._http.get("/healthz")
        except _TRANSPORT as exc:
            raise self._wire.unreachable("healthz", exc) from exc
        out: dict[str, Any] = self._wire.answer("healthz", response, _same)
        return out

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- Memory's methods, answered by the server -----------------------------------------
    def remember(self, input: str | RememberInput | Mapping[str, Any] | None = None, /,
                 **fields: Any) -> Remembered:
        """As ``Memory.remember``."""
        out: Remembered = self._do(_Ops.remember(input, **fields))
        return out

    def remember_many(self, inputs: Iterable[RememberInput | Mapping[str, Any]], *,
                      progress: Progress | None = None) -> builtins.list[Remembered]:
        """As ``Memory.remember_many``, in one request (at most 1,000 facts over HTTP)."""
        progress = callback(progress)
        out: builtins.list[Remembered] = self._do(_Ops.remember_many(inputs))
        if progress is not None:
            progress(len(out))
        return out

    def get(self, id: str) -> FactRecord | None:
        """As ``Memory.get``."""
        out: FactRecord | None = self._do(_Ops.get(id))
        return out

    def history(self, id: str) -> builtins.list[FactRecord]:
        """As ``Memory.history``."""
        out: builtins.list[FactRecord] = self._do(_Ops.history(id))
        return out

    def recall(self, query: str, options: Any = None, *, rerank: Any = None, **fields: Any
               ) -> builtins.list[Recalled]:
        """As ``Memory.recall`` (a reranker is code: a served store takes none)."""
        _no_code(rerank, "rerank")
        out: builtins.list[Recalled] = self._do(_Ops.recall(query, options, **fields))
        return out

    def explain(self, query: str, id: str, options: Any = None, *, rerank: Any = None,
                **fields: Any) -> Explanation:
        """As ``Memory.explain`` (a reranker is code: a served store takes none)."""
        _no_code(rerank, "rerank")
        out: Explanation = self._do(_Ops.explain(query, id, options, **fields))
        return out

    def info(self) -> MemoryInfo:
        """As ``Memory.info``: the served store's counts, embedder and configuration."""
        out: MemoryInfo = self._do(_Ops.info())
        return out

    def capabilities(self) -> Capabilities:
        """As ``Memory.capabilities``: what the server's build serves."""
        out: Capabilities = self._do(_Ops.capabilities())
        return out

    def list(self, cursor: str | None = None, limit: int = 100, filter: Any = None,
             history: str = "all", namespace: Sequence[str] | None = None) -> ListPage:
        """As ``Memory.list``."""
        out: ListPage = self._do(_Ops.list(cursor, limit, filter, history, namespace))
        return out

    def list_namespaces(self, prefix: Sequence[str] | None = None,
                        max_depth: int | None = None, limit: int = 100,
                        cursor: str | None = None) -> NamespacePage:
        """As ``Memory.list_namespaces``."""
        out: NamespacePage = self._do(_Ops.list_namespaces(prefix, max_depth, limit, cursor))
        return out

    def feedback(self, id: str, helpful: bool, note: str | None = None) -> FeedbackReport:
        """As ``Memory.feedback``."""
        out: FeedbackReport = self._do(_Ops.feedback(id, helpful, note))
        return out

    def set_confidence(self, id: str, confidence: float) -> FactRecord:
        """As ``Memory.set_confidence``."""
        out: FactRecord = self._do(_Ops.set_confidence(id, confidence))
        return out

    def compile_context(self, query: str, budget_tokens: int,
                        namespace: Sequence[str] | None = None, fragments: Any = None, *,
                        k: int = DEFAULT_K, counter: Any = None,
                        recall: Mapping[str, Any] | None = None) -> CompiledContext:
        """As ``Memory.compile_context``, counted with the server's default counter."""
        _no_code(counter, "counter")
        out: CompiledContext = self._do(_Ops.compile_context(
            query, budget_tokens, namespace, fragments, k, recall))
        return out

    def explain_context(self, query: str, budget_tokens: int, id: str,
                        namespace: Sequence[str] | None = None, fragments: Any = None, *,
                        k: int = DEFAULT_K, counter: Any = None,
                        recall: Mapping[str, Any] | None = None) -> ContextDecision:
        """As ``Memory.explain_context``, counted with the server's default counter."""
        _no_code(counter, "counter")
        out: ContextDecision = self._do(_Ops.compile_context(
            query, budget_tokens, namespace, fragments, k, recall, id))
        return out

    def save_working_context(self, namespace: Sequence[str] | None, session: str,
                             state: Any) -> WorkingContext:
        """As ``Memory.save_working_context``."""
        out: WorkingContext = self._do(_Ops.save_working_context(namespace, session, state))
        return out

    def load_working_context(self, namespace: Sequence[str] | None, session: str,
                             save: int | None = None) -> WorkingContext:
        """As ``Memory.load_working_context``."""
        out: WorkingContext = self._do(_Ops.load_working_context(namespace, session, save))
        return out

    def list_working_contexts(self, namespace: Sequence[str] | None = None
                              ) -> WorkingContextList:
        """As ``Memory.list_working_contexts``."""
        out: WorkingContextList = self._do(_Ops.list_working_contexts(namespace))
        return out

    def forget(self, scope: Any, options: Any = None, **fields: Any) -> ForgetReport:
        """As ``Memory.forget``."""
        out: ForgetReport = self._do(_Ops.forget(scope, options, **fields))
        return out

    def apply_forgetting(self, options: Any = None, **fields: Any) -> ForgetReport:
        """As ``Memory.apply_forgetting``."""
        out: ForgetReport = self._do(_Ops.apply_forgetting(options, **fields))
        return out

    def consolidate(self, options: Any = None, **fields: Any) -> ConsolidationReport:
        """As ``Memory.consolidate``."""
        out: ConsolidationReport = self._do(_Ops.consolidate(options, **fields))
        return out

    def probe(self, entity: str, k: int = 10, namespace: Sequence[str] | None = None
              ) -> ProbeResult:
        """As ``Memory.probe``."""
        out: ProbeResult = self._do(_Ops.probe(entity, k, namespace))
        return out

    def related(self, entity: str, k: int = 10, namespace: Sequence[str] | None = None
                ) -> RelatedResult:
        """As ``Memory.related``."""
        out: RelatedResult = self._do(_Ops.related(entity, k, namespace))
        return out

    def reason(self, entities: Sequence[str], k: int = 10,
               namespace: Sequence[str] | None = None) -> ReasonResult:
        """As ``Memory.reason``."""
        out: ReasonResult = self._do(_Ops.reason(entities, k, namespace))
        return out

    def contradict(self, *, subject: str | None = None, entity: str | None = None,
                   k: int = 10, max_pairs: int = 100_000, cursor: str | None = None,
                   namespace: Sequence[str] | None = None,
                   filter: Mapping[str, Any] | None = None) -> ContradictResult:
        """As ``Memory.contradict``."""
        out: ContradictResult = self._do(_Ops.contradict(
            subject=subject, entity=entity, k=k, max_pairs=max_pairs, cursor=cursor,
            namespace=namespace, filter=filter))
        return out

    def relate(self, from_id: str, to_id: str, relation: str, metadata: Any = None, *,
               namespace: Sequence[str] | None = None) -> RelateResult:
        """As ``Memory.relate``."""
        out: RelateResult = self._do(_Ops.relate(from_id, to_id, relation, metadata,
                                                 namespace))
        return out

    def relate_many(self, links: Any, *, namespace: Sequence[str] | None = None
                    ) -> RelateManyResult:
        """As ``Memory.relate_many``: one request, one transaction."""
        out: RelateManyResult = self._do(_Ops.relate_many(links, namespace))
        return out

    def unrelate(self, from_id: str, to_id: str, relation: str, *,
                 namespace: Sequence[str] | None = None) -> UnrelateResult:
        """As ``Memory.unrelate``."""
        out: UnrelateResult = self._do(_Ops.unrelate(from_id, to_id, relation, namespace))
        return out

    def links(self, id: str, relation: str | None = None, direction: str = "out", *,
              as_of: Any = None, known_at: Any = None,
              namespace: Sequence[str] | None = None) -> LinkList:
        """As ``Memory.links``."""
        out: LinkList = self._do(_Ops.links(id, relation, direction, as_of, known_at,
                                            namespace))
        return out

    def why(self, query_or_id: str, max_hops: int = 2, relation: Any = None,
            filter: Any = None, *, as_of: Any = None, known_at: Any = None,
            namespace: Sequence[str] | None = None) -> WhyResult:
        """As ``Memory.why``."""
        out: WhyResult = self._do(_Ops.why(query_or_id, max_hops, relation, filter, as_of,
                                           known_at, namespace))
        return out

    def export(self, namespace: Sequence[str] | None = None, *,
               page_size: int = pages.MAX_EXPORT_PAGE) -> Iterator[dict[str, Any]]:
        """As ``Memory.export``, read ``page_size`` (<= 1,000) records per request."""
        ns = _namespace(namespace)
        limit = validate.positive_int(page_size, "page_size", pages.MAX_EXPORT_PAGE)
        cursor: str | None = None
        while True:
            page: _ExportPage = self._do(_Ops.export_page(ns, cursor, limit))
            yield from page.records
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def export_page(self, namespace: Sequence[str] | None = None, cursor: str | None = None,
                    limit: int = pages.MAX_EXPORT_PAGE) -> pages.ExportPage:
        """As ``Memory.export_page``: one page of the export and the next page's cursor."""
        out: pages.ExportPage = self._do(_Ops.page(namespace, cursor, limit))
        return out

    def import_(self, records: Iterable[Any], *, batch_size: int = exchange.IMPORT_BATCH,
                progress: Callable[[int], None] | None = None,
                drop_embeddings: bool = False,
                relations: Iterable[Any] = ()) -> ImportReport:
        """As ``Memory.import_``, in requests of at most 1,000 records and about 1 MB,
        each one transaction (see the module doc for the order of held-back links and
        of relations)."""
        size = exchange.batch_size(batch_size)
        progress = callback(progress)
        links = _Relations(relations)
        plan = _ImportPlan(min(size, requests.MAX_IMPORT_RECORDS))
        totals = _Totals()

        def send(request: builtins.list[_Entry]) -> None:
            try:
                report: ImportReport = self._do(_Ops.import_request(
                    [e.record for e in request], size, drop_embeddings))
            except HolomemError as exc:
                raise _renumbered(exc, request) from None
            totals.add(report, len(request))
            if progress is not None:
                progress(totals.done)

        for entry in _checked(records, drop_embeddings):
            for request in plan.add(links.add(entry)):
                send(request)
        for request in plan.finish():
            send(request)
        for part in links.requests():
            try:
                report = self._do(_Ops.import_request(
                    [], size, drop_embeddings, [r for _, r in part]))
            except HolomemError as exc:
                raise _renumbered(exc, [line for line, _ in part]) from None
            totals.add(report, 0)
        return totals.report()

    def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """As ``Memory.call``: the server's contract answer to ``op`` (checked here
        first, as ``Memory.call`` checks it)."""
        out: dict[str, Any] = self._do(_Ops.call(op, request))
        return out

    def reembed(self, *, batch_size: int = 0, progress: Callable[[int], None] | None = None
                ) -> int:
        """Refused: see the module doc. Errors: ``invalid_request``."""
        raise self._reembed_refused()

    def notify(self, op: str, ids: builtins.list[str], revision: int) -> None:
        """Refused: a client has no observers (see the module doc)."""
        raise InvalidError("notify() calls a Memory's observers after a change it "
                           "committed; a client commits nothing itself and has none")


class AsyncClient(_Local):
    """:class:`Client` over asyncio, with every method of ``holomem.AsyncMemory``:
    ``await client.recall(...)``, ``async for record in client.export()``."""

    def __init__(self, url: str, api_key: str | None = None, tenant: str | None = None, *,
                 timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._wire = _Wire(url, timeout)
        self._http = httpx.AsyncClient(base_url=self._wire.url,
                                       headers=_headers(api_key, tenant),
                                       timeout=timeout, transport=transport)

    @property
    def memory(self) -> AsyncClient:
        """The client itself (kept for code written as ``client.memory.recall(...)``)."""
        return self

    async def _do(self, spec: Spec) -> Any:
        op, request, decode = spec
        body = _encode(op, request)
        where = self._wire.path(op)
        for _ in range(MAX_HOPS + 1):
            try:
                response = await self._http.post(where, content=body)
            except _TRANSPORT as exc:
                raise self._wire.unreachable(op, exc, where) from exc
            following = self._wire.next_hop(op, response)
            if following is None:
                return self._wire.answer(op, response, decode)
            where = following
        raise self._wire.too_many_hops(op, where)

    async def healthz(self) -> dict[str, Any]:
        """The server's ``/healthz`` answer. Errors: ``unavailable``."""
        try:
            response = await self._http.get("/healthz")
        except _TRANSPORT as exc:
            raise self._wire.unreachable("healthz", exc) from exc
        out: dict[str, Any] = self._wire.answer("healthz", response, _same)
        return out

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- AsyncMemory's methods, answered by the server ------------------------------------
    async def remember(self, input: Any = None, /, **fields: Any) -> Remembered:
        out: Remembered = await self._do(_Ops.remember(input, **fields))
        return out

    async def remember_many(self, inputs: Iterable[Any], *, progress: Progress | None = None
                            ) -> builtins.list[Remembered]:
        progress = callback(progress)
        out: builtins.list[Remembered] = await self._do(_Ops.remember_many(inputs))
        if progress is not None:
            progress(len(out))
        return out

    async def get(self, id: str) -> FactRecord | None:
        out: FactRecord | None = await self._do(_Ops.get(id))
        return out

    async def history(self, id: str) -> builtins.list[FactRecord]:
        out: builtins.list[FactRecord] = await self._do(_Ops.history(id))
        return out

    async def recall(self, query: str, options: Any = None, /, **fields: Any
                     ) -> builtins.list[Recalled]:
        out: builtins.list[Recalled] = await self._do(_Ops.recall(query, options, **fields))
        return out

    async def explain(self, query: str, id: str, options: Any = None, /, **fields: Any
                      ) -> Explanation:
        out: Explanation = await self._do(_Ops.explain(query, id, options, **fields))
        return out

    async def info(self) -> MemoryInfo:
        out: MemoryInfo = await self._do(_Ops.info())
        return out

    async def capabilities(self) -> Capabilities:
        out: Capabilities = await self._do(_Ops.capabilities())
        return out

    async def list(self, cursor: str | None = None, limit: int = 100, filter: Any = None,
                   history: str = "all", namespace: Sequence[str] | None = None) -> ListPage:
        out: ListPage = await self._do(_Ops.list(cursor, limit, filter, history, namespace))
        return out

    async def list_namespaces(self, prefix: Sequence[str] | None = None,
                              max_depth: int | None = None, limit: int = 100,
                              cursor: str | None = None) -> NamespacePage:
        out: NamespacePage = await self._do(_Ops.list_namespaces(prefix, max_depth, limit,
                                                                  cursor))
        return out

    async def feedback(self, id: str, helpful: bool, note: str | None = None
                       ) -> FeedbackReport:
        out: FeedbackReport = await self._do(_Ops.feedback(id, helpful, note))
        return out

    async def set_confidence(self, id: str, confidence: float) -> FactRecord:
        out: FactRecord = await self._do(_Ops.set_confidence(id, confidence))
        return out

    async def compile_context(self, query: str, budget_tokens: int,
                              namespace: Sequence[str] | None = None, fragments: Any = None,
                              *, k: int = DEFAULT_K, recall: Mapping[str, Any] | None = None
                              ) -> CompiledContext:
        out: CompiledContext = await self._do(_Ops.compile_context(
            query, budget_tokens, namespace, fragments, k, recall))
        return out

    async def explain_context(self, query: str, budget_tokens: int, id: str,
                              namespace: Sequence[str] | None = None, fragments: Any = None,
                              *, k: int = DEFAULT_K, recall: Mapping[str, Any] | None = None
                              ) -> ContextDecision:
        out: ContextDecision = await self._do(_Ops.compile_context(
            query, budget_tokens, namespace, fragments, k, recall, id))
        return out

    async def save_working_context(self, namespace: Sequence[str] | None, session: str,
                                   state: Any) -> WorkingContext:
        out: WorkingContext = await self._do(_Ops.save_working_context(namespace, session,
                                                                        state))
        return out

    async def load_working_context(self, namespace: Sequence[str] | None, session: str,
                                   save: int | None = None) -> WorkingContext:
        out: WorkingContext = await self._do(_Ops.load_working_context(namespace, session,
                                                                        save))
        return out

    async def list_working_contexts(self, namespace: Sequence[str] | None = None
                                    ) -> WorkingContextList:
        out: WorkingContextList = await self._do(_Ops.list_working_contexts(namespace))
        return out

    async def forget(self, scope: Any, options: Any = None, /, **fields: Any) -> ForgetReport:
        out: ForgetReport = await self._do(_Ops.forget(scope, options, **fields))
        return out

    async def apply_forgetting(self, options: Any = None, /, **fields: Any) -> ForgetReport:
        out: ForgetReport = await self._do(_Ops.apply_forgetting(options, **fields))
        return out

    async def consolidate(self, options: Any = None, /, **fields: Any) -> ConsolidationReport:
        out: ConsolidationReport = await self._do(_Ops.consolidate(options, **fields))
        return out

    async def probe(self, entity: str, k: int = 10, namespace: Sequence[str] | None = None
                    ) -> ProbeResult:
        out: ProbeResult = await self._do(_Ops.probe(entity, k, namespace))
        return out

    async def related(self, entity: str, k: int = 10,
                      namespace: Sequence[str] | None = None) -> RelatedResult:
        out: RelatedResult = await self._do(_Ops.related(entity, k, namespace))
        return out

    async def reason(self, entities: Sequence[str], k: int = 10,
                     namespace: Sequence[str] | None = None) -> ReasonResult:
        out: ReasonResult = await self._do(_Ops.reason(entities, k, namespace))
        return out

    async def contradict(self, **kwargs: Any) -> ContradictResult:
        out: ContradictResult = await self._do(_Ops.contradict(**kwargs))
        return out

    async def relate(self, from_id: str, to_id: str, relation: str, metadata: Any = None,
                     **kwargs: Any) -> RelateResult:
        out: RelateResult = await self._do(_Ops.relate(from_id, to_id, relation, metadata,
                                                       **kwargs))
        return out

    async def relate_many(self, links: Any, **kwargs: Any) -> RelateManyResult:
        out: RelateManyResult = await self._do(_Ops.relate_many(links, **kwargs))
        return out

    async def unrelate(self, from_id: str, to_id: str, relation: str,
                       **kwargs: Any) -> UnrelateResult:
        out: UnrelateResult = await self._do(_Ops.unrelate(from_id, to_id, relation,
                                                           **kwargs))
        return out

    async def links(self, id: str, relation: str | None = None, direction: str = "out",
                    **kwargs: Any) -> LinkList:
        out: LinkList = await self._do(_Ops.links(id, relation, direction, **kwargs))
        return out

    async def why(self, query_or_id: str, max_hops: int = 2, relation: Any = None,
                  filter: Any = None, **kwargs: Any) -> WhyResult:
        out: WhyResult = await self._do(_Ops.why(query_or_id, max_hops, relation, filter,
                                                 **kwargs))
        return out

    async def export_page(self, namespace: Sequence[str] | None = None,
                          cursor: str | None = None,
                          limit: int = pages.MAX_EXPORT_PAGE) -> pages.ExportPage:
        out: pages.ExportPage = await self._do(_Ops.page(namespace, cursor, limit))
        return out

    async def export(self, namespace: Sequence[str] | None = None, *,
                     page_size: int = pages.MAX_EXPORT_PAGE
                     ) -> AsyncIterator[dict[str, Any]]:
        """As ``AsyncMemory.export``, ``page_size`` (<= 1,000) records per request."""
        ns = _namespace(namespace)
        limit = validate.positive_int(page_size, "page_size", pages.MAX_EXPORT_PAGE)
        cursor: str | None = None
        while True:
            page: _ExportPage = await self._do(_Ops.export_page(ns, cursor, limit))
            for record in page.records:
                yield record
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def import_(self, records: Iterable[Any] | AsyncIterable[Any], *,
                      batch_size: int = exchange.IMPORT_BATCH,
                      progress: Callable[[int], None] | None = None,
                      drop_embeddings: bool = False,
                      relations: Iterable[Any] = ()) -> ImportReport:
        """As ``Client.import_``; ``records`` may be a plain or an async iterable."""
        size = exchange.batch_size(batch_size)
        progress = callback(progress)
        links = _Relations(relations)
        plan = _ImportPlan(min(size, requests.MAX_IMPORT_RECORDS))
        totals = _Totals()

        async def send(request: builtins.list[_Entry]) -> None:
            try:
                report: ImportReport = await self._do(_Ops.import_request(
                    [e.record for e in request], size, drop_embeddings))
            except HolomemError as exc:
                raise _renumbered(exc, request) from None
            totals.add(report, len(request))
            if progress is not None:
                progress(totals.done)

        if isinstance(records, AsyncIterable):
            async for entry in _checked_async(records, drop_embeddings):
                for request in plan.add(links.add(entry)):
                    await send(request)
        else:
            for entry in _checked(records, drop_embeddings):
                for request in plan.add(links.add(entry)):
                    await send(request)
        for request in plan.finish():
            await send(request)
        for part in links.requests():
            try:
                report = await self._do(_Ops.import_request(
                    [], size, drop_embeddings, [r for _, r in part]))
            except HolomemError as exc:
                raise _renumbered(exc, [line for line, _ in part]) from None
            totals.add(report, 0)
        return totals.report()

    async def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await self._do(_Ops.call(op, request))
        return out

    async def reembed(self, **kwargs: Any) -> int:
        """Refused: see the module doc. Errors: ``invalid_request``."""
        raise self._reembed_refused()
