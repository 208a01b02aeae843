"""A derived file of checksummed, optionally sealed records at caller-chosen offsets.

Owns: encoding and verifying the records and header of the record file (sealing
included), and its positioned reads, writes and zeroing, all through
:mod:`holomem.log.fs`. Imports the standard library and the other ``holomem.log``
modules. The layout's constants are :mod:`holomem.log.format`'s; FORMAT.md §9.1
documents the bytes.

This is the "small interface from log/" through which the text segment projection
gets its file (STYLE.md §1): the projection chooses offsets and bodies; this module
owns the path, the key and every syscall, so projections never open files or hold
keys. Nothing here is a source of truth: a record that fails verification is
reported as missing, and the caller rebuilds it from the journal.

Two versions are read (FORMAT.md §9.1). A version 1 file binds each record to its
generation, offset and sequence number, so no record survives a compaction's
renumbering. A version 2 file (the only one created now) binds records to the store
and the file's salt alone: a compaction's new file that keeps the salt
(:meth:`RecordFile.carries`) takes verified records from the old one as they are.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from holomem.errors import ReadOnlyError, StorageIOError
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.checksum import checksum, checksum_parts, xxh3
from holomem.log.envelope import OVERHEAD, Envelope, OpenFailed
from holomem.log.format import (
    RECORD,
    RECORD_AAD,
    RECORD_AAD_V2,
    RECORD_CHECKSUMMED,
    RECORD_FILE_HEADER,
    RECORD_FILE_HEADER_CHECKSUMMED,
    RECORD_FILE_HEADER_SIZE,
    RECORD_FILE_MAGIC,
    RECORD_FILE_VERSION,
    RECORD_FILE_VERSIONS,
    RECORD_FLAG_SEALED,
    RECORD_SIZE,
    RECORD_V2_PLAIN,
    RECORD_V2_PLAIN_CHECKSUMMED,
)

P_RECORD_WRITE = cp.point("recordfile.write", "a derived record was written, not synced")
P_RECORD_ZERO = cp.point("recordfile.zero", "a derived record was zeroed, not synced")
P_RECORD_SEAL = cp.point("recordfile.seal", "a derived file's data is synced, header not yet")

#: Where the first record starts (the layout is :mod:`holomem.log.format`'s).
HEADER_SIZE = RECORD_FILE_HEADER_SIZE

__all__ = ["HEADER_SIZE", "RECORD_SIZE", "RecordFile"]


class RecordFile:
    """One derived file in a generation directory. Thread safe for reads (pread)."""

    first_offset = HEADER_SIZE

    def __init__(self, path: str, *, store_id: bytes, generation: int,
                 envelope: Envelope | None, read_only: bool, salt: int | None = None) -> None:
        """Open the file at ``path``, or create it (a writer) with a new salt, or with
        ``salt`` when given: a compaction's new file that will hold records copied from
        a version 2 file with that salt."""
        self.path = path
        self.store_id = store_id
        self.generation = generation
        self.read_only = read_only
        self._envelope = envelope
        self._fd = -1
        self.salt = 0
        #: the format version of the file's records (RECORD_FILE_VERSIONS)
        self.version = RECORD_FILE_VERSION
        self._new_salt = salt
        #: Records of every event up to this sequence number were complete and synced
        #: when the file was last sealed (0: nothing is known).
        self.synced_seq = 0
        self.rebuilt = False
        self._open()

    @property
    def available(self) -> bool:
        return self._fd >= 0

    def _open(self) -> None:
        if self.read_only:
            try:
                self._fd = fs.open_ro(self.path)
            except StorageIOError:
                return  # missing or unreadable: records are read from the journal
            if not self._read_header():
                fs.close(self._fd)
                self._fd = -1
            return
        if os.path.exists(self.path):
            self._fd = fs.open_rw(self.path)
            if self._read_header():
                return
            # An unreadable header: the file cannot be trusted; erase it (it may hold
            # text) and start again.
            fs.close(self._fd)
            fs.erase(self.path)
        self._create()

    def _read_header(self) -> bool:
        try:
            raw = fs.read_at(self._fd, HEADER_SIZE, 0, self.path)
        except StorageIOError:
            return False
        if len(raw) < HEADER_SIZE:
            return False
        (magic, wver, rver, flags, _res, store_id, generation, salt, synced,
         stored) = RECORD_FILE_HEADER.unpack(raw)
        if (magic != RECORD_FILE_MAGIC
                or checksum(raw[:RECORD_FILE_HEADER_CHECKSUMMED]) != stored
                or rver != wver or rver not in RECORD_FILE_VERSIONS
                or store_id != self.store_id
                or generation != self.generation
                or bool(flags & RECORD_FLAG_SEALED) != (self._envelope is not None)):
            return False
        self.salt = salt
        self.synced_seq = synced
        self.version = rver
        return True

    def _header(self, synced_seq: int) -> bytes:
        raw = RECORD_FILE_HEADER.pack(
            RECORD_FILE_MAGIC, self.version, self.version,
            RECORD_FLAG_SEALED if self._envelope is not None else 0, bytes(4),
            self.store_id, self.generation, self.salt, synced_seq, 0)
        head = raw[:RECORD_FILE_HEADER_CHECKSUMMED]
        return head + checksum(head).to_bytes(8, "little")

    def _create(self) -> None:
        self.version = RECORD_FILE_VERSION
        self.salt = (self._new_salt if self._new_salt is not None
                     else int.from_bytes(os.urandom(8), "little"))
        self._fd = fs.create(self.path)
        fs.write_at(self._fd, self._header(0), 0, self.path)
        fs.sync(self._fd, self.path)
        fs.sync_dir(os.path.dirname(self.path))
        self.synced_seq = 0
        self.rebuilt = True

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError("derived file opened read-only")

    # -- layout -----------------------------------------------------------------------
    def record_size(self, body_length: int) -> int:
        """Bytes a record with a body of ``body_length`` takes on disk."""
        return RECORD_SIZE + body_length + (OVERHEAD if self._envelope is not None else 0)

    def size(self) -> int:
        return fs.size(self._fd, self.path) if self._fd >= 0 else 0

    def carries(self, other: RecordFile) -> bool:
        """Whether a record that verifies in ``other`` is, byte for byte, a valid record
        of this file at any offset: both are version 2 files of one store, sealed
        alike, with one salt."""
        return (self.version == other.version == 2 and self.salt == other.salt
                and self.store_id == other.store_id
                and (self._envelope is None) == (other._envelope is None))

    def _aad(self, offset: int, seq: int) -> bytes:
        if self.version == 1:
            return RECORD_AAD.pack(self.store_id, self.generation, offset, seq)
        return RECORD_AAD_V2.pack(self.store_id, self.salt)

    # -- records ----------------------------------------------------------------------
    def encode(self, offset: int, seq: int, body: bytes) -> bytes:
        """The bytes of a record (header and body) to be placed at ``offset``, written
        by transaction ``seq`` (bound to both in a version 1 file only)."""
        flags = 0
        if self._envelope is not None:
            flags = RECORD_FLAG_SEALED
            body = self._envelope.seal(body, self._aad(offset, seq))
        head = RECORD.pack(len(body), flags, 0, seq if self.version == 1 else 0,
                           0)[:RECORD_CHECKSUMMED]
        # One pass over head and body joined: the checksum checksum_parts gives.
        return head + checksum(head + body, self.salt).to_bytes(8, "little") + body

    def encode_run(self, offset: int, seq: int, bodies: list[bytes]) -> bytes:
        """The records of ``bodies`` back to back from ``offset``, written by
        transaction ``seq``: what :meth:`encode` of each at its place gives, joined.

        A version 2 file's plaintext records depend on nothing but their bodies: each
        header is packed straight from its body's length and checksum."""
        if self.version == 1 or self._envelope is not None:
            out: list[bytes] = []
            for body in bodies:
                out.append(self.encode(offset, seq, body))
                offset += len(out[-1])
            return b"".join(out)
        salt, head = self.salt, RECORD_V2_PLAIN_CHECKSUMMED.pack
        lengths = list(map(len, bodies))
        sums = [checksum(head(n) + b, salt) for n, b in zip(lengths, bodies, strict=True)]
        parts: list[bytes] = [b""] * (2 * len(bodies))
        parts[0::2] = map(RECORD_V2_PLAIN.pack, lengths, sums)
        parts[1::2] = bodies
        return b"".join(parts)

    def write(self, offset: int, data: bytes) -> None:
        """Write encoded record bytes (or several, back to back) at ``offset``; no sync."""
        self._writable()
        fs.write_at(self._fd, data, offset, self.path)
        cp.hit(P_RECORD_WRITE)

    def decode(self, raw: bytes | memoryview, offset: int, seq: int) -> bytes | None:
        """The body of the record of ``seq`` whose bytes are ``raw`` at ``offset``.

        None if they are not exactly such a record (missing, zeroed, damaged, stale;
        in a version 2 file, whose records carry no sequence number, the caller also
        checks that the body's id is the slot's).
        """
        if len(raw) < RECORD_SIZE:
            return None
        length, flags, reserved, rseq, stored = RECORD.unpack_from(raw, 0)
        if (rseq != (seq if self.version == 1 else 0) or reserved != 0
                or RECORD_SIZE + length != len(raw)):
            return None
        if isinstance(raw, bytes):  # (a read's: slices and one hash cost less than views)
            body: bytes | memoryview = raw[RECORD_SIZE:]
            if checksum(raw[:RECORD_CHECKSUMMED] + body, self.salt) != stored:
                return None
        else:
            body = memoryview(raw)[RECORD_SIZE:]
            if checksum_parts(memoryview(raw)[:RECORD_CHECKSUMMED], body, self.salt) != stored:
                return None
        if flags & RECORD_FLAG_SEALED:
            if self._envelope is None:
                return None
            try:
                return self._envelope.open(body, self._aad(offset, seq))
            except OpenFailed:
                return None
        if self._envelope is not None:
            return None
        return body if isinstance(body, bytes) else bytes(body)

    def decode_many(self, bufs: Sequence[bytes], starts: list[int], sizes: list[int],
                    offsets: list[int], seqs: list[int]) -> list[bytes | None]:
        """:meth:`decode` of several records: record ``k`` is ``sizes[k]`` bytes of
        ``bufs[k]`` from ``starts[k]`` (one read's buffer for all of them, or a buffer
        each), at ``offsets[k]`` in the file, written by ``seqs[k]``. The same answers;
        a plaintext file's records (what a compaction reads, and recall's k) are
        checked in one loop, without a slice or call per field."""
        if self._envelope is not None:
            return [self.decode(buf[s : s + n], off, seq) for buf, s, n, off, seq
                    in zip(bufs, starts, sizes, offsets, seqs, strict=True)]
        unpack, salt, hashed = RECORD.unpack_from, self.salt, xxh3
        v1 = self.version == 1  # a version 2 record carries 0, not its seq
        out: list[bytes | None] = []
        for buf, s, n, seq in zip(bufs, starts, sizes, seqs, strict=True):
            if n < RECORD_SIZE or s + n > len(buf):
                out.append(None)
                continue
            length, flags, reserved, rseq, stored = unpack(buf, s)
            # (decode's checks, inline to save a call per record: keep the two the same;
            # a sealed record has no place in a plaintext file)
            if (rseq != (seq if v1 else 0) or reserved or flags & RECORD_FLAG_SEALED
                    or RECORD_SIZE + length != n):
                out.append(None)
                continue
            body = buf[s + RECORD_SIZE : s + n]
            out.append(body if hashed(buf[s : s + RECORD_CHECKSUMMED] + body, salt) == stored
                       else None)
        return out

    def read(self, offset: int, size: int, seq: int) -> bytes | None:
        """Read and verify the record of ``seq`` at ``offset`` taking ``size`` bytes."""
        if self._fd < 0:
            return None
        try:
            raw = fs.read_at(self._fd, size, offset, self.path)
        except StorageIOError:
            return None
        return self.decode(raw, offset, seq)

    @property
    def binds_seq(self) -> bool:
        """Whether a record is bound to the sequence number of the transaction that
        wrote it (a version 1 file's)."""
        return self.version == 1

    def read_each(self, offsets: list[int], sizes: list[int], seqs: list[int] | None
                  ) -> list[bytes | None]:
        """:meth:`read` of the records of ``seqs`` at ``offsets`` taking ``sizes`` bytes
        — a few records anywhere in the file, one read each, verified as :meth:`read`
        verifies them (a plaintext file's in one loop, a short read by its length).
        ``seqs`` may be None when the file does not :attr:`bind <binds_seq>` them."""
        if self._fd < 0:
            return [None] * len(offsets)
        if seqs is None:
            assert not self.binds_seq, "a version 1 file's records are read by seq"
            seqs = [0] * len(offsets)
        try:
            raws = fs.read_each(self._fd, offsets, sizes, self.path)
        except StorageIOError:
            return [None] * len(offsets)
        return self.decode_many(raws, [0] * len(raws), list(map(len, raws)), offsets, seqs)

    def read_span(self, offset: int, size: int) -> bytes:
        """``size`` raw bytes at ``offset`` (several records back to back, unverified:
        :meth:`decode` each); b"" when the file cannot be read."""
        if self._fd < 0:
            return b""
        try:
            return fs.read_at(self._fd, size, offset, self.path)
        except StorageIOError:
            return b""

    def read_all(self) -> bytes:
        """The whole file (for verification after a crash)."""
        if self._fd < 0:
            return b""
        return fs.read_at(self._fd, self.size(), 0, self.path)

    def zero(self, offset: int, size: int) -> None:
        """Overwrite ``size`` bytes at ``offset`` with zeros; no sync."""
        self._writable()
        fs.zero_range(self._fd, offset, size, self.path)
        cp.hit(P_RECORD_ZERO)

    def truncate(self, size: int) -> None:
        self._writable()
        fs.truncate(self._fd, size, self.path)

    def sync(self) -> None:
        self._writable()
        fs.sync(self._fd, self.path)

    def seal(self, synced_seq: int) -> None:
        """Sync the data, then record that everything up to ``synced_seq`` is in place."""
        self._writable()
        fs.sync(self._fd, self.path)
        cp.hit(P_RECORD_SEAL)
        fs.write_at(self._fd, self._header(synced_seq), 0, self.path)
        fs.sync(self._fd, self.path)
        self.synced_seq = synced_seq

    def close(self) -> None:
        if self._fd >= 0:
            fs.close(self._fd)
            self._fd = -1

    def erase(self) -> None:
        """Overwrite the file with zeros, sync, unlink (for purge and rebuild)."""
        self.close()
        fs.erase(self.path)
