"""Contradictions: pairs of current facts that likely say opposite things (issue 8).

Owns: ``contradict`` — checks the request, works out which facts it covers, and
answers a page from the candidates kept between calls
(:mod:`holomem.api.memory.holographic.kept`) or, when they cannot be sure of the answer, by
comparing the candidate pairs a block at a time
(:mod:`holomem.api.memory.holographic.pairs`); both give the same page. Imports those two,
the engine's view, filters, the types and validate.

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

Bounded work: ``k`` <= :data:`~holomem.api.memory.holographic.algebra.MAX_K`, ``max_pairs`` <=
:data:`MAX_PAIRS_LIMIT`, and at most about :data:`PAIR_BUDGET` raw candidate pairs
held at once, instead of building every pair of the store before cutting a page; the
kept candidates score at most about :data:`CATCH_UP_BUDGET` raw pairs per call (a call
that leaves some unscored is answered by the scan).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.holographic import kept as contradiction_kept
from holomem.api.memory.holographic import pairs as contradiction_pairs
from holomem.api.memory.holographic.algebra import BLOCK, MAX_K
from holomem.api.memory.holographic.pairs import (
    ENTITY_ONLY_WEIGHT,
    MAX_CONTENT_SIMILARITY,
    MIN_CONTENT_SIMILARITY,
    MIN_OVERLAP,
    Page,
    measure,
)
from holomem.api.memory.types import ContradictionPair, ContradictResult
from holomem.errors import InvalidError
from holomem.projections.namespaces import Namespace

__all__ = ["ENTITY_ONLY_WEIGHT", "MAX_CONTENT_SIMILARITY", "MAX_PAIRS", "MAX_PAIRS_LIMIT",
           "MIN_CONTENT_SIMILARITY", "MIN_OVERLAP", "PAIR_BUDGET", "contradict"]

#: The default ``max_pairs`` of contradict, and the most one call may ask for.
MAX_PAIRS = 100_000
MAX_PAIRS_LIMIT = 1_000_000
#: contradict: about how many raw candidate pairs are enumerated at once.
PAIR_BUDGET = 1 << 18
#: The kept candidates: about how many raw pairs one call scores to catch up.
CATCH_UP_BUDGET = 1 << 20


def _cursor(value: object, tag: str) -> tuple[int, int, int] | None:
    """(generation, a, b) of the last pair a contradict page compared, or None; the
    cursor's scope must be ``tag`` (the subject, entity and namespace asked for)."""
    text = validate.cursor(value, "contradict()")
    if text is None:
        return None
    data = validate.decode_cursor(text, "contradict()")
    gen, a, b = validate.cursor_ints(data, ("g", "a", "b"), "contradict()")
    if not 0 <= a < b:
        raise InvalidError("not a cursor contradict() gave out")
    if data.get("q") != tag:
        raise InvalidError("the cursor is another contradict()'s (another subject, entity "
                           "or namespace); ask with the first page's arguments")
    return gen, a, b


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
    tag = validate.scope_tag(namespace, (subject, entity))
    resume = _cursor(cursor, tag)
    if resume is not None and resume[0] != view.generation:
        raise InvalidError("the store was compacted since this cursor; start again")
    facts = view.facts
    live = facts.current_mask(now)  # what the kept candidates follow
    current = live.copy()
    scope = np.ones(len(current), dtype=bool)
    if namespace:
        scope = view.mask(facts.namespaces.slots(namespace))
        current &= scope
    if where is not None:
        current &= filters.evaluate(view, where)
    if subject is not None:
        keep = np.zeros_like(current)
        keep[[facts.slot(i) for i in facts.subjects(subject, namespace)]] = True
        current &= keep
    else:  # holomem's own facts only when their subject is asked for
        shown = filters.unreserved(view)
        if shown is not None:
            current &= shown
    if entity is not None:
        keep = np.zeros_like(current)
        keep[view.entities.slots(entity)] = True
        current &= keep
    resumed = (resume[1], resume[2]) if resume is not None else None
    page = None
    content = view.hrr().content.view()
    kept = view.candidates
    subj = facts.subject.view()

    def scorer(a: np.ndarray, b: np.ndarray, shared: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        counts = kept.groups.entity_count.view()
        parts = [measure(a[s : s + BLOCK], b[s : s + BLOCK], shared[s : s + BLOCK], subj,
                         counts, content) for s in range(0, len(a), BLOCK)]
        if not parts:
            return measure(a, b, shared, subj, counts, content)
        passes, score, overlap, sim = (np.concatenate(col) for col in zip(*parts, strict=True))
        return passes, score, overlap, sim

    if view.catch_up_candidates(live, scorer, CATCH_UP_BUDGET, PAIR_BUDGET):
        page = contradiction_kept.answer(view, kept, current, scope, k, max_pairs, resumed,
                                         PAIR_BUDGET)
    shared_entities: Callable[[list[tuple[int, int]]], list[list[str]]]
    if page is not None:
        shared_entities = kept.groups.shared_entities
    else:
        page = contradiction_pairs.scan(view, current, k, max_pairs, resumed, PAIR_BUDGET)
        shared_entities = _record_entities(view)
    return _result(view, page, int(current.sum()), shared_entities, tag)


def _record_entities(view: View) -> Callable[[list[tuple[int, int]]], list[list[str]]]:
    def shared(pairs: list[tuple[int, int]]) -> list[list[str]]:
        return [sorted(set(view.record(a).entities) & set(view.record(b).entities))
                for a, b in pairs]
    return shared


def _result(view: View, page: Page, compared_facts: int,
            shared_entities: Callable[[list[tuple[int, int]]], list[list[str]]],
            tag: str) -> ContradictResult:
    facts, ids = view.facts, view.catalog.ids
    slots = [(sa, sb) for sa, sb, *_ in page.ranked]
    subj = facts.subject.view()
    subjects = subj[np.array(slots, dtype=np.int64).reshape(-1, 2)].tolist()
    pairs = []
    for (sa, sb, score, overlap, sim), why, (ja, jb) in zip(
            page.ranked, shared_entities(slots), subjects, strict=True):
        if ja >= 0 and ja == jb:
            why.insert(0, facts.subject_names[ja])
        pairs.append(ContradictionPair(a=ids[sa] or "", b=ids[sb] or "", score=score,
                                       overlap=overlap, content_similarity=sim, shared=why))
    next_cursor = (validate.encode_cursor(g=view.generation, a=page.last[0], b=page.last[1],
                                          q=tag)
                   if page.more else None)
    return ContradictResult(pairs=pairs, compared_facts=compared_facts,
                            compared_pairs=page.compared, bound_hit=page.more,
                            next_cursor=next_cursor)
