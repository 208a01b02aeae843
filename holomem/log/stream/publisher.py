"""Publishing transactions to a stream: in order, in bursts, idempotent, fenced.

Owns: the loop-side task that sends each transaction's message, in bursts (one in
flight at a time: what is queued while a burst travels goes out in the next), with
its message id (``<store id>:<generation>:<seq>``, so a resend after a lost
acknowledgement is recognised by the server's duplicate window) and the stream
sequence it must follow (``Nats-Expected-Last-Sequence``: the stream refuses it if
anyone else appended); resends from the first unacknowledged message after a lost
connection, a leader change or a silence; and acknowledges a transaction only when
the stream did *and* the writer's lease is still held. Imports the standard library,
``nats`` and the stream modules.

Failure is final: after ``locked`` (another writer appended, or the lease was lost) or
``unavailable`` (no quorum acknowledged within the timeout) nothing more is
acknowledged and the journal must be reopened; a transaction that was sent but not
acknowledged may or may not be in the stream (it is wholly there or wholly absent).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import Header, PubAck

from holomem.errors import HolomemError, StoreLockedError, UnavailableError
from holomem.log.stream.lease import Lease

#: The most messages sent in one burst.
WINDOW = 256
#: JetStream's error code for a failed expected-last-sequence check.
WRONG_LAST_SEQUENCE = 10071
#: Pause before resending after a transient failure.
RETRY_PAUSE = 0.1
#: Seconds without any acknowledgement before the unacknowledged messages are sent
#: again. A publish that reaches a stream with no leader (mid-election) gets no answer
#: at all; without this it would hold the whole ``timeout`` waiting for one.
ATTEMPT = 2.0


@dataclass(eq=False)
class Item:
    seq: int
    data: bytes
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)


class Publisher:
    """Sends items in sequence order; create and use on the event loop."""

    def __init__(self, js: JetStreamContext, *, stream: str, subject: str, msg_id: str,
                 lease: Lease, timeout: float, where: str) -> None:
        self.js = js
        self.stream = stream
        self.subject = subject
        self.msg_id = msg_id
        self.lease = lease
        self.timeout = timeout
        self.where = where
        self.failed: HolomemError | None = None
        self._queue: asyncio.Queue[Item] = asyncio.Queue()
        self._inbox: str | None = None
        self._waiting: dict[str, asyncio.Future[PubAck]] = {}
        self._count = 0
        self._task = asyncio.get_running_loop().create_task(self._run())
        #: resends after a transient failure (for tests and stats)
        self.resends = 0

    def put(self, item: Item) -> None:
        """Queue ``item`` (on the loop: ``loop.call_soon_threadsafe(p.put, item)``)."""
        if self.failed is not None:
            item.done.set_exception(self.failed)
        else:
            self._queue.put_nowait(item)

    async def _run(self) -> None:
        while True:
            pending = [await self._queue.get()]
            while len(pending) < WINDOW and not self._queue.empty():
                pending.append(self._queue.get_nowait())
            if self.failed is None:
                try:
                    await self._send(pending)
                    continue
                except HolomemError as exc:
                    self.failed = exc
                except Exception as exc:  # a client bug must not leave callers waiting
                    self.failed = UnavailableError(f"{self.where}: publishing failed: {exc!r}")
            for item in pending:
                if not item.done.done():
                    item.done.set_exception(self.failed)
            while not self._queue.empty():
                self._queue.get_nowait().done.set_exception(self.failed)

    def _fenced(self, why: str) -> StoreLockedError:
        return StoreLockedError(f"{self.where}: this writer can no longer acknowledge: {why}")

    async def _send(self, pending: list[Item]) -> None:
        """Send ``pending`` in one burst and acknowledge its items in order; gather what
        is queued meanwhile and send it as the next burst once this one is acknowledged;
        return when none is left unacknowledged. After a transient failure, or
        ``ATTEMPT`` seconds without an acknowledgement, resend from the first
        unacknowledged one.

        One burst in flight at a time is group commit for the stream: the writers that
        commit while a burst travels go out together in the next one, and the servers
        take a burst's messages together, in fewer replication rounds than one by one
        (docs/scale-out.md §8.2 has the figures). A lone writer's message still goes
        out at once."""
        i = 0
        deadline = time.monotonic() + self.timeout
        attempt = min(self.timeout, ATTEMPT)
        while i < len(pending):
            if not self.lease.held():
                raise self._fenced(self.lease.lost or "the lease was lost")
            start = i  # futures[k] answers for pending[start + k]
            futures: list[asyncio.Future[PubAck]] = []
            failed = False
            try:
                await self._replies()
                for item in pending[i:i + WINDOW]:
                    futures.append(await self._publish(item))
            except (TimeoutError, nats.errors.Error):
                failed = True  # resend what was not sent, below
            progressed = False
            until = min(deadline, time.monotonic() + attempt)  # moves on with each ack
            while i - start < len(futures):
                item, fut = pending[i], futures[i - start]
                try:
                    await self._gather(fut, pending, start + len(futures) + WINDOW, until)
                    ack = await asyncio.wait_for(
                        asyncio.shield(fut), max(0.01, until - time.monotonic()))
                except nats.js.errors.APIError as exc:
                    if exc.err_code == WRONG_LAST_SEQUENCE:
                        if not await self._confirm(item, f"the stream did not end at sequence "
                                                   f"{item.seq - 1} (another writer appended)"):
                            failed = True
                            break  # not readable just now: resend, and look again
                        # An earlier send stored it and its acknowledgement was lost (read
                        # back just now: not to be read again below).
                        ack = PubAck(stream=self.stream, seq=item.seq, duplicate=False)
                    elif exc.code is not None and exc.code >= 500:
                        failed = True
                        break  # no leader or no quorum just now: resend
                    else:
                        raise UnavailableError(f"{self.where}: the stream refused transaction "
                                               f"{item.seq}: {exc.description}") from exc
                except (TimeoutError, nats.errors.Error):
                    failed = True
                    break  # lost connection, no responders, or no answer: resend
                if ack.seq != item.seq:
                    raise self._fenced(f"transaction {item.seq} was stored as stream message "
                                       f"{ack.seq}")
                # A duplicate's id matched a message some send stored: this one's, or an
                # earlier writer's unacknowledged transaction of the same number.
                if ack.duplicate and not await self._confirm(
                        item, f"stream message {item.seq} is another writer's transaction "
                              "of that number"):
                    failed = True
                    break  # not readable just now: resend, and look again
                if not self.lease.held():
                    raise self._fenced(self.lease.lost or "the lease was lost")
                item.done.set_result(None)
                i += 1
                progressed = True
                until = min(deadline, time.monotonic() + attempt)
            for fut in futures:
                if fut.done():
                    if not fut.cancelled():
                        fut.exception()  # seen: the resend below answers for it
                else:
                    fut.cancel()
            self._waiting.clear()
            if progressed:
                deadline = time.monotonic() + self.timeout
            if failed:
                if time.monotonic() >= deadline:
                    raise UnavailableError(
                        f"{self.where}: no quorum acknowledged transaction {pending[i].seq} "
                        f"within {self.timeout:g} s")
                self.resends += 1
                await asyncio.sleep(RETRY_PAUSE)
            del pending[:i]  # acknowledged: forget them (the indexes start over)
            i = 0

    async def _gather(self, fut: asyncio.Future[PubAck], pending: list[Item], room: int,
                      until: float) -> None:
        """Until ``fut`` is answered (or ``until``), move what is queued meanwhile into
        ``pending`` (the next burst), while it holds fewer than ``room`` items."""
        while not fut.done() and time.monotonic() < until:
            if len(pending) >= room:
                await asyncio.wait({fut}, timeout=max(0.01, until - time.monotonic()))
                return
            getter = asyncio.ensure_future(self._queue.get())
            both: set[asyncio.Future[Any]] = {fut, getter}
            await asyncio.wait(both, timeout=max(0.01, until - time.monotonic()),
                               return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await getter
            if getter.done() and not getter.cancelled():
                pending.append(getter.result())

    async def _replies(self) -> None:
        """Subscribe once to the inbox the stream answers publishes on. (Our own, not
        ``publish_async``'s: that one leaves a publish waiting forever when the stream
        answers with an error.)"""
        if self._inbox is not None:
            return
        nc = self.js._nc  # the connection the context was made from
        prefix = nc.new_inbox()

        async def answered(msg: Msg) -> None:
            fut = self._waiting.pop(msg.subject, None)
            if fut is None or fut.done():
                return
            if msg.headers and msg.headers.get("Status") == "503":
                fut.set_exception(nats.js.errors.NoStreamResponseError())
                return
            try:
                resp = json.loads(msg.data)
            except ValueError as exc:
                fut.set_exception(nats.errors.Error(f"unreadable answer: {exc}"))
                return
            if "error" in resp:
                e = resp["error"]
                fut.set_exception(nats.js.errors.APIError(
                    code=e.get("code"), description=e.get("description"),
                    err_code=e.get("err_code")))
            else:
                fut.set_result(PubAck(stream=resp.get("stream", ""), seq=resp.get("seq", 0),
                                      duplicate=resp.get("duplicate")))

        await nc.subscribe(prefix + ".*", cb=answered)
        self._inbox = prefix

    async def _publish(self, item: Item) -> asyncio.Future[PubAck]:
        assert self._inbox is not None
        self._count += 1
        reply = f"{self._inbox}.{self._count}"
        fut: asyncio.Future[PubAck] = asyncio.get_running_loop().create_future()
        self._waiting[reply] = fut
        await self.js._nc.publish(self.subject, item.data, reply=reply, headers={
            Header.MSG_ID.value: f"{self.msg_id}:{item.seq}",
            Header.EXPECTED_LAST_SEQUENCE.value: str(item.seq - 1)})
        return fut

    async def _confirm(self, item: Item, otherwise: str) -> bool:
        """True when stream message ``item.seq`` is this very transaction; False when the
        stream cannot say just now (the caller resends and asks again, within its
        deadline). Errors: ``locked`` (``otherwise``) when it is another writer's."""
        stored = await self._stored_already(item)
        if stored is False:
            raise self._fenced(otherwise)
        return stored is True

    async def _stored_already(self, item: Item) -> bool | None:
        """Whether stream message ``item.seq`` is this very transaction (the stream checks
        the expected sequence before its duplicate window, so a resend of a stored
        message is refused rather than recognised); None when the stream cannot say
        just now (no answer, or no leader mid-election): the caller resends and asks
        again, within its deadline."""
        try:
            msg = await asyncio.wait_for(self.js.get_msg(self.stream, item.seq),
                                         min(self.timeout, ATTEMPT))
        except nats.js.errors.NotFoundError:
            return False
        except nats.js.errors.APIError as exc:
            if exc.code is not None and exc.code >= 500:
                return None
            return False
        except (TimeoutError, nats.errors.Error):
            return None
        headers = msg.headers or {}
        return headers.get(Header.MSG_ID.value) == f"{self.msg_id}:{item.seq}" and \
            msg.data == item.data

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
