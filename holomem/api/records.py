"""Fact records: what a stored fact looks like to a caller, built once from a view.

Owns: :func:`fact_record` (every RememberInput field as stored, its ingest time,
status at an evaluation time and the links that hold — everything recall, get,
history, list and the contract return), the ``history`` filter on a status
(:func:`wanted`), and ``get``/``history`` over a view. Imports the engine's view
and the memory API's types.
"""

from __future__ import annotations

from holomem.api import validate
from holomem.api.engine import View
from holomem.api.types import FactRecord, FeedbackEntry
from holomem.errors import NotFoundError
from holomem.projections.facts import CURRENT


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
