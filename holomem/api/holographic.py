"""Holographic operations: probe, related, reason, contradict (issue 8).

Owns: algebraic queries over the HRR structure vectors of facts, with their
capacity checks, and the contradiction scan. Imports the API layer and the HRR
projection.

How each one works, and how it stays honest:

- ``probe(entity)``: the facts whose structure binds ``entity`` under the entity
  role — the similarity of each fact's structure pattern with
  ``bind(ROLE_ENTITY, atom(entity))``, i.e. unbinding the role and comparing the
  filler with the atom. A fact is a member when its similarity clears
  :data:`THRESHOLD_SDS` noise standard deviations. The order roles tell which
  position the entity holds ("Alice owes Bob": Alice first; "Bob owes Alice":
  second). A fact whose bundle holds so many items that a member would not clear
  the threshold (signal-to-noise below it) is checked exactly, against its entity
  list, and the result says so (``path``).
- ``related(entity)``: the probe's member facts are bundled, the entity role is
  unbound from the bundle, and every known entity atom is compared with it (a
  clean-up memory). A bundle of many facts holds many items; when its estimated
  signal-to-noise ratio falls below :data:`MIN_SNR`, the bank is split: each fact
  is scored on its own and the per-fact similarities are summed (``path`` says
  "exact per-fact").
- ``reason(entities)``: facts that bind *all* the entities: a fact's score is its
  smallest per-entity similarity, and every entity must clear the threshold.
- ``contradict()``: pairs of current facts about the same thing — the same
  subject, or entity sets that overlap by at least :data:`MIN_OVERLAP` (Jaccard) —
  that say different things in the same frame — HRR content similarity between
  :data:`MIN_CONTENT_SIMILARITY` (below it, two facts about Alice simply talk of
  different things) and :data:`MAX_CONTENT_SIMILARITY` (above it, they are
  duplicates) — and are not versions of each other (no supersession chain joins
  them). Score: w x 4 s (1 - s) for content similarity s, highest for facts that
  share half their content ("Alice lives in Paris" against "... in Berlin"); w is
  1 for one subject slot (single-valued: two current facts in it contradict by
  definition) and half the Jaccard overlap for pairs that share only entities.
  Every response counts the facts and pairs compared; ``max_pairs`` bounds a
  call, and when it is hit the response says so and returns a cursor to
  continue. Nothing is cut silently.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from holomem.api import validate
from holomem.api.audit import decode_cursor, encode_cursor
from holomem.api.documents import _State
from holomem.api.types import (
    ContradictionPair,
    ContradictResult,
    ProbeHit,
    ProbeResult,
    ReasonHit,
    ReasonResult,
    RelatedHit,
    RelatedResult,
)
from holomem.errors import InvalidError
from holomem.projections import hrr

if TYPE_CHECKING:
    from holomem.api.memory import Memory

#: Membership: a similarity at least this many noise standard deviations.
THRESHOLD_SDS = 5.0
THRESHOLD = THRESHOLD_SDS * float(hrr.NOISE_SD)
#: A bundle is trusted when its estimated signal-to-noise ratio is at least this.
MIN_SNR = THRESHOLD_SDS
#: The most items a fact's structure bundle may hold and still be trusted.
MAX_ITEMS = max(m for m in range(1, 4096) if hrr.snr(m) >= MIN_SNR)
MAX_K = 1000
MAX_PAIRS = 100_000
#: Contradiction: subject/entity overlap at least this, and content similarity within
#: [MIN_CONTENT_SIMILARITY, MAX_CONTENT_SIMILARITY]: the same frame ("Alice lives in
#: ..."), not the same statement.
MIN_OVERLAP = 0.6
MIN_CONTENT_SIMILARITY = 0.2
MAX_CONTENT_SIMILARITY = 0.9
ENTITY_ONLY_WEIGHT = 0.5


def _ready(memory: Memory, st: _State) -> hrr.HRRIndex:
    return memory.store._hrr_ready(st)


def _entity(value: object, field: str = "entity") -> str:
    if not isinstance(value, str) or not value:
        raise InvalidError(f"{field} must be a non-empty string")
    return validate.entities([value], field)[0]


def _members(memory: Memory, st: _State, entity: str
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(slots, entity-role similarity, is member, facts checked exactly) over live docs."""
    index = _ready(memory, st)
    slots, sims = index.probe(entity)
    items = index.items.view()[slots]
    member = (sims >= THRESHOLD) & (items > 0)
    # Bundles too full for the threshold to be trusted: decide membership exactly.
    weak = np.flatnonzero(items > MAX_ITEMS)
    if len(weak):
        member[weak] = np.isin(slots[weak], st.entities.slots(entity))
    return slots, sims, member, len(weak)


