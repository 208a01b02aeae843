"""What callers said of each stored fact, kept for them: its request, feedback, confidence.

Owns: :class:`FactNotes` — per fact id, the ``supersedes`` list it was remembered
with, as given; every feedback given on it, in order; its confidence when it is
not 1.0, and for a fact whose confidence was set after it was remembered, the one it
was remembered with and each change with its time; and the feedback and confidence
as known at a time (each feedback and change counts from its own time). Nothing in
the fact index reads them (its times, links and status do not depend on them):
records, exports, recall's usefulness and a compaction's rewrite do. Part of the
fact index (:mod:`holomem.projections.facts`), which tells it of every fact added
and removed. Imports :mod:`holomem.events` and the catalog.

The feedback and confidence tables' lists are never changed in place (a change puts
a new list in) and their entries are tuples, so a snapshot copies the tables at the top only.
"""

from __future__ import annotations

from typing import ClassVar

from holomem.events import ConfidenceSet, Event, FactAdded, FeedbackGiven
from holomem.projections.base import Snapshot
from holomem.projections.catalog import Catalog


class FactNotes:
    #: The tables' shapes, for a typed decode (msgspec builds the tuples).
    SNAPSHOT_TYPES: ClassVar[dict[str, object]] = {
        "feedback": dict[str, list[tuple[bool, int, str | None]]],
        "requested": list[tuple[str, tuple[str, ...]]],
        "confidence": list[tuple[str, float]],
        "confidence_set": dict[str, tuple[float, list[tuple[int, float]]]],
    }

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.requested: dict[str, tuple[str, ...]] = {}
        #: (helpful, time, note) of every feedback on a fact, in order.
        self.feedback: dict[str, list[tuple[bool, int, str | None]]] = {}
        self.confidence: dict[str, float] = {}  # only facts whose confidence is not 1.0
        #: Fact -> (the confidence it was remembered with, (time, value) of each
        #: confidence set on it since, in order): only the facts given one.
        self.confidence_set: dict[str, tuple[float, list[tuple[int, float]]]] = {}

    def apply(self, event: Event) -> None:
        """A feedback or a confidence given on a fact (any other event: nothing)."""
        match event:
            case FeedbackGiven(id=fid, helpful=helpful, time=t, note=note):
                canon = self._canonical(fid)
                if canon is not None:
                    # A new list, never one changed in place (see the module docstring).
                    self.feedback[canon] = [*self.feedback.get(canon, ()), (helpful, t, note)]
            case ConfidenceSet(id=fid, confidence=value, time=t):
                canon = self._canonical(fid)
                if canon is not None:
                    first, changes = self.confidence_set.get(
                        canon, (self.confidence.get(canon, 1.0), []))
                    # A new list, never one changed in place (as the feedback's).
                    self.confidence_set[canon] = (first, [*changes, (t, value)])
                    self._set_confidence(canon, value)

    def added(self, fid: str, e: FactAdded) -> None:
        """The notes of the new fact ``fid`` (the catalog's string), remembered by ``e``."""
        if e.requested:
            self.requested[fid] = e.requested
        if e.confidence is not None:
            self._set_confidence(fid, e.confidence)

    def remove(self, fid: str) -> None:
        self.requested.pop(fid, None)
        self.feedback.pop(fid, None)
        self.confidence.pop(fid, None)
        self.confidence_set.pop(fid, None)

    def feedback_known(self, fid: str, known_at: int | None = None
                       ) -> list[tuple[bool, int, str | None]]:
        """The feedback on ``fid`` given by ``known_at`` (None: all of it), in order."""
        given = self.feedback.get(fid)
        if not given:
            return []
        if known_at is None:
            return given
        return [fb for fb in given if fb[1] <= known_at]

    def confidence_known(self, fid: str, known_at: int | None = None) -> float:
        """The confidence of ``fid`` as known at ``known_at`` (None: now): the last one
        set by then, else the one it was remembered with."""
        was = self.confidence_set.get(fid)
        if known_at is None or was is None:
            return self.confidence.get(fid, 1.0)
        value = was[0]
        for t, v in was[1]:
            if t <= known_at:
                value = v
        return value

    def added_confidence(self, fid: str) -> float | None:
        """The confidence ``fid`` was remembered with (None: 1.0)."""
        was = self.confidence_set.get(fid)
        value = was[0] if was is not None else self.confidence.get(fid, 1.0)
        return None if value == 1.0 else value

    def _set_confidence(self, fid: str, value: float) -> None:
        if value == 1.0:
            self.confidence.pop(fid, None)
        else:
            self.confidence[fid] = value

    def _canonical(self, fact_id: str) -> str | None:
        """The catalog's own string for ``fact_id`` (so the tables do not copy ids)."""
        slot = self.catalog.slot(fact_id)
        return None if slot < 0 else self.catalog.ids[slot]

    # -- checkpoints and compaction -----------------------------------------------------
    def snapshot(self) -> Snapshot:
        snap: Snapshot = {
            "requested": list(self.requested.items()),
            "feedback": dict(self.feedback),
            "confidence": list(self.confidence.items()),
        }
        # Only when a confidence was set: a store without one writes the payload it
        # wrote before the table existed (FORMAT.md §9.2).
        if self.confidence_set:
            snap["confidence_set"] = dict(self.confidence_set)
        return snap

    def restore(self, snap: Snapshot) -> None:
        self.requested = dict(snap["requested"])
        self.feedback = snap["feedback"]
        self.confidence = dict(snap["confidence"])
        self.confidence_set = dict(snap.get("confidence_set", {}))

    def compacted(self, old: FactNotes, fact_ids: list[str]) -> None:
        """Fill these fresh tables with the notes of ``fact_ids`` in ``old``, in that
        order (a compaction writes the kept facts again in slot order)."""
        self.requested = {f: old.requested[f] for f in fact_ids if f in old.requested}
        self.feedback = {f: old.feedback[f] for f in fact_ids if f in old.feedback}
        self.confidence = {f: old.confidence[f] for f in fact_ids if f in old.confidence}
        self.confidence_set = {f: old.confidence_set[f] for f in fact_ids
                               if f in old.confidence_set}
