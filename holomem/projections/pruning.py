"""Exact top-k BM25 from the best postings of each term, not from every posting.

Owns: the evaluation behind :meth:`holomem.projections.bm25.BM25.top`. Imports numpy
and :mod:`holomem.projections.impact`: BM25 hands in each query term's weight and its
postings, in parts (one per segment, one for the delta), each with the part's
:class:`~holomem.projections.impact.Impact` when its list is long.

*Heads and bounds.* A long list is read as its impact groups, sorted by contribution,
largest first. Taking a term's ``j`` best groups (its *head*) leaves a bound ``u``: no
document outside the head gets more than ``u`` from the term (the contribution of the
best group not taken; 0 once every group is taken). Short lists are always read
whole. Given θ, a score that k admissible documents are known to reach, any choice of
heads whose bounds sum below θ holds every document that can be among the k best, or
tie the k-th: one in no head scores less than that sum.

*The evaluation.*

1. θ comes from exact scores: first of the documents of small heads (the choice of at
   most ``FIRST`` postings a term with the smallest sum of bounds), then, while the
   cheapest choice of heads for θ is more than ``GROW`` times what was scored, of a
   choice ``GROW`` times larger (θ only rises). A choice read for θ whose bounds sum
   below the θ it gave is the final one.
2. The cheapest choice for θ — fewest postings with bounds summing below θ — is found
   by a sweep of Lagrange multipliers over the terms' (postings, bound) curves, all
   terms and multipliers in one array operation.
3. Each document of that choice gets an upper bound: the sum of the bounds, plus, for
   each term whose head (or short list) holds it, its contribution there minus the
   term's bound. Those whose bound stays below θ are dropped unread; the others are
   scored exactly, and the ones reaching the k-th of those scores are returned.
4. Exact scores: each term's contribution by the same products as the exhaustive
   scoring, added in query order, so they are the same bits
   (tests/store/test_search_pruning.py).

Bounds are compared with a relative slack (``SLACK`` for exact values, ``LOOSE`` for the
sums of float32 values of step 3) so that rounding can only keep a document, never drop
one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from holomem.projections.impact import Impact, column

SLACK = 1e-9
LOOSE = 1e-5
#: Postings a term of the first heads (step 1).
FIRST = 1024
#: How much larger than what was scored the final heads may be before θ is sought further.
GROW = 8
#: Final heads of at most this many postings are always taken at once.
FLOOR = 1 << 15
#: Candidate sets of fewer than one posting in SPARSE of the slots are merged by sorting,
#: larger ones in an array over every slot.
SPARSE = 32
#: A list read for more than a quarter of its length, and longer than this, is looked
#: up through a dense column built for the query.
COLUMN_MIN = 4096
#: Breakpoints kept of a term's curve (a sample of its groups, denser at the top).
POINTS = 96
#: Terms read before the others, largest bound first, to drop candidates early.
AHEAD = 4


class Part(NamedTuple):
    lo: int  # the part's slots are in [lo, hi)
    hi: int
    slots: np.ndarray  # ascending (vacated slots included)
    tfs: np.ndarray
    impact: Impact | None  # a long list's groups
    column: np.ndarray | None  # its frequency in each slot lo.., for a list that dense


class Term(NamedTuple):
    weight: float  # idf * (k1 + 1)
    parts: list[Part]


class _Curve:
    """A grouped term's groups by contribution, largest first, and the breakpoints of
    its (postings, bound) curve: breakpoint ``cut[i]`` = j takes groups 0..j-1, that is
    ``cum[i]`` postings, leaving the bound ``bound[i]`` (0 once every group is taken)."""

    __slots__ = ("bound", "c", "cum", "cut", "part", "size", "start", "top")

    def __init__(self, term: Term, norm: Callable[[np.ndarray], np.ndarray]) -> None:
        cs, parts, starts, sizes = [], [], [], []
        for i, part in enumerate(term.parts):
            imp = part.impact
            if imp is None:
                continue
            cs.append(term.weight * imp.tf / (imp.tf + norm(imp.length)))
            parts.append(np.full(len(imp.tf), i, dtype=np.int64))
            starts.append(imp.start)
            sizes.append(imp.size)
        c = np.concatenate(cs)
        order = np.argsort(-c, kind="stable")
        self.c = c[order]
        self.part = np.concatenate(parts)[order]
        self.start = np.concatenate(starts)[order]
        self.size = np.concatenate(sizes)[order]
        self.top = float(self.c[0])
        cum = np.cumsum(self.size)
        g = len(cum)
        if g + 1 <= POINTS:
            cut = np.arange(g + 1)
        else:  # a sample, denser at the top (sizes in geometric steps)
            levels = float(cum[-1]) ** (np.arange(POINTS - 2) / max(1, POINTS - 3))
            cut = np.unique(np.concatenate(
                [[0, g], np.minimum(np.searchsorted(cum, levels) + 1, g)]))
        self.cut = cut
        self.cum = np.append(0, cum)[cut].astype(np.float64)
        self.bound = np.append(self.c, 0.0)[cut]


def top(terms: list[Term], k: int, norms: np.ndarray,
        norm: Callable[[np.ndarray], np.ndarray], keep: np.ndarray | None
        ) -> tuple[np.ndarray, np.ndarray] | None:
    """Slots (ascending) and exact scores of a set of documents holding the top k, or
    None when no k admissible documents match (then every match must be scored).

    ``terms`` in query order; ``norms``: each slot's length normalisation; ``norm``: the
    same function of document lengths; ``keep``: the slots that may be returned (live
    and allowed; None: every slot in the postings).
    """
    grouped = [i for i, t in enumerate(terms) if any(p.impact is not None for p in t.parts)]
    curves = [_Curve(terms[i], norm) for i in grouped]
    plan = _Plan(curves)
    theta = 0.0
    scored = 0.0
    target = float(FIRST * max(1, len(curves)))
    while True:
        choice = plan.for_bound(theta) if theta > 0 else None
        final = choice is not None and (plan.postings(choice) <= max(GROW * scored, FLOOR)
                                        or scored >= plan.total)
        if not final:
            if scored >= plan.total:
                return None  # everything was read, and fewer than k documents are admissible
            choice = plan.for_size(target)
            scored = plan.postings(choice)
            target = GROW * max(target, scored)
        assert choice is not None
        cand, scores = _evaluate(terms, grouped, curves, choice, theta, norms, keep)
        if len(scores) >= k:
            theta = max(theta, _kth(scores, k))
        # A choice read to raise θ is final too when its bounds sum below the new θ:
        # every document it holds that can reach θ was kept and scored (θ only rose).
        if final or (theta > 0 and plan.fits(choice, theta)):
            sel = scores >= theta
            return cand[sel], scores[sel]


#: Multipliers a sweep tries between its ends, geometrically spaced (np.geomspace
#: costs more than the sweep it feeds).
_STEPS = np.arange(33) / 32


def _limit(theta: float) -> float:
    """What a choice's bounds must sum below for θ: θ less the slack that keeps a
    rounded exact score from passing the bounds' sum."""
    return theta * (1.0 - SLACK) / (1.0 + SLACK)


