"""The HTTP door: ``holomem serve`` (Starlette on uvicorn), tenants, auth, limits.

Owns: routes, the tenant pool, authentication, request limits, and the mapping of
errors to HTTP statuses. Every memory route is ``Memory.call`` (SPEC §5), so HTTP
speaks exactly the contract the library does. Imports the API layer, starlette
and uvicorn (the ``serve`` extra).

Why Starlette and uvicorn: Starlette is the small, well-kept ASGI toolkit (routing,
requests, responses, lifespan) without a model layer we would not use — msgspec
already owns validation; uvicorn is the reference ASGI server. Handlers run the
blocking library calls in a thread pool, so concurrent requests reach the
journal's group commit together and share fsyncs; a response is sent only after
the journal acknowledged the write.

Routes (JSON in and out; errors are ``{"error": {"code", "message"}}``):

- ``POST /api/v1/memory/{op}`` — any op of the contract;
- ``POST /api/v1/documents`` — add one document, or ``{"documents": [...]}``;
- ``GET /api/v1/documents/{id}``; ``DELETE /api/v1/documents/{id}?purge=true``;
- ``POST /api/v1/documents/search`` — ``{"query", "k", "embedding", "ids"}``;
- ``GET /healthz``.

Tenants: ``X-Tenant-ID`` picks an isolated store under ``DATA/tenants/<id>`` (ids
are 1-64 characters of letters, digits, ``.``, ``_``, ``-``, starting with a
letter or digit: no path can escape). Without the header the tenant is
``default``. At most ``max_tenants`` stores are open; the least recently used idle
one is closed when another is needed.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import re
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from holomem.api.documents import DocumentInput, Store
from holomem.api.memory import Memory
from holomem.api.types import MemoryConfig
from holomem.errors import HolomemError, InvalidError, LimitError, NotFoundError

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_TENANT = "default"
MAX_BODY = 1 << 20
MAX_BATCH = 1000


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": code, "message": message}}, status_code=status)


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
        if not TENANT_RE.match(tenant) or ".." in tenant:
            raise InvalidError("X-Tenant-ID must be 1-64 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
        with self._mu:
            if self._closed:
                raise HolomemError("the server is shutting down")
            t = self._open.get(tenant)
            if t is None:
                os.makedirs(self.root, mode=0o700, exist_ok=True)
                store = Store.open(os.path.join(self.root, tenant), key=self.key, sync="batch")
                t = self._open[tenant] = _Tenant(store, Memory(store, self.config))
            self._open.move_to_end(tenant)
            t.users += 1
            self._evict()
            return t

    def release(self, t: _Tenant) -> None:
        with self._mu:
            t.users -= 1
            self._evict()

    def _evict(self) -> None:
        while len(self._open) > self.max_open:
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


async def _body(request: Request, limit: int) -> dict[str, Any] | JSONResponse:
    """The request's JSON object, or the error response to send instead."""
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
    raw = b"".join(chunks) or b"{}"
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        return _error(422, "invalid_request", f"the body is not JSON: {exc}")
    if not isinstance(data, dict):
        return _error(422, "invalid_request", "the body must be a JSON object")
    return data


def _json(value: Any) -> Response:
    return Response(msgspec.json.encode(value), media_type="application/json")


def create_app(data_dir: str, *, api_key: str | None = None,
               config: MemoryConfig | None = None, key: bytes | None = None,
               max_tenants: int = 64, max_body: int = MAX_BODY,
               max_batch: int = MAX_BATCH) -> Starlette:
    """The ASGI application serving the stores under ``data_dir``."""
    pool = TenantPool(data_dir, key=key, config=config or MemoryConfig(),
                      max_open=max_tenants)
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
        data: dict[str, Any] = {}
        if body:
            parsed = await _body(request, max_body)
            if isinstance(parsed, JSONResponse):
                return parsed
            data = parsed
        try:
            tenant = pool.acquire(request.headers.get("x-tenant-id", DEFAULT_TENANT))
        except InvalidError as exc:
            return _error(422, "invalid_request", exc.message)
        try:
            return _json(await run_in_threadpool(work, tenant, data))
        except HolomemError as exc:
            return _error(exc.status, exc.code, exc.message)
        finally:
            pool.release(tenant)

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

    async def get_document(request: Request) -> Response:
        doc_id = request.path_params["doc_id"]

        def work(t: _Tenant, _: dict[str, Any]) -> Any:
            doc = t.store.get_document(doc_id)
            if doc is None:
                raise NotFoundError(f"no document {doc_id!r}")
            return {"document": msgspec.to_builtins(doc)}

        return await with_tenant(request, work, body=False)

    async def delete_document(request: Request) -> Response:
        doc_id = request.path_params["doc_id"]
        purge = request.query_params.get("purge", "false").lower() in ("1", "true", "yes")

        def work(t: _Tenant, _: dict[str, Any]) -> Any:
            return {"deleted": t.store.delete_document(doc_id, purge=purge)}

        return await with_tenant(request, work, body=False)

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
        return _json({"status": "ok", "openTenants": len(pool)})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        pool.close()  # graceful shutdown: every store synced and closed

    app = Starlette(routes=[
        Route("/healthz", healthz, methods=["GET"]),
        Route("/api/v1/memory/{op}", memory_op, methods=["POST"]),
        Route("/api/v1/documents", add_documents, methods=["POST"]),
        Route("/api/v1/documents/search", search, methods=["POST"]),
        Route("/api/v1/documents/{doc_id:path}", get_document, methods=["GET"]),
        Route("/api/v1/documents/{doc_id:path}", delete_document, methods=["DELETE"]),
    ], lifespan=lifespan)
    app.state.pool = pool
    return app


def serve(data_dir: str, *, host: str = "127.0.0.1", port: int = 8080,
          api_key: str | None = None, config: MemoryConfig | None = None,
          key: bytes | None = None, max_tenants: int = 64) -> None:
    """Run the server until interrupted (SIGINT/SIGTERM close every store cleanly)."""
    import uvicorn

    app = create_app(data_dir, api_key=api_key, config=config, key=key,
                     max_tenants=max_tenants)
    uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
