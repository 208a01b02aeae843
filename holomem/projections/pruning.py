"""Exact top-k BM25 without scoring every matching document (max-score pruning).

Owns: the evaluation behind :meth:`holomem.projections.bm25.BM25.top`. Imports
numpy only: BM25 hands in each query term's weight, the bound on its
contribution and its postings.

With the query terms sorted by bound, the cheapest ones whose bounds add up
below θ — a score that k documents are already known to reach — are
*non-essential*: a document holding none of the other terms scores below θ and
cannot be among the k best, nor tie the k-th. So:

1. walk the terms from the largest bound down, scoring each one's postings,
   and raise θ to the k-th largest single contribution seen, until the bounds of
   the terms left sum below θ (those are the non-essential ones);
2. the candidates are the documents of the terms scored; θ rises to the k-th
   largest of their partial sums, and a candidate whose partial sum plus the
   non-essential bounds stays below θ is dropped; then, for each non-essential
   term from the largest bound down, its exact share (by binary search) replaces
   its bound in every candidate's sum, θ rises again, and candidates drop;
3. each survivor's score is computed again from scratch, term by term in query
   order, the postings found by binary search — the same products and the same
   additions, in the same order, as the exhaustive scoring, so the same bits.

Bounds and comparisons carry a relative slack of ``SLACK`` so that rounding can
only keep a document, never drop one.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

SLACK = 1e-9

Postings = tuple[np.ndarray, np.ndarray]  # (slots ascending, tfs)


class Term(NamedTuple):
    weight: float  # idf * (k1 + 1)
    bound: float  # no contribution of this term exceeds it
    parts: list[Postings]  # disjoint slot ranges, ascending; vacated slots included


def _contributions(term: Term, norms: np.ndarray, keep: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(slots, contribution) over the term's postings that ``keep`` admits."""
    parts = term.parts
    slots = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
    tfs = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
    if keep is not None:
        sel = keep[slots]
        slots, tfs = slots[sel], tfs[sel]
    tf = tfs.astype(np.float64)
    return slots, term.weight * tf / (tf + norms[slots])


def _kth(values: np.ndarray, k: int) -> float:
    """The k-th largest value (or 0.0 when there are fewer)."""
    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def top(terms: list[Term], k: int, norms: np.ndarray, keep: np.ndarray | None
        ) -> tuple[np.ndarray, np.ndarray]:
    """Slots (ascending) and exact scores of a set of documents holding the top k.

    ``terms`` in query order; ``keep``: the slots that may be returned (live and
    allowed; None: every slot in the postings).
    """
    order = sorted(range(len(terms)), key=lambda i: terms[i].bound)
    prefix = np.cumsum([terms[i].bound for i in order]).tolist()
    theta = 0.0
    scored: list[tuple[np.ndarray, np.ndarray]] = []
    j = len(order)
    while j > 0 and not prefix[j - 1] * (1.0 + SLACK) < theta:
        j -= 1
        slots, contrib = _contributions(terms[order[j]], norms, keep)
        scored.append((slots, contrib))
        theta = max(theta, _kth(contrib, k))
    rest = prefix[j - 1] * (1.0 + SLACK) if j else 0.0
    # The candidates and their partial sums (each document once). Each term's slots
    # are sorted, so a stable sort of their concatenation merges sorted runs.
    if len(scored) == 1:
        cand, partial = scored[0]
    else:
        all_s = np.concatenate([x[0] for x in scored])
        all_v = np.concatenate([x[1] for x in scored])
        by_slot = np.argsort(all_s, kind="stable")
        all_s, all_v = all_s[by_slot], all_v[by_slot]
        edge = np.empty(len(all_s), dtype=bool)
        edge[:1] = True
        np.not_equal(all_s[1:], all_s[:-1], out=edge[1:])
        starts = np.flatnonzero(edge)
        cand, partial = all_s[starts], np.add.reduceat(all_v, starts)
    theta = max(theta, _kth(partial, k))
    keep_c = partial + rest >= theta * (1.0 - SLACK)
    survivors, partial = cand[keep_c].astype(np.int64), partial[keep_c]
    # The non-essential terms, largest bound first: each one's exact share replaces
    # its bound, and the candidates that can no longer reach θ drop out.
    for i in reversed(order[:j]):
        if len(survivors) <= k:
            break
        rest -= terms[i].bound
        partial = partial + _lookup(terms[i], survivors, norms)
        theta = max(theta, _kth(partial, k))
        keep_c = partial + max(rest, 0.0) * (1.0 + SLACK) >= theta * (1.0 - SLACK)
        survivors, partial = survivors[keep_c], partial[keep_c]
    survivors.sort()
    return survivors, _rescore(terms, survivors, norms)


def _lookup(term: Term, slots: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """The term's contribution to each of ``slots`` (0 where absent); any order."""
    out = np.zeros(len(slots))
    for p_slots, p_tfs in term.parts:
        if not len(p_slots):
            continue
        at = np.searchsorted(p_slots, slots)
        np.minimum(at, len(p_slots) - 1, out=at)
        hit = np.flatnonzero(p_slots[at] == slots)
        if len(hit):
            tf = p_tfs[at[hit]].astype(np.float64)
            out[hit] = term.weight * tf / (tf + norms[slots[hit]])
    return out


def _rescore(terms: list[Term], slots: np.ndarray, norms: np.ndarray) -> np.ndarray:
    """Exact scores of ``slots`` (ascending), summed in query order (adding a term's 0
    where it is absent leaves a sum's bits as they are)."""
    acc = np.zeros(len(slots))
    if len(slots):
        for term in terms:
            acc += _lookup(term, slots, norms)
    return acc