def probe(memory: Memory, entity: str, k: int = 10) -> ProbeResult:
    ent = _entity(entity)
    k = validate.positive_int(k, "k", MAX_K)
    with memory.store.reading() as st:
        index = _ready(memory, st)
        slots, sims, member, exact = _members(memory, st, ent)
        idx = np.flatnonzero(member)
        order = idx[np.lexsort((slots[idx], -sims[idx]))][:k]
        chosen = slots[order]
        # Which position the entity holds: unbind each order role from the chosen facts.
        rows = index.structure.view()[chosen]
        roles = np.stack([hrr.bit_similarity(rows, hrr.probe_key(ent, j))
                          for j in range(hrr.ORDER_ROLES)]) if len(chosen) else np.zeros((0, 0))
        hits = []
        for j, i in enumerate(order):
            best = int(np.argmax(roles[:, j]))
            slot = int(slots[i])
            hits.append(ProbeHit(id=st.catalog.ids[slot] or "", score=float(sims[i]),
                                 role=best if roles[best, j] >= THRESHOLD else None,
                                 role_score=float(roles[best, j]),
                                 text=memory.store._record(st, slot).text))
        return ProbeResult(entity=ent, results=hits, compared=len(slots), threshold=THRESHOLD,
                           path="algebra+exact" if exact else "algebra", exact_checked=exact)


def related(memory: Memory, entity: str, k: int = 10) -> RelatedResult:
    ent = _entity(entity)
    k = validate.positive_int(k, "k", MAX_K)
    with memory.store.reading() as st:
        index = _ready(memory, st)
        slots, _, member, _ = _members(memory, st, ent)
        facts = slots[member]
        candidates = [e for e in st.entities.names() if e != ent]
        if not len(facts) or not candidates:
            return RelatedResult(entity=ent, results=[], facts_bundled=len(facts), snr=0.0,
                                 path="algebra", compared=len(candidates))
        items = int(index.items.view()[facts].sum())
        ratio = hrr.snr(items)
        queries = np.stack([hrr.probe_key(c) for c in candidates])
        rows = index.structure.view()[facts]
        if ratio >= MIN_SNR:
            # One bank: bundle the facts, then compare every candidate with it.
            bank = hrr.pack(hrr.unpack(rows).sum(axis=0))
            scores = hrr.bit_similarity(queries, bank)
            path = "algebra"
        else:
            # Too many items for one bundle: score each fact on its own and sum.
            scores = np.zeros(len(candidates))
            for row in rows:
                sims = hrr.bit_similarity(queries, row)
                scores += np.where(sims >= THRESHOLD, sims, 0.0)
            path = "exact per-fact"
        order = np.lexsort((np.arange(len(candidates)), -scores))
        hits: list[RelatedHit] = []
        fact_set = set(facts.tolist())
        for i in order:
            if scores[i] < (THRESHOLD if path == "algebra" else 1e-12) or len(hits) >= k:
                break
            c = candidates[i]
            n = len(fact_set & set(st.entities.slots(c).tolist()))
            hits.append(RelatedHit(entity=c, score=float(scores[i]), facts=n))
        return RelatedResult(entity=ent, results=hits, facts_bundled=len(facts), snr=ratio,
                             path=path, compared=len(candidates))


def reason(memory: Memory, entities: Sequence[str], k: int = 10) -> ReasonResult:
    if isinstance(entities, str) or not isinstance(entities, Sequence) or not entities:
        raise InvalidError("entities must be a non-empty list of strings")
    ents = [_entity(e, "entities") for e in entities]
    k = validate.positive_int(k, "k", MAX_K)
    with memory.store.reading() as st:
        per = [_members(memory, st, e) for e in ents]
        slots = per[0][0]
        sims = np.stack([p[1] for p in per])
        member = np.logical_and.reduce([p[2] for p in per])
        score = sims.min(axis=0)
        idx = np.flatnonzero(member)
        order = idx[np.lexsort((slots[idx], -score[idx]))][:k]
        exact = sum(p[3] for p in per)
        return ReasonResult(
            entities=ents,
            results=[ReasonHit(id=st.catalog.ids[int(slots[i])] or "", score=float(score[i]),
                               scores=[float(x) for x in sims[:, i]],
                               text=memory.store._record(st, int(slots[i])).text)
                     for i in order],
            compared=len(slots), threshold=THRESHOLD,
            path="algebra+exact" if exact else "algebra")


