"""Publishing transactions to a stream: in order, packed, pipelined, idempotent, fenced.

Owns: the loop-side task that packs the transactions queued for a generation into
stream messages (each message the consecutive transactions that were waiting when it
left, up to the server's message size: FORMAT.md §11) and keeps up to :data:`DEPTH`
of them in flight (the next leaves once 1/:data:`SHARE` of the transactions recently
outstanding at once are waiting; with none in flight, after :data:`GATHER` seconds at
most, and a lone writer's at once once the count of the last :data:`PEAK_MESSAGES`
messages has forgotten any burst of writers), and the
hand-over from the writers' threads, which wakes the loop only when it would send.
Each message carries its message id (``<store id>:<generation>:`` then its first
transaction's number, and ``-<last>`` when it holds several, so a resend
after a lost acknowledgement is recognised by the server's duplicate window) and the
stream sequence it must follow (``Nats-Expected-Last-Sequence``: the stream refuses it
if anyone else appended, and refuses each later message in flight after one that was
not stored). Answers are taken in order; after a lost connection, a leader change, a
refusal for want of a quorum or a silence, every message still in flight is resent
unchanged (same bytes, id and expected sequence). A transaction is acknowledged only
when the stream stored its whole message *and* the writer's lease is still held.
Imports the standard library, ``nats`` and the stream modules.

Failure is final: after ``locked`` (another writer appended, or the lease was lost) or
``unavailable`` (no quorum acknowledged within the timeout) nothing more is
acknowledged and the journal must be reopened; a message that was sent but not
acknowledged may or may not be in the stream, and with it all its transactions (a
message is stored whole or not at all).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field

import nats.errors
import nats.js.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import Header, PubAck

from holomem.errors import HolomemError, StoreLockedError, UnavailableError
from holomem.log.stream.lease import Lease

#: The most messages in flight at once. While they travel, the writers' next
#: transactions queue up and leave together, packed, in the next message.
DEPTH = 2
#: Beside a message in flight, the next leaves once the queue holds 1/SHARE of the
#: transactions recently outstanding at once.
SHARE = 2
#: With nothing in flight, how long (seconds) the queued transactions wait for the
#: others several writers lately had outstanding (see :meth:`Publisher._pump`).
GATHER = 0.001
#: More transactions than ever wait at once (the loop is not called for arrivals).
NEVER = 1 << 62
#: Messages over which the number of transactions outstanding at once is remembered.
PEAK_MESSAGES = 64
#: Bytes of a message's headers and subject, kept free under the server's limit.
HEADROOM = 512
#: JetStream's error code for a failed expected-last-sequence check.
WRONG_LAST_SEQUENCE = 10071
#: Pause before resending after a transient failure.
RETRY_PAUSE = 0.1
#: Seconds without an answer to the oldest message in flight before every message in
#: flight is sent again. A publish that reaches a stream with no leader (mid-election)
#: gets no answer at all; without this it would hold the whole ``timeout`` waiting.
ATTEMPT = 2.0


@dataclass(eq=False)
class Item:
    """One transaction: its number and its frame."""

    seq: int
    data: bytes
    done: concurrent.futures.Future[None] = field(default_factory=concurrent.futures.Future)


@dataclass(eq=False)
class Message:
    """One stream message: consecutive transactions, sent (and resent) as one."""

    stream_seq: int
    items: list[Item]
    data: bytes
    msg_id: str
    answer: asyncio.Future[PubAck] | None = None
    reply: str = ""
    sent_at: float = 0.0


class Publisher:
    """Sends items in sequence order; create and use on the event loop. ``last_stream``:
    the stream's last sequence number (its first message's number minus one when it
    holds none)."""

    def __init__(self, js: JetStreamContext, *, stream: str, subject: str, msg_id: str,
                 lease: Lease, timeout: float, where: str, last_stream: int) -> None:
        self.js = js
        self.stream = stream
        self.subject = subject
        self.msg_id = msg_id
        self.lease = lease
        self.timeout = timeout
        self.where = where
        self.failed: HolomemError | None = None
        self._queue: collections.deque[Item] = collections.deque()
        self._ready: collections.deque[Message] = collections.deque()  # to (re)send first
        self._flight: collections.deque[Message] = collections.deque()
        self._next_stream = last_stream + 1
        #: transactions put and not yet acknowledged; the most of them at once lately
        #: (over the last PEAK_MESSAGES messages sent, and the ones before)
        self._outstanding = 0
        self._peak = self._peak_next = 0
        self._wake: asyncio.Future[None] | None = None
        #: transactions offered by the writers' threads, not yet taken by the loop; the
        #: loop is called to take them only once they are ``_wake_at`` (it takes them
        #: anyway whenever it runs): a writer's transaction wakes an idle loop at once,
        #: but not one that waits for an answer and would not send it before
        self._arrivals: list[Item] = []
        self._arrivals_lock = threading.Lock()
        self._wake_at = 1
        self._called = False
        self._loop = asyncio.get_running_loop()
        self._inbox: str | None = None
        self._waiting: dict[str, asyncio.Future[PubAck]] = {}
        self._count = 0
        self._task = asyncio.get_running_loop().create_task(self._run())
        #: resends after a transient failure (for tests and stats)
        self.resends = 0
        #: messages sent, and transactions in them (for tests and stats)
        self.messages = 0
        self.packed = 0

    def offer(self, item: Item) -> None:
        """Queue ``item``, from any thread (items must be offered in sequence order)."""
        with self._arrivals_lock:
            failed = self.failed
            if failed is None:
                self._arrivals.append(item)
            call = not self._called and len(self._arrivals) >= self._wake_at
            if call:
                self._called = True
        if failed is not None:
            item.done.set_exception(failed)
        elif call:
            self._loop.call_soon_threadsafe(self._take_arrivals)

    def _take_arrivals(self) -> None:
        with self._arrivals_lock:
            items, self._arrivals = self._arrivals, []
            self._called = False
        for item in items:
            self.put(item)

    def _listen(self, wake_at: int) -> bool:
        """Before the loop waits: be called once ``wake_at`` transactions arrived. False
        when they already have (taken now: do not wait)."""
        with self._arrivals_lock:
            self._wake_at = wake_at
            if len(self._arrivals) < wake_at:
                return True
        self._take_arrivals()
        return False

    def put(self, item: Item) -> None:
        """Queue ``item`` (on the loop)."""
        if self.failed is not None:
            item.done.set_exception(self.failed)
            return
        self._queue.append(item)
        self._outstanding += 1
        if self._outstanding > self._peak:
            self._peak = self._outstanding
        if self._outstanding > self._peak_next:
            self._peak_next = self._outstanding
        if self._room():
            self._poke()

    def _room(self) -> bool:
        """Whether the queued transactions may leave now: at once when nothing is in
        flight (:meth:`_pump` has waited for the others first); beside messages in
        flight (up to ``DEPTH``) only once the queue holds half the transactions
        recently outstanding at once (so that several writers' transactions still
        travel together, while a lone writer's never waits)."""
        if not self._flight:
            return True
        return len(self._flight) < DEPTH and len(self._queue) >= -(-self._peak // SHARE)

    def put_message(self, message: Message) -> None:
        """Queue an already formed message ahead of new transactions: a resend (its
        stream sequence, id and bytes as first sent)."""
        if self.failed is not None:
            for item in message.items:
                item.done.set_exception(self.failed)
            return
        self._ready.append(message)
        self._outstanding += len(message.items)
        self._poke()

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    async def _run(self) -> None:
        try:
            await self._pump()
        except HolomemError as exc:
            self.failed = exc
        except Exception as exc:  # a client bug must not leave callers waiting
            self.failed = UnavailableError(f"{self.where}: publishing failed: {exc!r}")
        failed = self.failed
        assert failed is not None
        for message in (*self._flight, *self._ready):
            for item in message.items:
                if not item.done.done():
                    item.done.set_exception(failed)
        with self._arrivals_lock:
            self._queue.extend(self._arrivals)
            self._arrivals.clear()
        for item in self._queue:
            item.done.set_exception(failed)
        self._flight.clear()
        self._ready.clear()
        self._queue.clear()

    def _fenced(self, why: str) -> StoreLockedError:
        return StoreLockedError(f"{self.where}: this writer can no longer acknowledge: {why}")

    async def _pump(self) -> None:
        """Send while fewer than ``DEPTH`` messages are in flight; take the answers in
        order; on a transient failure resend everything in flight (after
        ``RETRY_PAUSE``), until ``timeout`` seconds pass without an acknowledgement."""
        progress = time.monotonic()  # the last acknowledgement (or the start of waiting)
        gathered = False
        while True:
            self._take_arrivals()
            if not self._flight and not self._ready and not self._queue:
                if self._listen(1):
                    await self._sleep()
                progress = time.monotonic()
                continue
            if not self._flight and not self._ready and not gathered:
                # Nothing in flight, and fewer transactions queued than several writers
                # lately had outstanding at once: the others are on their way (woken by
                # the last answer); wait a moment for them to travel together.
                short = -(-self._peak // SHARE) - len(self._queue)
                if short > 0:
                    gathered = True
                    if self._listen(short):
                        await self._sleep(GATHER)
                    continue
            gathered = False
            failed = False
            try:
                while self._ready or (self._queue and self._room()):
                    if not self.lease.held():
                        raise self._fenced(self.lease.lost or "the lease was lost")
                    message = self._ready.popleft() if self._ready else self._pack()
                    self._flight.append(message)
                    await self._publish(message)
            except (TimeoutError, nats.errors.Error):
                failed = True  # resend what was not sent, below
            head = self._flight[0]
            if not failed:
                assert head.answer is not None
                if not head.answer.done():
                    left = min(progress + self.timeout, head.sent_at + ATTEMPT) - \
                        time.monotonic()
                    if left > 0:
                        if len(self._flight) < DEPTH:  # wake for new work too
                            want = max(1, -(-self._peak // SHARE) - len(self._queue))
                        else:
                            want = NEVER
                        if self._listen(want):
                            await self._sleep(left)  # the answer pokes (see answered)
                        continue
                    failed = True  # no answer: resend
                else:
                    failed = not await self._answered(head)
                    if not failed:
                        progress = time.monotonic()
                        continue
            # A transient failure: everything in flight goes again, in order.
            for message in self._flight:
                self._waiting.pop(message.reply, None)
                answer = message.answer
                if answer is not None:
                    if answer.done():
                        if not answer.cancelled():
                            answer.exception()  # seen: the resend answers for it
                    else:
                        answer.cancel()
                message.answer = None
            self._ready.extendleft(reversed(self._flight))
            self._flight.clear()
            if time.monotonic() >= progress + self.timeout:
                raise UnavailableError(
                    f"{self.where}: no quorum acknowledged transaction "
                    f"{self._ready[0].items[0].seq} within {self.timeout:g} s")
            self.resends += 1
            await asyncio.sleep(RETRY_PAUSE)

    async def _sleep(self, timeout: float | None = None) -> None:
        """Until poked (a transaction to send, the answer to the oldest message in
        flight) or ``timeout`` seconds pass."""
        wake: asyncio.Future[None] = self._loop.create_future()
        self._wake = wake
        timer = None if timeout is None else self._loop.call_later(timeout, self._poke)
        try:
            await wake
        finally:
            self._wake = None
            if timer is not None:
                timer.cancel()

    def _pack(self) -> Message:
        """The next message: the queued consecutive transactions that fit in one."""
        limit = self.js._nc.max_payload - HEADROOM  # the connection the context came from
        first = self._queue.popleft()
        items, size = [first], len(first.data)
        while self._queue and self._queue[0].seq == items[-1].seq + 1 and \
                size + len(self._queue[0].data) <= limit:
            items.append(self._queue.popleft())
            size += len(items[-1].data)
        if len(items) == 1:
            data, msg_id = first.data, f"{self.msg_id}:{first.seq}"
        else:
            data = b"".join(item.data for item in items)
            msg_id = f"{self.msg_id}:{first.seq}-{items[-1].seq}"
        message = Message(self._next_stream, items, data, msg_id)
        self._next_stream += 1
        self.messages += 1
        if self.messages % PEAK_MESSAGES == 0:
            self._peak, self._peak_next = self._peak_next, self._outstanding
        self.packed += len(items)
        return message

    async def _answered(self, head: Message) -> bool:
        """Acknowledge ``head``'s transactions from its answer; False for a transient
        failure (resend). Errors: ``locked``, ``unavailable``."""
        assert head.answer is not None
        first = head.items[0].seq
        try:
            ack = head.answer.result()
        except nats.js.errors.APIError as exc:
            if exc.err_code == WRONG_LAST_SEQUENCE:
                if not await self._confirm(head, f"the stream did not end at sequence "
                                           f"{head.stream_seq - 1} (another writer appended)"):
                    return False  # not readable just now: resend, and look again
                # An earlier send stored it and its acknowledgement was lost (read back
                # just now: not to be read again below).
                ack = PubAck(stream=self.stream, seq=head.stream_seq, duplicate=False)
            elif exc.code is not None and exc.code >= 500:
                return False  # no leader or no quorum just now: resend
            else:
                raise UnavailableError(f"{self.where}: the stream refused transaction "
                                       f"{first}: {exc.description}") from exc
        except (TimeoutError, nats.errors.Error):
            return False  # lost connection, or no responders: resend
        if ack.seq != head.stream_seq:
            raise self._fenced(f"transaction {first} was stored as stream message {ack.seq}, "
                               f"not {head.stream_seq}")
        # A duplicate's id matched a message some send stored: this one's, or an earlier
        # writer's unacknowledged message of the same transactions.
        if ack.duplicate and not await self._confirm(
                head, f"stream message {head.stream_seq} is another writer's transaction "
                      f"{first}"):
            return False  # not readable just now: resend, and look again
        if not self.lease.held():
            raise self._fenced(self.lease.lost or "the lease was lost")
        self._flight.popleft()
        self._outstanding -= len(head.items)
        self._waiting.pop(head.reply, None)
        for item in head.items:
            item.done.set_result(None)
        return True

    async def _replies(self) -> str:
        """Subscribe once to the inbox the stream answers publishes on. (Our own, not
        ``publish_async``'s: that one leaves a publish waiting forever when the stream
        answers with an error.)"""
        if self._inbox is not None:
            return self._inbox
        nc = self.js._nc  # the connection the context was made from
        prefix = nc.new_inbox()

        async def answered(msg: Msg) -> None:
            fut = self._waiting.pop(msg.subject, None)
            if fut is None or fut.done():
                return
            if self._flight and self._flight[0].answer is fut:
                self._poke()  # the oldest message in flight: the pump goes on
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
        return prefix

    async def _publish(self, message: Message) -> None:
        inbox = await self._replies()
        self._count += 1
        message.reply = f"{inbox}.{self._count}"
        message.answer = asyncio.get_running_loop().create_future()
        message.sent_at = time.monotonic()
        self._waiting[message.reply] = message.answer
        await self.js._nc.publish(self.subject, message.data, reply=message.reply, headers={
            Header.MSG_ID.value: message.msg_id,
            Header.EXPECTED_LAST_SEQUENCE.value: str(message.stream_seq - 1)})

    async def _confirm(self, message: Message, otherwise: str) -> bool:
        """True when stream message ``message.stream_seq`` is this very message; False
        when the stream cannot say just now (the caller resends and asks again, within
        its deadline). Errors: ``locked`` (``otherwise``) when it is another writer's."""
        stored = await self._stored_already(message)
        if stored is False:
            raise self._fenced(otherwise)
        return stored is True

    async def _stored_already(self, message: Message) -> bool | None:
        """Whether stream message ``message.stream_seq`` is this very message (the stream
        checks the expected sequence before its duplicate window, so a resend of a
        stored message is refused rather than recognised); None when the stream cannot
        say just now (no answer, or no leader mid-election)."""
        try:
            msg = await asyncio.wait_for(self.js.get_msg(self.stream, message.stream_seq),
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
        return headers.get(Header.MSG_ID.value) == message.msg_id and msg.data == message.data

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
