"""Checkpoint files: an opaque payload, framed, checksummed, optionally sealed.

Owns: the bytes of a checkpoint file around its payload (FORMAT.md §9.2: header,
blocks, checksums, compression, AES-256-GCM under the store's key), writing one
atomically, reading and verifying one, listing a generation's, and erasing a
replaced one, all through :mod:`holomem.log.fs`. Imports the standard library,
``zstandard`` and the other ``holomem.log`` modules.

The payload is the projections' (:mod:`holomem.projections.checkpoint`); nothing
here knows what it holds, only that it is bound to a store id, a generation, a
sequence number, a schema version and the journal it summarises (its digest up to
that sequence number, :func:`journal_digest`), which the header carries and every
sealed block's associated data repeats, so a block moved from another checkpoint,
store or generation fails to open, and a checkpoint taken from a copy of the store
whose journal has since diverged does not match this journal.

A checkpoint is derived: a file that fails any check is reported (:class:`Invalid`)
and the caller replays the journal instead. It is also evidence: one written after the
journal was fsynced through its sequence number says so in its header, and
:func:`vouches` tells whether an authentic one proves transactions durable that the
journal no longer holds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

import xxhash
import zstandard

from holomem.errors import StorageIOError
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.checksum import checksum, checksum_parts
from holomem.log.envelope import Envelope, OpenFailed
from holomem.log.format import (
    CHECKPOINT_AAD,
    CHECKPOINT_BLOCK,
    CHECKPOINT_BLOCK_CHECKSUMMED,
    CHECKPOINT_BLOCK_COMPRESSED,
    CHECKPOINT_BLOCK_FLAGS_KNOWN,
    CHECKPOINT_BLOCK_LAST,
    CHECKPOINT_BLOCK_PAYLOAD,
    CHECKPOINT_BLOCK_SEALED,
    CHECKPOINT_BLOCK_SIZE,
    CHECKPOINT_CHECKSUMMED,
    CHECKPOINT_DIGEST_SIZE,
    CHECKPOINT_FLAG_JOURNAL_SYNCED,
    CHECKPOINT_FLAG_SEALED,
    CHECKPOINT_FLAGS_KNOWN,
    CHECKPOINT_HEADER,
    CHECKPOINT_HEADER_SIZE,
    CHECKPOINT_MAGIC,
    CHECKPOINT_RE,
    CHECKPOINT_VERSION,
    COMPRESS_KEEP_RATIO,
    TMP_SUFFIX,
    checkpoint_name,
)
from holomem.log.writer import Segment

P_CKPT_WRITTEN = cp.point("checkpoint.written",
                          "a checkpoint's temporary file is written and synced, not renamed")
P_CKPT_RENAMED = cp.point("checkpoint.renamed",
                          "a checkpoint was renamed into place, its directory not synced")
P_CKPT_PLACED = cp.point("checkpoint.placed",
                         "a new checkpoint is durable; the ones it replaces are not erased yet")

#: zstd level of checkpoint blocks: fast (a checkpoint is rewritten often).
ZSTD_LEVEL = 1


class Invalid(Exception):
    """A checkpoint file that must not be used; ``str()`` says why."""


class Stale(Invalid):
    """A checkpoint that reads as one but was not written for this journal: another
    store, generation, schema or format version, or another copy's journal."""


class Header(NamedTuple):
    write_version: int
    read_version: int
    flags: int
    schema: int
    store_id: bytes
    generation: int
    seq: int
    salt: int
    payload_length: int
    #: :func:`journal_digest` of the journal up to ``seq`` when the file was written
    digest: bytes


