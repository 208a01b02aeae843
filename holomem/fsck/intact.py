"""A salvage's read of a damaged generation: every intact transaction, past any damage.

Owns: :class:`IntactReader`, which reads the live generation's segments and hands on
each intact transaction, accounting for the rest in a
:class:`~holomem.fsck.losses.Ledger`, and the choice of the identity every segment must
share (:func:`reference_header`). Imports the log (frames and segments), the events (a
transaction is handed on only if every event in it decodes) and
:mod:`holomem.fsck.losses`; it writes nothing: what it hands on, the salvage copies.

How it reads: a segment is scanned as the journal scans it; at the first frame that is
not valid, the scan resumes at the next valid frame that continues the sequence (the
same search the journal uses to tell a torn tail from damage), so a bad frame costs that
frame only. A segment whose header is damaged is read with the salt its header still
holds and the identity of the store's other segments; a missing segment costs its
transactions. Only checksummed frames are copied, and each one only if it decodes (and,
in an encrypted store, authenticates); then its payloads are appended, byte for byte, to
the new journal.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from holomem.errors import CorruptError, HeaderError
from holomem.events import decode as decode_event
from holomem.fsck.losses import Ledger
from holomem.log.format import (
    FRAME_CHECKSUMMED,
    FRAME_HEADER_SIZE,
    SEGMENT_FLAG_ENCRYPTED,
    SEGMENT_HEADER,
    SEGMENT_HEADER_SIZE,
    segment_name,
)
from holomem.log.frame import (
    BadBody,
    Binding,
    FrameCodec,
    frame_checksum,
    header_problem,
    parse_header,
)
from holomem.log.segment import SegmentHeader, scan_frames, unpack_header, valid_frame_after


class IntactReader:
    """Reads one generation's segments, handing each intact transaction to ``keep``
    (its original sequence number and payloads) and accounting for the rest in
    ``ledger``."""

    def __init__(self, ledger: Ledger, codec: FrameCodec,
                 keep: Callable[[int, list[bytes]], None]) -> None:
        self.ledger = ledger
        self.codec = codec
        self.keep = keep
        #: transactions handed to ``keep``
        self.kept = 0

    def read(self, gen_dir: str, generation: int, ref: SegmentHeader,
             files: list[tuple[int, str, bytes]]) -> None:
        # A store's first generation starts at 1; a compacted one where its first
        # segment says (unknown if that segment is lost).
        self.ledger.expected = 1 if generation == 1 else None
        expected_number = 1
        for number, path, data in files:
            if number != expected_number:
                missing = os.path.join(gen_dir, segment_name(expected_number))
                names = (f"segment {expected_number}" if number == expected_number + 1
                         else f"segments {expected_number} to {number - 1}")
                self.ledger.lose_open(missing, 0, 0, f"{names} missing")
            expected_number = number + 1
            self._segment(path, data, generation, number, ref)
        self.ledger.end(gen_dir, ref.store_id, generation, files[-1][1], len(files[-1][2]))

    def _segment(self, path: str, data: bytes, generation: int, number: int,
                 ref: SegmentHeader) -> None:
        try:
            header = unpack_header(data, path)
        except HeaderError as exc:
            if len(data) < SEGMENT_HEADER_SIZE:
                self.ledger.lose_open(path, 0, len(data), f"segment header: {exc.reason}")
                return
            damaged = self.ledger.lose(
                path, 0, SEGMENT_HEADER_SIZE, f"segment header: {exc.reason} (its frames "
                "are read with the salt it holds and the store's identity)")
            raw = raw_header(data)
            header = ref._replace(generation=generation, number=number, salt=raw.salt,
                                  first_seq=raw.first_seq)
            before = self.kept
            self._frames(path, data, header, self._first_seq(data, header))
            if self.kept == before and len(data) > SEGMENT_HEADER_SIZE:
                damaged.reason += ("; no frame of this segment checks out with that salt, "
                                   "so the damage may be in the salt itself")
            return
        problem = foreign(header, ref, generation, number)
        if problem is not None:
            self.ledger.lose_open(path, 0, len(data), problem)
            return
        self.ledger.resume(header.first_seq, path, 0)
        self._frames(path, data, header, header.first_seq)

    def _first_seq(self, data: bytes, header: SegmentHeader) -> int:
        """The sequence number of the first frame of a segment whose header is damaged:
        the frame's own if it is intact, else the one expected, else the header's."""
        if len(data) >= SEGMENT_HEADER_SIZE + FRAME_HEADER_SIZE:
            fh = parse_header(data, SEGMENT_HEADER_SIZE)
            if (header_problem(fh) is None
                    and SEGMENT_HEADER_SIZE + FRAME_HEADER_SIZE + fh.length <= len(data)
                    and frame_checksum(data, SEGMENT_HEADER_SIZE, fh.length, header.salt)
                    == fh.checksum):
                return fh.seq
        expected = self.ledger.expected
        return expected if expected is not None else header.first_seq

    def _frames(self, path: str, data: bytes, header: SegmentHeader, seq: int) -> None:
        """Read the intact frames of one segment from its first, past any damage."""
        off = SEGMENT_HEADER_SIZE
        while off < len(data):
            scan = scan_frames(data, header, off, seq)
            for i, at in enumerate(scan.offsets):
                self._frame(path, data, at, seq + i, header)
            seq += len(scan.offsets)
            if scan.problem is None:
                return
            bad = scan.end
            nxt = valid_frame_after(data, header, bad, seq)
            if nxt is None:
                self.ledger.lose_open(path, bad, len(data) - bad, scan.problem.reason, seq)
                return
            found = parse_header(data, nxt).seq
            self.ledger.lose(path, bad, nxt - bad, scan.problem.reason, seq, found - 1)
            off, seq = nxt, found

    def _frame(self, path: str, data: bytes, off: int, seq: int,
               header: SegmentHeader) -> None:
        fh = parse_header(data, off)
        size = FRAME_HEADER_SIZE + fh.length
        view = memoryview(data)
        binding = Binding(header.store_id, header.generation, header.number, header.salt)
        lose = self.ledger.lose
        try:
            payloads = self.codec.decode_body(fh, view[off : off + FRAME_CHECKSUMMED],
                                              view[off + FRAME_HEADER_SIZE : off + size],
                                              binding)
            for payload in payloads:
                decode_event(payload, seq=seq)
        except BadBody as exc:
            lose(path, off, size, f"transaction {seq}: {exc}", seq, seq)
            return
        except CorruptError as exc:
            lose(path, off, size, exc.message, seq, seq)
            return
        if seq <= self.ledger.last_kept:
            lose(path, off, size, f"transaction {seq} again (a duplicate of one already "
                 "copied)")
            return
        if not payloads:
            lose(path, off, size, f"transaction {seq} holds no event: nothing to copy",
                 seq, seq)
            return
        self.ledger.resume(seq, path, off)
        self.keep(seq, payloads)
        self.kept += 1
        self.ledger.kept(seq)


def reference_header(files: list[tuple[int, str, bytes]]) -> SegmentHeader:
    """The header whose store id, flags and key check every segment must share: the
    first one that reads back intact, else the first one's bytes as they are."""
    for _, path, data in files:
        with contextlib.suppress(HeaderError):
            return unpack_header(data, path)
    for _, _, data in files:
        if len(data) >= SEGMENT_HEADER_SIZE:
            return raw_header(data)
    raise CorruptError("no segment header can be read: nothing to salvage",
                       path=files[0][1], offset=0)


def raw_header(data: bytes) -> SegmentHeader:
    """A segment header's fields as its bytes hold them, unverified."""
    (_magic, wver, rver, flags, _res, store_id, gen, number, first_seq, salt, kcv, _res2,
     _sum) = SEGMENT_HEADER.unpack_from(data, 0)
    # Unverified, the flags may be what was damaged: a header holds a key check exactly
    # when its store is encrypted (a plaintext one holds zeros), so that decides the bit.
    flags = (flags | SEGMENT_FLAG_ENCRYPTED if any(kcv)
             else flags & ~SEGMENT_FLAG_ENCRYPTED)
    return SegmentHeader(wver, rver, flags, store_id, gen, number, max(1, first_seq), salt, kcv)


def foreign(h: SegmentHeader, ref: SegmentHeader, generation: int, number: int) -> str | None:
    """Why segment ``h`` does not belong where it was found, or None."""
    if (h.store_id, h.flags, h.key_check) != (ref.store_id, ref.flags, ref.key_check):
        return "segment belongs to another store, or its encryption settings differ"
    if h.generation != generation:
        return f"segment header says generation {h.generation}, its directory {generation}"
    if h.number != number:
        return f"segment header says segment {h.number}, its file name {number}"
    return None
