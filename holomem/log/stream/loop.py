"""The asyncio side of a stream journal: one event-loop thread and one NATS connection.

Owns: :class:`Connection` -- a daemon thread running an event loop that owns the
``nats-py`` client, and :meth:`Connection.call`, which runs a coroutine there from a
synchronous caller with a bounded wait. Every wait is bounded: a server that does not
answer turns into ``unavailable`` naming what was tried, never a hang. Imports the
standard library, ``nats`` and :mod:`holomem.errors`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

import nats
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext

from holomem.errors import HolomemError, UnavailableError

T = TypeVar("T")
log = logging.getLogger("holomem")
#: Seconds between reconnect attempts after a server went away.
RECONNECT_WAIT = 0.25
CONNECT_TIMEOUT = 2.0
#: Seconds one JetStream API request may take.
API_TIMEOUT = 4.0


class Connection:
    """A NATS connection served by its own event-loop thread. Use :meth:`open`."""

    def __init__(self, servers: tuple[str, ...], timeout: float) -> None:
        self.servers = servers
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name="holomem-nats", daemon=True)
        self._thread.start()
        self.nc: Client | None = None
        self._js: JetStreamContext | None = None
        self._closed = False

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    @classmethod
    def open(cls, servers: tuple[str, ...], timeout: float) -> Connection:
        """Connect to the first server that answers. Errors: ``unavailable``."""
        conn = cls(servers, timeout)
        try:
            conn.call(conn._connect(), timeout + CONNECT_TIMEOUT * len(servers),
                      "connecting")
        except BaseException:
            conn.close()
            raise
        return conn

    async def _connect(self) -> None:
        async def quiet(exc: Exception) -> None:
            log.debug("nats: %s", exc)

        self.nc = await nats.connect(
            servers=list(self.servers), connect_timeout=CONNECT_TIMEOUT,
            allow_reconnect=True, max_reconnect_attempts=-1,
            reconnect_time_wait=RECONNECT_WAIT, error_cb=quiet, name="holomem")
        # One API request waits a few seconds at most; callers retry within their own
        # bound (a leader election takes a few seconds).
        self._js = self.nc.jetstream(timeout=max(1.0, min(API_TIMEOUT, self.timeout / 3)))

    @property
    def js(self) -> JetStreamContext:
        assert self._js is not None, "connect first"
        return self._js

    def call(self, coro: Coroutine[Any, Any, T], timeout: float, what: str) -> T:
        """Run ``coro`` on the loop thread and return its result within ``timeout``
        seconds. Errors: ``unavailable`` (timeout, or a NATS error not mapped by the
        coroutine), any :class:`HolomemError` the coroutine raises."""
        if self._closed:
            coro.close()
            raise UnavailableError(f"{what}: the connection to {self.url} is closed")
        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(coro, timeout), self.loop)
        try:
            return fut.result(timeout + 1.0)
        except HolomemError:
            raise
        except nats.errors.TimeoutError:
            raise UnavailableError(f"{what}: a request to {self.url} timed out") from None
        except (TimeoutError, concurrent.futures.TimeoutError):
            fut.cancel()
            raise UnavailableError(
                f"{what}: no answer from {self.url} within {timeout:g} s") from None
        except Exception as exc:
            raise UnavailableError(f"{what} at {self.url} failed: {exc!r}") from exc

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start ``coro`` on the loop thread; the caller bounds its wait."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    @property
    def url(self) -> str:
        return ",".join(self.servers)

    @property
    def max_payload(self) -> int:
        """The largest message the server takes (1 MiB until connected)."""
        nc = self.nc
        return nc.max_payload if nc is not None else 1 << 20

    def close(self) -> None:
        """Drain nothing: close the connection (bounded) and stop the thread."""
        if self._closed:
            return
        self._closed = True
        if self.nc is not None:
            nc = self.nc
            fut = asyncio.run_coroutine_threadsafe(nc.close(), self.loop)
            try:
                fut.result(2.0)
            except Exception:  # closing: nothing left to tell anyone
                fut.cancel()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self.loop.close()
