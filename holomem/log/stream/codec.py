"""Transactions as stream messages: the file journal's frames, bound to their place.

Owns: encoding a transaction into one frame, splitting a message back into its frames
(a message holds one or more consecutive transactions, FORMAT.md §11), and checking
and decoding a frame. A frame is exactly the file journal's (checksum, zstd,
AES-256-GCM); the associated data binds store id, generation and sequence number
(segment 0), and the checksum is seeded with a salt derived from store id and
generation, so a frame copied into another stream, generation or position fails.
Imports the standard library and the log.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

from holomem.errors import AuthenticationError, CorruptError, InvalidError
from holomem.log.envelope import Envelope
from holomem.log.format import FRAME_CHECKSUMMED, FRAME_HEADER_SIZE
from holomem.log.frame import (
    BadBody,
    Binding,
    FrameCodec,
    frame_checksum,
    header_problem,
    parse_header,
)


def salt(store_id: bytes, generation: int) -> int:
    digest = hashlib.sha256(b"holomem stream salt" + store_id + generation.to_bytes(8, "little"))
    return int.from_bytes(digest.digest()[:8], "little")


class StreamCodec:
    """Frames of one generation of one store. Thread safe (encoding is serialised)."""

    def __init__(self, store_id: bytes, generation: int, envelope: Envelope | None,
                 compress: bool, where: str) -> None:
        self.binding = Binding(store_id, generation, 0, salt(store_id, generation))
        self._encoder = FrameCodec(store_id=store_id, envelope=envelope, compress=compress)
        self._decoder = FrameCodec(store_id=store_id, envelope=envelope, compress=compress)
        self._enc_lock = threading.Lock()
        self._dec_lock = threading.Lock()
        self.where = where

    def encode(self, seq: int, payloads: Sequence[bytes]) -> bytes:
        with self._enc_lock:
            try:
                return self._encoder.encode(seq, payloads, self.binding)
            except ValueError as exc:  # the frame's size limits
                raise InvalidError(str(exc)) from exc

    def split(self, stream_seq: int, data: bytes) -> list[tuple[int, bytes]]:
        """The frames of stream message ``stream_seq`` as ``(transaction seq, frame)``:
        one or more, their sequence numbers consecutive. Checks each header and length,
        not the checksums (:meth:`decode` does). Errors: ``corrupt``."""
        where = f"{self.where} stream message {stream_seq}"
        out: list[tuple[int, bytes]] = []
        off, end = 0, len(data)
        while off < end:
            if end - off < FRAME_HEADER_SIZE:
                raise CorruptError(f"{where}: {end - off} bytes after frame {len(out)} are "
                                   "shorter than a frame header")
            fh = parse_header(data, off)
            problem = header_problem(fh)
            if problem is None and fh.length > end - off - FRAME_HEADER_SIZE:
                problem = f"frame length {fh.length} runs past the message"
            if problem is None and out and fh.seq != out[-1][0] + 1:
                problem = f"frame sequence {fh.seq} does not follow {out[-1][0]}"
            if problem is not None:
                raise CorruptError(f"{where}: {problem}")
            stop = off + FRAME_HEADER_SIZE + fh.length
            out.append((fh.seq, data if off == 0 and stop == end else data[off:stop]))
            off = stop
        if not out:
            raise CorruptError(f"{where}: empty")
        return out

    def decode(self, seq: int, data: bytes) -> list[bytes]:
        """The payloads of frame ``data``, transaction ``seq``. Errors: ``corrupt``,
        ``corrupt.auth``."""
        where = f"{self.where} transaction {seq}"
        if len(data) < FRAME_HEADER_SIZE:
            raise CorruptError(f"{where}: shorter than a frame header")
        fh = parse_header(data, 0)
        problem = header_problem(fh)
        if problem is None and fh.length != len(data) - FRAME_HEADER_SIZE:
            problem = f"frame length {fh.length} does not match its bytes"
        if problem is None and frame_checksum(data, 0, fh.length, self.binding.salt) != \
                fh.checksum:
            problem = "checksum mismatch"
        if problem is None and fh.seq != seq:
            problem = f"the frame says sequence {fh.seq}"
        if problem is not None:
            raise CorruptError(f"{where}: {problem}")
        view = memoryview(data)
        with self._dec_lock:
            try:
                return self._decoder.decode_body(
                    fh, view[:FRAME_CHECKSUMMED], view[FRAME_HEADER_SIZE:], self.binding)
            except BadBody as exc:
                cls = AuthenticationError if exc.auth else CorruptError
                raise cls(f"{where}: {exc}") from exc