class _Plan:
    """The grouped terms' curves side by side, and the cheapest choices of heads."""

    def __init__(self, curves: list[_Curve]) -> None:
        m = len(curves)
        width = max((len(c.cut) for c in curves), default=1)
        self.sizes = np.full((m, width), np.inf)
        self.bounds = np.zeros((m, width))
        self.last = np.zeros(m, dtype=np.int64)
        for i, c in enumerate(curves):
            n = len(c.cut)
            self.sizes[i, :n] = c.cum
            self.bounds[i, :n] = c.bound
            self.last[i] = n - 1
        self.rows = np.arange(m)
        self.total = float(sum(float(c.cum[-1]) for c in curves))
        tops = float(sum(c.top for c in curves))
        self.scale = max(self.total, 1.0) / max(tops, 1e-300)

    def postings(self, choice: np.ndarray) -> float:
        return float(self.sizes[self.rows, choice].sum())

    def _sweep(self, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each multiplier's choice (breakpoint per term), its postings and bound sum;
        plus the two ends: no head at all, and every group."""
        cost = self.sizes[None] + lams[:, None, None] * self.bounds[None]
        picks = np.argmin(cost, axis=2)
        picks = np.vstack([np.zeros((1, len(self.rows)), dtype=np.int64), picks,
                           self.last[None]])
        sizes = self.sizes[self.rows, picks].sum(axis=1)
        bounds = self.bounds[self.rows, picks].sum(axis=1)
        return picks, sizes, bounds

    def fits(self, choice: np.ndarray, theta: float) -> bool:
        """Whether the bounds of ``choice`` sum below θ (> 0), as :meth:`for_bound`'s
        choices do."""
        return bool(self.bounds[self.rows, choice].sum() < _limit(theta))

    def for_bound(self, theta: float) -> np.ndarray:
        """The choice with the fewest postings whose bounds sum below θ (> 0)."""
        limit = _limit(theta)
        lo, hi = self.scale * 1e-6, self.scale * 1e6
        best, best_size = self.last, self.total  # every group: bound 0
        for _ in range(3):
            lams = lo * (hi / lo) ** _STEPS
            picks, sizes, bounds = self._sweep(lams)
            ok = bounds < limit
            if ok[0]:
                none: np.ndarray = picks[0]  # no head at all
                return none
            i = int(np.argmin(np.where(ok, sizes, np.inf)))
            if sizes[i] < best_size:
                best, best_size = picks[i], float(sizes[i])
            # The bound sum falls as the multiplier grows: bracket the first that fits.
            fits = np.flatnonzero(ok[1:-1])
            if not len(fits):
                lo, hi = lams[-1], lams[-1] * 1e6
            elif fits[0] == 0:
                lo, hi = lams[0] * 1e-6, lams[0]
            else:
                lo, hi = lams[fits[0] - 1], lams[fits[0]]
        return best

    def for_size(self, target: float) -> np.ndarray:
        """The choice of at most ``target`` postings with the smallest bound sum."""
        lo, hi = self.scale * 1e-6, self.scale * 1e6
        best = self.last if self.total <= target else np.zeros(len(self.rows), dtype=np.int64)
        best_bound = self.bounds[self.rows, best].sum()
        for _ in range(3):
            lams = lo * (hi / lo) ** _STEPS
            picks, sizes, bounds = self._sweep(lams)
            ok = sizes <= target
            i = int(np.argmin(np.where(ok, bounds, np.inf)))  # row 0 (no head) fits
            if bounds[i] < best_bound:
                best, best_bound = picks[i], bounds[i]
            # The postings grow with the multiplier: bracket the last that fits.
            fits = np.flatnonzero(ok[1:-1])
            if not len(fits):
                lo, hi = lams[0] * 1e-6, lams[0]
            elif fits[-1] == len(lams) - 1:
                lo, hi = lams[-1], lams[-1] * 1e6
            else:
                lo, hi = lams[fits[-1]], lams[fits[-1] + 1]
        return best


def _ranges(start: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The positions start[i] .. start[i] + size[i] - 1 of every i, back to back."""
    off = np.cumsum(size) - size
    out: np.ndarray = np.arange(int(size.sum()), dtype=np.int64) - np.repeat(off - start, size)
    return out


def _head(term: Term, curve: _Curve, pick: int, with_values: bool
          ) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(slots, contribution minus the term's bound) of each part's groups in the head at
    breakpoint ``pick`` (values only if ``with_values``)."""
    j = int(curve.cut[pick])
    if not j:
        return []
    bound = float(curve.bound[pick])
    out: list[tuple[np.ndarray, np.ndarray | None]] = []
    parts, starts, sizes, cs = curve.part[:j], curve.start[:j], curve.size[:j], curve.c[:j]
    for i in np.unique(parts).tolist():
        imp = term.parts[i].impact
        assert imp is not None
        sel = np.flatnonzero(parts == i)
        if len(sel) == len(imp.tf):  # the whole list: its groups in their own order
            sel = sel[np.argsort(starts[sel])]
            slots = imp.slots
        else:
            slots = imp.slots[_ranges(starts[sel], sizes[sel])]
        values = (np.repeat((cs[sel] - bound).astype(np.float32), sizes[sel])
                  if with_values else None)
        out.append((slots, values))
    return out


def _union(arrays: list[np.ndarray], n_slots: int) -> np.ndarray:
    """The distinct slots of ``arrays``, ascending (int64)."""
    arrays = [a for a in arrays if len(a)]
    if not arrays:
        return np.zeros(0, dtype=np.int64)
    total = sum(len(a) for a in arrays)
    if total * SPARSE < n_slots:
        flat = np.sort(np.concatenate(arrays).astype(np.int64))
        edge = np.empty(len(flat), dtype=bool)
        edge[0] = True
        np.not_equal(flat[1:], flat[:-1], out=edge[1:])
        return flat[edge]
    mark = np.zeros(n_slots, dtype=bool)
    for a in arrays:
        mark[a] = True
    return np.flatnonzero(mark)


def _kth(values: np.ndarray, k: int) -> float:
    """The k-th largest value (or 0.0 when there are fewer)."""
    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _tf(term: Term, cand: np.ndarray) -> np.ndarray:
    """The term's frequency in each of ``cand`` (ascending), as float64 (0 where absent)."""
    x = np.zeros(len(cand))
    for part in term.parts:
        a, b = np.searchsorted(cand, (part.lo, part.hi)).tolist()
        if a == b or not len(part.slots):
            continue
        sub = cand[a:b]
        col = part.column
        if col is None and len(sub) * 4 > len(part.slots) and len(part.slots) > COLUMN_MIN:
            col = column(part.slots, part.tfs, part.lo, part.hi - part.lo)
        if col is not None:
            x[a:b] = col[sub - part.lo]
            continue
        at = np.searchsorted(part.slots, sub)
        np.minimum(at, len(part.slots) - 1, out=at)
        hit = np.flatnonzero(part.slots[at] == sub)
        x[a + hit] = part.tfs[at[hit]]
    return x


def _contribution(weight: float, x: np.ndarray, nc: np.ndarray) -> np.ndarray:
    """A term's contribution to documents where its frequency is ``x`` (float64) and
    their norms ``nc``, as the exhaustive scoring computes it (0 where absent)."""
    out: np.ndarray = np.divide(weight * x, x + nc, out=np.zeros(len(x)), where=x > 0)
    return out


class _Candidates:
    """The documents still in the running, their upper bounds, their norms (gathered
    on first use) and the contributions of the terms read ahead of query order."""

    __slots__ = ("ahead", "cand", "floor", "nc", "ub")

    def __init__(self, cand: np.ndarray, ub: np.ndarray, floor: float) -> None:
        self.cand = cand
        self.ub = ub
        self.floor = floor  # a bound below this cannot reach θ
        self.nc: np.ndarray | None = None
        self.ahead: dict[int, np.ndarray] = {}

    def norms(self, norms: np.ndarray) -> np.ndarray:
        if self.nc is None:
            self.nc = norms[self.cand]
        return self.nc

    def keep(self, sel: np.ndarray) -> None:
        self.cand, self.ub = self.cand[sel], self.ub[sel]
        self.nc = None if self.nc is None else self.nc[sel]
        self.ahead = {i: c[sel] for i, c in self.ahead.items()}

    def lower(self, u: float, c: np.ndarray) -> np.ndarray | None:
        """A term of bound ``u`` gave the exact contributions ``c``: each bound loses
        what ``u`` held above ``c``, and the documents that cannot reach θ are dropped
        (returned: the mask kept, or None when every one stays)."""
        self.ub -= np.maximum(u - c, 0.0)
        sel = self.ub >= self.floor
        if sel.all():
            return None
        self.keep(sel)
        return sel


def _evaluate(terms: list[Term], grouped: list[int], curves: list[_Curve], choice: np.ndarray,
              theta: float, norms: np.ndarray, keep: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Every admissible document of the chosen heads and short lists whose upper bound
    reaches θ, with its exact score (slots ascending).

    A document's bound starts as the sum of the terms' bounds ``u`` plus, for each term
    whose head or short list holds it, its contribution there minus ``u`` (never less
    than 0). Then the terms are read, each one's exact contribution ``c`` replacing
    ``max(c, u)`` in the document's bound, and the documents that can no longer reach θ
    are dropped before the next term is read: first the ``AHEAD`` terms of the largest
    ``u`` (a document without the term is dropped before its contribution is worked
    out), then the others in query order, as the contributions are added up. A kept
    document's sum is its exact score."""
    bounds = [0.0] * len(terms)
    for i, curve, pick in zip(grouped, curves, choice.tolist(), strict=True):
        bounds[i] = float(curve.bound[pick])
    pieces: list[tuple[np.ndarray, np.ndarray]] = []
    top_sum = 0.0
    for i, term in enumerate(terms):
        u = bounds[i]
        if i in grouped:
            g = grouped.index(i)
            top_sum += curves[g].top
            for slots, values in _head(term, curves[g], int(choice[g]), True):
                assert values is not None
                pieces.append((slots, values))
        for part in term.parts:
            if part.impact is None and len(part.slots):
                tf = part.tfs.astype(np.float64)
                c = term.weight * tf / (tf + norms[part.slots])
                top_sum += float(c.max())
                pieces.append((part.slots, np.maximum(c - u, 0.0).astype(np.float32)))
    outside = float(sum(bounds))
    margin = LOOSE * (theta + top_sum)
    need = theta - outside - margin
    n_slots = len(norms)
    total = sum(len(p[0]) for p in pieces)
    if not total:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    flat = np.concatenate([p[0] for p in pieces]).astype(np.int64)
    vals = np.concatenate([p[1] for p in pieces])
    if total * SPARSE < n_slots:
        # Sorted by slot through one sort of (slot, position) packed in an integer: an
        # unstable sort of integers is many times faster than a stable argsort.
        shift = int(total).bit_length()
        keys = np.sort((flat << shift) | np.arange(total, dtype=np.int64))
        flat = keys >> shift
        vals = vals[keys & ((1 << shift) - 1)].astype(np.float64)
        edge = np.empty(len(flat), dtype=bool)
        edge[0] = True
        np.not_equal(flat[1:], flat[:-1], out=edge[1:])
        starts = np.flatnonzero(edge)
        cand, extra = flat[starts], np.add.reduceat(vals, starts)
    else:
        acc = np.bincount(flat, weights=vals, minlength=n_slots)
        # (Untouched slots hold 0: with a need of 0 or less, only the slots of the pieces.)
        cand = (np.flatnonzero(acc >= need) if need > 0
                else _union([p[0] for p in pieces], n_slots))
        extra = acc[cand]
    if keep is not None:
        sel = keep[cand]
        cand, extra = cand[sel], extra[sel]
    if need > 0:
        sel = extra >= need
        cand, extra = cand[sel], extra[sel]
    live = _Candidates(cand, extra + outside, theta - margin)
    if theta > 0:
        # The terms with the largest bounds are read first (at most AHEAD of them, whose
        # contributions wait for the sum): a document outside a term's head loses the
        # most from its bound there, and one without the term loses all of it.
        for i in sorted((i for i in range(len(terms)) if bounds[i] > 0),
                        key=lambda i: -bounds[i])[:AHEAD]:
            x = _tf(terms[i], live.cand)
            sel = (x > 0) | (live.ub - bounds[i] >= live.floor)
            if not sel.all():
                x = x[sel]
                live.keep(sel)
            live.ahead[i] = c = _contribution(terms[i].weight, x, live.norms(norms))
            live.lower(bounds[i], c)
    scores = np.zeros(len(live.cand))
    for i, term in enumerate(terms):  # added in query order, as the exhaustive sum is
        if i in live.ahead:
            scores += live.ahead.pop(i)
            continue
        c = _contribution(term.weight, _tf(term, live.cand), live.norms(norms))
        scores += c
        if bounds[i] > 0 and theta > 0:
            kept = live.lower(bounds[i], c)
            if kept is not None:
                scores = scores[kept]
    return live.cand, scores
