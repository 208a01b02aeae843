"""The Python client of ``holomem serve``: the methods and types of ``holomem.Memory``.

Owns: a transport to the server (``_send``: a request, its answer or its error, once
over httpx's sync client and once over its async one) and the memory calls the op
table makes of it. Code written against ``Memory`` runs against a server by changing
one line: ``Memory(Store.open("store"))`` -> ``Client("http://127.0.0.1:8080")``.
:class:`Client` has every public method of ``Memory``, :class:`AsyncClient` every one
of ``AsyncMemory`` (coroutines where it has coroutines), with the same arguments;
``client.memory`` is the client itself. Imports the memory API (the op table, the
contract, the conversions Memory runs first) and httpx, the ``serve`` extra: without
it, importing this module fails with the command that installs it.

An op's method is a :class:`Remote` of Memory's own method, with its signature and
docstring. A call binds its arguments to that signature; converts what Memory converts
before it checks anything (a remember's input, the options of recall, explain, forget
and the maintenance calls, list's filter, a context's fragments: :data:`_CONVERTED`; a
namespace; a time, an aware ``datetime`` made milliseconds; a filter) exactly as
Memory does, so a bad one raises Memory's own error before anything is sent (a
remember's inputs are checked as Memory checks them: :func:`intake.validated`; a NaN or
an infinity anywhere in a request, which JSON cannot hold, is an ``InvalidError``); makes
the op's request with :func:`holomem.api.memory.ops.asked`, the inverse of the row's
``args``; sends it; and decodes the answer under the row's key into the row's result
type. Anything else wrong is refused by the server's Memory, whose error comes back
as it is (a value of the wrong JSON type, by the contract's decoder: same class and
code). A row of the table that :class:`_Served` does not name is served all the same.

Errors: the server's answer raises the class the library raises for its code
(:func:`holomem.errors.from_code`), with ``status`` the HTTP status (a code it has no
class for: a ``HolomemError`` carrying it). A server that cannot be reached, does not
answer within ``timeout`` seconds, or answers something other than holomem's JSON
raises ``UnavailableError`` naming the URL, never an httpx exception (a timed-out
write may have been applied: retrying it is a no-op). A write sent to a server that is
not the tenant's writer (docs/scale-out.md §8.7) is answered with a 307: the client
sends it to that http(s) URL with its own headers, at most :data:`MAX_HOPS` times.

Over the wire, ``export`` reads pages through ``export_page``, and ``import_`` sends the
bounded requests :class:`~holomem.api.memory.transfer.parts.ImportParts` cuts it into
(``remember_many``: at most 1,000 facts a request).
``render_context`` runs here; what needs the process that holds the store — the
``with_*`` calls, ``reembed``, ``notify``, a ``rerank`` or ``counter`` argument — raises
``InvalidError``, and ``store``, ``config``, ``embedder``, ``clock``, ``policies`` and
``session`` an ``InvalidError`` that is also an ``AttributeError`` (``info()`` tells the
server's configuration; ``holomem config STORE --set FILE`` changes it).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import types
from collections.abc import (
    AsyncIterable,
    AsyncIterator,
    Callable,
    Coroutine,
    Iterable,
    Iterator,
    Mapping,
    Sequence,
)
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

try:
    import httpx
except ImportError as _missing:  # the serve extra is not installed
    raise ModuleNotFoundError(
        "holomem.client needs httpx, which the serve extra installs: "
        "pip install 'holomem-db[serve]'", name="httpx") from _missing

import msgspec

from holomem.api.doors.http.tenants import valid_tenant
from holomem.api.engine import validate
from holomem.api.memory import contract, filters, ops
from holomem.api.memory.conversation import calls as conversation
from holomem.api.memory.conversation import messages
from holomem.api.memory.facts import listing
from holomem.api.memory.forget import consolidation, removal
from holomem.api.memory.memory import Memory
from holomem.api.memory.progress import Progress, callback
from holomem.api.memory.recall import rank
from holomem.api.memory.remember import intake
from holomem.api.memory.transfer import exchange, pages
from holomem.api.memory.transfer.parts import REQUEST_BYTES, ImportParts
from holomem.api.memory.transfer.records import ImportReport
from holomem.api.memory.types import MaintenanceOptions, RememberInput
from holomem.api.memory.window import budget, render
from holomem.errors import (
    HolomemError,
    InvalidError,
    StoreLockedError,
    UnavailableError,
    from_code,
)

__all__ = ["AsyncClient", "Client", "REQUEST_BYTES"]

P = ParamSpec("P")
R = TypeVar("R")
#: Redirects a write follows to reach the tenant's writer (docs/scale-out.md §8.7).
MAX_HOPS = 2
#: What httpx raises for a request that got no usable answer.
_TRANSPORT = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError)
#: The row of the op table each method of Memory runs (remember_many: remember of facts).
_ROWS = {op.method: op for op in (*ops.OPS.values(), ops.REMEMBER_MANY)}
#: The rows whose method each client writes itself (it cuts an import into requests).
PYTHON_ONLY = ("import_",)


# -- a call as its op's request -------------------------------------------------------------
#: Arguments that are Python code (a served store runs none), a namespace, a time.
_CODE = ("rerank", "counter", "extractor")
_NAMESPACES = ("namespace", "prefix", "within")
_TIMES = (*validate.TIME_FIELDS, *validate.RECALL_TIME_FIELDS)
Given = dict[str, Any]


def _remember(a: Given) -> Given:
    """The input as Memory's remember makes it, checked as it checks it first (its
    confidence, metadata, times ...: :func:`intake.validated`)."""
    input, fields = a["input"], a["fields"]
    if isinstance(input, str):
        input, fields = None, {"text": input, **fields}
    x = validate.to_struct(RememberInput, input, fields, "remember input",
                           validate.TIME_FIELDS)
    intake.validated(x, 0)
    return {"input": x}


def _remember_many(a: Given) -> Given:
    """The inputs as Memory's remember_many makes them, each checked as it checks it."""
    inputs = a["inputs"]
    if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
        raise InvalidError("remember_many takes a list of inputs")
    out = [validate.to_struct(RememberInput, x, {}, f"input {i}", validate.TIME_FIELDS)
           for i, x in enumerate(inputs)]
    for i, x in enumerate(out):
        intake.validated(x, i)
    return {"inputs": out}


