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
  clean-up memory). The exact answer is computed too: each member fact is scored
  on its own against the entities it lists, and the per-fact similarities are
  summed. The algebra answers only when its bundle's estimated signal-to-noise
  ratio is at least :data:`MIN_SNR` *and* it keeps every entity the exact scoring
  ranks in the top k; otherwise (the estimate is optimistic: a bundle of sign
  patterns loses more than a bundle of the items themselves) the exact scoring
  answers, and ``path`` says "exact per-fact".
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

Bounded work (issue 11): every call's work is bounded by limits on its request —
``k`` <= :data:`MAX_K`, entities per ``reason`` <= :data:`MAX_REASON_ENTITIES`,
``max_pairs`` <= :data:`MAX_PAIRS_LIMIT` — and its memory is linear in the store,
never (request x store): similarities are computed over blocks of
:data:`BLOCK` facts, ``reason`` keeps one running minimum instead of a per-entity x
per-fact matrix, and ``contradict`` enumerates candidate pairs a block of facts at a
time (at most about :data:`PAIR_BUDGET` raw pairs held at once) instead of building
every pair of the store before cutting a page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

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
from holomem.errors import InvalidError, LimitError
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
#: The most results (``k``) of probe, related, reason and contradict.
MAX_K = 1000
#: The default ``max_pairs`` of contradict, and the most one call may ask for.
MAX_PAIRS = 100_000
MAX_PAIRS_LIMIT = 1_000_000
#: The most entities one ``reason`` call may AND together.
MAX_REASON_ENTITIES = 32
#: Facts compared at once (a block of packed rows: BLOCK x 128 bytes).
BLOCK = 16_384
#: contradict: about how many raw candidate pairs are enumerated at once.
PAIR_BUDGET = 1 << 18
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


def _similarity(rows: np.ndarray, slots: np.ndarray, key: np.ndarray) -> np.ndarray:
    """bit_similarity of ``rows[slots]`` with ``key``, a block at a time (no full copy)."""
    out = np.empty(len(slots), dtype=np.float64)
    for i in range(0, len(slots), BLOCK):
        out[i : i + BLOCK] = hrr.bit_similarity(rows[slots[i : i + BLOCK]], key)
    return out


class _Members(NamedTuple):
    slots: np.ndarray  # the slots compared (ascending)
    sims: np.ndarray  # entity-role similarity of each
    member: np.ndarray  # bool: binds the entity
    exact: int  # how many were decided against their entity list (too full to trust)


def _members(memory: Memory, st: _State, entity: str,
             slots: np.ndarray | None = None) -> _Members:
    """Which of ``slots`` (default: every live document) bind ``entity``."""
    index = _ready(memory, st)
    if slots is None:
        slots = np.flatnonzero(st.catalog.alive.view())
    sims = _similarity(index.structure.view(), slots, hrr.probe_key(entity))
    items = index.items.view()[slots]
    member = (sims >= THRESHOLD) & (items > 0)
    # Bundles too full for the threshold to be trusted: decide membership exactly.
    weak = np.flatnonzero(items > MAX_ITEMS)
    if len(weak):
        member[weak] = np.isin(slots[weak], st.entities.slots(entity))
    return _Members(slots, sims, member, len(weak))


def probe(memory: Memory, entity: str, k: int = 10) -> ProbeResult:
    """Facts that bind ``entity``, best first. Limits: ``k`` <= :data:`MAX_K`."""
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


