"""Waiting on an event loop for a store's writes to be durable: :class:`DurableWaits`.

Owns: the coroutines that wait for a revision to be durable (after a commit made in an
``Engine.deferring`` block), and the one worker-thread wait per group commit they share.
Imports nothing of holomem but the engine's ``wait_durable`` protocol.

How: the first waiter starts a wait in a worker thread for the newest revision any
coroutine waits for (the journal then writes and syncs every pending transaction as one
group). Waiters that come while it runs queue; when it ends, those it covered are woken
together on the loop (one wake-up of the loop per group, not one per request) and, if any
are left, the next wait starts for all of them. A failed sync fails every waiter it
covered with the journal's error. So the writes of concurrent requests share one fsync
and one thread hop, wherever their commits ran.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Protocol


class Durable(Protocol):
    """What :class:`DurableWaits` needs of a store (``Engine`` has both)."""

    @property
    def durable_revision(self) -> int: ...

    def wait_durable(self, revision: int) -> None: ...


class DurableWaits:
    """The waits of one event loop for one store's revisions to be durable.

    Use from that loop only (its futures are the loop's); ``executor`` runs the group
    waits (one at a time).
    """

    def __init__(self, store: Durable, executor: concurrent.futures.Executor,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.executor = executor
        self.loop = loop
        self._waiting: list[tuple[int, asyncio.Future[None]]] = []
        self._running = False

    async def wait(self, revision: int) -> None:
        """Return once ``revision`` is durable. Errors: the journal's (``io.fsync``,
        ``io.failed``). Cancelled: the write stays as it is (it is in the journal and
        becomes durable with its group); only this wait ends."""
        if revision <= self.store.durable_revision:
            return
        done: asyncio.Future[None] = self.loop.create_future()
        self._waiting.append((revision, done))
        if not self._running:
            self._start()
        await done

    def _start(self) -> None:
        self._running = True
        target = max(revision for revision, _ in self._waiting)
        work = self.executor.submit(self.store.wait_durable, target)
        work.add_done_callback(
            lambda w: self.loop.call_soon_threadsafe(self._ended, target, w))

    def _ended(self, target: int, work: concurrent.futures.Future[None]) -> None:
        self._running = False
        error = work.exception()
        durable = self.store.durable_revision
        left = []
        for revision, done in self._waiting:
            if done.done():  # its waiter was cancelled
                continue
            if revision <= durable:
                done.set_result(None)
            elif error is not None and revision <= target:
                done.set_exception(error)
            else:
                left.append((revision, done))
        self._waiting = left
        if left:
            self._start()