def _set_confidence(a: Given) -> Given:
    validate.doc_id(a["id"])
    validate.confidence(a["confidence"])
    return a


def _conversation(a: Given) -> Given:
    """The messages and the call's time as the library takes them: each time made
    milliseconds, so a naive datetime or a date is refused here as it is there (sent as
    ISO strings they would be read as UTC)."""
    given = conversation.given_messages(a["messages"])
    return {**a, "messages": [messages.message(m, f"message {i}") for i, m in enumerate(given)],
            "time": validate.to_ms(a["time"], "time")}


def _options(a: Given, convert: Callable[[Any, Any], Any], first: Given | None = None) -> Given:
    """``a`` with its options and keyword fields one options Struct (after ``first``,
    what Memory converts before them)."""
    return {**a, **(first or {}), "options": convert(a["options"], a["fields"]), "fields": {}}


def _maintenance(options: Any, fields: Any) -> MaintenanceOptions:
    return validate.to_struct(MaintenanceOptions, options, fields, "apply_forgetting options")


def _check(ok: bool, message: str, a: Given) -> Given:
    if not ok:
        raise InvalidError(message)
    return a


#: What Memory converts (or checks) first in a call's arguments, by method: converted
#: here the same way, so a bad argument raises Memory's own error before anything is sent.
_CONVERTED: dict[str, Callable[[Given], Given]] = {
    "remember": _remember,
    "remember_many": _remember_many,
    "remember_conversation": _conversation,
    "recall": lambda a: _options(a, rank.options, {"query": validate.query(a["query"])}),
    "explain": lambda a: _options(a, rank.options, {"query": validate.query(a["query"])}),
    "forget": lambda a: _options(a, removal.options, {"scope": removal.scope(a["scope"])}),
    "apply_forgetting": lambda a: _options(a, _maintenance),
    "consolidate": lambda a: _options(a, consolidation.options),
    "list": lambda a: {**a, "filter": listing.request(
        a["cursor"], a["limit"], a["filter"], a["history"], a["namespace"]).filter},
    "compile_context": lambda a: {**a, "fragments": budget.fragments(a["fragments"])},
    "explain_context": lambda a: {**a, "fragments": budget.fragments(a["fragments"])},
    "reason": lambda a: _check(  # as holographic's reason refuses it
        not isinstance(a["entities"], str) and isinstance(a["entities"], Sequence)
        and bool(a["entities"]), "entities must be a non-empty list of strings", a),
    "feedback": lambda a: _check(isinstance(a["helpful"], bool),
                                 "helpful must be true or false", a),
    "set_confidence": _set_confidence,
}


