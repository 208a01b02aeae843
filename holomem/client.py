"""The Python client of ``holomem serve``: the same methods and types as ``holomem.Memory``.

Owns: turning memory calls into contract requests over HTTP and responses back
into the library's types. Code written against ``Memory`` runs against a server by
changing one line::

    memory = Memory(Store.open("store"))                   # embedded
    memory = Client("http://127.0.0.1:8080").memory        # served

Arguments are checked and converted exactly as ``Memory`` does (same types,
datetimes accepted, in filters at any depth too; a namespace any sequence of strings)
before anything is sent; every namespace and filter argument of ``Memory`` is here
with the same name. An error the server answers with
raises exactly the class the embedded library raises for the same code
(:func:`holomem.errors.from_code`: ``InvalidError``, ``LimitError``,
``NotFoundError``, ``ConflictError``, ...), so ``except`` clauses written for the
embedded library keep working; codes the library has no class for (an
authentication failure, a server fault) raise a ``HolomemError`` carrying that
code. ``status`` is the HTTP status the server sent. ``AsyncClient`` is the same
over asyncio. Needs httpx (the ``serve`` extra).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import httpx
import msgspec

from holomem.api import filters, listing, recall, validate
from holomem.api.types import (
    ConsolidateOptions,
    ConsolidationReport,
    ContradictResult,
    Explanation,
    FactRecord,
    FeedbackReport,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    ListFilter,
    ListPage,
    MaintenanceOptions,
    NamespacePage,
    ProbeResult,
    ReasonResult,
    Recalled,
    RelatedResult,
    Remembered,
    RememberInput,
)
from holomem.errors import InvalidError, from_code

T = TypeVar("T")


def _raise_for(response: httpx.Response) -> None:
    if response.status_code < 400:
        return
    try:
        err = response.json()["error"]
        code, message = str(err["code"]), str(err["message"])
    except (ValueError, KeyError, TypeError):
        code, message = "http", response.text[:500]
    err = from_code(code, message)
    err.status = response.status_code
    raise err


def _as(cls: type[T], value: Any) -> T:
    out: T = msgspec.convert(value, cls)
    return out


# -- requests: built and checked like Memory's own arguments --------------------------------
def _builtins(struct: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(struct)
    return out


#: The filter keys (SPEC §4b) that are times: a Python caller may give datetimes.
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


def _namespace(value: Any, field: str = "namespace") -> list[str] | None:
    """A namespace (or prefix) as JSON, checked as ``Memory`` checks it (None: the root)."""
    return None if value is None else list(validate.namespace(value, field))


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
    """A checked list filter as JSON: its own keys, then the SPEC §4b part."""
    out: dict[str, Any] = {k: v for k, v in (("subject", flt.subject), ("entity", flt.entity),
                                             ("status", flt.status)) if v is not None}
    out.update(_filter_json(flt.conditions() or {}))
    return out or None


class _Ops:
    """Every memory call as (op, request, decoder); shared by the sync and async clients."""

    @staticmethod
    def remember(input: Any = None, /, **fields: Any
                 ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        if isinstance(input, str):
            input, fields = None, {"text": input, **fields}
        x = validate.to_struct(RememberInput, input, fields, "remember input",
                               validate.TIME_FIELDS)
        return "remember", _builtins(x), lambda r: _as(list[Remembered], r["remembered"])[0]

    @staticmethod
    def remember_many(inputs: Iterable[Any]) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
            raise InvalidError("remember_many takes a list of inputs")
        facts = [_builtins(validate.to_struct(RememberInput, x, {}, f"input {i}",
                                                validate.TIME_FIELDS))
                 for i, x in enumerate(inputs)]
        return "remember", {"facts": facts}, lambda r: _as(list[Remembered], r["remembered"])

    @staticmethod
    def recall(query: str, options: Any = None, **fields: Any
               ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("recall", _recall_request(query, options, fields),
                lambda r: _as(list[Recalled], r["results"]))

    @staticmethod
    def explain(query: str, id: str, options: Any = None, **fields: Any
                ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("explain", _recall_request(query, options, fields, id=id),
                lambda r: _as(Explanation, r["explanation"]))

    @staticmethod
    def forget(scope: Any, options: Any = None, **fields: Any
               ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        sc = validate.to_struct(ForgetScope, scope, {}, "forget scope",
                                ("ingested_before", "event_before"))
        o = validate.to_struct(ForgetOptions, options, fields, "forget options")
        validate.forget_scope(sc)
        req = {"scope": _builtins(sc), **_builtins(o), "within": _namespace(o.within, "within")}
        if sc.namespace is not None:
            req["scope"]["namespace"] = _namespace(sc.namespace, "scope.namespace")
        return "forget", req, lambda r: _as(ForgetReport, r)

    @staticmethod
    def get(id: str) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return "get", {"id": id}, lambda r: None if r["fact"] is None else _as(FactRecord,
                                                                               r["fact"])

    @staticmethod
    def history(id: str) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return "history", {"id": id}, lambda r: _as(list[FactRecord], r["history"])

    @staticmethod
    def apply_forgetting(options: Any = None, **fields: Any
                         ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        o = validate.to_struct(MaintenanceOptions, options, fields, "apply_forgetting options")
        return ("applyForgetting", {**_builtins(o), "namespace": _namespace(o.namespace)},
                lambda r: _as(ForgetReport, r))

    @staticmethod
    def consolidate(options: Any = None, **fields: Any
                    ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        o = validate.to_struct(ConsolidateOptions, options, fields, "consolidate options")
        return ("consolidate", {**_builtins(o), "namespace": _namespace(o.namespace)},
                lambda r: _as(ConsolidationReport, r))

    @staticmethod
    def probe(entity: str, k: int = 10, namespace: Sequence[str] | None = None
              ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("probe", {"entity": entity, "k": k, "namespace": _namespace(namespace)},
                lambda r: _as(ProbeResult, r))

    @staticmethod
    def related(entity: str, k: int = 10, namespace: Sequence[str] | None = None
                ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("related", {"entity": entity, "k": k, "namespace": _namespace(namespace)},
                lambda r: _as(RelatedResult, r))

    @staticmethod
    def reason(entities: Sequence[str], k: int = 10, namespace: Sequence[str] | None = None
               ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        if isinstance(entities, (str, bytes, Mapping)) or not isinstance(entities, Iterable):
            raise InvalidError("entities must be a list of strings")
        return ("reason", {"entities": list(entities), "k": k,
                           "namespace": _namespace(namespace)},
                lambda r: _as(ReasonResult, r))

    @staticmethod
    def contradict(*, subject: str | None = None, entity: str | None = None, k: int = 10,
                   max_pairs: int = 100_000, cursor: str | None = None,
                   namespace: Sequence[str] | None = None,
                   filter: Mapping[str, Any] | None = None
                   ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        req = {"subject": subject, "entity": entity, "k": k, "maxPairs": max_pairs,
               "cursor": cursor, "namespace": _namespace(namespace),
               "filter": None if filter is None else _wire_filter(filter)}
        return "contradict", req, lambda r: _as(ContradictResult, r)

    @staticmethod
    def feedback(id: str, helpful: bool, note: str | None = None
                 ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("feedback", {"id": id, "helpful": helpful, "note": note},
                lambda r: _as(FeedbackReport, r))

    @staticmethod
    def set_confidence(id: str, confidence: float
                       ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("setConfidence", {"id": id, "confidence": confidence},
                lambda r: _as(FactRecord, r["fact"]))

    @staticmethod
    def list(cursor: str | None = None, limit: int = 100, filter: Any = None,
             history: str = "all", namespace: Sequence[str] | None = None
             ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        req = listing.request(cursor, limit, filter, history, namespace)
        return ("list", {"cursor": req.cursor, "limit": req.limit,
                         "filter": _list_filter(req.filter), "history": req.history,
                         "namespace": list(req.namespace) or None},
                lambda r: _as(ListPage, r))

    @staticmethod
    def list_namespaces(prefix: Sequence[str] | None = None, max_depth: int | None = None,
                        limit: int = 100, cursor: str | None = None
                        ) -> tuple[str, dict[str, Any], Callable[[Any], Any]]:
        return ("listNamespaces", {"prefix": _namespace(prefix, "prefix"),
                                   "maxDepth": max_depth, "limit": limit, "cursor": cursor},
                lambda r: _as(NamespacePage, r))


_METHODS = [name for name in vars(_Ops) if not name.startswith("_")]


def _encode(op: str, request: dict[str, Any]) -> bytes:
    try:
        return msgspec.json.encode(request)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        # msgspec.EncodeError is a ValueError: a value that is not JSON (an object, NaN ...).
        raise InvalidError(f"{op}: an argument cannot be sent as JSON: {exc}") from exc


class RemoteMemory:
    """``Memory``'s methods, answered by a server (see :class:`Client`)."""

    def __init__(self, http: httpx.Client) -> None:
        self._http = http

    def _do(self, spec: tuple[str, dict[str, Any], Callable[[Any], Any]]) -> Any:
        op, request, decode = spec
        response = self._http.post(f"/api/v1/memory/{op}", content=_encode(op, request))
        _raise_for(response)
        return decode(response.json())


