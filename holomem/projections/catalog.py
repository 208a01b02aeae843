"""The catalog: which documents are live, and in which slot.

Owns: id <-> slot, the sequence number that wrote each slot, and liveness. Imports
numpy, :mod:`holomem.events` and :mod:`holomem.projections.base`.
"""

from __future__ import annotations

import numpy as np

from holomem.events import DocumentAdded, DocumentDeleted, DocumentReplaced, Event
from holomem.projections.base import NO_CHANGE, Change, GrowArray, Snapshot


class Catalog:
    """Slots of live documents. Feed it every event first; it says what changed."""

    def __init__(self) -> None:
        self._slot: dict[str, int] = {}
        self.ids: list[str | None] = []  # slot -> id (None once vacated)
        self.seq = GrowArray(np.int64)  # slot -> sequence number that wrote it
        self.alive = GrowArray(np.bool_)
        self.live = 0

    def __len__(self) -> int:
        return self.live

    def __contains__(self, doc_id: str) -> bool:
        return doc_id in self._slot

    def slot(self, doc_id: str) -> int:
        """The live slot of ``doc_id``, or -1."""
        return self._slot.get(doc_id, -1)

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
        """Ids and liveness copied (a removal changes them in place); each slot's
        sequence number is written once, so its filled prefix is shared."""
        return {"ids": list(self.ids), "seq": self.seq.view(), "alive": self.alive.view().copy(),
                "live": self.live}

    def restore(self, snap: Snapshot) -> None:
        ids: list[str | None] = snap["ids"]
        self.ids = ids
        self._slot = {doc_id: s for s, doc_id in enumerate(ids) if doc_id is not None}
        self.seq = GrowArray.of(snap["seq"], np.int64)
        self.alive = GrowArray.of(snap["alive"], np.bool_)
        self.live = int(snap["live"])
        if not (len(ids) == len(self.seq) == len(self.alive)) or self.live != len(self._slot):
            raise ValueError("catalog: ids, sequence numbers and liveness disagree")

    def none_live(self, ids: list[str]) -> bool:
        """Whether no id of ``ids`` is live."""
        return self._slot.keys().isdisjoint(ids)

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
        if old >= 0:
            self.ids[old] = None
            self.alive[old] = False
            self.live -= 1
        return old
