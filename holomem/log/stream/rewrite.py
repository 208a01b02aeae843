"""Compaction's new generation on a stream: written beside the live one, then named.

Owns: :class:`StreamRewrite` -- the next generation's stream, created empty with its
first sequence number after the live generation's last; the transactions compaction
appends to it (published like any other, fenced by the same lease); and ``finish``,
which waits for every one of them to be acknowledged before the generation record is
replaced. Until then the live generation is untouched: a crash leaves a stream that
the next writer erases. Imports the standard library, ``nats`` (through the stream
modules) and the log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from holomem.errors import HolomemError, UnavailableError
from holomem.log import fs
from holomem.log.envelope import Envelope
from holomem.log.stream import record, streams
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.lease import Lease
from holomem.log.stream.loop import Connection
from holomem.log.stream.publisher import Item, Publisher
from holomem.log.stream.url import Address


class StreamRewrite:
    """The next generation being written. :meth:`begin`, ``append``..., then the
    journal's ``switch`` calls :meth:`finish`; or :meth:`abandon`."""

    def __init__(self, conn: Connection, address: Address, rec: record.Record, lease: Lease,
                 directory: str, envelope: Envelope | None, compress: bool, replicas: int
                 ) -> None:
        self._conn = conn
        self._address = address
        self.record = rec
        self.generation = rec.generation
        self.dir = directory
        self._lease = lease
        self._replicas = replicas
        self._codec = StreamCodec(rec.store_id, rec.generation, envelope, compress,
                                  f"{address.url} generation {rec.generation}")
        self._items: list[Item] = []
        self._next = rec.first_seq
        self._publisher: Publisher | None = None
        self.name = address.stream(rec.generation)

    @property
    def last_seq(self) -> int:
        return self._next - 1

    def begin(self) -> None:
        self._conn.call(self._begin(), self._address.timeout * 4, f"creating {self.name}")

    async def _begin(self) -> None:
        js = self._conn.js
        await streams.erase(js, self.name)  # a leftover of an interrupted compaction
        await streams.create(js, self.name, self._address.subject(self.generation),
                             self.record.first_seq, self._replicas)
        self._publisher = Publisher(
            js, stream=self.name, subject=self._address.subject(self.generation),
            msg_id=f"{self.record.store_id.hex()}:{self.generation}", lease=self._lease,
            timeout=self._address.timeout, where=self._address.url)

    def append(self, payloads: Sequence[bytes]) -> int:
        """Send one transaction of the new generation; return its sequence number."""
        assert self._publisher is not None, "begin() comes first"
        if self._publisher.failed is not None:
            raise self._publisher.failed
        seq = self._next
        item = Item(seq, self._codec.encode(seq, list(payloads)))
        self._items.append(item)
        self._next += 1
        self._conn.loop.call_soon_threadsafe(self._publisher.put, item)
        return seq

    def _wait_all(self) -> None:
        for item in self._items:
            try:
                item.done.result(self._address.timeout + 5.0)
            except TimeoutError:
                raise UnavailableError(f"{self.name}: transaction {item.seq} was not "
                                       "acknowledged in time") from None
        self._items.clear()

    def finish(self, revision: int, new: record.Record) -> int:
        """Wait for every transaction, then replace the generation record at
        ``revision`` with ``new``; return the record's new revision. Errors: ``locked``,
        ``unavailable`` (the live generation is then unchanged)."""
        self._wait_all()
        return self._conn.call(self._finish(revision, new), self._address.timeout,
                               f"switching {self._address.url}")

    async def _finish(self, revision: int, new: record.Record) -> int:
        if self._publisher is not None:
            await self._publisher.close()
        kv = await record.bucket(self._conn.js, self._address.meta_bucket, self._replicas)
        if not self._lease.held():
            raise UnavailableError(f"{self._address.url}: the lease was lost during compaction")
        return await record.write(kv, new, revision, self._address.url)

    def abandon(self) -> None:
        """Erase the unfinished stream and this node's files of it."""
        with contextlib.suppress(HolomemError):  # else the next writer's open erases it
            self._conn.call(self._abandon(), self._address.timeout * 4, f"erasing {self.name}")
        fs.erase_tree(self.dir)

    async def _abandon(self) -> None:
        if self._publisher is not None:
            await self._publisher.close()
        await streams.erase(self._conn.js, self.name)
