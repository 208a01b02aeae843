"""Recall: ranking facts for a query over time (docs/contract.md §4 Recall).

Owns: recall options and their limits, the filtered path (subject and entity
restrictions), the identity rule, the multipliers (recency, history, usefulness),
the ranking of candidates (:class:`Ranking`) with graph recall folded in, and the
Recalled results (:func:`recalled`). The context policy's neighbour scores are
:mod:`.neighbours`, the dialogue signals (reply links, speakers, dates)
:mod:`.dialogue`; graph recall's walk is :mod:`holomem.api.memory.graph.walk`. Explanations are
built on the same ranking in :mod:`.explanation`. Imports the engine's view,
the policies, the fact records, the types and validate.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.facts.records import fact_records, wanted
from holomem.api.memory.graph import reach as graphrecall
from holomem.api.memory.graph import walk
from holomem.api.memory.policies import Policies, recency_multiplier
from holomem.api.memory.recall import dialogue, neighbours
from holomem.api.memory.types import Explanation, Recalled, RecallOptions
from holomem.projections.fusion import DEFAULT_FUSION, Fusion, top_k
from holomem.projections.temporal import CURRENT, STATUSES

#: Recalled's fields in order: :func:`recalled` passes them by position, so this fails at
#: import if the order ever changes.
_RECALLED = ("id", "text", "score", "status", "fact", "explanation")
assert Recalled.__struct_fields__ == _RECALLED, Recalled.__struct_fields__

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
    if value is None and not fields:
        return _defaults()
    return _checked(value, fields)


@functools.cache
def _defaults() -> tuple[RecallOptions, filters.Filter | None]:
    """The default options, checked once (a frozen Struct: every call may share it)."""
    return _checked(None, {})


def _checked(value: RecallOptions | Mapping[str, Any] | None, fields: Mapping[str, Any]
             ) -> tuple[RecallOptions, filters.Filter | None]:
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
    score: float  # fused score (plus graph recall's bonus) times the multipliers
    fused: float  # the fact's own fused score (graph recall's bonus not in it)
    lexical: float
    semantic: float | None
    recency: float
    history: float
    usefulness: float


class Ranked(NamedTuple):
    """Evaluated candidates as arrays, best first (score descending, then ``rank``)."""

    slots: np.ndarray  # int64
    rank: np.ndarray  # int64, 1-based position in document search's ranking
    code: np.ndarray  # int64, the status's index in STATUSES
    score: np.ndarray
    fused: np.ndarray
    lexical: np.ndarray
    semantic: np.ndarray | None
    recency: np.ndarray
    history: np.ndarray
    usefulness: np.ndarray
    examined: int  # search results examined (those unknown at known_at included)

    def candidates(self) -> list[Candidate]:
        sem = [None] * len(self.slots) if self.semantic is None else self.semantic.tolist()
        return [Candidate(slot, rank, STATUSES[code], score, fused, lexical, semantic,
                          recency, history, usefulness)
                for slot, rank, code, score, fused, lexical, semantic, recency, history,
                usefulness in zip(self.slots.tolist(), self.rank.tolist(),
                                  self.code.tolist(), self.score.tolist(),
                                  self.fused.tolist(), self.lexical.tolist(), sem,
                                  self.recency.tolist(), self.history.tolist(),
                                  self.usefulness.tolist(), strict=True)]


def wanted_codes(history: str, codes: np.ndarray) -> np.ndarray:
    """:func:`~holomem.api.memory.facts.records.wanted` over status codes (a mask)."""
    if history == "all":
        return np.ones(len(codes), dtype=bool)
    current: np.ndarray = codes == 0
    return current if history == "current" else ~current


def _holds(sorted_slots: np.ndarray, slot: int) -> bool:
    """Whether ``slot`` is one of ``sorted_slots`` (ascending)."""
    at = int(np.searchsorted(sorted_slots, slot))
    return at < len(sorted_slots) and int(sorted_slots[at]) == slot


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
        #: the query's vector takes its candidates from the approximate index (it is
        #: wanted and built; while it is built in the background, search is exact).
        #: A look into the past (as_of, known_at, history) is always answered exactly:
        #: its answers are the exact path's, whatever the index holds.
        self.approximate = (bool(self.embedding) and o.as_of is None and o.known_at is None
                            and o.history == "current"
                            and view.embeddings.approximate(policies.vector_search))
        #: the slot mask of the filtered path (None: every document)
        self.allowed = self._restriction()
        #: slots that are candidates whatever their cosine's rank (explain sets them)
        self.include: np.ndarray | None = None
        #: what graph recall reached in the last :meth:`rank` (slot -> how)
        self.reached = graphrecall.Reach.empty()
        #: the graph option, checked (None: off)
        self.graph = graphrecall.checked(o.graph)
        #: what the question says to the dialogue signals (None: they are off), and
        #: what they added to the last fused scores (for explain)
        self.reading = (None if policies.dialogue is None else
                        dialogue.read(view, policies.dialogue, query, at, self.namespace,
                                      o.known_at))
        self.shares: tuple[np.ndarray, dialogue.Shares] | None = None
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
        # A list here was decoded as list[float] (checked() converts every options
        # object with msgspec; the embedder's vector is a list of floats): its items
        # are numbers. An array or a buffer is as the caller gave it.
        return validate.embedding(o.embedding, dim, decoded=True)

    @functools.cached_property
    def _namespace_slots(self) -> np.ndarray:
        """The slots at or under the namespace asked about (looked up once)."""
        return self.view.facts.namespaces.slots(self.namespace)

    @functools.cached_property
    def _subject_slots(self) -> np.ndarray:
        """The slots of the facts of the subject asked about, within the namespace
        (sorted; the call names a subject)."""
        view, subject = self.view, self.options.subject
        assert subject is not None
        slots = np.unique(np.array([view.facts.slot(i) for i in
                                    view.facts.subjects(subject, self.namespace)],
                                   dtype=np.int64))
        return slots[slots >= 0]

    @functools.cached_property
    def _filter_mask(self) -> np.ndarray:
        """The slot mask of the facts the call's filter holds (the call has one)."""
        assert self.filter is not None
        return filters.evaluate(self.view, self.filter)

    def _restriction(self) -> np.ndarray | None:
        """The slot mask of the facts the namespace prefix, the subject / entities
        filters and the filter allow (None: no restriction) — built from their indexes
        (the filtered path), intersected one at a time over sorted slot arrays, so
        memory stays linear in the store however many entities the filter names."""
        o, view = self.options, self.view
        keep: np.ndarray | None = None
        if self.namespace:
            keep = self._namespace_slots
        if o.subject is not None:
            subject = self._subject_slots
            keep = subject if keep is None else np.intersect1d(keep, subject,
                                                                assume_unique=True)
        for entity in o.entities or ():
            if keep is not None and not len(keep):
                break
            slots = view.entities.slots(entity)
            keep = slots if keep is None else np.intersect1d(keep, slots, assume_unique=True)
        mask = None if keep is None else view.mask(keep)
        if self.filter is not None:
            held = self._filter_mask
            mask = held if mask is None else mask & held
        if o.subject is None:  # holomem's own facts only when their subject is asked for
            shown = filters.unreserved(view)
            if shown is not None:
                mask = shown if mask is None else mask & shown
        return mask

    def left_out_by(self, slot: int) -> str | None:
        """Which restriction of the call leaves the fact in ``slot`` out — "namespace",
        "subject", "entities", "filter" or "reserved" (a reserved subject the call did
        not name) — or None when none does. For explain's reason: the same pieces
        :meth:`_restriction` intersects, checked for one fact."""
        allowed = self.allowed
        if allowed is None or (slot < len(allowed) and bool(allowed[slot])):
            return None
        o, view = self.options, self.view
        if self.namespace and view.facts.namespace(slot)[:len(self.namespace)] != self.namespace:
            return "namespace"
        if o.subject is not None and not _holds(self._subject_slots, slot):
            return "subject"
        if not all(_holds(view.entities.slots(e), slot) for e in o.entities or ()):
            return "entities"
        if self.filter is not None and not bool(self._filter_mask[slot]):
            return "filter"
        return "reserved" if o.subject is None else None

    def identity(self) -> bool:
        """docs/contract.md §4's identity rule: nothing can change document search's answer."""
        facts, o, p = self.view.facts, self.options, self.policies
        return (facts.windows == 0 and facts.links == 0 and p.recency is None
                and p.feedback_weight is None and p.context is None
                and o.known_at is None and o.history == "current" and facts.max_eff <= self.at
                and o.graph is None and p.dialogue is None
                and (not self.embedding or p.fusion == DEFAULT_FUSION))

    def depth(self) -> int | None:
        """How many of the best cosines propose candidates (docs/contract.md §4e): the
        candidates examined; None (every vector) under the context policy with exact
        search, where every fact's own score feeds its neighbours'."""
        if ((self.policies.context is not None or self.policies.dialogue is not None)
                and not self.approximate):
            return None
        return max(self.options.candidate_limit, self.options.k)

    def plain(self) -> Fusion:
        """Document search's fused scores, no context policy, no id filter (BM25
        matching the dialogue reading's words when the dialogue signals are on; through
        the approximate index, within the namespace asked about); with
        ``known_at``, without the facts ingested after it (they lend no score to their
        neighbours or reply partners: the store did not know them)."""
        query = self.query if self.reading is None else self.reading.lexical
        # Through the approximate index, a query's vector proposes candidates within the
        # namespace asked about (a fact's neighbours and reply partners live in its own
        # namespace), so that no other namespace's nearer vectors take their places.
        view = self.view
        within = (view.mask(self._namespace_slots)
                  if self.approximate and self.namespace else None)
        fused = view.fused(query, self.embedding, within, self.policies.fusion,
                           self.depth(), self.approximate, self.include)
        if self.options.known_at is None:
            return fused
        return fused.take(self._known_among(fused.slots))

    def _known_among(self, slots: np.ndarray | slice) -> np.ndarray:
        """Under ``known_at``, which of ``slots`` (every slot for ``slice(None)``) hold a
        document known then: every one that is not a fact, and the facts ingested by
        then."""
        facts, known_at = self.view.facts, self.options.known_at
        assert known_at is not None
        out: np.ndarray = ~facts.is_fact.view()[slots] | (facts.ingest.view()[slots]
                                                          <= known_at)
        return out

    def fused(self) -> Fusion:
        """Every matching document's fused score, with the context policy's share and
        the dialogue signals."""
        p = self.policies
        if p.context is None and p.dialogue is None:
            return self.view.fused(self.query, self.embedding, self.allowed,
                                   self.policies.fusion, self.depth(),
                                   self.approximate, self.include)
        plain = self.plain()
        known = None if self.options.known_at is None else self._known_among(slice(None))
        allowed = self.allowed if known is None else \
            known if self.allowed is None else self.allowed & known
        if p.dialogue is None:
            return neighbours.with_context(self.view, p, plain, allowed)
        near = plain if p.context is None else neighbours.with_context(self.view, p, plain,
                                                                        known)
        assert self.reading is not None
        o = self.options
        out, shares = dialogue.apply(self.view, p.dialogue, self.reading, plain, near,
                                     allowed, dialogue.pool(o.candidate_limit, o.k),
                                     o.known_at)
        self.shares = (out.slots, shares)
        return out

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

    def scored(self, slot: int, rank: int, fused: float, lexical: float,
               semantic: float | None, status: str | None = None,
               bonus: float = 0.0) -> Candidate:
        """The candidate of ``slot`` with fused score ``fused`` (its own: explain reports
        it) and graph recall's ``bonus``: status (unless given) and multipliers, which
        multiply the two together."""
        facts, o, p = self.view.facts, self.options, self.policies
        base = fused + bonus if bonus else fused
        if self._all_current:  # (graph recall on a store the identity rule covers)
            return Candidate(slot, rank, CURRENT, base, fused, lexical, semantic, 1.0, 1.0,
                             1.0)
        if status is None:
            status = facts.status(slot, self.at, o.known_at)
        recency = 1.0
        if p.recency is not None and facts.is_fact[slot]:
            recency = recency_multiplier(p.recency, max(0, self.at - facts.eff.item(slot)))
        history = 1.0 if status == CURRENT else p.historical_weight
        usefulness = (1.0 if p.feedback_weight is None else
                      p.usefulness(facts.feedback_known(self.view.id_of(slot), o.known_at)))
        return Candidate(slot, rank, status, base * recency * history * usefulness, fused,
                         lexical, semantic, recency, history, usefulness)

    def candidates(self, depth: int | None = None) -> tuple[Fusion, np.ndarray]:
        """The fused scores and the indices of the ``max(candidate_limit, k)`` best
        (score descending, then write order): what :meth:`rank` evaluates; ``depth``:
        only the first ``depth`` of them."""
        o = self.options
        # Never examine fewer candidates than results asked for.
        n = max(o.candidate_limit, o.k) if depth is None else depth
        # Lexical only and no context policy: BM25's pruned top n (the same n).
        p = self.policies
        fused = (self.fused() if p.context is not None or p.dialogue is not None
                 or self.embedding else self.view.best(self.query, n, self.allowed))
        return fused, top_k(fused.slots, fused.score, n)

    def ranked(self, depth: int | None = None) -> Ranked:
        """Every evaluated candidate, as arrays, ranked with history included: the
        status and multipliers of all of them at once (per candidate in Python only
        for a recency or feedback policy, which are Python functions of one fact).
        ``depth``: only the first ``depth`` of the candidates (document search's
        order), fewer than the options' candidate limit."""
        o, facts, p = self.options, self.view.facts, self.policies
        fused, order = self.candidates(depth)
        examined = len(order)
        ranks = np.arange(1, examined + 1, dtype=np.int64)
        slots = fused.slots[order]
        if o.known_at is not None:  # facts ingested after known_at are not candidates
            then = self._known_among(slots)
            order, ranks, slots = order[then], ranks[then], slots[then]
        base = fused.score[order]
        lexical = fused.lexical[order]
        semantic = None if fused.semantic is None else fused.semantic[order]
        ones = np.ones(len(order))
        if self._all_current:  # (every status current, every multiplier 1)
            codes = np.zeros(len(order), dtype=np.int64)
            return Ranked(slots, ranks, codes, base, base, lexical, semantic, ones, ones,
                          ones, len(order))
        codes = facts.status_codes(slots, self.at, o.known_at)
        recency = ones
        if p.recency is not None:
            is_fact, eff = facts.is_fact.view()[slots], facts.eff.view()[slots]
            recency = np.array([recency_multiplier(p.recency, max(0, self.at - e))
                                if f else 1.0
                                for f, e in zip(is_fact.tolist(), eff.tolist(), strict=True)],
                               dtype=np.float64)
        history = np.where(codes == 0, 1.0, float(p.historical_weight))
        usefulness = ones
        if p.feedback_weight is not None:
            feedback, id_of, known = facts.feedback_known, self.view.id_of, o.known_at
            usefulness = np.array([p.usefulness(feedback(id_of(s), known))
                                   for s in slots.tolist()], dtype=np.float64)
        plain = recency is ones and usefulness is ones
        # (A product by 1.0 is exact: without those policies, the same bits.)
        score = base * history if plain else base * recency * history * usefulness
        # Score descending, then document search's rank (lexsort: the last key first).
        best = np.lexsort((ranks, -score))
        return Ranked(slots[best], ranks[best], codes[best], score[best], base[best],
                      lexical[best], None if semantic is None else semantic[best],
                      ones if plain else recency[best], history[best],
                      ones if plain else usefulness[best], examined)

    def rank(self, history: str | None = None) -> tuple[list[Candidate], list[Candidate]]:
        """(the k results, every evaluated candidate ranked with history included);
        ``history`` overrides the options' filter."""
        o = self.options
        ranked = self.ranked()
        evaluated = ranked.candidates()
        if o.graph is not None:
            evaluated = self._graph(evaluated, ranked.examined, prune=history is None)
        keep = o.history if history is None else history
        chosen = [c for c in evaluated if wanted(keep, c.status)][: o.k]
        return chosen, evaluated

    def _prefix(self) -> int | None:
        """How many candidates, in document search's order, are enough to start with
        (None: the candidate limit).

        When every candidate the ``history`` filter keeps gets the same multiplier (no
        recency or feedback policy; and with ``history="all"`` a historical weight of
        1) and the candidates come in document search's order (no vector, no context
        policy), the results keep that order: the first k wanted among the first m
        candidates are the first k wanted among all of them. So when the first
        ``3 * k`` hold k wanted facts, BM25's pruned top ``3 * k`` answers, and the
        other candidates are never scored."""
        o, p = self.options, self.policies
        n = max(o.candidate_limit, o.k)
        if (p.recency is not None or p.feedback_weight is not None or p.context is not None
                or p.dialogue is not None or self.embedding
                or (o.history == "all" and p.historical_weight != 1.0)
                or 3 * o.k >= n):
            return None
        return 3 * o.k

    def _graph(self, evaluated: list[Candidate], examined: int, *,
               prune: bool) -> list[Candidate]:
        """``evaluated`` with what graph recall reaches from its top k (module
        :mod:`holomem.api.memory.graph.reach`): a reached candidate gains its bonus, a
        reached fact that
        was no candidate joins (ranked after every search result on ties, in slot
        order). ``prune``: a reached non-candidate whose bonus cannot pass the k-th
        result is left out (it could not come back; explain, which ranks everything,
        does not prune). Only the reached facts that stay are scored one by one."""
        o, view, g = self.options, self.view, self.graph
        assert g is not None
        seeds = [(c.slot, c.score) for c in evaluated if wanted(o.history, c.status)][: o.k]
        reach = self.reached = walk.reach(view, seeds, g, self.at, o.known_at)
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
            out[at] = self.scored(slot, c.rank, c.fused, c.lexical, c.semantic, bonus=bonus)
        slots, bonus = self._joining(reach, ~hit, floor)
        for extra, (slot, b) in enumerate(zip(slots.tolist(), bonus.tolist(), strict=True),
                                          start=examined + 1):
            out.append(self.scored(slot, extra, 0.0, 0.0, None, bonus=b))
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
        reach = self.reached = walk.reach(view, seeds, g, self.at, None)
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
        return self.found()[0]

    def found(self) -> tuple[list[tuple[int, float]], list[str]]:
        """:meth:`results`, and the status of each."""
        o = self.options
        if self.identity():  # (every fact current)
            fused, best = self.view.top(self.query, o.k, self.embedding, self.allowed,
                                        self.approximate)
            return (list(zip(fused.slots[best].tolist(), fused.score[best].tolist(),
                             strict=True)), [CURRENT] * len(best))
        if self.graph is not None:
            if self._all_current and o.history != "historical":  # (every fact current)
                found = self._graph_results()
                return found, [CURRENT] * len(found)
            chosen = self.rank()[0]
            return [(c.slot, c.score) for c in chosen], [c.status for c in chosen]
        n = max(o.candidate_limit, o.k)
        depth = self._prefix()
        if depth is not None:
            got, examined = self._in_order(depth)
            if len(got[0]) < o.k and examined == depth < n:
                got, _ = self._in_order(n)  # too few wanted among the first candidates
            return got
        ranked = self.ranked()
        best = np.flatnonzero(wanted_codes(o.history, ranked.code))[: o.k]
        return (list(zip(ranked.slots[best].tolist(), ranked.score[best].tolist(),
                         strict=True)), [STATUSES[c] for c in ranked.code[best].tolist()])

    def _in_order(self, depth: int
                  ) -> tuple[tuple[list[tuple[int, float]], list[str]], int]:
        """:meth:`found` among the first ``depth`` candidates when they keep document
        search's order (:meth:`_prefix`'s conditions: every wanted candidate gets the
        same multiplier, and a product by one positive number keeps the order, ties
        then going by search rank as in :meth:`ranked`): the first k wanted ones, each
        score the product :meth:`ranked` computes. And the candidates examined."""
        o, facts = self.options, self.view.facts
        fused, order = self.candidates(depth)
        examined = len(order)
        slots = fused.slots[order]
        if o.known_at is not None:  # facts ingested after known_at are not candidates
            then = self._known_among(slots)
            order, slots = order[then], slots[then]
        codes = facts.status_codes(slots, self.at, o.known_at)
        best = np.flatnonzero(wanted_codes(o.history, codes))[: o.k]
        codes, base = codes[best], fused.score[order[best]]
        score = base * np.where(codes == 0, 1.0, float(self.policies.historical_weight))
        return (list(zip(slots[best].tolist(), score.tolist(), strict=True)),
                [STATUSES[c] for c in codes.tolist()]), examined


