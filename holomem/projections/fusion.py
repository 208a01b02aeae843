"""Fusing lexical and semantic scores, and the deterministic top-k.

Owns: how BM25 and cosine combine into one score, and the ranking order. Imports
numpy.

Without an embedding in the query the score *is* the BM25 score, unchanged.
With one, every live document that has an embedding or matches lexically is a
candidate, and

    score = W_LEXICAL * bm25 / max_bm25  +  W_SEMANTIC * max(cosine, 0)

where ``max_bm25`` is the best BM25 score among the candidates (so the lexical
part lies in [0, 1] like the semantic part), a document without a lexical match
has bm25 = 0, and one without an embedding has cosine = 0. W_LEXICAL = W_SEMANTIC
= 0.5. HRR similarity is not fused by default: on the LoCoMo development set it
did not help (benchmarks/locomo.py records the measurement).

A memory can choose another fusion (:class:`FusionParams`): the linear one with
another lexical weight w (score = w * bm25/max + (1 - w) * max(cosine, 0)), or
reciprocal-rank fusion, score = w / (k + lexical rank) + (1 - w) / (k + semantic
rank), ranks counted from 1 among the documents that have that signal (a missing
signal adds nothing). Document search always uses the default.

Ranking: score descending, then slot ascending (the order documents were written),
so equal scores always come back in the same order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

W_LEXICAL = 0.5
W_SEMANTIC = 0.5


class FusionParams(NamedTuple):
    """How a query's two signals combine: ``method`` "linear" or "rrf"; the lexical
    signal's weight (the semantic one gets the rest); RRF's rank offset ``rrf_k``."""

    method: str = "linear"
    lexical_weight: float = W_LEXICAL
    rrf_k: int = 60


DEFAULT_FUSION = FusionParams()
#: A memory with an embedder fuses with this unless its configuration names a fusion:
#: chosen on the LoCoMo development set (benchmarks/fusion_study.py), where it ranked
#: best with the context policy and within noise of the best without it.
EMBEDDER_FUSION = FusionParams("linear", 0.4)


class Fusion(NamedTuple):
    slots: np.ndarray  # int64
    score: np.ndarray  # float64
    lexical: np.ndarray  # float64, raw BM25 (0 where no lexical match)
    semantic: np.ndarray | None  # float64 cosine, or None without a query embedding

    def take(self, order: np.ndarray) -> Fusion:
        return Fusion(self.slots[order], self.score[order], self.lexical[order],
                      None if self.semantic is None else self.semantic[order])


def fuse(lexical: tuple[np.ndarray, np.ndarray],
         semantic: tuple[np.ndarray, np.ndarray] | None,
         params: FusionParams = DEFAULT_FUSION) -> Fusion:
    lex_slots, lex_scores = lexical
    if semantic is None:
        return Fusion(lex_slots, lex_scores, lex_scores, None)
    sem_slots, cosine = semantic
    slots = np.union1d(lex_slots, sem_slots)
    lex = np.zeros(len(slots))
    lex_at = np.searchsorted(slots, lex_slots)
    lex[lex_at] = lex_scores
    sem = np.zeros(len(slots))
    sem_at = np.searchsorted(slots, sem_slots)
    sem[sem_at] = cosine
    w = params.lexical_weight
    if params.method == "rrf":
        score = np.zeros(len(slots))
        for at, values, weight in ((lex_at, lex_scores, w), (sem_at, cosine, 1.0 - w)):
            ranks = np.empty(len(at))
            ranks[np.lexsort((slots[at], -values))] = np.arange(1, len(at) + 1)
            score[at] += weight / (params.rrf_k + ranks)
        return Fusion(slots, score, lex, sem)
    top = lex.max() if len(lex) else 0.0
    lex_part = lex / top if top > 0 else lex
    if params == DEFAULT_FUSION:  # spelled out: the same floating-point steps as ever
        score = W_LEXICAL * lex_part + W_SEMANTIC * np.maximum(sem, 0.0)
    else:
        score = w * lex_part + (1.0 - w) * np.maximum(sem, 0.0)
    return Fusion(slots, score, lex, sem)


_BLOCK = 64


def threshold(scores: np.ndarray, k: int) -> float:
    """A value that at least ``k`` scores reach (so every top-k score reaches it).

    Found among the maxima of blocks of 64 scores: if k blocks have a maximum of
    at least t, at least k scores are at least t. Much faster than a partition of
    every score when there are many (a partition of 100,000 floats takes ~1 ms).
    """
    n = len(scores)
    # The maxima of blocks [0, 64), [64, 128), ... and the last, shorter, one: in one call.
    maxima = np.maximum.reduceat(scores, np.arange(0, n, _BLOCK))
    if len(maxima) <= k:
        return float(scores.min())
    return float(np.partition(maxima, len(maxima) - k)[len(maxima) - k])


def top_k(slots: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best entries: score descending, then slot ascending."""
    n = len(scores)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    # Everything scoring at least a threshold that k scores reach (ties at the
    # boundary included), then an exact ordering of that small set.
    cand = (scores >= threshold(scores, k)).nonzero()[0] if k < n else np.arange(n)
    order = np.lexsort((slots[cand], -scores[cand]))
    out: np.ndarray = cand[order[:k]]
    return out
