"""Following a store read-only: catching up with the writer, and with its compactions.

Owns: what a read-only journal does to see new transactions -- new frames at the end
of the last segment, the segments the writer rotated to -- and to move to the
generation a compaction made live (the old one's segments retired, still readable
until released), with the retries a generation replaced mid-read needs. Imports the
standard library, :mod:`holomem.errors` and the other ``holomem.log`` modules; the
journal (:mod:`holomem.log.journal`) owns a :class:`Follower` when it is read-only,
hands it the function that loads a generation, and reads through its reader: a read
that fails because the generation was replaced under it (the writer unlinks or zeroes
the old files) is ``unavailable``, not damage.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from holomem.errors import (
    CorruptError,
    HolomemError,
    NotFoundError,
    StorageIOError,
    UnavailableError,
)
from holomem.log import fs
from holomem.log.format import SEGMENT_HEADER_SIZE, generation_name
from holomem.log.generation import GENERATION_RACES, list_generations
from holomem.log.reader import Problem
from holomem.log.replay import SegmentReader
from holomem.log.segment import list_segments, scan_frames, unpack_header
from holomem.log.writer import Segment


class Refreshed(NamedTuple):
    """What a follower's refresh found: ``reset`` means the generation changed."""

    reset: bool
    from_seq: int


class Follower:
    """The read-only side of a journal on the store at ``path``: :attr:`reader` holds the
    generation it reads; ``load(n)`` loads generation ``n`` into it (or raises, leaving
    it as it was) and returns the torn tails it found."""

    def __init__(self, path: str, load: Callable[[int], list[Problem]]) -> None:
        self.path = path
        self.reader = SegmentReader(self.unreadable)
        self._load = load

    def unreadable(self, seg: Segment, exc: HolomemError) -> HolomemError:
        """The error for a segment that did not read back: if its generation was replaced
        (the writer unlinks or zeroes the old files), not damage but ``unavailable``;
        otherwise ``exc`` itself."""
        if seg.header.generation != self.reader.generation or self.replaced():
            return UnavailableError(
                f"generation {seg.header.generation} of the store at {self.path!r} was "
                f"replaced by a compaction while it was being read ({exc.message}); "
                "refresh, and read again from the new generation")
        return exc

    def newest(self) -> int:
        """The live generation's number. Errors: ``not_found``, ``io``."""
        live, _ = list_generations(self.path)
        if not live:
            raise NotFoundError(f"the store at {self.path!r} disappeared")
        return live[-1]

    def load_newest(self, generation: int) -> list[Problem]:
        """Load ``generation``; if a compaction replaces it while it is being read (its
        files unlinked, or zeroed by a purge), load the new one instead. Damage is
        reported only when the generation it was found in is still live.
        Errors: ``corrupt.*``, ``io``, ``unavailable`` (replaced again and again)."""
        for _ in range(GENERATION_RACES):
            try:
                return self._load(generation)
            except (CorruptError, StorageIOError):
                newest = self.newest()
                gen_dir = os.path.join(self.path, generation_name(generation))
                if newest == generation and os.path.isdir(gen_dir):
                    raise
                generation = newest
        raise UnavailableError(
            f"the store at {self.path!r} changed generation {GENERATION_RACES} times while a "
            "follower was reading it (compactions); try again")

    def replaced(self) -> bool:
        """True once the writer switched to a newer generation than the one loaded (a
        compaction). Two ``stat`` calls."""
        successor = os.path.join(self.path, generation_name(self.reader.generation + 1))
        return os.path.isdir(successor) or not os.path.isdir(self.reader.gen_dir)

    def refresh(self) -> Refreshed:
        """Pick up what the writer appended since the last look; see
        :meth:`holomem.log.journal.Journal.refresh`."""
        if self.newest() != self.reader.generation:
            return self._reset()
        before = self.reader.segments[-1].last_seq + 1
        try:
            self._catch_up()
        except (CorruptError, StorageIOError):
            if not self.replaced():
                raise
            return self._reset()
        return Refreshed(False, before)

    def _reset(self) -> Refreshed:
        """Retire the loaded generation and load the live one (if that fails, the loaded
        one stays as it was)."""
        retired = len(self.reader.retired)
        self.reader.retire()
        try:
            self.load_newest(self.newest())
        except BaseException:
            del self.reader.retired[retired:]
            raise
        return Refreshed(True, self.reader.segments[0].first_seq)

    def _catch_up(self) -> None:
        last = self.reader.segments[-1]
        fd = self.reader.fd(last)
        data = fs.read_at(fd, fs.size(fd, last.path), 0, last.path)
        scan = scan_frames(data, last.header, last.end, last.last_seq + 1)
        last.offsets.extend(scan.offsets)
        last.checksums += scan.checksums
        last.end = scan.end
        if scan.problem is None or scan.problem.code in ("corrupt.truncated", "corrupt.frame"):
            self._new_segments()

    def _new_segments(self) -> None:
        segments = self.reader.segments
        known = segments[-1].number
        for number, path in list_segments(self.reader.gen_dir):
            if number <= known:
                continue
            if number != segments[-1].number + 1:
                break
            fd = fs.open_ro(path)
            try:
                seg = self._new_segment(fd, number, path, segments[-1].last_seq + 1)
            except BaseException:
                fs.close(fd)
                raise
            if seg is None:
                fs.close(fd)
                break
            self.reader.add(seg, fd)  # pinned, like the others

    @staticmethod
    def _new_segment(fd: int, number: int, path: str, first_seq: int) -> Segment | None:
        """A segment the writer rotated to, or None if it is not complete yet."""
        data = fs.read_at(fd, fs.size(fd, path), 0, path)
        if len(data) < SEGMENT_HEADER_SIZE:
            return None  # being created right now
        header = unpack_header(data, path)
        if header.first_seq != first_seq:
            return None
        scan = scan_frames(data, header)
        return Segment(number, path, header, scan.offsets, scan.end, scan.checksums)
