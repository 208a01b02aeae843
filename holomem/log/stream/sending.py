"""Sending transactions from a synchronous caller: numbered, encoded, then awaited.

Owns: :class:`Sender` -- giving each transaction of one generation its sequence number,
encoding it, refusing (when asked) one larger than the server takes, handing it to the
loop's :class:`~holomem.log.stream.publisher.Publisher` (which packs it, with the
transactions queued beside it, into a stream message), and the bounded wait until the
transactions up to a number are acknowledged. The writer's journal and compaction's
rewrite each send through one. Imports the standard library, :mod:`holomem.errors`,
the stream modules and the writer's :class:`~holomem.log.writer.Tally` (what the
journal counts).
"""

from __future__ import annotations

import threading

from holomem.errors import ClosedError, LimitError, UnavailableError
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.loop import Connection
from holomem.log.stream.publisher import HEADROOM, Item, Publisher
from holomem.log.writer import Tally


class Sender:
    """The transactions sent to one generation's stream after ``last``. Thread safe."""

    def __init__(self, conn: Connection, publisher: Publisher, codec: StreamCodec, *,
                 last: int, timeout: float, where: str, tally: Tally | None = None) -> None:
        self.publisher = publisher
        #: where each acknowledged transaction is counted (the journal's statistics)
        self.tally = tally if tally is not None else Tally()
        self._conn = conn
        self._codec = codec
        self._timeout = timeout
        self._where = where
        self._lock = threading.Lock()
        self._inflight: dict[int, Item] = {}
        #: taken to take acknowledged transactions off ``_inflight`` (not ``_lock``)
        self._book = threading.Lock()
        #: the number the next transaction gets
        self.next = last + 1
        #: the last transaction acknowledged
        self.last = last
        #: bytes sent so far
        self.sent = 0

    def send(self, payloads: list[bytes], *, limit: int | None = None) -> int:
        """Number, encode and send one transaction; return its sequence number (:meth:`wait`
        for it). ``limit``: the largest message the server takes (None: not checked here).
        Errors: ``limit``, and the publisher's failure (``locked``, ``unavailable``)."""
        with self._lock:
            if self.publisher.failed is not None:
                raise self.publisher.failed
            seq = self.next
            data = self._codec.encode(seq, payloads)
            if limit is not None and len(data) + HEADROOM > limit:
                raise LimitError(f"a transaction of {len(data)} bytes exceeds the server's "
                                 f"message limit of {limit} bytes")
            item = Item(seq, data)
            self._inflight[seq] = item
            self.next = seq + 1
            self.sent += len(data)
            self.publisher.offer(item)
        return seq

    def in_flight(self, seq: int) -> bool:
        """Whether transaction ``seq`` was sent and is not yet acknowledged."""
        return self.last < seq < self.next

    def wait(self, seq: int) -> None:
        """Return once every transaction up to ``seq`` is acknowledged. Errors:
        ``locked``, ``unavailable`` (then nothing later is acknowledged).

        The publisher acknowledges in order, so the newest transaction in flight up to
        ``seq`` answers for all before it; the writers' numbering lock is not taken
        (the dictionary's single reads and writes are atomic)."""
        item = self._inflight.get(seq)
        if item is None and self.last < seq:  # not a number sent: the newest before it
            with self._book:
                below = [s for s in list(self._inflight) if s <= seq]
            item = self._inflight.get(max(below)) if below else None
        if item is None or self.last >= item.seq:
            return
        try:
            item.done.result(self._timeout + 5.0)
        except TimeoutError:
            raise UnavailableError(
                f"{self._where}: transaction {item.seq} was not acknowledged in time"
            ) from None
        with self._book:
            for s in range(self.last + 1, item.seq + 1):
                if self._inflight.pop(s, None) is not None:
                    self.tally.acknowledged += 1
            self.last = max(self.last, item.seq)

    def wait_all(self) -> None:
        """Return once every transaction sent so far is acknowledged."""
        self.wait(self.next - 1)

    def close(self) -> None:
        """Tell every transaction still waiting that the journal was closed."""
        for item in list(self._inflight.values()):
            if not item.done.done():
                item.done.set_exception(ClosedError("the journal was closed"))
