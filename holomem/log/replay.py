"""Replaying and reading transactions back from a generation's segments.

Owns: the generation a journal reads (its number, directory and segments, and a
follower's retired ones), the files it keeps open to read them, replay, the read of
one transaction by sequence number, and decoding a frame read back (checksum again,
then the codec). Imports the standard library, :mod:`holomem.errors` and the other
``holomem.log`` modules; the journal (:mod:`holomem.log.journal`) or its follower
(:mod:`holomem.log.follower`) owns one :class:`SegmentReader`, and says what a failed
read means (its ``unreadable`` callback).

A follower pins every segment of its generation (an open file survives the unlink a
compaction does), so the segments it reads stay readable until it lets them go.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

from holomem.errors import (
    AuthenticationError,
    CorruptError,
    HolomemError,
    NotFoundError,
    StorageIOError,
)
from holomem.log import fs
from holomem.log.format import FRAME_CHECKSUMMED, FRAME_HEADER_SIZE
from holomem.log.frame import BadBody, Binding, FrameCodec, frame_checksum, parse_header
from holomem.log.writer import Refile, Segment

#: What a failed read of a segment is reported as: given the segment and the error.
Unreadable = Callable[[Segment, HolomemError], HolomemError]


def pin(segments: Iterable[Segment]) -> dict[str, int]:
    """Open every segment for reading (path -> fd), so an unlink cannot take one away
    mid-read; on a failure none stays open."""
    pinned: dict[str, int] = {}
    try:
        for seg in segments:
            pinned[seg.path] = fs.open_ro(seg.path)
    except BaseException:
        for fd in pinned.values():
            fs.close(fd)
        raise
    return pinned


class SegmentReader:
    """The generation a journal reads, the open files to read it, and the reads."""

    def __init__(self, unreadable: Unreadable | None = None) -> None:
        """``unreadable`` turns the error of a failed read into the one raised (by
        default the error itself)."""
        #: the loaded generation: its number and directory
        self.generation = 0
        self.gen_dir = ""
        #: the loaded generation's segments (shared with the writer's appender)
        self.segments: list[Segment] = []
        #: follower: segments of generations it moved away from, still readable
        self.retired: list[Segment] = []
        self._fds: dict[str, int] = {}
        self._codec: FrameCodec | None = None
        self._unreadable: Unreadable = unreadable or (lambda _seg, exc: exc)

    def load(self, generation: int, gen_dir: str, segments: list[Segment], codec: FrameCodec,
             pinned: dict[str, int]) -> None:
        """Read generation ``generation`` (in ``gen_dir``) from now on: its ``segments``,
        decoded with ``codec``; ``pinned`` are their open files (a follower's)."""
        self.generation = generation
        self.gen_dir = gen_dir
        self.segments = segments
        self._codec = codec
        self._fds.update(pinned)

    def add(self, seg: Segment, fd: int) -> None:
        """Follower: a segment the writer rotated to, open as ``fd`` (pinned)."""
        self._fds[seg.path] = fd
        self.segments.append(seg)

    def fd(self, seg: Segment) -> int:
        """The open file of ``seg`` (opened now, on the writer, if it is not yet)."""
        fd = self._fds.get(seg.path)
        if fd is None:
            fd = fs.open_ro(seg.path)
            kept = self._fds.setdefault(seg.path, fd)  # readers may race to open it
            if kept != fd:
                fs.close(fd)
            fd = kept
        return fd

    def _whole(self, seg: Segment) -> bytes:
        """Segment ``seg``'s bytes up to its end, in one read."""
        return self._span(seg, 0, seg.end)

    def _span(self, seg: Segment, start: int, end: int) -> bytes:
        """Segment ``seg``'s bytes from ``start`` to ``end``, in one read; a read's ``io``
        error becomes what the ``unreadable`` callback makes of it."""
        try:
            return fs.read_at(self.fd(seg), end - start, start, seg.path)
        except StorageIOError as exc:
            raise self._unreadable(seg, exc) from exc

    def replay(self, from_seq: int, last: int) -> Iterator[tuple[int, list[bytes]]]:
        """``(seq, payloads)`` of every transaction from ``from_seq`` to ``last``."""
        for seg in list(self.segments):
            if seg.last_seq < from_seq or seg.first_seq > last:
                continue
            data = self._whole(seg)
            binding = seg.binding()
            start = max(0, from_seq - seg.first_seq)
            count = min(len(seg.offsets), last - seg.first_seq + 1)
            for i in range(start, count):
                try:
                    payloads = self.decode(data, seg.offsets[i], seg, binding)
                except CorruptError as exc:
                    raise self._unreadable(seg, exc) from exc
                yield seg.first_seq + i, payloads

    def frames(self, seqs: Sequence[int], last: int) -> Iterator[Refile]:
        """The frames of transactions ``seqs`` (ascending, none above ``last``), each as
        it lies in its segment, unverified (:meth:`FrameCodec.refile` verifies it); of each
        segment that holds some, the bytes from the first one's start to the last one's
        end are read once (not the whole segment: a compaction refiles a transaction at a
        time, and a segment holds hundreds)."""
        if any(b <= a for a, b in itertools.pairwise(seqs)):
            raise ValueError("the transactions to refile must ascend")
        i = 0
        for seg in list(self.segments):
            if i >= len(seqs):
                return
            if seqs[i] < seg.first_seq:
                break  # (not in this generation)
            stop = bisect.bisect_right(seqs, min(seg.last_seq, last), lo=i)
            if stop == i:
                continue
            first, last_here = seqs[i] - seg.first_seq, seqs[stop - 1] - seg.first_seq
            start = seg.offsets[first]
            end = (seg.offsets[last_here + 1] if last_here + 1 < len(seg.offsets)
                   else seg.end)
            data = self._span(seg, start, end)
            binding = seg.binding()
            for seq in seqs[i:stop]:
                yield Refile(data, seg.offsets[seq - seg.first_seq] - start, binding, seq,
                             seg.path)
            i = stop
        if i < len(seqs):
            raise NotFoundError(f"no transaction {seqs[i]} in the journal")

    def read(self, seq: int, last: int) -> list[bytes]:
        """The payloads of transaction ``seq`` (at most ``last``), from the loaded
        generation or, below its first, from the retired ones."""
        segs = self.segments
        if self.retired and seq < self.segments[0].first_seq:
            segs = self.retired
        elif seq > last:
            segs = []
        idx = bisect.bisect_right([s.first_seq for s in segs], seq) - 1
        if idx < 0 or seq > segs[idx].last_seq or seq < 1:
            raise NotFoundError(f"no transaction {seq} in the journal")
        seg = segs[idx]
        off = seg.offsets[seq - seg.first_seq]
        try:
            fd = self.fd(seg)
            head = fs.read_at(fd, FRAME_HEADER_SIZE, off, seg.path)
            if len(head) < FRAME_HEADER_SIZE:
                raise CorruptError("frame cut short on re-read (the file changed under us)",
                                   path=seg.path, offset=off, length=FRAME_HEADER_SIZE)
            length = parse_header(head, 0).length
            data = head + fs.read_at(fd, length, off + FRAME_HEADER_SIZE, seg.path)
            return self.decode(data, 0, seg, seg.binding(), where=off)
        except (CorruptError, StorageIOError) as exc:
            raise self._unreadable(seg, exc) from exc

    def decode(self, data: bytes, off: int, seg: Segment, binding: Binding,
               where: int | None = None) -> list[bytes]:
        """The payloads of the frame at ``off`` of ``data`` (read from ``seg`` at
        ``where``, by default ``off``), its checksum verified again."""
        assert self._codec is not None, "load() comes first"
        fh = parse_header(data, off)
        at = off if where is None else where
        if frame_checksum(data, off, fh.length, binding.salt) != fh.checksum:
            raise CorruptError("frame checksum mismatch on re-read (the file changed under us)",
                               path=seg.path, offset=at, length=FRAME_HEADER_SIZE + fh.length)
        start = off + FRAME_HEADER_SIZE
        view = memoryview(data)
        try:
            head = view[off : off + FRAME_CHECKSUMMED]
            return self._codec.decode_body(fh, head, view[start : start + fh.length], binding)
        except BadBody as exc:
            cls = AuthenticationError if exc.auth else CorruptError
            raise cls(str(exc), path=seg.path, offset=at,
                      length=FRAME_HEADER_SIZE + fh.length) from exc

    def retire(self) -> None:
        """Follower: keep the loaded generation's segments readable as retired ones."""
        self.retired.extend(self.segments)

    def release_retired(self) -> None:
        """Follower: close the retired segments; their transactions are gone."""
        self.close(s.path for s in self.retired)
        self.retired.clear()

    def close(self, paths: Iterable[str] | None = None) -> None:
        """Close the files of ``paths`` (None: every open segment)."""
        for path in list(self._fds) if paths is None else list(paths):
            fd = self._fds.pop(path, None)
            if fd is not None:
                fs.close(fd)
