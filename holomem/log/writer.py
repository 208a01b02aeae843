"""Appending frames to the live segment: rotation, durability modes, group commit.

Owns: the write path of the journal. Imports the standard library and the other
``holomem.log`` modules. FORMAT.md ("Writing") describes the protocol.

Invariants kept here:

- frames are written in sequence order, and a segment only ever grows at its end;
- before a new segment is created the previous one is synced, so only the last
  segment of a generation can ever have an unsynced (torn) tail;
- in ``batch`` mode one thread (the leader) writes every pending frame with a
  single ``write`` and syncs once; each appender returns only when a sync that
  covers its own frame has returned;
- after any write or sync failure the appender is *failed*: it acknowledges
  nothing more, and the journal must be reopened (a failed fsync is never retried).
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from holomem.errors import HolomemError, JournalFailedError
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.format import READ_VERSION, SEGMENT_HEADER_SIZE, WRITE_VERSION, segment_name
from holomem.log.frame import Binding, FrameCodec
from holomem.log.segment import SegmentHeader

P_FRAME_WRITE_BEFORE = cp.point("journal.frame.write.before", "a frame is about to be written")
P_FRAME_WRITE_AFTER = cp.point("journal.frame.write.after", "a frame was written, not synced")
P_SEGMENT_ROTATE = cp.point(
    "journal.segment.rotate", "the full segment is synced, its successor not yet created")
P_SEGMENT_CREATE = cp.point("journal.segment.create", "a new segment file exists, header unwritten")
P_SEGMENT_HEADER = cp.point("journal.segment.header", "a new segment's header is written, unsynced")
P_SEGMENT_READY = cp.point("journal.segment.ready", "a new segment is durable, no frame in it yet")

SYNC_MODES = ("full", "batch", "none")
#: How long a group-commit leader waits for company when the previous group had some.
GATHER_SECONDS = 0.0005
#: Groups whose sync may run at once in batch mode (the next group's write overlaps).
MAX_SYNCS_IN_FLIGHT = 2


@dataclass(eq=False)
class Segment:
    """What the journal knows of one segment of the live generation."""

    number: int
    path: str
    header: SegmentHeader
    offsets: array[int] = field(default_factory=lambda: array("Q"))
    end: int = SEGMENT_HEADER_SIZE

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


class Appender:
    """Writes transactions at the end of the live segment. Thread safe."""

    def __init__(self, *, gen_dir: str, segments: list[Segment], codec: FrameCodec,
                 sync: str, segment_size: int) -> None:
        assert sync in SYNC_MODES
        self.gen_dir = gen_dir
        self.segments = segments  # shared with the journal; the last one is written here
        self.codec = codec
        self.sync_mode = sync
        self.segment_size = segment_size
        lock = threading.Lock()
        self._cond = threading.Condition(lock)  # followers wait here for their sync
        self._gather = threading.Condition(lock)  # a leader waits here for company
        cur = segments[-1]
        self._fd = fs.open_rw(cur.path)
        self._next_seq = cur.last_seq + 1
        self._reserved = cur.end  # end of the last encoded frame (pending included)
        self._written = cur.end  # end of what was handed to write()
        self._durable = cur.last_seq  # highest seq known synced
        self._pending: list[bytes] = []
        self._pending_last = cur.last_seq
        self._flushing = False
        self._inflight = 0  # batch appenders waiting for their group right now
        self._peak = 1  # most of them seen at once since the last group started
        self._target = 1  # frames a leader waits for (briefly) before syncing
        self._gathering = False  # a leader is waiting for company
        self._syncing = 0  # syncs running right now (batch mode overlaps two)
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
        self._cond.notify_all()

    # -- append -----------------------------------------------------------------------
    def append(self, payloads: Sequence[bytes]) -> int:
        """Append one transaction; return its sequence number once durable per the mode."""
        seq = self.enqueue(payloads)
        self.wait(seq)
        return seq

    def enqueue(self, payloads: Sequence[bytes]) -> int:
        """Give the transaction its sequence number and frame, in order; return the number.

        ``full``: written and synced before this returns; ``none``: written;
        ``batch``: queued for the next group commit, durable only after :meth:`wait`.
        """
        with self._cond:
            if self._closed:
                raise JournalFailedError("the journal is closed")
            self._check()
            seq, frame = self._encode_locked(payloads)
            self._pending.append(frame)
            self._pending_last = seq
            if self.sync_mode == "batch":
                if len(self._pending) >= self._target:
                    self._gather.notify()
            else:
                self._flush(release=False, sync=self.sync_mode == "full")
            return seq

    def wait(self, seq: int) -> None:
        """Return once transaction ``seq`` is durable (batch mode: share a group's sync)."""
        with self._cond:
            if self._durable >= seq:
                return
            self._inflight += 1
            self._peak = max(self._peak, self._inflight)
            try:
                self._await_group(seq)
            finally:
                self._inflight -= 1

    def _await_group(self, seq: int) -> None:
        while self._durable < seq:
            self._check()
            if (self._flushing or self._gathering or self._syncing >= MAX_SYNCS_IN_FLIGHT
                    or self._pending_last < seq or not self._pending):
                self._cond.wait()
                continue
            if len(self._pending) < self._target:
                # As many appenders were active as the target: give the ones the
                # last sync released a moment to queue their next frames, so that
                # they share this sync instead of waiting for the one after.
                self._gathering = True
                try:
                    self._gather.wait(GATHER_SECONDS)
                finally:
                    self._gathering = False
            self._target = self._peak
            self._peak = self._inflight
            self._flush(release=True, sync=True)

    def _encode_locked(self, payloads: Sequence[bytes]) -> tuple[int, bytes]:
        """Take the next sequence number and encode its frame, rotating first if needed."""
        while True:
            cur = self.segments[-1]
            seq = self._next_seq
            frame = self.codec.encode(seq, payloads, cur.binding())
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
            frame = self.codec.encode(seq, payloads, cur.binding())
            break
        assert seq == self._next_seq and cur is self.segments[-1]  # nobody moved under us
        cur.offsets.append(self._reserved)
        self._reserved += len(frame)
        cur.end = self._reserved
        self._next_seq = seq + 1
        return seq, frame

    def _flush(self, *, release: bool, sync: bool) -> None:
        """Write every pending frame with one write(), then sync if asked.

        With ``release`` the lock is dropped during the I/O (the group-commit leader):
        other threads queue frames for the next group meanwhile, and once this
        group's write() returned, the next leader may write and sync its own group
        while this sync is still running. A sync covers every byte written before it
        started, so each sync makes durable everything up to its own group's end.
        """
        batch, self._pending = self._pending, []
        last = self._pending_last
        start = self._written
        data = b"".join(batch)
        cur = self.segments[-1]
        self._flushing = True
        self._written = start + len(data)
        error: HolomemError | None = None
        if release:
            self._cond.release()
        try:
            cp.hit(P_FRAME_WRITE_BEFORE)
            fs.write_at(self._fd, data, start, cur.path)
            cp.hit(P_FRAME_WRITE_AFTER)
        except HolomemError as exc:
            error = exc
        if release:
            self._cond.acquire()
        self._flushing = False
        if error is None and sync:
            self._syncing += 1
            if release:
                self._cond.notify_all()
                self._cond.release()
            try:
                fs.sync(self._fd, cur.path)
            except HolomemError as exc:
                error = exc
            finally:
                if release:
                    self._cond.acquire()
                self._syncing -= 1
        if error is not None:
            self._fail(error)
            raise error
        # A sync that overlapped a failed one proves nothing (the kernel reports a
        # writeback error to one fsync caller only): acknowledge nothing after it.
        self._check()
        if sync or self.sync_mode == "none":
            self._durable = max(self._durable, last)
        self._cond.notify_all()

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
        self._durable = max(self._durable, self._next_seq - 1)

    # -- sync and close ---------------------------------------------------------------
    def sync(self) -> None:
        """Make every appended transaction durable (fsync), whatever the mode."""
        with self._cond:
            self._check()
            self._drain_locked()
            try:
                fs.sync(self._fd, self.segments[-1].path)
            except HolomemError as exc:
                self._fail(exc)
                raise
            self._durable = self.last_seq

    def close(self) -> None:
        with self._cond:
            if self._closed:
                return
            try:
                if self._failed is None:
                    self._drain_locked()
                    fs.sync(self._fd, self.segments[-1].path)
            finally:
                self._closed = True
                fs.close(self._fd)