def _plain(value: Any) -> Any:
    """What msgspec does not encode itself: a mapping, an array, another iterable."""
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "tolist"):  # a numpy array or number
        return value.tolist()
    if isinstance(value, Iterable):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _nonfinite(value: Any, path: str) -> str | None:
    """Where ``value`` (made of JSON's builtins) holds NaN or an infinity, or None."""
    kind = type(value)
    if kind is float:
        return None if math.isfinite(value) else path
    if kind is list:
        try:  # a list of numbers, summed at C speed: NaN and infinities carry through
            if math.isfinite(sum(value, 0.0)):
                return None
        except (TypeError, OverflowError):
            pass  # not all numbers (or too large to sum): one at a time
        for i, item in enumerate(value):
            if (where := _nonfinite(item, f"{path}[{i}]")) is not None:
                return where
    elif kind is dict:
        for key, item in value.items():
            if (where := _nonfinite(item, f"{path}.{key}" if path else str(key))) is not None:
                return where
    return None


def _encode(op: str, request: Any) -> bytes:
    """The JSON of ``request``. msgspec writes NaN and infinities as null, which the
    server would take for an absent value: they are refused here, as Memory refuses
    them (its checks ran first where it has its own message)."""
    try:
        plain = msgspec.to_builtins(request, enc_hook=_plain)
        where = _nonfinite(plain, "")
        if where is not None:
            raise InvalidError(f"{op}: {where}: NaN and infinity are not JSON")
        return msgspec.json.encode(plain)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        # msgspec.EncodeError is a ValueError: a value that is not JSON.
        raise InvalidError(f"{op}: an argument cannot be sent as JSON: {exc}") from exc


class _Call:
    """A method of Memory as its op: the row of the table, and Memory's signature."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self.row = _ROWS[method.__name__]
        params = list(inspect.signature(method).parameters.values())[1:]  # not self
        self.signature = inspect.Signature(params)
        self.names = {f.name: f.encode_name for f in msgspec.structs.fields(self.row.request)}

    def request(self, args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> tuple[bytes, Progress | None]:
        """The JSON request of a call (a TypeError for arguments Memory would not bind),
        and its ``progress`` callable, which stays here: the client calls it once the
        server has written (checked before anything is sent)."""
        fields, progress = self.fields(args, kwargs)
        return (_encode(self.row.name, {self.names.get(k, k): v for k, v in fields.items()}),
                progress)

    def fields(self, args: tuple[Any, ...], kwargs: dict[str, Any]
               ) -> tuple[dict[str, Any], Progress | None]:
        """:meth:`request`'s fields by their Python names, checked, not yet JSON."""
        bound = self.signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        progress = callback(given.pop("progress", None))
        for name in _CODE:
            value = given.pop(name, None)
            if isinstance(value, str) and name in self.names:
                given[name] = value  # the name of a built-in (an extractor: "rules")
            elif value is not None:
                raise InvalidError(f"{name} is Python code, which a served store cannot "
                                   "run: use an embedded Memory for it")
        for name in _NAMESPACES:
            if given.get(name) is not None:
                given[name] = list(validate.namespace(given[name], name))
        convert = _CONVERTED.get(self.row.method)
        fields = ops.asked(self.row, given if convert is None else convert(given))
        for name in _TIMES:
            if name in fields:
                fields[name] = validate.to_ms(fields[name], name)
        if isinstance(fields.get("filter"), Mapping):  # its datetimes go as ISO strings
            filters.compile_filter(fields["filter"])
        return fields, progress

    def answer(self, payload: Any) -> Any:
        """The method's result: the answer under the row's key, as the row's type."""
        key = self.row.key
        out = msgspec.convert(payload if key is None else payload[key], self.row.result)
        return out[0] if self.row.single else out


def _done(result: Any, progress: Progress | None) -> Any:
    """``result``, once ``progress`` (a remember_many's) was told how many were written."""
    if progress is not None:
        progress(len(result))
    return result