def _cursor(value: str | None) -> tuple[int, int]:
    if value is None:
        return 0, 0
    data = decode_cursor(value, "contradict()")
    try:
        return int(data["g"]), int(data["i"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidError("not a cursor contradict() gave out") from exc


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted array and how often each occurs (a sort-based unique)."""
    if not len(sorted_keys):
        return sorted_keys, np.zeros(0, dtype=np.int64)
    start = np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
    return sorted_keys[start], np.diff(np.append(start, len(sorted_keys)))


@functools.lru_cache(maxsize=1024)
def _upper(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n, 1)
    return i, j


def _pairs_within(groups: list[np.ndarray]) -> np.ndarray:
    """Every unordered pair (as a < b) inside each group, as an (n, 2) array."""
    parts = []
    for g in groups:
        if len(g) > 1:
            i, j = _upper(len(g))
            parts.append(np.stack([g[i], g[j]], axis=1))
    return np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)


def contradict(memory: Memory, *, subject: str | None = None, entity: str | None = None,
               k: int = 10, max_pairs: int = MAX_PAIRS, cursor: str | None = None
               ) -> ContradictResult:
    """Pairs of current facts that likely contradict each other, most likely first."""
    k = validate.positive_int(k, "k", MAX_K)
    max_pairs = validate.positive_int(max_pairs, "max_pairs", 10_000_000)
    gen, start = _cursor(cursor)
    now = memory.clock.now_ms()
    with memory.store.reading() as st:
        if cursor is not None and gen != memory.store.generation:
            raise InvalidError("the store was compacted since this cursor; start again")
        facts = st.facts
        index = _ready(memory, st)
        current = facts.current_mask(now)
        if subject is not None:
            keep = np.zeros_like(current)
            keep[[facts.slot(i) for i in facts.subject_members(validate.doc_id(subject))]] = True
            current &= keep
        if entity is not None:
            keep = np.zeros_like(current)
            keep[st.entities.slots(_entity(entity))] = True
            current &= keep
        # Candidate pairs share a subject slot or an entity.
        subj = facts.subject.view()
        cur = np.flatnonzero(current)
        with_subject = cur[subj[cur] >= 0]
        order = with_subject[np.argsort(subj[with_subject], kind="stable")]
        cuts = np.flatnonzero(np.diff(subj[order])) + 1
        subject_pairs = _pairs_within(np.split(order, cuts))
        ent_groups = []
        counts = np.zeros(st.catalog.slots, dtype=np.int64)
        for name in st.entities.names():
            g = st.entities.slots(name)
            counts[g] += 1
            ent_groups.append(g[current[g]])
        entity_pairs = _pairs_within(ent_groups)
        n = max(1, st.catalog.slots)
        keys, shared = _runs(np.sort(entity_pairs[:, 0] * n + entity_pairs[:, 1]))
        all_keys, _ = _runs(np.sort(np.concatenate(
            (keys, subject_pairs[:, 0] * n + subject_pairs[:, 1]))))
        chunk = all_keys[start : start + max_pairs]
        a, b = chunk // n, chunk % n
        # Overlap: 1 for one subject slot, else the Jaccard of the entity sets.
        inter = np.zeros(len(chunk))
        pos = np.searchsorted(keys, chunk)
        found_e = (pos < len(keys)) & (keys[np.minimum(pos, len(keys) - 1)] == chunk)
        inter[found_e] = shared[pos[found_e]]
        union = counts[a] + counts[b] - inter
        overlap = np.where(union > 0, inter / np.maximum(union, 1), 0.0)
        overlap = np.where((subj[a] >= 0) & (subj[a] == subj[b]), 1.0,
                           np.minimum(overlap, 0.999))
        content = index.content.view()
        x = np.bitwise_xor(content[a].view(np.uint64), content[b].view(np.uint64))
        sim = 1.0 - 2.0 * np.bitwise_count(x).sum(axis=1) / hrr.D
        comp = facts.components()
        keep = ((overlap >= MIN_OVERLAP) & (sim >= MIN_CONTENT_SIMILARITY)
                & (sim <= MAX_CONTENT_SIMILARITY) & (comp[a] != comp[b]))
        # One subject is a single-valued slot (SPEC §3): two current facts in it
        # contradict by definition. Sharing only entities is weaker evidence (one can
        # like two things), so such pairs weigh half.
        weight = np.where(overlap >= 1.0, 1.0, ENTITY_ONLY_WEIGHT * overlap)
        score = weight * 4.0 * sim * (1.0 - sim)
        idx = np.flatnonzero(keep)
        best = idx[np.lexsort((chunk[idx], -score[idx]))][:k]
        pairs = []
        for i in best:
            sa, sb = int(a[i]), int(b[i])
            ea = set(memory.store._record(st, sa).entities)
            eb = set(memory.store._record(st, sb).entities)
            why = sorted(ea & eb)
            if subj[sa] >= 0 and subj[sa] == subj[sb]:
                why.insert(0, facts.subject_names[int(subj[sa])])
            pairs.append(ContradictionPair(
                a=st.catalog.ids[sa] or "", b=st.catalog.ids[sb] or "", score=float(score[i]),
                overlap=float(overlap[i]), content_similarity=float(sim[i]), shared=why))
        done = start + len(chunk)
        more = done < len(all_keys)
        next_cursor = encode_cursor(g=memory.store.generation, i=done) if more else None
        return ContradictResult(pairs=pairs, compared_facts=len(cur),
                                compared_pairs=len(chunk), bound_hit=more,
                                next_cursor=next_cursor)
