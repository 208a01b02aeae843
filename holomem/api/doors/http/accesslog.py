"""What the HTTP server tells its operator: the line it prints when it listens, and one
access-log line per request (and the same request's figures to the metrics).

Owns: the ``holomem.http`` logger, the ASGI middleware that writes the access log
and hands each request's route, op, status and duration to the server's metrics
(:class:`AccessLog`; :meth:`~.metrics.Metrics.observe`), and the stderr handler
``holomem serve`` installs (:func:`to_stderr`). An access line names the method, the
route's template (never the path a client sent: ids and ops stay out, except an op of
the contract), the op, the tenant (only a valid tenant id), the status and the
duration in milliseconds — never a body, a query string or any other header's value.
Imports starlette's routing and the tenant id rule.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from holomem.api.doors.http.tenants import requested_tenant, valid_tenant

LOGGER = logging.getLogger("holomem.http")
_CONVERTER = re.compile(r"\{(\w+):\w+\}")
#: Told of each request once it ends: method, route template, op, status, seconds.
Observer = Callable[[str, str, str | None, int | None, float], None]


def to_stderr(logger: logging.Logger = LOGGER) -> None:
    """Print ``logger``'s INFO lines to stderr, unless the process configured a handler
    for it already (an application embedding the server keeps its own)."""
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # printed once, not again by a root handler


def address(sockname: Any) -> str:
    """``host:port`` of a bound socket's name (IPv6 in brackets)."""
    if isinstance(sockname, tuple) and len(sockname) >= 2:
        host, port = sockname[0], sockname[1]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
    return str(sockname)  # a Unix socket's path


class AccessLog:
    """ASGI middleware: one INFO line on ``holomem.http`` per HTTP request, once it ends.

    The status is the one sent; a request that failed before answering is logged as
    500 (what the client receives), and one whose client left before any answer as
    ``-``. The line's fields are also on the record (``method``, ``route``, ``op``,
    ``tenant``, ``status``, ``duration_ms``) for structured handlers. ``observe``, when
    given, hears of every request (the metrics), whether the line is logged or not.
    """

    def __init__(self, app: ASGIApp, *, routes: Sequence[BaseRoute], ops: Collection[str],
                 logger: logging.Logger = LOGGER, observe: Observer | None = None) -> None:
        self.app = app
        self.routes = routes
        self.ops = ops
        self.logger = logger
        self.observe = observe

    def wanted(self) -> bool:
        """Whether a request's end is heard by anyone (the log at INFO, or the metrics)."""
        return self.observe is not None or self.logger.isEnabledFor(logging.INFO)

    def where(self, scope: Scope) -> tuple[str, str | None]:
        """The route template a request matched (``-``: none) and its contract op."""
        partial: tuple[str, str | None] | None = None
        for route in self.routes:
            match, child = route.matches(scope)
            if match == Match.NONE:
                continue
            op = child.get("path_params", {}).get("op")
            found = (_CONVERTER.sub(r"{\1}", getattr(route, "path", "-")),
                     None if op is None else op if op in self.ops else "?")
            if match == Match.FULL:
                return found
            partial = partial or found  # the path matched, the method did not (405)
        return partial or ("-", None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.wanted():
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status: int | None = None
        # Before the app runs: a Mount (the inspector at /ui) moves the scope's path
        # into its root_path while it answers, after which no route matches it.
        where = self.where(scope)

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            if status is None:
                status = 500  # the server's error handler answers it
            raise
        finally:
            self.log(scope, status, (time.perf_counter() - start) * 1000, where)

    def log(self, scope: Scope, status: int | None, ms: float,
            where: tuple[str, str | None] | None = None) -> None:
        """Write the request's line and tell the observer; ``where``: its route template
        and op, when the caller knows them (else :meth:`where` finds them)."""
        route, op = self.where(scope) if where is None else where
        if self.observe is not None:
            self.observe(scope["method"], route, op, status, ms / 1000)
        if not self.logger.isEnabledFor(logging.INFO):
            return
        given = requested_tenant(scope["headers"])
        tenant = given if valid_tenant(given) else "(invalid)"
        shown = "-" if status is None else str(status)
        fields = {"method": scope["method"], "route": route, "op": op, "tenant": tenant,
                  "status": status, "duration_ms": round(ms, 3)}
        self.logger.info("%s %s%s tenant=%s status=%s ms=%.1f", scope["method"], route,
                         f" op={op}" if op else "", tenant, shown, ms, extra=fields)
