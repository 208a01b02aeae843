"""The watermark: the last transaction of a generation known to be durable.

Owns: the watermark file's layout (FORMAT.md §7.1), reading it and replacing it.
Imports the standard library, :mod:`holomem.errors` and the other ``holomem.log``
modules; like the rest of the log it knows nothing of what transactions mean.

A checksum mismatch alone cannot tell a torn tail (the remains of an append that
never returned) from damage to a frame that was acknowledged. The watermark tells
them apart: the writer records the last transaction and where it ends whenever it
knows that every frame up to it is on disk — at its open once recovery is done, at
its close, and in a compaction's new generation before the switch. A bad frame at
or before that transaction is damage, never a torn tail. A watermark only ever
claims something that was true when it was written, and stays true: frames that
were durable stay in the file, so an older watermark (the one a crashed writer
leaves) is merely less informative, never wrong.
"""

from __future__ import annotations

import os
from typing import NamedTuple

from holomem.errors import FormatVersionError, HeaderError
from holomem.log import fs
from holomem.log.checksum import checksum
from holomem.log.format import (
    READ_VERSION,
    WATERMARK,
    WATERMARK_CHECKSUMMED,
    WATERMARK_FILE,
    WATERMARK_MAGIC,
    WATERMARK_SIZE,
    WRITE_VERSION,
)


class Watermark(NamedTuple):
    """Every transaction up to ``seq`` was durable; it ends at ``end`` in ``segment``."""

    store_id: bytes
    generation: int
    segment: int
    seq: int
    end: int

    def pack(self) -> bytes:
        raw = WATERMARK.pack(WATERMARK_MAGIC, WRITE_VERSION, READ_VERSION, 0, bytes(4),
                             self.store_id, self.generation, self.segment, self.seq,
                             self.end, 0)
        head = raw[:WATERMARK_CHECKSUMMED]
        return head + checksum(head).to_bytes(8, "little")


def watermark_path(gen_dir: str) -> str:
    return os.path.join(gen_dir, WATERMARK_FILE)


def unpack_watermark(data: bytes, path: str) -> Watermark:
    """Decode and verify a watermark; raise HeaderError or FormatVersionError."""
    if len(data) != WATERMARK_SIZE:
        raise HeaderError(f"watermark is {len(data)} bytes, {WATERMARK_SIZE} expected",
                          path=path, offset=0, length=len(data))
    (magic, _wver, rver, flags, reserved, store_id, generation, segment, seq, end,
     stored) = WATERMARK.unpack(data)
    if magic != WATERMARK_MAGIC:
        raise HeaderError("not a holomem watermark (bad magic)", path=path, offset=0,
                          length=8)
    if checksum(data[:WATERMARK_CHECKSUMMED]) != stored:
        raise HeaderError("watermark checksum mismatch", path=path, offset=0,
                          length=WATERMARK_SIZE)
    if rver > READ_VERSION:
        raise FormatVersionError(
            f"{path}: watermark needs format read version {rver}; this build reads up to "
            f"{READ_VERSION}. Upgrade holomem to open this store.")
    if flags or reserved != bytes(4) or segment < 1:
        raise HeaderError("watermark has unknown flags, non-zero reserved bytes or "
                          "segment number 0", path=path, offset=10, length=6)
    return Watermark(store_id, generation, segment, seq, end)


def read_watermark(gen_dir: str) -> Watermark | None:
    """The watermark of ``gen_dir``, or None if it has none (a store written by a build
    without watermarks, or a generation being built). Errors: ``corrupt.header``,
    ``format.version``, ``io``."""
    path = watermark_path(gen_dir)
    data = fs.read_file_or_none(path)
    return None if data is None else unpack_watermark(data, path)


def write_watermark(gen_dir: str, mark: Watermark) -> None:
    """Replace the watermark of ``gen_dir`` atomically and durably (temp file, fsync,
    rename, directory fsync). Every frame it covers must already be synced."""
    fs.write_file_atomic(watermark_path(gen_dir), mark.pack())
