"""Reading a generation: validating every segment and reporting what is wrong.

Owns: the scan of a generation directory into segments and problems, and the
rule that tells a torn tail from corruption. Imports the standard library and the
other ``holomem.log`` modules. FORMAT.md ("Recovery") states the rules.

The scan never decides what to do about a problem: it reports each one to a
callback (leveldb's ``Reporter``). The journal refuses to open on anything that
is not a torn tail; fsck collects everything and explains it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import NamedTuple

from holomem.errors import (
    ChecksumError,
    CorruptError,
    FrameError,
    HeaderError,
    MissingSegmentError,
    SequenceError,
    TruncatedError,
)
from holomem.log.format import SEGMENT_HEADER_SIZE, segment_name
from holomem.log.segment import (
    Scan,
    ScanProblem,
    SegmentHeader,
    list_segments,
    read_file,
    scan_frames,
    unpack_header,
    valid_frame_after,
)
from holomem.log.writer import Segment


class Problem(NamedTuple):
    """One thing wrong in a generation, located precisely.

    ``tail`` is True when the problem is a torn tail: it is in the last segment and
    no valid frame follows it, so it is the remains of a write that never completed.
    """

    code: str
    path: str
    offset: int
    length: int
    reason: str
    tail: bool

    def error(self) -> CorruptError:
        cls = _ERRORS.get(self.code, CorruptError)
        return cls(self.reason, path=self.path, offset=self.offset, length=self.length)


_ERRORS: dict[str, type[CorruptError]] = {
    "corrupt.checksum": ChecksumError,
    "corrupt.sequence": SequenceError,
    "corrupt.header": HeaderError,
    "corrupt.missing": MissingSegmentError,
    "corrupt.frame": FrameError,
    "corrupt.truncated": TruncatedError,
}

Reporter = Callable[[Problem], None]


def _store_mismatch(first: SegmentHeader, h: SegmentHeader) -> str | None:
    if h.store_id != first.store_id:
        return "segment belongs to another store (store id differs)"
    if h.flags != first.flags or h.key_check != first.key_check:
        return "segment's encryption settings differ from the first segment's"
    return None


def scan_generation(gen_dir: str, generation: int, report: Reporter) -> list[Segment]:
    """Validate every segment of ``gen_dir`` and return what is valid.

    Every segment after a problem that is not a torn tail is still scanned, so that
    fsck can report all damage at once; the caller must not trust the result if
    anything but a tail was reported.
    """
    files = list_segments(gen_dir)
    segments: list[Segment] = []
    first: SegmentHeader | None = None
    expected_number = 1
    next_seq: int | None = None
    for index, (number, path) in enumerate(files):
        last = index == len(files) - 1
        if number != expected_number:
            report(Problem(
                "corrupt.missing", os.path.join(gen_dir, segment_name(expected_number)), 0, 0,
                f"segments {expected_number} to {number - 1} are missing", False))
        expected_number = number + 1
        data = read_file(path)
        try:
            header = unpack_header(data, path)
        except HeaderError as exc:
            # A new segment whose header never reached the disk whole: the torn
            # tail of a rotation (segment 1 is created before the directory is
            # renamed into place, so it is never torn).
            torn = last and number > 1 and len(data) <= SEGMENT_HEADER_SIZE
            report(Problem("corrupt.header", path, exc.offset, exc.length, exc.reason, torn))
            next_seq = None
            continue
        problem = None
        if header.number != number:
            problem = f"header says segment {header.number}, file name says {number}"
        elif header.generation != generation:
            problem = f"header says generation {header.generation}, directory says {generation}"
        elif first is not None:
            problem = _store_mismatch(first, header)
        if problem is not None:
            report(Problem("corrupt.header", path, 0, SEGMENT_HEADER_SIZE, problem, False))
            next_seq = None
            continue
        if first is None:
            first = header
        if next_seq is not None and header.first_seq != next_seq:
            report(Problem(
                "corrupt.sequence", path, 48, 8,
                f"segment starts at sequence number {header.first_seq}, but the previous "
                f"segment ends at {next_seq - 1}", False))
        scan: Scan = scan_frames(data, header)
        seg = Segment(number, path, header, scan.offsets, scan.end)
        segments.append(seg)
        next_seq = seg.last_seq + 1
        if scan.problem is not None:
            report(_classify(data, header, scan.problem, path, last, seg.last_seq + 1))
    return segments


def _classify(data: bytes, header: SegmentHeader, sp: ScanProblem, path: str, last: bool,
              next_seq: int) -> Problem:
    tail = last and valid_frame_after(data, header, sp.offset, next_seq) is None
    reason = sp.reason
    if last and not tail:
        reason += "; valid frames follow it, so this is damage, not a torn write"
    return Problem(sp.code, path, sp.offset, sp.length, reason, tail)
