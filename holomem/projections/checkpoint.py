"""A checkpoint's payload: every projection's snapshot as bytes, and back.

Owns: the payload's layout (FORMAT.md §9.2), its schema version, the restore of a
:class:`~holomem.projections.state.ProjectionState` from it, and the digest that
``fsck`` compares with a replay. Imports numpy, msgspec and the projections;
the file around the payload (framing, checksums, encryption, where it lives) is
:mod:`holomem.log.checkpoint`'s, which never looks inside it.

Layout: a 4-byte little-endian length, a msgpack *manifest* of that length, then
the values' bytes back to back in manifest order. Each manifest entry is
``[part, name, kind, dtype, shape, length]``: kind 0 is a msgpack value (dtype ""
and shape []), kind 1 a numpy array stored raw, C order, little-endian, as
``dtype`` (numpy's type string, e.g. ``"<i8"``) and ``shape`` say.

Arrays are written without a copy (a view of the projection's own buffer, shared or
lent), and values that take time to build are computed here
(:class:`~holomem.projections.base.Later`): that is why encoding runs outside the
store's lock, while writers go on (see each projection's ``snapshot`` for what it
shares, lends and copies).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from typing import Any

import msgspec
import numpy as np

from holomem.projections.base import Later, RecordStore, Snapshot, gc_paused
from holomem.projections.facts import FactIndex
from holomem.projections.state import ProjectionState

#: The version of what the payload holds; a build reads only its own (an older
#: checkpoint is ignored and the journal replayed: the checkpoint is derived).
SCHEMA = 6

KIND_VALUE = 0
KIND_ARRAY = 1
#: bytes of the manifest's length (u32, little-endian)
MANIFEST_LENGTH = 4
#: Projections that are caches filled lazily from the text segment: a live store
#: may have built them and a replay has not, so the digest leaves them out.
LAZY_PARTS = ("hrr", "metadata")

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder()

Parts = dict[str, Snapshot]


class Payload:
    """An encoded payload: its pieces (bytes or views of arrays) and total length."""

    def __init__(self, pieces: list[bytes | memoryview]) -> None:
        self.pieces = pieces
        self.length = sum(len(p) for p in pieces)

    def __iter__(self) -> Iterator[bytes | memoryview]:
        return iter(self.pieces)

    def join(self) -> bytes:
        return b"".join(self.pieces)


def _raw(array: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(array)
    if a.dtype.byteorder == ">" or (a.dtype.byteorder == "=" and not _LITTLE):
        a = a.astype(a.dtype.newbyteorder("<"))
    return a


_LITTLE = np.little_endian


def encode(parts: Parts) -> Payload:
    """The payload of ``parts`` (:meth:`ProjectionState.snapshot`)."""
    manifest: list[list[Any]] = []
    blobs: list[bytes | memoryview] = []
    for part in sorted(parts):
        for name, value in parts[part].items():
            if isinstance(value, Later):
                value = value()
            if isinstance(value, np.ndarray):
                a = _raw(value)
                data = memoryview(a.reshape(-1).view(np.uint8).data)
                manifest.append([part, name, KIND_ARRAY, a.dtype.str.replace("=", "<"),
                                 list(a.shape), len(data)])
            else:
                data = memoryview(_enc.encode(value))
                manifest.append([part, name, KIND_VALUE, "", [], len(data)])
            blobs.append(data)
    head = _enc.encode(manifest)
    return Payload([len(head).to_bytes(MANIFEST_LENGTH, "little"), head, *blobs])


#: Values decoded to a type (msgspec builds their tuples and named tuples in C).
TYPES: dict[tuple[str, str], Any] = {("facts", k): t for k, t in FactIndex.SNAPSHOT_TYPES.items()}
_typed = {key: msgspec.msgpack.Decoder(t) for key, t in TYPES.items()}


def decode(payload: bytes | bytearray | memoryview) -> Parts:
    """The parts of a payload. ``ValueError`` when it is not one."""
    view = memoryview(payload)
    if len(view) < MANIFEST_LENGTH:
        raise ValueError("payload shorter than its manifest length")
    n = int.from_bytes(view[:MANIFEST_LENGTH], "little")
    pos = MANIFEST_LENGTH + n
    try:
        manifest = _dec.decode(view[MANIFEST_LENGTH:pos])
        parts: Parts = {}
        for part, name, kind, dtype, shape, length in manifest:
            data = view[pos : pos + length]
            if len(data) != length:
                raise ValueError("payload cut short")
            pos += length
            if kind == KIND_ARRAY:
                value: object = np.frombuffer(data, dtype=np.dtype(dtype)).reshape(shape)
            elif kind == KIND_VALUE:
                value = _typed.get((part, name), _dec).decode(data)
            else:
                raise ValueError(f"unknown kind {kind!r}")
            parts.setdefault(str(part), {})[str(name)] = value
    except (msgspec.DecodeError, TypeError, KeyError) as exc:
        raise ValueError(f"payload unreadable: {exc}") from exc
    if pos != len(view):
        raise ValueError("bytes past the payload's last value")
    return parts


def restore(records: RecordStore | None, payload: bytes | bytearray | memoryview, *,
            writes_text: bool = True) -> ProjectionState:
    """A state restored from a payload. ``ValueError`` when the payload is not
    one this build wrote or its projections do not fit together."""
    with gc_paused():
        parts = decode(payload)
    state = ProjectionState(records, writes_text=writes_text)
    try:
        state.restore(parts)
    except (KeyError, TypeError, IndexError) as exc:
        raise ValueError(f"projections do not fit together: {exc!r}") from exc
    return state


def digest(state: ProjectionState) -> str:
    """A digest of what the state answers from (hex), equal for a checkpoint restored
    and for a replay of the journal up to its sequence number.

    Merges the BM25 delta and settles the relations' index first (neither changes an
    answer, only where postings and links are kept) and leaves out the lazily filled
    caches (:data:`LAZY_PARTS`)."""
    state.bm25.merge()
    state.relations.settle()
    parts = {k: v for k, v in state.snapshot().items() if k not in LAZY_PARTS}
    h = hashlib.blake2b(digest_size=16)
    for piece in encode(parts):
        h.update(piece)
    return h.hexdigest()
