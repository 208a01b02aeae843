"""The journal: a store directory of segmented, checksummed, durable transactions.

Owns: the journal's public interface and the state of one open journal -- which
generation is loaded, the writer's appender, the lock -- and the rules that tie them
together (when the watermark is recorded, what a read that failed on a replaced
generation means, what closing does). The work is done below it, each part in a module
of its own that never imports this one: opening and recovery
(:mod:`~holomem.log.opening`), reading by sequence number
(:mod:`~holomem.log.replay`), following the writer read-only
(:mod:`~holomem.log.follower`), appending (:mod:`~holomem.log.writer`), generations and
compaction's rewrite (:mod:`~holomem.log.generation`). Imports the standard library,
:mod:`holomem.errors` and those modules; it stores opaque payloads and knows nothing
of what they mean. FORMAT.md documents every file.

A follower (read-only) keeps every segment of its generation open, so that a
compaction that unlinks them does not take them away mid-read; when it moves to a
new generation (:meth:`Journal.refresh`), the old one's segments stay readable by
sequence number until :meth:`Journal.release_retired`. A read that fails because the
generation was replaced under it (a purge zeroes the old files before unlinking
them) is ``unavailable``, never ``corrupt``: the store is healthy, and the next
refresh moves to the new generation.

    with Journal.open(path) as j:
        seq = j.append([b"one payload", b"another, same transaction"])
        for seq, payloads in j.replay():
            ...
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from holomem.errors import (
    ClosedError,
    HolomemError,
    InvalidError,
    NotFoundError,
    ReadOnlyError,
)
from holomem.log import fs, opening
from holomem.log.checkpoint import journal_digest
from holomem.log.envelope import Envelope, validate_key
from holomem.log.follower import Follower, Refreshed
from holomem.log.format import DEFAULT_SEGMENT_SIZE, MIN_SEGMENT_SIZE
from holomem.log.generation import Rewrite, erase, list_generations
from holomem.log.opening import Recovery
from holomem.log.reader import Problem
from holomem.log.replay import SegmentReader
from holomem.log.watermark import Watermark
from holomem.log.writer import SYNC_MODES, Appender, Segment, Tally

__all__ = ["Journal", "JournalStats", "Recovery", "Refreshed", "Rewrite"]


class JournalStats(NamedTuple):
    generation: int
    segments: int
    first_seq: int
    last_seq: int
    bytes: int
    encrypted: bool
    sync: str
    #: since this journal was opened, across its generations: the fsyncs of its
    #: segment files (a stream journal makes none), and the transactions it
    #: acknowledged (:class:`~holomem.log.writer.Tally`)
    fsyncs: int = 0
    acknowledged: int = 0


def check_sync(sync: object) -> None:
    """``invalid_request`` unless ``sync`` is one of :data:`SYNC_MODES` (the one check
    of a store's ``sync`` option, for every journal)."""
    if not isinstance(sync, str) or sync not in SYNC_MODES:
        raise InvalidError(f"sync must be one of {', '.join(SYNC_MODES)}, got {sync!r}")


def _check_options(sync: str, segment_size: int) -> None:
    check_sync(sync)
    if isinstance(segment_size, bool) or not isinstance(segment_size, int) or (
            segment_size < MIN_SEGMENT_SIZE):
        raise InvalidError(f"segment_size must be an integer >= {MIN_SEGMENT_SIZE}")


def check_payloads(payloads: Sequence[bytes]) -> list[bytes]:
    """The payloads of one transaction, checked: a sequence of one or more bytes."""
    if isinstance(payloads, (bytes, bytearray, memoryview, str)):
        raise InvalidError("append takes a sequence of payloads (bytes), not one payload")
    try:
        it = iter(payloads)
    except TypeError:
        raise InvalidError(
            f"append takes a sequence of payloads (bytes), got {type(payloads).__name__}"
        ) from None
    if type(payloads) is list and set(map(type, payloads)) == {bytes}:
        return payloads  # the common case, checked without a Python step per payload
    items: list[bytes] = []
    for p in it:
        if not isinstance(p, (bytes, bytearray, memoryview)):
            raise InvalidError(f"payloads must be bytes, got {type(p).__name__}")
        items.append(bytes(p))
    if not items:
        raise InvalidError("a transaction needs at least one payload")
    return items


class Journal:
    """A store's journal. Use :meth:`open`; a context manager."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key: bytes | None = None,
        sync: str = "full",
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        read_only: bool = False,
        create: bool = True,
        compress: bool = True,
    ) -> None:
        """Open (or create) the journal of the store directory ``path``.

        Args:
            key: 32 raw bytes for an encrypted store, or None.
            sync: ``"full"`` (every append fsyncs), ``"batch"`` (group commit) or
                ``"none"`` (no fsync until :meth:`sync` or close; not durable).
            segment_size: bytes after which the writer starts a new segment.
            read_only: open as a follower: no lock, never writes.
            create: create the store if the directory holds none.
            compress: zstd-compress frames when it pays.

        Errors: ``invalid``, ``not_found``, ``locked``, ``key.*``, ``corrupt.*``,
        ``format.version``, ``io``.
        """
        self._key = validate_key(key)
        _check_options(sync, segment_size)
        self.path = os.path.abspath(os.fspath(path))
        self.read_only = read_only
        self.sync_mode = sync
        self.segment_size = segment_size
        self._compress = compress
        self._lock_fd: int | None = None
        self._appender: Appender | None = None
        #: what the writer did since the open, kept across generations (stats())
        self._tally = Tally()
        #: a follower reads through its Follower's reader (a failed read there can mean
        #: that a compaction replaced the generation: ``unavailable``, not ``corrupt``)
        self._follower = Follower(self.path, lambda g: self._load(g)[0]) if read_only else None
        self._reader = self._follower.reader if self._follower else SegmentReader()
        #: writer: the watermark as last read or written (FORMAT.md §7.1)
        self._watermark: Watermark | None = None
        self._closed = False
        self.recovery = Recovery((), ())
        self.store_id = b""
        self.encrypted = False
        self._envelope: Envelope | None = None
        try:
            self._open(create)
        except BaseException:
            self._release()
            raise

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, key: bytes | None = None,
             sync: str = "full", segment_size: int = DEFAULT_SEGMENT_SIZE,
             read_only: bool = False, create: bool = True, compress: bool = True) -> Journal:
        """Open (or create) a journal; the same as the constructor."""
        return cls(path, key=key, sync=sync, segment_size=segment_size, read_only=read_only,
                   create=create, compress=compress)

    def _open(self, create: bool) -> None:
        self._lock_fd = opening.prepare(self.path, read_only=self.read_only, create=create)
        live, tmp = list_generations(self.path)
        erased: list[str] = []
        if not live:
            if self.read_only or not create:
                raise NotFoundError(f"no holomem store at {self.path!r}")
            erased = opening.erase_leftovers(self.path, live, tmp)  # (a first one, unfinished)
            opening.initialize(self.path, self._key)
            live, tmp = [1], []
        backups: list[str | None] = []
        if self._follower is not None:
            truncated = self._follower.load_newest(live[-1])
        else:
            truncated, backups = self._load(live[-1])
            # Only once the load accepted the key (and the format): an open that is
            # refused leaves every file as it found it.
            erased += opening.erase_leftovers(self.path, live, tmp)
            assert self._appender is not None
            opening.settle(self._appender, self.gen_dir, self.path)
            self._mark_durable()
        self.recovery = Recovery(tuple(truncated), tuple(erased), tuple(backups))

    def _load(self, generation: int) -> tuple[list[Problem], list[str | None]]:
        """Load generation ``generation`` (nothing changes if that fails); return the torn
        tails found and where the writer saved what it cut of them. The writer gets an
        appender (to settle before use)."""
        g = opening.load(self.path, generation, key=self._key, compress=self._compress,
                         writer=not self.read_only)
        self.store_id, self.encrypted, self._envelope = g.store_id, g.encrypted, g.envelope
        self._reader.load(generation, g.gen_dir, g.segments, g.codec, g.pinned)
        if not self.read_only:
            self._watermark = g.watermark
            self._appender = Appender(gen_dir=g.gen_dir, segments=g.segments, codec=g.codec,
                                      sync=self.sync_mode, segment_size=self.segment_size,
                                      tally=self._tally)
        return g.problems, g.backups

    def _mark_durable(self) -> None:
        """Writer: record that every transaction in the journal is on disk."""
        self._watermark = opening.mark_durable(self.gen_dir, self.store_id, self.generation,
                                               self.segments[-1], self._watermark)

    def _release(self) -> None:
        self._reader.close()
        self._reader.retired.clear()
        if self._lock_fd is not None:
            fs.unlock(self._lock_fd)
            self._lock_fd = None

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the journal is closed")

    # -- state ------------------------------------------------------------------------
    @property
    def generation(self) -> int:
        return self._reader.generation

    @property
    def gen_dir(self) -> str:
        return self._reader.gen_dir

    @property
    def segments(self) -> list[Segment]:
        return self._reader.segments

    @property
    def first_seq(self) -> int:
        return self.segments[0].first_seq

    @property
    def last_seq(self) -> int:
        """The last appended transaction (0 if none).

        On the writer, the last *acknowledged* one: a frame another thread is still
        writing or syncing is not readable yet (nor counted) until its append returns.
        """
        if self._appender is not None:
            return self._appender.durable_seq
        return self.segments[-1].last_seq

    @property
    def durable_seq(self) -> int:
        """The last transaction known durable (in ``none`` mode: written)."""
        return self._appender.durable_seq if self._appender is not None else self.last_seq

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def durable_local(self) -> bool:
        """The store directory's files stay: checkpoints in it are read by later opens."""
        return True

    @property
    def local_text(self) -> bool:
        """The writer keeps the text segment; a follower reads the writer's."""
        return not self.read_only

    @property
    def failed(self) -> HolomemError | None:
        return self._appender.failed if self._appender is not None else None

    @property
    def key(self) -> bytes | None:
        return self._key

    @property
    def envelope(self) -> Envelope | None:
        return self._envelope

    def stats(self) -> JournalStats:
        """The journal's figures; they stay readable after :meth:`close` (its last)."""
        return JournalStats(
            self.generation, len(self.segments), self.first_seq, self.last_seq,
            sum(s.end for s in self.segments), self.encrypted, self.sync_mode,
            self._tally.fsyncs, self._tally.acknowledged,
        )

    # -- writing ----------------------------------------------------------------------
    def append(self, payloads: Sequence[bytes]) -> int:
        """Append one transaction of ``payloads``; return its sequence number.

        In ``full`` and ``batch`` mode the call returns only after an fsync covering
        the transaction returned. The transaction is atomic: after any crash it is
        wholly present or wholly absent. (``enqueue`` then ``wait``.)

        Errors: ``invalid``, ``closed``, ``read_only``, ``io.fsync``, ``io.failed``, ``io``.
        """
        return self._give(payloads, wait=True)

    def enqueue(self, payloads: Sequence[bytes]) -> int:
        """Give a transaction its sequence number, in order, without waiting for batch mode's
        group sync (``full`` mode still syncs here). Call :meth:`wait` before telling
        anyone it is durable. Errors: as :meth:`append`.
        """
        return self._give(payloads, wait=False)

    def _give(self, payloads: Sequence[bytes], *, wait: bool) -> int:
        """:meth:`append` (``wait``) or :meth:`enqueue`: the checks both make."""
        self._check_open()
        appender = self._appender
        if appender is None:
            raise ReadOnlyError("the journal was opened read-only")
        items = check_payloads(payloads)
        try:
            return appender.append(items) if wait else appender.enqueue(items)
        except ValueError as exc:  # the frame codec's size limits
            raise InvalidError(str(exc)) from exc

    def wait(self, seq: int) -> None:
        """Return once transaction ``seq`` is durable; in batch mode, share a group sync.

        Errors: ``io.fsync``, ``io.failed`` (then nothing at or after the failed group is
        durable, and the journal must be reopened).
        """
        if self._appender is not None:
            self._appender.wait(seq)

    def sync(self) -> None:
        """fsync everything appended so far (whatever the sync mode)."""
        self._check_open()
        if self._appender is not None:
            self._appender.sync()

    # -- generations (compaction) -----------------------------------------------------
    def begin_rewrite(self) -> Rewrite:
        """Start the next generation, empty, in ``gen-N.tmp``; its first sequence number
        follows this generation's last, so sequence numbers keep growing.

        The caller appends the live state to it, syncs any derived file it writes in
        ``Rewrite.dir``, then calls :meth:`switch`. Errors: ``read_only``, ``io``.
        """
        self._check_open()
        if self._appender is None:
            raise ReadOnlyError("the journal was opened read-only")
        self._appender.sync()
        return Rewrite.begin(self.path, self.generation + 1, self.store_id, self.last_seq + 1,
                             key=self._key, envelope=self._envelope, compress=self._compress,
                             segment_size=self.segment_size)

    def refile(self, rewrite: Rewrite, seqs: Sequence[int]) -> list[int]:
        """Copy transactions ``seqs`` of this generation (ascending) into ``rewrite`` as
        bytes, each the next transaction there; return their new sequence numbers.

        A frame keeps its body -- compressed or not, nothing decoded -- and gets a new
        header (its new sequence number) and a checksum under its new segment's salt;
        in an encrypted store the body is opened under its old associated data and
        sealed under the new one. What a transaction holds is the caller's to judge: a
        transaction is copied whole or not at all. Errors: ``corrupt`` (a frame does not
        verify: nothing of it is copied, and the rewrite should be abandoned),
        ``corrupt.auth``, ``not_found`` (no such transaction), ``io``,
        ``invalid`` (``seqs`` do not ascend).
        """
        self._check_open()
        if self._appender is None:
            raise ReadOnlyError("the journal was opened read-only")
        try:
            frames = self._reader.frames(list(seqs), self.last_seq)
            return rewrite.refile(frames)
        except ValueError as exc:
            raise InvalidError(str(exc)) from exc

    def switch(self, rewrite: Rewrite) -> str:
        """Make ``rewrite`` the live generation, atomically; return the old one's directory.

        Sync every segment, write the new generation's watermark (all of it is durable),
        sync the directory, rename ``gen-N.tmp`` to ``gen-N``, sync the store directory.
        A crash before the rename leaves the old generation live (and the ``.tmp`` a
        leftover the next open erases); after it, the new one. The old generation's
        files are left for :meth:`erase_generation`.
        """
        self._check_open()
        rewrite.finish()
        old = self.gen_dir
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        self._reader.close()
        self._load(rewrite.generation)
        return old

    def erase_generation(self, gen_dir: str, *, zero: bool) -> int:
        """Remove a replaced generation's files (see :func:`~holomem.log.generation.erase`);
        return the bytes overwritten."""
        return erase(gen_dir, zero=zero)

    # -- reading ----------------------------------------------------------------------
    def replay(self, from_seq: int = 0) -> Iterator[tuple[int, list[bytes]]]:
        """Yield ``(seq, payloads)`` for every transaction with ``seq >= from_seq``.

        Errors: ``corrupt.auth`` (a frame fails authentication), ``corrupt``, ``closed``;
        on a follower, ``unavailable`` if a compaction replaced the generation while it
        was being read (refresh, then replay the new one).
        """
        self._check_open()
        yield from self._reader.replay(from_seq, self.last_seq)

    def read(self, seq: int) -> list[bytes]:
        """The payloads of transaction ``seq``.

        On a follower that moved to a new generation, the transactions of the ones it
        left stay readable until :meth:`release_retired`. Errors: ``not_found``,
        ``corrupt``, ``io``; on a follower, ``unavailable`` (as :meth:`replay`).
        """
        self._check_open()
        return self._reader.read(seq, self.last_seq)

    def digest(self, seq: int) -> bytes:
        """The journal's digest up to transaction ``seq`` of the live generation, which a
        checkpoint of ``seq`` is bound to (:func:`holomem.log.checkpoint.journal_digest`)."""
        return journal_digest(list(self.segments), seq)

    # -- following --------------------------------------------------------------------
    def refresh(self) -> Refreshed:
        """Follower only: pick up transactions the writer appended since the last look.

        Returns ``Refreshed(reset, from_seq)``: replay from ``from_seq`` to catch up;
        if ``reset`` is True the writer switched to a new generation (compaction) and
        everything must be rebuilt by replaying from ``from_seq`` (the new first). The
        generation left behind stays readable (:meth:`read`) until
        :meth:`release_retired`. Errors: ``not_found``, ``corrupt``, ``io``,
        ``unavailable`` (compactions kept replacing the generation while it was read).
        """
        self._check_open()
        if self._follower is None:
            return Refreshed(False, self.last_seq + 1)
        return self._follower.refresh()

    def replaced(self) -> bool:
        """Follower: True once the writer switched to a newer generation than the one
        loaded (a compaction), so :meth:`refresh` would reset. Two ``stat`` calls."""
        return self._follower is not None and self._follower.replaced()

    def release_retired(self) -> None:
        """Follower: close the generations :meth:`refresh` moved away from; their
        transactions are no longer readable."""
        self._reader.release_retired()

    # -- closing ----------------------------------------------------------------------
    def close(self) -> None:
        """Sync and close (the writer records its watermark). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._appender is not None:
                self._appender.close()
                if self._appender.failed is None:
                    self._mark_durable()  # the close's fsync returned: all of it is durable
        finally:
            self._release()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
