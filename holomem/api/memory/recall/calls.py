"""The calls that rank facts for a query: recall and explain (docs/contract.md §4 Recall,
Explain).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Both start from one set-up (the checked options, the query's vector, the ranking of
a view: :func:`_ranking`) and answer from one view: :mod:`.rank` ranks,
:mod:`.explanation` explains, :mod:`.rerank` hands the pool to a caller's reranker.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from holomem.api.engine import View, validate
from holomem.api.memory.embedding import embedder as embedding
from holomem.api.memory.recall import explanation, rank
from holomem.api.memory.recall import rerank as reranking
from holomem.api.memory.recall.rerank import Reranker
from holomem.api.memory.session import Session
from holomem.api.memory.types import Explanation, Recalled, RecallOptions
from holomem.errors import NotFoundError


def recall(s: Session, /, query: str, options: RecallOptions | Mapping[str, Any] | None = None,
           *, rerank: Reranker | None = None, **fields: Any) -> builtins.list[Recalled]:
    """Facts relevant to ``query``, best first (docs/contract.md §4 Recall).

    ``rerank`` (Python only): a reranker given the whole candidate pool before the
    cut to ``k``, whose order decides the results (:mod:`holomem.api.memory.recall.rerank`;
    the built-in :class:`~holomem.api.memory.recall.rerank.MMR` needs no model).
    Limits: ``query`` <= 64 KiB and ``validate.MAX_QUERY_TERMS`` distinct words,
    ``k`` <= ``rank.MAX_RECALL_K``, ``candidate_limit`` <= ``rank.MAX_CANDIDATES``,
    ``entities`` <= 256, ``embedding`` <= 8192 numbers.
    Errors: ``invalid_request`` (also for a reranker's answer that is not its
    candidates' ids), ``limit``.
    """
    q = validate.query(query)
    o, at, ranking_of = _ranking(s, q, options, fields)
    if rerank is not None:
        return reranking.recall(s.store, q, ranking_of, rerank)
    # The default options and no embedder: on a store the identity rule covers, the
    # answer is document search's, with no ranking built (rank.plain).
    plain = options is None and not fields and s.embedder is None

    def run(view: View) -> builtins.list[Recalled]:
        if plain:
            got = rank.plain(view, s.policies, q, o, at)
            if got is not None:
                return got
        ranking = ranking_of(view)
        found, statuses = ranking.found()
        why = (explanation.explain_many(ranking, [slot for slot, _ in found], results=True)
               if o.explain else None)
        return rank.recalled(ranking, found, why, statuses)

    return s.store.read(run)


def explain(s: Session, /, query: str, id: str,
            options: RecallOptions | Mapping[str, Any] | None = None,
            *, rerank: Reranker | None = None, **fields: Any) -> Explanation:
    """Why ``id`` does or does not come back for ``query`` (docs/contract.md §4 Explain);
    with ``rerank``, as :meth:`recall` with that reranker would answer.

    Limits: as :meth:`recall`. Errors: ``invalid_request``, ``limit``, ``not_found``.
    """
    q = validate.query(query)
    fid = validate.doc_id(id)
    o, _, ranking_of = _ranking(s, q, options, fields)
    ns = validate.namespace(o.namespace)

    def slot_of(view: View) -> int:
        slot = view.slot(fid)
        if slot < 0 or (ns and view.facts.namespace(slot)[:len(ns)] != ns):
            # Outside the namespace asked about: as unknown as a missing id, so a
            # caller scoped to one user learns nothing of another's facts.
            raise NotFoundError(f"no fact {fid!r}")
        return slot

    if rerank is not None:
        s.store.read(slot_of)  # an unknown id fails before the reranker runs
        return reranking.explain(s.store, q, fid, ranking_of, rerank, slot_of)

    def run(view: View) -> Explanation:
        slot = slot_of(view)
        return explanation.explain_many(ranking_of(view), [slot])[0]

    return s.store.read(run)


def _ranking(s: Session, query: str, options: RecallOptions | Mapping[str, Any] | None,
             fields: Mapping[str, Any]
             ) -> tuple[RecallOptions, int, Callable[[View], rank.Ranking]]:
    """What recall and explain both start from: the checked options (with the query's
    vector when there is an embedder and the call brought none), the time they rank
    at, and the ranking they make of a view (refused if the store's embedder is no
    longer this session's)."""
    o, where = rank.checked(options, fields)
    embedded = s.embedder is not None and o.embedding is None
    if s.embedder is not None and o.embedding is None:
        o = msgspec.structs.replace(o, embedding=embedding.query_vector(s.embedder, query))
    at = o.as_of if o.as_of is not None else s.now_ms()

    def ranking_of(view: View) -> rank.Ranking:
        if embedded:
            s.check_pinned(view)
        return rank.Ranking(view, s.policies, query, o, at, where)

    return o, at, ranking_of