class Remote(Generic[P, R]):
    """Memory's ``method`` as a client's, answered by the server: on a :class:`Client`
    it returns what ``method`` returns, on an :class:`AsyncClient` a coroutine of it.
    Its signature and docstring are ``method``'s; read on the class, it is a function."""

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        call = _Call(method)

        def sync(client: Client, /, *args: Any, **kwargs: Any) -> Any:
            body, progress = call.request(args, kwargs)
            return _done(client._send(call.row.name, body, call.answer), progress)

        async def coroutine(client: AsyncClient, /, *args: Any, **kwargs: Any) -> Any:
            body, progress = call.request(args, kwargs)
            return _done(await client._send(call.row.name, body, call.answer), progress)

        self.methods = (functools.update_wrapper(sync, method),
                        functools.update_wrapper(coroutine, method))

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Callable[..., Any]: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[P, R]: ...
    @overload
    def __get__(self, client: AsyncClient, owner: type[Any]
                ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, client: Any, owner: type[Any]) -> Any:
        method = self.methods[owner.coroutines]
        return method if client is None else types.MethodType(method, client)


def _same(response: Any) -> Any:
    return response


#: The ``import`` op, which each request of ``import_`` runs (:class:`ImportParts`).
_IMPORT = _Call(Memory.import_)


@functools.cache
def _call_of(method: str) -> _Call:
    return _IMPORT if method == "import_" else _Call(getattr(Memory, method))


def _contract_request(op: str, request: dict[str, Any]) -> bytes:
    """The JSON of ``call(op, request)``, checked as ``Memory.call`` checks it: decoded
    to its method's call, whose arguments are then checked as that method's are here
    (:meth:`_Call.fields`: Memory's own messages, a NaN confidence's too)."""
    inv = contract.decode(op, request)
    _call_of(inv.method).fields(inv.args, inv.kwargs)
    return _encode(op, request)


# -- the wire: every failure a holomem error -------------------------------------------------
class _Wire:
    """The server's address, and whatever comes back made an answer or a holomem error."""

    def __init__(self, url: str, timeout: float) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise InvalidError(f"the server URL must start with http:// or https://, "
                               f"not {url!r}")
        try:
            httpx.URL(url)
        except (httpx.InvalidURL, TypeError, ValueError) as exc:
            raise InvalidError(f"the server URL {url!r} is not a URL: {exc}") from None
        self.url = url.rstrip("/")
        self.timeout = timeout

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
        """The ``Location`` of a 307/308 (the tenant's writer), an absolute http(s) URL
        to send the same request to; None for any other answer."""
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
        """The error an answer of status 400 or more stands for: holomem's JSON error's
        class, or ``UnavailableError`` (status 503) for any other body — a proxy in
        front of the server, or something that is no holomem server."""
        try:
            err = response.json()["error"]
            code, message = str(err["code"]), str(err["message"])
        except (ValueError, KeyError, TypeError):
            return UnavailableError(
                f"{self.url} answered HTTP {response.status_code} with something that is "
                f"not holomem's JSON (is it a holomem server?): {response.text[:200]}")
        out = from_code(code, message)
        out.status = response.status_code
        return out


#: What an API key may be, sent in a header: visible ASCII, spaces only inside.
_HEADER_SAFE = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def _headers(api_key: str | None, tenant: str | None) -> dict[str, str]:
    """The headers of every request. Errors: ``invalid_request`` — a tenant the server
    would refuse (:func:`valid_tenant`), an API key no header can carry."""
    if api_key is not None and not (isinstance(api_key, str) and (
            not api_key or _HEADER_SAFE.fullmatch(api_key))):
        raise InvalidError("the API key must be a string of visible ASCII characters "
                           "(spaces only between them)")
    if tenant is not None and not (isinstance(tenant, str) and (
            not tenant or valid_tenant(tenant))):
        raise InvalidError(f"tenant {tenant!r} is not a tenant name: 1 to 64 ASCII letters, "
                           "digits, '.', '_' or '-', starting with a letter or digit, "
                           "without '..'")
    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    if tenant:
        headers["x-tenant-id"] = tenant
    return headers


# -- what no server can do for a client ------------------------------------------------------
class _NotHere(InvalidError, AttributeError):
    """An attribute of ``Memory`` that only the process holding the store has."""


def _absent(message: str) -> Any:
    def absent(self: object) -> Any:
        raise _NotHere(message)

    return property(absent)


def _refused(method: Callable[..., Any], message: str) -> Callable[..., Any]:
    """``method`` of Memory (its signature), refused with ``message``."""
    def refused(self: object, /, *args: Any, **kwargs: Any) -> Any:
        raise InvalidError(message)

    return functools.update_wrapper(refused, method)


def _policy(method: Callable[..., Any]) -> Callable[..., Any]:
    return _refused(method, (
        f"{method.__name__}() changes a policy of one process only; a client's calls run "
        "in the server's process under the store's recorded configuration, so it cannot "
        "apply here. Change that configuration instead (holomem config STORE --set FILE, "
        "on the store the server serves; a custom:NAME policy must be supplied to the "
        "server's own Memory)"))


