"""Forgetting (docs/contract.md §4 Forget): which facts go, and how the survivors are re-linked.

Owns: the forget scope and its checks, which facts a scope selects (:func:`select`),
chains, the re-links around removed facts (:func:`relinks`), the events of one
removal batch (:func:`removal`), and the built-in forgetting policy's selection
(:func:`candidates`). ``Memory.forget`` runs the batches and the purge. Imports
the engine's view, the projections, the types and validate.

A removal is one transaction per :data:`BATCH` facts: the documents are deleted
(their text-segment records are zeroed) and a ``FactsForgotten`` event re-links
each surviving successor of a removed fact to the removed fact's surviving
predecessors, so removing a middle version never resurrects an older one. Each
batch's re-links are computed against what is stored when it commits, so every
prefix of a cut-short forget is itself consistent, and repeating the call
finishes it. With a purge, the purge request rides in the first batch's own
transaction, so no crash leaves the removal durable and its purge forgotten.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sized
from typing import Any, NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.config import ForgettingConfig
from holomem.api.memory.graph import relations
from holomem.api.memory.types import ForgetOptions, ForgetScope, Relink
from holomem.errors import InvalidError, LimitError
from holomem.events import DocumentDeleted, Event, FactsForgotten
from holomem.projections.facts import FactIndex
from holomem.projections.namespaces import Namespace
from holomem.projections.temporal import UNSET

BATCH = 4096
#: Ids in one forget scope.
MAX_IDS = validate.MAX_IDS


#: The fields of a forget scope, exactly one of which a scope sets.
_SCOPE_FIELDS = ("ids", "subject", "entity", "ingested_before", "event_before", "metadata",
                 "namespace")


def scope(value: ForgetScope | Mapping[str, Any]) -> ForgetScope:
    """A checked forget scope from a ForgetScope or a dict."""
    ids = (value.ids if isinstance(value, ForgetScope)
           else value.get("ids") if isinstance(value, Mapping) else None)
    if isinstance(ids, Sized) and len(ids) > MAX_IDS:
        raise LimitError(f"a forget scope names at most {MAX_IDS} ids; got {len(ids)}")
    sc = validate.to_struct(ForgetScope, value, {}, "forget scope",
                            ("ingested_before", "event_before"))
    scope_field(sc)
    return sc


def scope_field(scope: ForgetScope) -> str:
    """The one field of ``scope`` that is set, its value checked; ``invalid`` unless
    exactly one is."""
    given = [f for f in _SCOPE_FIELDS if getattr(scope, f) is not None]
    if len(given) != 1:
        raise InvalidError(f"a forget scope needs exactly one of {', '.join(_SCOPE_FIELDS)}; "
                           f"got {', '.join(given) or 'none'}")
    field = given[0]
    if field == "ids":
        validate.id_list(scope.ids)
    elif field in ("subject", "entity"):
        validate.doc_id(getattr(scope, field), field)
    elif field == "metadata":
        validate.metadata(scope.metadata)
        if not scope.metadata:
            raise InvalidError("a metadata scope needs at least one key")
    elif field == "namespace":
        validate.namespace(scope.namespace, "scope.namespace")
    return field


def options(value: ForgetOptions | Mapping[str, Any] | None,
            fields: Mapping[str, Any]) -> ForgetOptions:
    return validate.to_struct(ForgetOptions, value, fields, "forget options")


def live_facts(view: View, prefix: Namespace = ()) -> np.ndarray:
    """Slots of every stored fact at or under ``prefix``, in write order."""
    if prefix:
        return view.facts.namespaces.slots(prefix)
    return np.flatnonzero(view.facts.is_fact.view() & view.catalog.alive.view())


def select(view: View, scope: ForgetScope, within: Namespace = ()) -> list[str]:
    """Ids of live documents the scope matches, in write order; with ``within``, only
    facts at or under that namespace prefix."""
    field = scope_field(scope)
    facts, cat = view.facts, view.catalog
    if field == "namespace":
        slots = [int(s) for s in live_facts(view, validate.namespace(scope.namespace))]
    elif field == "ids":
        slots = sorted({cat.slot(i) for i in scope.ids or ()} - {-1})
    elif field == "subject":
        slots = sorted(facts.slot(i) for i in facts.subjects(scope.subject or ""))
    elif field == "entity":
        slots = [int(s) for s in view.entities.slots(scope.entity or "")]
    elif field in ("ingested_before", "event_before"):
        live = live_facts(view)
        col = (facts.ingest if field == "ingested_before" else facts.event).view()[live]
        bound = scope.ingested_before if field == "ingested_before" else scope.event_before
        assert bound is not None
        slots = [int(s) for s in live[(col != UNSET) & (col < bound)]]
    else:  # metadata: the filter grammar's metadata object (a plain value is $eq)
        where = filters.compile_filter({"metadata": scope.metadata}, "scope")
        assert where is not None
        slots = [int(s) for s in np.flatnonzero(filters.evaluate(view, where))]
    if within:
        keep = set(live_facts(view, within).tolist())
        slots = [s for s in slots if s in keep]
    return [cat.ids[s] or "" for s in slots]


def with_chains(facts: FactIndex, ids: Iterable[str]) -> list[str]:
    """``ids`` and every fact connected to one of them by supersession, both ways."""
    out: dict[str, None] = {}
    for fid in ids:
        if fid in out:
            continue  # in the chain of an earlier id: its chain is already in
        out[fid] = None
        for other in facts.chain(fid):
            out[other] = None
    return list(out)


def relinks(facts: FactIndex, removed: set[str]) -> list[tuple[str, str, int]]:
    """(successor, predecessor, known_at) links that must hold once ``removed`` are gone."""
    out: dict[tuple[str, str], int] = {}
    for r in removed:
        preds = _surviving_predecessors(facts, r, removed)
        for link in facts.superseded_by.get(r, ()):
            if link.other in removed:
                continue
            for p in preds:
                key = (link.other, p)
                if key not in out and p not in facts.predecessors(link.other):
                    out[key] = link.known_at
    return [(s, p, k) for (s, p), k in sorted(out.items())]


def _surviving_predecessors(facts: FactIndex, fid: str, removed: set[str]) -> list[str]:
    found: list[str] = []
    seen = {fid}
    todo = [fid]
    while todo:
        for link in facts.supersedes.get(todo.pop(), ()):
            p = link.other
            if p in seen:
                continue
            seen.add(p)
            if p in removed:
                todo.append(p)
            else:
                found.append(p)
    return found


class Plan(NamedTuple):
    """What a forget would remove, and the links that would be re-pointed."""

    ids: list[str]
    relinks: list[Relink]
    #: links between facts (relate) that would go with them
    unlinked: int = 0


def plan(view: View, sc: ForgetScope, include_chain: bool, within: Namespace = ()) -> Plan:
    ids = select(view, sc, within)
    if include_chain:
        ids = with_chains(view.facts, ids)
    return Plan(ids, [Relink(successor=s, predecessor=p)
                      for s, p, _ in relinks(view.facts, set(ids))],
                relations.touching(view, ids))


class Removal(NamedTuple):
    """The events of one removal batch, and what they remove and re-link."""

    events: list[Event]
    removed: list[str]
    relinked: list[Relink]
    #: links between facts (relate) removed with them
    unlinked: int = 0


def removal(view: View, batch: list[str], now: int, *, purge: bool) -> Removal:
    """The events removing what of ``batch`` is still stored (a ``commit`` build)."""
    done = [i for i in batch if i in view.catalog]
    if not done:
        return Removal([], [], [])
    links = relinks(view.facts, set(done))
    events: list[Event] = [DocumentDeleted(id=i) for i in done]
    events.append(FactsForgotten(ids=tuple(done), time=now, relinks=tuple(links)))
    if purge:  # in the removal's own transaction: a crash cannot split them
        events.extend(view.purge_request())
    return Removal(events, done, [Relink(successor=s, predecessor=p) for s, p, _ in links],
                   relations.touching(view, done))


#: The built-in forgetting policies a configuration names.
BUILTIN = {"expired-ttl": ForgettingConfig(expired_ttl=True)}


def builtin(value: object) -> object:
    """The forgetting configuration a name stands for (anything else as given)."""
    return BUILTIN.get(value, value) if isinstance(value, str) else value


def candidates(view: View, cfg: ForgettingConfig, now: int, prefix: Namespace = ()
               ) -> list[str]:
    """What the built-in forgetting policy selects at ``now`` (at or under ``prefix``)."""
    facts = view.facts
    out: list[str] = []
    for s in live_facts(view, prefix):
        slot = int(s)
        if cfg.expired_ttl:
            fid = view.id_of(slot)
            ttl = facts.ttl.get(fid)
            if ttl is not None and now >= facts.ingest.item(slot) + ttl:
                out.append(fid)
                continue
        # Expired by its valid_to or by its time to live, whichever ends it first
        # (§3: a TTL ends a fact exactly as a valid_to would).
        end = facts.end.item(slot)
        if (cfg.expired_for_longer_than_ms is not None and end != UNSET
                and now - end > cfg.expired_for_longer_than_ms):
            out.append(view.id_of(slot))
            continue
        if cfg.superseded_for_longer_than_ms is not None:
            since = facts.superseded_since(slot)
            if since is not None and since <= now and (
                    now - since > cfg.superseded_for_longer_than_ms):
                out.append(view.id_of(slot))
    return out
