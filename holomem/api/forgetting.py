"""Forgetting and maintenance: forget, apply_forgetting and consolidate (SPEC §4).

Owns: which facts a forget scope selects, how supersession links are re-pointed
around removed facts, the batching of removals, and the built-in forgetting and
consolidation policies. Imports the API layer.

A removal is one transaction per :data:`BATCH` facts: the documents are deleted
(their text-segment records are zeroed) and a ``FactsForgotten`` event re-links
each surviving successor of a removed fact to the removed fact's surviving
predecessors, so removing a middle version never resurrects an older one. Each
batch's re-links are computed against what is stored when it commits, so every
prefix of a cut-short forget is itself consistent, and repeating the call
finishes it. The text segment is synced before ``forget`` returns.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from holomem.api import validate
from holomem.api.documents import _State
from holomem.api.types import (
    ConsolidateOptions,
    ConsolidationConfig,
    ConsolidationGroup,
    ConsolidationReport,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    ForgettingConfig,
    MaintenanceOptions,
    Relink,
    RememberInput,
)
from holomem.errors import InvalidError
from holomem.events import DocumentDeleted, Event, FactsForgotten
from holomem.projections.facts import CURRENT, UNSET, FactIndex
from holomem.projections.tokenize import tokenize

if TYPE_CHECKING:
    from holomem.api.memory import Memory

BATCH = 4096
_SCOPE_FIELDS = ("ids", "subject", "entity", "ingested_before", "event_before", "metadata")


def check_scope(scope: ForgetScope) -> str:
    """The one scope field that is set; ``invalid`` unless exactly one is."""
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
    return field


def _live_facts(facts: FactIndex, st: _State) -> np.ndarray:
    return np.flatnonzero(facts.is_fact.view() & st.catalog.alive.view())


def select(memory: Memory, st: _State, scope: ForgetScope) -> list[str]:
    """Ids of live documents the scope matches, in write order."""
    field = check_scope(scope)
    facts, cat = st.facts, st.catalog
    if field == "ids":
        slots = sorted({cat.slot(i) for i in scope.ids or ()} - {-1})
    elif field == "subject":
        slots = sorted(facts.slot(i) for i in facts.subject_members(scope.subject or ""))
    elif field == "entity":
        slots = [int(s) for s in st.entities.slots(scope.entity or "")]
    elif field in ("ingested_before", "event_before"):
        live = _live_facts(facts, st)
        col = (facts.ingest if field == "ingested_before" else facts.event).view()[live]
        bound = scope.ingested_before if field == "ingested_before" else scope.event_before
        assert bound is not None
        slots = [int(s) for s in live[(col != UNSET) & (col < bound)]]
    else:
        wanted = dict(scope.metadata or {})
        slots = []
        for s in np.flatnonzero(cat.alive.view()):
            meta = validate.load_metadata(memory.store._record(st, int(s)).metadata) or {}
            if all(k in meta and _same_json(meta[k], v) for k, v in wanted.items()):
                slots.append(int(s))
    return [cat.ids[s] or "" for s in slots]


def _same_json(a: object, b: object) -> bool:
    """Equal as JSON values: ``true`` is not ``1`` (Python's ``True == 1`` is)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(_same_json, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(v, b[k]) for k, v in a.items())
    return a == b


def with_chains(facts: FactIndex, ids: Iterable[str]) -> list[str]:
    out: dict[str, None] = {}
    for fid in ids:
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


def forget(memory: Memory, scope: ForgetScope | Mapping[str, Any],
           options: ForgetOptions | Mapping[str, Any] | None, fields: Mapping[str, Any]
           ) -> ForgetReport:
    from holomem.api.memory import _struct

    sc: ForgetScope = _struct(ForgetScope, scope, {}, "forget scope",
                              ("ingested_before", "event_before"))
    opts: ForgetOptions = _struct(ForgetOptions, options, fields, "forget options", ())
    check_scope(sc)
    store = memory.store
    with store.reading() as st:
        ids = select(memory, st, sc)
        if opts.include_chain:
            ids = with_chains(st.facts, ids)
        planned = relinks(st.facts, set(ids))
    if opts.dry_run:
        return ForgetReport(removed=ids, relinked=[Relink(successor=s, predecessor=p)
                                                   for s, p, _ in planned],
                            dry_run=True, purged=False)
    return remove(memory, ids, purge=opts.purge)


def remove(memory: Memory, ids: list[str], *, purge: bool) -> ForgetReport:
    """Delete ``ids`` in batches of :data:`BATCH`, re-linking around them."""
    store = memory.store
    removed: list[str] = []
    relinked: list[Relink] = []
    last = 0
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        done: list[str] = []
        links: list[tuple[str, str, int]] = []

        def build(batch: list[str] = batch, done: list[str] = done,
                  links: list[tuple[str, str, int]] = links) -> list[Event]:
            st = store._state
            done[:] = [i for i in batch if i in st.catalog]
            if not done:
                return []
            links[:] = relinks(st.facts, set(done))
            events: list[Event] = [DocumentDeleted(id=i) for i in done]
            events.append(FactsForgotten(ids=tuple(done), time=memory.clock.now_ms(),
                                         relinks=tuple(links)))
            if purge:  # in the removal's own transaction: a crash cannot split them
                events.extend(store.purge_request())
            return events

        seq, _ = store.commit(build)
        if seq:
            last = seq
            removed.extend(done)
            relinked.extend(Relink(successor=s, predecessor=p) for s, p, _ in links)
    if removed:
        store.sync_text()  # the zeroed records reach the disk before we return
        memory._notify("forget", removed, last)
    if purge:
        store.compact(purge=True)
    return ForgetReport(removed=removed, relinked=relinked, dry_run=False, purged=purge)


# -- maintenance -----------------------------------------------------------------------------
def forgetting_candidates(memory: Memory, now: int) -> list[str]:
    """What the configured forgetting policy selects (nothing by default)."""
    if memory._forgetting is not None:
        return list(memory._forgetting(memory, now))
    cfg = memory.config.forgetting
    if not isinstance(cfg, ForgettingConfig):
        return []
    out: list[str] = []
    with memory.store.reading() as st:
        facts = st.facts
        for s in _live_facts(facts, st):
            slot = int(s)
            vto = int(facts.valid_to[slot])
            if (cfg.expired_for_longer_than_ms is not None and vto != UNSET
                    and now - vto > cfg.expired_for_longer_than_ms):
                out.append(st.catalog.ids[slot] or "")
                continue
            if cfg.superseded_for_longer_than_ms is not None:
                since = facts.superseded_since(slot)
                if since is not None and since <= now and (
                        now - since > cfg.superseded_for_longer_than_ms):
                    out.append(st.catalog.ids[slot] or "")
    return out


def apply_forgetting(memory: Memory, options: MaintenanceOptions | Mapping[str, Any] | None,
                     fields: Mapping[str, Any]) -> ForgetReport:
    from holomem.api.memory import _struct

    opts: MaintenanceOptions = _struct(MaintenanceOptions, options, fields,
                                       "apply_forgetting options", ())
    ids = forgetting_candidates(memory, memory.clock.now_ms())
    if not ids:
        return ForgetReport(removed=[], relinked=[], dry_run=opts.dry_run, purged=False)
    return forget(memory, ForgetScope(ids=ids),
                  ForgetOptions(include_chain=opts.include_chain, dry_run=opts.dry_run,
                                purge=opts.purge), {})


def duplicate_groups(memory: Memory, near_threshold: float) -> list[tuple[list[str], str]]:
    """Groups of current facts that say the same thing: same subject, and the same
    words (exact), or word sets at least ``near_threshold`` alike (Jaccard)."""
    now = memory.clock.now_ms()
    with memory.store.reading() as st:
        facts = st.facts
        items: list[tuple[str, str | None, frozenset[str], tuple[str, ...], str]] = []
        for s in _live_facts(facts, st):
            slot = int(s)
            if facts.status(slot, now) != CURRENT:
                continue
            text = memory.store._record(st, slot).text
            words = tuple(tokenize(text))
            items.append((st.catalog.ids[slot] or "", facts.times(slot).subject,
                          frozenset(words), words, text))
        parent = list(range(len(items)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        exact: dict[tuple[str | None, tuple[str, ...]], int] = {}
        for i, (_, subject, _, words, _) in enumerate(items):
            j = exact.setdefault((subject, words), i)
            parent[find(i)] = find(j)
        if near_threshold < 1.0:
            for i, j in near_duplicate_pairs([(it[1], it[2]) for it in items], near_threshold):
                parent[find(i)] = find(j)
        groups: dict[int, list[int]] = {}
        for i in range(len(items)):
            groups.setdefault(find(i), []).append(i)
        out = []
        for members in groups.values():
            if len(members) < 2:
                continue
            ids = sorted((items[i][0] for i in members), key=facts.order_key)
            out.append((ids, next(items[i][4] for i in members if items[i][0] == ids[-1])))
        return sorted(out)


def near_duplicate_pairs(sets: list[tuple[str | None, frozenset[str]]], threshold: float
                ) -> list[tuple[int, int]]:
    """Pairs (i, j) of the same subject whose non-empty word sets have a Jaccard of at
    least ``threshold`` — exactly the pairs an all-pairs comparison finds, without
    comparing every pair (a prefix-filtered set-similarity join).

    Each set's words are ordered rarest first; two sets with a Jaccard of at least t
    share a word among the first ``|x| - floor(t |x|) + 1`` of each (otherwise more
    than (1 - t) of one set would lie outside the other). Only pairs that share such
    a word are compared, exactly.
    """
    if threshold <= 0.0:  # every pair of non-empty sets of one subject qualifies
        firsts: dict[str | None, int] = {}
        out = []
        for i, (subject, words) in enumerate(sets):
            if words:
                j = firsts.setdefault(subject, i)
                if j != i:
                    out.append((j, i))
        return out
    freq: dict[str, int] = {}
    for _, words in sets:
        for w in words:
            freq[w] = freq.get(w, 0) + 1
    index: dict[tuple[str | None, str], list[int]] = {}
    out = []
    for i, (subject, words) in enumerate(sets):
        if not words:
            continue
        ordered = sorted(words, key=lambda w: (freq[w], w))
        # floor(t * |x|), nudged down against rounding: a longer prefix is always safe.
        prefix = min(len(ordered), len(ordered) - math.floor(threshold * len(ordered) - 1e-9)
                     + 1)
        seen: set[int] = set()
        for w in ordered[:prefix]:
            for j in index.get((subject, w), ()):
                if j in seen:
                    continue
                seen.add(j)
                other = sets[j][1]
                if len(words & other) / len(words | other) >= threshold:
                    out.append((j, i))
            index.setdefault((subject, w), []).append(i)
    return out


def summary_id(sources: list[str]) -> str:
    return "c-" + hashlib.sha256("\n".join(sorted(sources)).encode()).hexdigest()[:32]


#: Why a consolidation whose policy asks to remove its sources kept them
#: (ConsolidationReport.sources_kept).
KEPT_NOT_ALLOWED = ("removeSources is set, but the call did not pass allow_destructive=True "
                    "(JSON allowDestructive: true): the sources stay, superseded by their "
                    "summaries")


def _split(plan: list[tuple[list[str], str]]) -> list[tuple[list[str], str]]:
    """Groups of at most validate.MAX_IDS sources (the most one fact may supersede)."""
    out = []
    for sources, text in plan:
        for i in range(0, len(sources), validate.MAX_IDS):
            out.append((sources[i : i + validate.MAX_IDS], text))
    return out


def consolidate(memory: Memory, options: ConsolidateOptions | Mapping[str, Any] | None,
                fields: Mapping[str, Any]) -> ConsolidationReport:
    """Plan (and with ``dry_run=False`` write) one summary fact per group of sources.

    Summaries are written in transactions of at most ``MAX_FACTS`` facts; their ids
    derive from their sources, so a run cut short is finished by running it again.
    Sources are removed only when the configuration says ``removeSources`` *and* the
    call passes ``allow_destructive=True``; otherwise ``sources_kept`` says why they
    stayed.
    """
    from holomem.api.memory import MAX_FACTS, _struct

    opts: ConsolidateOptions = _struct(ConsolidateOptions, options, fields,
                                       "consolidate options", ())
    cfg = memory.config.consolidation
    if memory._consolidation is not None:
        plan = list(memory._consolidation(memory, memory.clock.now_ms()))
    elif isinstance(cfg, ConsolidationConfig):
        plan = duplicate_groups(memory, cfg.duplicates.near_threshold)
    else:
        plan = []
    groups = []
    inputs = []
    with memory.store.reading() as st:
        for sources, text in _split(plan):
            sid = summary_id(sources)
            if st.facts.slot(sid) >= 0 or sid in st.catalog:
                continue  # made by an earlier run: nothing to add
            subjects = {st.facts.times(st.facts.slot(s)).subject for s in sources
                        if st.facts.slot(s) >= 0}
            entities: dict[str, None] = {}
            for s in sources:
                slot = st.catalog.slot(s)
                if slot >= 0 and len(entities) < validate.MAX_ENTITIES:
                    entities.update(dict.fromkeys(memory.store._record(st, slot).entities))
            groups.append(ConsolidationGroup(sources=sources, summary_id=sid, text=text))
            inputs.append(RememberInput(
                id=sid, text=text, subject=subjects.pop() if len(subjects) == 1 else None,
                entities=list(entities)[: validate.MAX_ENTITIES] or None, supersedes=sources))
    added: list[str] = []
    removed: list[str] = []
    remove_sources = isinstance(cfg, ConsolidationConfig) and cfg.remove_sources
    if not opts.dry_run and inputs:
        for i in range(0, len(inputs), MAX_FACTS):
            added += [r.id for r in memory.remember_many(inputs[i : i + MAX_FACTS])
                      if r.created]
        if opts.allow_destructive and remove_sources:
            gone = [s for g in groups for s in g.sources]
            removed = remove(memory, gone, purge=False).removed
    # Said in a dry run too: it tells the caller the real run needs the flag.
    kept = KEPT_NOT_ALLOWED if groups and remove_sources and not opts.allow_destructive \
        else None
    return ConsolidationReport(dry_run=opts.dry_run, groups=groups, added=added,
                               removed=removed, sources_kept=kept)
