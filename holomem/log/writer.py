"""Appending frames to the live segment: rotation, durability modes, group commit.

Owns: the write path of the journal. Imports the standard library and the other
``holomem.log`` modules. FORMAT.md ("Writing") describes the protocol.

Invariants kept here:

- frames are written in sequence order, and a segment only ever grows at its end;
- before a new segment is created the previous one is synced, so only the last
  segment of a generation can ever have an unsynced (torn) tail;
- in ``batch`` mode one thread (the leader) writes every pending frame with a
  single ``write`` and syncs once; each appender returns only when a sync that
  covers its own frame has returned. The frames one leader takes form a *group*
  (:mod:`holomem.log.group`), and an appender parks on its own group, so a finished
  sync wakes the appenders it made durable and nobody else (and one member of the
  next group, to lead it); while one group is written and synced, the next one
  fills, and it is written only once that sync returned (:data:`MAX_SYNCS_IN_FLIGHT`);
- a group is led once it holds as many transactions as the last group made durable
  plus those in flight and queued then (the callers of a busy store come back), or once its first
  appender waited as long as the last sync took: the wait only decides how the
  frames are grouped, never whether an appender returns before its sync;
- after any write or sync failure the appender is *failed*: it acknowledges
  nothing more, and the journal must be reopened (a failed fsync is never retried);
  so is a write or sync that ended in any other exception (see :func:`_failure`).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from holomem.errors import (
    AuthenticationError,
    ClosedError,
    CorruptError,
    HolomemError,
    JournalFailedError,
    StorageIOError,
)
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.format import (
    FRAME_CHECKSUMMED,
    FRAME_HEADER_SIZE,
    READ_VERSION,
    SEGMENT_HEADER_SIZE,
    WRITE_VERSION,
    segment_name,
)
from holomem.log.frame import BadBody, Binding, FrameCodec
from holomem.log.group import Group
from holomem.log.segment import SegmentHeader

P_FRAME_WRITE_BEFORE = cp.point("journal.frame.write.before", "a frame is about to be written")
P_FRAME_WRITE_AFTER = cp.point("journal.frame.write.after", "a frame was written, not synced")
P_SEGMENT_ROTATE = cp.point(
    "journal.segment.rotate", "the full segment is synced, its successor not yet created")
P_SEGMENT_CREATE = cp.point("journal.segment.create", "a new segment file exists, header unwritten")
P_SEGMENT_HEADER = cp.point("journal.segment.header", "a new segment's header is written, unsynced")
P_SEGMENT_READY = cp.point("journal.segment.ready", "a new segment is durable, no frame in it yet")

SYNC_MODES = ("full", "batch", "none")

#: Makes a frame given its sequence number and where it goes.
MakeFrame = Callable[[int, Binding], bytes]


class Refile(NamedTuple):
    """A frame of another generation to take over as bytes: the frame at ``off`` of
    ``data`` (read from the segment file ``path``), written at ``where`` as
    transaction ``seq``."""

    data: bytes | memoryview
    off: int
    where: Binding
    seq: int
    path: str


#: Groups whose sync may run at once in batch mode. One: a later group's sync that
#: finished while an earlier one was still running would acknowledge the earlier
#: group's bytes too, and if the earlier sync then fails those bytes may be lost under
#: an acknowledged write (the kernel reports a writeback error to one caller only).
#: This disk runs overlapping fsyncs one after the other anyway.
MAX_SYNCS_IN_FLIGHT = 1
#: The longest a batch-mode group waits for its expected appenders (seconds): the last
#: sync's duration, but no more than this after a slow one.
MAX_GATHER = 0.002


@dataclass(eq=False)
class Segment:
    """What the journal knows of one segment of the live generation."""

    number: int
    path: str
    header: SegmentHeader
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    end: int = SEGMENT_HEADER_SIZE
    #: the stored checksum of each of those frames, 8 bytes each as in the file (what a
    #: checkpoint's journal digest hashes: holomem.log.checkpoint.journal_digest)
    checksums: bytearray = field(default_factory=bytearray)

    @property
    def first_seq(self) -> int:
        return self.header.first_seq

    @property
    def last_seq(self) -> int:
        """Sequence number of the last frame (first_seq - 1 when empty)."""
        return self.header.first_seq + len(self.offsets) - 1

    def binding(self) -> Binding:
        h = self.header
        return Binding(h.store_id, h.generation, h.number, h.salt)


def _failure(exc: BaseException) -> HolomemError:
    """The journal's failure after ``exc`` ended one of its writes or syncs.

    An exception that is not the file layer's (KeyboardInterrupt, one raised by a signal
    handler) leaves the write's bytes unknown -- none, some or all of them written --
    and may have replaced a failed fsync's error, which the kernel reports only once:
    a later write after a hole, or a later sync, could then acknowledge what is lost.
    """
    if isinstance(exc, HolomemError):
        return exc
    return StorageIOError(
        f"a write or sync of the journal was interrupted ({type(exc).__name__}); "
        "what reached the disk is unknown")


def create_segment(gen_dir: str, header: SegmentHeader) -> Segment:
    """Create a segment file with ``header``, durably (file and directory synced)."""
    path = os.path.join(gen_dir, segment_name(header.number))
    fd = fs.create(path)
    try:
        cp.hit(P_SEGMENT_CREATE)
        fs.write_at(fd, header.pack(), 0, path)
        cp.hit(P_SEGMENT_HEADER)
        fs.sync(fd, path)
    finally:
        fs.close(fd)
    fs.sync_dir(gen_dir)
    cp.hit(P_SEGMENT_READY)
    return Segment(header.number, path, header)


def next_header(prev: SegmentHeader, first_seq: int) -> SegmentHeader:
    return SegmentHeader(
        WRITE_VERSION, READ_VERSION, prev.flags, prev.store_id, prev.generation,
        prev.number + 1, first_seq, int.from_bytes(os.urandom(8), "little"), prev.key_check,
    )


class Tally:
    """What a journal's writers did since it was opened, for its statistics: the fsyncs
    of its segment files, and the transactions acknowledged (made durable: in ``none``
    mode, written). A journal keeps one across its generations' appenders; each count
    only grows, and is changed under the appender's lock."""

    __slots__ = ("acknowledged", "fsyncs")

    def __init__(self) -> None:
        self.fsyncs = 0
        self.acknowledged = 0


