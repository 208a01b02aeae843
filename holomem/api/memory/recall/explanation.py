"""Explain: why a fact does or does not come back for a query (docs/contract.md §4 Explain).

Owns: :func:`explain_many` — lexical and semantic scores, the fusion and its weights,
matched terms, the multipliers, validity and status, the dialogue signals' shares and
multipliers, the rank among every candidate (history included), the supersession
chain, the path graph recall reached it by, and a one-line reason — computed on the
same :class:`~holomem.api.memory.recall.rank.Ranking` recall uses, so the two always
agree. Imports the recall modules, the types and the projections.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from holomem.api.memory.facts.records import wanted
from holomem.api.memory.graph import reach
from holomem.api.memory.recall import dialogue
from holomem.api.memory.recall.rank import Ranking
from holomem.api.memory.types import (
    ChainEntry,
    DialogueExplained,
    Explanation,
    FusionInfo,
    MatchedTerm,
)
from holomem.projections.fusion import DEFAULT_FUSION, W_LEXICAL, W_SEMANTIC, Fusion, parts


def explain_many(ranking: Ranking, slots: Sequence[int], *,
                 results: bool = False) -> list[Explanation]:
    """The explanation of each fact in ``slots``. ``results``: the slots are facts this
    ranking returned (recall with ``explain``), candidates already: the ranking keeps
    the candidates that recall used, so each explanation gives its result's score."""
    view, o, at = ranking.view, ranking.options, ranking.at
    facts = view.facts
    if not results:
        # An explained fact is scored whatever its cosine's rank (docs/contract.md §4e);
        # a query's vector then proposes its candidates exactly.
        ranking.include = np.asarray(slots, dtype=np.int64)
    chosen_ids = {view.id_of(s) for s, _ in ranking.results()}
    # The rank among every candidate, history included.
    ranked = ranking.rank(history="all")[1]
    rank_of = {c.slot: (n, c) for n, c in enumerate(ranked, start=1)}
    fused = ranking.fused()
    own: dict[int, float] = {}
    shared = ranking.policies.context is not None or ranking.reading is not None
    if shared:
        # each fact's score before its neighbours' (and the dialogue signals)
        plain = ranking.plain()
        own = dict(zip(plain.slots.tolist(), plain.score.tolist(), strict=True))
    emb, params = ranking.embedding, ranking.policies.fusion
    method, w_lex, w_sem = ("bm25", 1.0, 0.0)
    if emb:  # the weights the fusion used (document search's are W_LEXICAL, W_SEMANTIC)
        method = "bm25+cosine" + ("" if params.method == "linear" else " " + params.method)
        w_lex, w_sem = ((W_LEXICAL, W_SEMANTIC) if params == DEFAULT_FUSION
                        else (params.lexical_weight, 1.0 - params.lexical_weight))
    # Every explained fact's matched terms at once: each term's postings read once.
    query = ranking.query if ranking.reading is None else ranking.reading.lexical
    terms = view.bm25.matched_many(query, [int(s) for s in slots])
    cut = reach.bounds(ranking.reached)
    out = []
    for slot, matched in zip(slots, terms, strict=True):
        fid = view.id_of(slot)
        rank, mine = rank_of.get(slot, (None, None))
        # fused.slots is ascending: a binary search, not a scan per explained fact.
        at_pos = int(np.searchsorted(fused.slots, slot))
        matches = at_pos < len(fused.slots) and fused.slots[at_pos] == slot
        if mine is None and matches:
            mine = ranking.evaluate(fused, at_pos, 0)
        status = facts.status(slot, at, o.known_at)
        times = facts.times(slot)
        ttl = times.ttl_ms if facts.is_fact[slot] else None
        retrieved = fid in chosen_ids
        said = _dialogue(ranking, slot)
        turn = facts.turns.get(fid)
        # known_at ignores the facts ingested after it, in the chain too.
        chain = [ChainEntry(id=c, status=facts.status(facts.slot(c), at, o.known_at),  # type: ignore[arg-type]
                            effective_time=facts.order_key(c)[0])
                 for c in facts.chain(fid) if facts.known(facts.slot(c), o.known_at)
                 ] if facts.is_fact[slot] else []
        out.append(Explanation(
            id=fid, retrieved=retrieved, rank=rank,
            lexical_score=mine.lexical if mine else 0.0,
            semantic_score=mine.semantic if mine else None,
            fusion=_fusion(method, w_lex, w_sem, mine.fused if mine else 0.0,
                           _parts(ranking, fused, mine.lexical, mine.semantic,
                                  shared and slot not in own)
                           if mine and emb else None),
            matched_terms=[MatchedTerm(term=m.term, tf=m.tf, idf=m.idf, score=m.score)
                           for m in matched],
            recency_multiplier=mine.recency if mine else 1.0,
            history_multiplier=mine.history if mine else 1.0,
            status=status if facts.known(slot, o.known_at) else None,  # type: ignore[arg-type]
            valid_at=at, chain=chain, score=mine.score if mine else 0.0,
            usefulness_multiplier=mine.usefulness if mine else 1.0,
            context_bonus=(_context_bonus(ranking, mine.fused, own.get(slot, 0.0), said)
                           if mine and own else 0.0),
            reason=_reason(ranking, slot, status, retrieved, rank, matches),
            ttl_ms=ttl, expires_at=times.ingest_time + ttl if ttl is not None else None,
            graph=(reach.explained(view, ranking.reached[slot])
                   if slot in ranking.reached else None),
            graph_bounds=cut,
            speaker=turn.speaker if turn else None, session=turn.session if turn else None,
            position=turn.position if turn else None, dialogue=said))
    return out


