"""Consolidation (docs/contract.md §4): summary facts that supersede what they summarise.

Owns: the built-in duplicate finder (exact, and near duplicates by a
prefix-filtered set-similarity join, :func:`near_duplicate_pairs`), summary ids,
the sources earlier runs kept (:func:`kept_sources`) and the plan of a run
(:func:`plan`). ``Memory.consolidate`` asks the policy for
groups, remembers the summaries and, only when allowed, removes the sources.
Imports the engine's view, the forgetting module's fact walk, the types and
validate.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.forget.removal import live_facts
from holomem.api.memory.types import ConsolidateOptions, ConsolidationGroup, RememberInput
from holomem.errors import InvalidError
from holomem.projections.namespaces import Namespace
from holomem.projections.temporal import CURRENT, UNSET
from holomem.projections.tokenize import tokenize

#: (source ids in effect order, the summary's text)
Group = tuple[list[str], str]


def duplicate_groups(view: View, now: int, near_threshold: float, prefix: Namespace = ()
                     ) -> list[Group]:
    """Groups of current facts (at or under ``prefix``) that say the same thing: same
    namespace and subject, and the same words (exact), or word sets at least
    ``near_threshold`` alike (Jaccard)."""
    facts = view.facts
    items: list[tuple[str, tuple[Namespace, str | None], frozenset[str], tuple[str, ...],
                      str]] = []
    live = live_facts(view, prefix)
    shown = filters.unreserved(view)  # holomem's own facts are never merged
    if shown is not None:
        live = live[shown[live]]
    for s in live:
        slot = int(s)
        if facts.status(slot, now) != CURRENT:
            continue
        text = view.record(slot).text
        words = tuple(tokenize(text))
        items.append((view.id_of(slot), (facts.namespace(slot), facts.times(slot).subject),
                      frozenset(words), words, text))
    parent = list(range(len(items)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    exact: dict[tuple[tuple[Namespace, str | None], tuple[str, ...]], int] = {}
    for i, (_, subject, _, words, text) in enumerate(items):
        # Texts without a word ("👍", "👎") are the same only when they are equal
        # (no word is empty, so ("", text) is no word list).
        j = exact.setdefault((subject, words or ("", text)), i)
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


def near_duplicate_pairs(sets: Sequence[tuple[Hashable, frozenset[str]]], threshold: float
                         ) -> list[tuple[int, int]]:
    """Pairs (i, j) of the same group key (a subject) whose non-empty word sets have a Jaccard of at
    least ``threshold`` — exactly the pairs an all-pairs comparison finds, without
    comparing every pair (a prefix-filtered set-similarity join).

    Each set's words are ordered rarest first; two sets with a Jaccard of at least t
    share a word among the first ``|x| - floor(t |x|) + 1`` of each (otherwise more
    than (1 - t) of one set would lie outside the other). Only pairs that share such
    a word are compared, exactly.
    """
    if threshold <= 0.0:  # every pair of non-empty sets of one subject qualifies
        firsts: dict[Hashable, int] = {}
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
    index: dict[tuple[Hashable, str], list[int]] = {}
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


#: What every summary id starts with.
SUMMARY_PREFIX = "c-"


def summary_id(sources: list[str]) -> str:
    """The id of the summary of ``sources`` (the same for the same sources)."""
    return SUMMARY_PREFIX + hashlib.sha256("\n".join(sorted(sources)).encode()).hexdigest()[:32]


def kept_sources(view: View, prefix: Namespace = ()) -> list[ConsolidationGroup]:
    """The summaries an earlier run wrote (at or under ``prefix``) whose sources are
    still stored, each as a group of those sources, in the order the summaries were
    written: what a run that may remove its sources removes besides its new groups'.

    A summary is recognised by what consolidation wrote, not by its id alone: its id
    is :func:`summary_id` of the ``supersedes`` list it was remembered with, so a
    caller's fact that supersedes others is never taken for one. Its sources are the
    facts of that list it still supersedes (a fact forgotten since and remembered
    again under its id is another fact) and that lie at or under ``prefix``."""
    facts = view.facts
    found: list[tuple[int, ConsolidationGroup]] = []
    for fid, asked in facts.requested.items():
        if not fid.startswith(SUMMARY_PREFIX) or summary_id(list(asked)) != fid:
            continue
        slot = facts.slot(fid)
        if slot < 0 or facts.namespace(slot)[: len(prefix)] != prefix:
            continue
        linked = {link.other for link in facts.supersedes.get(fid, ())}
        sources = [s for s in asked if s in linked and facts.slot(s) >= 0
                   and facts.namespace(facts.slot(s))[: len(prefix)] == prefix]
        if sources:
            found.append((slot, ConsolidationGroup(sources=sources, summary_id=fid,
                                                   text=view.record(slot).text)))
    return [group for _, group in sorted(found, key=lambda x: x[0])]


#: Why a consolidation whose policy asks to remove its sources kept them
#: (ConsolidationReport.sources_kept).
KEPT_NOT_ALLOWED = ("removeSources is set, but the call did not pass allow_destructive=True "
                    "(JSON allowDestructive: true): the sources stay, superseded by their "
                    "summaries")


def split(groups: list[Group]) -> list[Group]:
    """Groups of at most validate.MAX_IDS sources (the most one fact may supersede)."""
    out = []
    for sources, text in groups:
        for i in range(0, len(sources), validate.MAX_IDS):
            out.append((sources[i : i + validate.MAX_IDS], text))
    return out


class Planned(NamedTuple):
    """A consolidation run: the groups it makes, and the summary facts to remember."""

    groups: list[ConsolidationGroup]
    inputs: list[RememberInput]


def plan(view: View, groups: list[Group], now: int, prefix: Namespace = ()) -> Planned:
    """One summary fact per group of sources not consolidated before (its id derives
    from its sources, so a rerun adds nothing); it supersedes them and lives in their
    namespace. A group with a source outside ``prefix`` is left out; one whose sources
    live in different namespaces is refused (``invalid_request``).

    The summary says no more than its sources: it ends when the last of them ends
    (:func:`ending`) and carries the metadata they all share (:func:`shared_metadata`),
    so an expiry or a forget by metadata that takes the sources takes their summary."""
    facts = view.facts
    made: list[ConsolidationGroup] = []
    inputs: list[RememberInput] = []
    for sources, text in split(groups):
        spaces = {facts.namespace(facts.slot(s)) for s in sources if facts.slot(s) >= 0}
        if len(spaces) > 1:
            raise InvalidError(f"a consolidation group spans namespaces: {sorted(spaces)}")
        ns = spaces.pop() if spaces else ()
        if ns[: len(prefix)] != prefix:
            continue
        sid = summary_id(sources)
        if facts.slot(sid) >= 0 or sid in view.catalog:
            continue  # made by an earlier run: nothing to add
        subjects = {facts.times(facts.slot(s)).subject for s in sources if facts.slot(s) >= 0}
        entities: dict[str, None] = {}
        for s in sources:
            slot = view.slot(s)
            if slot >= 0 and len(entities) < validate.MAX_ENTITIES:
                entities.update(dict.fromkeys(view.record(slot).entities))
        slots = [slot for slot in (facts.slot(s) for s in sources) if slot >= 0]
        valid_to, ttl_ms = ending(view, slots, now)
        made.append(ConsolidationGroup(sources=sources, summary_id=sid, text=text))
        inputs.append(RememberInput(
            id=sid, text=text, subject=subjects.pop() if len(subjects) == 1 else None,
            entities=list(entities)[: validate.MAX_ENTITIES] or None, supersedes=sources,
            namespace=list(ns) or None, metadata=shared_metadata(view, slots),
            valid_to=valid_to, ttl_ms=ttl_ms))
    return Planned(made, inputs)


def ending(view: View, slots: list[int], now: int) -> tuple[int | None, int | None]:
    """(valid_to, ttl_ms) of the summary of the facts at ``slots``: none when one of
    them never ends; else it ends when the last of them does (``valid_to``), and when
    that end is a time to live's, it has one as well (``ttl_ms``, counted from ``now``),
    so the ``expired-ttl`` forgetting policy selects it with them."""
    facts = view.facts
    ends = [facts.end.item(slot) for slot in slots]
    if not ends or UNSET in ends:
        return None, None
    last = max(ends)
    by_ttl = False
    for slot in slots:
        ttl = facts.ttl.get(view.id_of(slot))
        by_ttl |= ttl is not None and facts.ingest.item(slot) + ttl == last
    return last, (last - now if by_ttl and last > now else None)


def shared_metadata(view: View, slots: list[int]) -> dict[str, Any] | None:
    """The metadata entries (key and value) every one of the facts at ``slots`` has."""
    shared: dict[str, Any] | None = None
    for slot in slots:
        meta = validate.load_metadata(view.record(slot).metadata) or {}
        shared = dict(meta) if shared is None else {
            k: v for k, v in shared.items() if k in meta and meta[k] == v}
        if not shared:
            return None
    return shared


def options(value: ConsolidateOptions | Mapping[str, Any] | None,
            fields: Mapping[str, Any]) -> ConsolidateOptions:
    return validate.to_struct(ConsolidateOptions, value, fields, "consolidate options")
