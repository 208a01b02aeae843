"""Segment files: their header, and the scan that finds their valid frames.

Owns: the segment header codec and the frame-by-frame validation of one segment's
bytes. Imports the standard library and the other ``holomem.log`` modules.
FORMAT.md ("Segment header", "A frame is valid iff") documents both.
"""

from __future__ import annotations

import os
from array import array
from typing import NamedTuple

from holomem.errors import FormatVersionError, HeaderError
from holomem.log import fs
from holomem.log.checksum import checksum
from holomem.log.format import (
    FRAME_CHECKSUMMED,
    FRAME_FLAGS_KNOWN,
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    FRAME_KIND_TRANSACTION,
    READ_VERSION,
    SEGMENT_CHECKSUMMED,
    SEGMENT_FLAGS_KNOWN,
    SEGMENT_HEADER,
    SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC,
    SEGMENT_RE,
)
from holomem.log.frame import frame_checksum, header_problem, parse_header


class SegmentHeader(NamedTuple):
    write_version: int
    read_version: int
    flags: int
    store_id: bytes
    generation: int
    number: int
    first_seq: int
    salt: int
    key_check: bytes

    def pack(self) -> bytes:
        raw = SEGMENT_HEADER.pack(
            SEGMENT_MAGIC, self.write_version, self.read_version, self.flags, bytes(4),
            self.store_id, self.generation, self.number, self.first_seq, self.salt,
            self.key_check, bytes(8), 0,
        )
        return raw[:SEGMENT_CHECKSUMMED] + checksum(raw[:SEGMENT_CHECKSUMMED]).to_bytes(8, "little")


def unpack_header(data: bytes | memoryview, path: str) -> SegmentHeader:
    """Decode and verify a segment header; raise HeaderError or FormatVersionError."""
    if len(data) < SEGMENT_HEADER_SIZE:
        raise HeaderError(
            f"segment header is {len(data)} bytes, {SEGMENT_HEADER_SIZE} expected",
            path=path, offset=0, length=len(data),
        )
    (magic, wver, rver, flags, reserved, store_id, gen, number, first_seq, salt, kcv,
     reserved2, stored) = SEGMENT_HEADER.unpack_from(data, 0)
    if magic != SEGMENT_MAGIC:
        raise HeaderError("not a holomem journal segment (bad magic)", path=path, offset=0,
                          length=8)
    if checksum(memoryview(data)[:SEGMENT_CHECKSUMMED]) != stored:
        raise HeaderError("segment header checksum mismatch", path=path, offset=0,
                          length=SEGMENT_HEADER_SIZE)
    if rver > READ_VERSION:
        raise FormatVersionError(
            f"{path}: segment needs format read version {rver}; this build reads "
            f"up to {READ_VERSION}. Upgrade holomem to open this store."
        )
    if flags & ~SEGMENT_FLAGS_KNOWN or reserved != bytes(4) or reserved2 != bytes(8):
        raise HeaderError("segment header has unknown flags or non-zero reserved bytes",
                          path=path, offset=10, length=6)
    if first_seq < 1:
        raise HeaderError("segment first sequence number is 0", path=path, offset=48,
                          length=8)
    return SegmentHeader(wver, rver, flags, store_id, gen, number, first_seq, salt, kcv)


class ScanProblem(NamedTuple):
    """The first thing wrong after the valid frames of a segment."""

    code: str  # an error code: corrupt.checksum, corrupt.sequence, ...
    offset: int
    length: int
    reason: str


class Scan(NamedTuple):
    """Valid frames of a segment: their start offsets, where validity ended, and their
    stored checksums (8 bytes each, as in the file)."""

    offsets: array[int]
    end: int
    problem: ScanProblem | None
    checksums: bytearray


