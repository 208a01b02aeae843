"""Where a marker string is on disk: every byte of every file under a store directory.

A raw byte search is not enough on its own. The journal zstd-compresses frames of
256 bytes or more, so a marker inside a compressed frame need not appear as such
in the file (zstd Huffman-codes its literals); and in an encrypted store every
byte is ciphertext. So, besides the raw bytes, every file is also searched

- inside every zstd frame that starts anywhere in it (found by its magic number,
  whatever the file is: a live segment, a leftover, a half-erased file);
- with the key, inside every journal frame, every text-segment record and every
  checkpoint block that opens under it, at any offset of any file.

The layouts are read from FORMAT.md; the only holomem code used is the envelope
(AES-256-GCM) and the checksum, which a scan that decrypts cannot avoid.
"""

from __future__ import annotations

import os
import struct

import zstandard

from holomem.log.checksum import checksum_parts
from holomem.log.envelope import Envelope, OpenFailed

SEGMENT_HEADER_SIZE = 96
FRAME_HEADER = struct.Struct("<IHBBQQ")  # length, flags, kind, reserved, seq, checksum
FRAME_HEADER_SIZE = 24
FRAME_AAD = struct.Struct("<16sQQ16s")  # store id, generation, segment, frame header[0:16]
FLAG_COMPRESSED, FLAG_SEALED = 1, 2
RECORD = struct.Struct("<IHHQQ")  # body length, flags, reserved, seq, checksum
RECORD_SIZE = 24
RECORD_AAD = struct.Struct("<16sQQQ")  # version 1: store id, generation, offset, seq
RECORD_AAD_V2 = struct.Struct("<16sQ")  # version 2: store id, the file's salt
TEXT_HEADER = struct.Struct("<8sBBH4s16sQQ")  # magic .. salt (FORMAT.md §9)
CHECKPOINT_HEADER = struct.Struct("<8sBBHI16sQQQQ16sQ")  # FORMAT.md §9.2
CHECKPOINT_BLOCK = struct.Struct("<IIIIQ")  # stored, length, flags, index, checksum
#: store id, generation, seq, journal digest, schema, index, flags
CHECKPOINT_AAD = struct.Struct("<16sQQ16sIII")
CKPT_COMPRESSED, CKPT_SEALED = 1, 2
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MAX_ZSTD_OUT = 1 << 24


def all_files(store: str) -> list[str]:
    out: list[str] = []
    for root, _dirs, files in os.walk(store):
        out.extend(os.path.join(root, name) for name in files)
    return sorted(out)


def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _zstd_contents(data: bytes) -> list[bytes]:
    out = []
    start = data.find(ZSTD_MAGIC)
    while start >= 0:
        try:
            d = zstandard.ZstdDecompressor().decompressobj()
            out.append(d.decompress(data[start : start + MAX_ZSTD_OUT]))
        except zstandard.ZstdError:
            pass
        start = data.find(ZSTD_MAGIC, start + 1)
    return out


