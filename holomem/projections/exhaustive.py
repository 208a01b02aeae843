"""Exhaustive BM25: every posting of a query's terms scored, where pruning would not pay.

Owns: :class:`QueryTerm` (a query term as one revision of the index reads it), the
per-revision :class:`Memo` of query terms and their contributions, and :func:`scored`,
the sum of the contributions per document with the cut to those that may be among the
k best. Imports numpy and :mod:`holomem.projections.fusion` (the cut's threshold);
:mod:`holomem.projections.bm25` finds the terms and keys the memo.

Why a memo: a term's contribution to each document holding it, ``w * tf / (tf + k1 *
(1 - b + b * len / avglen))``, depends on the revision (the live count, every length)
but not on the query, and queries share their common words. Until the next write the
memo keeps, for each term queried, its weight, postings and (up to ``MEMO_POSTINGS`` of
them) its contributions, computed by the same products as ever: a query then costs a
concatenation, a sum and a cut, not five array passes per term. Any write starts a new
memo (the index changes its key), so nothing is ever answered from an older revision.

Bit for bit: contributions are added per document in query-term order (``bincount``
adds its weights in input order), as they always were, so every score is the same
double whichever path computed it (tests/store/test_search_exhaustive.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holomem.projections.fusion import threshold

#: Contributions (8 bytes each, beside their slots) one revision's memo keeps at most.
MEMO_POSTINGS = 1 << 20
#: Terms one revision's memo keeps at most (then it starts again).
MEMO_TERMS = 4096

_NO_SLOTS = np.zeros(0, dtype=np.int64)
_NO_SCORES = np.zeros(0, dtype=np.float64)


class QueryTerm:
    """A query term with live documents, as one revision reads it: ``weight`` (idf *
    (k1 + 1)), ``parts`` ((segment, or None for the delta; slots; frequencies) of each
    part holding it, slots ascending, vacated ones included) and their ``postings``."""

    __slots__ = ("parts", "postings", "scored", "tid", "weight")

    def __init__(self, tid: int, weight: float, parts: list[tuple[Any, np.ndarray, np.ndarray]]
                 ) -> None:
        self.tid = tid
        self.weight = weight
        self.parts = parts
        self.postings = sum(len(p[1]) for p in parts)
        #: (live slots ascending, the term's contribution to each), once computed
        self.scored: tuple[np.ndarray, np.ndarray] | None = None


class Memo:
    """The query terms of one revision (``key``), by term id, and how many
    contributions they hold."""

    __slots__ = ("contributions", "key", "terms")

    def __init__(self, key: tuple[int, ...]) -> None:
        self.key = key
        self.terms: dict[int, QueryTerm] = {}
        self.contributions = 0

    def keep(self, term: QueryTerm) -> None:
        if len(self.terms) >= MEMO_TERMS:
            self.terms.clear()
            self.contributions = 0
        self.terms[term.tid] = term


def contributions(term: QueryTerm, alive: np.ndarray | None, norms: np.ndarray,
                  memo: Memo) -> tuple[np.ndarray, np.ndarray]:
    """(live slots ascending, the term's BM25 contribution to each): ``alive`` masks
    vacated slots (None: none); ``norms``: each slot's ``k1 * (1 - b + b * len /
    avglen)``. Kept on the term while the memo has room."""
    if term.scored is not None:
        return term.scored
    parts = term.parts
    if len(parts) == 1:
        slots, tfs = parts[0][1], parts[0][2]
    else:
        slots = np.concatenate([p[1] for p in parts])
        tfs = np.concatenate([p[2] for p in parts])
    if alive is not None:
        keep = alive[slots]
        slots, tfs = slots[keep], tfs[keep]
    tf = tfs.astype(np.float64)
    out = (slots, term.weight * tf / (tf + norms[slots]))
    if memo.contributions + len(slots) <= MEMO_POSTINGS:
        memo.contributions += len(slots)
        term.scored = out
    return out


def scored(terms: list[QueryTerm], alive: np.ndarray | None, allowed: np.ndarray | None,
           norms: np.ndarray, memo: Memo, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """BM25 of the documents holding any of ``terms`` (in query order): (slots
    ascending, scores). ``allowed`` (a slot mask) restricts the documents returned;
    with ``k``, only those that may be among the k best are (every one whose score
    reaches a value k scores reach: ties at the k-th included), when their scores are
    summed over every slot; otherwise all of them."""
    pairs = [contributions(t, alive, norms, memo) for t in terms]
    if not pairs:
        return _NO_SLOTS, _NO_SCORES
    if len(pairs) == 1:
        all_s, all_v = pairs[0]
    else:
        all_s = np.concatenate([p[0] for p in pairs])
        all_v = np.concatenate([p[1] for p in pairs])
    if allowed is not None:
        keep = allowed[all_s]
        all_s, all_v = all_s[keep], all_v[keep]
    if not len(all_s):
        return _NO_SLOTS, _NO_SCORES
    if len(all_s) * 8 < len(norms):
        # The distinct slots by a stable sort; bincount then adds each slot's
        # contributions in term order, as the dense sum below does.
        order = np.argsort(all_s, kind="stable")
        ordered = all_s[order]
        edge = np.empty(len(ordered), dtype=bool)
        edge[0] = True
        np.not_equal(ordered[1:], ordered[:-1], out=edge[1:])
        inv = np.empty(len(ordered), dtype=np.int64)
        inv[order] = np.cumsum(edge) - 1
        return ordered[edge].astype(np.int64), np.bincount(inv, weights=all_v)
    dense = np.bincount(all_s, weights=all_v, minlength=len(norms))
    # Every matching document scores above 0 (every weight and frequency is), so a
    # cut of 0 (fewer than k blocks hold a match) keeps exactly the matches.
    cut = threshold(dense, k) if k else 0.0
    uniq: np.ndarray = (dense >= cut if cut > 0 else dense != 0).nonzero()[0]
    return uniq, dense[uniq]
