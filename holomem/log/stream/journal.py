"""A store's journal on NATS JetStream: the same interface as the file journal.

Owns: :class:`StreamJournal` -- the journal's interface on a ``nats://`` store and the
state of one open journal (which generation is loaded, the writer's lease and sender or
the follower's tail, the generation record and its revision), and the rules that tie
them together: opening as the one writer or as a follower on any node, retrying while
a restarted cluster elects its leaders; what a read of a transaction still in flight
waits for; a follower's move to the writer's new generation; compaction's switch (the
record is replaced only after the new stream is complete; the old one is then securely
erased); what closing does. The work is done below it, each part in a module that never
imports this one: the connection (:mod:`~holomem.log.stream.loop`), the lease and the
generation record at open (:mod:`~holomem.log.stream.opening`), sending and waiting for
acknowledgements (:mod:`~holomem.log.stream.sending`, over
:mod:`~holomem.log.stream.publisher`), reading back
(:mod:`~holomem.log.stream.reading`), following (:mod:`~holomem.log.stream.follow`),
compaction's rewrite and the old generation's erasure
(:mod:`~holomem.log.stream.rewrite`). docs/scale-out.md describes the design,
FORMAT.md §11 the bytes. Imports the standard library, ``nats`` (through the stream
modules) and the log.

Acknowledged means: the stream leader stored the message and a quorum of its
replicas have it (JetStream acknowledges a replicated publish only then), and the
writer still held its lease when the acknowledgement came back.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Iterator, Sequence

from holomem.errors import (
    ClosedError,
    CorruptError,
    HolomemError,
    InvalidError,
    NotFoundError,
    ReadOnlyError,
    UnavailableError,
)
from holomem.log.envelope import Envelope, validate_key
from holomem.log.follower import Refreshed
from holomem.log.journal import JournalStats, check_payloads, check_sync
from holomem.log.opening import Recovery
from holomem.log.stream import opening, record, streams
from holomem.log.stream.codec import StreamCodec
from holomem.log.stream.follow import GenerationWatch, Tail
from holomem.log.stream.lease import Lease
from holomem.log.stream.local import LocalDir
from holomem.log.stream.loop import Connection
from holomem.log.stream.publisher import Publisher
from holomem.log.stream.reading import GenerationReader
from holomem.log.stream.rewrite import StreamRewrite, erase_replaced
from holomem.log.stream.sending import Sender
from holomem.log.stream.url import Address, parse
from holomem.log.writer import Tally


class StreamJournal:
    """A ``nats://`` store's journal. Use :meth:`open`; a context manager."""

    local_text = True  # every node keeps its own text segment
    durable_local = False  # ... in a scratch directory erased on close

    def __init__(self, path: str, *, key: bytes | None = None, sync: str = "full",
                 read_only: bool = False, create: bool = True, compress: bool = True) -> None:
        self._key = validate_key(key)
        check_sync(sync)
        self.address: Address = parse(path)
        self.path = self.address.url
        self.read_only = read_only
        self.sync_mode = sync
        self._compress = compress
        self._closed = False
        self._envelope = Envelope(self._key) if self._key is not None else None
        self._lease: Lease | None = None
        self._publisher: Publisher | None = None
        self._sender: Sender | None = None
        #: the transactions acknowledged since the open, across generations (stats())
        self._tally = Tally()
        self._tail: Tail | None = None
        self._watch: GenerationWatch | None = None
        self._retired: list[int] = []
        self._erase_pending: dict[str, tuple[int, int]] = {}
        self.recovery = Recovery((), ())
        self._local: LocalDir | None = None
        self._conn = Connection.open(self.address.servers, self.address.timeout)
        try:
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
        just restarted elects its leaders) for up to ``timeout`` seconds.

        This node's local directory is made only once the store is found (or created):
        an open refused before (``not_found``, ``key.*``, ``locked``) leaves nothing
        on this node, as it leaves no bucket on the servers (:meth:`_find`)."""
        a = self.address
        deadline = time.monotonic() + a.timeout + a.wait
        while True:
            try:
                self._conn.call(self._find(create), a.timeout + a.wait + a.lease,
                                f"opening {self.path}")
                if self._local is None:
                    self._local = LocalDir.create(a.local, a.store)
                self._conn.call(self._load_first(), a.timeout + a.wait + a.lease,
                                f"opening {self.path}")
                return
            except UnavailableError:
                with contextlib.suppress(HolomemError):
                    self._conn.call(self._stop_loop_side(), 5.0, f"opening {self.path}")
                self._lease, self._publisher, self._sender = None, None, None
                self._tail, self._watch = None, None
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.25)

    async def _find(self, create: bool) -> None:
        """The generation record, and the writer's lease. Only a writer's open that may
        create the store creates its buckets: another finds them or is ``not_found``
        with nothing made."""
        a, js = self.address, self._conn.js
        self.replicas = a.replicas or opening.default_replicas(self._conn)
        writer = not self.read_only
        meta = (await record.bucket(js, a.meta_bucket, self.replicas) if writer and create
                else await record.existing_bucket(js, a.meta_bucket))
        if meta is None or (writer and not create
                            and await record.read(meta, self.path) is None):
            raise NotFoundError(f"no holomem store at {self.path!r}")
        self._meta = meta
        if writer:
            self._lease = await opening.take_lease(js, a, self.replicas, self.path)
        self._record, self._revision = await opening.settle_record(
            js, a, self._meta, key=self._key, writer=writer, create=create,
            replicas=self.replicas, where=self.path)

    async def _load_first(self) -> None:
        await self._load(self._record)
        if self.read_only:
            self._watch = GenerationWatch(self._meta, self._record.generation, self.path)

    async def _load(self, rec: record.Record) -> None:
        """Make generation ``rec`` the one read (and, on the writer, appended to). A
        follower's load that fails leaves the generation it had loaded as it was."""
        a, js = self.address, self._conn.js
        name = a.stream(rec.generation)
        if not await streams.exists(js, name):
            raise UnavailableError(f"{self.path}: the stream {name} of generation "
                                   f"{rec.generation} is missing")
        _first, last_stream, size = await streams.last_seq(js, name)
        codec = StreamCodec(rec.store_id, rec.generation, self._envelope, self._compress,
                            f"{self.path} generation {rec.generation}")
        last = await self._last_transaction(name, last_stream, rec.first_seq, codec)
        tail = None
        if self.read_only:
            tail = Tail(rec.first_seq, codec)
            try:
                await tail.start(js, name, a.subject(rec.generation))
            except BaseException:
                await tail.stop()
                raise
        assert self._local is not None
        self._bytes, self._codec = size, codec
        self._reader = GenerationReader(self._conn, a, rec.generation, rec.first_seq,
                                        codec, self.path)
        self._generation, self._first = rec.generation, rec.first_seq
        self._last = last  # a follower's: the writer's is its sender's
        self._gen_dir = self._local.generation_dir(rec.generation)
        if tail is not None:
            old, self._tail = self._tail, tail
            if old is not None:
                await old.stop()
        else:
            assert self._lease is not None
            self._publisher = Publisher(
                js, stream=name, subject=a.subject(rec.generation),
                msg_id=f"{rec.store_id.hex()}:{rec.generation}", lease=self._lease,
                timeout=a.timeout, where=self.path, last_stream=last_stream)
            self._sender = Sender(self._conn, self._publisher, self._codec, last=last,
                                  timeout=a.timeout, where=self.path, tally=self._tally)

    async def _last_transaction(self, name: str, last_stream: int, first: int,
                                codec: StreamCodec) -> int:
        """The number of the last transaction in stream ``name``: its last message's
        last frame's (``first - 1`` when it holds none). Errors: ``corrupt``,
        ``unavailable``."""
        if last_stream < first:
            return first - 1
        data = await streams.get(self._conn.js, name, last_stream)
        if data is None:
            raise UnavailableError(f"{self.path}: {name} lost its last message "
                                   f"{last_stream} while it was opened")
        last = codec.split(last_stream, data)[-1][0]
        if last < last_stream:
            raise CorruptError(f"{self.path}: {name} message {last_stream} ends with "
                               f"transaction {last}, before its own number")
        return last

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
        return self._sender.last if self._sender is not None else self._last

    @property
    def durable_seq(self) -> int:
        return self.last_seq

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
        sent = self._sender.sent if self._sender is not None else 0
        return JournalStats(self.generation, 1, self.first_seq, self.last_seq,
                            self._bytes + sent, self.encrypted, f"quorum/{self.replicas}",
                            0, self._tally.acknowledged)

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
        if self._sender is None:
            raise ReadOnlyError("the journal was opened read-only")
        return self._sender.send(check_payloads(payloads), limit=self._conn.max_payload)

    def wait(self, seq: int) -> None:
        """Return once transaction ``seq`` is acknowledged. Errors: ``locked``,
        ``unavailable`` (then nothing later is acknowledged: reopen)."""
        if self.sync_mode == "none" or self._sender is None:
            return
        self._sender.wait(seq)

    def sync(self) -> None:
        """Wait for every transaction sent so far."""
        self._check_open()
        if self._sender is not None:
            self._sender.wait_all()

    # -- reading ----------------------------------------------------------------------
    def replay(self, from_seq: int = 0) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` for every transaction from ``from_seq`` to :attr:`last_seq`.
        On a follower, a replay from where its tail stands takes what the tail
        delivered; any other is read from the stream, and once read to its end the tail
        goes on after it (what it had buffered before is dropped): a caller that reads
        to the end holds everything up to :attr:`last_seq`. Errors: ``corrupt``,
        ``corrupt.auth``, ``unavailable``, ``closed``."""
        self._check_open()
        start, stop = max(from_seq, self._first), self.last_seq
        if self._tail is not None and start == self._tail.next:
            yield from self._reader.replay_tail(self._tail, stop)
        else:
            yield from self._reader.replay(start, stop)
            if self._tail is not None:
                # Read to the end past the tail (a follower's rebuild after a failed
                # one left its tail behind): it goes on after what was read.
                self._tail.skip_to(stop + 1)

    def read(self, seq: int) -> list[bytes]:
        """The payloads of transaction ``seq``. Errors: ``not_found``, ``corrupt``,
        ``unavailable``."""
        self._check_open()
        if self._sender is not None and self._sender.in_flight(seq):
            self._sender.wait(seq)  # applied, still in flight: readable once acknowledged
        if not self._first <= seq <= self.last_seq:
            raise NotFoundError(f"no transaction {seq} in generation {self._generation}")
        return self._reader.read(seq)

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
            return Refreshed(False, self.last_seq + 1)
        if self.replaced():
            found = self._conn.call(record.read(self._meta, self.path), self.address.timeout,
                                    f"reading {self.path}")
            if found is None:
                raise NotFoundError(f"the store at {self.path!r} is gone")
            left = self._generation
            self._conn.call(self._load(found[0]), self.address.timeout, f"opening {self.path}")
            self._retired.append(left)
            self._record, self._revision = found
            return Refreshed(True, self._first)
        if self._tail.stalled:
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
    def refile(self, rewrite: StreamRewrite, seqs: Sequence[int]) -> list[int]:
        """Carry transactions ``seqs`` (ascending) of this generation into ``rewrite``:
        each one's payloads read and published again as the next transaction there (a
        stream's messages are not moved as bytes). Errors: those of :meth:`read` and
        of publishing; ``invalid`` when ``seqs`` do not ascend."""
        if any(b <= a for a, b in itertools.pairwise(seqs)):
            raise InvalidError("the transactions to refile must ascend")
        return [rewrite.append(self.read(s)) for s in seqs]

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
            generation=g, first_seq=self.last_seq + 1, erase=()), self._lease,
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
        self._record, self._revision = self._conn.call(
            erase_replaced(self._conn.js, self.address, self._meta, self._record,
                           self._revision, gen),
            self.address.timeout * 4, f"erasing generation {gen} of {self.path}")
        return total

    # -- closing ----------------------------------------------------------------------
    def close(self) -> None:
        """Wait (bounded) for what was sent, give the lease back, erase the local files.
        Idempotent."""
        if self._closed:
            return
        try:
            if self._sender is not None and self._sender.publisher.failed is None:
                with contextlib.suppress(HolomemError):
                    self._sender.wait_all()
        finally:
            self._closed = True
            if self._sender is not None:
                self._sender.close()
            self._release()

    def __enter__(self) -> StreamJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