def plain(view: View, policies: Policies, query: str, o: RecallOptions, at: int
          ) -> list[Recalled] | None:
    """Recall with the default options and no query vector on a store the identity
    rule covers (docs/contract.md §4): document search's top k, each with its record,
    every one current — what :meth:`Ranking.found` and :func:`recalled` answer there,
    without a ranking. None when the rule does not hold (the caller ranks)."""
    facts, p = view.facts, policies
    if (facts.windows or facts.links or facts.max_eff > at or p.recency is not None
            or p.feedback_weight is not None or p.context is not None
            or p.dialogue is not None or o.embedding is not None):
        return None
    # (the default options' restriction: only holomem's own facts are left out)
    fused, best = view.top(query, o.k, b"", filters.unreserved(view))
    slots = fused.slots[best].tolist()
    recs = fact_records(view, slots, at, None, [CURRENT] * len(slots))
    return [Recalled(rec.id, rec.text, score, rec.status, rec)  # (by position: _RECALLED)
            for rec, score in zip(recs, fused.score[best].tolist(), strict=True)]


def recalled(ranking: Ranking, found: list[tuple[int, float]],
             explanations: list[Explanation] | None,
             statuses: list[str] | None = None) -> list[Recalled]:
    """The Recalled results for ``found`` (slot, score), with their explanations;
    ``statuses``: each one's status at the ranking's time, when the caller has them."""
    recs = fact_records(ranking.view, [slot for slot, _ in found], ranking.at,
                        ranking.options.known_at, statuses)
    if explanations:
        return [Recalled(id=rec.id, text=rec.text, score=score, status=rec.status,
                         fact=rec, explanation=why)
                for rec, (_, score), why in zip(recs, found, explanations, strict=True)]
    return [Recalled(rec.id, rec.text, score, rec.status, rec)  # (by position: _RECALLED)
            for rec, (_, score) in zip(recs, found, strict=True)]
