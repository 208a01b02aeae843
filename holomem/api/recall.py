"""Recall: ranking facts for a query over time (docs/contract.md §4 Recall).

Owns: recall options and their limits, the filtered path (subject and entity
restrictions), the identity rule, the multipliers (recency, history, usefulness),
the ranking of candidates (:class:`Ranking`) with graph recall folded in, and the
Recalled results (:func:`recalled`). The context policy's neighbour scores are
:mod:`.contextscore`; graph recall's walk is :mod:`.graphwalk`. Explanations are
built on the same ranking in :mod:`holomem.api.explain`. Imports the engine's view,
the policies, the fact records, the types and validate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from holomem.api import contextscore, filters, graphrecall, graphwalk, validate
from holomem.api.engine import View
from holomem.api.policies import Policies
from holomem.api.records import fact_record, wanted
from holomem.api.types import Explanation, Recalled, RecallOptions
from holomem.projections.facts import CURRENT
from holomem.projections.fusion import DEFAULT_FUSION, Fusion, top_k

#: Limits of recall and explain (README "Limits"); the others are in validate.
MAX_CANDIDATES = 1000
MAX_RECALL_K = 1000


def options(value: RecallOptions | Mapping[str, Any] | None,
            fields: Mapping[str, Any]) -> RecallOptions:
    """Checked recall options from a RecallOptions, a dict or keywords."""
    return checked(value, fields)[0]


def checked(value: RecallOptions | Mapping[str, Any] | None, fields: Mapping[str, Any]
            ) -> tuple[RecallOptions, filters.Filter | None]:
    """Checked recall options and their filter, compiled (once: a Ranking takes it)."""
    o = validate.to_struct(RecallOptions, value, fields, "recall options",
                           validate.RECALL_TIME_FIELDS)
    validate.positive_int(o.k, "k", MAX_RECALL_K)
    validate.positive_int(o.candidate_limit, "candidate_limit", MAX_CANDIDATES)
    if o.subject is not None:
        validate.doc_id(o.subject, "subject")
    if o.entities is not None:
        validate.entities(o.entities)
    validate.namespace(o.namespace)
    graphrecall.checked(o.graph)
    return o, filters.compile_filter(o.filter)


class Candidate(NamedTuple):
    slot: int
    rank: int  # 1-based position in document search's ranking
    status: str
    score: float  # fused score times the multipliers
    fused: float
    lexical: float
    semantic: float | None
    recency: float
    history: float
    usefulness: float


class Ranking:
    """One query's ranking over one view: what recall and explain share."""

    def __init__(self, view: View, policies: Policies, query: str, o: RecallOptions,
                 at: int, where: filters.Filter | None = None) -> None:
        """``where``: ``o.filter`` compiled (by :func:`checked`)."""
        self.view = view
        self.policies = policies
        self.query = query
        self.options = o
        self.at = at
        self.namespace = validate.namespace(o.namespace)
        self.filter = where
        self.embedding = self._embedding()
        #: the slot mask of the filtered path (None: every document)
        self.allowed = self._restriction()
        #: slots that are candidates whatever their cosine's rank (explain sets them)
        self.include: np.ndarray | None = None
        #: what graph recall reached in the last :meth:`rank` (slot -> how)
        self.reached = graphrecall.Reach.empty()
        #: the graph option, checked (None: off)
        self.graph = graphrecall.checked(o.graph)
        facts, p = view.facts, policies
        #: every fact is current at ``at`` with every multiplier 1 (what the identity
        #: rule asks of the store), so a candidate's status needs no look-up
        self._all_current = (facts.windows == 0 and facts.links == 0 and facts.max_eff <= at
                             and o.known_at is None and p.recency is None
                             and p.feedback_weight is None)

    def _embedding(self) -> bytes:
        o, dim = self.options, self.view.embedding_dim
        if o.embedding is None or not dim:
            if o.embedding is not None:
                validate.embedding(o.embedding, 0)
            return b""
        return validate.embedding(o.embedding, dim)

    def _restriction(self) -> np.ndarray | None:
        """The slot mask of the facts the namespace prefix, the subject / entities
        filters and the filter allow (None: no restriction) — built from their indexes
        (the filtered path), intersected one at a time over sorted slot arrays, so
        memory stays linear in the store however many entities the filter names."""
        o, view = self.options, self.view
        keep: np.ndarray | None = None
        if self.namespace:
            keep = view.facts.namespaces.slots(self.namespace)
        if o.subject is not None:
            subject = np.unique(np.array([view.facts.slot(i) for i in
                                          view.facts.subjects(o.subject, self.namespace)],
                                         dtype=np.int64))
            subject = subject[subject >= 0]
            keep = subject if keep is None else np.intersect1d(keep, subject,
                                                                assume_unique=True)
        for entity in o.entities or ():
            if keep is not None and not len(keep):
                break
            slots = view.entities.slots(entity)
            keep = slots if keep is None else np.intersect1d(keep, slots, assume_unique=True)
        mask = None if keep is None else view.mask(keep)
        if self.filter is not None:
            held = filters.evaluate(view, self.filter)
            mask = held if mask is None else mask & held
        return mask

    def identity(self) -> bool:
        """docs/contract.md §4's identity rule: nothing can change document search's answer."""
        facts, o, p = self.view.facts, self.options, self.policies
        return (facts.windows == 0 and facts.links == 0 and p.recency is None
                and p.feedback_weight is None and p.context is None
                and o.known_at is None and o.history == "current" and facts.max_eff <= self.at
                and o.graph is None
                and (not self.embedding or p.fusion == DEFAULT_FUSION))

    def depth(self) -> int | None:
        """How many of the best cosines propose candidates (docs/contract.md §4e): the
        candidates examined; None (every vector) under the context policy with exact
        search, where every fact's own score feeds its neighbours'."""
        if self.policies.context is not None and not self.policies.approximate:
            return None
        return max(self.options.candidate_limit, self.options.k)

    def plain(self) -> Fusion:
        """Document search's fused scores, no context policy, no id filter."""
        return self.view.fused(self.query, self.embedding, None, self.policies.fusion,
                               self.depth(), self.policies.approximate, self.include)

    def fused(self) -> Fusion:
        """Every matching document's fused score, with the context policy's share."""
        if self.policies.context is None:
            return self.view.fused(self.query, self.embedding, self.allowed,
                                   self.policies.fusion, self.depth(),
                                   self.policies.approximate, self.include)
        return contextscore.with_context(self.view, self.policies, self.plain(), self.allowed)

    def evaluate(self, fused: Fusion, i: int, rank: int, status: str | None = None
                 ) -> Candidate | None:
        """Status and multipliers of one search result, or None if unknown at known_at.
        ``status``: the fact's status at ``at``, when the caller has it already."""
        facts, o = self.view.facts, self.options
        slot = int(fused.slots[i])
        if o.known_at is not None and facts.is_fact[slot] and not facts.known(slot, o.known_at):
            return None
        return self.scored(slot, rank, float(fused.score[i]), float(fused.lexical[i]),
                           float(fused.semantic[i]) if fused.semantic is not None else None,
                           status)

    def scored(self, slot: int, rank: int, base: float, lexical: float,
               semantic: float | None, status: str | None = None) -> Candidate:
        """The candidate of ``slot`` with fused score ``base``: status (unless given)
        and multipliers."""
        facts, o, p = self.view.facts, self.options, self.policies
        if self._all_current:  # (graph recall on a store the identity rule covers)
            return Candidate(slot, rank, CURRENT, base, base, lexical, semantic, 1.0, 1.0, 1.0)
        if status is None:
            status = facts.status(slot, self.at, o.known_at)
        recency = 1.0
        if p.recency is not None and facts.is_fact[slot]:
            recency = p.recency(max(0, self.at - facts.eff.item(slot)))
        history = 1.0 if status == CURRENT else p.historical_weight
        usefulness = (1.0 if p.feedback_weight is None else
                      p.usefulness(facts.feedback.get(self.view.id_of(slot), ())))
        return Candidate(slot, rank, status, base * recency * history * usefulness, base,
                         lexical, semantic, recency, history, usefulness)

    def candidates(self) -> tuple[Fusion, np.ndarray]:
        """The fused scores and the indices of the ``max(candidate_limit, k)`` best
        (score descending, then write order): what :meth:`rank` evaluates."""
        o = self.options
        # Never examine fewer candidates than results asked for.
        n = max(o.candidate_limit, o.k)
        # Lexical only and no context policy: BM25's pruned top n (the same n).
        fused = (self.fused() if self.policies.context is not None or self.embedding
                 else self.view.best(self.query, n, self.allowed))
        return fused, top_k(fused.slots, fused.score, n)

    def rank(self, history: str | None = None) -> tuple[list[Candidate], list[Candidate]]:
        """(the k results, every evaluated candidate ranked with history included);
        ``history`` overrides the options' filter."""
        o = self.options
        fused, order = self.candidates()
        statuses = self.view.facts.statuses(fused.slots[order], self.at, o.known_at)
        evaluated = []
        for rank, (i, status) in enumerate(zip(order.tolist(), statuses, strict=True), start=1):
            c = self.evaluate(fused, i, rank, status)
            if c is not None:
                evaluated.append(c)
        evaluated.sort(key=lambda c: (-c.score, c.rank))
        if o.graph is not None:
            evaluated = self._graph(evaluated, len(order), prune=history is None)
        keep = o.history if history is None else history
        chosen = [c for c in evaluated if wanted(keep, c.status)][: o.k]
        return chosen, evaluated

    def _graph(self, evaluated: list[Candidate], examined: int, *,
               prune: bool) -> list[Candidate]:
        """``evaluated`` with what graph recall reaches from its top k (module
        :mod:`.graphrecall`): a reached candidate gains its bonus, a reached fact that
        was no candidate joins (ranked after every search result on ties, in slot
        order). ``prune``: a reached non-candidate whose bonus cannot pass the k-th
        result is left out (it could not come back; explain, which ranks everything,
        does not prune). Only the reached facts that stay are scored one by one."""
        o, view, g = self.options, self.view, self.graph
        assert g is not None
        seeds = [(c.slot, c.score) for c in evaluated if wanted(o.history, c.status)][: o.k]
        reach = self.reached = graphwalk.reach(view, seeds, g, self.at, o.known_at)
        out = list(evaluated)
        if not len(reach):
            return out
        # Multipliers are at most 1 without a feedback policy, so bonus bounds the score.
        floor = (seeds[-1][1] if prune and len(seeds) == o.k
                 and self.policies.feedback_weight is None else None)
        cand = np.fromiter((c.slot for c in evaluated), dtype=np.int64, count=len(evaluated))
        n, hit = graphrecall.positions(cand, reach.slots)
        for slot, at, bonus in zip(reach.slots[hit].tolist(), n[hit].tolist(),
                                   reach.bonus[hit].tolist(), strict=True):
            c = out[at]
            out[at] = self.scored(slot, c.rank, c.fused + bonus, c.lexical, c.semantic)
        slots, bonus = self._joining(reach, ~hit, floor)
        for extra, (slot, b) in enumerate(zip(slots.tolist(), bonus.tolist(), strict=True),
                                          start=examined + 1):
            out.append(self.scored(slot, extra, b, 0.0, None))
        out.sort(key=lambda c: (-c.score, c.rank))
        return out

    def _joining(self, reach: graphrecall.Reach, fresh: np.ndarray, floor: float | None
                 ) -> tuple[np.ndarray, np.ndarray]:
        """(slots, bonuses) of the reached facts ``fresh`` marks (no candidates) that
        join the ranking: stored facts, known at ``known_at``, held by the restriction,
        and (with ``floor``) able to pass the k-th result; in slot order."""
        facts, o = self.view.facts, self.options
        keep = fresh.copy()
        slots = reach.slots
        if floor is not None:
            keep &= reach.bonus > floor
        keep &= facts.is_fact.view()[slots]
        if o.known_at is not None:
            keep &= facts.ingest.view()[slots] <= o.known_at
        if self.allowed is not None:
            keep &= self.allowed[slots]
        return slots[keep], reach.bonus[keep]

    def _graph_results(self) -> list[tuple[int, float]]:
        """:meth:`rank`'s k results with graph recall on a store the identity rule
        covers (every candidate current, every multiplier 1: a candidate's score is its
        fused score), in array operations — the same answer, without evaluating the
        candidates one by one."""
        o, view, g = self.options, self.view, self.graph
        assert g is not None
        fused, order = self.candidates()
        slots = fused.slots[order].astype(np.int64)
        score = fused.score[order].astype(np.float64)
        ranks = np.arange(1, len(order) + 1, dtype=np.int64)
        seeds = list(zip(slots[: o.k].tolist(), score[: o.k].tolist(), strict=True))
        reach = self.reached = graphwalk.reach(view, seeds, g, self.at, None)
        if len(reach):
            floor = seeds[-1][1] if len(seeds) == o.k else None
            n, hit = graphrecall.positions(slots, reach.slots)
            score[n[hit]] += reach.bonus[hit]
            extra, bonus = self._joining(reach, ~hit, floor)
            slots = np.concatenate([slots, extra])
            score = np.concatenate([score, bonus])
            ranks = np.concatenate([ranks, np.arange(len(order) + 1,
                                                     len(order) + 1 + len(extra))])
        best = np.lexsort((ranks, -score))[: o.k]
        return list(zip(slots[best].tolist(), score[best].tolist(), strict=True))

    def results(self) -> list[tuple[int, float]]:
        """(slot, score) of the k results, best first."""
        o = self.options
        if self.identity():
            hits = self.view.search(self.query, o.k, self.embedding, self.allowed,
                                    self.policies.approximate)
            return [(self.view.slot(h.id), h.score) for h in hits]
        if self.graph is not None and self._all_current \
                and self.options.history != "historical":
            return self._graph_results()
        return [(c.slot, c.score) for c in self.rank()[0]]


def recalled(ranking: Ranking, found: list[tuple[int, float]],
             explanations: list[Explanation] | None) -> list[Recalled]:
    """The Recalled results for ``found`` (slot, score), with their explanations."""
    out = []
    for n, (slot, score) in enumerate(found):
        rec = fact_record(ranking.view, slot, ranking.at, ranking.options.known_at)
        out.append(Recalled(id=rec.id, text=rec.text, score=score, status=rec.status,
                            fact=rec, explanation=explanations[n] if explanations else None))
    return out
