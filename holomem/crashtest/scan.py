"""Finding bytes in a store's files, wherever they hide: raw, compressed or sealed.

Owns: the search behind the harness's "in no file" checks (purged markers, plaintext in
an encrypted store, the text of forgotten facts): in each file, the raw bytes, every
zstd frame starting anywhere, and, with the key, every journal frame, text-segment
record and checkpoint block that opens under it, at any offset. Imports the log's
formats, envelope and file layer (through which it reads); the layouts searched are in
FORMAT.md.
"""

from __future__ import annotations

import contextlib
import os

import zstandard

from holomem.log import fs
from holomem.log.envelope import Envelope, OpenFailed
from holomem.log.format import (
    AAD,
    CHECKPOINT_AAD,
    CHECKPOINT_BLOCK,
    CHECKPOINT_BLOCK_SEALED,
    CHECKPOINT_BLOCK_SIZE,
    CHECKPOINT_HEADER,
    CHECKPOINT_HEADER_SIZE,
    CHECKPOINT_MAGIC,
    FRAME_FLAG_ENCRYPTED,
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    FRAME_KIND_TRANSACTION,
    RECORD,
    RECORD_AAD,
    RECORD_AAD_V2,
    RECORD_FILE_HEADER,
    RECORD_FILE_HEADER_SIZE,
    RECORD_FILE_MAGIC,
    RECORD_FLAG_SEALED,
    RECORD_SIZE,
    SEGMENT_HEADER,
    SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC,
)

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: bytes [4, 8) of a sealed journal frame's header (flags, kind, reserved), by flags.
_SEALED_FRAMES = [FRAME_HEADER.pack(0, flags, FRAME_KIND_TRANSACTION, 0, 0, 0)[4:8]
                  for flags in (FRAME_FLAG_ENCRYPTED, FRAME_FLAG_ENCRYPTED | 1)]
#: bytes [4, 8) of a sealed text-segment record's header (flags, reserved).
_SEALED_RECORD = RECORD.pack(0, RECORD_FLAG_SEALED, 0, 0, 0)[4:8]


def _zstd_contents(data: bytes) -> list[bytes]:
    """What every zstd frame starting anywhere in ``data`` decompresses to."""
    out = []
    at = data.find(_ZSTD_MAGIC)
    while at >= 0:
        with contextlib.suppress(zstandard.ZstdError):
            out.append(zstandard.ZstdDecompressor().decompressobj().decompress(data[at:]))
        at = data.find(_ZSTD_MAGIC, at + 1)
    return out


def _sealed_contents(data: bytes, key: bytes) -> list[bytes]:
    """Every journal frame and text-segment record in ``data`` that opens under ``key``,
    at any offset (a leftover or damaged file must not hide one behind bad bytes)."""
    env = Envelope(key)
    out: list[bytes] = []
    if len(data) >= SEGMENT_HEADER_SIZE and data[:8] == SEGMENT_MAGIC:
        # The fields are not verified: a damaged header must not hide its frames.
        _, _, _, _, _, store_id, generation, number, *_ = SEGMENT_HEADER.unpack_from(data)
        for pattern in _SEALED_FRAMES:
            at = data.find(pattern, 4)
            while at >= 0:
                off = at - 4
                length = (FRAME_HEADER.unpack_from(data, off)[0]
                          if off + FRAME_HEADER_SIZE <= len(data) else len(data))
                end = off + FRAME_HEADER_SIZE + length
                if end <= len(data):
                    aad = AAD.pack(store_id, generation, number, data[off : off + 16])
                    with contextlib.suppress(OpenFailed):
                        out.append(env.open(data[off + FRAME_HEADER_SIZE : end], aad))
                at = data.find(pattern, at + 1)
    if len(data) >= RECORD_FILE_HEADER_SIZE and data[:8] == RECORD_FILE_MAGIC:
        _, _, _, _, _, store_id, generation, salt, *_ = RECORD_FILE_HEADER.unpack_from(data)
        at = data.find(_SEALED_RECORD, RECORD_FILE_HEADER_SIZE + 4)
        while at >= 0:
            off = at - 4
            if off + RECORD_SIZE <= len(data):
                length, _flags, _res, seq, _ck = RECORD.unpack_from(data, off)
                end = off + RECORD_SIZE + length
                # either version's associated data (FORMAT.md §9.1), whatever the
                # header's version says
                for aad in (RECORD_AAD.pack(store_id, generation, off, seq),
                            RECORD_AAD_V2.pack(store_id, salt)) if end <= len(data) else ():
                    with contextlib.suppress(OpenFailed):
                        out.append(env.open(data[off + RECORD_SIZE : end], aad))
            at = data.find(_SEALED_RECORD, at + 1)
    if len(data) >= CHECKPOINT_HEADER_SIZE and data[:8] == CHECKPOINT_MAGIC:
        out += _checkpoint_blocks(data, env)
    return out


def _checkpoint_blocks(data: bytes, env: Envelope) -> list[bytes]:
    """Every sealed checkpoint block of ``data`` that opens, at any offset (its header
    fields unverified, as above)."""
    (_, _, _, _, schema, store_id, generation, seq, _, _, digest,
     _) = CHECKPOINT_HEADER.unpack_from(data)
    out: list[bytes] = []
    for off in range(CHECKPOINT_HEADER_SIZE, len(data) - CHECKPOINT_BLOCK_SIZE + 1):
        stored, _length, flags, index, _ck = CHECKPOINT_BLOCK.unpack_from(data, off)
        end = off + CHECKPOINT_BLOCK_SIZE + stored
        if not flags & CHECKPOINT_BLOCK_SEALED or end > len(data) or stored < 28:
            continue
        aad = CHECKPOINT_AAD.pack(store_id, generation, seq, digest, schema, index, flags)
        with contextlib.suppress(OpenFailed):
            out.append(env.open(data[off + CHECKPOINT_BLOCK_SIZE : end], aad))
    return out


def _contents(data: bytes, key: bytes | None) -> list[bytes]:
    """The raw bytes of a file and everything readable inside them: zstd frames and,
    with the key, sealed frames and records (and the zstd frames inside those)."""
    out = [data, *_zstd_contents(data)]
    if key is not None:
        for plain in _sealed_contents(data, key):
            out += [plain, *_zstd_contents(plain)]
    return out


def scan_files(top: str, needles: dict[str, bytes], only: str | None = None,
               key: bytes | None = None) -> list[str]:
    """Where each needle is in a file under ``top``: raw, in a zstd frame, or (with the
    key) inside a sealed frame or record."""
    out = []
    for root, _dirs, files in fs.walk(top):
        for name in files:
            if only is not None and name != only:
                continue
            path = os.path.join(root, name)
            data = fs.read_file(path)
            contents = _contents(data, key) if needles else []
            for what, needle in needles.items():
                if any(needle in c for c in contents):
                    how = "raw" if needle in data else "compressed or sealed"
                    out.append(f"{what} found in {os.path.relpath(path, top)} ({how})")
    return out