class AsyncRemoteMemory:
    """``Memory``'s methods as coroutines (see :class:`AsyncClient`)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def _do(self, spec: tuple[str, dict[str, Any], Callable[[Any], Any]]) -> Any:
        op, request, decode = spec
        response = await self._http.post(f"/api/v1/memory/{op}",
                                         content=_encode(op, request))
        _raise_for(response)
        return decode(response.json())


def _sync_method(name: str) -> Callable[..., Any]:
    build = getattr(_Ops, name)

    def method(self: RemoteMemory, *args: Any, **kwargs: Any) -> Any:
        return self._do(build(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"Like ``Memory.{name}``, answered by the server."
    return method


def _async_method(name: str) -> Callable[..., Any]:
    build = getattr(_Ops, name)

    async def method(self: AsyncRemoteMemory, *args: Any, **kwargs: Any) -> Any:
        return await self._do(build(*args, **kwargs))

    method.__name__ = name
    method.__doc__ = f"Like ``Memory.{name}``, answered by the server."
    return method


for _name in _METHODS:
    setattr(RemoteMemory, _name, _sync_method(_name))
    setattr(AsyncRemoteMemory, _name, _async_method(_name))


def _headers(api_key: str | None, tenant: str | None) -> dict[str, str]:
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if tenant:
        headers["x-tenant-id"] = tenant
    return headers


class Client:
    """A connection to ``holomem serve``; ``.memory`` has ``Memory``'s methods."""

    def __init__(self, url: str, api_key: str | None = None, tenant: str | None = None, *,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._http = httpx.Client(base_url=url, headers=_headers(api_key, tenant),
                                  timeout=timeout, transport=transport)
        self.memory = RemoteMemory(self._http)

    def healthz(self) -> dict[str, Any]:
        response = self._http.get("/healthz")
        _raise_for(response)
        out: dict[str, Any] = response.json()
        return out

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient:
    """``Client`` over asyncio: ``await client.memory.recall(...)``."""

    def __init__(self, url: str, api_key: str | None = None, tenant: str | None = None, *,
                 timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._http = httpx.AsyncClient(base_url=url, headers=_headers(api_key, tenant),
                                       timeout=timeout, transport=transport)
        self.memory = AsyncRemoteMemory(self._http)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