def _dialogue(ranking: Ranking, slot: int) -> DialogueExplained | None:
    """The dialogue signals' part of ``slot``'s score (None: they are off)."""
    if ranking.reading is None:
        return None
    got = (dialogue.Parts() if ranking.shares is None else
           dialogue.parts(ranking.shares[1], ranking.shares[0], slot))
    return DialogueExplained(reply_bonus=got.reply, reply_inferred=got.inferred,
                             speaker_multiplier=got.speaker, date_multiplier=got.date,
                             session_multiplier=got.session,
                             speakers_named=sorted(ranking.reading.speakers),
                             date_windows=[list(w) for w in ranking.reading.windows])


def _parts(ranking: Ranking, fused: Fusion, lexical: float, semantic: float | None,
           borrowed_only: bool) -> tuple[float, float] | None:
    """The fusion's (lexical part, semantic part) of a fact's own score. A fact that is
    in the fused scores only through what it borrows (a neighbour, or a reply partner,
    that neither the query's words nor its vector made a candidate) has no own score,
    so both parts are 0 — the bounded and floored fusions would otherwise give a
    missing cosine the semantic part of a cosine of 0, which it never scored."""
    if borrowed_only:
        return None if parts(ranking.policies.fusion, fused, 0.0, 0.0) is None else (0.0, 0.0)
    return parts(ranking.policies.fusion, fused, lexical, semantic)


def _context_bonus(ranking: Ranking, fused: float, own: float,
                   said: DialogueExplained | None) -> float:
    """The context policy's share of a fused score (the dialogue signals taken out)."""
    if ranking.policies.context is None:
        return 0.0
    if said is not None:
        fused = fused / (said.speaker_multiplier * said.date_multiplier
                         * said.session_multiplier) - said.reply_bonus
    return fused - own


def _fusion(method: str, w_lex: float, w_sem: float, score: float,
            split: tuple[float, float] | None) -> FusionInfo:
    if split is None:
        return FusionInfo(method=method, lexical_weight=w_lex, semantic_weight=w_sem,
                          fused_score=score)
    return FusionInfo(method=method, lexical_weight=w_lex, semantic_weight=w_sem,
                      fused_score=score, lexical_part=split[0], semantic_part=split[1])


#: Why a fact the call's restrictions leave out is not a candidate, by restriction.
_LEFT_OUT = {
    "namespace": "not a candidate: it is outside the namespace asked about",
    "subject": "not a candidate: its subject is not {subject!r} (subject)",
    "entities": "not a candidate: it does not carry every one of {entities!r} (entities)",
    "filter": "not a candidate: the filter leaves it out",
    "reserved": ("not a candidate: its subject is reserved (holomem:), and recall leaves "
                 "such facts out unless subject names it"),
}


def _reason(ranking: Ranking, slot: int, status: str, retrieved: bool, rank: int | None,
            matches: bool) -> str:
    o = ranking.options
    if retrieved:
        return "retrieved"
    if not ranking.view.facts.known(slot, o.known_at):
        return "ingested after known_at"
    if not matches and slot not in ranking.reached:
        left_out = ranking.left_out_by(slot)
        if left_out is not None:
            return _LEFT_OUT[left_out].format(subject=o.subject, entities=o.entities)
        return "not a candidate: no query term (or embedding) matches it"
    if rank is None:
        return f"not among the {o.candidate_limit} best candidates (candidate_limit)"
    if not wanted(o.history, status):
        return f"its status is {status}, filtered out by history={o.history}"
    return f"ranked below the k={o.k} results"
