"""Reading a generation's transactions back from its stream.

Owns: :class:`GenerationReader` -- a range of transactions replayed through an ordered
consumer in chunks of :data:`CHUNK` messages (each chunk one bounded call on the loop),
the same range taken from what a follower's :class:`~holomem.log.stream.follow.Tail`
has buffered, and one transaction read by its sequence number: the stream message that
holds it found by a binary search over the stream (its first transaction's number never
exceeds a message's own, FORMAT.md §11), the last message read kept for the next read.
Every message is split into its frames, their numbers checked to follow one another
without a gap, and each frame checked and decoded by the generation's
:class:`~holomem.log.stream.codec.StreamCodec`. Imports the standard library,
:mod:`holomem.errors` and the stream modules.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from holomem.errors import CorruptError, HolomemError, NotFoundError, UnavailableError
from holomem.log.stream import streams
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.follow import Tail
from holomem.log.stream.loop import Connection
from holomem.log.stream.url import Address

#: Messages fetched per call when replaying.
CHUNK = 512


class GenerationReader:
    """Reads the stream of one generation for a synchronous caller. ``first``: the
    generation's first transaction (the number of its stream's first message too)."""

    def __init__(self, conn: Connection, address: Address, generation: int, first: int,
                 codec: StreamCodec, where: str) -> None:
        self._conn = conn
        self._codec = codec
        self._timeout = address.timeout
        self._where = where
        self._first = first
        self.name = address.stream(generation)
        self._subject = address.subject(generation)
        #: the last message read by read(): (stream seq, its frames)
        self._last: tuple[int, list[tuple[int, bytes]]] | None = None

    def _gap(self, expected: int, seq: int) -> CorruptError:
        return CorruptError(f"{self._where}: {self.name} holds transaction {seq} where "
                            f"{expected} belongs")

    def replay(self, start: int, stop: int) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` from ``start`` to ``stop``, read from the stream. Errors:
        ``corrupt``, ``corrupt.auth``, ``unavailable``."""
        if start > stop:
            return
        first, last = self._conn.call(self._bounds(start), self._timeout * 2,
                                      f"reading {self.name}")
        source = streams.messages(self._conn.js, self.name, self._subject, first, last,
                                  self._timeout)
        expected = start
        try:
            while True:
                chunk = self._conn.call(_chunk(source, CHUNK), self._timeout * 2,
                                        f"reading {self.name}")
                for stream_seq, data in chunk:
                    for seq, frame in self._codec.split(stream_seq, data):
                        if seq < expected and expected == start:
                            continue  # before the range, in its first message
                        if seq != expected:
                            raise self._gap(expected, seq)
                        yield seq, self._codec.decode(seq, frame)
                        if seq >= stop:
                            return
                        expected += 1
                if len(chunk) < CHUNK:
                    break
        finally:
            with contextlib.suppress(HolomemError):
                self._conn.call(source.aclose(), 3.0, f"reading {self.name}")
        raise CorruptError(f"{self._where}: {self.name} ends before transaction {expected}")

    async def _bounds(self, start: int) -> tuple[int, int]:
        """The stream messages to read for transactions from ``start`` on: the one that
        holds ``start``, and the stream's last."""
        _first, last, _bytes = await streams.last_seq(self._conn.js, self.name)
        if start <= self._first:
            return self._first, last
        found = await self._locate(start)
        return (found[0] if found is not None else self._first), last

    def replay_tail(self, tail: Tail, stop: int) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` from ``tail``'s next up to ``stop``, as it delivers them:
        whenever its bounded buffer filled up and has been taken, or its last
        subscription failed, it consumes again, so a range of any size streams through
        it. Errors: ``corrupt``, ``corrupt.auth``, ``unavailable``."""
        while tail.next <= stop:
            expected = tail.next
            if tail.stalled:
                self._conn.call(tail.refill(self._conn.js, self.name, self._subject),
                                self._timeout, f"following {self.name}")
            if not tail.wait_or_full(min(stop, tail.next + CHUNK - 1), self._timeout):
                raise UnavailableError(f"{self._where}: the stream did not deliver "
                                       f"transaction {tail.next} within {self._timeout:g} s")
            for seq, data in tail.take(stop):
                if seq != expected:
                    raise self._gap(expected, seq)
                yield seq, self._codec.decode(seq, data)
                expected += 1

    def read(self, seq: int) -> list[bytes]:
        """The payloads of transaction ``seq``. Errors: ``not_found``, ``corrupt``,
        ``unavailable``."""
        last = self._last
        if last is None or not last[1][0][0] <= seq <= last[1][-1][0]:
            last = self._conn.call(self._find(seq, last), self._timeout * 2,
                                   f"reading {self.name}")
            if last is None:
                raise NotFoundError(f"no transaction {seq} in {self.name}")
            self._last = last
        for s, frame in last[1]:
            if s == seq:
                return self._codec.decode(seq, frame)
        raise NotFoundError(f"no transaction {seq} in {self.name}")

    async def _find(self, seq: int, last: tuple[int, list[tuple[int, bytes]]] | None
                    ) -> tuple[int, list[tuple[int, bytes]]] | None:
        if last is not None and seq == last[1][-1][0] + 1:  # reading on: the next message
            found = await self._message(last[0] + 1)
            if found is not None and found[1][0][0] == seq:
                return found
        return await self._locate(seq)

    async def _message(self, stream_seq: int) -> tuple[int, list[tuple[int, bytes]]] | None:
        data = await streams.get(self._conn.js, self.name, stream_seq)
        if data is None:
            return None
        return stream_seq, self._codec.split(stream_seq, data)

    async def _locate(self, seq: int) -> tuple[int, list[tuple[int, bytes]]] | None:
        """The message holding transaction ``seq`` (None if none does): the last one whose
        first transaction is at most ``seq``, among messages ``first`` .. ``seq``."""
        if seq < self._first:
            return None
        lo, hi = self._first, seq
        best: tuple[int, list[tuple[int, bytes]]] | None = None
        probe = hi  # one message per transaction so far: the first probe finds it
        while lo <= hi:
            found = await self._message(probe)
            if found is None or found[1][0][0] > seq:
                hi = probe - 1
            else:
                best, lo = found, probe + 1
                if found[1][-1][0] >= seq:
                    break
            probe = (lo + hi) // 2
        if best is None or not best[1][0][0] <= seq <= best[1][-1][0]:
            return None
        return best


async def _chunk(source: AsyncIterator[tuple[int, bytes]], n: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    async for item in source:
        out.append(item)
        if len(out) >= n:
            break
    return out
