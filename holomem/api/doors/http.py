"""The HTTP door: ``holomem serve`` (Starlette on uvicorn), tenants, auth, limits.

Owns: the routes, authentication, and serving. The tenant pool is in
:mod:`.tenants`, the checks that keep web pages and oversized requests out in
:mod:`.webguard`. Every memory route is ``Memory.call`` (docs/contract.md §5), so HTTP speaks
exactly the contract the library does. Imports the memory API, the engine's
types, starlette and uvicorn (the ``serve`` extra).

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

import concurrent.futures
import contextlib
import hmac
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from holomem.api import validate
from holomem.api.aio import offload
from holomem.api.doors import webguard
from holomem.api.doors.tenants import DEFAULT_TENANT, Tenant, TenantPool
from holomem.api.doors.webguard import (
    MAX_HEAD_BYTES,
    Guard,
    Hosts,
    bounded_httptools,
    decode_body,
    error_response,
    read_body,
)
from holomem.api.engine import DocumentInput
from holomem.api.types import MemoryConfig
from holomem.errors import HolomemError, InvalidError, LimitError, NotFoundError

MAX_BODY = 1 << 20
MAX_BATCH = 1000
#: Worker threads for blocking calls (Starlette's own thread pool has 40).
WORKERS = 40


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
    hosts = Hosts(host, port, allowed_hosts)
    origins = webguard.origins(allowed_origins)
    # The worker threads every blocking call runs in (as many as requests in flight
    # that can usefully share one group commit).
    workers = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS,
                                                    thread_name_prefix="holomem-http")
    pool = TenantPool(data_dir, key=key, config=config, max_open=max_tenants,
                      executor=workers)
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
                          work: Callable[[Tenant, dict[str, Any]], Any],
                          body: bool = True) -> Response:
        """Run ``work`` on the request's tenant: decoding the body, opening the store
        (a replay, syncs) and the work itself all happen in worker threads, and a
        cancelled request (a client gone) never leaves work half done or its tenant
        marked busy: what started runs to its end first (:func:`offload`)."""
        if not authorised(request):
            return error_response(401, "unauthorized", "a valid API key is required")
        raw = b""
        if body:
            read = await read_body(request, max_body)
            if isinstance(read, JSONResponse):
                return read
            raw = read
        name = request.headers.get("x-tenant-id", DEFAULT_TENANT)

        def prepare() -> tuple[Tenant, dict[str, Any]]:
            data = decode_body(raw)  # first: a bad body opens no store
            return pool.acquire(name), data

        def run() -> Any:
            tenant, data = prepare()
            try:
                return work(tenant, data)
            finally:
                pool.release(tenant)

        try:
            return _json(await offload(run, workers))
        except HolomemError as exc:
            return error_response(exc.status, exc.code, exc.message)

    async def memory_op(request: Request) -> Response:
        """An op of the contract, through the tenant's AsyncMemory."""
        op = request.path_params["op"]
        if not authorised(request):
            return error_response(401, "unauthorized", "a valid API key is required")
        read = await read_body(request, max_body)
        if isinstance(read, JSONResponse):
            return read
        name = request.headers.get("x-tenant-id", DEFAULT_TENANT)

        def prepare() -> tuple[Tenant, dict[str, Any]]:
            data = decode_body(read)
            facts = data.get("facts") if op == "remember" else None
            if isinstance(facts, list) and len(facts) > max_batch:
                raise LimitError(f"at most {max_batch} facts per request")
            return pool.acquire(name), data

        try:
            tenant, data = await offload(prepare, workers,
                                         discard=lambda got: pool.release(got[0]))
            try:
                return _json(await tenant.memory.call(op, data))
            finally:
                # The call has ended (AsyncMemory waits for it even when cancelled).
                pool.release(tenant, evict=False)
        except HolomemError as exc:
            return error_response(exc.status, exc.code, exc.message)

    async def add_documents(request: Request) -> Response:
        def work(t: Tenant, data: dict[str, Any]) -> Any:
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

            def delete(t: Tenant, _: dict[str, Any]) -> Any:
                return {"deleted": t.store.delete_document(doc_id, purge=purge)}

            return await with_tenant(request, delete, body=False)

        def get(t: Tenant, _: dict[str, Any]) -> Any:
            doc = t.store.get_document(doc_id)
            if doc is None:
                raise NotFoundError(f"no document {doc_id!r}")
            return {"document": msgspec.to_builtins(doc)}

        return await with_tenant(request, get, body=False)

    async def search(request: Request) -> Response:
        def work(t: Tenant, data: dict[str, Any]) -> Any:
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
        workers.shutdown(wait=False)

    middleware = [Middleware(Guard, hosts=hosts, origins=origins)]
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
def run(app: ASGIApp, *, host: str = "127.0.0.1", port: int = 8080) -> None:
    """Serve ``app`` with uvicorn until interrupted, request heads bounded."""
    import uvicorn

    protocol = bounded_httptools()
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
