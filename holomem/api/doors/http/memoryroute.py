"""The HTTP server's busiest route, ``POST /api/v1/memory/{op}``, as a plain ASGI app.

Owns: :class:`MemoryRoute` — the key check, the body (JSON, bounded), the op run in a
worker thread and its answer; which ops only read (:data:`READ_OPS`) — and
:class:`Front`, the server's ASGI entry, which hands that route's requests to it
directly, past Starlette's router, request objects and middleware stack, and does
itself what those would do for them: the guard (the head's bounds, Host, Origin:
:class:`~.webguard.Guard`), the access line and the request's metrics
(:class:`~.accesslog.AccessLog`), and the
500 answer to an internal failure. Every other request, and one that carries an
``Origin`` when browser origins are allowed (its CORS headers are the middleware's to
add), goes through the Starlette app, which routes ``/api/v1/memory/{op}`` to the same
:class:`MemoryRoute`. Imports the contract, the tenant pool, the web guard, the access
log and starlette.

Why: an op over HTTP costs the server CPU on top of the op itself, and with a few
clients that CPU is what bounds durable writes; Starlette's layers (five middleware
calls, a ``Request`` and its header mapping, and the route matching the access log
had to do again) cost more than the op did. The answers are the same bytes.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import time
from collections.abc import Callable
from typing import Any

import msgspec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from holomem.api.doors.http import redirect
from holomem.api.doors.http.accesslog import AccessLog
from holomem.api.doors.http.tenants import Tenant, TenantPool, requested_tenant
from holomem.api.doors.http.webguard import Guard, error_response
from holomem.api.engine.deferral import WouldBlock
from holomem.api.memory import ops
from holomem.api.memory.aio import offload
from holomem.api.memory.aiowait import DurableWaits
from holomem.api.memory.contract import decode_body
from holomem.errors import HolomemError, LimitError, StoreLockedError

PREFIX = "/api/v1/memory/"
#: The route's template, as the access log names it.
TEMPLATE = PREFIX + "{op}"

#: The contract ops that only read: on a tenant with no store they are answered by an
#: empty one, and create nothing. The writes create the tenant's store (the op table
#: says which is which: :mod:`holomem.api.memory.ops`).
READ_OPS = ops.READS
WRITE_OPS = ops.WRITES

#: The largest remember body, and the most facts in it, run on the event loop itself
#: (:meth:`MemoryRoute.on_loop`): what the loop may spend on one request is bounded.
LOOP_BODY = 16 * 1024
LOOP_FACTS = 16

#: A key check: ``(X-API-Key, Authorization)`` header values -> may this request go on.
KeyCheck = Callable[[str, str], bool]


class MemoryRoute:
    """``POST /api/v1/memory/{op}``: ``Memory.call(op, body)`` on the request's tenant.

    The body's decoding, the tenant's store and the call run whole in one worker thread
    (one hop off the event loop per request); a cancelled request's call runs to its end
    (:func:`~holomem.api.memory.aio.offload`).
    """

    def __init__(self, pool: TenantPool, workers: concurrent.futures.Executor, *,
                 key_ok: KeyCheck, max_body: int, max_batch: int, own_url: str) -> None:
        self.pool = pool
        self.workers = workers
        self.key_ok = key_ok
        self.max_body = max_body
        self.max_batch = max_batch
        self.own_url = own_url  # a write for another server's tenant is sent there

    def decode(self, op: str, raw: bytes) -> dict[str, Any]:
        """The request body. Errors: ``invalid_request``, ``limit`` (too deep; a batch
        past ``max_batch``)."""
        data = decode_body(raw)
        batch = ops.batch_size(op, data)
        if batch is not None and batch[1] > self.max_batch:
            raise LimitError(f"at most {self.max_batch} {batch[0]} per request")
        return data

    def run(self, op: str, tenant: str, raw: bytes) -> Any:
        """The op, in a worker: decode, find the tenant's store, call. Errors: the
        contract's, ``limit`` (a batch past ``max_batch``), and the pool's."""
        data = self.decode(op, raw)
        # A read, or an op that is none, answers without creating a store; nor does a
        # write that is refused (tried first on an empty store, for a new tenant).
        writes = op in ops.OPS and op not in READ_OPS  # WRITE_OPS, or new
        return self.pool.call(tenant, lambda t: t.memory.memory.call(op, data),
                              writes=writes, evict=False)

    def small(self, op: str, raw: bytes) -> bool:
        """Whether the request may run on the event loop (:meth:`on_loop`): a remember
        whose body is at most :data:`LOOP_BODY` bytes."""
        return op == "remember" and len(raw) <= LOOP_BODY

    async def on_loop(self, t: Tenant, op: str, raw: bytes) -> Any:
        """A small remember on an open tenant, on the event loop, without a thread
        hop: the call runs here in a ``deferring`` block (its commit does not wait for
        the fsync, nor for a lock: a busy store sends it to a worker instead), then
        the answer waits, with every other request of its group commit, for its
        transaction to be durable (:class:`~holomem.api.memory.aiowait.DurableWaits`). A
        batch of more than :data:`LOOP_FACTS` facts, or a tenant with an embedder (a
        model takes time), goes to a worker. Errors: as :meth:`run`."""
        data = self.decode(op, raw)
        facts = data.get("facts")
        memory = t.memory.memory
        if memory.embedder is not None or (isinstance(facts, list)
                                           and len(facts) > LOOP_FACTS):
            return await offload(functools.partial(memory.call, op, data), self.workers)
        try:
            with t.store.deferring(blocking=False) as deferred:
                result = memory.call(op, data)
        except WouldBlock:  # nothing was written: the call runs again where it may wait
            return await offload(functools.partial(memory.call, op, data), self.workers)
        if t.durable is None:
            t.durable = DurableWaits(t.store, self.workers, asyncio.get_running_loop())
        await t.durable.wait(deferred.revision)
        return result

    async def call(self, op: str, tenant: str, raw: bytes) -> Any:
        """The op's result, on the loop (:meth:`on_loop`) or in one worker."""
        if self.small(op, raw):
            t = self.pool.try_acquire(tenant)
            if t is not None:
                try:
                    return await self.on_loop(t, op, raw)
                finally:
                    self.pool.release_nowait(t)
        return await offload(functools.partial(self.run, op, tenant, raw), self.workers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.answer(scope, receive, send)

    async def answer(self, scope: Scope, receive: Receive, send: Send) -> int | None:
        """Answer the request; return the status sent (None: the client left first)."""
        op = scope["path"][len(PREFIX):]
        key = auth = ctype = ""
        length = None
        for name, value in scope["headers"]:  # the first of each, as Starlette reads them
            if name == b"content-type":
                ctype = ctype or value.decode("latin-1")
            elif name == b"content-length":
                length = value if length is None else length
            elif name == b"authorization":
                auth = auth or value.decode("latin-1")
            elif name == b"x-api-key":
                key = key or value.decode("latin-1")
        if not self.key_ok(key, auth):
            return await _send(error_response(401, "unauthorized",
                                              "a valid API key is required"),
                               scope, receive, send)
        if ctype.split(";", 1)[0].strip().lower() != "application/json":
            # A browser sends text/plain, a form or no body cross-site without asking.
            return await _send(error_response(
                415, "invalid_request", "send the body with Content-Type: application/json"),
                scope, receive, send)
        if length is not None and length.isdigit() and int(length) > self.max_body:
            return await _send(self._too_big(), scope, receive, send)
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None  # http.disconnect: nobody to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return await _send(self._too_big(), scope, receive, send)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        try:
            result = await self.call(op, requested_tenant(scope["headers"]), raw)
        except StoreLockedError as exc:  # another server is the writer: send it there
            return await _send(redirect.locked(exc, Request(scope), self.own_url),
                               scope, receive, send)
        except HolomemError as exc:
            return await _send(error_response(exc.status, exc.code, exc.message),
                               scope, receive, send)
        body = msgspec.json.encode(result)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"%d" % len(body)),
                                (b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})
        return 200

    def _too_big(self) -> Any:
        return error_response(413, "limit", f"the request body is over {self.max_body} bytes")


