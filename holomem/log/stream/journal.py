"""A store's journal on NATS JetStream: the same interface as the file journal.

Owns: :class:`StreamJournal` -- opening a ``nats://`` store (as its one writer, holding
the lease, or as a follower on any node), appending transactions through the
:class:`~holomem.log.stream.publisher.Publisher`, replaying and reading them back,
following the writer, and compaction's switch to a new generation's stream (the
record is replaced only after the new stream is complete; the old one is then
securely erased). docs/scale-out.md describes the design, FORMAT.md §11 the bytes.
Imports the standard library, ``nats`` (through the stream modules) and the log.

Acknowledged means: the stream leader stored the message and a quorum of its
replicas have it (JetStream acknowledges a replicated publish only then), and the
writer still held its lease when the acknowledgement came back.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator, Sequence

from holomem.errors import (
    ClosedError,
    HolomemError,
    KeyRequiredError,
    LimitError,
    NotFoundError,
    ReadOnlyError,
    UnavailableError,
    UnexpectedKeyError,
    WrongKeyError,
)
from holomem.log import crashpoints as cp
from holomem.log.envelope import Envelope, key_check, validate_key
from holomem.log.follower import Refreshed
from holomem.log.journal import JournalStats, check_payloads
from holomem.log.opening import Recovery
from holomem.log.stream import lease as leases
from holomem.log.stream import record, streams
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.follow import GenerationWatch, Tail
from holomem.log.stream.lease import Lease
from holomem.log.stream.local import LocalDir
from holomem.log.stream.loop import Connection
from holomem.log.stream.publisher import Item, Publisher
from holomem.log.stream.rewrite import StreamRewrite
from holomem.log.stream.url import Address, parse

# Crash points of a stream store's generation switch. Not in the file journal's registry
# (cp.point): the crash harness's workload runs on store directories and never reaches
# them; tests/stream/test_stream_purge.py crashes a writer at each of them.
P_PURGE_SWITCHED = "stream.generation.switched"  # the record names the new stream
P_PURGE_ERASED = "stream.generation.erased"  # the old stream's messages are erased
CRASH_POINTS = (P_PURGE_SWITCHED, P_PURGE_ERASED)

#: Messages fetched per call when replaying.
CHUNK = 512
SYNC_MODES = ("full", "batch", "none")


class StreamJournal:
    """A ``nats://`` store's journal. Use :meth:`open`; a context manager."""

    local_text = True  # every node keeps its own text segment
    durable_local = False  # ... in a scratch directory erased on close

    def __init__(self, path: str, *, key: bytes | None = None, sync: str = "full",
                 read_only: bool = False, create: bool = True, compress: bool = True) -> None:
        self._key = validate_key(key)
        if sync not in SYNC_MODES:
            raise ValueError(sync)
        self.address: Address = parse(path)
        self.path = self.address.url
        self.read_only = read_only
        self.sync_mode = sync
        self._compress = compress
        self._closed = False
        self._lock = threading.Lock()
        self._envelope = Envelope(self._key) if self._key is not None else None
        self._lease: Lease | None = None
        self._publisher: Publisher | None = None
        self._tail: Tail | None = None
        self._watch: GenerationWatch | None = None
        self._inflight: dict[int, Item] = {}
        self._retired: list[int] = []
        self._erase_pending: dict[str, tuple[int, int]] = {}
        self.recovery = Recovery((), ())
        self._local: LocalDir | None = None
        self._conn = Connection.open(self.address.servers, self.address.timeout)
        try:
            self._local = LocalDir.create(self.address.local, self.address.store)
            self._open_retrying(create)
        except BaseException:
            self._release()
            raise

    @classmethod
    def open(cls, path: str, *, key: bytes | None = None, sync: str = "full",
             read_only: bool = False, create: bool = True, compress: bool = True
             ) -> StreamJournal:
        return cls(path, key=key, sync=sync, read_only=read_only, create=create,
                   compress=compress)

    # -- opening (on the loop) ------------------------------------------------------
    def _open_retrying(self, create: bool) -> None:
        """Open, trying again while the servers answer ``unavailable`` (a cluster that
        just restarted elects its leaders) for up to ``timeout`` seconds."""
        a = self.address
        deadline = time.monotonic() + a.timeout + a.wait
        while True:
            try:
                self._conn.call(self._open(create), a.timeout + a.wait + a.lease,
                                f"opening {self.path}")
                return
            except UnavailableError:
                with contextlib.suppress(HolomemError):
                    self._conn.call(self._stop_loop_side(), 5.0, f"opening {self.path}")
                self._lease, self._publisher = None, None
                self._tail, self._watch = None, None
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.25)

    async def _open(self, create: bool) -> None:
        a, js = self.address, self._conn.js
        self.replicas = a.replicas or self._default_replicas()
        self._meta = await record.bucket(js, a.meta_bucket, self.replicas)
        if not self.read_only:
            kv = await leases.bucket(js, a.lease_bucket, a.lease, self.replicas)
            ttl = (await kv.status()).ttl or a.lease
            self._lease = await Lease.take(kv, ttl, a.wait, self.path, a.advertise)
            self._lease.start()
        found = await record.read(self._meta, self.path)
        if found is None:
            if self.read_only or not create:
                raise NotFoundError(f"no holomem store at {self.path!r}")
            store_id = os.urandom(16)
            rec = record.Record(1, 1, store_id, self._key is not None,
                                b"" if self._key is None else key_check(self._key, store_id))
            await streams.create(js, a.stream(1), a.subject(1), 1, self.replicas)
            self._revision = await record.write(self._meta, rec, 0, self.path)
        else:
            rec, self._revision = found
        self._check_key(rec)
        self._record = rec
        if not self.read_only:
            # Written first at every writer's open, even unchanged: the revision moves,
            # so a writer that held the lease before this one can no longer switch the
            # store to a generation it compacted (its compare-and-set names the old
            # revision) while the streams below are erased.
            self._revision = await record.write(self._meta, rec, self._revision, self.path)
            for old in rec.erase:  # a purge switched, then stopped before erasing
                await streams.erase(js, a.stream(old))
            # A compaction that stopped before the switch left its new stream.
            await streams.erase(js, a.stream(rec.generation + 1))
            if rec.erase:
                rec = rec._replace(erase=())
                self._revision = await record.write(self._meta, rec, self._revision, self.path)
        self._record = rec
        await self._load(rec)
        if self.read_only:
            self._watch = GenerationWatch(self._meta, rec.generation, self.path)

    def _default_replicas(self) -> int:
        nc = self._conn.nc
        assert nc is not None
        known = set(self._conn.servers) | {str(u) for u in nc.discovered_servers}
        return 3 if len(known) >= 3 else 1

    def _check_key(self, rec: record.Record) -> None:
        if rec.encrypted and self._key is None:
            raise KeyRequiredError(f"the store at {self.path!r} is encrypted; pass its key")
        if not rec.encrypted and self._key is not None:
            raise UnexpectedKeyError(
                f"the store at {self.path!r} is not encrypted, but a key was given")
        if self._key is not None and key_check(self._key, rec.store_id) != rec.key_check:
            raise WrongKeyError(f"the key does not open the store at {self.path!r}")

    async def _load(self, rec: record.Record) -> None:
        """Make generation ``rec`` the one read (and, on the writer, appended to)."""
        a, js = self.address, self._conn.js
        name = a.stream(rec.generation)
        if not await streams.exists(js, name):
            raise UnavailableError(f"{self.path}: the stream {name} of generation "
                                   f"{rec.generation} is missing")
        _first, last, self._bytes = await streams.last_seq(js, name)
        self._codec = StreamCodec(rec.store_id, rec.generation, self._envelope,
                                  self._compress, f"{self.path} generation {rec.generation}")
        self._generation, self._first = rec.generation, rec.first_seq
        self._last = last
        self._next = last + 1
        assert self._local is not None
        self._gen_dir = self._local.generation_dir(rec.generation)
        if self.read_only:
            old, self._tail = self._tail, Tail(rec.first_seq)
            if old is not None:
                await old.stop()
            await self._tail.start(js, name, a.subject(rec.generation))
        else:
            assert self._lease is not None
            self._publisher = Publisher(
                js, stream=name, subject=a.subject(rec.generation),
                msg_id=f"{rec.store_id.hex()}:{rec.generation}", lease=self._lease,
                timeout=a.timeout, where=self.path)

    def _release(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(HolomemError):
                self._conn.call(self._stop_loop_side(), 5.0, f"closing {self.path}")
            self._conn.close()
        if self._local is not None:
            self._local.close()
            self._local = None

    async def _stop_loop_side(self) -> None:
        if self._publisher is not None:
            await self._publisher.close()
        if self._tail is not None:
            await self._tail.stop()
        if self._watch is not None:
            await self._watch.stop()
        if self._lease is not None:
            await self._lease.release()

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the journal is closed")

    # -- state ------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._generation

    @property
    def gen_dir(self) -> str:
        """This node's directory for the live generation's local files."""
        return self._gen_dir

    @property
    def first_seq(self) -> int:
        return self._first

    @property
    def last_seq(self) -> int:
        """Writer: the last acknowledged transaction; follower: the last one seen."""
        return self._last

    @property
    def durable_seq(self) -> int:
        return self._last

    @property
    def store_id(self) -> bytes:
        return self._record.store_id

    @property
    def encrypted(self) -> bool:
        return self._record.encrypted

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failed(self) -> HolomemError | None:
        return self._publisher.failed if self._publisher is not None else None

    @property
    def key(self) -> bytes | None:
        return self._key

    @property
    def envelope(self) -> Envelope | None:
        return self._envelope

    @property
    def lease_lost(self) -> str | None:
        """Writer: why it can no longer acknowledge, or None while it holds the lease."""
        return self._lease.lost if self._lease is not None else None

    def stats(self) -> JournalStats:
        return JournalStats(self.generation, 1, self.first_seq, self.last_seq, self._bytes,
                            self.encrypted, f"quorum/{self.replicas}")

    # -- writing ----------------------------------------------------------------------
    def append(self, payloads: Sequence[bytes]) -> int:
        """Append one transaction; return its sequence number once the stream
        acknowledged it on a quorum. Errors: ``invalid``, ``limit``, ``closed``,
        ``read_only``, ``locked``, ``unavailable``."""
        seq = self.enqueue(payloads)
        self.wait(seq)
        return seq

    def enqueue(self, payloads: Sequence[bytes]) -> int:
        """Give a transaction its sequence number and send it; :meth:`wait` for it."""
        self._check_open()
        if self._publisher is None:
            raise ReadOnlyError("the journal was opened read-only")
        items = check_payloads(payloads)
        with self._lock:
            if self._publisher.failed is not None:
                raise self._publisher.failed
            seq = self._next
            data = self._codec.encode(seq, items)
            nc = self._conn.nc
            limit = nc.max_payload if nc is not None else 1 << 20
            if len(data) + 512 > limit:
                raise LimitError(f"a transaction of {len(data)} bytes exceeds the server's "
                                 f"message limit of {limit} bytes")
            item = Item(seq, data)
            self._inflight[seq] = item
            self._next = seq + 1
            self._conn.loop.call_soon_threadsafe(self._publisher.put, item)
            self._bytes += len(data)
        return seq

    def wait(self, seq: int) -> None:
        """Return once transaction ``seq`` is acknowledged. Errors: ``locked``,
        ``unavailable`` (then nothing later is acknowledged: reopen)."""
        if self.sync_mode == "none" or self._publisher is None:
            return
        self._wait(seq)

    def _wait(self, seq: int) -> None:
        with self._lock:
            pending = [s for s in self._inflight if s <= seq]
            items = [self._inflight[s] for s in sorted(pending)]
        for item in items:
            try:
                item.done.result(self.address.timeout + 5.0)
            except TimeoutError:
                raise UnavailableError(
                    f"{self.path}: transaction {item.seq} was not acknowledged in time") from None
            with self._lock:
                self._inflight.pop(item.seq, None)
                self._last = max(self._last, item.seq)

    def sync(self) -> None:
        """Wait for every transaction sent so far."""
        self._check_open()
        if self._publisher is not None:
            self._wait(self._next - 1)

    # -- reading ----------------------------------------------------------------------
    def replay(self, from_seq: int = 0) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` for every transaction from ``from_seq`` to :attr:`last_seq`.
        Errors: ``corrupt``, ``corrupt.auth``, ``unavailable``, ``closed``."""
        self._check_open()
        start, stop = max(from_seq, self._first), self._last
        codec = self._codec
        if self._tail is not None and start == self._tail.next:
            yield from self._replay_tail(stop)
            return
        name = self.address.stream(self._generation)
        subject = self.address.subject(self._generation)
        source = streams.messages(self._conn.js, name, subject, start, stop,
                                  self.address.timeout)
        try:
            while True:
                chunk = self._conn.call(_chunk(source, CHUNK), self.address.timeout * 2,
                                        f"reading {name}")
                for seq, data in chunk:
                    yield seq, codec.decode(seq, data)
                if len(chunk) < CHUNK:
                    return
        finally:
            with contextlib.suppress(HolomemError):
                self._conn.call(source.aclose(), 3.0, f"reading {name}")

    def _replay_tail(self, stop: int) -> Iterator[tuple[int, list[bytes]]]:
        tail, codec = self._tail, self._codec
        assert tail is not None
        while tail.next <= stop:
            if not tail.wait(min(stop, tail.next + CHUNK - 1), self.address.timeout):
                raise UnavailableError(f"{self.path}: the stream did not deliver message "
                                       f"{tail.next} within {self.address.timeout:g} s")
            for seq, data in tail.take(stop):
                yield seq, codec.decode(seq, data)

    def read(self, seq: int) -> list[bytes]:
        """The payloads of transaction ``seq``. Errors: ``not_found``, ``corrupt``,
        ``unavailable``."""
        self._check_open()
        if self._publisher is not None and self._last < seq < self._next:
            self._wait(seq)  # applied, still in flight: readable once acknowledged
        if not self._first <= seq <= self._last:
            raise NotFoundError(f"no transaction {seq} in generation {self._generation}")
        name = self.address.stream(self._generation)
        data = self._conn.call(streams.get(self._conn.js, name, seq), self.address.timeout,
                               f"reading {name}")
        if data is None:
            raise NotFoundError(f"no transaction {seq} in {name}")
        return self._codec.decode(seq, data)

    def digest(self, seq: int) -> bytes | None:
        """None: this journal keeps no checkpoint (its node's files go when it closes),
        so it binds none and trusts none."""
        return None

    # -- following --------------------------------------------------------------------
    def refresh(self) -> Refreshed:
        """Follower: make visible what the stream delivered since the last look (or move
        to the writer's new generation: ``reset``)."""
        self._check_open()
        if self._tail is None:
            return Refreshed(False, self._last + 1)
        if self.replaced():
            found = self._conn.call(record.read(self._meta, self.path), self.address.timeout,
                                    f"reading {self.path}")
            if found is None:
                raise NotFoundError(f"the store at {self.path!r} is gone")
            self._retired.append(self._generation)
            self._record, self._revision = found
            self._conn.call(self._load(found[0]), self.address.timeout, f"opening {self.path}")
            return Refreshed(True, self._first)
        if self._tail.drained_full:
            name = self.address.stream(self._generation)
            self._conn.call(self._tail.refill(self._conn.js, name,
                                              self.address.subject(self._generation)),
                            self.address.timeout, f"following {name}")
        self._last = max(self._last, self._tail.high)
        return Refreshed(False, self._tail.next)

    def replaced(self) -> bool:
        return self._watch is not None and self._watch.newest > self._generation

    def wait_for(self, seq: int, timeout: float) -> bool:
        """Follower: wait until transaction ``seq`` was delivered (not yet applied)."""
        return self._tail is not None and self._tail.wait(seq, timeout)

    def release_retired(self) -> None:
        if self._local is not None:
            for g in self._retired:
                self._local.erase_generation(g)
        self._retired.clear()

    # -- generations (compaction) -----------------------------------------------------
    def begin_rewrite(self) -> StreamRewrite:
        """Start the next generation's stream, empty, its first sequence number after
        this one's last. Errors: ``read_only``, ``unavailable``."""
        self._check_open()
        if self._publisher is None or self._lease is None:
            raise ReadOnlyError("the journal was opened read-only")
        self.sync()
        g = self._generation + 1
        assert self._local is not None
        rw = StreamRewrite(self._conn, self.address, self._record._replace(
            generation=g, first_seq=self._last + 1, erase=()), self._lease,
            self._local.generation_dir(g), self._envelope, self._compress, self.replicas)
        rw.begin()
        return rw

    def switch(self, rewrite: StreamRewrite) -> str:
        """Make ``rewrite`` live: replace the generation record (compare-and-set, naming
        the old stream as still to erase), then append to the new stream. Returns the
        old generation's local directory, for :meth:`erase_generation`."""
        self._check_open()
        old_gen, old_dir = self._generation, self._gen_dir
        new = rewrite.record._replace(erase=(old_gen,))
        self._revision = rewrite.finish(self._revision, new)
        cp.hit(P_PURGE_SWITCHED)
        self._record = new
        old = self._publisher
        self._conn.call(self._switch_publisher(old, new), self.address.timeout,
                        f"switching {self.path}")
        self._erase_pending[old_dir] = (old_gen, self._revision)
        return old_dir

    async def _switch_publisher(self, old: Publisher | None, rec: record.Record) -> None:
        if old is not None:
            await old.close()
        await self._load(rec)

    def erase_generation(self, gen_dir: str, *, zero: bool) -> int:
        """Erase a replaced generation: this node's local files (zeroed), every message
        of its stream (secure-erase deletes on every replica), the stream, and finally
        its name in the record. Returns the local bytes overwritten."""
        total = self._local.erase_generation(
            self._erase_pending[gen_dir][0]) if self._local is not None and \
            gen_dir in self._erase_pending else 0
        pending = self._erase_pending.pop(gen_dir, None)
        if pending is None:
            return total
        gen = pending[0]
        self._conn.call(self._erase_stream(gen), self.address.timeout * 4,
                        f"erasing generation {gen} of {self.path}")
        return total

    async def _erase_stream(self, generation: int) -> None:
        js = self._conn.js
        await streams.erase(js, self.address.stream(generation))
        cp.hit(P_PURGE_ERASED)
        rec = self._record._replace(erase=tuple(g for g in self._record.erase
                                               if g != generation))
        self._revision = await record.write(self._meta, rec, self._revision, self.path)
        self._record = rec

    # -- closing ----------------------------------------------------------------------
    def close(self) -> None:
        """Wait (bounded) for what was sent, give the lease back, erase the local files.
        Idempotent."""
        if self._closed:
            return
        try:
            if self._publisher is not None and self._publisher.failed is None:
                with contextlib.suppress(HolomemError):
                    self._wait(self._next - 1)
        finally:
            self._closed = True
            for item in self._inflight.values():
                if not item.done.done():
                    item.done.set_exception(ClosedError("the journal was closed"))
            self._release()

    def __enter__(self) -> StreamJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


async def _chunk(source: object, n: int) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    agen = source  # an async iterator of (seq, bytes)
    async for item in agen:  # type: ignore[attr-defined]
        out.append(item)
        if len(out) >= n:
            break
    return out

