"""Typed relations: directed, named links between stored facts (docs/contract.md §4f).

Owns: the link table — every live link ``from -[relation]-> to`` with the time the
store learned it and its metadata — its adjacency in both directions, and the
rule that a link lives only as long as both its ends. Imports numpy,
:mod:`holomem.events` and the catalog. Rebuilt by replay, like every projection.

Layout, chosen to stay small at hundreds of thousands of links: one row per link
in parallel int arrays (from slot, to slot, relation id, time, metadata index), so
a link costs ~24 bytes plus ~8 of adjacency; relation names are interned; only
links that carry metadata hold a Python object (their bytes). Adjacency is a CSR
index over the rows (rebuilt in one numpy sort) plus a small dict of the rows
added since, merged back once it grows past an eighth of the table. A removed row
is marked (from = -1) and dropped at the next rebuild, which keeps row order, so
row order is always the order the links were made: the order ``links`` answers in.

A link follows its fact's document when the document API replaces it (the fact
keeps its slot's meaning in a new slot); deleting either end removes the link.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from holomem.events import Event, RelationAdded, RelationRemoved
from holomem.projections.base import Change, GrowArray, Kept, Snapshot, compaction_check
from holomem.projections.catalog import Catalog

OUT, IN, BOTH = "out", "in", "both"
DIRECTIONS = (OUT, IN, BOTH)
_EMPTY = np.zeros(0, dtype=np.int64)
#: Rows added since the CSR index that make a rebuild due (or an eighth of the table).
MIN_DELTA = 4096


class Relations:
    """Every live link between stored facts (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.src = GrowArray(np.int32)  # row -> from slot (-1: removed)
        self.dst = GrowArray(np.int32)  # row -> to slot
        self.rel = GrowArray(np.int32)  # row -> relation id
        self.time = GrowArray(np.int64)  # row -> when the store learned the link
        self.meta = GrowArray(np.int32)  # row -> index in _metadata, or -1
        self._metadata: list[bytes] = []
        self.names: list[str] = []  # relation id -> name
        self._name_id: dict[str, int] = {}
        # CSR over the rows below _base_rows: slot s's rows are
        # _out_rows[_out_ptr[s]:_out_ptr[s + 1]] (slots below _base_slots only).
        self._base_rows = 0
        self._base_slots = 0
        self._out_ptr = np.zeros(1, dtype=np.int64)
        self._out_rows = _EMPTY
        self._in_ptr = np.zeros(1, dtype=np.int64)
        self._in_rows = _EMPTY
        self._new_out: dict[int, list[int]] = {}  # rows since the CSR, by slot
        self._new_in: dict[int, list[int]] = {}
        self.live = 0
        self._dead = 0
        self._bulk = False

    # -- events -----------------------------------------------------------------------
    def apply(self, event: Event, change: Change) -> None:
        if change.old >= 0:
            if change.new >= 0:
                self._move(change.old, change.new)
            else:
                for row in self.rows(change.old, BOTH):
                    self._kill(row)
        match event:
            case RelationAdded(from_id=a, to_id=b, relation=name, time=t, metadata=meta):
                s, d = self.catalog.slot(a), self.catalog.slot(b)
                if s < 0 or d < 0 or s == d or self.find(s, d, name) >= 0:
                    return  # an end is gone (or it is there already): nothing to add
                self._add(s, d, name, t, meta)
            case RelationRemoved(from_id=a, to_id=b, relation=name):
                row = self.find(self.catalog.slot(a), self.catalog.slot(b), name)
                if row >= 0:
                    self._kill(row)
        due = max(MIN_DELTA, self._base_rows // 8)
        if not self._bulk and len(self.src) - self._base_rows > due:
            self._rebuild()

    @contextlib.contextmanager
    def bulk(self) -> Iterator[None]:
        """Replay / rewrite: one CSR rebuild at the end instead of many on the way."""
        self._bulk = True
        try:
            yield
        finally:
            self._bulk = False
            self._rebuild()

    def _relation_id(self, name: str) -> int:
        rid = self._name_id.get(name)
        if rid is None:
            copy = "".join(name)  # do not pin the event's buffer
            rid = self._name_id[copy] = len(self.names)
            self.names.append(copy)
        return rid

    def _add(self, s: int, d: int, name: str, t: int, meta: bytes) -> None:
        row = self.src.append(s)
        self.dst.append(d)
        self.rel.append(self._relation_id(name))
        self.time.append(t)
        if meta:
            self.meta.append(len(self._metadata))
            self._metadata.append(bytes(meta))
        else:
            self.meta.append(-1)
        self._new_out.setdefault(s, []).append(row)
        self._new_in.setdefault(d, []).append(row)
        self.live += 1

    def _kill(self, row: int) -> None:
        if self.src.item(row) >= 0:
            self.src[row] = -1
            self.dst[row] = -1
            self.live -= 1
            self._dead += 1

    def _move(self, old: int, new: int) -> None:
        """The document in ``old`` now lives in ``new``: its links go along."""
        for row in self.rows(old, OUT):
            self.src[row] = new
            self._new_out.setdefault(new, []).append(row)
        for row in self.rows(old, IN):
            self.dst[row] = new
            self._new_in.setdefault(new, []).append(row)
        # The old slot is never live again, so its stale CSR entries are never read.
        self._new_out.pop(old, None)
        self._new_in.pop(old, None)

    def _rebuild(self) -> None:
        """Drop removed rows (keeping order) and index every row in the CSR."""
        src, dst = self.src.view(), self.dst.view()
        if self._dead:
            keep = np.flatnonzero(src >= 0)
            meta = self.meta.view()[keep]
            kept_meta = meta[meta >= 0]
            self._metadata = [self._metadata[i] for i in kept_meta.tolist()]
            meta = meta.copy()
            meta[meta >= 0] = np.arange(len(kept_meta), dtype=np.int32)
            columns = (src[keep], dst[keep], self.rel.view()[keep], self.time.view()[keep], meta)
            self.src, self.dst, self.rel, self.time, self.meta = (
                GrowArray(c.dtype, max(1024, len(c))) for c in columns)
            for col, values in zip((self.src, self.dst, self.rel, self.time, self.meta),
                                   columns, strict=True):
                col.extend(values)
            self._dead = 0
            src, dst = self.src.view(), self.dst.view()
        slots = self.catalog.slots
        self._out_ptr, self._out_rows = _csr(src, slots)
        self._in_ptr, self._in_rows = _csr(dst, slots)
        self._base_rows, self._base_slots = len(src), slots
        self._new_out, self._new_in = {}, {}

    def settle(self) -> None:
        """Bring the layout to its one canonical form (removed rows dropped, every row
        in the adjacency index over every slot), as a replay leaves it: two states
        that answer alike then hold the same arrays (a checkpoint's digest)."""
        if self._new_out or self._new_in or self._dead or self._base_rows != len(self.src) \
                or self._base_slots != self.catalog.slots:
            self._rebuild()

    def compacted(self, old: Relations, kept: Kept) -> None:
        """Fill this fresh table with the live links of ``old``, between the documents
        ``kept`` (a live link's ends are both live): what a replay of the compacted
        journal builds, which writes each live link again in the order they were made
        (relation names interned in that order, metadata kept in it). The catalog is
        the new one already (the adjacency index spans its slots)."""
        assert not len(self.src)  # fresh
        rows = old.live_rows()
        src = kept.new[old.src.view()[rows]]
        dst = kept.new[old.dst.view()[rows]]
        # A link dies with either end, so a live row's ends are kept slots.
        compaction_check(not len(rows) or (int(src.min()) >= 0 and int(dst.min()) >= 0),
                         "a live link has an end that is not kept")
        rel = old.rel.view()[rows]
        for rid in dict.fromkeys(rel.tolist()):
            self._relation_id(old.names[rid])
        table = np.array([self._name_id.get(name, -1) for name in old.names] or [-1],
                         dtype=np.int32)
        meta = old.meta.view()[rows]
        has = meta >= 0
        self._metadata = [old._metadata[m] for m in meta[has].tolist()]
        meta = meta.copy()
        meta[has] = np.arange(len(self._metadata), dtype=np.int32)
        for col, values in ((self.src, src), (self.dst, dst), (self.rel, table[rel]),
                            (self.time, old.time.view()[rows]), (self.meta, meta)):
            col.extend(values)
        self.live = len(rows)
        self._rebuild()

    # -- checkpoints ------------------------------------------------------------------
    _COLUMNS = ("src", "dst", "rel", "time", "meta")

    def snapshot(self) -> Snapshot:
        """Columns lent (a removed link's row changes in place, which copies the
        column first); the delta, which grows, copied."""
        snap: Snapshot = {f"col.{c}": getattr(self, c).lend() for c in self._COLUMNS}
        snap.update({
            "metadata": list(self._metadata), "names": list(self.names),
            "out_ptr": self._out_ptr, "out_rows": self._out_rows,  # replaced, never changed
            "in_ptr": self._in_ptr, "in_rows": self._in_rows,
            "new_out": [[k, list(v)] for k, v in self._new_out.items()],
            "new_in": [[k, list(v)] for k, v in self._new_in.items()],
            "counts": [self._base_rows, self._base_slots, self.live, self._dead]})
        return snap

    def restore(self, snap: Snapshot) -> None:
        for c in self._COLUMNS:
            setattr(self, c, GrowArray.of(snap[f"col.{c}"], getattr(self, c).dtype))
        if len({len(getattr(self, c)) for c in self._COLUMNS}) != 1:
            raise ValueError("relations: columns of different lengths")
        self._metadata = [bytes(m) for m in snap["metadata"]]
        self.names = [str(n) for n in snap["names"]]
        self._name_id = {n: i for i, n in enumerate(self.names)}
        self._out_ptr = np.array(snap["out_ptr"], dtype=np.int64)
        self._out_rows = np.array(snap["out_rows"], dtype=np.int64)
        self._in_ptr = np.array(snap["in_ptr"], dtype=np.int64)
        self._in_rows = np.array(snap["in_rows"], dtype=np.int64)
        self._new_out = {int(k): [int(r) for r in v] for k, v in snap["new_out"]}
        self._new_in = {int(k): [int(r) for r in v] for k, v in snap["new_in"]}
        self._base_rows, self._base_slots, self.live, self._dead = (
            int(x) for x in snap["counts"])
        if self._base_rows > len(self.src) or len(self._out_ptr) != self._base_slots + 1:
            raise ValueError("relations: the adjacency index does not fit the links")

    # -- queries ----------------------------------------------------------------------
    def relation_id(self, name: str) -> int:
        """The id of relation ``name``, or -1 (no link was ever made with it)."""
        return self._name_id.get(name, -1)

    def rows(self, slot: int, direction: str = BOTH) -> list[int]:
        """The live rows of the links leaving (``out``), entering (``in``) or touching
        (``both``) ``slot``, in the order they were made."""
        if slot < 0:
            return []
        out: list[int] = []
        if direction != IN:
            out += self._side(slot, self._out_ptr, self._out_rows, self._new_out, self.src)
        if direction != OUT:
            out += self._side(slot, self._in_ptr, self._in_rows, self._new_in, self.dst)
        if direction == BOTH:
            out = sorted(set(out))
        return out

    def _side(self, slot: int, ptr: np.ndarray, rows: np.ndarray,
              new: dict[int, list[int]], end: GrowArray) -> list[int]:
        found: list[int] = []
        if slot < self._base_slots:
            found = rows[ptr[slot]:ptr[slot + 1]].tolist()
        found += new.get(slot, ())
        # A removed row, or one whose end moved to another slot, no longer counts here.
        return sorted(r for r in found if end.item(r) == slot)

    def touching_many(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(which, rows)``: the live rows touching each of ``slots`` — for each ``i``
        ascending, exactly ``rows(slots[i], "both")`` (ascending, each row once) — in
        a few array operations over the adjacency index instead of a loop per row."""
        slots = np.asarray(slots, dtype=np.int64)
        n_rows = len(self.src)
        found_which: list[np.ndarray] = []
        found_rows: list[np.ndarray] = []
        for ptr, index, new, end in ((self._out_ptr, self._out_rows, self._new_out, self.src),
                                     (self._in_ptr, self._in_rows, self._new_in, self.dst)):
            which: list[np.ndarray] = []
            rows: list[np.ndarray] = []
            base = np.flatnonzero((slots >= 0) & (slots < self._base_slots))
            if len(base):
                starts = ptr[slots[base]]
                lens = ptr[slots[base] + 1] - starts
                total = int(lens.sum())
                if total:
                    at = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(total)
                    which.append(np.repeat(base, lens))
                    rows.append(index[at])
            if new:
                for i, s in enumerate(slots.tolist()):
                    extra = new.get(s)
                    if extra:
                        which.append(np.full(len(extra), i, dtype=np.int64))
                        rows.append(np.asarray(extra, dtype=np.int64))
            if rows:
                r, w = np.concatenate(rows), np.concatenate(which)
                # A removed row, or one whose end moved to another slot, is not here.
                ok = end.view()[r] == slots[w]
                found_rows.append(r[ok])
                found_which.append(w[ok])
        if not found_rows:
            return _EMPTY, _EMPTY
        key = np.unique(np.concatenate(found_which) * (n_rows + 1) + np.concatenate(found_rows))
        return key // (n_rows + 1), key % (n_rows + 1)

    def find(self, s: int, d: int, name: str) -> int:
        """The live row of ``s -[name]-> d``, or -1."""
        rid = self._name_id.get(name, -1)
        if s < 0 or d < 0 or rid < 0:
            return -1
        for row in self.rows(s, OUT):
            if self.dst.item(row) == d and self.rel.item(row) == rid:
                return row
        return -1

    def degree(self, slot: int, direction: str) -> int:
        return len(self.rows(slot, direction))

    def metadata(self, row: int) -> bytes:
        m = self.meta.item(row)
        return self._metadata[m] if m >= 0 else b""

    def relation(self, row: int) -> str:
        return self.names[int(self.rel.item(row))]

    def live_rows(self) -> np.ndarray:
        """Every live row, in the order the links were made."""
        return np.flatnonzero(self.src.view() >= 0)

    def memory_bytes(self) -> int:
        cols = (self.src, self.dst, self.rel, self.time, self.meta)
        return (sum(c.nbytes for c in cols) + sum(len(m) for m in self._metadata)
                + self._out_ptr.nbytes + self._out_rows.nbytes + self._in_ptr.nbytes
                + self._in_rows.nbytes)


def _csr(ends: np.ndarray, slots: int) -> tuple[np.ndarray, np.ndarray]:
    """(pointers, rows) grouping the rows with a live end by that end's slot, each
    group in row order (a stable sort)."""
    live = np.flatnonzero(ends >= 0)
    order = live[np.argsort(ends[live], kind="stable")]
    counts = np.bincount(ends[live], minlength=slots)
    ptr = np.zeros(slots + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, order.astype(np.int64)