class Appender:
    """Writes transactions at the end of the live segment. Thread safe."""

    def __init__(self, *, gen_dir: str, segments: list[Segment], codec: FrameCodec,
                 sync: str, segment_size: int, tally: Tally | None = None) -> None:
        assert sync in SYNC_MODES
        #: the counts of this appender's fsyncs and acknowledgements (the journal's)
        self.tally = tally if tally is not None else Tally()
        self.gen_dir = gen_dir
        self.segments = segments  # shared with the journal; the last one is written here
        self.codec = codec
        self.sync_mode = sync
        self.segment_size = segment_size
        self._lock = lock = threading.Lock()
        self._cond = threading.Condition(lock)  # drains (rotation, sync, close) wait here
        cur = segments[-1]
        self._fd = fs.open_rw(cur.path)
        self._next_seq = cur.last_seq + 1
        self._reserved = cur.end  # end of the last encoded frame (pending included)
        self._written = cur.end  # end of what was handed to write()
        self._durable = cur.last_seq  # highest seq known synced
        self._pending: list[bytes] = []
        self._open = Group(cur.last_seq)  # the group the pending frames belong to
        self._taken = cur.last_seq  # last seq a leader took (written or being written)
        self._in_flight: list[Group] = []  # taken groups not yet durable, oldest first
        self._flushing = False
        self._syncing = 0  # syncs running right now (at most MAX_SYNCS_IN_FLIGHT)
        #: batch mode: transactions the next group waits for (those of the group made
        #: durable last, whose callers may be about to append again, those of the groups
        #: still in flight, and those queued then), and how long a sync took last (the
        #: most a group waits for them)
        self._expect = 1
        self._sync_time = 0.0
        #: the group whose first appender waits for it to fill (None: no such wait)
        self._gathering: Group | None = None
        self._failed: HolomemError | None = None
        self._closed = False

    # -- state ------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        return self._next_seq - 1

    @property
    def durable_seq(self) -> int:
        return self._durable

    @property
    def failed(self) -> HolomemError | None:
        return self._failed

    def _check(self) -> None:
        if self._failed is not None:
            raise JournalFailedError(
                f"the journal stopped after an earlier failure ({self._failed.message}); "
                "reopen the store to recover from what is durable"
            ) from self._failed

    def _fail(self, exc: HolomemError) -> None:
        self._failed = exc
        self._wake_all()

    def _wake_all(self) -> None:
        for g in self._in_flight:
            g.waiters.wake_all()
        self._open.waiters.wake_all()
        self._cond.notify_all()

    # -- append -----------------------------------------------------------------------
    def append(self, payloads: Sequence[bytes]) -> int:
        """Append one transaction; return its sequence number once durable per the mode.

        (:meth:`enqueue` then :meth:`wait`, under one taking of the lock.)
        """
        self._lock.acquire()
        try:
            seq = self._enqueue_locked(payloads)
        except BaseException:
            self._lock.release()
            raise
        self._wait_locked(seq)
        return seq

    def enqueue(self, payloads: Sequence[bytes]) -> int:
        """Give the transaction its sequence number and frame, in order; return the number.

        ``full``: written and synced before this returns; ``none``: written;
        ``batch``: queued for the next group commit, durable only after :meth:`wait`.
        """
        with self._lock:
            seq = self._enqueue_locked(payloads)
            if self._gathering is self._open and len(self._pending) >= self._expect:
                # The group is full; this caller may not wait soon: its gatherer leads.
                self._open.waiters.notify()
            return seq

    def _enqueue_locked(self, payloads: Sequence[bytes]) -> int:
        return self._enqueue_frame_locked(
            lambda seq, where: self.codec.encode(seq, payloads, where))

    def wait(self, seq: int) -> None:
        """Return once transaction ``seq`` is durable (batch mode: share a group's sync)."""
        if self._durable >= seq:
            return
        self._lock.acquire()
        self._wait_locked(seq)

    def _wait_locked(self, seq: int) -> None:
        """:meth:`wait`, entered holding the lock; returns (or raises) having released it.

        An appender whose frame is still pending leads its group when nobody is
        writing and a sync may start, and the group holds as many transactions as
        are expected (:meth:`_made_durable`); the first appender to find it short
        gathers: waits for the rest, at most as long as the last sync took, then leads
        what came. The others park until their group is durable (it is led by its
        gatherer, or by the appender that fills it), or, while a write or sync runs,
        wait on the open group until one of them is asked to lead it.
        """
        lock = self._lock
        held, gathered = True, False
        try:
            while self._durable < seq:
                self._check()
                if seq <= self._taken:
                    group = self._group_of(seq)
                else:
                    assert self._pending  # seq was enqueued, not taken: it is pending
                    if self._flushing or self._syncing >= MAX_SYNCS_IN_FLIGHT:
                        self._open.waiters.wait(lock)  # until asked to lead
                        continue
                    if gathered or len(self._pending) >= self._expect:
                        self._flush(release=True, sync=True)
                        continue
                    if self._gathering is not self._open:
                        self._gather(lock)
                        gathered = True
                        continue
                    group = self._open  # its gatherer leads it
                held = False
                group.waiters.park(lock)
                if self._durable >= seq:
                    return
                lock.acquire()
                held = True
        except BaseException:
            if held and seq > self._taken and self._failed is None:
                # Left with its frame still pending (an exception from a signal
                # handler): others may count on this appender to lead the group -- the
                # appenders parked on it if it gathered, the one call to lead if that
                # went to it (or to its lock, still queued). They all choose again.
                self._renew_open()
            raise
        finally:
            if held:
                lock.release()

    def _gather(self, lock: threading.Lock) -> None:
        """Wait (as the open group's gatherer) until the group is full or taken, at
        most as long as the last sync took."""
        group = self._gathering = self._open
        try:
            group.waiters.wait(lock, min(self._sync_time, MAX_GATHER))
        finally:
            if self._gathering is group:
                self._gathering = None

    def _renew_open(self) -> None:
        """Give the pending frames a new open group and wake every appender waiting or
        parked on the old one: the next of them to look leads or gathers them."""
        group = self._open
        renewed = self._open = Group(group.first - 1)
        renewed.last = group.last
        group.waiters.wake_all()

    def _group_of(self, seq: int) -> Group:
        """The taken, not yet durable group holding ``seq``."""
        for g in self._in_flight:
            if seq <= g.last:
                return g
        raise AssertionError("a taken sequence number is durable or in flight")

    def refile(self, frames: Iterable[Refile]) -> list[int]:
        """Append each of ``frames`` (frames of another generation, verified and taken
        over as bytes by :meth:`FrameCodec.refile`) as the next transaction; return
        their new sequence numbers. Written (synced) as :meth:`append` writes a
        transaction in this appender's mode."""
        out: list[int] = []
        for frame in frames:

            def make(seq: int, where: Binding, frame: Refile = frame) -> bytes:
                return self.codec.refile(frame.data, frame.off, frame.where, frame.seq, seq,
                                         where)

            try:
                with self._lock:
                    seq = self._enqueue_frame_locked(make)
            except BadBody as exc:
                cls = AuthenticationError if exc.auth else CorruptError
                raise cls(f"transaction {frame.seq} cannot be refiled: {exc}",
                          path=frame.path, offset=frame.off) from exc
            self.wait(seq)
            out.append(seq)
        return out

    def _enqueue_frame_locked(self, make: MakeFrame) -> int:
        """:meth:`_enqueue_locked` of the frame ``make`` gives."""
        if self._closed:
            raise JournalFailedError("the journal is closed")
        self._check()
        seq, frame = self._frame_locked(make)
        self._pending.append(frame)
        self._open.last = seq
        if self.sync_mode != "batch":
            self._flush(release=False, sync=self.sync_mode == "full")
        return seq

    def _frame_locked(self, make: MakeFrame) -> tuple[int, bytes]:
        """Take the next sequence number and make its frame with ``make`` (given the
        number and where the frame goes), rotating first if needed."""
        while True:
            cur = self.segments[-1]
            seq = self._next_seq
            frame = make(seq, cur.binding())
            if (self._reserved + len(frame) <= self.segment_size
                    or self._reserved <= SEGMENT_HEADER_SIZE):
                break
            self._drain_locked()
            if self._closed:
                raise JournalFailedError("the journal is closed")
            if self._next_seq != seq:
                # Draining waited for a group-commit leader, which released the lock:
                # other appenders took sequence numbers (and maybe rotated) meanwhile,
                # so the number and the segment must be chosen again.
                continue
            self._rotate_locked()
            cur = self.segments[-1]
            frame = make(seq, cur.binding())
            break
        assert seq == self._next_seq and cur is self.segments[-1]  # nobody moved under us
        cur.offsets.append(self._reserved)
        cur.checksums += frame[FRAME_CHECKSUMMED:FRAME_HEADER_SIZE]
        self._reserved += len(frame)
        cur.end = self._reserved
        self._next_seq = seq + 1
        return seq, frame

    def _flush(self, *, release: bool, sync: bool) -> None:
        """Write every pending frame (the open group) with one write(), then sync if asked.

        With ``release`` the lock is dropped during the I/O (the group-commit leader):
        other threads queue frames for the next group meanwhile, which one of them
        writes once this sync returned (:data:`MAX_SYNCS_IN_FLIGHT`). A sync covers
        every byte written before it started, so each sync makes durable everything
        up to its own group's end.
        """
        group, batch, self._pending = self._open, self._pending, []
        last = group.last
        self._open = Group(last)
        self._taken = last
        self._in_flight.append(group)
        start = self._written
        data = b"".join(batch)
        cur = self.segments[-1]
        self._flushing = True
        self._written = start + len(data)
        # Any exception, not only an I/O error: one from a signal handler (Ctrl-C) says
        # nothing of what reached the disk, and the flags and the lock must be restored.
        error: BaseException | None = None
        if release:
            self._lock.release()
        try:
            cp.hit(P_FRAME_WRITE_BEFORE)
            fs.write_at(self._fd, data, start, cur.path)
            cp.hit(P_FRAME_WRITE_AFTER)
        except BaseException as exc:
            error = exc
        if release:
            self._lock.acquire()
        self._flushing = False
        if error is None and sync:
            self._syncing += 1
            if release:
                self._ask_to_lead()
                self._lock.release()
            began = time.perf_counter()
            try:
                fs.sync(self._fd, cur.path)
            except BaseException as exc:
                error = exc
            if release:
                self._lock.acquire()
            self._syncing -= 1
            self._sync_time = time.perf_counter() - began
            if error is None:
                self.tally.fsyncs += 1
        if error is not None:
            self._fail(_failure(error))
            raise error
        # A sync that overlapped a failed one proves nothing (the kernel reports a
        # writeback error to one fsync caller only): acknowledge nothing after it.
        self._check()
        if sync or self.sync_mode == "none":
            self._made_durable(last)
            self._expect = (len(group) + len(self._pending)
                            + sum(len(g) for g in self._in_flight))
        self._ask_to_lead()
        self._cond.notify_all()

    def _made_durable(self, seq: int) -> None:
        """Record that everything up to ``seq`` is durable; wake the groups it covers."""
        if seq > self._durable:
            self.tally.acknowledged += seq - self._durable
            self._durable = seq
        while self._in_flight and self._in_flight[0].last <= self._durable:
            self._in_flight.pop(0).waiters.wake_all()

    def _ask_to_lead(self) -> None:
        """Wake one appender of the open group to write it, if it has frames and a
        write and a sync may start now."""
        if self._pending and not self._flushing and self._syncing < MAX_SYNCS_IN_FLIGHT:
            self._open.waiters.notify()

    def _drain_locked(self) -> None:
        """Finish every queued and in-flight frame, holding the lock throughout."""
        while self._flushing or self._syncing:
            self._cond.wait()
        self._check()
        if self._pending:
            self._flush(release=False, sync=self.sync_mode != "none")

    def _rotate_locked(self) -> None:
        cur = self.segments[-1]
        # The old segment is synced before the new one exists, in every mode, so
        # that only the last segment can ever lose an unsynced tail.
        try:
            fs.sync(self._fd, cur.path)
            self.tally.fsyncs += 1
            cp.hit(P_SEGMENT_ROTATE)
            new = create_segment(self.gen_dir, next_header(cur.header, self._next_seq))
            fd = fs.open_rw(new.path)
        except HolomemError as exc:
            self._fail(exc)
            raise
        fs.close(self._fd)
        self._fd = fd
        self.segments.append(new)
        self._reserved = self._written = new.end
        self._made_durable(self._next_seq - 1)

    # -- sync and close ---------------------------------------------------------------
    def sync(self) -> None:
        """Make every appended transaction durable (fsync), whatever the mode.

        Errors: ``closed`` (the journal was closed meanwhile: its descriptor is gone,
        and everything was synced by the close), ``io.fsync``, ``io.failed``.
        """
        with self._cond:
            if self._closed:
                raise ClosedError("the journal is closed")
            self._check()
            self._drain_locked()
            try:
                fs.sync(self._fd, self.segments[-1].path)
            except BaseException as exc:
                self._fail(_failure(exc))
                raise
            self.tally.fsyncs += 1
            self._made_durable(self.last_seq)

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            try:
                # Even after a failure a leader may still be writing or syncing with
                # the lock released: closing its descriptor under it could send its
                # bytes into whatever file reuses the number. (With one sync at a
                # time the failing write or sync is the only one in flight; this keeps
                # close safe should that ever change.)
                while self._flushing or self._syncing:
                    self._cond.wait()
                if self._failed is None:
                    self._drain_locked()
                    fs.sync(self._fd, self.segments[-1].path)
                    self.tally.fsyncs += 1
            finally:
                self._closed = True
                fs.close(self._fd)
