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
another lexical weight w (score = w * bm25/max + (1 - w) * max(cosine, 0)),
reciprocal-rank fusion, score = w / (k + lexical rank) + (1 - w) / (k + semantic
rank), ranks counted from 1 among the documents that have that signal (a missing
signal adds nothing), or the bounded fusion, where neither signal's part is inflated
by the other candidates being weak:

    score = w * bm25 / max(max_bm25, word_ceiling)
          + (1 - w) * exp((c - c_best) / SEMANTIC_TEMPERATURE),   c = max(cosine, 0)

``word_ceiling`` is the most one word can add to a document's score in this store
(idf * (k1 + 1) of a term one document holds: BM25.word_ceiling), so a match on a
single word never counts as the full lexical part just because nothing else
matched; ``c_best`` is the best c among the candidates, and the semantic part (0
for every candidate when c_best is 0) falls by a factor e for every
SEMANTIC_TEMPERATURE of cosine below the best, so a clearly better semantic match
keeps a clear lead over the rest instead of the few hundredths of raw cosine
MiniLM spreads its answers over. Both parts lie in [0, 1]. Only the best cosine and
a document's own enter its semantic part, and the semantic part rises with the
cosine: like the linear fusion's, its top k needs only the k best cosines and every
lexical match (:meth:`holomem.api.engine.view.View.fused`'s ``depth``).

The floored fusion (what a memory with an embedder uses unless its configuration
names another) is the bounded one with a fixed floor under the lexical scale instead
of the word ceiling:

    score = w * bm25 / max(max_bm25, LEXICAL_FLOOR)
          + (1 - w) * exp((c - c_best) / SEMANTIC_TEMPERATURE)

BM25 is in absolute units (a term matched once in a document of average length adds
about its idf, the log of how rare it is), so a best match below LEXICAL_FLOOR is weak
evidence whatever the store: it is not inflated to the full lexical part. The word
ceiling grows with the store (log N), so under the bounded fusion a match on one rare
word in a store of a few hundred facts counts for a third of the lexical part, though
such a match is often the answer; the floor leaves it whole and still keeps a match
on a word that one fact in a handful holds (every word of a small store) from beating a
clearly better semantic match.
Document search always uses the default.

Ranking: score descending, then slot ascending (the order documents were written),
so equal scores always come back in the same order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

W_LEXICAL = 0.5
W_SEMANTIC = 0.5
#: The floored fusion's least lexical scale, in BM25's units: what one match on a word
#: held by about one document in fifty adds (idf ~ 4). A best BM25 below it is a weak
#: hit (a word that one fact in a handful holds scores 1-2). Recall on the LoCoMo
#: development set is the same for any floor from 3 to 5 (its best matches are
#: stronger); the paraphrase tests need one above 3.
LEXICAL_FLOOR = 4.0
#: The bounded fusion's semantic scale: a candidate this much cosine below the best
#: gets 1/e of the best's semantic part (a cosine gap of 0.2 separates a related
#: sentence from an unrelated one for MiniLM-sized sentence encoders).
SEMANTIC_TEMPERATURE = 0.2


class FusionParams(NamedTuple):
    """How a query's two signals combine: ``method`` "linear", "bounded", "floored" or
    "rrf"; the lexical signal's weight (the semantic one gets the rest); RRF's rank
    offset ``rrf_k``."""

    method: str = "linear"
    lexical_weight: float = W_LEXICAL
    rrf_k: int = 60


DEFAULT_FUSION = FusionParams()
#: A memory with an embedder fuses with this unless its configuration names a fusion:
#: the floored fusion at the lexical weight the bounded fusion's paraphrase tests use.
#: On the LoCoMo development set (benchmarks/fusion_study.py, benchmarks/locomo.py) it
#: finds as many answers in the top 10 as the linear fusion at 0.4 (the default before
#: it) with the context policy, and the paraphrase questions' right facts first.
EMBEDDER_FUSION = FusionParams("floored", 0.55)
#: The fusions whose semantic part is exp((c - c_best) / SEMANTIC_TEMPERATURE).
SHARPENED = ("bounded", "floored")


class Fusion(NamedTuple):
    slots: np.ndarray  # int64
    score: np.ndarray  # float64
    lexical: np.ndarray  # float64, raw BM25 (0 where no lexical match)
    semantic: np.ndarray | None  # float64 cosine, or None without a query embedding
    #: what the fusion divided BM25 by (0.0: nothing, or no lexical match) and the best
    #: max(cosine, 0) among the candidates (0.0 without a query embedding): with the
    #: weights, what :func:`parts` needs to take a fused score apart
    lexical_scale: float = 0.0
    semantic_best: float = 0.0

    def take(self, order: np.ndarray) -> Fusion:
        return Fusion(self.slots[order], self.score[order], self.lexical[order],
                      None if self.semantic is None else self.semantic[order],
                      self.lexical_scale, self.semantic_best)


def fuse(lexical: tuple[np.ndarray, np.ndarray],
         semantic: tuple[np.ndarray, np.ndarray] | None,
         params: FusionParams = DEFAULT_FUSION, word_ceiling: float = 0.0) -> Fusion:
    """The fused scores of every candidate (see the module docstring); ``word_ceiling``:
    the bounded fusion's floor under the lexical scale (BM25.word_ceiling)."""
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
    return aligned(slots, lex, sem, params, word_ceiling)


def aligned(slots: np.ndarray, lex: np.ndarray, sem: np.ndarray,
            params: FusionParams = DEFAULT_FUSION, word_ceiling: float = 0.0) -> Fusion:
    """:func:`fuse` (linear, bounded or floored) of candidates already gathered into
    one list: ``slots`` ascending, each one's raw BM25 ``lex`` (0: no lexical match)
    and cosine ``sem`` (0: no vector) — the same scores, bit for bit, as :func:`fuse`
    gives them from the two lists."""
    top = lex.max() if len(lex) else 0.0
    cos = np.maximum(sem, 0.0)
    best = float(cos.max()) if len(cos) else 0.0
    scale = (max(float(top), word_ceiling) if params.method == "bounded"
             else max(float(top), LEXICAL_FLOOR) if params.method == "floored"
             else float(top))
    return Fusion(slots, scored(lex, cos, params, scale, best), lex, sem, scale, best)


def scored(lex: np.ndarray, cos: np.ndarray, params: FusionParams, scale: float,
           best: float) -> np.ndarray:
    """The linear, bounded or floored fused score of raw BM25 ``lex`` and ``cos``
    (max(cosine, 0)) when the candidates' lexical scale is ``scale`` and their best
    ``cos`` is ``best`` (a :class:`Fusion`'s ``lexical_scale`` and ``semantic_best``):
    what a document with those signals scores among those candidates."""
    w = params.lexical_weight
    lex_part = lex / scale if scale > 0 else lex
    if params.method in SHARPENED:
        out: np.ndarray = w * lex_part + (1.0 - w) * semantic_part(cos, best)
    elif params == DEFAULT_FUSION:  # spelled out: the same floating-point steps as ever
        out = W_LEXICAL * lex_part + W_SEMANTIC * cos
    else:
        out = w * lex_part + (1.0 - w) * cos
    return out


def semantic_part(cos: np.ndarray, best: float) -> np.ndarray:
    """The bounded and floored fusions' semantic part of ``cos`` (max(cosine, 0)) when the best
    candidate's is ``best``: 1 at the best, 1/e every SEMANTIC_TEMPERATURE below it;
    0 when no candidate has a positive cosine."""
    if best <= 0:
        return np.zeros(len(cos))
    out: np.ndarray = np.exp((cos - best) / SEMANTIC_TEMPERATURE)
    return out


def parts(params: FusionParams, fused: Fusion, lexical: float, semantic: float | None
          ) -> tuple[float, float] | None:
    """(lexical part, semantic part) of one candidate of ``fused`` (its raw BM25 and
    cosine) under the linear, bounded or floored fusion: w * the first + (1 - w) * the
    second is its fused score (before any context share). None for RRF or without a
    vector."""
    if semantic is None or params.method == "rrf":
        return None
    scale = fused.lexical_scale
    lex = lexical / scale if scale > 0 else lexical
    cos = max(semantic, 0.0)
    if params.method in SHARPENED:
        return lex, float(semantic_part(np.array([cos]), fused.semantic_best)[0])
    return lex, cos


_BLOCK = 64


def threshold(scores: np.ndarray, k: int) -> float:
    """A value that at least ``k`` scores reach (so every top-k score reaches it).

    Found among the maxima of blocks of 64 scores: if k blocks have a maximum of
    at least t, at least k scores are at least t. Much faster than a partition of
    every score when there are many (a partition of 100,000 floats takes ~1 ms);
    with at most 64 * k scores, their k-th best (a recall's few hundred candidates:
    the ranking after it then sorts about k of them, not all).
    """
    n = len(scores)
    if n <= k:
        return float(scores.min())
    if n <= _BLOCK * k:  # (few: the k-th best itself, as cheap as the maxima)
        return float(np.partition(scores, n - k)[n - k])
    # The maxima of blocks [0, 64), [64, 128), ... and the last, shorter, one: in one call.
    maxima = np.maximum.reduceat(scores, np.arange(0, n, _BLOCK))
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
