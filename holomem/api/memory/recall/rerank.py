"""The reranker seam of recall (docs/contract.md §4 Recall, "Reranking").

Owns: the candidate pool a reranker sees (:class:`RerankCandidate`, built by
:func:`pool` from one ranking), the check of what a reranker returns
(:func:`order`), and the built-in reranker that needs no model, maximal marginal
relevance (:class:`MMR`). Imports the recall module, the engine's view, the
projections and the errors. A reranker is Python code, so this seam is not on the
wire: the JSON contract, HTTP and MCP never take one.

The protocol: ``rerank(query, candidates) -> ids``. ``candidates`` is every
candidate recall ranked that passes the ``history`` filter, best first, *before*
the cut to ``k``: each with its id, text, status, score and rank. The reranker
returns candidate ids, best first: a permutation of the pool or a part of it (the
ids it leaves out are dropped); the first ``k`` are the results. A reranker whose
``wants_vectors`` attribute is true also gets each candidate's unit vector (its
embedding when every candidate has one, else its HRR content vector), so that it
can compare candidates with each other. It runs outside the store's lock (a slow
model never holds writers up); a candidate that stopped being one while it ran
(forgotten, or with a status the ``history`` option no longer allows) is left out
(:func:`verdict`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec
import numpy as np

from holomem.api.engine import Store, View
from holomem.api.memory.facts.records import wanted
from holomem.api.memory.recall.explanation import explain_many
from holomem.api.memory.recall.rank import Candidate, Ranking, recalled, wanted_codes
from holomem.api.memory.types import Explanation, Recalled
from holomem.errors import InvalidError
from holomem.projections.hrr import D, unpack
from holomem.projections.temporal import STATUSES


class RerankCandidate(NamedTuple):
    """One candidate of the pool, as a reranker sees it."""

    id: str
    text: str
    status: str
    score: float  # recall's score (fused score times the multipliers)
    rank: int  # 1-based place in recall's own order (the pool's order)
    lexical_score: float
    semantic_score: float | None
    #: its unit vector (float32), only for a reranker that ``wants_vectors``
    vector: np.ndarray | None = None


#: ``(query, candidates) -> candidate ids, best first``.
Reranker = Callable[[str, Sequence[RerankCandidate]], Sequence[str]]


def wants_vectors(reranker: object) -> bool:
    return bool(getattr(reranker, "wants_vectors", False))


def pool(view: View, pool_of: Sequence[Candidate], vectors: bool) -> list[RerankCandidate]:
    """The pool of ``pool_of`` (recall's candidates, best first), with unit vectors
    when asked for: the embeddings if every candidate has one, else HRR content."""
    slots = [c.slot for c in pool_of]
    vecs: list[np.ndarray | None] = [None] * len(slots)
    if vectors and slots:
        vecs = list(_vectors(view, slots))
    return [RerankCandidate(id=view.id_of(c.slot), text=view.record(c.slot).text,
                            status=c.status, score=c.score, rank=n,
                            lexical_score=c.lexical, semantic_score=c.semantic,
                            vector=vecs[n - 1])
            for n, c in enumerate(pool_of, start=1)]


def _vectors(view: View, slots: list[int]) -> np.ndarray:
    emb = [view.embeddings.vector(s) for s in slots]
    rows: np.ndarray
    if all(e is not None for e in emb):
        rows = np.array(emb, dtype=np.float32)
    else:
        rows = unpack(view.hrr().content.view()[np.array(slots)]) / np.float32(np.sqrt(D))
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    out: np.ndarray = rows / np.where(norms > 0, norms, 1)
    return out


def order(returned: object, candidates: Sequence[RerankCandidate]) -> list[str]:
    """The ids a reranker returned, checked: a sequence of distinct candidate ids.

    Errors: ``invalid_request`` saying what is wrong with the reranker's answer.
    """
    if isinstance(returned, (str, bytes)) or not isinstance(returned, Sequence):
        raise InvalidError("the reranker must return a sequence of candidate ids, got "
                           f"{type(returned).__name__}")
    known = {c.id for c in candidates}
    seen: set[str] = set()
    out: list[str] = []
    for i, fid in enumerate(returned):
        if not isinstance(fid, str):
            raise InvalidError(f"the reranker returned {type(fid).__name__} at position "
                               f"{i}, not a candidate id")
        if fid not in known:
            raise InvalidError(f"the reranker returned {fid!r} at position {i}, which is "
                               "not one of its candidates")
        if fid in seen:
            raise InvalidError(f"the reranker returned {fid!r} twice")
        seen.add(fid)
        out.append(fid)
    return out


#: The built-in MMR's λ: the share of relevance against novelty (see :class:`MMR`).
MMR_LAMBDA = 0.7


class MMR:
    """Maximal marginal relevance: a reranker that trades relevance for variety.

    It picks candidates one at a time; the next is the one maximising
    ``λ · relevance - (1 - λ) · (its highest cosine with a candidate already picked)``,
    where relevance is recall's score divided by the pool's best (so in [0, 1]) and
    the cosine is of the candidates' vectors (embeddings, else HRR content). With
    λ = 1 it keeps recall's order; lower λ pushes near-duplicates of a picked
    candidate down. Ties keep recall's order. Deterministic; no model.

    Args:
        lambda_: λ in [0, 1] (default :data:`MMR_LAMBDA`).

    Errors: ``invalid_request`` for a λ outside [0, 1].
    """

    wants_vectors = True

    def __init__(self, lambda_: float = MMR_LAMBDA) -> None:
        if isinstance(lambda_, bool) or not isinstance(lambda_, (int, float)) or not (
                0.0 <= lambda_ <= 1.0):
            raise InvalidError("MMR lambda_ must be a number in [0, 1]")
        self.lambda_ = float(lambda_)

    def __repr__(self) -> str:
        return f"MMR(lambda_={self.lambda_})"

    def __call__(self, query: str, candidates: Sequence[RerankCandidate]) -> list[str]:
        n = len(candidates)
        if n < 2:
            return [c.id for c in candidates]
        best = max(c.score for c in candidates)
        rel = np.array([c.score / best if best > 0 else 0.0 for c in candidates])
        vecs = np.array([c.vector if c.vector is not None else np.zeros(1) for c in candidates])
        if vecs.ndim != 2:  # a caller's pool without vectors: relevance alone
            return [candidates[int(i)].id for i in np.argsort(-rel, kind="stable")]
        lam = self.lambda_
        nearest = np.full(n, -np.inf)  # highest cosine with what was picked
        left = np.ones(n, dtype=bool)
        picked: list[int] = []
        for _ in range(n):
            penalty = np.where(np.isfinite(nearest), nearest, 0.0)
            gain = np.where(left, lam * rel - (1 - lam) * penalty, -np.inf)
            i = int(np.argmax(gain))  # the first maximum: ties keep recall's order
            picked.append(i)
            left[i] = False
            nearest = np.maximum(nearest, vecs @ vecs[i])
        return [candidates[i].id for i in picked]


# -- recall and explain with a reranker -------------------------------------------------
def _checked(reranker: object) -> Reranker:
    if not callable(reranker):
        raise InvalidError("rerank must be a callable (query, candidates) -> ids")
    return reranker


def _ranked(store: Store, query: str, ranking_of: Callable[[View], Ranking],
            reranker: Reranker) -> tuple[list[RerankCandidate], list[str]]:
    """The pool (read under the lock) and the reranker's checked order (run outside)."""
    def read(view: View) -> list[RerankCandidate]:
        ranking = ranking_of(view)
        history = ranking.options.history
        return pool(view, [c for c in ranking.rank()[1] if wanted(history, c.status)],
                    wants_vectors(reranker))

    candidates = store.read(read)
    return candidates, order(reranker(query, candidates), candidates)


class Verdict(NamedTuple):
    """What the reranker's order decided, as the read after it sees the store."""

    place: dict[str, int]  # each id the reranker returned -> its 1-based place
    kept: list[tuple[int, str]]  # (slot, status) of those still candidates, in its order
    results: set[str]  # the ids of the k results (the first k of ``kept``)
    dropped: set[str]  # ids it returned that stopped being candidates while it ran
    pool: set[str]  # the ids it was given
    k: int


def verdict(ranking: Ranking, ids: Sequence[str], pool_ids: set[str]) -> Verdict:
    """The reranker's order ``ids`` read again under ``ranking`` (a later view than the
    pool's): an id stays a candidate only while the first read would still let it in —
    stored, held by the restriction (namespace, subject, entities, filter), known at
    ``known_at``, and of a status the ``history`` option allows at the ranking's time.
    A write while the reranker ran can forget a candidate, or supersede it (or, by
    forgetting its successor, make it current again): the first ``k`` that still pass
    are the results."""
    view, o = ranking.view, ranking.options
    facts = view.facts
    slots = np.array([view.slot(i) for i in ids], dtype=np.int64)
    keep = slots >= 0
    if ranking.allowed is not None:
        keep[keep] = ranking.allowed[slots[keep]]
    if o.known_at is not None:
        held = slots[keep]
        keep[keep] = ~facts.is_fact.view()[held] | (facts.ingest.view()[held] <= o.known_at)
    codes = np.zeros(len(slots), dtype=np.int64)
    codes[keep] = facts.status_codes(slots[keep], ranking.at, o.known_at)
    keep &= wanted_codes(o.history, codes)
    kept = [(int(slots[n]), STATUSES[int(codes[n])]) for n in np.flatnonzero(keep).tolist()]
    dropped = {ids[n] for n in np.flatnonzero(~keep).tolist()}
    return Verdict({fid: n for n, fid in enumerate(ids, start=1)}, kept,
                   {view.id_of(slot) for slot, _ in kept[: o.k]}, dropped, pool_ids, o.k)


def annotate(e: Explanation, v: Verdict) -> Explanation:
    """``e`` with the reranker's verdict: its place in the reranker's order and
    whether that put it among the ``k`` results."""
    pos = v.place.get(e.id) if e.id in v.pool else None
    retrieved = e.id in v.results
    before = f"recall's own rank {e.rank}" if e.rank is not None else "no rank of recall's"
    if retrieved:
        reason = f"retrieved: the reranker placed it {pos} ({before})"
    elif pos is not None and e.id in v.dropped:
        reason = (f"the reranker placed it {pos}, but while the reranker ran it was "
                  f"forgotten or stopped passing the history option ({before})")
    elif pos is not None:
        reason = f"the reranker placed it {pos}, below the k={v.k} results ({before})"
    elif e.id in v.pool:
        reason = f"the reranker left it out ({before})"
    else:
        reason = e.reason  # not in the pool: recall's own reason holds
    return msgspec.structs.replace(e, retrieved=retrieved, reranked_rank=pos, reason=reason)


def recall(store: Store, query: str, ranking_of: Callable[[View], Ranking],
           reranker: object) -> list[Recalled]:
    """Recall through ``reranker``: its order of the pool decides the k results."""
    fn = _checked(reranker)
    candidates, ids = _ranked(store, query, ranking_of, fn)
    score = {c.id: c.score for c in candidates}

    def read(view: View) -> list[Recalled]:
        ranking = ranking_of(view)
        v = verdict(ranking, ids, set(score))
        chosen = v.kept[: v.k]
        found = [(slot, score[view.id_of(slot)]) for slot, _ in chosen]
        why = None
        if ranking.options.explain:
            why = [annotate(e, v)
                   for e in explain_many(ranking, [s for s, _ in found], results=True)]
        return recalled(ranking, found, why, [status for _, status in chosen])

    return store.read(read)


def explain(store: Store, query: str, fid: str, ranking_of: Callable[[View], Ranking],
            reranker: object, check: Callable[[View], int]) -> Explanation:
    """Explain ``fid`` under ``reranker`` (``check(view)`` gives its slot or raises)."""
    fn = _checked(reranker)
    candidates, ids = _ranked(store, query, ranking_of, fn)

    def read(view: View) -> Explanation:
        ranking = ranking_of(view)
        e = explain_many(ranking, [check(view)])[0]
        return annotate(e, verdict(ranking, ids, {c.id for c in candidates}))

    return store.read(read)
