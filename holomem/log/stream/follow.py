"""A follower's view of the writer's stream: consuming new messages as they arrive.

Owns: :class:`Tail`, a standing ordered consumer of one generation's stream that
buffers every message the server delivers (in order, split into its transactions) for
the synchronous side to take,
and a poll of the generation record, so that a follower knows without asking the server
when the writer switched generations. Imports the standard library, ``nats`` and the
stream modules.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading

import nats.errors
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.kv import KeyValue

from holomem.errors import CorruptError
from holomem.log.stream import record
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.streams import PENDING

#: Seconds between looks at the generation record.
WATCH_PERIOD = 0.25
#: Bytes a follower buffers between refreshes; past them it stops consuming until the
#: buffer is taken, then starts again where it stopped (the stream keeps everything).
MAX_BUFFERED = 64 << 20


class Tail:
    """Transactions of one generation's stream from its first on, as delivered (each
    message split into its transactions' frames). Build on the loop with :meth:`start`;
    :meth:`take` and :meth:`wait` are called from other threads."""

    def __init__(self, start: int, codec: StreamCodec) -> None:
        self.next = start  # the next transaction the synchronous side takes
        self._codec = codec
        self._buffer: collections.deque[tuple[int, bytes]] = collections.deque()
        self._cond = threading.Condition()
        self._sub: object | None = None
        self.high = start - 1  # the last transaction buffered
        #: the stream message to consume from (the generation's first transaction and
        #: its first stream message share a number)
        self._stream_next = start
        self._bytes = 0
        #: the buffer reached MAX_BUFFERED: later messages were dropped (see refill)
        self.full = False

    async def start(self, js: JetStreamContext, stream: str, subject: str) -> None:
        async def deliver(msg: Msg) -> None:
            seq = msg.metadata.sequence.stream
            with self._cond:
                if seq < self._stream_next or self.full:
                    return
                if self._buffer and self._bytes + len(msg.data) > MAX_BUFFERED:
                    self.full = True
                    self._cond.notify_all()  # a reader waiting for more must take first
                    return
                try:
                    frames = self._codec.split(seq, msg.data)
                except CorruptError:  # decoding it names the problem to the reader
                    frames = [(self.high + 1, msg.data)]
                self._stream_next = seq + 1
                # what was read past the tail already (see skip_to) is not kept again
                kept = [f for f in frames if f[0] >= self.next]
                self._buffer.extend(kept)
                self._bytes += sum(len(f[1]) for f in kept)
                self.high = max(self.high, frames[-1][0])
                self._cond.notify_all()

        self._sub = await js.subscribe(
            subject, stream=stream, cb=deliver, ordered_consumer=True,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            config=ConsumerConfig(opt_start_seq=self._stream_next),
            pending_msgs_limit=PENDING, idle_heartbeat=1.0)

    def wait(self, seq: int, timeout: float) -> bool:
        """Wait until message ``seq`` was delivered; False after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.high >= seq, timeout)

    def wait_or_full(self, seq: int, timeout: float) -> bool:
        """Wait until message ``seq`` was delivered or the buffer filled up before it
        (then :meth:`take` what it holds and :meth:`refill`); False after ``timeout``
        seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self.high >= seq or self.full, timeout)

    def take(self, upto: int) -> list[tuple[int, bytes]]:
        """Remove and return the buffered messages up to ``upto``."""
        out: list[tuple[int, bytes]] = []
        with self._cond:
            while self._buffer and self._buffer[0][0] <= upto:
                out.append(self._buffer.popleft())
                self._bytes -= len(out[-1][1])
            if out:
                self.next = out[-1][0] + 1
        return out

    def skip_to(self, seq: int) -> None:
        """The transactions before ``seq`` were read from the stream another way (a
        rebuild that read it directly): drop them from the buffer, never buffer them
        again, and take from ``seq`` on."""
        with self._cond:
            if seq <= self.next:
                return
            while self._buffer and self._buffer[0][0] < seq:
                self._bytes -= len(self._buffer.popleft()[1])
            self.next = seq
            self.high = max(self.high, seq - 1)
            self._cond.notify_all()

    @property
    def stalled(self) -> bool:
        """Nothing is buffered and nothing is being consumed: the buffer filled up and has
        been taken, or the last (re)subscription failed. :meth:`refill` must run."""
        with self._cond:
            return not self._buffer and (self.full or self._sub is None)

    async def refill(self, js: JetStreamContext, stream: str, subject: str) -> None:
        """When :attr:`stalled`: consume again from the first message not buffered. If
        subscribing fails, the tail stays stalled, so the next look tries again."""
        await self.stop()
        with self._cond:
            self.full = False
        await self.start(js, stream, subject)

    async def stop(self) -> None:
        sub = self._sub
        self._sub = None
        if sub is not None:
            with contextlib.suppress(asyncio.TimeoutError, nats.errors.Error):
                await asyncio.wait_for(sub.unsubscribe(), 2.0)  # type: ignore[attr-defined]


class GenerationWatch:
    """The newest generation number in the record, looked at every ``WATCH_PERIOD``."""

    def __init__(self, kv: KeyValue, generation: int, where: str) -> None:
        self.newest = generation
        self._kv = kv
        self._where = where
        self._task = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(WATCH_PERIOD)
            try:
                found = await asyncio.wait_for(record.read(self._kv, self._where), 2.0)
            except (TimeoutError, nats.errors.Error, Exception):
                continue  # look again later; the reads themselves report outages
            if found is not None and found[0].generation > self.newest:
                self.newest = found[0].generation

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._task
