"""Compaction's new generation on a stream: written beside the live one, named, then the
old one erased.

Owns: :class:`StreamRewrite` -- the next generation's stream, created empty with its
first sequence number after the live generation's last; the transactions compaction
appends to it (sent through a :class:`~holomem.log.stream.sending.Sender`, fenced by the
same lease as any other); and ``finish``, which waits for every one of them to be
acknowledged before the generation record is replaced. Until then the live generation is
untouched: a crash leaves a stream that the next writer erases. Then
:func:`erase_replaced` erases the replaced generation's stream and takes its name out
of the record. Owns the crash points of that switch. Imports the standard library,
``nats`` and the log.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from holomem.errors import HolomemError, UnavailableError
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.envelope import Envelope
from holomem.log.stream import record, streams
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.lease import Lease
from holomem.log.stream.loop import Connection
from holomem.log.stream.publisher import Publisher
from holomem.log.stream.sending import Sender
from holomem.log.stream.url import Address

# Crash points of a stream store's generation switch. Not in the file journal's registry
# (cp.point): the crash harness's workload runs on store directories and never reaches
# them; tests/stream/test_stream_purge.py crashes a writer at each of them.
P_PURGE_SWITCHED = "stream.generation.switched"  # the record names the new stream
P_PURGE_ERASED = "stream.generation.erased"  # the old stream's messages are erased
CRASH_POINTS = (P_PURGE_SWITCHED, P_PURGE_ERASED)


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
        self._publisher: Publisher | None = None
        self._sender: Sender | None = None
        self.name = address.stream(rec.generation)

    @property
    def last_seq(self) -> int:
        return self._sender.next - 1 if self._sender is not None else self.record.first_seq - 1

    def begin(self) -> None:
        self._conn.call(self._begin(), self._address.timeout * 4, f"creating {self.name}")
        assert self._publisher is not None
        self._sender = Sender(self._conn, self._publisher, self._codec,
                              last=self.record.first_seq - 1, timeout=self._address.timeout,
                              where=self.name)

    async def _begin(self) -> None:
        js = self._conn.js
        await streams.erase(js, self.name)  # a leftover of an interrupted compaction
        await streams.create(js, self.name, self._address.subject(self.generation),
                             self.record.first_seq, self._replicas)
        self._publisher = Publisher(
            js, stream=self.name, subject=self._address.subject(self.generation),
            msg_id=f"{self.record.store_id.hex()}:{self.generation}", lease=self._lease,
            timeout=self._address.timeout, where=self._address.url,
            last_stream=self.record.first_seq - 1)

    def append(self, payloads: Sequence[bytes]) -> int:
        """Send one transaction of the new generation; return its sequence number."""
        assert self._sender is not None, "begin() comes first"
        return self._sender.send(list(payloads))

    def finish(self, revision: int, new: record.Record) -> int:
        """Wait for every transaction, then replace the generation record at
        ``revision`` with ``new``; return the record's new revision. Errors: ``locked``,
        ``unavailable`` (the live generation is then unchanged)."""
        if self._sender is not None:
            self._sender.wait_all()
        revision = self._conn.call(self._finish(revision, new), self._address.timeout,
                                   f"switching {self._address.url}")
        cp.hit(P_PURGE_SWITCHED)
        return revision

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


async def erase_replaced(js: JetStreamContext, address: Address, meta: KeyValue,
                         rec: record.Record, revision: int, generation: int
                         ) -> tuple[record.Record, int]:
    """Erase the stream of the replaced ``generation`` (every message securely deleted,
    then the stream), then take it out of the record's streams still to erase; return
    the record and its new revision. Errors: ``locked``, ``unavailable``."""
    await streams.erase(js, address.stream(generation))
    cp.hit(P_PURGE_ERASED)
    rec = rec._replace(erase=tuple(g for g in rec.erase if g != generation))
    return rec, await record.write(meta, rec, revision, address.url)
