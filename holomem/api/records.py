"""Fact records: what a stored fact looks like to a caller, built once from a view.

Owns: :func:`fact_record` (every RememberInput field as stored, its ingest time,
status at an evaluation time and the links that hold — everything recall, get,
history, list and the contract return), the ``history`` filter on a status
(:func:`wanted`), and ``get``/``history`` over a view. Imports the engine's view
and the memory API's types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from holomem.api import validate
from holomem.api.engine import View
from holomem.api.types import FactRecord, FeedbackEntry
from holomem.errors import NotFoundError
from holomem.projections.facts import CURRENT, STATUSES, UNSET


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
    fb = facts.feedback.get(fid, [])
    return FactRecord(
        id=fid, text=rec.text, ingest_time=t.ingest_time,
        status=facts.status(slot, at, known_at),  # type: ignore[arg-type]
        subject=t.subject, entities=list(rec.entities), metadata=meta, embedding=emb,
        event_time=t.event_time, valid_from=t.valid_from, valid_to=t.valid_to,
        supersedes=facts.predecessors(fid, known_at),
        superseded_by=facts.successors(fid, known_at),
        confidence=facts.confidence.get(fid, 1.0),
        helpful=sum(1 for h, _, _ in fb if h), unhelpful=sum(1 for h, _, _ in fb if not h),
        feedback=[FeedbackEntry(helpful=h, time=tm, note=n) for h, tm, n in fb],
        namespace=list(facts.namespace(slot)), ttl_ms=t.ttl_ms,
        expires_at=t.ingest_time + t.ttl_ms if t.ttl_ms is not None else None)


def fact_records(view: View, slots: Sequence[int], at: int, known_at: int | None = None,
                 statuses: Sequence[str] | None = None) -> list[FactRecord]:
    """:func:`fact_record` of each of ``slots`` (the same records); ``statuses``: their
    statuses at ``at`` (knowing what was ingested by ``known_at``) when the caller has
    them. The tables are read only for the facts that are in them."""
    facts = view.facts
    if statuses is None:
        statuses = [STATUSES[c] for c in facts.status_codes(
            np.asarray(slots, dtype=np.int64), at, known_at).tolist()]
    # A few slots (recall's k): one element at a time costs less than a numpy gather.
    is_fact, ingest, event = facts.is_fact.view(), facts.ingest.view(), facts.event.view()
    valid_from, valid_to = facts.valid_from.view(), facts.valid_to.view()
    subject = facts.subject.view()
    names, ids = facts.subject_names, view.catalog.ids
    ttl, feedback, confidence = facts.ttl, facts.feedback, facts.confidence
    linked = bool(facts.supersedes)
    vectors = view.embeddings
    namespace = facts.namespaces.namespace
    out = []
    for slot, status in zip(slots, statuses, strict=True):
        fid = ids[slot] or ""
        rec = view.record(slot)
        # Only the fields that differ from FactRecord's defaults are passed: a Struct's
        # keyword arguments cost by the number given (the record is the same).
        kw: dict[str, Any] = {}
        if rec.entities:
            kw["entities"] = list(rec.entities)
        if rec.metadata:
            kw["metadata"] = validate.load_metadata(rec.metadata)
        vec = vectors.vector(slot)
        if vec is not None:
            kw["embedding"] = vec.tolist()
        if not is_fact.item(slot):
            out.append(FactRecord(id=fid, text=rec.text, ingest_time=0, status="current",
                                  **kw))
            continue
        sid = subject.item(slot)
        if sid >= 0:
            kw["subject"] = names[sid]
        for name, column in (("event_time", event), ("valid_from", valid_from),
                             ("valid_to", valid_to)):
            value = column.item(slot)
            if value != UNSET:
                kw[name] = value
        if linked:
            kw["supersedes"] = facts.predecessors(fid, known_at)
            kw["superseded_by"] = facts.successors(fid, known_at)
        trust = confidence.get(fid)
        if trust is not None:
            kw["confidence"] = trust
        fb = feedback.get(fid)
        if fb:
            kw["helpful"] = sum(1 for h, _, _ in fb if h)
            kw["unhelpful"] = sum(1 for h, _, _ in fb if not h)
            kw["feedback"] = [FeedbackEntry(helpful=h, time=tm, note=n) for h, tm, n in fb]
        ns = namespace(slot)
        if ns:
            kw["namespace"] = list(ns)
        ingested = ingest.item(slot)
        ttl_ms = ttl.get(fid)
        if ttl_ms is not None:
            kw["ttl_ms"] = ttl_ms
            kw["expires_at"] = ingested + ttl_ms
        out.append(FactRecord(id=fid, text=rec.text, ingest_time=ingested,
                              status=status, **kw))  # type: ignore[arg-type]
    return out


def get(view: View, fact_id: str, at: int) -> FactRecord | None:
    slot = view.slot(fact_id)
    return None if slot < 0 else fact_record(view, slot, at)


def history(view: View, fact_id: str, at: int) -> list[FactRecord]:
    """Every version of ``fact_id``'s supersession chain, in effect order.

    Errors: ``not_found``.
    """
    if view.slot(fact_id) < 0:
        raise NotFoundError(f"no fact {fact_id!r}")
    chain = view.facts.chain(fact_id) or [fact_id]
    return [fact_record(view, view.slot(i), at) for i in chain]
