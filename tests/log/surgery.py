"""Byte surgery on journal files, for the tests of holomem/log (leveldb ``log_test.cc``).

The frame and segment layouts are written out here independently of
``holomem.log.format`` (from FORMAT.md), so that a test that damages a file does
not rely on the code it is testing to find where to damage it.
"""

from __future__ import annotations

import os
import struct
from typing import NamedTuple

import xxhash

SEGMENT_HEADER_SIZE = 96
#: u32 body length, u16 flags, u8 kind, u8 reserved, u64 seq, u64 checksum.
FRAME_HEADER = struct.Struct("<IHBBQQ")
FRAME_HEADER_SIZE = 24
FRAME_FLAG_COMPRESSED = 0x0001
FRAME_FLAG_ENCRYPTED = 0x0002
SALT_OFFSET = 56  # u64 checksum salt in the segment header
FIRST_SEQ_OFFSET = 48  # u64 first sequence number in the segment header


class Frame(NamedTuple):
    """One frame of a segment file, as laid out on disk."""

    offset: int
    length: int  # body bytes
    flags: int
    seq: int

    @property
    def end(self) -> int:
        return self.offset + FRAME_HEADER_SIZE + self.length

    @property
    def size(self) -> int:
        return FRAME_HEADER_SIZE + self.length


# -- whole files -------------------------------------------------------------------------
def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write(path: str, data: bytes) -> None:
    """Replace the file's contents with ``data`` (length included)."""
    with open(path, "wb") as f:
        f.write(data)


def truncate(path: str, length: int) -> None:
    os.truncate(path, length)


def append(path: str, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def overwrite(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip_bit(path: str, offset: int, bit: int) -> None:
    """Flip bit ``bit`` (0..7) of the byte at ``offset``."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ (1 << bit)]))


def flipped(data: bytes, offset: int, bit: int) -> bytes:
    """``data`` with bit ``bit`` of the byte at ``offset`` flipped."""
    out = bytearray(data)
    out[offset] ^= 1 << bit
    return bytes(out)


# -- the store directory -----------------------------------------------------------------
def generation_dirs(store: str) -> list[str]:
    return sorted(
        os.path.join(store, name) for name in os.listdir(store)
        if name.startswith("gen-") and not name.endswith(".tmp")
    )


def segment_paths(store: str) -> list[str]:
    """Every segment file of the live (highest) generation, in order."""
    gen = generation_dirs(store)[-1]
    return sorted(
        os.path.join(gen, name) for name in os.listdir(gen)
        if name.startswith("seg-") and name.endswith(".hlj")
    )


def all_files(store: str) -> list[str]:
    out: list[str] = []
    for root, _, files in os.walk(store):
        out.extend(os.path.join(root, name) for name in files)
    return sorted(out)


def snapshot(store: str) -> dict[str, tuple[int, int, int]]:
    """Every file and directory under ``store``: (kind, size, mtime in ns)."""
    out: dict[str, tuple[int, int, int]] = {}
    for root, dirs, files in os.walk(store):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            out[os.path.relpath(path, store)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    st = os.lstat(store)
    out["."] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def files_containing(store: str, marker: bytes) -> list[str]:
    """Every file under ``store`` whose bytes contain ``marker`` anywhere."""
    return [path for path in all_files(store) if marker in read(path)]


# -- frames ------------------------------------------------------------------------------
def salt(data: bytes) -> int:
    return int.from_bytes(data[SALT_OFFSET : SALT_OFFSET + 8], "little")


def frames(path_or_data: str | bytes) -> list[Frame]:
    """The frames of a well-formed segment, by walking their length fields."""
    data = read(path_or_data) if isinstance(path_or_data, str) else path_or_data
    out = []
    off = SEGMENT_HEADER_SIZE
    while off + FRAME_HEADER_SIZE <= len(data):
        length, flags, _kind, _reserved, seq, _checksum = FRAME_HEADER.unpack_from(data, off)
        if off + FRAME_HEADER_SIZE + length > len(data):
            break
        out.append(Frame(off, length, flags, seq))
        off += FRAME_HEADER_SIZE + length
    return out


def frame_bytes(path: str, frame: Frame) -> bytes:
    return read(path)[frame.offset : frame.end]


def reseal_checksum(frame: bytes, salt_value: int) -> bytes:
    """``frame`` with its xxh3-64 checksum recomputed for a segment salted ``salt_value``.

    The checksum covers header bytes [0, 16) and the body, so a forgery made with
    this passes the checksum and only authentication can catch it.
    """
    h = xxhash.xxh3_64(frame[:16], salt_value)
    h.update(frame[FRAME_HEADER_SIZE:])
    return frame[:16] + h.intdigest().to_bytes(8, "little") + frame[FRAME_HEADER_SIZE:]


def with_seq(frame: bytes, seq: int) -> bytes:
    """``frame`` with its header's sequence number rewritten (checksum left stale)."""
    return frame[:8] + seq.to_bytes(8, "little") + frame[16:]
