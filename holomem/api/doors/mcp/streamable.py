"""MCP over streamable HTTP: ``holomem serve``'s ``/mcp``, one writer for every MCP client.

Owns: :class:`McpEndpoint`, the ASGI app :mod:`holomem.api.doors.http.server` routes
``/mcp`` to (the official
SDK's ``StreamableHTTPSessionManager`` behind the server's API key), and where each
tool call goes: the tenant and the namespace its HTTP request names
(:class:`TenantTools`). Imports the MCP door (its tools and server), the tenant pool,
the scope and the contract; starlette and the ``mcp`` SDK (the ``serve`` extra).

What a request names, in its headers (every request of a session may name its own):

- ``X-Tenant-ID``: the tenant, as on every route of the server (default ``default``):
  an isolated store under ``DATA/tenants/<id>``. Only a write creates a tenant's store
  (``remember``, ``forget`` that is no dry run), and only one that succeeds (it is tried
  on a throwaway empty store first); a read of a tenant with none answers
  as an empty store and creates nothing, as the contract's routes do.
- ``X-Holomem-Namespace``: a namespace of the session's own, a JSON array of strings
  (``["users", "u-42"]``). Every call is then confined to it exactly as ``holomem mcp
  --namespace`` confines the stdio server (:class:`~.scoping.Scope`): a tool's
  ``namespace`` is taken under it, a fact outside answers as one that does not exist.
  Without it a tool's namespace is absolute.

Everything else the server's routes get applies here too, before the SDK sees a
request: the Host and Origin checks and the bound on request heads (the server's
middleware), the API key (``Authorization: Bearer`` or ``X-API-Key``; 401 with the
server's error body), the body bound (the server's ``max_body``), and at most
``max_batch`` facts in one ``remember`` (messages in one ``remember_conversation``:
the op table's ``batch``). Sessions are the SDK's (``Mcp-Session-Id``);
answers are single JSON bodies (no SSE stream per call: the tools send no progress).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from holomem.errors import missing_extra

try:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from starlette.datastructures import Headers
    from starlette.requests import Request
    from starlette.types import Message, Receive, Send
    from starlette.types import Scope as AsgiScope
except ImportError as _missing:  # the serve extra is not installed
    raise missing_extra(_missing, "holomem.api.doors.mcp.streamable", "serve") from _missing

from holomem.api.doors import jsontext
from holomem.api.doors.http.tenants import DEFAULT_TENANT, TenantPool, requested_tenant
from holomem.api.doors.http.webguard import error_response, read_body
from holomem.api.doors.mcp.server import build_server
from holomem.api.doors.mcp.tools import ToolSpec
from holomem.api.doors.scoping import Scope
from holomem.api.memory import ops
from holomem.errors import InvalidError, LimitError

NAMESPACE_HEADER = "x-holomem-namespace"
#: The most characters an X-Holomem-Namespace value may hold (8 strings of ids).
MAX_NAMESPACE_HEADER = 8 * 1024


def header_scope(value: str | None) -> Scope:
    """The namespace an ``X-Holomem-Namespace`` value names (None: the whole store).

    Errors: ``invalid_request`` (not a JSON array of id-like strings), ``limit``.
    """
    if value is None:
        return Scope()
    if len(value) > MAX_NAMESPACE_HEADER:
        raise LimitError(f"X-Holomem-Namespace is over {MAX_NAMESPACE_HEADER} characters")
    try:
        parts = jsontext.loads(value)
    except ValueError as exc:  # (nested too deeply too)
        raise InvalidError('X-Holomem-Namespace must be a JSON array of strings, e.g. '
                           '["users", "u-42"]') from exc
    if not isinstance(parts, list):
        raise InvalidError('X-Holomem-Namespace must be a JSON array of strings, e.g. '
                           '["users", "u-42"]')
    return Scope(parts)


class TenantTools:
    """Where a tool call of ``/mcp`` goes: the tenant and namespace its headers name.

    Called in a worker thread for each call (the :data:`~.mcp.Target` of the server).
    """

    def __init__(self, pool: TenantPool, *, max_batch: int) -> None:
        self.pool = pool
        self.max_batch = max_batch

    def __call__(self, spec: ToolSpec, request: Any, headers: Mapping[str, str] | None
                 ) -> dict[str, Any]:
        """Errors: those of the contract and the scope; ``invalid_request`` (a bad
        header), ``limit`` (a batch past ``max_batch``; a new tenant past the server's
        bound), ``locked``, ``unavailable`` (shutting down)."""
        headers = headers or {}
        name = requested_tenant(headers.raw) if isinstance(headers, Headers) else \
            DEFAULT_TENANT
        scope = header_scope(headers.get(NAMESPACE_HEADER))
        batch = ops.batch_size(spec.op, request)
        if batch is not None and batch[1] > self.max_batch:
            raise LimitError(f"at most {self.max_batch} {batch[0]} per request")
        writes = isinstance(request, Mapping) and spec.changes(request)
        return self.pool.call(name, lambda t: scope.call(t.memory.memory, spec.op, request),
                              writes=writes)


def replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` of a request whose body was read already: ``body``, then what
    ``receive`` gives (a disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


class McpEndpoint:
    """The ASGI app of ``/mcp``: the API key, a POST's body read as every route reads
    one (:func:`read_body`: JSON only, 415; bounded, 413; the server's error body), then
    the SDK's session manager.

    ``authorised(request)`` is the server's key check. :meth:`run` must be entered for the
    app's lifetime (the server's lifespan), before any request.
    """

    def __init__(self, pool: TenantPool, *, authorised: Callable[[Request], bool],
                 max_body: int, max_batch: int) -> None:
        self.authorised = authorised
        self.max_body = max_body
        server = build_server(TenantTools(pool, max_batch=max_batch))
        self.manager = StreamableHTTPSessionManager(server, json_response=True,
                                                    max_request_body_size=max_body)

    @contextlib.asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """The sessions' lifetime: every one ends when this does."""
        async with self.manager.run():
            yield

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if not self.authorised(Request(scope)):
            await error_response(401, "unauthorized", "a valid API key is required")(
                scope, receive, send)
            return
        if scope["method"] == "POST":
            body = await read_body(Request(scope, receive), self.max_body)
            if not isinstance(body, bytes):
                await body(scope, receive, send)
                return
            receive = replayed(body, receive)
        await self.manager.handle_request(scope, receive, send)
