"""Frames: one transaction of opaque payloads, checksummed, maybe compressed and sealed.

Owns: encoding a transaction into frame bytes and decoding it back. Imports the
standard library, ``zstandard`` and the other ``holomem.log`` modules. FORMAT.md
("Frame") is the byte-level description.

    frame   := header body
    header  := length:u32 flags:u16 kind:u8 reserved:u8 seq:u64 checksum:u64
    body    := sealed(packed) if flags & ENCRYPTED else packed
    packed  := zstd(tx) if flags & COMPRESSED else tx
    tx      := count:u32 (length:u32 payload)*count

The checksum is xxh3-64 of header bytes [0, 16) followed by the body, seeded with
the segment's salt.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Sequence
from typing import NamedTuple

import zstandard

from holomem.log.checksum import checksum_parts
from holomem.log.envelope import OVERHEAD, Envelope, OpenFailed
from holomem.log.format import (
    AAD,
    COMPRESS_KEEP_RATIO,
    COMPRESS_MIN,
    COMPRESS_PROBE,
    COMPRESS_PROBE_MIN,
    COMPRESS_PROBE_RATIO,
    FRAME_CHECKSUMMED,
    FRAME_FLAG_COMPRESSED,
    FRAME_FLAG_ENCRYPTED,
    FRAME_FLAGS_KNOWN,
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    FRAME_KIND_TRANSACTION,
    MAX_FRAME_BODY,
    MAX_PAYLOADS,
    TX_COUNT,
    TX_LENGTH,
    ZSTD_FAST_LEVEL,
    ZSTD_LEVEL,
)


class FrameHeader(NamedTuple):
    length: int
    flags: int
    kind: int
    reserved: int
    seq: int
    checksum: int


class BadBody(Exception):
    """A body whose checksum held but which does not decode (auth, zstd or layout)."""

    def __init__(self, reason: str, *, auth: bool = False) -> None:
        super().__init__(reason)
        self.auth = auth


class Binding(NamedTuple):
    """Where a frame lives; sealed into its associated data."""

    store_id: bytes
    generation: int
    segment: int
    salt: int


def pack_tx(payloads: Sequence[bytes]) -> bytes:
    """The transaction body: a count, then each payload with its length."""
    if len(payloads) > MAX_PAYLOADS:
        raise ValueError("too many payloads in one transaction")
    parts: list[bytes] = [TX_COUNT.pack(len(payloads))] * (2 * len(payloads) + 1)
    parts[1::2] = map(TX_LENGTH.pack, map(len, payloads))
    parts[2::2] = payloads
    return b"".join(parts)


def _unpack_tx_fast(body: bytes) -> list[bytes] | None:
    """:func:`unpack_tx` of a well-formed body (None when it is not: unpack_tx then
    says why), without the per-payload bounds checks."""
    (count,) = TX_COUNT.unpack_from(body, 0)
    length, size = TX_LENGTH.unpack_from, TX_LENGTH.size
    pos = TX_COUNT.size
    out: list[bytes] = []
    for _ in range(count):
        (n,) = length(body, pos)
        pos += size
        out.append(body[pos : pos + n])
        pos += n
    return out if pos == len(body) else None


def unpack_tx(body: bytes) -> list[bytes]:
    fast = None
    if type(body) is bytes:
        with contextlib.suppress(struct.error):
            fast = _unpack_tx_fast(body)
    if fast is not None:
        return fast
    view = memoryview(body)
    if len(view) < TX_COUNT.size:
        raise BadBody("transaction body shorter than its count")
    (count,) = TX_COUNT.unpack_from(view, 0)
    pos = TX_COUNT.size
    out: list[bytes] = []
    for _ in range(count):
        if pos + TX_LENGTH.size > len(view):
            raise BadBody("transaction body ends inside a payload length")
        (n,) = TX_LENGTH.unpack_from(view, pos)
        pos += TX_LENGTH.size
        if pos + n > len(view):
            raise BadBody("transaction body ends inside a payload")
        out.append(bytes(view[pos : pos + n]))
        pos += n
    if pos != len(view):
        raise BadBody("trailing bytes after the last payload")
    return out


class FrameCodec:
    """Encodes and decodes frames for one store (key and compression settings).

    Not thread safe (zstd contexts are reused): the journal encodes under its lock,
    and each reader owns its codec.
    """

    def __init__(self, *, store_id: bytes, envelope: Envelope | None, compress: bool) -> None:
        self.store_id = store_id
        self.envelope = envelope
        self.compress = compress
        self._zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL) if compress else None
        self._zc_fast = zstandard.ZstdCompressor(level=ZSTD_FAST_LEVEL) if compress else None
        self._zd = zstandard.ZstdDecompressor()

    def level(self, body: bytes) -> int:
        """The zstd level this writer compresses ``body`` at (FORMAT.md §6; every level
        decodes alike): :data:`ZSTD_LEVEL`, or :data:`ZSTD_FAST_LEVEL` for a large body
        whose first :data:`COMPRESS_PROBE` bytes barely compress at level 1."""
        if self._zc is None or len(body) < COMPRESS_PROBE_MIN:
            return ZSTD_LEVEL
        probe = self._zc.compress(body[:COMPRESS_PROBE])
        return ZSTD_FAST_LEVEL if len(probe) > COMPRESS_PROBE * COMPRESS_PROBE_RATIO \
            else ZSTD_LEVEL

    def encode(self, seq: int, payloads: Sequence[bytes], where: Binding) -> bytes:
        body = pack_tx(payloads)
        flags = 0
        if self._zc is not None and len(body) >= COMPRESS_MIN:
            zc = self._zc
            if self._zc_fast is not None and self.level(body) == ZSTD_FAST_LEVEL:
                zc = self._zc_fast
            packed = zc.compress(body)
            if len(packed) <= len(body) * COMPRESS_KEEP_RATIO:
                body = packed
                flags |= FRAME_FLAG_COMPRESSED
        if self.envelope is not None:
            flags |= FRAME_FLAG_ENCRYPTED
            length = len(body) + OVERHEAD
        else:
            length = len(body)
        if length > MAX_FRAME_BODY:
            raise ValueError(f"transaction of {length} bytes exceeds the frame limit")
        head = FRAME_HEADER.pack(length, flags, FRAME_KIND_TRANSACTION, 0, seq, 0)[
            :FRAME_CHECKSUMMED
        ]
        if self.envelope is not None:
            body = self.envelope.seal(body, self._aad(where, head))
        assert len(body) == length  # the sealed size was predicted exactly
        return head + checksum_parts(head, body, where.salt).to_bytes(8, "little") + body

    def refile(self, data: bytes | memoryview, off: int, old: Binding, old_seq: int,
               seq: int, new: Binding) -> bytes:
        """The frame ``old_seq`` at ``off`` of ``data`` (written at ``old``) as frame ``seq`` at
        ``new``: its body's bytes kept as they are (compressed or not, nothing decoded),
        with a new header and a checksum under ``new``'s salt; a sealed body is opened
        under its old associated data and sealed under the new one (AES-GCM over the
        same bytes, so the length does not change). The frame's checksum is verified
        first. Raises :class:`BadBody` when the frame does not verify or open."""
        fh = parse_header(data, off)
        problem = header_problem(fh) or (
            f"frame {fh.seq} where {old_seq} was expected" if fh.seq != old_seq else None)
        if problem is not None:
            raise BadBody(f"no frame to refile: {problem}")
        start = off + FRAME_HEADER_SIZE
        view = memoryview(data)
        body: bytes | memoryview = view[start : start + fh.length]
        if len(body) != fh.length:
            raise BadBody("frame cut short")
        if frame_checksum(data, off, fh.length, old.salt) != fh.checksum:
            raise BadBody("frame checksum mismatch")
        head = FRAME_HEADER.pack(fh.length, fh.flags, fh.kind, 0, seq, 0)[:FRAME_CHECKSUMMED]
        if fh.flags & FRAME_FLAG_ENCRYPTED:
            if self.envelope is None:
                raise BadBody("encrypted frame in a store opened without a key", auth=True)
            try:
                plain = self.envelope.open(body,
                                           self._aad(old, view[off : off + FRAME_CHECKSUMMED]))
            except OpenFailed as exc:
                raise BadBody("authentication failed: the frame was altered or moved",
                              auth=True) from exc
            body = self.envelope.seal(plain, self._aad(new, head))
            assert len(body) == fh.length  # sealing the same bytes again: the same size
        elif self.envelope is not None:
            raise BadBody("plaintext frame in an encrypted store", auth=True)
        return head + checksum_parts(head, body, new.salt).to_bytes(8, "little") + bytes(body)

    def _aad(self, where: Binding, head: bytes | memoryview) -> bytes:
        return AAD.pack(self.store_id, where.generation, where.segment, bytes(head))

    def decode_body(
        self, header: FrameHeader, head: bytes | memoryview, body: bytes | memoryview,
        where: Binding,
    ) -> list[bytes]:
        """Unseal, decompress and split a body whose checksum was already verified."""
        data: bytes | memoryview = body
        if header.flags & FRAME_FLAG_ENCRYPTED:
            if self.envelope is None:
                raise BadBody("encrypted frame in a store opened without a key", auth=True)
            try:
                data = self.envelope.open(body, self._aad(where, head))
            except OpenFailed as exc:
                raise BadBody(
                    "authentication failed: the frame was altered, moved, or comes from "
                    "another store",
                    auth=True,
                ) from exc
        elif self.envelope is not None:
            raise BadBody("plaintext frame in an encrypted store", auth=True)
        if header.flags & FRAME_FLAG_COMPRESSED:
            try:
                data = self._zd.decompress(bytes(data), max_output_size=MAX_FRAME_BODY)
            except zstandard.ZstdError as exc:
                raise BadBody(f"zstd decompression failed: {exc}") from exc
        return unpack_tx(bytes(data))


def parse_header(buf: bytes | memoryview, offset: int) -> FrameHeader:
    return FrameHeader._make(FRAME_HEADER.unpack_from(buf, offset))


def header_problem(header: FrameHeader) -> str | None:
    """Why a header cannot start a valid frame, or None (checksum not yet checked)."""
    if header.kind != FRAME_KIND_TRANSACTION:
        if header.kind == 0 and header.length == 0 and header.seq == 0:
            return "zero-filled space"
        return f"unknown frame kind {header.kind}"
    if header.flags & ~FRAME_FLAGS_KNOWN:
        return f"unknown frame flags 0x{header.flags:04x}"
    if header.reserved != 0:
        return "reserved byte is not zero"
    if header.length > MAX_FRAME_BODY:
        return f"frame length {header.length} exceeds the limit"
    return None


def frame_checksum(buf: bytes | memoryview, offset: int, length: int, salt: int) -> int:
    head = memoryview(buf)[offset : offset + FRAME_CHECKSUMMED]
    start = offset + FRAME_HEADER_SIZE
    return checksum_parts(head, memoryview(buf)[start : start + length], salt)
