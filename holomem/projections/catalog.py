"""The catalog: which documents are live, and in which slot.

Owns: id <-> slot, the sequence number that wrote each slot, and liveness. Imports
numpy, :mod:`holomem.events` and :mod:`holomem.projections.base`.

Id -> slot is a dict, except for the ids a checkpoint brought back: building a dict
of a million ids takes most of a second, so a restored catalog keeps them as the
checkpoint holds them, a sorted array of 64-bit id hashes beside their slots
(:class:`IdTable`), and looks an id up there by binary search when the dict does not
have it (then puts it in the dict, so the next lookup is the dict's).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

from holomem.events import DocumentAdded, DocumentDeleted, DocumentReplaced, Event
from holomem.projections.base import (
    NO_CHANGE,
    Change,
    GrowArray,
    Kept,
    Later,
    Snapshot,
    compaction_check,
)


def id_hash(doc_id: str) -> int:
    """The 64-bit hash an :class:`IdTable` orders ids by (stable across processes)."""
    return int.from_bytes(_digest(doc_id), "little")


def _digest(doc_id: str) -> bytes:
    return hashlib.blake2b(doc_id.encode("utf-8", "surrogatepass"), digest_size=8).digest()


def id_hashes(ids: Iterable[str]) -> np.ndarray:
    """:func:`id_hash` of each id, as uint64."""
    return np.frombuffer(b"".join(map(_digest, ids)), dtype="<u8").astype(np.uint64)


_EMPTY_U64 = np.zeros(0, dtype=np.uint64)
_EMPTY_I32 = np.zeros(0, dtype=np.int32)


class IdTable:
    """Ids -> slots, frozen: ``keys`` (the ids' hashes, ascending) and ``slots``
    (the slot of each). A hit is confirmed against the catalog's ids (hashes may
    collide; a vacated slot's id is None)."""

    __slots__ = ("keys", "slots")

    def __init__(self, keys: np.ndarray, slots: np.ndarray) -> None:
        self.keys, self.slots = keys, slots

    @classmethod
    def build(cls, ids: list[str | None], alive: np.ndarray,
              since: tuple[int, IdTable] | None = None) -> IdTable:
        """The table of the live slots of ``ids`` (``alive`` says which). ``since``,
        (n, the table of slots below n as they were), is reused: only the ids of
        later slots are hashed."""
        first, keys, slots = 0, _EMPTY_U64, _EMPTY_I32
        if since is not None and since[0] <= len(ids):
            first, old = since
            keep = alive[old.slots]
            keys, slots = old.keys[keep], old.slots[keep]
        new = (np.flatnonzero(alive[first:]) + first).astype(np.int32)
        keys = np.concatenate([keys, id_hashes([ids[s] or "" for s in new.tolist()])])
        slots = np.concatenate([slots, new])
        # Stable: equal keys stay in slot order (the old slots are all below the new).
        order = np.argsort(keys, kind="stable")
        return cls(keys[order], slots[order])

    def find(self, doc_id: str, ids: list[str | None]) -> int:
        keys = self.keys
        h = np.uint64(id_hash(doc_id))
        i = int(keys.searchsorted(h))
        while i < len(keys) and keys[i] == h:
            s = int(self.slots[i])
            if ids[s] == doc_id:
                return s
            i += 1
        return -1

    def any_of(self, doc_ids: list[str], ids: list[str | None]) -> bool:
        """Whether some id of ``doc_ids`` is in the table and still live."""
        if not len(self.keys) or not doc_ids:
            return False
        h = id_hashes(doc_ids)
        pos = np.minimum(self.keys.searchsorted(h), len(self.keys) - 1)
        maybe = np.flatnonzero(self.keys[pos] == h)
        return any(self.find(doc_ids[k], ids) >= 0 for k in maybe.tolist())


class Catalog:
    """Slots of live documents. Feed it every event first; it says what changed."""

    def __init__(self) -> None:
        self._slot: dict[str, int] = {}
        #: the ids a checkpoint brought back that the dict does not hold (None: none)
        self._table: IdTable | None = None
        self.ids: list[str | None] = []  # slot -> id (None once vacated)
        #: a snapshot holds ``ids`` itself: the next change of a slot's id copies it
        self._ids_lent = False
        #: (n, the id table of slots below n) as the last checkpoint held it
        self._built: tuple[int, IdTable] | None = None
        self.seq = GrowArray(np.int64)  # slot -> sequence number that wrote it
        self.alive = GrowArray(np.bool_)
        self.live = 0

    def __len__(self) -> int:
        return self.live

    def __contains__(self, doc_id: str) -> bool:
        return self.slot(doc_id) >= 0

    def slot(self, doc_id: str) -> int:
        """The live slot of ``doc_id``, or -1."""
        s = self._slot.get(doc_id, -1)
        if s < 0 and self._table is not None:
            s = self._table.find(doc_id, self.ids)
            if s >= 0:
                self._slot[doc_id] = s
        return s

    @property
    def slots(self) -> int:
        """Slots handed out so far (live and vacated)."""
        return len(self.ids)

    def live_ids(self) -> list[str]:
        """Ids of live documents in slot order."""
        return [i for i in self.ids if i is not None]

    def apply(self, seq: int, event: Event) -> Change:
        match event:
            case DocumentAdded(id=doc_id) | DocumentReplaced(id=doc_id):
                old = self._vacate(doc_id)
                new = len(self.ids)
                self.ids.append(doc_id)
                self.seq.append(seq)
                self.alive.append(True)
                self._slot[doc_id] = new
                self.live += 1
                return Change(new, old)
            case DocumentDeleted(id=doc_id):
                return Change(-1, self._vacate(doc_id))
            case _:
                return NO_CHANGE

    # -- checkpoints ----------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Nothing copied under the lock: each slot's sequence number is written once;
        liveness and the ids list are lent (the next change of a slot copies them
        first; appends go past the snapshot's end). The id table is computed when
        the snapshot is encoded."""
        ids, n, alive, since = self.ids, len(self.ids), self.alive.lend(), self._built
        self._ids_lent = True

        def table() -> IdTable:
            built = IdTable.build(ids[:n], alive() if isinstance(alive, Later) else alive,
                                  since)
            self._built = (n, built)  # the next snapshot hashes only the ids after n
            return built

        once = Later.once(table)
        return {"ids": Later(lambda: ids[:n]), "seq": self.seq.lend(),
                "alive": alive, "live": self.live,
                "table_keys": Later(lambda: once().keys),
                "table_slots": Later(lambda: once().slots)}

    def restore(self, snap: Snapshot) -> None:
        ids: list[str | None] = snap["ids"]
        self.ids = ids
        self._slot = {}
        keys = np.array(snap["table_keys"], dtype=np.uint64)
        slots = np.array(snap["table_slots"], dtype=np.int32)
        self._table = IdTable(keys, slots)
        self._built = (len(ids), self._table)
        self.seq = GrowArray.of(snap["seq"], np.int64)
        self.alive = GrowArray.of(snap["alive"], np.bool_)
        self.live = int(snap["live"])
        if (not (len(ids) == len(self.seq) == len(self.alive)) or self.live != len(keys)
                or len(slots) != len(keys) or (len(keys) and (
                    int(slots.min()) < 0 or int(slots.max()) >= len(ids)
                    or bool(np.any(keys[1:] < keys[:-1]))))):
            raise ValueError("catalog: ids, sequence numbers and liveness disagree")

    def compacted(self, old: Catalog, kept: Kept, seqs: np.ndarray) -> None:
        """Fill this fresh catalog with the documents ``kept`` of ``old``, the new slot
        ``i`` written by transaction ``seqs[i]``: what a replay of the compacted journal
        builds (a dict of the ids, every slot live)."""
        assert not self.ids and len(seqs) == len(kept.slots)  # fresh; one seq per slot
        ids = old.ids
        # str: a kept slot is live, so it has an id
        self.ids = [ids[s] for s in kept.slots.tolist()]
        self._slot = {doc_id: i for i, doc_id in enumerate(self.ids)}  # type: ignore[misc]
        self.seq.extend(np.asarray(seqs, dtype=np.int64))
        self.alive.extend(np.ones(len(self.ids), dtype=np.bool_))
        self.live = len(self.ids)
        # A kept slot is live, so it has an id, and a live id has one slot: the ids
        # are distinct, as a replay's would be.
        compaction_check(None not in self._slot and len(self._slot) == self.live,
                         "the kept ids are not distinct live ids")

    def none_live(self, ids: list[str]) -> bool:
        """Whether no id of ``ids`` is live."""
        if not self._slot.keys().isdisjoint(ids):
            return False
        return self._table is None or not self._table.any_of(ids, self.ids)

    def add_run(self, seq: int, ids: list[str]) -> int:
        """Slots for documents with new ids (none live, no two alike), as ``apply``
        of a DocumentAdded each would give them; returns the first slot."""
        first = len(self.ids)
        self.ids.extend(ids)
        self.seq.extend(np.full(len(ids), seq, dtype=np.int64))
        self.alive.extend(np.ones(len(ids), dtype=np.bool_))
        self._slot.update(zip(ids, range(first, first + len(ids)), strict=True))
        self.live += len(ids)
        return first

    def _vacate(self, doc_id: str) -> int:
        old = self._slot.pop(doc_id, -1)
        if old < 0 and self._table is not None:
            old = self._table.find(doc_id, self.ids)
        if old >= 0:
            if self._ids_lent:
                self.ids = list(self.ids)
                self._ids_lent = False
            self.ids[old] = None
            self.alive[old] = False
            self.live -= 1
        return old
