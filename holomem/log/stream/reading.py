"""Reading a generation's transactions back from its stream.

Owns: :class:`GenerationReader` -- a range of transactions replayed through an ordered
consumer in chunks of :data:`CHUNK` (each chunk one bounded call on the loop), the
same range taken from what a follower's :class:`~holomem.log.stream.follow.Tail` has
buffered, and one transaction read by its sequence number; every message checked and
decoded by the generation's :class:`~holomem.log.stream.codec.StreamCodec`. Imports the
standard library, :mod:`holomem.errors` and the stream modules.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator

from holomem.errors import HolomemError, NotFoundError, UnavailableError
from holomem.log.stream import streams
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.follow import Tail
from holomem.log.stream.loop import Connection
from holomem.log.stream.url import Address

#: Messages fetched per call when replaying.
CHUNK = 512


class GenerationReader:
    """Reads the stream of one generation for a synchronous caller."""

    def __init__(self, conn: Connection, address: Address, generation: int,
                 codec: StreamCodec, where: str) -> None:
        self._conn = conn
        self._codec = codec
        self._timeout = address.timeout
        self._where = where
        self.name = address.stream(generation)
        self._subject = address.subject(generation)

    def replay(self, start: int, stop: int) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` from ``start`` to ``stop``, read from the stream. Errors:
        ``corrupt``, ``corrupt.auth``, ``unavailable``."""
        source = streams.messages(self._conn.js, self.name, self._subject, start, stop,
                                  self._timeout)
        try:
            while True:
                chunk = self._conn.call(_chunk(source, CHUNK), self._timeout * 2,
                                        f"reading {self.name}")
                for seq, data in chunk:
                    yield seq, self._codec.decode(seq, data)
                if len(chunk) < CHUNK:
                    return
        finally:
            with contextlib.suppress(HolomemError):
                self._conn.call(source.aclose(), 3.0, f"reading {self.name}")

    def replay_tail(self, tail: Tail, stop: int) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` from ``tail``'s next up to ``stop``, as it delivers them.
        Errors: ``corrupt``, ``corrupt.auth``, ``unavailable``."""
        while tail.next <= stop:
            if not tail.wait(min(stop, tail.next + CHUNK - 1), self._timeout):
                raise UnavailableError(f"{self._where}: the stream did not deliver message "
                                       f"{tail.next} within {self._timeout:g} s")
            for seq, data in tail.take(stop):
                yield seq, self._codec.decode(seq, data)

    def read(self, seq: int) -> list[bytes]:
        """The payloads of transaction ``seq``. Errors: ``not_found``, ``corrupt``,
        ``unavailable``."""
        data = self._conn.call(streams.get(self._conn.js, self.name, seq), self._timeout,
                               f"reading {self.name}")
        if data is None:
            raise NotFoundError(f"no transaction {seq} in {self.name}")
        return self._codec.decode(seq, data)


async def _chunk(source: AsyncIterator[tuple[int, bytes]], n: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    async for item in source:
        out.append(item)
        if len(out) >= n:
            break
    return out
