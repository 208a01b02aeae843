"""The entity posting: exact-match lookup from an entity string to documents.

Owns: entity -> slots. Imports numpy, :mod:`holomem.events` and the other
projections. Entities are compared exactly (case and spelling as given).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence

import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections.base import Change, Later, Snapshot
from holomem.projections.catalog import Catalog

_NONE = array("i")


class Entities:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._slots: dict[str, array[int]] = {}

    def apply(self, seq: int, event: Event, change: Change) -> None:
        if change.new < 0 or not isinstance(event, (DocumentAdded, DocumentReplaced)):
            return
        for entity in dict.fromkeys(event.entities):
            posting = self._slots.get(entity)
            if posting is None:
                posting = self._slots["".join(entity)] = array("i")
            posting.append(change.new)

    def add_lists(self, first: int, lists: Sequence[tuple[str, ...]]) -> None:
        """The entities of the documents in slots ``first``.. (as ``apply`` of each
        document's event would add them): a compaction's, from the records it read."""
        for slot, entities in enumerate(lists, first):
            if entities:
                for entity in dict.fromkeys(entities):
                    posting = self._slots.get(entity)
                    if posting is None:
                        posting = self._slots["".join(entity)] = array("i")
                    posting.append(slot)

    def snapshot(self) -> Snapshot:
        """A posting is only appended to in place: its length is taken under the
        lock, and the postings are joined when the snapshot is encoded."""
        names = list(self._slots)
        postings = list(self._slots.values())
        counts = np.fromiter(map(len, postings), dtype=np.int64, count=len(names))

        def joined() -> np.ndarray:
            return np.frombuffer(b"".join(p[:n].tobytes() for p, n
                                          in zip(postings, counts.tolist(), strict=True)),
                                 dtype=np.int32)

        return {"names": names, "counts": counts, "slots": Later(joined)}

    def restore(self, snap: Snapshot) -> None:
        flat = np.ascontiguousarray(snap["slots"], dtype=np.int32)
        ends = np.cumsum(snap["counts"]).tolist()
        if len(ends) != len(snap["names"]) or (ends[-1] if ends else 0) != len(flat):
            raise ValueError("entities: postings disagree")
        self._slots = {}
        start = 0
        for name, end in zip(snap["names"], ends, strict=True):
            posting = array("i")
            posting.frombytes(flat[start:end].tobytes())
            self._slots[name] = posting
            start = end

    def postings_of(self, entities: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(lengths, slots)``: every slot ever given each of ``entities``, one posting
        after another (each ascending, dead slots included), in one copy."""
        got = [self._slots.get(e, _NONE) for e in entities]
        lengths = np.fromiter(map(len, got), dtype=np.int64, count=len(got))
        return lengths, np.frombuffer(b"".join(got), dtype=np.int32)

    def slots(self, entity: str) -> np.ndarray:
        """Live slots of documents that carry ``entity``, ascending."""
        posting = self._slots.get(entity)
        if posting is None:
            return np.zeros(0, dtype=np.int64)
        s = np.frombuffer(posting, dtype=np.int32)
        out: np.ndarray = s[self.catalog.alive.view()[s]].astype(np.int64)
        return out

    def postings(self) -> Iterator[tuple[str, np.ndarray]]:
        """Every entity and the slots that ever carried it (vacated ones too), ascending."""
        for name, posting in self._slots.items():
            yield name, np.frombuffer(posting, dtype=np.int32).astype(np.int64)

    def names(self, within: np.ndarray | None = None) -> list[str]:
        """Every entity that some live document carries (one of the slots ``within``,
        when given), sorted."""
        carried = self.catalog.alive.view()
        if within is not None:
            carried = np.zeros(len(carried), dtype=bool)
            carried[within] = True
            carried &= self.catalog.alive.view()
        return sorted(e for e, p in self._slots.items()
                      if carried[np.frombuffer(p, dtype=np.int32)].any())