_REEMBED = ("reembed() rewrites every vector with an embedder in the process that holds "
            "the store; run it there: Memory(store, embedder=..., reembed=True).reembed()")
_NOTIFY = ("notify() calls a Memory's observers after a change it committed; a client "
           "commits nothing itself and has none")


class _Served:
    """What both clients share: every op of the table (each named here for its type),
    and the calls a client answers itself or refuses with a reason (module doc)."""

    #: Whether the client's methods are coroutines.
    coroutines = False

    @property
    def memory(self) -> Self:
        """The client itself (kept for code written as ``client.memory.recall(...)``)."""
        return self

    remember = Remote(Memory.remember)
    remember_many = Remote(Memory.remember_many)
    remember_conversation = Remote(Memory.remember_conversation)
    recall = Remote(Memory.recall)
    explain = Remote(Memory.explain)
    get = Remote(Memory.get)
    history = Remote(Memory.history)
    info = Remote(Memory.info)
    capabilities = Remote(Memory.capabilities)
    list = Remote(Memory.list)
    list_namespaces = Remote(Memory.list_namespaces)
    feedback = Remote(Memory.feedback)
    set_confidence = Remote(Memory.set_confidence)
    forget = Remote(Memory.forget)
    apply_forgetting = Remote(Memory.apply_forgetting)
    consolidate = Remote(Memory.consolidate)
    relate = Remote(Memory.relate)
    relate_many = Remote(Memory.relate_many)
    unrelate = Remote(Memory.unrelate)
    links = Remote(Memory.links)
    why = Remote(Memory.why)
    probe = Remote(Memory.probe)
    related = Remote(Memory.related)
    reason = Remote(Memory.reason)
    contradict = Remote(Memory.contradict)
    entity_profile = Remote(Memory.entity_profile)
    compile_context = Remote(Memory.compile_context)
    explain_context = Remote(Memory.explain_context)
    save_working_context = Remote(Memory.save_working_context)
    load_working_context = Remote(Memory.load_working_context)
    list_working_contexts = Remote(Memory.list_working_contexts)
    export_page = Remote(Memory.export_page)

    render_context = staticmethod(render.render_context)
    store = _absent("a client has no Store: the server holds it (info() tells its facts, "
                    "export() reads them)")
    config = _absent("a client holds no configuration: info().config is the one the "
                     "server applies")
    embedder = _absent("a client has no embedder: the server embeds, and info().embedder "
                       "names the model its store holds vectors of")
    clock = _absent("a client has no clock: the server's clock stamps every write")
    policies = _absent("a client applies no policies: the server applies the store's "
                       "recorded configuration, which info().config gives")
    session = _absent("a client has no session: the server holds the store (info() tells "
                      "its facts and configuration)")
    with_supersession = _policy(Memory.with_supersession)
    with_recency = _policy(Memory.with_recency)
    with_entity_extractor = _policy(Memory.with_entity_extractor)
    with_forgetting = _policy(Memory.with_forgetting)
    with_consolidation = _policy(Memory.with_consolidation)
    with_observer = _refused(Memory.with_observer, (
        "with_observer(): observers are called in the process that commits a change, and "
        "the server commits in its own; a client can watch with list() or export() instead"))
    with_clock = _refused(Memory.with_clock, (
        "with_clock(): the server's clock stamps every write; a client cannot replace it "
        "(a call's asOf/knownAt options read the past)"))
    notify = _refused(Memory.notify, _NOTIFY)


for _method in _ROWS.keys() - vars(_Served).keys() - set(PYTHON_ONLY):  # a row not named
    setattr(_Served, _method, Remote(getattr(Memory, _method)))


