"""The fact index: times, subjects and the supersession graph of every fact.

Owns: each fact's ingest, event and validity times, digest and subject slot (the
columns), its time to live, the counts that let recall take its fast path, and
applying the fact events to all of it, one at a time. Composes the parts that own
the rest: :mod:`~holomem.projections.namespaces` (the namespace of every fact),
:mod:`~holomem.projections.subjects` (subjects, their members and heads),
:mod:`~holomem.projections.supersession` (the links, and the walks along them),
:mod:`~holomem.projections.statuses` (the status of a fact at an evaluation time
under the temporal model of docs/contract.md §3) and
:mod:`~holomem.projections.factnotes` (a fact's request, feedback and confidence),
:mod:`~holomem.projections.turns` (a conversation turn's speaker, session and position);
the queries of those parts are answered through this index, which callers hold. A run of new facts
is applied a column at a time by :mod:`~holomem.projections.bulkfacts`, a compacted
generation's index renumbered by :mod:`~holomem.projections.compactfacts`. Imports
numpy, :mod:`holomem.events` and those projections. Nothing here is persisted: it is
rebuilt by replay.

The definitions (when a fact begins and ends, its status at a time) are
:mod:`holomem.projections.temporal`'s.

Columns are indexed by the catalog's slots (documents that are not facts have
``is_fact`` False), so the index costs a few dozen bytes per fact; links and
subjects live in dicts that only linked facts and subjects occupy.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from holomem.events import (
    ConfidenceSet,
    DocumentAdded,
    DocumentDeleted,
    DocumentReplaced,
    Event,
    FactAdded,
    FactLinks,
    FactsForgotten,
    FeedbackGiven,
)
from holomem.projections.base import Change, GrowArray, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.factnotes import FactNotes
from holomem.projections.namespaces import ROOT, Namespace, NamespaceIndex
from holomem.projections.statuses import Statuses
from holomem.projections.subjects import OrderKey, SubjectIndex
from holomem.projections.supersession import Supersession
from holomem.projections.temporal import (
    UNSET,
    FactTimes,
    Link,
    effective_time,
    end_time,
    opt,
    unset_if_none,
)
from holomem.projections.turns import Turn, Turns


def _turn_of(turn: Turn | None) -> tuple[str | None, str | None, int | None] | None:
    """A FactAdded's ``turn`` from the turn table's entry."""
    return None if turn is None else (turn.speaker, turn.session, turn.position)


class FactIndex:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        # The columns are made here and only grow in place (a restore or a compaction
        # fills fresh ones): the parts below hold them.
        self.is_fact = GrowArray(np.bool_)
        self.ingest = GrowArray(np.int64)
        self.event = GrowArray(np.int64)
        self.valid_from = GrowArray(np.int64)
        self.valid_to = GrowArray(np.int64)
        #: when each fact stops being valid (:func:`end_time`), UNSET when never
        self.end = GrowArray(np.int64)
        self.eff = GrowArray(np.int64)
        self.subject = GrowArray(np.int32)
        self.digest = GrowArray(np.uint64)
        #: the namespace of every fact, and the facts under a prefix
        self.namespaces = NamespaceIndex()
        #: which fact supersedes which, and since when
        self.supersession = Supersession(catalog, self.slot, self.known, self.order_key)
        #: the status of the facts at a time
        self.statuses_at = Statuses(catalog, self.is_fact, self.eff, self.end,
                                    self.supersession, self.slot)
        #: subjects (per namespace), their members and latest-by-subject's heads
        self.subject_index = SubjectIndex(self.namespaces, self.order_key,
                                          self.statuses_at.current_in)
        #: each fact's request, feedback and confidence
        self.notes = FactNotes(catalog)
        #: each conversation turn's speaker, session and position
        self.turns = Turns(catalog, self.namespaces)
        #: the time to live of the facts remembered with one (ms)
        self.ttl: dict[str, int] = {}
        self.windows = 0  # live facts with valid_from, valid_to or a time to live
        self.facts = 0
        self.max_eff = UNSET

    # -- events -----------------------------------------------------------------------
    def apply(self, seq: int, event: Event, change: Change) -> None:
        if change.new >= 0:
            self._new_slot(change)
        elif change.old >= 0 and self.is_fact[change.old]:
            self._remove(change.old, self.catalog_id(event), seq)
        match event:
            case FactAdded():
                self._add(event)
            case FactsForgotten(relinks=links):
                for succ, pred, known in links:
                    self.link(succ, pred, known, relinked=seq)
            case FactLinks(links=links):
                for succ, pred, known in links:
                    self.link(succ, pred, known)
            case FeedbackGiven() | ConfidenceSet():
                self.notes.apply(event)

    @staticmethod
    def catalog_id(event: Event) -> str:
        assert isinstance(event, (DocumentAdded, DocumentReplaced, DocumentDeleted))
        return event.id

    def _new_slot(self, change: Change) -> None:
        old = change.old
        assert self.is_fact.n == change.new  # one row per slot, in slot order
        self.namespaces.new_slot()
        if old >= 0:
            self.supersession.moved(self.catalog.ids[change.new])
        if old >= 0 and self.is_fact[old]:
            # A fact's document was replaced through the document API: the fact keeps
            # its times, namespace and links; they move to the new slot.
            for col in self.columns():
                col.append(col[old])
            self.is_fact[old] = False
            if self.subject[old] >= 0:  # its place in effect order moves with its slot
                self.subject_index.changed(int(self.subject[old]))
            self.namespaces.move(old, change.new)
            return
        self.is_fact.append(False)
        self.ingest.append(0)
        for col in (self.event, self.valid_from, self.valid_to, self.end, self.eff):
            col.append(UNSET)
        self.subject.append(-1)
        self.digest.append(0)

    def columns(self) -> tuple[GrowArray, ...]:
        """Every column, one row per slot."""
        return (self.is_fact, self.ingest, self.event, self.valid_from, self.valid_to, self.end,
                self.eff, self.subject, self.digest)

    def _add(self, e: FactAdded) -> None:
        slot = self.catalog.slot(e.id)
        assert slot >= 0  # the document comes first in the transaction
        eff = effective_time(e.valid_from, e.event_time, e.ingest_time)
        self.is_fact[slot] = True
        self.ingest[slot] = e.ingest_time
        self.event[slot] = unset_if_none(e.event_time)
        self.valid_from[slot] = unset_if_none(e.valid_from)
        self.valid_to[slot] = unset_if_none(e.valid_to)
        self.end[slot] = unset_if_none(end_time(e.valid_to, e.ingest_time, e.ttl_ms))
        self.eff[slot] = eff
        self.digest[slot] = int.from_bytes(e.digest[:8].ljust(8, b"\0"), "little")
        self.facts += 1
        self.max_eff = max(self.max_eff, eff)
        if e.valid_from is not None or e.valid_to is not None or e.ttl_ms is not None:
            self.windows += 1
        fid = self.catalog.ids[slot]
        assert fid is not None
        self.side_tables(slot, fid, self.namespaces.add(slot, e.namespace), e)
        sid = self.subject.item(slot)
        for pred in e.supersedes:
            self.link(fid, pred, e.ingest_time, sid)
        for succ in e.superseded_by:
            self.link(succ, fid, e.ingest_time, sid)
        if sid >= 0:
            self.subject_index.added(sid, fid, e.supersedes)

    def side_tables(self, slot: int, fid: str, nid: int, e: FactAdded) -> int:
        """A new fact's entries in the tables beside the columns (TTL, subject, notes)
        once it has its namespace id ``nid``; its links are the caller's. Returns its
        subject's id (-1: none)."""
        sid = -1
        if e.ttl_ms is not None:
            self.ttl[fid] = e.ttl_ms
        if e.subject is not None:
            sid = self.subject[slot] = self.subject_index.add(fid, nid, e.subject)
        self.notes.added(fid, e)
        if e.turn is not None:
            self.turns.added(fid, e, self.namespaces.names[nid])
        return sid

    @property
    def subject_names(self) -> list[str]:
        """Subject id -> its name."""
        return self.subject_index.names

    def link(self, succ: str, pred: str, known_at: int, added: int = -1,
             slots: tuple[int, int] | None = None, relinked: int | None = None) -> None:
        """Link ``succ`` -> ``pred`` (:meth:`Supersession.add`). ``added``: the subject
        whose heads are brought up to date next, with the new fact's own links
        (:meth:`SubjectIndex.added`, which covers what :meth:`SubjectIndex.linked`
        does for a member of it); ``slots``: their slots, when the caller has them;
        ``relinked``: the forget's transaction, for a link it re-points."""
        made = (self.supersession.add(succ, pred, known_at, slots) if relinked is None
                else self.supersession.relink(succ, pred, known_at, relinked))
        if made is not None:
            ps, p = made
            sid = self.subject.item(ps)
            if sid >= 0 and sid != added:
                self.subject_index.linked(sid, p)

    def _remove(self, slot: int, fact_id: str, seq: int) -> None:
        self.facts -= 1
        self.namespaces.remove(slot)
        if (self.valid_from[slot] != UNSET or self.valid_to[slot] != UNSET
                or fact_id in self.ttl):
            self.windows -= 1
        self.ttl.pop(fact_id, None)
        sid = int(self.subject[slot])
        if sid >= 0:
            self.subject_index.remove(sid, fact_id)
        self.notes.remove(fact_id)
        self.turns.remove(fact_id)
        for pred in self.supersession.remove(fact_id, slot, seq):
            sid = self.subject.item(self.catalog.slot(pred))
            if sid >= 0:  # without this successor, it may be current again
                self.subject_index.changed(sid)
        self.is_fact[slot] = False

    # -- checkpoints ------------------------------------------------------------------
    def _column_names(self) -> list[str]:
        return [name for name, value in vars(self).items() if isinstance(value, GrowArray)]

    #: The tables' shapes, for a typed decode (msgspec builds the tuples and links).
    SNAPSHOT_TYPES: ClassVar[dict[str, object]] = {
        **Supersession.SNAPSHOT_TYPES, **FactNotes.SNAPSHOT_TYPES,
        "ttl": list[tuple[str, int]], **SubjectIndex.SNAPSHOT_TYPES, **Turns.SNAPSHOT_TYPES,
    }

    def snapshot(self) -> Snapshot:
        """Nothing rebuilt under the lock. Columns (each GrowArray attribute, whatever
        columns the index grows) are lent: a fact's row changes when it goes, and
        that change copies the column first. The tables are copied only at the top
        (C speed): the link and feedback tables' lists are never changed in place (a
        change puts a new list in) and their entries are tuples; the subjects' tables
        as :meth:`SubjectIndex.snapshot` takes them."""
        snap: Snapshot = {f"col.{name}": getattr(self, name).lend()
                          for name in self._column_names()}
        snap.update({f"ns.{k}": v for k, v in self.namespaces.snapshot().items()})
        snap.update(self.subject_index.snapshot())
        snap.update(self.supersession.snapshot())
        snap.update(self.notes.snapshot())
        snap.update(self.turns.snapshot())
        snap["ttl"] = list(self.ttl.items())
        snap["counts"] = [self.windows, self.links, self.facts, self.max_eff]
        return snap

    def restore(self, snap: Snapshot) -> None:
        """Fill this fresh index from :meth:`snapshot` (its columns in place: the
        parts hold them)."""
        names = self._column_names()
        if sorted(names) != sorted(k[4:] for k in snap if k.startswith("col.")):
            raise ValueError("fact index: the checkpoint's columns are not this build's")
        for name in names:
            col: GrowArray = getattr(self, name)
            assert not col.n  # fresh
            col.extend(np.asarray(snap[f"col.{name}"], dtype=col.dtype))
        if len({len(getattr(self, name)) for name in names}) != 1:
            raise ValueError("fact index: columns of different lengths")
        self.namespaces.restore({k[3:]: v for k, v in snap.items() if k.startswith("ns.")})
        self.subject_index.restore(snap)
        self.windows, links, self.facts, self.max_eff = snap["counts"]
        self.supersession.restore(snap, links)
        self.notes.restore(snap)
        self.turns.restore(snap)
        self.ttl = dict(snap["ttl"])

    # -- queries ----------------------------------------------------------------------
    def slot(self, fact_id: str) -> int:
        """The slot of a stored fact, or -1 (also for documents that are not facts)."""
        slot = self.catalog.slot(fact_id)
        return slot if slot >= 0 and self.is_fact.item(slot) else -1

    def times(self, slot: int) -> FactTimes:
        sid = self.subject.item(slot)
        return FactTimes(
            self.ingest.item(slot),
            opt(self.event.item(slot)),
            opt(self.valid_from.item(slot)),
            opt(self.valid_to.item(slot)),
            self.eff.item(slot),
            self.subject_names[sid] if sid >= 0 else None,
            self.digest.item(slot).to_bytes(8, "little"),
            self.ttl.get(self.catalog.ids[slot] or ""),
        )

    def reserved_mask(self) -> np.ndarray | None:
        """The slot mask of the facts whose subject is reserved (starts with
        :data:`RESERVED_PREFIX`), as long as the catalog's slots; None when there are
        none. A slot's subject is set when the slot is made and never changes, so the
        mask is kept until a slot or a subject is added."""
        return self.subject_index.reserved_mask(self.subject, self.catalog.slots)

    def fact_events(self, slots: np.ndarray) -> list[FactAdded]:
        """The FactAdded event that re-creates each fact of ``slots`` as it is now
        (without its links, which a compaction writes on their own: every link's
        known-at time is its own), a column at a time."""
        cols = [a.view()[slots].tolist() for a in (
            self.ingest, self.event, self.valid_from, self.valid_to, self.subject,
            self.digest, self.namespaces.of_slot)]
        names, spaces = self.subject_names, self.namespaces.names
        ttl, ids = self.ttl, self.catalog.ids
        requested, confidence = self.notes.requested, self.notes.added_confidence
        turns = self.turns.of
        out: list[FactAdded] = []
        for slot, ing, evt, vf, vt, sid, dig, nid in zip(slots.tolist(), *cols, strict=True):
            fid = ids[slot]
            assert fid is not None  # a live slot
            out.append(FactAdded(
                id=fid, ingest_time=ing, subject=names[sid] if sid >= 0 else None,
                event_time=None if evt == UNSET else evt,
                valid_from=None if vf == UNSET else vf, valid_to=None if vt == UNSET else vt,
                requested=requested.get(fid, ()), digest=dig.to_bytes(8, "little"),
                confidence=confidence(fid), namespace=spaces[nid] if nid >= 0 else ROOT,
                ttl_ms=ttl.get(fid), turn=_turn_of(turns.get(fid))))
        return out

    def subject_members(self, subject: str, namespace: Namespace = ROOT) -> list[str]:
        """Ids of the stored facts of ``subject`` in ``namespace`` (exactly that one:
        subjects never cross namespaces), in write order."""
        return self.subject_index.members_named(subject, namespace)

    def subject_heads(self, subject: str, namespace: Namespace = ROOT
                      ) -> tuple[OrderKey, list[tuple[OrderKey, str]]] | None:
        """The heads of ``subject`` in ``namespace`` (:meth:`SubjectIndex.heads_named`)."""
        return self.subject_index.heads_named(subject, namespace)

    def subjects(self, subject: str, prefix: Namespace = ROOT) -> list[str]:
        """Ids of the stored facts of ``subject`` in every namespace at or under
        ``prefix``, in write order."""
        out = self.subject_index.members_under(subject, prefix)
        return sorted(out, key=self.catalog.slot) if len(out) > 1 else out

    def namespace(self, slot: int) -> Namespace:
        """The namespace of the fact in ``slot`` (the root for a plain document)."""
        return self.namespaces.namespace(slot)

    def known(self, slot: int, known_at: int | None) -> bool:
        return known_at is None or int(self.ingest[slot]) <= known_at

    def order_key(self, fact_id: str) -> OrderKey:
        """Effect order (see :data:`OrderKey`)."""
        slot = self.slot(fact_id)
        return (int(self.eff[slot]), int(self.ingest[slot]), int(self.catalog.seq[slot]), slot)

    def memory_bytes(self) -> int:
        return sum(col.nbytes for col in self.columns()) + self.namespaces.memory_bytes()

    # -- the parts' answers, for the index's callers ----------------------------------
    @property
    def supersedes(self) -> dict[str, list[Link]]:
        """Successor -> the links to what it supersedes (:class:`Supersession`)."""
        return self.supersession.supersedes

    @property
    def superseded_by(self) -> dict[str, list[Link]]:
        """Predecessor -> the links to its successors (:class:`Supersession`)."""
        return self.supersession.superseded_by

    @property
    def requested(self) -> dict[str, tuple[str, ...]]:
        """Fact -> the ``supersedes`` list it was remembered with (:class:`FactNotes`)."""
        return self.notes.requested

    @property
    def feedback(self) -> dict[str, list[tuple[bool, int, str | None]]]:
        """Fact -> (helpful, time, note) of every feedback on it (:class:`FactNotes`)."""
        return self.notes.feedback

    @property
    def confidence(self) -> dict[str, float]:
        """Fact -> its confidence, when not 1.0 (:class:`FactNotes`)."""
        return self.notes.confidence

    def feedback_known(self, fact_id: str, known_at: int | None = None
                       ) -> list[tuple[bool, int, str | None]]:
        return self.notes.feedback_known(fact_id, known_at)

    def confidence_known(self, fact_id: str, known_at: int | None = None) -> float:
        return self.notes.confidence_known(fact_id, known_at)

    def confidence_remembered(self, fact_id: str) -> float:
        """The confidence ``fact_id`` was remembered with."""
        value = self.notes.added_confidence(fact_id)
        return 1.0 if value is None else value

    def confidence_changes(self, fact_id: str) -> list[tuple[int, float]]:
        """(time, value) of each confidence set on ``fact_id`` since it was remembered."""
        was = self.notes.confidence_set.get(fact_id)
        return was[1] if was is not None else []

    @property
    def links(self) -> int:
        """Live links (:class:`Supersession`)."""
        return self.supersession.count

    def successors(self, fact_id: str, known_at: int | None = None) -> list[str]:
        return self.supersession.successors(fact_id, known_at)

    def predecessors(self, fact_id: str, known_at: int | None = None) -> list[str]:
        return self.supersession.predecessors(fact_id, known_at)

    def chain(self, fact_id: str) -> list[str]:
        return self.supersession.chain(fact_id)

    def all_links(self) -> list[tuple[str, str, int]]:
        return self.supersession.all_links()

    def status(self, slot: int, at: int, known_at: int | None = None) -> str:
        return self.statuses_at.status(slot, at, known_at)

    def statuses(self, slots: np.ndarray, at: int, known_at: int | None = None) -> list[str]:
        return self.statuses_at.statuses(slots, at, self.facts, known_at)

    def status_codes(self, slots: np.ndarray, at: int, known_at: int | None = None
                     ) -> np.ndarray:
        return self.statuses_at.codes(slots, at, self.facts, known_at)

    def status_codes_then(self, slots: np.ndarray, at: int, known_at: int | None, bound: int,
                          seq: int) -> np.ndarray:
        return self.statuses_at.codes_then(slots, at, known_at, bound, seq)

    def current(self, fact_id: str, at: int) -> bool:
        return self.statuses_at.current(fact_id, at)

    def current_in(self, slot: int, fact_id: str, at: int) -> bool:
        return self.statuses_at.current_in(slot, fact_id, at)

    def current_mask(self, at: int) -> np.ndarray:
        return self.statuses_at.current_mask(at)

    def components(self) -> np.ndarray:
        return self.statuses_at.components(self.facts)

    def superseded_since(self, slot: int, known_at: int | None = None) -> int | None:
        return self.statuses_at.superseded_since(slot, known_at)
