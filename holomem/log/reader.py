"""Reading a generation: validating every segment and reporting what is wrong.

Owns: the scan of a generation directory into segments and problems, and the
rule that tells a torn tail from corruption. Imports the standard library and the
other ``holomem.log`` modules. FORMAT.md ("Recovery") states the rules.

The scan never decides what to do about a problem: it reports each one to a
callback (leveldb's ``Reporter``). The journal refuses to open on anything that
is not a torn tail; fsck collects everything and explains it.

A bad frame in the last segment with nothing valid after it looks like a torn tail,
but it is one only if its transaction was never known durable: the generation's
watermark (:mod:`holomem.log.watermark`) names the last transaction that was, and a
problem at or before it is damage.
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
from holomem.log.watermark import Watermark, read_watermark, watermark_path
from holomem.log.writer import Segment


class Problem(NamedTuple):
    """One thing wrong in a generation, located precisely.

    ``tail`` is True when the problem is a torn tail: it is in the last segment, no
    valid frame follows it, and the watermark does not say its transaction was
    durable, so it is the remains of a write that never completed. ``durable`` is
    True when it would be a torn tail but for the watermark: an acknowledged
    transaction was damaged or lost.
    """

    code: str
    path: str
    offset: int
    length: int
    reason: str
    tail: bool
    durable: bool = False

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
    """Validate every segment of ``gen_dir`` (and its watermark) and return what is valid.

    Every segment after a problem that is not a torn tail is still scanned, so that
    fsck can report all damage at once; the caller must not trust the result if
    anything but a tail was reported.
    """
    # The watermark first: read before the segments are listed, everything it covers
    # is in the files by the time they are read, even while a writer appends.
    mark: Watermark | None = None
    try:
        mark = read_watermark(gen_dir)
    except HeaderError as exc:
        report(Problem("corrupt.header", exc.path, exc.offset, exc.length,
                       f"{exc.reason}: the last transaction known durable is unknown", False))
    durable = mark.seq if mark is not None else 0
    files = list_segments(gen_dir)
    segments: list[Segment] = []
    first: SegmentHeader | None = None
    expected_number = 1
    next_seq: int | None = None
    last_problem: Problem | None = None
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
            # renamed into place, so it is never torn) -- unless the watermark was
            # written after this segment existed.
            torn = last and number > 1 and len(data) <= SEGMENT_HEADER_SIZE
            known = mark is not None and mark.segment >= number
            reason = exc.reason
            if torn and known and mark is not None:
                reason += (f"; the segment existed when transaction {mark.seq} was known "
                           "durable (watermark), so this is damage, not a torn rotation")
            last_problem = Problem("corrupt.header", path, exc.offset, exc.length, reason,
                                   torn and not known, torn and known)
            report(last_problem)
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
        seg = Segment(number, path, header, scan.offsets, scan.end, scan.checksums)
        segments.append(seg)
        next_seq = seg.last_seq + 1
        last_problem = None
        if scan.problem is not None:
            last_problem = _classify(data, header, scan.problem, path, last, seg.last_seq + 1,
                                     durable)
            report(last_problem)
    # A watermark that belongs elsewhere is reported after the segments: which side is
    # foreign is not known, and damage located in a segment is the more useful thing to
    # say first.
    if mark is not None and mark.generation != generation:
        report(Problem("corrupt.header", watermark_path(gen_dir), 32, 8,
                       f"watermark says generation {mark.generation}, directory says "
                       f"{generation}", False))
    elif mark is not None and first is not None and mark.store_id != first.store_id:
        report(Problem("corrupt.header", watermark_path(gen_dir), 16, 16,
                       "the watermark and the first segment name different stores", False))
    elif mark is not None:
        _check_watermark(gen_dir, mark, files, segments, last_problem, report)
    return segments


def _check_watermark(gen_dir: str, mark: Watermark, files: list[tuple[int, str]],
                     segments: list[Segment], last_problem: Problem | None,
                     report: Reporter) -> None:
    """Report durable transactions that are simply gone: whole segments past the last
    one, or frames cut off exactly at a frame boundary (no bad frame shows it)."""
    where = f"watermark {watermark_path(gen_dir)}"
    last_number = files[-1][0] if files else 0
    if last_number < mark.segment:
        report(Problem(
            "corrupt.missing", os.path.join(gen_dir, segment_name(last_number + 1)), 0, 0,
            f"segments {last_number + 1} to {mark.segment} are missing, but transaction "
            f"{mark.seq} in segment {mark.segment} was durable ({where})", False, True))
        return
    if last_problem is not None or not segments or segments[-1].number != last_number:
        return  # already reported, as damage when it hides a durable transaction
    seg = segments[-1]
    if seg.last_seq < mark.seq:
        report(Problem(
            "corrupt.truncated", seg.path, seg.end, 0,
            f"the segment ends after transaction {seg.last_seq} at offset {seg.end}, but "
            f"transaction {mark.seq} was durable, ending at offset {mark.end} of segment "
            f"{mark.segment} ({where}): durable transactions were cut off", False, True))


def _classify(data: bytes, header: SegmentHeader, sp: ScanProblem, path: str, last: bool,
              next_seq: int, durable: int) -> Problem:
    looks_torn = last and valid_frame_after(data, header, sp.offset, next_seq) is None
    known = next_seq <= durable
    reason = sp.reason
    if last and not looks_torn:
        reason += "; valid frames follow it, so this is damage, not a torn write"
    elif looks_torn and known:
        reason += (f"; transaction {next_seq} was durable (the watermark says every "
                   f"transaction up to {durable} was), so this is damage, not a torn write")
    return Problem(sp.code, path, sp.offset, sp.length, reason, looks_torn and not known,
                   looks_torn and known)