# -- the clients ----------------------------------------------------------------------------
class Client(_Served):
    """A connection to ``holomem serve`` with every method of ``holomem.Memory``.

    ``url``: the server (``http://127.0.0.1:8080``); ``api_key``: sent as a bearer
    token; ``tenant``: the ``X-Tenant-ID`` (a separate store; default the server's
    ``default``); ``timeout``: seconds to wait for each answer; ``transport``: an httpx
    transport (tests). Errors: ``invalid_request`` (a URL that is not an http(s) one, a
    tenant name the server refuses, an API key no header can carry).
    """

    def __init__(self, url: str, api_key: str | None = None, tenant: str | None = None, *,
                 timeout: float = 30.0, transport: httpx.BaseTransport | None = None) -> None:
        self._wire = _Wire(url, timeout)
        self._http = httpx.Client(base_url=self._wire.url, headers=_headers(api_key, tenant),
                                  timeout=timeout, transport=transport)

    def _send(self, op: str, body: bytes, decode: Callable[[Any], Any]) -> Any:
        """The server's answer to ``op``, decoded (after redirects to the writer)."""
        where = f"/api/v1/memory/{op}"
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

    reembed = _refused(Memory.reembed, _REEMBED)

    def export(self, namespace: Sequence[str] | None = None, *,
               page_size: int = pages.MAX_EXPORT_PAGE) -> Iterator[dict[str, Any]]:
        """As ``Memory.export``, read ``page_size`` (<= 1,000) records per request."""
        ns = validate.namespace(namespace)
        limit = validate.positive_int(page_size, "page_size", pages.MAX_EXPORT_PAGE)
        cursor: str | None = None
        while True:
            page = self.export_page(ns, cursor, limit)
            yield from map(exchange.as_dict, page.records)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def import_(self, records: Iterable[Any], *, batch_size: int = exchange.IMPORT_BATCH,
                progress: Callable[[int], None] | None = None, drop_embeddings: bool = False,
                relations: Iterable[Any] = ()) -> ImportReport:
        """As ``Memory.import_``, in requests of at most 1,000 records and about 1 MB,
        each one transaction (see the module doc)."""
        job = ImportParts(batch_size, drop_embeddings, relations, progress)
        for part in job.parts(records):
            try:
                report = self._send("import", _encode("import", part.request), _IMPORT.answer)
            except HolomemError as exc:
                raise job.renumbered(exc, part) from None
            job.sent(part, report)
        return job.report

    def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """As ``Memory.call``: the server's contract answer to ``op`` (checked here
        first, as ``Memory.call`` checks it)."""
        out: dict[str, Any] = self._send(op, _contract_request(op, request), _same)
        return out


class AsyncClient(_Served):
    """:class:`Client` over asyncio, with every method of ``holomem.AsyncMemory``:
    ``await client.recall(...)``, ``async for record in client.export()``."""

    coroutines = True

    def __init__(self, url: str, api_key: str | None = None, tenant: str | None = None, *,
                 timeout: float = 30.0,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._wire = _Wire(url, timeout)
        self._http = httpx.AsyncClient(base_url=self._wire.url,
                                       headers=_headers(api_key, tenant),
                                       timeout=timeout, transport=transport)

    async def _send(self, op: str, body: bytes, decode: Callable[[Any], Any]) -> Any:
        """:meth:`Client._send`, awaited."""
        where = f"/api/v1/memory/{op}"
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

    async def reembed(self, /, **kwargs: Any) -> int:
        """Refused: see the module doc. Errors: ``invalid_request``."""
        raise InvalidError(_REEMBED)

    async def notify(self, /, *args: Any, **kwargs: Any) -> None:
        """Refused, as ``AsyncMemory.notify`` awaited: see the module doc. Errors:
        ``invalid_request``."""
        raise InvalidError(_NOTIFY)

    async def export(self, namespace: Sequence[str] | None = None, *,
                     page_size: int = pages.MAX_EXPORT_PAGE
                     ) -> AsyncIterator[dict[str, Any]]:
        """As ``AsyncMemory.export``, ``page_size`` (<= 1,000) records per request."""
        ns = validate.namespace(namespace)
        limit = validate.positive_int(page_size, "page_size", pages.MAX_EXPORT_PAGE)
        cursor: str | None = None
        while True:
            page = await self.export_page(ns, cursor, limit)
            for record in page.records:
                yield exchange.as_dict(record)
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def import_(self, records: Iterable[Any] | AsyncIterable[Any], *,
                      batch_size: int = exchange.IMPORT_BATCH,
                      progress: Callable[[int], None] | None = None,
                      drop_embeddings: bool = False,
                      relations: Iterable[Any] = ()) -> ImportReport:
        """As ``Client.import_``; ``records`` may be a plain or an async iterable."""
        job = ImportParts(batch_size, drop_embeddings, relations, progress)
        async for part in job.aparts(records):
            try:
                report = await self._send("import", _encode("import", part.request),
                                          _IMPORT.answer)
            except HolomemError as exc:
                raise job.renumbered(exc, part) from None
            job.sent(part, report)
        return job.report

    async def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """As ``Memory.call``, awaited."""
        out: dict[str, Any] = await self._send(op, _contract_request(op, request), _same)
        return out
