"""The fact index: times, subjects and the supersession graph of every fact.

Owns: each fact's ingest, event and validity times, its subject slot, the
supersession links and when each became known, and the status of a fact at an
evaluation time under the temporal model of docs/contract.md §3. Imports numpy,
:mod:`holomem.events` and the other projections. Nothing here is persisted: it is rebuilt by replay.
A run of new facts is applied a column at a time by :mod:`~holomem.projections.bulkfacts`.

The definitions (when a fact begins and ends, its status at a time) are
:mod:`holomem.projections.temporal`'s; subjects and their heads are
:mod:`holomem.projections.subjects`'s.

Columns are indexed by the catalog's slots (documents that are not facts have
``is_fact`` False), so the index costs a few dozen bytes per fact; links and
subjects live in dicts that only linked facts and subjects occupy.
"""

from __future__ import annotations

from collections.abc import Iterator
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
from holomem.projections.chains import LinkSlots
from holomem.projections.namespaces import ROOT, Namespace, NamespaceIndex
from holomem.projections.subjects import OrderKey, SubjectIndex
from holomem.projections.temporal import (
    CURRENT,
    NOT_YET_VALID,
    STATUSES,
    UNSET,
    FactTimes,
    Link,
    effective_time,
    end_time,
    opt,
    status_at,
    unset_if_none,
)


