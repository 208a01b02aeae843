"""The HTTP door: ``holomem serve`` (Starlette on uvicorn), tenants, auth, limits.

Owns: routes, the tenant pool, authentication, the checks that keep web pages out
(Host, Origin, content type), request limits, and the mapping of errors to HTTP
statuses. Every memory route is ``Memory.call`` (SPEC §5), so HTTP speaks exactly
the contract the library does. Imports the API layer, starlette and uvicorn (the
``serve`` extra).

Why Starlette and uvicorn: Starlette is the small, well-kept ASGI toolkit (routing,
requests, responses, lifespan) without a model layer we would not use — msgspec
already owns validation; uvicorn is the reference ASGI server. Handlers run the
blocking library calls in a thread pool, so concurrent requests reach the
journal's group commit together and share fsyncs; a response is sent only after
the journal acknowledged the write.

Routes (JSON in and out; every error, 404 and 405 included, is
``{"error": {"code", "message"}}``):

- ``POST /api/v1/memory/{op}`` — any op of the contract;
- ``POST /api/v1/documents`` — add one document, or ``{"documents": [...]}``;
- ``GET /api/v1/documents/{id}``; ``DELETE /api/v1/documents/{id}?purge=true``;
- ``POST /api/v1/documents/search`` — ``{"query", "k", "embedding", "ids"}``;
- ``GET /healthz`` — ``{"status": "ok"}``; ``openTenants`` too when authorised.

Tenants: ``X-Tenant-ID`` picks an isolated store under ``DATA/tenants/<id>`` (ids
are 1-64 characters of letters, digits, ``.``, ``_``, ``-``, starting with a
letter or digit: no path can escape). Without the header the tenant is
``default``. At most ``max_tenants`` stores are open; the least recently used idle
one is closed when another is needed.

Web pages: a browser lets any page send a "simple request" (a POST of text/plain,
a form, or nothing) to 127.0.0.1 without asking first, and DNS rebinding lets a page
reach the loopback server under the attacker's own name. So, before routing:
``Host`` must name this server (an IP literal, ``localhost``, the bound host, or an
``allowed_hosts`` entry; with the bound port), and a request that carries an
``Origin`` must come from an ``allowed_origins`` entry (403 ``forbidden``; allowed
origins get CORS answers). Every POST must say ``Content-Type: application/json``
(415), which no simple request can. Request heads are bounded: at most
``MAX_HEADERS`` headers and ``MAX_HEAD_BYTES`` bytes (431 ``limit``), enforced in
the protocol for httptools, which buffers a head without any limit of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import os
import re
import threading
import urllib.parse
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from typing import Any

import msgspec
import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from holomem.api import validate
from holomem.api.contract import MAX_REQUEST_DEPTH
from holomem.api.documents import DocumentInput, Store
from holomem.api.memory import Memory
from holomem.api.types import MemoryConfig
from holomem.errors import (
    HolomemError,
    InvalidError,
    LimitError,
    NotFoundError,
    UnavailableError,
)
from holomem.log import fs

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_TENANT = "default"
MAX_BODY = 1 << 20
MAX_BATCH = 1000
#: A request's head: at most this many headers, and this many bytes of request line
#: and headers together.
MAX_HEADERS = 100
MAX_HEAD_BYTES = 32 * 1024


def _error(status: int, code: str, message: str,
           headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status,
                        headers=headers)


# -- tenants -------------------------------------------------------------------------------
class _Tenant:
    def __init__(self, store: Store, memory: Memory) -> None:
        self.store = store
        self.memory = memory
        self.users = 0


class TenantPool:
    """Open tenant stores, least recently used first; closes idle ones beyond the bound."""

    def __init__(self, data_dir: str, *, key: bytes | None, config: MemoryConfig,
                 max_open: int) -> None:
        self.root = os.path.join(os.path.abspath(data_dir), "tenants")
        self.key = key
        self.config = config
        self.max_open = max_open
        self._open: OrderedDict[str, _Tenant] = OrderedDict()
        self._mu = threading.Lock()
        self._closed = False

    def acquire(self, tenant: str) -> _Tenant:
        """The tenant's open store, opened (and created) if need be; ``release`` it.

        Errors: ``invalid_request`` (a bad tenant id), ``locked`` (another process is
        the store's writer), ``unavailable`` (shutting down), and what opening raises.
        """
        if not TENANT_RE.match(tenant) or ".." in tenant:
            raise InvalidError("X-Tenant-ID must be 1-64 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
        with self._mu:
            if self._closed:
                raise UnavailableError("the server is shutting down")
            t = self._open.get(tenant)
            if t is None:
                self._evict(room=1)
                t = self._open[tenant] = self._open_tenant(tenant)
            self._open.move_to_end(tenant)
            t.users += 1
            return t

    def _open_tenant(self, tenant: str) -> _Tenant:
        fs.make_dirs(self.root)  # DATA/tenants and any new parent, synced
        store = Store.open(os.path.join(self.root, tenant), key=self.key, sync="batch")
        try:
            return _Tenant(store, Memory(store, self.config))
        except BaseException:
            store.close()  # or the store stays locked by a handle nobody holds
            raise

    def release(self, t: _Tenant) -> None:
        with self._mu:
            t.users -= 1
            self._evict()

    def _evict(self, room: int = 0) -> None:
        """Close idle stores until ``room`` more fit under the bound."""
        while len(self._open) + room > self.max_open:
            idle = next((name for name, t in self._open.items() if t.users == 0), None)
            if idle is None:
                return  # every open store is busy: go over the bound for now
            self._open.pop(idle).store.close()

    def close(self) -> None:
        with self._mu:
            self._closed = True
            for t in self._open.values():
                t.store.close()
            self._open.clear()

    def __len__(self) -> int:
        return len(self._open)


# -- bodies --------------------------------------------------------------------------------
# A JSON string, or an unterminated one up to the end of the text (what a decoder
# would read as a string). Possessive, and total from any quote, so the search is
# linear: a pattern that could fail at a quote would be retried at every later one.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENS = np.zeros(256, dtype=np.int32)
_OPENS[list(b"[{")] = 1
_OPENS[list(b"]}")] = -1


def nesting_depth(raw: bytes) -> int:
    """How deep the JSON text ``raw`` nests arrays and objects: the most brackets and
    braces open at once, outside strings (for text that is not JSON, the deepest a
    decoder could reach before it finds out).

    Counted without recursion, in time linear in the text, because msgspec's decoder
    recurses once per level and gives up with ``RecursionError`` near the
    interpreter's limit.
    """
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    depth = np.cumsum(_OPENS[np.frombuffer(brackets, dtype=np.uint8)])
    return max(int(depth.max()), 0)


def decode_body(raw: bytes) -> dict[str, Any]:
    """The JSON object a request body holds (an empty body is ``{}``).

    Errors: ``invalid_request`` — not JSON, or not an object; ``limit`` — nested
    deeper than the contract's :data:`~holomem.api.contract.MAX_REQUEST_DEPTH`,
    found before decoding.
    """
    if not raw:
        return {}
    # Text with few opening brackets cannot nest deeper than their number: skip the count.
    opens = raw.count(b"[") + raw.count(b"{")
    if opens > MAX_REQUEST_DEPTH and nesting_depth(raw) > MAX_REQUEST_DEPTH:
        raise LimitError(f"the body nests deeper than {MAX_REQUEST_DEPTH} levels of arrays "
                         "and objects")
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise InvalidError(f"the body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidError("the body must be a JSON object")
    return data


def _is_json(request: Request) -> bool:
    media = request.headers.get("content-type", "").split(";", 1)[0]
    return media.strip().lower() == "application/json"


async def _read_body(request: Request, limit: int) -> bytes | JSONResponse:
    """The request's body, or the error response to send instead."""
    if not _is_json(request):
        # A browser sends text/plain, a form or no body cross-site without asking.
        return _error(415, "invalid_request",
                      "send the body with Content-Type: application/json")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return _error(413, "limit", f"the request body is over {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _error(413, "limit", f"the request body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _json(value: Any) -> Response:
    return Response(msgspec.json.encode(value), media_type="application/json")


# -- who may ask ---------------------------------------------------------------------------
_HOST_RE = re.compile(r"^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?"
                      r"(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)(?::([0-9]{1,5}))?$")


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a Host value (lowercased; IPv6 in brackets), or None."""
    m = _HOST_RE.match(value.strip().lower())
    if m is None:
        return None
    port = int(m.group(5)) if m.group(5) is not None else None
    if port is not None and port > 65535:
        return None
    return m.group(1), port


def _is_ip(name: str) -> bool:
    try:
        address = ipaddress.ip_address(name[1:-1] if name.startswith("[") else name)
    except ValueError:
        return False
    return name.startswith("[") == (address.version == 6)


class _Hosts:
    """The Host values this server answers to (DNS rebinding: the attacker's name
    resolves to our address, but the browser still sends the attacker's name).

    An IP literal (it cannot be rebound), ``localhost`` and the bound host, each with
    the bound port (80 when the Host names none); and every ``allowed`` entry, a
    ``NAME`` (any port) or ``NAME:PORT``.
    """

    def __init__(self, host: str, port: int | None, allowed: Iterable[str]) -> None:
        self.port = port or None  # port 0 (the OS picks) cannot be checked
        self.names = {"localhost"}
        bound = _split_host(f"[{host}]" if ":" in host else host)
        if bound is not None and not _is_ip(bound[0]):
            self.names.add(bound[0])
        self.allowed: set[tuple[str, int | None]] = set()
        for entry in allowed:
            parsed = _split_host(entry)
            if parsed is None:
                raise InvalidError(f"allowed host (--allow-host) {entry!r} is not a host "
                                   "name or IP, optionally with :PORT")
            self.allowed.add(parsed)

    def accept(self, value: str) -> bool:
        parsed = _split_host(value)
        if parsed is None:
            return False
        name, port = parsed
        port = 80 if port is None else port  # this server speaks plain HTTP
        if (name, None) in self.allowed or (name, port) in self.allowed:
            return True
        if self.port is not None and port != self.port:
            return False
        return name in self.names or _is_ip(name)


def _origins(allowed: Iterable[str]) -> frozenset[str]:
    """Each origin as a browser writes it: lowercase, the scheme's default port left out."""
    out = set()
    for entry in allowed:
        try:
            parts = urllib.parse.urlsplit(entry.strip())
            host = _split_host(parts.netloc) if parts.username is None else None
        except ValueError:
            host = None
        if (host is None or parts.scheme not in ("http", "https") or parts.path not in ("", "/")
                or parts.query or parts.fragment):
            raise InvalidError(f"allowed origin (--allow-origin) {entry!r} must be "
                               "scheme://host[:port], e.g. https://app.example")
        name, port = host
        default = 443 if parts.scheme == "https" else 80
        out.add(f"{parts.scheme}://{name}" + ("" if port in (None, default) else f":{port}"))
    return frozenset(out)


class _Guard:
    """Refuses, before routing, what no client of this server sends: a head with too
    many or too large headers (431), a Host that is not this server, or an Origin
    that is not allowed (403)."""

    def __init__(self, app: ASGIApp, *, hosts: _Hosts, origins: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = origins

    def refusal(self, raw_headers: list[tuple[bytes, bytes]]) -> JSONResponse | None:
        size = sum(len(name) + len(value) + 4 for name, value in raw_headers)
        if len(raw_headers) > MAX_HEADERS or size > MAX_HEAD_BYTES:
            return _error(431, "limit", f"at most {MAX_HEADERS} headers and "
                          f"{MAX_HEAD_BYTES} bytes of them")
        hosts = [v for n, v in raw_headers if n == b"host"]
        if len(hosts) != 1 or not self.hosts.accept(hosts[0].decode("latin-1")):
            return _error(403, "forbidden", "the Host header does not name this server "
                          "(allow other names with --allow-host)")
        origins = [v for n, v in raw_headers if n == b"origin"]
        if origins and (len(origins) > 1
                        or origins[0].decode("latin-1").lower() not in self.origins):
            return _error(403, "forbidden", "requests from this Origin are not allowed "
                          "(allow one with --allow-origin)")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope["headers"])
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


# -- the application -----------------------------------------------------------------------
async def _route_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # registered for HTTPException only
    if exc.status_code == 404:
        return _error(404, "not_found", f"no route {request.url.path}")
    if exc.status_code == 405:
        return _error(405, "invalid_request",
                      f"{request.method} is not allowed on {request.url.path}",
                      headers=exc.headers)
    return _error(exc.status_code, "invalid_request", str(exc.detail), headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    # The details go to the server's log (uvicorn logs the exception), not the client.
    return _error(500, "error", "internal server error")


def create_app(data_dir: str, *, api_key: str | None = None,
               config: MemoryConfig | None = None, key: bytes | None = None,
               max_tenants: int = 64, max_body: int = MAX_BODY,
               max_batch: int = MAX_BATCH, host: str = "127.0.0.1",
               port: int | None = None, allowed_hosts: Iterable[str] = (),
               allowed_origins: Iterable[str] = ()) -> Starlette:
    """The ASGI application serving the stores under ``data_dir``.

    ``host`` and ``port`` are where it is bound (``port=None``: any port), for the
    Host check; ``allowed_hosts`` adds names (``NAME`` or ``NAME:PORT``) and
    ``allowed_origins`` the browser origins (``scheme://host[:port]``) it answers.
    Everything is checked here, before anything listens.

    Errors: ``invalid_request`` naming the bad option or config field.
    """
    config = validate.memory_config(config if config is not None else MemoryConfig())
    if max_tenants < 1:
        raise InvalidError(f"max_tenants (--max-tenants) must be at least 1, not "
                           f"{max_tenants}")
    if port is not None and not 0 <= port <= 65535:
        raise InvalidError(f"port (--port) must be from 0 to 65535, not {port}")
    hosts = _Hosts(host, port, allowed_hosts)
    origins = _origins(allowed_origins)
    pool = TenantPool(data_dir, key=key, config=config, max_open=max_tenants)
    expected = api_key.encode() if api_key else None

    def authorised(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:]
        return hmac.compare_digest(given.encode(), expected)

    async def with_tenant(request: Request,
                          work: Callable[[_Tenant, dict[str, Any]], Any],
                          body: bool = True) -> Response:
        if not authorised(request):
            return _error(401, "unauthorized", "a valid API key is required")
        raw = b""
        if body:
            read = await _read_body(request, max_body)
            if isinstance(read, JSONResponse):
                return read
            raw = read
        name = request.headers.get("x-tenant-id", DEFAULT_TENANT)

        def run() -> Any:
            # Decode, acquire, work and release in one worker thread: decoding a large
            # body and opening a store (a replay, syncs) must not stall the event
            # loop, and a cancelled request cannot leave its tenant marked busy.
            data = decode_body(raw)
            tenant = pool.acquire(name)
            try:
                return work(tenant, data)
            finally:
                pool.release(tenant)

        try:
            return _json(await run_in_threadpool(run))
        except HolomemError as exc:
            return _error(exc.status, exc.code, exc.message)

    async def memory_op(request: Request) -> Response:
        op = request.path_params["op"]

        def work(t: _Tenant, data: dict[str, Any]) -> Any:
            facts = data.get("facts") if op == "remember" else None
            if isinstance(facts, list) and len(facts) > max_batch:
                raise LimitError(f"at most {max_batch} facts per request")
            return t.memory.call(op, data)

        return await with_tenant(request, work)

    async def add_documents(request: Request) -> Response:
        def work(t: _Tenant, data: dict[str, Any]) -> Any:
            docs = data.get("documents", [data])
            if not isinstance(docs, list) or len(docs) > max_batch:
                raise InvalidError(f"documents must be a list of at most {max_batch}")
            try:
                items = msgspec.convert(docs, list[DocumentInput], strict=True)
            except msgspec.ValidationError as exc:
                raise InvalidError(str(exc)) from exc
            return {"revision": t.store.add_documents(items)}

        return await with_tenant(request, work)

    async def document(request: Request) -> Response:
        doc_id = request.path_params["doc_id"]
        if request.method == "DELETE":
            purge = request.query_params.get("purge", "false").lower() in ("1", "true", "yes")

            def delete(t: _Tenant, _: dict[str, Any]) -> Any:
                return {"deleted": t.store.delete_document(doc_id, purge=purge)}

            return await with_tenant(request, delete, body=False)

        def get(t: _Tenant, _: dict[str, Any]) -> Any:
            doc = t.store.get_document(doc_id)
            if doc is None:
                raise NotFoundError(f"no document {doc_id!r}")
            return {"document": msgspec.to_builtins(doc)}

        return await with_tenant(request, get, body=False)

    async def search(request: Request) -> Response:
        def work(t: _Tenant, data: dict[str, Any]) -> Any:
            unknown = set(data) - {"query", "k", "embedding", "ids"}
            if unknown or "query" not in data:
                raise InvalidError("search takes query (required), k, embedding and ids")
            hits = t.store.search_documents(data["query"], data.get("k", 10),
                                            embedding=data.get("embedding"),
                                            ids=data.get("ids"))
            return {"hits": msgspec.to_builtins(hits)}

        return await with_tenant(request, work)

    async def healthz(request: Request) -> Response:
        # Liveness for anyone; what is open only for those who may read it.
        if authorised(request):
            return _json({"status": "ok", "openTenants": len(pool)})
        return _json({"status": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pool.close()  # graceful shutdown: every store synced and closed

    middleware = [Middleware(_Guard, hosts=hosts, origins=origins)]
    if origins:
        middleware.append(Middleware(
            CORSMiddleware, allow_origins=sorted(origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["authorization", "content-type", "x-api-key", "x-tenant-id"],
            allow_private_network=True))
    app = Starlette(routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/api/v1/memory/{op}", memory_op, methods=["POST"]),
        Route("/api/v1/documents", add_documents, methods=["POST"]),
        Route("/api/v1/documents/search", search, methods=["POST"]),
        Route("/api/v1/documents/{doc_id:path}", document, methods=["GET", "DELETE"]),
    ], middleware=middleware, lifespan=lifespan,
        exception_handlers={HTTPException: _route_error, Exception: _internal_error})
    app.state.pool = pool
    return app


# -- the server ----------------------------------------------------------------------------
def _bounded_httptools() -> type[asyncio.Protocol] | None:
    """uvicorn's httptools protocol, refusing a request head past MAX_HEAD_BYTES.

    httptools keeps a header's value until it is complete, with no limit, and
    uvicorn's ``h11_max_incomplete_event_size`` applies to h11 only. So while a head
    is being read its bytes are fed in slices and counted, and once they pass the
    bound the connection gets a 431 and is closed.
    """
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:
        return None
    slice_size = 4096
    refusal = msgspec.json.encode({"error": {
        "code": "limit", "message": f"the request head is over {MAX_HEAD_BYTES} bytes"}})

    class BoundedHead(HttpToolsProtocol):
        in_head = True  # between requests, or reading a request's line and headers
        head_bytes = 0

        def on_message_begin(self) -> None:
            super().on_message_begin()
            self.in_head, self.head_bytes = True, 0

        def on_headers_complete(self) -> None:
            self.in_head = False
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self.in_head = True

        def data_received(self, data: bytes) -> None:
            while data and self.in_head and not self.transport.is_closing():
                piece, data = data[:slice_size], data[slice_size:]
                super().data_received(piece)
                if self.in_head:
                    self.head_bytes += len(piece)
                    if self.head_bytes > MAX_HEAD_BYTES + slice_size:
                        self.refuse()
                        return
            if data and not self.transport.is_closing():
                super().data_received(data)

        def refuse(self) -> None:
            cycle = getattr(self, "cycle", None)
            if cycle is None or cycle.response_complete:  # not inside another answer
                self.transport.write(
                    b"HTTP/1.1 431 Request Header Fields Too Large\r\n"
                    b"content-type: application/json\r\nconnection: close\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(refusal), refusal))
            self.transport.close()

    return BoundedHead


def run(app: ASGIApp, *, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve ``app`` with uvicorn until interrupted, request heads bounded."""
    import uvicorn

    protocol = _bounded_httptools()
    if protocol is not None:
        uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on",
                    ws="none", http=protocol)
    else:
        uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on",
                    ws="none", http="h11", h11_max_incomplete_event_size=MAX_HEAD_BYTES)


def serve(data_dir: str, *, host: str = "127.0.0.1", port: int = 8080,
          api_key: str | None = None, config: MemoryConfig | None = None,
          key: bytes | None = None, max_tenants: int = 64,
          allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = ()) -> None:
    """Run the server until interrupted (SIGINT/SIGTERM close every store cleanly).

    Errors (before anything listens): ``invalid_request``, as :func:`create_app`.
    """
    app = create_app(data_dir, api_key=api_key, config=config, key=key,
                     max_tenants=max_tenants, host=host, port=port,
                     allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
    run(app, host=host, port=port)