def _journal_plaintexts(data: bytes, key: bytes) -> list[bytes]:
    """Every journal frame in ``data`` (a segment) that opens under ``key``."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return []
    store_id = data[16:32]
    generation, number = struct.unpack_from("<QQ", data, 32)
    env = Envelope(key)
    out = []
    # Any offset, not only the chain of valid frames: a leftover or damaged file
    # must not hide a frame behind a bad one.
    for off in range(SEGMENT_HEADER_SIZE, len(data) - FRAME_HEADER_SIZE + 1):
        length, flags, kind, _res, _seq, _ck = FRAME_HEADER.unpack_from(data, off)
        if kind != 1 or not flags & FLAG_SEALED or off + FRAME_HEADER_SIZE + length > len(data):
            continue
        body = data[off + FRAME_HEADER_SIZE : off + FRAME_HEADER_SIZE + length]
        aad = FRAME_AAD.pack(store_id, generation, number, data[off : off + 16])
        try:
            plain = env.open(body, aad)
        except OpenFailed:
            continue
        out.append(plain)
        if flags & FLAG_COMPRESSED:
            out.extend(_zstd_contents(plain))
    return out


def _record_plaintexts(data: bytes, key: bytes) -> list[bytes]:
    """Every text-segment record in ``data`` that opens under ``key``, at any offset."""
    if len(data) < 64:
        return []
    _magic, _w, _r, _flags, _res, store_id, generation, salt = TEXT_HEADER.unpack_from(data, 0)
    env = Envelope(key)
    out = []
    for off in range(64, len(data) - RECORD_SIZE + 1):
        length, flags, reserved, seq, stored = RECORD.unpack_from(data, off)
        if not flags & 1 or reserved or off + RECORD_SIZE + length > len(data):
            continue
        body = data[off + RECORD_SIZE : off + RECORD_SIZE + length]
        if checksum_parts(data[off : off + 16], body, salt) != stored:
            continue
        # Either version's binding, whatever the header says: a damaged or foreign
        # header must not hide a record.
        for aad in (RECORD_AAD.pack(store_id, generation, off, seq),
                    RECORD_AAD_V2.pack(store_id, salt)):
            try:
                out.append(env.open(body, aad))
            except OpenFailed:
                continue
    return out


def _checkpoint_plaintexts(data: bytes, key: bytes) -> list[bytes]:
    """Every checkpoint block in ``data`` that opens under ``key``, at any offset."""
    if len(data) < CHECKPOINT_HEADER.size or not data.startswith(b"HOLOCKP\x00"):
        return []
    (_m, _w, _r, _f, schema, store_id, generation, seq, salt, _len, digest,
     _ck) = CHECKPOINT_HEADER.unpack_from(data, 0)
    env = Envelope(key)
    out = []
    for off in range(CHECKPOINT_HEADER.size, len(data) - CHECKPOINT_BLOCK.size + 1):
        stored, _length, flags, index, check = CHECKPOINT_BLOCK.unpack_from(data, off)
        end = off + CHECKPOINT_BLOCK.size + stored
        if not flags & CKPT_SEALED or end > len(data):
            continue
        body = data[off + CHECKPOINT_BLOCK.size : end]
        if checksum_parts(data[off : off + 16], body, salt) != check:
            continue
        try:
            plain = env.open(body, CHECKPOINT_AAD.pack(store_id, generation, seq, digest,
                                                       schema, index, flags))
        except OpenFailed:
            continue
        out.append(plain)
        if flags & CKPT_COMPRESSED:
            out.extend(_zstd_contents(plain))
    return out


def found_in(path: str, marker: bytes, key: bytes | None = None) -> list[str]:
    """How ``marker`` is present in the file at ``path``: ``[]`` if it is not."""
    data = read(path)
    how = []
    if marker in data:
        how.append("raw bytes")
    if any(marker in c for c in _zstd_contents(data)):
        how.append("inside a zstd frame")
    if key is not None:
        if any(marker in p for p in _journal_plaintexts(data, key)):
            how.append("inside a journal frame opened with the key")
        if any(marker in p for p in _record_plaintexts(data, key)):
            how.append("inside a text record opened with the key")
        if any(marker in p for p in _checkpoint_plaintexts(data, key)):
            how.append("inside a checkpoint block opened with the key")
    return how


def files_with(store: str, marker: bytes, key: bytes | None = None) -> dict[str, list[str]]:
    """Every file under ``store`` that holds ``marker`` (relative path -> how)."""
    out = {}
    for path in all_files(store):
        how = found_in(path, marker, key)
        if how:
            out[os.path.relpath(path, store)] = how
    return out


def plaintext_files_with(store: str, marker: bytes) -> list[str]:
    """Files under ``store`` whose raw bytes, or zstd frames, hold ``marker``."""
    return sorted(files_with(store, marker, None))


def is_checkpoint(relpath: str) -> bool:
    parts = relpath.split(os.sep)
    return (len(parts) == 2 and parts[0].startswith("gen-")
            and parts[1].startswith("checkpoint-") and parts[1].endswith(".hck"))


def is_journal_segment(relpath: str) -> bool:
    parts = relpath.split(os.sep)
    return (len(parts) == 2 and parts[0].startswith("gen-") and parts[1].startswith("seg-")
            and parts[1].endswith(".hlj"))
