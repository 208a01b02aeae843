"""Contradictions: pairs of current facts that likely say opposite things (issue 8).

Owns: ``contradict`` — candidate pairs from the groups facts share (a subject
slot, an entity), enumerated a block of facts at a time, scored on their HRR
content vectors, paged with a cursor. Imports the engine's view, the HRR
projection, the holographic module's shared pieces, the types and validate.

Candidates are pairs of current facts about the same thing — the same
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

Bounded work: ``k`` <= :data:`~holomem.api.holographic.MAX_K`, ``max_pairs`` <=
:data:`MAX_PAIRS_LIMIT`, and at most about :data:`PAIR_BUDGET` raw candidate pairs
held at once, instead of building every pair of the store before cutting a page.
"""

from __future__ import annotations

import numpy as np

from holomem.api import filters, validate
from holomem.api.engine import View
from holomem.api.holographic import BLOCK, MAX_K
from holomem.api.types import ContradictionPair, ContradictResult
from holomem.errors import InvalidError
from holomem.projections import hrr
from holomem.projections.namespaces import Namespace

#: The default ``max_pairs`` of contradict, and the most one call may ask for.
MAX_PAIRS = 100_000
MAX_PAIRS_LIMIT = 1_000_000
#: contradict: about how many raw candidate pairs are enumerated at once.
PAIR_BUDGET = 1 << 18
#: Contradiction: subject/entity overlap at least this, and content similarity within
#: [MIN_CONTENT_SIMILARITY, MAX_CONTENT_SIMILARITY]: the same frame ("Alice lives in
#: ..."), not the same statement.
MIN_OVERLAP = 0.6
MIN_CONTENT_SIMILARITY = 0.2
MAX_CONTENT_SIMILARITY = 0.9
ENTITY_ONLY_WEIGHT = 0.5


def _cursor(value: object) -> tuple[int, int, int] | None:
    """(generation, a, b) of the last pair a contradict page compared, or None."""
    text = validate.cursor(value, "contradict()")
    if text is None:
        return None
    data = validate.decode_cursor(text, "contradict()")
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


def _by_namespace(slots: np.ndarray, of_ns: np.ndarray) -> list[np.ndarray]:
    """``slots`` (ascending) split into one ascending group per namespace."""
    if len(slots) < 2:
        return [slots]
    ns = of_ns[slots]
    if (ns == ns[0]).all():
        return [slots]
    order = np.argsort(ns, kind="stable")
    cuts = np.flatnonzero(np.diff(ns[order])) + 1
    return list(np.split(slots[order], cuts))


def contradict(view: View, now: int, *, subject: str | None = None, entity: str | None = None,
               k: int = 10, max_pairs: int = MAX_PAIRS, cursor: str | None = None,
               namespace: Namespace = (), where: filters.Filter | None = None
               ) -> ContradictResult:
    """Pairs of current facts that likely contradict each other, most likely first.

    Only facts at or under ``namespace``; a pair never crosses namespaces (subjects
    are per namespace, and facts sharing an entity are grouped per namespace).

    Pairs are compared in a fixed order (by slot), ``max_pairs`` of them per call; a
    page that stops early says so (``bound_hit``) and gives a cursor to continue.
    Limits: ``k`` <= :data:`MAX_K`, ``max_pairs`` <= :data:`MAX_PAIRS_LIMIT`.
    """
    k = validate.positive_int(k, "k", MAX_K)
    max_pairs = validate.positive_int(max_pairs, "max_pairs", MAX_PAIRS_LIMIT)
    subject = validate.doc_id(subject, "subject") if subject is not None else None
    entity = validate.entity(entity) if entity is not None else None
    resume = _cursor(cursor)
    if resume is not None and resume[0] != view.generation:
        raise InvalidError("the store was compacted since this cursor; start again")
    facts = view.facts
    index = view.hrr()
    current = facts.current_mask(now)
    if namespace:
        current &= view.mask(facts.namespaces.slots(namespace))
    if where is not None:
        current &= filters.evaluate(view, where)
    if subject is not None:
        keep = np.zeros_like(current)
        keep[[facts.slot(i) for i in facts.subjects(subject, namespace)]] = True
        current &= keep
    if entity is not None:
        keep = np.zeros_like(current)
        keep[view.entities.slots(entity)] = True
        current &= keep
    # Candidate pairs share a subject slot or an entity.
    subj = facts.subject.view()
    cur = np.flatnonzero(current)
    with_subject = cur[subj[cur] >= 0]
    order = with_subject[np.argsort(subj[with_subject], kind="stable")]
    cuts = np.flatnonzero(np.diff(subj[order])) + 1
    groups: list[np.ndarray] = list(np.split(order, cuts)) if len(order) else []
    flags = [False] * len(groups)
    counts = np.zeros(view.catalog.slots, dtype=np.int64)
    of_ns = facts.namespaces.of_slot.view()
    for name in view.entities.names():
        g = view.entities.slots(name)
        counts[g] += 1
        for part in _by_namespace(g[current[g]], of_ns):
            groups.append(part)
            flags.append(True)
    grouped = _Groups(groups, flags)
    n = max(1, view.catalog.slots)
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
        ea = set(view.record(sa).entities)
        eb = set(view.record(sb).entities)
        why = sorted(ea & eb)
        if subj[sa] >= 0 and subj[sa] == subj[sb]:
            why.insert(0, facts.subject_names[int(subj[sa])])
        pairs.append(ContradictionPair(
            a=view.catalog.ids[sa] or "", b=view.catalog.ids[sb] or "", score=score,
            overlap=overlap, content_similarity=sim, shared=why))
    next_cursor = (validate.encode_cursor(g=view.generation, a=last // n, b=last % n)
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
    # One subject is a single-valued slot (docs/contract.md §3): two current facts in it
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