def _exact_related(st: _State, rows: np.ndarray, facts: np.ndarray,
                   candidates: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(score, facts) per candidate: each member fact scored on its own, over the
    entities it lists — the sum of its similarities (floored at 0) and the count."""
    is_member = np.zeros(st.catalog.slots, dtype=bool)
    is_member[facts] = True
    scores = np.zeros(len(candidates))
    counts = np.zeros(len(candidates), dtype=np.int64)
    for i, c in enumerate(candidates):
        carriers = st.entities.slots(c)
        listing = carriers[is_member[carriers]]
        if len(listing):
            sims = _similarity(rows, listing, hrr.probe_key(c))
            scores[i] = float(np.maximum(sims, 0.0).sum())
            counts[i] = len(listing)
    return scores, counts


def related(memory: Memory, entity: str, k: int = 10) -> RelatedResult:
    """Entities bound in the same facts as ``entity``. Limits: ``k`` <= :data:`MAX_K`."""
    ent = _entity(entity)
    k = validate.positive_int(k, "k", MAX_K)
    with memory.store.reading() as st:
        index = _ready(memory, st)
        m = _members(memory, st, ent)
        facts = m.slots[m.member]
        candidates = [e for e in st.entities.names() if e != ent]
        if not len(facts) or not candidates:
            return RelatedResult(entity=ent, results=[], facts_bundled=len(facts), snr=0.0,
                                 path="algebra", compared=len(candidates))
        structure = index.structure.view()
        items = int(index.items.view()[facts].sum())
        ratio = hrr.snr(items)
        exact, counts = _exact_related(st, structure, facts, candidates)
        listed = np.flatnonzero(counts > 0)
        exact_order = listed[np.lexsort((listed, -exact[listed]))]
        chosen: np.ndarray = exact_order[:k]
        scores = exact
        path = "exact per-fact"
        if ratio >= MIN_SNR:
            # One bank: bundle the facts, then compare every candidate with it.
            total = np.zeros(hrr.D, dtype=np.float32)
            for i in range(0, len(facts), BLOCK):
                total += hrr.unpack(structure[facts[i : i + BLOCK]]).sum(axis=0)
            bank = hrr.pack(total)
            algebra = np.empty(len(candidates))
            for i in range(0, len(candidates), BLOCK):
                keys = np.stack([hrr.probe_key(c) for c in candidates[i : i + BLOCK]])
                algebra[i : i + BLOCK] = hrr.bit_similarity(keys, bank)
            passed = np.flatnonzero(algebra >= THRESHOLD)
            top = passed[np.lexsort((passed, -algebra[passed]))][:k]
            # The estimate is optimistic; the algebra answers only if it drops nothing
            # that the exact scoring ranks in the top k.
            if set(chosen.tolist()) <= set(top.tolist()):
                chosen, scores, path = top, algebra, "algebra"
        hits = [RelatedHit(entity=candidates[i], score=float(scores[i]), facts=int(counts[i]))
                for i in chosen.tolist()]
        return RelatedResult(entity=ent, results=hits, facts_bundled=len(facts), snr=ratio,
                             path=path, compared=len(candidates))


def reason(memory: Memory, entities: Sequence[str], k: int = 10) -> ReasonResult:
    """Facts that bind every one of ``entities`` (AND).

    Limits: 1 to :data:`MAX_REASON_ENTITIES` entities, ``k`` <= :data:`MAX_K`. Memory
    is linear in the store whatever the number of entities: the per-fact score is a
    running minimum, and each entity after the first is compared only with the facts
    that bound every entity before it.
    """
    if isinstance(entities, str) or not isinstance(entities, Sequence) or not entities:
        raise InvalidError("entities must be a non-empty list of strings")
    if len(entities) > MAX_REASON_ENTITIES:
        raise LimitError(f"reason takes at most {MAX_REASON_ENTITIES} entities; "
                         f"got {len(entities)}")
    ents = [_entity(e, "entities") for e in entities]
    k = validate.positive_int(k, "k", MAX_K)
    with memory.store.reading() as st:
        first = _members(memory, st, ents[0])
        compared, exact = len(first.slots), first.exact
        slots, score = first.slots[first.member], first.sims[first.member]
        for e in ents[1:]:
            if not len(slots):
                break
            m = _members(memory, st, e, slots)
            slots, score = slots[m.member], np.minimum(score, m.sims)[m.member]
        order = np.lexsort((slots, -score))[:k]
        chosen = slots[order]
        rows = _ready(memory, st).structure.view()
        per = np.stack([_similarity(rows, chosen, hrr.probe_key(e)) for e in ents]) \
            if len(chosen) else np.zeros((len(ents), 0))
        return ReasonResult(
            entities=ents,
            results=[ReasonHit(id=st.catalog.ids[int(slot)] or "", score=float(score[i]),
                               scores=[float(x) for x in per[:, j]],
                               text=memory.store._record(st, int(slot)).text)
                     for j, (i, slot) in enumerate(zip(order, chosen, strict=True))],
            compared=compared, threshold=THRESHOLD,
            path="algebra+exact" if exact else "algebra")


# -- contradict ------------------------------------------------------------------------------
def _cursor(value: object) -> tuple[int, int, int] | None:
    """(generation, a, b) of the last pair a contradict page compared, or None."""
    text = validate.cursor(value, "contradict()")
    if text is None:
        return None
    data = decode_cursor(text, "contradict()")
    try:
        gen, a, b = int(data["g"]), int(data["a"]), int(data["b"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidError("not a cursor contradict() gave out") from exc
    if not 0 <= a < b:
        raise InvalidError("not a cursor contradict() gave out")
    return gen, a, b


class _Groups:
    """The groups candidate pairs come from — the current facts of one subject, and
    those of one entity — laid out flat, with every membership sorted by slot.

    A pair (a, b), a < b, is a candidate when a and b share a group; it is found
    from a's membership in that group, among the group's members after a. Memory
    is linear in the number of memberships (the entity posting's size).
    """

    def __init__(self, groups: list[np.ndarray], is_entity: list[bool]) -> None:
        groups, flags = ([g for g in groups if len(g) > 1],
                         [f for g, f in zip(groups, is_entity, strict=True) if len(g) > 1])
        lengths = np.array([len(g) for g in groups], dtype=np.int64)
        self.flat = np.concatenate(groups) if groups else np.zeros(0, dtype=np.int64)
        gid = np.repeat(np.arange(len(groups)), lengths)
        start = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64) \
            if len(groups) else np.zeros(0, dtype=np.int64)
        end = start + lengths
        pos = np.arange(len(self.flat))
        by_slot = np.argsort(self.flat, kind="stable")
        #: per membership, sorted by slot: the slot, where its partners begin and end
        #: in ``flat``, and whether the group is an entity's (not a subject's).
        self.slot = self.flat[by_slot]
        self.begin = pos[by_slot] + 1
        self.end = end[gid][by_slot] if len(groups) else np.zeros(0, dtype=np.int64)
        self.entity = np.array(flags, dtype=bool)[gid][by_slot] if len(groups) \
            else np.zeros(0, dtype=bool)
        self.raw = np.cumsum(self.end - self.begin)  # raw partners up to each membership

    def blocks(self, from_slot: int) -> list[tuple[int, int]]:
        """Membership ranges [i, j) covering slots >= from_slot, whole slots each, of
        about :data:`PAIR_BUDGET` raw pairs (more only when one slot alone has more)."""
        out = []
        i = int(np.searchsorted(self.slot, from_slot, side="left"))
        n = len(self.slot)
        while i < n:
            before = int(self.raw[i - 1]) if i else 0
            j = int(np.searchsorted(self.raw, before + PAIR_BUDGET, side="right"))
            j = max(j, i + 1)
            j = int(np.searchsorted(self.slot, self.slot[j - 1], side="right"))
            out.append((i, j))
            i = j
        return out

    def pairs(self, i: int, j: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys a * n + b ascending, shared entities) of the pairs from memberships [i, j)."""
        lens = self.end[i:j] - self.begin[i:j]
        total = int(lens.sum())
        if not total:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        offsets = np.cumsum(lens) - lens
        idx = np.arange(total) + np.repeat(self.begin[i:j] - offsets, lens)
        keys = np.repeat(self.slot[i:j], lens) * n + self.flat[idx]
        ent = np.repeat(self.entity[i:j], lens).astype(np.int64)
        order = np.argsort(keys, kind="stable")
        keys, ent = keys[order], ent[order]
        first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        return keys[first], np.add.reduceat(ent, first)


def contradict(memory: Memory, *, subject: str | None = None, entity: str | None = None,
               k: int = 10, max_pairs: int = MAX_PAIRS, cursor: str | None = None
               ) -> ContradictResult:
    """Pairs of current facts that likely contradict each other, most likely first.

    Pairs are compared in a fixed order (by slot), ``max_pairs`` of them per call; a
    page that stops early says so (``bound_hit``) and gives a cursor to continue.
    Limits: ``k`` <= :data:`MAX_K`, ``max_pairs`` <= :data:`MAX_PAIRS_LIMIT`.
    """
    k = validate.positive_int(k, "k", MAX_K)
    max_pairs = validate.positive_int(max_pairs, "max_pairs", MAX_PAIRS_LIMIT)
    subject = validate.doc_id(subject, "subject") if subject is not None else None
    entity = _entity(entity) if entity is not None else None
    resume = _cursor(cursor)
    now = memory.clock.now_ms()
    with memory.store.reading() as st:
        if resume is not None and resume[0] != memory.store.generation:
            raise InvalidError("the store was compacted since this cursor; start again")
        facts = st.facts
        index = _ready(memory, st)
        current = facts.current_mask(now)
        if subject is not None:
            keep = np.zeros_like(current)
            keep[[facts.slot(i) for i in facts.subject_members(subject)]] = True
            current &= keep
        if entity is not None:
            keep = np.zeros_like(current)
            keep[st.entities.slots(entity)] = True
            current &= keep
        # Candidate pairs share a subject slot or an entity.
        subj = facts.subject.view()
        cur = np.flatnonzero(current)
        with_subject = cur[subj[cur] >= 0]
        order = with_subject[np.argsort(subj[with_subject], kind="stable")]
        cuts = np.flatnonzero(np.diff(subj[order])) + 1
        groups: list[np.ndarray] = list(np.split(order, cuts)) if len(order) else []
        flags = [False] * len(groups)
        counts = np.zeros(st.catalog.slots, dtype=np.int64)
        for name in st.entities.names():
            g = st.entities.slots(name)
            counts[g] += 1
            groups.append(g[current[g]])
            flags.append(True)
        grouped = _Groups(groups, flags)
        n = max(1, st.catalog.slots)
        last = resume[1] * n + resume[2] if resume is not None else -1
        content = index.content.view()
        comp = facts.components()
        best = _Best(k)
        compared = 0
        more = False
        for i, j in grouped.blocks(resume[1] if resume is not None else 0):
            keys, shared = grouped.pairs(i, j, n)
            if last >= 0:
                after = keys > last
                keys, shared = keys[after], shared[after]
            if not len(keys):
                continue
            if compared == max_pairs:
                more = True  # a pair is left for the next page
                break
            take = min(len(keys), max_pairs - compared)
            if take < len(keys):
                more = True
            keys, shared = keys[:take], shared[:take]
            for s in range(0, len(keys), BLOCK):
                best.add(*_score(keys[s : s + BLOCK], shared[s : s + BLOCK], n, subj,
                                 counts, content, comp))
            compared += take
            last = int(keys[-1])
            if more:
                break
        pairs = []
        for key, score, overlap, sim in best.ranked():
            sa, sb = key // n, key % n
            ea = set(memory.store._record(st, sa).entities)
            eb = set(memory.store._record(st, sb).entities)
            why = sorted(ea & eb)
            if subj[sa] >= 0 and subj[sa] == subj[sb]:
                why.insert(0, facts.subject_names[int(subj[sa])])
            pairs.append(ContradictionPair(
                a=st.catalog.ids[sa] or "", b=st.catalog.ids[sb] or "", score=score,
                overlap=overlap, content_similarity=sim, shared=why))
        next_cursor = (encode_cursor(g=memory.store.generation, a=last // n, b=last % n)
                       if more else None)
        return ContradictResult(pairs=pairs, compared_facts=len(cur), compared_pairs=compared,
                                bound_hit=more, next_cursor=next_cursor)


def _score(keys: np.ndarray, shared: np.ndarray, n: int, subj: np.ndarray,
           counts: np.ndarray, content: np.ndarray, comp: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(keys, score, overlap, content similarity) of the pairs that may contradict."""
    a, b = keys // n, keys % n
    # Overlap: 1 for one subject slot, else the Jaccard of the entity sets.
    union = counts[a] + counts[b] - shared
    overlap = np.where(union > 0, shared / np.maximum(union, 1), 0.0)
    overlap = np.where((subj[a] >= 0) & (subj[a] == subj[b]), 1.0, np.minimum(overlap, 0.999))
    x = np.bitwise_xor(content[a].view(np.uint64), content[b].view(np.uint64))
    sim = 1.0 - 2.0 * np.bitwise_count(x).sum(axis=1) / hrr.D
    keep = ((overlap >= MIN_OVERLAP) & (sim >= MIN_CONTENT_SIMILARITY)
            & (sim <= MAX_CONTENT_SIMILARITY) & (comp[a] != comp[b]))
    # One subject is a single-valued slot (SPEC §3): two current facts in it
    # contradict by definition. Sharing only entities is weaker evidence (one can
    # like two things), so such pairs weigh half.
    weight = np.where(overlap >= 1.0, 1.0, ENTITY_ONLY_WEIGHT * overlap)
    score = weight * 4.0 * sim * (1.0 - sim)
    return keys[keep], score[keep], overlap[keep], sim[keep]


class _Best:
    """The k best pairs seen so far: score descending, then pair order."""

    def __init__(self, k: int) -> None:
        self.k = k
        self.keys = np.zeros(0, dtype=np.int64)
        self.cols = [np.zeros(0) for _ in range(3)]  # score, overlap, similarity

    def add(self, keys: np.ndarray, score: np.ndarray, overlap: np.ndarray,
            sim: np.ndarray) -> None:
        keys = np.concatenate((self.keys, keys))
        cols = [np.concatenate((old, new)) for old, new in zip(self.cols, (score, overlap, sim),
                                                                strict=True)]
        top = np.lexsort((keys, -cols[0]))[: self.k]
        self.keys, self.cols = keys[top], [c[top] for c in cols]

    def ranked(self) -> list[tuple[int, float, float, float]]:
        return [(int(key), float(s), float(o), float(c)) for key, s, o, c in
                zip(self.keys, *self.cols, strict=True)]