def journal_digest(segments: Sequence[Segment], seq: int) -> bytes:
    """The digest of a generation's journal up to transaction ``seq`` (FORMAT.md §9.2):
    xxh3-128 of the first segment's salt (u64), then the stored checksum of every frame
    from the first to ``seq``, in order. Each checksum covers its frame's sequence
    number and stored body under its segment's random salt, so two copies of a store
    that wrote different transactions after they parted have different digests."""
    h = xxhash.xxh3_128(segments[0].header.salt.to_bytes(8, "little"))
    for seg in segments:
        count = min(len(seg.checksums) // 8, seq - seg.first_seq + 1)
        if count <= 0:
            break
        h.update(seg.checksums[: 8 * count])  # a slice is a copy: the writer may append
    return h.digest()


class Written(NamedTuple):
    path: str
    #: bytes of the file
    size: int
    #: bytes of the payload
    payload: int


def header_bytes(h: Header) -> bytes:
    raw = CHECKPOINT_HEADER.pack(CHECKPOINT_MAGIC, h.write_version, h.read_version, h.flags,
                                 h.schema, h.store_id, h.generation, h.seq, h.salt,
                                 h.payload_length, h.digest, 0)
    head = raw[:CHECKPOINT_CHECKSUMMED]
    return head + checksum(head).to_bytes(8, "little")


def parse_header(raw: bytes | memoryview) -> Header:
    """The header at the start of ``raw``; :class:`Invalid` if it is not one (and
    :class:`Stale` for a format version this build does not use)."""
    if len(raw) < 10 or bytes(raw[:8]) != CHECKPOINT_MAGIC:
        raise Invalid("not a checkpoint (bad magic)")
    if raw[9] > CHECKPOINT_VERSION:
        raise Stale(f"format read version {raw[9]}; this build reads {CHECKPOINT_VERSION}")
    if raw[9] < CHECKPOINT_VERSION:
        # Version 1 (the journal's format version) has no journal digest: nothing
        # shows which journal it summarises.
        raise Stale(f"format read version {raw[9]}, from an older holomem, is not bound "
                    "to the journal it summarises")
    if len(raw) < CHECKPOINT_HEADER_SIZE:
        raise Invalid("shorter than a checkpoint header")
    (_, wver, rver, flags, schema, store_id, generation, seq, salt, length, digest,
     stored) = CHECKPOINT_HEADER.unpack_from(raw, 0)
    if checksum(memoryview(raw)[:CHECKPOINT_CHECKSUMMED]) != stored:
        raise Invalid("header checksum mismatch")
    if flags & ~CHECKPOINT_FLAGS_KNOWN:
        raise Invalid(f"unknown header flags {flags:#x}")
    return Header(wver, rver, flags, schema, store_id, generation, seq, salt, length, digest)


def _aad(h: Header, index: int, flags: int) -> bytes:
    return CHECKPOINT_AAD.pack(h.store_id, h.generation, h.seq, h.digest, h.schema, index,
                               flags)


def _cut(payload: Iterable[bytes | memoryview]) -> Iterator[bytes | memoryview]:
    size = CHECKPOINT_BLOCK_PAYLOAD
    buf = bytearray()
    for piece in payload:
        view = memoryview(piece).cast("B")
        if buf:
            take = size - len(buf)
            buf += view[:take]
            view = view[take:]
            if len(buf) < size:
                continue
            yield bytes(buf)
            buf = bytearray()
        while len(view) >= size:
            yield view[:size]
            view = view[size:]
        buf += view
    if buf:
        yield bytes(buf)


def _blocks(payload: Iterable[bytes | memoryview]) -> Iterator[tuple[bytes | memoryview, bool]]:
    """The payload cut into blocks of CHECKPOINT_BLOCK_PAYLOAD bytes: (block, last).
    A block inside one piece is a view of it; only a block that spans pieces is
    joined, so the payload's arrays are never copied whole."""
    prev: bytes | memoryview | None = None
    for block in _cut(payload):
        if prev is not None:
            yield prev, False
        prev = block
    yield (b"" if prev is None else prev), True


def write(gen_dir: str, *, store_id: bytes, generation: int, seq: int, digest: bytes,
          schema: int, envelope: Envelope | None, payload: Iterable[bytes | memoryview],
          journal_synced: bool, compress: bool = True, salt: int | None = None) -> Written:
    """Write the checkpoint of ``seq`` in ``gen_dir`` atomically: a temporary file,
    fsync, rename, directory fsync. The caller then erases the ones it replaces.
    ``digest`` is the journal's up to ``seq`` (:func:`journal_digest`);
    ``journal_synced`` says that the caller's fsync of the journal through ``seq``
    returned (the header then carries the flag :func:`vouches` reads); ``salt`` is
    drawn at random unless given (golden files only)."""
    if len(digest) != CHECKPOINT_DIGEST_SIZE:
        raise ValueError(f"a journal digest is {CHECKPOINT_DIGEST_SIZE} bytes")
    path = os.path.join(gen_dir, checkpoint_name(seq))
    tmp = path + TMP_SUFFIX
    fs.erase(tmp)  # one a crash left: zeroed, as everything a checkpoint held
    if salt is None:
        salt = int.from_bytes(os.urandom(8), "little")
    flags = CHECKPOINT_FLAG_SEALED if envelope is not None else 0
    if journal_synced:
        flags |= CHECKPOINT_FLAG_JOURNAL_SYNCED
    head = Header(CHECKPOINT_VERSION, CHECKPOINT_VERSION, flags, schema, store_id, generation,
                  seq, salt, 0, digest)
    zc = zstandard.ZstdCompressor(level=ZSTD_LEVEL) if compress else None
    fd = fs.create(tmp)
    offset = CHECKPOINT_HEADER_SIZE
    total = 0
    try:
        for index, (plain, last) in enumerate(_blocks(payload)):
            total += len(plain)
            bflags = CHECKPOINT_BLOCK_LAST if last else 0
            body = plain
            if zc is not None and plain:
                packed = zc.compress(plain)
                if len(packed) <= COMPRESS_KEEP_RATIO * len(plain):
                    body, bflags = packed, bflags | CHECKPOINT_BLOCK_COMPRESSED
            if envelope is not None:
                bflags |= CHECKPOINT_BLOCK_SEALED
                body = envelope.seal(body, _aad(head, index, bflags))
            bhead = CHECKPOINT_BLOCK.pack(len(body), len(plain), bflags, index, 0)
            bhead = bhead[:CHECKPOINT_BLOCK_CHECKSUMMED]
            bhead += checksum_parts(bhead, body, salt).to_bytes(8, "little")
            fs.write_at(fd, bhead + body, offset, tmp)
            offset += CHECKPOINT_BLOCK_SIZE + len(body)
        fs.write_at(fd, header_bytes(head._replace(payload_length=total)), 0, tmp)
        fs.sync(fd, tmp)
    except BaseException:
        fs.close(fd)
        fs.erase(tmp)
        raise
    fs.close(fd)
    cp.hit(P_CKPT_WRITTEN)
    fs.rename(tmp, path)
    cp.hit(P_CKPT_RENAMED)
    fs.sync_dir(gen_dir)
    cp.hit(P_CKPT_PLACED)
    return Written(path, offset, total)


def read(path: str, *, store_id: bytes, generation: int, digest: bytes | None, schema: int,
         envelope: Envelope | None) -> tuple[Header, bytearray]:
    """The header and payload of the checkpoint at ``path``, every check passed:
    :class:`Invalid` (saying why) otherwise. ``digest`` is the journal's up to the
    sequence number in the file's name (:func:`journal_digest`), which the file must
    carry; None only where the journal cannot give it (fsck, beside damage in the
    journal), and then the file is checked on its own."""
    try:
        raw = fs.read_file(path)
    except StorageIOError as exc:
        raise Invalid(f"unreadable: {exc}") from exc
    return verify(raw, name=os.path.basename(path), store_id=store_id, generation=generation,
                  digest=digest, schema=schema, envelope=envelope)


def verify(raw: bytes, *, name: str, store_id: bytes, generation: int, digest: bytes | None,
           schema: int, envelope: Envelope | None) -> tuple[Header, bytearray]:
    """:func:`read` on a file's content ``raw`` named ``name``."""
    h = _identified(raw, name, store_id, generation, envelope)
    if h.schema != schema:
        raise Stale(f"projection schema version {h.schema}; this build reads {schema}")
    if digest is not None and h.digest != digest:
        raise Stale(f"written for another journal: its journal digest differs from this "
                    f"journal's up to transaction {h.seq} (a copy of this store that wrote "
                    "other transactions since the two parted)")
    return h, _payload(raw, h, envelope)


def _identified(raw: bytes, name: str, store_id: bytes, generation: int,
                envelope: Envelope | None) -> Header:
    """The header of ``raw``, checked to be the file ``name`` of this store and
    generation, sealed as the store is; :class:`Invalid` otherwise."""
    h = parse_header(raw)
    m = CHECKPOINT_RE.match(name)
    if m is None or int(m.group(1)) != h.seq:
        raise Invalid(f"named {name!r} but holds sequence number {h.seq}")
    if h.store_id != store_id:
        raise Stale("written for another store (store id differs)")
    if h.generation != generation:
        raise Stale(f"written for generation {h.generation}, not {generation}")
    if bool(h.flags & CHECKPOINT_FLAG_SEALED) != (envelope is not None):
        raise Invalid("sealed in a plaintext store" if envelope is None
                      else "not sealed, in an encrypted store")
    return h


def vouches(path: str, *, store_id: bytes, generation: int,
            envelope: Envelope | None) -> int | None:
    """The sequence number up to which the checkpoint at ``path`` proves the journal
    durable, or None when it proves nothing.

    A file whose header carries the journal-synced flag was written only after the
    journal's fsync through its sequence number returned (FORMAT.md §9.2), so every
    transaction up to it was acknowledged and on disk. That is taken as proven only
    when the file is authentic: its header checksum, name, store id, generation and
    sealing match, and every block reads back -- in an encrypted store, authenticates
    under the key, whose associated data binds the sequence number. Unlike
    :func:`read`, neither the journal digest (it cannot be computed past the
    journal's end) nor the projection schema (the flag's promise is about the
    journal, not the payload) is checked. A file of a build before the flag, which may
    have been written ahead of the journal's fsync (``sync="none"``), proves nothing.
    """
    try:
        raw = fs.read_file(path)
        h = _identified(raw, os.path.basename(path), store_id, generation, envelope)
        if not h.flags & CHECKPOINT_FLAG_JOURNAL_SYNCED:
            return None
        _payload(raw, h, envelope)
    except (StorageIOError, Invalid):
        return None
    return h.seq


def _payload(raw: bytes, h: Header, envelope: Envelope | None) -> bytearray:
    view = memoryview(raw)
    # Every block holds at most CHECKPOINT_BLOCK_PAYLOAD bytes and takes at least its
    # header in the file: a length past that bound is damage, not an allocation.
    most = (len(view) // CHECKPOINT_BLOCK_SIZE + 1) * CHECKPOINT_BLOCK_PAYLOAD
    if h.payload_length > most:
        raise Invalid(f"header says {h.payload_length} payload bytes, more than the file holds")
    out = bytearray(h.payload_length)
    into = memoryview(out)
    filled = 0
    zd = zstandard.ZstdDecompressor()
    pos, index = CHECKPOINT_HEADER_SIZE, 0
    while True:
        if pos + CHECKPOINT_BLOCK_SIZE > len(view):
            raise Invalid(f"block {index} at offset {pos} cut short (torn)")
        stored, plain, flags, bindex, check = CHECKPOINT_BLOCK.unpack_from(view, pos)
        body = view[pos + CHECKPOINT_BLOCK_SIZE : pos + CHECKPOINT_BLOCK_SIZE + stored]
        if bindex != index or flags & ~CHECKPOINT_BLOCK_FLAGS_KNOWN or len(body) != stored:
            raise Invalid(f"block {index} at offset {pos} damaged or cut short")
        if checksum_parts(view[pos : pos + CHECKPOINT_BLOCK_CHECKSUMMED], body, h.salt) != check:
            raise Invalid(f"block {index} at offset {pos}: checksum mismatch")
        if filled + plain > len(out):
            raise Invalid(f"payload longer than the {h.payload_length} bytes the header says")
        data: bytes | memoryview = body
        if bool(flags & CHECKPOINT_BLOCK_SEALED) != (envelope is not None):
            raise Invalid(f"block {index}: sealed flag does not match the store")
        if envelope is not None:
            try:
                data = envelope.open(body, _aad(h, index, flags))
            except OpenFailed as exc:
                raise Invalid(f"block {index}: authentication failed") from exc
        if flags & CHECKPOINT_BLOCK_COMPRESSED:
            try:
                data = zd.decompress(data, max_output_size=plain)
            except zstandard.ZstdError as exc:
                raise Invalid(f"block {index}: does not decompress") from exc
        if len(data) != plain:
            raise Invalid(f"block {index}: {len(data)} payload bytes, header says {plain}")
        into[filled : filled + plain] = data
        filled += plain
        pos += CHECKPOINT_BLOCK_SIZE + stored
        index += 1
        if flags & CHECKPOINT_BLOCK_LAST:
            break
    if pos != len(view):
        raise Invalid(f"{len(view) - pos} bytes after the last block")
    if filled != h.payload_length:
        raise Invalid(f"payload of {filled} bytes, header says {h.payload_length}")
    return out


def listing(gen_dir: str) -> list[tuple[int, str]]:
    """(sequence number, path) of every checkpoint in ``gen_dir``, oldest first."""
    try:
        names = fs.listdir(gen_dir)
    except StorageIOError:
        return []
    found = [(int(m.group(1)), os.path.join(gen_dir, n)) for n in names
             if (m := CHECKPOINT_RE.match(n))]
    return sorted(found)


def leftovers(gen_dir: str) -> list[str]:
    """Temporary files of checkpoints whose writing was interrupted."""
    try:
        names = fs.listdir(gen_dir)
    except StorageIOError:
        return []
    return [os.path.join(gen_dir, n) for n in sorted(names)
            if n.endswith(TMP_SUFFIX) and CHECKPOINT_RE.match(n[: -len(TMP_SUFFIX)])]


def erase(paths: Iterable[str], gen_dir: str) -> int:
    """Overwrite each file with zeros, sync, unlink; then sync the directory. Returns
    the bytes overwritten."""
    total = 0
    paths = list(paths)
    for path in paths:
        total += fs.erase(path)
    if paths:
        fs.sync_dir(gen_dir)
    return total
