"""The HTTP door: ``holomem serve`` (Starlette on uvicorn), tenants, auth, limits.

Owns: the routes, authentication, and serving. The tenant pool is in
:mod:`.tenants`, the checks that keep web pages and oversized requests out in
:mod:`.webguard`, the route shapes and the OpenAPI document in :mod:`.openapi`, the
startup line and the access log in :mod:`.accesslog`, the metrics in :mod:`.metrics`.
Every memory route is
``Memory.call`` (docs/contract.md §5), so HTTP speaks exactly the contract the library
does. Imports the memory API, the engine's types, starlette and uvicorn (the ``serve``
extra).

Why Starlette and uvicorn: Starlette is the small, well-kept ASGI toolkit (routing,
requests, responses, lifespan) without a model layer we would not use — msgspec
already owns validation; uvicorn is the reference ASGI server. Handlers run the
blocking library calls in worker threads — memory ops through each tenant's
``AsyncMemory`` — so concurrent requests reach the journal's group commit together
and share fsyncs; a response is sent only after the journal acknowledged the
write, and a request whose client went away finishes what it started.

Routes (JSON in and out; every error, 404 and 405 included, is
``{"error": {"code", "message"}}``):

- ``POST /api/v1/memory/{op}`` — any op of the contract;
- ``POST /api/v1/documents`` — add one document, or ``{"documents": [...]}``;
- ``GET /api/v1/documents/{id}``; ``DELETE /api/v1/documents/{id}?purge=true``;
- ``POST /api/v1/documents/search`` — ``{"query", "k", "embedding", "ids"}``;
- ``GET /healthz`` — ``{"status": "ok"}``; ``openTenants`` too when authorised;
- ``GET /openapi.json`` — the OpenAPI 3.1 document of all of them;
- ``GET /metrics`` — the operator's metrics, Prometheus text format (:mod:`.metrics`),
  behind the API key when one is set;
- ``POST|GET|DELETE /mcp`` — the MCP tools over streamable HTTP
  (:mod:`holomem.api.doors.mcp.streamable`);
- ``/ui/`` — the inspector's HTML pages for the tenants (:mod:`holomem.api.doors.ui`;
  ``?tenant=ID`` picks one), behind the same key: a browser signs in with it once
  (a cookie), and its forms may post from the server's own origin.

Every name is camelCase, the engine's results too (``lexicalScore``).

Tenants: ``X-Tenant-ID`` picks an isolated store under ``DATA/tenants/<id>`` (ids
are 1-64 characters of letters, digits, ``.``, ``_``, ``-``, starting with a
letter or digit: no path can escape). Without the header the tenant is
``default``. Only a write that succeeds creates a tenant's store: a read of a tenant
that has none answers as an empty store would (:data:`~.memoryroute.READ_OPS`, and the document
reads) and creates nothing, and a new tenant's first write is tried on a throwaway
empty store first (:meth:`~.tenants.TenantPool.rehearse`), so a refused one creates
nothing either. At most ``max_tenant_stores`` stores exist (a new one past it is
``limit``, 507) and at most ``max_tenants`` are open; the least recently used idle
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
import concurrent.futures
import contextlib
import hmac
import importlib.util
import os
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from types import FrameType
from typing import Any

import msgspec

from holomem.errors import missing_extra

try:
    import uvicorn
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware
    from starlette.middleware.cors import CORSMiddleware
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.types import ASGIApp

    # The MCP SDK (the /mcp route) is half a second of imports: it is imported where the
    # app is built, after every option is checked, so that a bad one is refused at once.
    # Here it is only looked for, so that its absence is named at import all the same.
    if importlib.util.find_spec("mcp") is None:
        raise ModuleNotFoundError("No module named 'mcp'", name="mcp")
except ImportError as _missing:  # the serve extra is not installed
    raise missing_extra(_missing, "holomem.api.doors.http.server", "serve") from _missing

from holomem.api.doors.http import openapi as httpschema
from holomem.api.doors.http import redirect, webguard
from holomem.api.doors.http.accesslog import LOGGER, AccessLog, address, to_stderr
from holomem.api.doors.http.memoryroute import Front, MemoryRoute
from holomem.api.doors.http.metrics import Metrics
from holomem.api.doors.http.openapi import DocumentOut, DocumentsRequest, HitOut, SearchRequest
from holomem.api.doors.http.tenants import (
    MAX_TENANT_STORES,
    Tenant,
    TenantPool,
    requested_tenant,
)
from holomem.api.doors.http.webguard import (
    MAX_HEAD_BYTES,
    Guard,
    Hosts,
    bounded_httptools,
    error_response,
    read_body,
)
from holomem.api.doors.ui.routes import create_ui
from holomem.api.doors.ui.source import Tenants
from holomem.api.engine import DocumentInput
from holomem.api.memory import checks, ops
from holomem.api.memory.about import holomem_version
from holomem.api.memory.aio import offload
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.contract import decode_body
from holomem.errors import (
    HolomemError,
    InvalidError,
    LimitError,
    NotFoundError,
    StoreLockedError,
)

MAX_BODY = 1 << 20
MAX_BATCH = 1000
#: Worker threads for blocking calls (Starlette's own thread pool has 40).
WORKERS = 40
#: Where the inspector's pages are (docs/ui.md).
UI_PREFIX = "/ui"
#: How long a stop (SIGINT, SIGTERM) waits for the requests in flight, in seconds.
STOP_GRACE = 1.0

#: The request headers an allowed browser origin may send (CORS): the API's, and the
#: MCP transport's (its session, its protocol version, the namespace of a session, the
#: event a reconnecting stream resumes after). ``Mcp-Session-Id`` is exposed in answers.
CORS_HEADERS = ("authorization", "content-type", "x-api-key", "x-tenant-id",
                "mcp-session-id", "mcp-protocol-version", "x-holomem-namespace",
                "last-event-id")
#: What ``DELETE /api/v1/documents/{id}?purge=`` may say (any case); anything else is
#: ``invalid_request``, not a delete that quietly keeps the text.
PURGE_VALUES = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _json(value: Any) -> Response:
    return Response(msgspec.json.encode(value), media_type="application/json")


# -- the application -----------------------------------------------------------------------
async def _route_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # registered for HTTPException only
    if exc.status_code == 404:
        return error_response(404, "not_found", f"no route {request.url.path}")
    if exc.status_code == 405:
        return error_response(405, "invalid_request",
                      f"{request.method} is not allowed on {request.url.path}",
                      headers=exc.headers)
    return error_response(exc.status_code, "invalid_request", str(exc.detail),
                          headers=exc.headers)


async def _internal_error(request: Request, exc: Exception) -> Response:
    # The details go to the server's log (uvicorn logs the exception), not the client.
    return error_response(500, "error", "internal server error")


def create_app(data_dir: str, *, api_key: str | None = None,
               config: MemoryConfig | None = None, key: bytes | None = None,
               max_tenants: int = 64, max_body: int = MAX_BODY,
               max_batch: int = MAX_BATCH, host: str = "127.0.0.1",
               port: int | None = None, allowed_hosts: Iterable[str] = (),
               allowed_origins: Iterable[str] = (),
               max_tenant_stores: int = MAX_TENANT_STORES,
               journal: str | None = None) -> Starlette:
    """The ASGI application serving the stores under ``data_dir``.

    ``host`` and ``port`` are where it is bound (``port=None``: any port), for the
    Host check; ``allowed_hosts`` adds names (``NAME`` or ``NAME:PORT``) and
    ``allowed_origins`` the browser origins (``scheme://host[:port]``) it answers.
    ``max_tenants`` bounds the tenant stores open at once, ``max_tenant_stores`` those
    that exist. ``journal`` (``nats://HOST:PORT/PREFIX``) puts every tenant's journal
    on a JetStream stream (docs/scale-out.md §8.7). Everything is checked here, before
    anything listens.

    Errors: ``invalid_request`` naming the bad option or config field.
    """
    config = checks.memory_config(config if config is not None else MemoryConfig())
    if max_tenants < 1:
        raise InvalidError(f"max_tenants (--max-tenants) must be at least 1, not "
                           f"{max_tenants}")
    if max_tenant_stores < 1:
        raise InvalidError(f"max_tenant_stores (--max-tenant-stores) must be at least 1, "
                           f"not {max_tenant_stores}")
    if port is not None and not 0 <= port <= 65535:
        raise InvalidError(f"port (--port) must be from 0 to 65535, not {port}")
    hosts = Hosts(host, port, allowed_hosts)
    origins = webguard.origins(allowed_origins)
    # The worker threads every blocking call runs in (as many as requests in flight
    # that can usefully share one group commit).
    workers = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS,
                                                    thread_name_prefix="holomem-http")
    pool = TenantPool(data_dir, key=key, config=config, max_open=max_tenants,
                      executor=workers, max_stores=max_tenant_stores, journal=journal)
    expected = api_key.encode() if api_key else None
    own_url = redirect.advertised(journal)  # a write for another's tenant goes there

    def key_ok(given: str, auth: str) -> bool:
        """Whether the X-API-Key and Authorization values carry the key."""
        if expected is None:
            return True
        if auth.lower().startswith("bearer "):
            given = auth[7:]
        return hmac.compare_digest(given.encode(), expected)

    def authorised(request: Request) -> bool:
        return key_ok(request.headers.get("x-api-key", ""),
                      request.headers.get("authorization", ""))

    async def with_tenant(request: Request, work: Callable[[Tenant, Any], Any],
                          body: bool = True, create: bool = True,
                          parse: Callable[[dict[str, Any]], Any] = dict) -> Response:
        """Run ``work`` on the request's tenant with the body as ``parse`` makes it:
        decoding and parsing the body, opening the store (a replay, syncs) and the work
        itself all happen in worker threads, and a cancelled request (a client gone)
        never leaves work half done or its tenant marked busy: what started runs to its
        end first (:func:`offload`). A tenant with no store gets one only when
        ``create`` (a write), and only for a body that parses."""
        if not authorised(request):
            return error_response(401, "unauthorized", "a valid API key is required")
        raw = b""
        if body:
            read = await read_body(request, max_body)
            if isinstance(read, JSONResponse):
                return read
            raw = read
        name = requested_tenant(request.headers.raw)

        def run() -> Any:
            data = parse(decode_body(raw))  # first: a bad body opens no store
            return pool.call(name, lambda t: work(t, data), writes=create)

        try:
            return _json(await offload(run, workers))
        except StoreLockedError as exc:  # another server is the writer: send it there
            return redirect.locked(exc, request, own_url)
        except HolomemError as exc:
            return error_response(exc.status, exc.code, exc.message)

    async def add_documents(request: Request) -> Response:
        def parse(data: dict[str, Any]) -> list[DocumentInput]:
            docs = data.get("documents")
            if isinstance(docs, list) and len(docs) > max_batch:
                raise LimitError(f"at most {max_batch} documents per request")
            if "documents" in data:
                items: list[DocumentInput] = shaped(data, DocumentsRequest).documents
                return items
            return [shaped(data, DocumentInput)]

        def work(t: Tenant, items: list[DocumentInput]) -> Any:
            return {"revision": t.store.add_documents(items)}

        return await with_tenant(request, work, parse=parse)

    async def document(request: Request) -> Response:
        doc_id = request.path_params["doc_id"]
        if request.method == "DELETE":
            given = request.query_params.get("purge", "false")

            def purge_flag(_: dict[str, Any]) -> bool:  # (before any store is opened)
                flag = PURGE_VALUES.get(given.lower())
                if flag is None:
                    raise InvalidError("purge must be true, false, 1, 0, yes or no, not "
                                       f"{given[:40]!r}")
                return flag

            def delete(t: Tenant, purge: bool) -> Any:
                return {"deleted": t.store.delete_document(doc_id, purge=purge)}

            return await with_tenant(request, delete, body=False, parse=purge_flag)

        def get(t: Tenant, _: object) -> Any:
            doc = t.store.get_document(doc_id)
            if doc is None:
                raise NotFoundError(f"no document {doc_id!r}")
            return {"document": httpschema.served(doc, DocumentOut)}

        return await with_tenant(request, get, body=False, create=False)

    async def search(request: Request) -> Response:
        def parse(data: dict[str, Any]) -> SearchRequest:
            req: SearchRequest = shaped(data, SearchRequest)
            return req

        def work(t: Tenant, req: SearchRequest) -> Any:
            hits = t.store.search_documents(req.query, req.k, embedding=req.embedding,
                                            ids=req.ids)
            return {"hits": [httpschema.served(h, HitOut) for h in hits]}

        return await with_tenant(request, work, create=False, parse=parse)

    async def healthz(request: Request) -> Response:
        # Liveness for anyone; what is open only for those who may read it.
        if authorised(request):
            return _json({"status": "ok", "openTenants": len(pool)})
        return _json({"status": "ok"})

    metrics = Metrics(pool, version=holomem_version())

    async def metrics_page(request: Request) -> Response:
        # What the stores did is the operator's: behind the key, as every route with data.
        if not authorised(request):
            return error_response(401, "unauthorized", "a valid API key is required")
        # Off the loop: the look at the pool waits while a store opens there.
        body, content_type = await offload(
            lambda: metrics.exposition(request.headers.get("accept", "")), workers)
        return Response(body, headers={"content-type": content_type})

    async def openapi_document(request: Request) -> Response:
        # What the API is, like /healthz, is no secret: no key needed. The same bytes
        # for every request (and process); built off the loop the first time.
        body = await offload(httpschema.document_bytes, workers)
        return Response(body, media_type="application/json")

    from holomem.api.doors.mcp.streamable import McpEndpoint

    mcp = McpEndpoint(pool, authorised=authorised, max_body=max_body, max_batch=max_batch)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.run():  # the MCP sessions end before the stores close
            yield
        pool.close()  # graceful shutdown: every store synced and closed
        workers.shutdown(wait=False)

    memory = MemoryRoute(pool, workers, key_ok=key_ok, max_body=max_body,
                         max_batch=max_batch, own_url=own_url)
    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/openapi.json", openapi_document, methods=["GET"]),
        Route("/metrics", metrics_page, methods=["GET"]),
        Route("/api/v1/memory/{op}", memory, methods=["POST"]),
        Route("/api/v1/documents", add_documents, methods=["POST"]),
        Route("/api/v1/documents/search", search, methods=["POST"]),
        Route("/api/v1/documents/{doc_id:path}", document, methods=["GET", "DELETE"]),
        Route("/mcp", mcp, methods=["POST", "GET", "DELETE"]),
        # The inspector's pages for the tenants (docs/ui.md), behind the same key.
        Mount(UI_PREFIX, app=create_ui(Tenants(pool), api_key=api_key)),
    ]
    # The access log first: it sees every request, those the guard refuses too.
    middleware = [Middleware(AccessLog, routes=routes, ops=ops.OPS, observe=metrics.observe),
                  Middleware(Guard, hosts=hosts, origins=origins, own_pages=UI_PREFIX + "/")]
    # The same two for the requests the memory route takes directly (Front).
    log = AccessLog(None, routes=routes, ops=ops.OPS,  # type: ignore[arg-type]
                    observe=metrics.observe)
    guard = Guard(None, hosts=hosts, origins=origins)  # type: ignore[arg-type]
    if origins:
        middleware.append(Middleware(
            CORSMiddleware, allow_origins=sorted(origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=list(CORS_HEADERS), expose_headers=["mcp-session-id"],
            allow_private_network=True))
    app = Front(memory=memory, guard=guard, log=log, cors=bool(origins),
                routes=routes, middleware=middleware, lifespan=lifespan,
                exception_handlers={HTTPException: _route_error, Exception: _internal_error})
    app.state.pool = pool
    app.state.metrics = metrics
    app.state.auth = expected is not None
    return app


def startup_line(app: ASGIApp, where: str) -> str:
    """What ``holomem serve`` says once it listens at ``where`` (``host:port``): the
    address, the data directory, whether a key is required, and the tenants' bounds."""
    state = getattr(app, "state", None)
    pool = getattr(state, "pool", None)
    if not isinstance(pool, TenantPool):
        return f"holomem serve listening on http://{where}"
    return (f"holomem serve listening on http://{where}; data {os.path.dirname(pool.root)}; "
            f"auth {'on' if getattr(state, 'auth', False) else 'off'}; tenants: "
            f"{pool.stores} of at most {pool.max_stores} stores exist "
            f"(--max-tenant-stores), at most {pool.max_open} open (--max-tenants)")


def shaped(data: dict[str, Any], cls: type[Any]) -> Any:
    """``data`` as the route's request Struct ``cls``. Errors: ``invalid_request``."""
    try:
        return msgspec.convert(data, cls, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidError(str(exc)) from exc


# -- the server ----------------------------------------------------------------------------
def run(app: ASGIApp, *, host: str = "127.0.0.1", port: int = 8080,
        log: bool = True) -> None:
    """Serve ``app`` with uvicorn until interrupted, request heads bounded.

    With ``log`` (the default, as ``holomem serve`` runs), the ``holomem.http`` logger
    prints to stderr — the line :func:`startup_line` once the server listens, then an
    access line per request, and the stop's two lines — unless the process gave that
    logger a handler already.

    SIGINT or SIGTERM stops the server: it stops accepting connections at once, gives
    the requests in flight up to :data:`STOP_GRACE` seconds to finish (the connection of
    one still running then is cut; an op it started still finishes, only its answer is
    lost), closes every store, and returns; a second SIGINT stops it at once, the
    stores left as a crash leaves them.
    """
    from uvicorn.server import HANDLED_SIGNALS

    if log:
        to_stderr()

    class Server(uvicorn.Server):
        #: the signal that asked for the stop
        stop_signal: int | None = None

        async def startup(self, sockets: list[Any] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                bound = [address(s.getsockname()) for srv in self.servers
                         for s in srv.sockets]
                LOGGER.info("%s", startup_line(app, ", ".join(bound)))

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if self.stop_signal is None:
                self.stop_signal = sig
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # As uvicorn's, without raising the signal again once the server has
            # stopped: a stop that was asked for, and done, exits with status 0.
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            before = {sig: signal.signal(sig, self.handle_exit) for sig in HANDLED_SIGNALS}
            try:
                yield
            finally:
                for sig, handler in before.items():
                    signal.signal(sig, handler)

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            begun = time.monotonic()
            for srv in self.servers:
                srv.close()  # no new connection from here on (uvicorn's first step too)
            why = "" if self.stop_signal is None else \
                f" on {signal.Signals(self.stop_signal).name}"
            LOGGER.info("holomem serve stopping%s: no new connections; finishing %d "
                        "request(s) in flight (at most %g s), then closing every store",
                        why, len(self.server_state.tasks), STOP_GRACE)
            # uvicorn waits for every request in flight, for ever; past the grace the
            # connections still open are cut, which their requests see as a client
            # gone: an op already running finishes, its answer is dropped.
            cut = asyncio.get_running_loop().call_later(STOP_GRACE, self.cut)
            try:
                await super().shutdown(sockets)
            finally:
                cut.cancel()
            if self.force_exit:
                LOGGER.info("holomem serve stopped at once (a second SIGINT): the open "
                            "stores were not closed; the next open of each recovers it")
            elif self.lifespan.should_exit:  # its shutdown failed (uvicorn said why)
                LOGGER.info("holomem serve stopped in %.1f s; closing the stores failed: "
                            "the next open of each recovers it", time.monotonic() - begun)
            else:
                LOGGER.info("holomem serve stopped in %.1f s; every store closed",
                            time.monotonic() - begun)

        def cut(self) -> None:
            for connection in list(self.server_state.connections):
                connection.transport.close()

    protocol = bounded_httptools()
    if protocol is not None:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                lifespan="on", ws="none", http=protocol)
    else:
        config = uvicorn.Config(app, host=host, port=port, log_level="warning",
                                lifespan="on", ws="none", http="h11",
                                h11_max_incomplete_event_size=MAX_HEAD_BYTES)
    server = Server(config)
    with contextlib.suppress(KeyboardInterrupt):  # as uvicorn.run: a second Ctrl-C
        server.run()
    if not server.started:
        sys.exit(3)  # uvicorn's STARTUP_FAILURE: e.g. the port is taken (it logged why)


def serve(data_dir: str, *, host: str = "127.0.0.1", port: int = 8080,
          api_key: str | None = None, config: MemoryConfig | None = None,
          key: bytes | None = None, max_tenants: int = 64,
          allowed_hosts: Iterable[str] = (), allowed_origins: Iterable[str] = (),
          max_tenant_stores: int = MAX_TENANT_STORES, journal: str | None = None) -> None:
    """Run the server until interrupted (SIGINT/SIGTERM close every store cleanly).

    Errors (before anything listens): ``invalid_request``, as :func:`create_app`.
    """
    app = create_app(data_dir, api_key=api_key, config=config, key=key,
                     max_tenants=max_tenants, host=host, port=port,
                     allowed_hosts=allowed_hosts, allowed_origins=allowed_origins,
                     max_tenant_stores=max_tenant_stores, journal=journal)
    run(app, host=host, port=port)