async def _send(response: Any, scope: Scope, receive: Receive, send: Send) -> int:
    await response(scope, receive, send)
    status: int = response.status_code
    return status


class Front(Starlette):
    """The server's application: a Starlette app whose ``POST /api/v1/memory/{op}``
    requests go straight to their :class:`MemoryRoute` (see the module's docstring)."""

    def __init__(self, *, memory: MemoryRoute, guard: Guard, log: AccessLog,
                 cors: bool, **starlette: Any) -> None:
        super().__init__(**starlette)
        self.memory = memory
        self.guard = guard
        self.log = log
        self.cors = cors

    def direct(self, scope: Scope) -> bool:
        """Whether the request is the memory route's to answer without Starlette."""
        if scope["type"] != "http" or scope["method"] != "POST" or scope.get("root_path"):
            return False
        path: str = scope["path"]
        if not path.startswith(PREFIX) or len(path) == len(PREFIX) or "/" in path[len(PREFIX):]:
            return False  # not the route's ({op} is one segment): Starlette answers
        return not (self.cors and any(name == b"origin" for name, _ in scope["headers"]))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.direct(scope):
            await super().__call__(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None
        try:
            refused = self.guard.refusal(scope["headers"])
            if refused is not None:
                status = await _send(refused, scope, receive, send)
            else:
                status = await self.memory.answer(scope, receive, send)
        except Exception:
            # As Starlette's error middleware: the JSON 500, then the exception goes on
            # to the server, which logs it (the details never reach the client).
            if status is None:
                status = 500
                await error_response(500, "error", "internal server error")(
                    scope, receive, send)
            raise
        finally:
            if self.log.wanted():
                op = scope["path"][len(PREFIX):]
                self.log.log(scope, status, (time.perf_counter() - start) * 1000,
                             where=(TEMPLATE, op if op in self.log.ops else "?"))
