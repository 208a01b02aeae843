"""The text segment: the text and metadata of live documents, on disk, not in RAM.

Owns: where each document's record lives and what its body holds. Imports numpy,
msgspec, :mod:`holomem.events` and the other projections; the file itself is a
:class:`~holomem.projections.base.RecordStore` handed in by the API layer.
FORMAT.md §9 documents the bytes.

Placement is deterministic: the records of a generation are laid out back to back
in the order of the events that wrote them, so replay alone knows every offset
and nothing on disk needs an index. A replaced or deleted document's record is
overwritten with zeros at once (synced by the next forget, purge, compaction or
close). A record that cannot be read back intact is rebuilt from the journal by
the caller (:meth:`TextSegment.reconcile`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter

import msgspec
import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections.base import Change, GrowArray, RecordStore, Snapshot


class TextRecord(msgspec.Struct, array_like=True, frozen=True):
    """The body of a text-segment record."""

    id: str
    text: str
    metadata: bytes = b""
    entities: tuple[str, ...] = ()


#: The most bytes :meth:`TextSegment.read_many` reads at once (more records than
#: that are read in several spans).
SPAN = 4 << 20

_enc = msgspec.msgpack.Encoder()
_dec = msgspec.msgpack.Decoder(TextRecord)
#: A document event's TextRecord fields, in order.
_BODY = attrgetter("id", "text", "metadata", "entities")

#: A record as read and verified from a file: its bytes there, and its (plaintext) body.
Carried = tuple[bytes, bytes]


def body_of(event: DocumentAdded | DocumentReplaced) -> bytes:
    return _enc.encode(TextRecord(event.id, event.text, event.metadata, event.entities))


def bodies_of(records: list[TextRecord]) -> list[bytes]:
    """The body of each record (what :func:`body_of` gives an event with its fields)."""
    return list(map(_enc.encode, records))


def decode_body(body: bytes) -> TextRecord | None:
    try:
        return _dec.decode(body)
    except msgspec.DecodeError:
        return None


class TextSegment:
    """Record placement for every slot, and the writes that keep the file in step."""

    def __init__(self, store: RecordStore | None, *, writes: bool = True) -> None:
        """``writes=False`` (a follower): placements are computed, the file never
        written; the writer's records are read."""
        self.store = store
        self.offset = GrowArray(np.int64)
        self.size = GrowArray(np.int32)
        self.end = store.first_offset if store is not None else 0
        self._writes = writes
        #: Inside placing_only(): placement is computed but nothing is written (replay,
        #: after which the caller runs reconcile() once).
        self._placing = False
        #: Inside buffered(): records are collected here instead of written one by one
        #: (a compaction writes the new file sequentially); see flush().
        self._buffer: list[bytes] | None = None
        self._buffer_start = self.end
        #: Records a compaction read from the file it replaces, one per placement to
        #: come (None: none for that one), taken instead of encoding (see carry()).
        self._carried: Sequence[Carried | None] = ()
        self._carry_at = 0

    @property
    def _writing(self) -> bool:
        return self.store is not None and self._writes and not self._placing

    @contextlib.contextmanager
    def placing_only(self) -> Iterator[None]:
        """Compute placements without writing anything (replay)."""
        self._placing = True
        try:
            yield
        finally:
            self._placing = False

    @contextlib.contextmanager
    def buffered(self) -> Iterator[None]:
        """Collect new records and write them back to back at each :meth:`flush`."""
        self._buffer = []
        self._buffer_start = self.end
        try:
            yield
            self.flush()
        finally:
            self._buffer = None

    def carry(self, records: Sequence[Carried | None]) -> None:
        """The next ``len(records)`` placements take these records' bytes as they are,
        each when its body is the one the event gives (else it is encoded as usual).
        For a compaction, whose new file :meth:`RecordFile.carries` the old one."""
        assert self._carry_at == len(self._carried), "records left over from a carry"
        self._carried, self._carry_at = records, 0

    def _record(self, offset: int, seq: int, body: bytes) -> bytes:
        assert self.store is not None
        if self._carry_at < len(self._carried):
            kept = self._carried[self._carry_at]
            self._carry_at += 1
            if kept is not None and kept[1] == body:
                return kept[0]
        return self.store.encode(offset, seq, body)

    def apply(self, seq: int, event: Event, change: Change) -> None:
        if change.old >= 0 and self._writing:
            assert self.store is not None
            self.store.zero(int(self.offset.view()[change.old]), int(self.size.view()[change.old]))
        if change.new < 0 or not isinstance(event, (DocumentAdded, DocumentReplaced)):
            return
        body = body_of(event)
        size = self.store.record_size(len(body)) if self.store is not None else 0
        assert self.offset.n == change.new  # one placement per slot, in slot order
        self.offset.append(self.end)
        self.size.append(size)
        if self.store is not None and self._writing:
            record = self._record(self.end, seq, body)
            if self._buffer is not None:
                self._buffer.append(record)
            else:
                self.store.write(self.end, record)
        self.end += size

    def snapshot(self) -> Snapshot:
        """Placements are written once per slot: shared."""
        return {"offset": self.offset.lend(), "size": self.size.lend(), "end": self.end}

    def restore(self, snap: Snapshot) -> None:
        self.offset = GrowArray.of(snap["offset"], np.int64)
        self.size = GrowArray.of(snap["size"], np.int32)
        self.end = int(snap["end"])
        self._buffer_start = self.end
        if len(self.offset) != len(self.size):
            raise ValueError("text segment: placements disagree")

    def add_run(self, seq: int, events: list[DocumentAdded], first: int) -> None:
        """Place new documents in slots ``first``.. (as ``apply`` of each would), with
        one write for all their records."""
        assert self.offset.n == first
        # (A tuple of TextRecord's fields encodes as the array-like record does.)
        self.place(seq, list(map(_enc.encode, map(_BODY, events))))

    def place(self, seq: int, bodies: list[bytes]) -> None:
        """Place records of these ``bodies``, written by transaction ``seq``, in the next
        slots, back to back, with one write for all (or into the buffer): what
        :meth:`add_run` does with its events' bodies, and a compaction with the bodies
        of the records it read (:meth:`carry` hands over their bytes)."""
        if not bodies:
            return
        store = self.store
        lengths = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
        # (record_size is the body's length plus a constant.)
        sizes = lengths + store.record_size(0) if store is not None else lengths * 0
        offsets = np.cumsum(sizes) - sizes + self.end
        self.offset.extend(offsets)
        self.size.extend(sizes.astype(np.int32))
        if store is not None and self._writing:
            if self._carry_at < len(self._carried):
                records = b"".join([self._record(off, seq, b) for off, b
                                    in zip(offsets.tolist(), bodies, strict=True)])
            else:
                records = store.encode_run(self.end, seq, bodies)
            if self._buffer is not None:
                self._buffer.append(records)
            else:
                store.write(self.end, records)
        self.end += int(sizes.sum())

    def flush(self) -> None:
        """Write the buffered records, back to back, with large sequential writes."""
        if self._buffer and self.store is not None:
            self.store.write(self._buffer_start, b"".join(self._buffer))
        if self._buffer is not None:
            self._buffer = []
        self._buffer_start = self.end

    def read(self, slot: int, seq: int) -> TextRecord | None:
        """The record of ``slot`` (written by event ``seq``), or None if not intact."""
        if self.store is None or slot >= self.offset.n:
            return None
        body = self.store.read(self.offset.item(slot), self.size.item(slot), seq)
        return None if body is None else decode_body(body)

    @property
    def binds_seq(self) -> bool:
        """Whether reading a record needs the ``seq`` of the event that wrote it (see
        :meth:`read_each`)."""
        return self.store is not None and self.store.binds_seq

    def read_each(self, slots: list[int], seqs: list[int] | None) -> list[TextRecord | None]:
        """:meth:`read` of each of a few ``slots`` anywhere in the file (recall's k),
        written by events ``seqs``: one read each, without a call per record. ``seqs``
        may be None when the file does not :attr:`bind <binds_seq>` them."""
        store = self.store
        if store is None or not slots:
            return [None] * len(slots)
        if max(slots) >= self.offset.n:
            each = seqs if seqs is not None else [0] * len(slots)
            return [self.read(slot, seq) for slot, seq in zip(slots, each, strict=True)]
        at = np.asarray(slots, dtype=np.intp)
        bodies = store.read_each(self.offset.view()[at].tolist(),
                                 self.size.view()[at].tolist(), seqs)
        # (One msgspec decode of them all as an array saves ~0.07 us a record, but a
        # damaged body could then shift its neighbours' boundaries: one each.)
        decode = _dec.decode
        try:
            return [None if body is None else decode(body) for body in bodies]
        except msgspec.DecodeError:  # (a body that verified but does not decode)
            return [None if body is None else decode_body(body) for body in bodies]

    def read_many(self, slots: list[int], seqs: list[int],
                  carried: list[Carried | None] | None = None) -> list[TextRecord | None]:
        """:meth:`read` of each of ``slots`` (ascending, so their records lie in file
        order), written by events ``seqs``: the records are read in spans of at most
        :data:`SPAN` bytes, one read each, rather than one read per record. With
        ``carried``, each record's bytes and body are appended to it (None where it
        did not read back), for a compaction to :meth:`carry`."""
        out: list[TextRecord | None] = [None] * len(slots)
        kept: list[Carried | None] = [None] * len(slots)
        store = self.store
        if store is None or not slots:
            return out
        n = self.offset.n
        at = np.asarray(slots, dtype=np.intp)
        placed = at < n  # (a slot past the placements reads as not intact)
        at = np.where(placed, at, 0)
        ok = placed.tolist()
        offs = self.offset.view()[at].tolist() if n else [0] * len(slots)
        sizes = self.size.view()[at].tolist() if n else [0] * len(slots)
        i = 0
        while i < len(slots):
            if not ok[i]:
                i += 1
                continue
            lo = offs[i]
            j, hi = i, lo
            while j < len(slots) and ok[j]:
                off, size = offs[j], sizes[j]
                if off < hi or (j > i and off + size - lo > SPAN):
                    break
                hi = off + size
                j += 1
            raw = store.read_span(lo, hi - lo)
            bodies = store.decode_many([raw] * (j - i), [o - lo for o in offs[i:j]],
                                       sizes[i:j], offs[i:j], seqs[i:j])
            for k, body in enumerate(bodies, i):
                if body is not None:
                    rec = out[k] = decode_body(body)
                    if carried is not None and rec is not None:
                        kept[k] = (raw[offs[k] - lo : offs[k] - lo + sizes[k]], body)
            i = max(j, i + 1)
        if carried is not None:
            carried.extend(kept)
        return out

    def rewrite(self, slot: int, seq: int, event: DocumentAdded | DocumentReplaced) -> None:
        """Write the record of ``slot`` again (after a failed read)."""
        assert self.store is not None
        off = int(self.offset.view()[slot])
        self.store.write(off, self.store.encode(off, seq, body_of(event)))

    def audit(self, raw: bytes, alive: np.ndarray, seqs: np.ndarray,
              ids: Sequence[str | None]) -> Iterator[tuple[str, int, int, int]]:
        """Everything in the file's content ``raw`` that differs from the placement.

        Yields ``("record", slot, offset, size)`` for a live record that does not
        read back intact (or holds another document: ``ids`` by slot), and
        ``("stale", -1, offset, length)`` for bytes that should be zero but are not (a
        vacated record, or unused space before ``end``).
        """
        assert self.store is not None
        view = memoryview(raw)
        cursor = self.store.first_offset
        for slot, off, size in self._placements():
            if not alive[slot]:
                continue
            if off > cursor and self._dirty(raw, cursor, off):
                yield ("stale", -1, cursor, off - cursor)
            rec = view[off : off + size] if off + size <= len(raw) else b""
            body = self.store.decode(rec, off, int(seqs[slot]))
            got = decode_body(body) if body is not None else None
            if got is None or got.id != ids[slot]:
                yield ("record", slot, off, size)
            cursor = off + size
        if self.end > cursor and self._dirty(raw, cursor, self.end):
            yield ("stale", -1, cursor, self.end - cursor)

    def reconcile(self, raw: bytes, alive: np.ndarray, seqs: np.ndarray,
                  ids: Sequence[str | None],
                  fetch: Callable[[int], DocumentAdded | DocumentReplaced]) -> tuple[int, int]:
        """Bring the file in line with the placement after a replay that wrote nothing.

        Every live record that does not read back intact is written again
        (``fetch(slot)`` gives its event); every other byte before ``end`` that is
        not zero is zeroed. Returns (records rewritten, ranges zeroed). The caller
        truncates the file at ``end``.
        """
        assert self.store is not None
        rewritten = zeroed = 0
        for kind, slot, off, size in list(self.audit(raw, alive, seqs, ids)):
            if kind == "record":
                seq = int(seqs[slot])
                self.store.write(off, self.store.encode(off, seq, body_of(fetch(slot))))
                rewritten += 1
            else:
                self.store.zero(off, min(size, max(0, len(raw) - off)))
                zeroed += 1
        return rewritten, zeroed

    def _placements(self) -> Iterator[tuple[int, int, int]]:
        offs = self.offset.view().tolist()
        sizes = self.size.view().tolist()
        yield from zip(range(len(offs)), offs, sizes, strict=True)

    @staticmethod
    def _dirty(raw: bytes, lo: int, hi: int) -> bool:
        hi = min(hi, len(raw))
        return lo < hi and bool(np.frombuffer(raw, dtype=np.uint8, count=hi - lo, offset=lo).any())
