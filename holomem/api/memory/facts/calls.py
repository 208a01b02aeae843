"""The calls about stored facts one at a time or a page at a time: get, history, info,
list, list_namespaces, feedback and set_confidence (docs/contract.md §4).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Reads answer from one view through :mod:`.records` and :mod:`.listing`; feedback and
confidence are one event each, planned under the write lock.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from holomem.api.engine import View, validate
from holomem.api.memory.facts import listing, records
from holomem.api.memory.policies import feedback_balance, usefulness_multiplier
from holomem.api.memory.session import Session
from holomem.api.memory.types import (
    FactRecord,
    FeedbackReport,
    ListFilter,
    ListPage,
    MemoryInfo,
    NamespacePage,
)
from holomem.errors import InvalidError, NotFoundError
from holomem.events import ConfidenceSet, Event, FeedbackGiven


def _moment(s: Session, as_of: Any, known_at: Any) -> tuple[int, int | None]:
    """The evaluation time (``as_of``, default now) and ``known_at``, checked."""
    at = validate.to_ms(as_of, "as_of")
    return (s.now_ms() if at is None else at), validate.to_ms(known_at, "known_at")


def get(s: Session, /, id: str, as_of: Any = None,
        known_at: Any = None) -> FactRecord | None:
    """One stored fact, with its status at ``as_of`` (default now), or None; with
    ``known_at``, as it was known then (None if it was ingested later).
    Errors: ``invalid_request``."""
    fid = validate.doc_id(id)
    at, known = _moment(s, as_of, known_at)
    return s.store.read(lambda view: records.get(view, fid, at, known))


def history(s: Session, /, id: str, as_of: Any = None,
            known_at: Any = None) -> builtins.list[FactRecord]:
    """Every version of ``id``'s supersession chain, in effect order, statuses at
    ``as_of`` (default now); with ``known_at``, only the versions ingested by then.

    Errors: ``invalid_request``, ``not_found`` (also a fact ingested after ``known_at``).
    """
    fid = validate.doc_id(id)
    at, known = _moment(s, as_of, known_at)
    return s.store.read(lambda view: records.history(view, fid, at, known))


def info(s: Session, /) -> MemoryInfo:
    """The store's facts and namespaces (counts), the embedder identity it pinned,
    a re-embed under way, and the configuration this Memory applies."""
    def read(view: View) -> MemoryInfo:
        state = view.state
        return MemoryInfo(
            facts=view.facts.facts, namespaces=len(view.facts.namespaces.counts(())),
            embedder=msgspec.json.decode(state.embedder) if state.embedder else None,
            reembed_pending=(msgspec.json.decode(state.reembed_target)
                             if state.reembed_target else None),
            config=s.config)

    return s.store.read(read)


def list_facts(s: Session, /, cursor: str | None = None, limit: int = 100,
         filter: ListFilter | Mapping[str, Any] | None = None,
         history: str = "all", namespace: Sequence[str] | None = None,
         as_of: Any = None, known_at: Any = None) -> ListPage:
    """Every stored fact with its status, in write order, a page at a time.

    ``as_of`` evaluates every status (and the status filter) at that time instead of
    now; ``known_at`` leaves out the facts ingested after it and reads statuses and
    links as they were known then.

    Exhaustive and stable: a walk interleaved with writes sees every fact exactly
    once. Limits: ``limit`` <= ``listing.MAX_LIMIT``; a page examines at most
    ``listing.MAX_SCAN`` facts, so a sparse status filter may give a short page
    with a cursor. ``namespace``: only facts at or under that prefix.
    Errors: ``invalid_request``, ``limit``.
    """
    req = listing.request(cursor, limit, filter, history, namespace)
    at, known = _moment(s, as_of, known_at)
    return s.store.read(lambda view: listing.page(view, req, at, known))


def list_namespaces(s: Session, /, prefix: Sequence[str] | None = None,
                    max_depth: int | None = None, limit: int = 100,
                    cursor: str | None = None) -> NamespacePage:
    """The namespaces at or under ``prefix`` that hold facts, with their fact counts,
    sorted, a page at a time (docs/contract.md §4a); ``max_depth`` cuts each namespace to its
    first ``max_depth`` strings. Errors: ``invalid_request``, ``limit``."""
    return s.store.read(lambda view: listing.namespace_page(view, prefix, max_depth,
                                                               limit, cursor))


def feedback(s: Session, /, id: str, helpful: bool, note: str | None = None) -> FeedbackReport:
    """Record whether a fact helped. It changes the fact's usefulness (used by recall
    only under a feedback policy), never its confidence, and never hides it.

    The report gives the votes, ``usefulness`` (their balance, (helpful -
    unhelpful) / (n + 2), in (-1, 1): not a multiplier) and ``multiplier``, what
    recall now multiplies the fact's score by (1 without a feedback policy).
    Limits: ``note`` as a fact's text. Errors: ``invalid_request``, ``not_found``.
    """
    fid = validate.doc_id(id)
    if not isinstance(helpful, bool):
        raise InvalidError("helpful must be true or false")
    if note is not None:
        validate.text(note, "note")
        if not note.strip():
            raise InvalidError("note must not be empty or only whitespace (leave it out)")

    def build(view: View) -> builtins.list[Event]:
        if view.facts.slot(fid) < 0:
            raise NotFoundError(f"no fact {fid!r}")
        return [FeedbackGiven(id=fid, helpful=helpful, time=s.now_ms(), note=note)]

    seq, _ = s.store.commit(build)
    s.notify("feedback", [fid], seq)

    def report(view: View) -> FeedbackReport:
        fb = view.facts.feedback.get(fid, [])
        good = sum(1 for h, _, _ in fb if h)
        return FeedbackReport(
            id=fid, helpful=good, unhelpful=len(fb) - good,
            usefulness=feedback_balance(good, len(fb)),
            multiplier=usefulness_multiplier(s.policies.feedback_weight, good, len(fb)))

    return s.store.read(report)


def set_confidence(s: Session, /, id: str, confidence: float) -> FactRecord:
    """Set what the agent believes of a fact, in [0, 1].

    Errors: ``invalid_request``, ``not_found``."""
    fid = validate.doc_id(id)
    value = validate.confidence(confidence)

    def build(view: View) -> builtins.list[Event]:
        if view.facts.slot(fid) < 0:
            raise NotFoundError(f"no fact {fid!r}")
        return [ConfidenceSet(id=fid, confidence=value, time=s.now_ms())]

    s.store.commit(build)
    now = s.now_ms()
    record = s.store.read(lambda view: records.get(view, fid, now))
    if record is None:  # (forgotten by another writer as soon as it was set)
        raise NotFoundError(f"no fact {fid!r}: it was forgotten after its confidence was set")
    return record
