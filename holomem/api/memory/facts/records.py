"""Fact records: what a stored fact looks like to a caller, built once from a view.

Owns: :func:`fact_record` (every RememberInput field as stored, its ingest time,
status at an evaluation time and the links that hold — everything recall, get,
history, list and the contract return), the ``history`` filter on a status
(:func:`wanted`), and ``get``/``history`` over a view. Imports the engine's view
and the memory API's types.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory.types import FactRecord, FeedbackEntry
from holomem.errors import NotFoundError
from holomem.projections.temporal import CURRENT, STATUSES, UNSET
from holomem.projections.turns import Turn

#: The turn of a fact that is not a conversation turn.
NO_TURN = Turn(None, None, None)


def wanted(history: str, status: str) -> bool:
    """Whether a fact of ``status`` passes the ``history`` filter (docs/contract.md §4 Recall)."""
    if history == "all":
        return True
    if history == "current":
        return status == CURRENT
    return status != CURRENT  # "historical": superseded, expired or not yet valid


def fact_record(view: View, slot: int, at: int, known_at: int | None = None) -> FactRecord:
    """The record of the document in ``slot``, its status at ``at`` (knowing only what
    was ingested by ``known_at``). A plain document reads as a current fact."""
    facts = view.facts
    fid = view.id_of(slot)
    rec = view.record(slot)
    vec = view.embeddings.vector(slot)
    meta = validate.load_metadata(rec.metadata)
    emb = [float(v) for v in vec] if vec is not None else None
    if not facts.is_fact[slot]:
        return FactRecord(id=fid, text=rec.text, ingest_time=0, status="current",
                          entities=list(rec.entities), metadata=meta, embedding=emb)
    t = facts.times(slot)
    fb = facts.feedback_known(fid, known_at)
    turn = facts.turns.get(fid) or NO_TURN
    return FactRecord(
        id=fid, text=rec.text, ingest_time=t.ingest_time,
        status=facts.status(slot, at, known_at),  # type: ignore[arg-type]
        subject=t.subject, entities=list(rec.entities), metadata=meta, embedding=emb,
        event_time=t.event_time, valid_from=t.valid_from, valid_to=t.valid_to,
        supersedes=facts.predecessors(fid, known_at),
        superseded_by=facts.successors(fid, known_at),
        confidence=facts.confidence_known(fid, known_at),
        helpful=sum(1 for h, _, _ in fb if h), unhelpful=sum(1 for h, _, _ in fb if not h),
        feedback=[FeedbackEntry(helpful=h, time=tm, note=n) for h, tm, n in fb],
        namespace=list(facts.namespace(slot)), ttl_ms=t.ttl_ms,
        expires_at=t.ingest_time + t.ttl_ms if t.ttl_ms is not None else None,
        speaker=turn.speaker, session=turn.session, position=turn.position)


#: FactRecord's fields in order: :func:`fact_records` passes them by position (no
#: keyword dict per record), so this fails at import if the order ever changes.
_FIELDS = ("id", "text", "ingest_time", "status", "subject", "entities", "metadata",
           "embedding", "event_time", "valid_from", "valid_to", "supersedes",
           "superseded_by", "confidence", "helpful", "unhelpful", "feedback", "namespace",
           "ttl_ms", "expires_at", "speaker", "session", "position")
assert FactRecord.__struct_fields__ == _FIELDS, FactRecord.__struct_fields__


def fact_records(view: View, slots: Sequence[int], at: int, known_at: int | None = None,
                 statuses: Sequence[str] | None = None) -> list[FactRecord]:
    """:func:`fact_record` of each of ``slots`` (the same records); ``statuses``: their
    statuses at ``at`` (knowing what was ingested by ``known_at``) when the caller has
    them. The text records are read together (:meth:`View.records_of`), each column
    in one gather (none for a column the store leaves unset everywhere), and the
    tables only for the facts that are in them."""
    facts = view.facts
    at_slots = np.asarray(slots, dtype=np.intp)
    if statuses is None:
        statuses = [STATUSES[c] for c in facts.status_codes(at_slots, at, known_at).tolist()]
    recs = view.records_of(slots)
    is_fact = facts.is_fact.view()[at_slots].tolist()
    ingest = facts.ingest.view()[at_slots].tolist()
    events = facts.event.view()[at_slots].tolist()
    names, ns_names, ids = facts.subject_names, facts.namespaces.names, view.catalog.ids
    rooted = len(ns_names) == 1 and not ns_names[0]
    load = validate.load_metadata
    if rooted and not names and not facts.windows and not view.embedding_dim and not (
            facts.ttl or facts.feedback or facts.confidence or facts.turns.of
            or facts.supersedes or facts.superseded_by):
        # A store with no namespace, subject, window, vector or table entry (what
        # recall's identity rule covers): each record from its text and two columns.
        return [FactRecord(ids[slot] or "", rec.text, ingested, status,
                           None, list(rec.entities),
                           load(rec.metadata) if rec.metadata else None, None,
                           None if event == UNSET else event)
                if fact else
                FactRecord(ids[slot] or "", rec.text, 0, "current", None, list(rec.entities),
                           load(rec.metadata) if rec.metadata else None)
                for slot, status, rec, fact, ingested, event
                in zip(slots, statuses, recs, is_fact, ingest, events, strict=True)]
    unset = [UNSET] * len(slots)
    # No live fact with a window: every valid_from and valid_to is unset. No subject
    # ever named: none has one. Only the root namespace: every fact is there.
    starts = facts.valid_from.view()[at_slots].tolist() if facts.windows else unset
    ends = facts.valid_to.view()[at_slots].tolist() if facts.windows else unset
    subjects = facts.subject.view()[at_slots].tolist() if names else [-1] * len(slots)
    spaces = facts.namespaces.of_slot.view()[at_slots].tolist() if not rooted else None
    # The tables few stores fill are looked at only when they hold something.
    ttl = facts.ttl or None
    feedback = facts.feedback or None
    confidence = facts.confidence or None
    turns = facts.turns.of or None
    # The link tables, looked at only for the facts they hold.
    preds = facts.supersedes or None
    succs = facts.superseded_by or None
    vectors = view.embeddings if view.embedding_dim else None
    # Nothing in any table (the usual store): FactRecord's defaults are the answer.
    bare = (ttl is None and feedback is None and confidence is None and turns is None
            and preds is None and succs is None)
    out = []
    for i, (slot, status, rec) in enumerate(zip(slots, statuses, recs, strict=True)):
        fid = ids[slot] or ""
        metadata = load(rec.metadata) if rec.metadata else None
        vec = vectors.vector(slot) if vectors is not None else None
        embedding = vec.tolist() if vec is not None else None
        if not is_fact[i]:
            out.append(FactRecord(fid, rec.text, 0, "current", None, list(rec.entities),
                                  metadata, embedding))
            continue
        sid, ingested = subjects[i], ingest[i]
        subject = names[sid] if sid >= 0 else None
        event, start, end = events[i], starts[i], ends[i]
        if spaces is None:
            namespace = []
        else:
            nid = spaces[i]
            namespace = list(ns_names[nid]) if nid >= 0 else []
        if bare and not namespace:  # (the other fields' defaults are the answer)
            out.append(FactRecord(
                fid, rec.text, ingested, status,  # type: ignore[arg-type]
                subject, list(rec.entities), metadata, embedding,
                None if event == UNSET else event, None if start == UNSET else start,
                None if end == UNSET else end))
            continue
        trust = facts.confidence_known(fid, known_at) if confidence is not None else 1.0
        fb = facts.feedback_known(fid, known_at) if feedback is not None else None
        ttl_ms = ttl.get(fid) if ttl is not None else None
        turn = (turns.get(fid) or NO_TURN) if turns is not None else NO_TURN
        out.append(FactRecord(
            fid, rec.text, ingested, status,  # type: ignore[arg-type]
            subject, list(rec.entities), metadata, embedding,
            None if event == UNSET else event, None if start == UNSET else start,
            None if end == UNSET else end,
            facts.predecessors(fid, known_at) if preds is not None and fid in preds else [],
            facts.successors(fid, known_at) if succs is not None and fid in succs else [],
            trust,
            sum(1 for h, _, _ in fb if h) if fb else 0,
            sum(1 for h, _, _ in fb if not h) if fb else 0,
            [FeedbackEntry(helpful=h, time=tm, note=n) for h, tm, n in fb] if fb else [],
            namespace, ttl_ms, ingested + ttl_ms if ttl_ms is not None else None,
            turn.speaker, turn.session, turn.position))
    return out


def _known(view: View, slot: int, known_at: int | None) -> bool:
    """Whether the document in ``slot`` was ingested by ``known_at`` (a plain
    document, which has no ingest time, always is)."""
    return not view.facts.is_fact[slot] or view.facts.known(slot, known_at)


def get(view: View, fact_id: str, at: int, known_at: int | None = None) -> FactRecord | None:
    slot = view.slot(fact_id)
    if slot < 0 or not _known(view, slot, known_at):
        return None
    return fact_record(view, slot, at, known_at)


def history(view: View, fact_id: str, at: int, known_at: int | None = None
            ) -> list[FactRecord]:
    """Every version of ``fact_id``'s supersession chain, in effect order; with
    ``known_at``, those ingested by then.

    Errors: ``not_found`` (also a fact ingested after ``known_at``).
    """
    slot = view.slot(fact_id)
    if slot < 0 or not _known(view, slot, known_at):
        raise NotFoundError(f"no fact {fact_id!r}")
    chain = view.facts.chain(fact_id) or [fact_id]
    slots = [view.slot(i) for i in chain]
    return [fact_record(view, s, at, known_at) for s in slots if _known(view, s, known_at)]