def scan_frames(data: bytes | memoryview, header: SegmentHeader, start: int = SEGMENT_HEADER_SIZE,
                first_seq: int | None = None) -> Scan:
    """Walk the frames of one segment from ``start`` and stop at the first invalid one.

    ``first_seq`` is the sequence number the frame at ``start`` must carry (the
    header's first_seq when scanning from the header).
    """
    expected = header.first_seq if first_seq is None else first_seq
    offsets: array[int] = array("Q")
    checksums = bytearray()
    size = len(data)
    off = start
    while off < size:
        if size - off < FRAME_HEADER_SIZE:
            return Scan(offsets, off, ScanProblem(
                "corrupt.truncated", off, size - off,
                f"{size - off} bytes at the end, too short for a frame header"), checksums)
        fh = parse_header(data, off)
        why = header_problem(fh)
        if why is not None:
            return Scan(offsets, off, ScanProblem("corrupt.frame", off, FRAME_HEADER_SIZE, why),
                        checksums)
        if off + FRAME_HEADER_SIZE + fh.length > size:
            return Scan(offsets, off, ScanProblem(
                "corrupt.truncated", off, size - off,
                f"frame declares {fh.length} body bytes but the file ends after "
                f"{size - off - FRAME_HEADER_SIZE}"), checksums)
        if frame_checksum(data, off, fh.length, header.salt) != fh.checksum:
            return Scan(offsets, off, ScanProblem(
                "corrupt.checksum", off, FRAME_HEADER_SIZE + fh.length,
                f"frame checksum mismatch (frame claims sequence number {fh.seq})"), checksums)
        if fh.seq != expected:
            return Scan(offsets, off, ScanProblem(
                "corrupt.sequence", off, FRAME_HEADER_SIZE + fh.length,
                f"frame has sequence number {fh.seq}, {expected} expected"), checksums)
        offsets.append(off)
        checksums += data[off + FRAME_CHECKSUMMED : off + FRAME_HEADER_SIZE]
        expected += 1
        off += FRAME_HEADER_SIZE + fh.length
    return Scan(offsets, off, None, checksums)


def valid_frame_after(data: bytes | memoryview, header: SegmentHeader, bad: int,
                      next_seq: int) -> int | None:
    """Offset of the first valid frame after ``bad`` that continues the sequence, or None.

    A damaged frame is a torn tail only if nothing valid follows it. The frame at
    ``bad`` should have carried ``next_seq``, so a later valid frame carries
    ``next_seq`` (if the damage was junk before it) or a higher number: one more
    for every frame the damage swallowed, and a lost disk block can swallow many
    small frames. Candidates are found by the fixed header bytes [4, 8) (flags,
    kind, reserved) as byte patterns (fast, in C); a candidate at ``start`` can
    carry at most one sequence number per frame header that fits between ``bad``
    and ``start``, and each plausible one is checked as a whole frame.
    """
    raw = bytes(data)
    size = len(raw)
    found: int | None = None
    for flags in range(FRAME_FLAGS_KNOWN + 1):
        if flags & ~FRAME_FLAGS_KNOWN:
            continue
        pattern = FRAME_HEADER.pack(0, flags, FRAME_KIND_TRANSACTION, 0, 0, 0)[4:8]
        pos = raw.find(pattern, bad + 1 + 4)
        while pos != -1:
            start = pos - 4
            if found is not None and start >= found:
                break
            if start + FRAME_HEADER_SIZE <= size:
                fh = parse_header(raw, start)
                if (next_seq <= fh.seq <= next_seq + (start - bad) // FRAME_HEADER_SIZE
                        and header_problem(fh) is None
                        and start + FRAME_HEADER_SIZE + fh.length <= size
                        and frame_checksum(raw, start, fh.length, header.salt) == fh.checksum):
                    found = start
                    break
            pos = raw.find(pattern, pos + 1)
    return found


def read_file(path: str) -> bytes:
    """The whole file. Errors: ``io``."""
    return fs.read_file(path)


def list_segments(gen_dir: str) -> list[tuple[int, str]]:
    """(number, path) of every segment file in a generation directory, by number."""
    found: list[tuple[int, str]] = []
    for name in fs.listdir(gen_dir):
        m = SEGMENT_RE.match(name)
        if m:
            found.append((int(m.group(1)), os.path.join(gen_dir, name)))
    found.sort()
    return found
