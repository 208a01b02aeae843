"""Byte surgery on journal files, for the tests of holomem/log (leveldb ``log_test.cc``).

The frame and segment layouts are written out here independently of
``holomem.log.format`` (from FORMAT.md), so that a test that damages a file does
not rely on the code it is testing to find where to damage it.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from typing import NamedTuple

import xxhash

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SEGMENT_HEADER_SIZE = 96
#: u32 body length, u16 flags, u8 kind, u8 reserved, u64 seq, u64 checksum.
FRAME_HEADER = struct.Struct("<IHBBQQ")
FRAME_HEADER_SIZE = 24
FRAME_FLAG_COMPRESSED = 0x0001
FRAME_FLAG_ENCRYPTED = 0x0002
SALT_OFFSET = 56  # u64 checksum salt in the segment header
FIRST_SEQ_OFFSET = 48  # u64 first sequence number in the segment header
#: The watermark (FORMAT.md §7.1), in the generation directory: magic, write version,
#: read version, flags, reserved, store id, generation, segment, seq, end, checksum.
WATERMARK_NAME = "watermark"
WATERMARK = struct.Struct("<8sBBH4s16sQQQQQ")


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


# -- the watermark and crashes -----------------------------------------------------------
def watermark_path(store: str) -> str:
    return os.path.join(generation_dirs(store)[-1], WATERMARK_NAME)


def watermark(store: str) -> tuple[int, int, int] | None:
    """(segment, seq, end) of the live generation's watermark, or None without one."""
    path = watermark_path(store)
    if not os.path.exists(path):
        return None
    fields = WATERMARK.unpack(read(path))
    return fields[7], fields[8], fields[9]


def crashed_append(store: str, txs: list[list[bytes]], key: bytes | None = None,
                   segment_size: int = 64 * 1024 * 1024) -> None:
    """Open the journal in a child process, append ``txs`` (each synced before it
    returns) and die without closing: the state a crash right after those appends
    were acknowledged leaves on disk."""
    code = (
        "import json, os, sys\n"
        "from holomem.log import Journal\n"
        "args = json.loads(sys.argv[1])\n"
        "key = bytes.fromhex(args['key']) if args['key'] else None\n"
        "j = Journal.open(args['store'], key=key, sync='full',"
        " segment_size=args['segment_size'])\n"
        "for tx in args['txs']:\n"
        "    j.append([bytes.fromhex(p) for p in tx])\n"
        "os._exit(0)\n"
    )
    args = {"store": store, "key": key.hex() if key else "", "segment_size": segment_size,
            "txs": [[p.hex() for p in tx] for tx in txs]}
    env = {**os.environ, "PYTHONPATH": ROOT}
    subprocess.run([sys.executable, "-c", code, json.dumps(args)], check=True, env=env,
                   cwd=ROOT, capture_output=True, timeout=120)


def save_generation(store: str) -> dict[str, bytes]:
    """Every file of the live generation (segments, watermark, ...) by path."""
    gen = generation_dirs(store)[-1]
    return {os.path.join(gen, n): read(os.path.join(gen, n)) for n in sorted(os.listdir(gen))}


def restore_generation(store: str, saved: dict[str, bytes]) -> None:
    """Put the live generation's files back as :func:`save_generation` found them."""
    gen = generation_dirs(store)[-1]
    for name in os.listdir(gen):
        if os.path.join(gen, name) not in saved:
            os.unlink(os.path.join(gen, name))
    for path, data in saved.items():
        write(path, data)