class FactIndex:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
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
        #: subjects (per namespace), their members and latest-by-subject's heads
        self.subject_index = SubjectIndex(self.order_key, self.current_in)
        self._reserved_mask: tuple[tuple[int, int], np.ndarray] | None = None
        self.supersedes: dict[str, list[Link]] = {}  # successor -> what it supersedes
        self.superseded_by: dict[str, list[Link]] = {}  # predecessor -> its successors
        #: the links as slot arrays, for the status and chains of every slot at once
        self.link_slots = LinkSlots()
        self.requested: dict[str, tuple[str, ...]] = {}
        #: (helpful, time, note) of every feedback on a fact, in order.
        self.feedback: dict[str, list[tuple[bool, int, str | None]]] = {}
        self.confidence: dict[str, float] = {}  # only facts whose confidence is not 1.0
        #: the time to live of the facts remembered with one (ms)
        self.ttl: dict[str, int] = {}
        self.windows = 0  # live facts with valid_from, valid_to or a time to live
        self.links = 0  # live links
        self.facts = 0
        self.max_eff = UNSET

    # -- events -----------------------------------------------------------------------
    def apply(self, seq: int, event: Event, change: Change) -> None:
        if change.new >= 0:
            self._new_slot(change)
        elif change.old >= 0 and self.is_fact[change.old]:
            self._remove(change.old, self.catalog_id(event))
        match event:
            case FactAdded():
                self._add(event)
            case FactsForgotten(relinks=links) | FactLinks(links=links):
                for succ, pred, known in links:
                    self.link(succ, pred, known)
            case FeedbackGiven(id=fid, helpful=helpful, time=t, note=note):
                canon = self._canonical(fid)
                if canon is not None:
                    # A new list, never one changed in place (see snapshot()).
                    self.feedback[canon] = [*self.feedback.get(canon, ()), (helpful, t, note)]
            case ConfidenceSet(id=fid, confidence=value):
                canon = self._canonical(fid)
                if canon is not None:
                    self._set_confidence(canon, value)

    @staticmethod
    def catalog_id(event: Event) -> str:
        assert isinstance(event, (DocumentAdded, DocumentReplaced, DocumentDeleted))
        return event.id

    def _new_slot(self, change: Change) -> None:
        old = change.old
        assert self.is_fact.n == change.new  # one row per slot, in slot order
        self.namespaces.new_slot()
        if old >= 0 and (self.catalog.ids[change.new] in self.supersedes
                         or self.catalog.ids[change.new] in self.superseded_by):
            self.link_slots.reset()  # the id's links name its old slot
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
        """A new fact's entries in the tables beside the columns (TTL, subject,
        request, confidence) once it has its namespace id ``nid``; its links are the
        caller's. Returns its subject's id (-1: none)."""
        sid = -1
        if e.ttl_ms is not None:
            self.ttl[fid] = e.ttl_ms
        if e.subject is not None:
            sid = self.subject[slot] = self.subject_index.add(fid, nid, e.subject)
        if e.requested:
            self.requested[fid] = e.requested
        if e.confidence is not None:
            self._set_confidence(fid, e.confidence)
        return sid

    @property
    def subject_names(self) -> list[str]:
        """Subject id -> its name."""
        return self.subject_index.names

    @property
    def reserved_subjects(self) -> list[int]:
        """Ids of the subjects holomem reserves for its own facts (RESERVED_PREFIX)."""
        return self.subject_index.reserved

    def _set_confidence(self, fid: str, value: float) -> None:
        if value == 1.0:
            self.confidence.pop(fid, None)
        else:
            self.confidence[fid] = value

    def _canonical(self, fact_id: str) -> str | None:
        """The catalog's own string for ``fact_id`` (so links do not copy ids)."""
        slot = self.catalog.slot(fact_id)
        return None if slot < 0 else self.catalog.ids[slot]

    def link(self, succ: str, pred: str, known_at: int, added: int = -1,
             slots: tuple[int, int] | None = None) -> None:
        """Link ``succ`` -> ``pred``. ``added``: the subject whose heads are brought up
        to date next, with the new fact's own links (:meth:`SubjectIndex.added`,
        which covers what :meth:`SubjectIndex.linked` does for a member of it);
        ``slots``: their slots, when the caller has them."""
        ss, ps = slots if slots is not None else (self.catalog.slot(succ),
                                                  self.catalog.slot(pred))
        if ss < 0 or ps < 0 or ss == ps:
            return  # links to forgotten (or unknown) facts are ignored
        # (The catalog's own strings, so links do not copy ids.)
        s, p = self.catalog.ids[ss], self.catalog.ids[ps]
        assert s is not None and p is not None
        had = self.supersedes.get(s)
        if had is not None and any(link.other == p for link in had):
            return
        # New lists, never ones changed in place (see snapshot()).
        self.supersedes[s] = [*(had or ()), Link(p, known_at)]
        self.superseded_by[p] = [*self.superseded_by.get(p, ()), Link(s, known_at)]
        self.links += 1
        self.link_slots.add(ss, ps)
        sid = self.subject.item(ps)
        if sid >= 0 and sid != added:
            self.subject_index.linked(sid, p)

    def _remove(self, slot: int, fact_id: str) -> None:
        self.facts -= 1
        self.namespaces.remove(slot)
        if (self.valid_from[slot] != UNSET or self.valid_to[slot] != UNSET
                or fact_id in self.ttl):
            self.windows -= 1
        self.ttl.pop(fact_id, None)
        sid = int(self.subject[slot])
        if sid >= 0:
            self.subject_index.remove(sid, fact_id)
        self.requested.pop(fact_id, None)
        self.feedback.pop(fact_id, None)
        self.confidence.pop(fact_id, None)
        for link in self.supersedes.pop(fact_id, []):
            self._drop(self.superseded_by, link.other, fact_id)
            self.links -= 1
            pred = self.subject.item(self.catalog.slot(link.other))
            if pred >= 0:  # without this successor, it may be current again
                self.subject_index.changed(pred)
        for link in self.superseded_by.pop(fact_id, []):
            self._drop(self.supersedes, link.other, fact_id)
            self.links -= 1
        self.is_fact[slot] = False

    @staticmethod
    def _drop(table: dict[str, list[Link]], key: str, other: str) -> None:
        links = table.get(key)
        if links is None:
            return
        kept = [link for link in links if link.other != other]
        if kept:
            table[key] = kept
        else:
            del table[key]

    # -- checkpoints ------------------------------------------------------------------
    def _column_names(self) -> list[str]:
        return [name for name, value in vars(self).items() if isinstance(value, GrowArray)]

    #: The tables' shapes, for a typed decode (msgspec builds the tuples and links).
    SNAPSHOT_TYPES: ClassVar[dict[str, object]] = {
        "supersedes": dict[str, list[Link]], "superseded_by": dict[str, list[Link]],
        "feedback": dict[str, list[tuple[bool, int, str | None]]],
        "requested": list[tuple[str, tuple[str, ...]]],
        "confidence": list[tuple[str, float]], "ttl": list[tuple[str, int]],
        **SubjectIndex.SNAPSHOT_TYPES,
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
        snap.update({
            "supersedes": dict(self.supersedes),
            "superseded_by": dict(self.superseded_by),
            "requested": list(self.requested.items()),
            "feedback": dict(self.feedback),
            "confidence": list(self.confidence.items()),
            "ttl": list(self.ttl.items()),
            "counts": [self.windows, self.links, self.facts, self.max_eff],
        })
        return snap

    def restore(self, snap: Snapshot) -> None:
        names = self._column_names()
        if sorted(names) != sorted(k[4:] for k in snap if k.startswith("col.")):
            raise ValueError("fact index: the checkpoint's columns are not this build's")
        for name in names:
            setattr(self, name, GrowArray.of(snap[f"col.{name}"], getattr(self, name).dtype))
        if len({len(getattr(self, name)) for name in names}) != 1:
            raise ValueError("fact index: columns of different lengths")
        self.namespaces.restore({k[3:]: v for k, v in snap.items() if k.startswith("ns.")})
        self.subject_index.restore(snap)
        self._reserved_mask = None
        self.supersedes.clear()
        self.supersedes.update(snap["supersedes"])
        self.superseded_by.clear()
        self.superseded_by.update(snap["superseded_by"])
        self.requested = dict(snap["requested"])
        self.feedback = snap["feedback"]
        self.confidence = dict(snap["confidence"])
        self.ttl = dict(snap["ttl"])
        self.windows, self.links, self.facts, self.max_eff = snap["counts"]

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
        if not self.reserved_subjects:
            return None
        key = (len(self.subject), len(self.subject_names))
        if self._reserved_mask is None or self._reserved_mask[0] != key:
            table = self.subject_index.reserved_table()
            mask = np.zeros(max(self.catalog.slots, key[0]), dtype=bool)
            mask[:key[0]] = table[self.subject.view().astype(np.int64) + 1]
            self._reserved_mask = (key, mask)
        return self._reserved_mask[1]

    def fact_events(self, slots: np.ndarray) -> list[FactAdded]:
        """The FactAdded event that re-creates each fact of ``slots`` as it is now
        (without its links, which a compaction writes on their own: every link's
        known-at time is its own), a column at a time."""
        cols = [a.view()[slots].tolist() for a in (
            self.ingest, self.event, self.valid_from, self.valid_to, self.subject,
            self.digest, self.namespaces.of_slot)]
        names, spaces = self.subject_names, self.namespaces.names
        ttl, ids = self.ttl, self.catalog.ids
        requested, confidence = self.requested, self.confidence
        out: list[FactAdded] = []
        for slot, ing, evt, vf, vt, sid, dig, nid in zip(slots.tolist(), *cols, strict=True):
            fid = ids[slot]
            assert fid is not None  # a live slot
            out.append(FactAdded(
                id=fid, ingest_time=ing, subject=names[sid] if sid >= 0 else None,
                event_time=None if evt == UNSET else evt,
                valid_from=None if vf == UNSET else vf, valid_to=None if vt == UNSET else vt,
                requested=requested.get(fid, ()), digest=dig.to_bytes(8, "little"),
                confidence=confidence.get(fid), namespace=spaces[nid] if nid >= 0 else ROOT,
                ttl_ms=ttl.get(fid)))
        return out

    def subject_members(self, subject: str, namespace: Namespace = ROOT) -> list[str]:
        """Ids of the stored facts of ``subject`` in ``namespace`` (exactly that one:
        subjects never cross namespaces), in write order."""
        sid = self._subject_id(subject, namespace)
        return self.subject_index.members_of(sid) if sid is not None else []

    def _subject_id(self, subject: str, namespace: Namespace) -> int | None:
        nid = self.namespaces.intern_id(namespace)
        return self.subject_index.id_of(nid, subject) if nid >= 0 else None

    def subject_heads(self, subject: str, namespace: Namespace = ROOT
                      ) -> tuple[OrderKey, list[tuple[OrderKey, str]]] | None:
        """The place in effect order of the last stored fact of ``subject`` in
        ``namespace``, and the stored facts of it current when that one begins, in
        effect order (every other one is current at no later time: see
        :mod:`holomem.projections.subjects`); None when it has no stored fact."""
        sid = self._subject_id(subject, namespace)
        held = self.subject_index.heads(sid) if sid is not None else None
        if held is None:
            return None
        last, heads = held
        return last, sorted(heads)

    def current(self, fact_id: str, at: int) -> bool:
        """Whether the stored fact ``fact_id`` is current at ``at`` (every link known):
        :meth:`status` is ``current``, read straight from the columns and its
        successors' starts."""
        slot = self.slot(fact_id)
        return slot >= 0 and self.current_in(slot, fact_id, at)

    def current_in(self, slot: int, fact_id: str, at: int) -> bool:
        """:meth:`current` of the stored fact ``fact_id``, which is in ``slot``."""
        if at < self.eff.item(slot):
            return False
        links = self.superseded_by.get(fact_id)
        if links is not None:
            for link in links:  # successor_starts, inline: a stored one has begun
                s = self.slot(link.other)
                if s >= 0 and self.eff.item(s) <= at:
                    return False
        end = self.end.item(slot)
        return bool(end == UNSET or at < end)

    def subjects(self, subject: str, prefix: Namespace = ROOT) -> list[str]:
        """Ids of the stored facts of ``subject`` in every namespace at or under
        ``prefix``, in write order."""
        out: list[str] = []
        for nid in self.namespaces.under(prefix):
            sid = self.subject_index.id_of(nid, subject)
            if sid is not None:
                out.extend(self.subject_index.members_of(sid))
        return sorted(out, key=self.catalog.slot) if len(out) > 1 else out

    def namespace(self, slot: int) -> Namespace:
        """The namespace of the fact in ``slot`` (the root for a plain document)."""
        return self.namespaces.namespace(slot)

    def known(self, slot: int, known_at: int | None) -> bool:
        return known_at is None or int(self.ingest[slot]) <= known_at

    def successors(self, fact_id: str, known_at: int | None = None) -> list[str]:
        """Stored facts that supersede ``fact_id`` through links known at ``known_at``."""
        return self._linked(self.superseded_by, fact_id, known_at)

    def predecessors(self, fact_id: str, known_at: int | None = None) -> list[str]:
        """Stored facts that ``fact_id`` supersedes through links known at ``known_at``."""
        return self._linked(self.supersedes, fact_id, known_at)

    def _linked(self, table: dict[str, list[Link]], fact_id: str,
                known_at: int | None) -> list[str]:
        out = []
        for link in table.get(fact_id, ()):
            if known_at is not None and link.known_at > known_at:
                continue
            slot = self.slot(link.other)
            if slot >= 0 and self.known(slot, known_at):
                out.append(link.other)
        return out

    def status(self, slot: int, at: int, known_at: int | None = None) -> str:
        """The status of the fact in ``slot`` at ``at`` (see the module docstring)."""
        if not self.is_fact.item(slot):
            return CURRENT  # a plain document: no time, no links
        eff = self.eff.item(slot)
        if at < eff:
            return NOT_YET_VALID  # (no need to look at its successors)
        fid = self.catalog.ids[slot]
        assert fid is not None
        return status_at(at, eff, opt(self.end.item(slot)), self.successor_starts(fid,
                                                                                    known_at))

    def statuses(self, slots: np.ndarray, at: int, known_at: int | None = None) -> list[str]:
        """:meth:`status` of each of ``slots`` at once (the same answers)."""
        return [STATUSES[c] for c in self.status_codes(slots, at, known_at).tolist()]

    def status_codes(self, slots: np.ndarray, at: int, known_at: int | None = None
                     ) -> np.ndarray:
        """:meth:`status` of each of ``slots`` as its index in :data:`STATUSES`: the
        time rules over the columns, the links only for the facts that have successors."""
        is_fact = self.is_fact.view()[slots]
        eff = self.eff.view()[slots]
        end = self.end.view()[slots]
        began = is_fact & (eff <= at)
        codes: np.ndarray = np.where(is_fact & (eff > at), 3,
                                     np.where(began & (end != UNSET) & (end <= at), 2, 0))
        table = self.superseded_by
        if table and known_at is None:
            first = self.link_slots.first_starts(
                self.is_fact.n, self.facts,
                lambda: self.is_fact.view() & self.catalog.alive.view(), self.eff.view(),
                self._link_pairs)
            if first is not None:  # (a stored successor has begun)
                codes[began & (first[slots] <= at)] = 1
                return codes
        if table:
            ids, slot_of, is_f, eff_of = (self.catalog.ids, self.catalog.slot,
                                          self.is_fact.view(), self.eff.view())
            listed = slots.tolist()
            for j in np.flatnonzero(began).tolist():
                fid = ids[listed[j]]
                links = table.get(fid) if fid is not None else None
                if links is None:
                    continue
                if known_at is not None:  # the links and facts known then (status())
                    if any(s <= at for s in self.successor_starts(fid, known_at)):
                        codes[j] = 1
                    continue
                for link in links:  # successor_starts without known_at, inline
                    s = slot_of(link.other)
                    if s >= 0 and is_f[s] and eff_of[s] <= at:
                        codes[j] = 1
                        break
        return codes

    def successor_starts(self, fact_id: str, known_at: int | None = None) -> Iterator[int]:
        """When each stored successor of ``fact_id`` (known at ``known_at``) begins."""
        for succ in self.successors(fact_id, known_at):
            yield self.eff.item(self.slot(succ))

    def current_mask(self, at: int) -> np.ndarray:
        """Which slots hold a stored fact that is current at ``at`` (vectorised status)."""
        stored = self.is_fact.view() & self.catalog.alive.view()
        vto = self.end.view()
        eff = self.eff.view()
        mask: np.ndarray = stored & (eff <= at) & ((vto == UNSET) | (at < vto))
        succ, pred = self.link_slots.live(stored, self._link_pairs)
        mask[pred[eff[succ] <= at]] = False  # a stored successor has begun
        return mask

    def components(self) -> np.ndarray:
        """A chain id per slot: slots joined by supersession share one (the smallest of
        them), any other slot is its own. Kept until the links or the facts change:
        the caller must not change it."""
        stored = self.is_fact.view() & self.catalog.alive.view()
        return self.link_slots.chains(stored, self.facts, self._link_pairs)

    def _link_pairs(self) -> np.ndarray:
        """(successor slot, predecessor slot) of every link in the tables (-1: an end
        that is not a stored fact), read one link at a time (LinkSlots' first use)."""
        slot = self.slot
        return np.array([(slot(succ), slot(link.other)) for succ, links in
                         self.supersedes.items() for link in links], dtype=np.int64)

    def superseded_since(self, slot: int, known_at: int | None = None) -> int | None:
        """When the fact in ``slot`` became superseded (earliest successor's start), or None."""
        fid = self.catalog.ids[slot]
        if fid is None:
            return None
        starts = [int(self.eff[self.slot(s)]) for s in self.successors(fid, known_at)]
        return min(starts) if starts else None

    def chain(self, fact_id: str) -> list[str]:
        """Every stored fact connected to ``fact_id`` by supersession, in effect order."""
        if self.slot(fact_id) < 0:
            return []
        seen = {fact_id}
        todo = [fact_id]
        while todo:
            cur = todo.pop()
            for table in (self.supersedes, self.superseded_by):
                for link in table.get(cur, ()):
                    if link.other not in seen and self.slot(link.other) >= 0:
                        seen.add(link.other)
                        todo.append(link.other)
        return sorted(seen, key=self.order_key)

    def order_key(self, fact_id: str) -> OrderKey:
        """Effect order (see :data:`OrderKey`)."""
        slot = self.slot(fact_id)
        return (int(self.eff[slot]), int(self.ingest[slot]), int(self.catalog.seq[slot]), slot)

    def all_links(self) -> list[tuple[str, str, int]]:
        """Every link between stored facts: (successor, predecessor, known_at)."""
        return [(succ, link.other, link.known_at)
                for succ, links in self.supersedes.items() for link in links]

    def memory_bytes(self) -> int:
        return sum(col.nbytes for col in self.columns()) + self.namespaces.memory_bytes()
