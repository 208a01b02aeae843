"""Contradictions answered from the candidates kept between calls (issue 16).

Owns: :func:`answer` — the page :func:`~holomem.api.memory.holographic.pairs.scan` gives,
computed from :class:`~holomem.projections.candidates.Candidates` instead of comparing
pairs: the pairs compared are counted (each fact's later partners, less those this call
leaves out), the page's end is found from those counts, and its best pairs are the
kept ones inside it. Imports the engine's view and the projections.

It declines (returns None, and the scan answers) when it cannot be sure of the same
answer: when the facts this call leaves out (not current at its time, outside its
filter) would cost more to take back than scanning the current facts' pairs, when
fewer than ``k`` kept pairs fall in the page while some pairs were dropped for room,
or for a cursor that names slots this store never had.
"""

from __future__ import annotations

import numpy as np

from holomem.api.engine import View
from holomem.api.memory.holographic.pairs import Page
from holomem.projections.candidates import Candidates
from holomem.projections.groups import LOW

#: Left-out facts' raw pairs taken back without first weighing the scan's cost.
QUICK = 1 << 14
_NO_END = (1 << 63) - 1


def answer(view: View, kept: Candidates, current: np.ndarray, scope: np.ndarray, k: int,
           max_pairs: int, resume: tuple[int, int] | None, budget: int) -> Page | None:
    """The page of the ``current`` facts' pairs after ``resume``, or None (see the module
    docstring). ``scope``: the facts the call's namespace covers; ``kept`` is caught up
    (every slot scored)."""
    n = view.catalog.slots
    if resume is not None and not (resume[0] < n and resume[1] < n):
        return None
    cur = np.flatnonzero(current)
    left_out = np.flatnonzero(kept.active.view() & scope & ~current)
    sizes = kept.groups.group_size.view()
    work = int(sizes[kept.groups.rows(left_out)[1]].sum())
    if work > QUICK:
        counts = np.bincount(kept.groups.rows(cur)[1], minlength=len(sizes))
        if work > int((counts * (counts - 1) // 2).sum()):
            return None
    later = kept.later.view()[cur]
    if len(left_out):
        lost = np.zeros(n, dtype=np.int64)
        for earlier, _b, _shared in kept.groups.earlier_pairs(left_out, current, budget):
            lost += np.bincount(earlier, minlength=n)
        later = later - lost[cur]
    # The pairs after the cursor: the rest of its first fact's, then every later fact's.
    head = np.zeros(0, dtype=np.int64)
    if resume is not None and current[resume[0]]:
        head = kept.groups.later_partners(resume[0], current)
        head = head[head > resume[1]]
    after = int(np.searchsorted(cur, resume[0], side="right")) if resume is not None else 0
    slots, running = cur[after:], np.cumsum(later[after:])
    total = len(head) + (int(running[-1]) if len(running) else 0)
    last = (0, 0)
    end = _NO_END
    more = total > max_pairs
    if more:
        if len(head) >= max_pairs:
            last = (resume[0] if resume is not None else 0, int(head[max_pairs - 1]))
        else:
            need = max_pairs - len(head)
            i = int(np.searchsorted(running, need, side="left"))
            before = int(running[i - 1]) if i else 0
            a = int(slots[i])
            last = (a, int(kept.groups.later_partners(a, current)[need - before - 1]))
        end = (last[0] << 32) | last[1]  # as pair_key orders them
    start = (resume[0] << 32) | resume[1] if resume is not None else -1
    keys = kept.keys
    a_of, b_of = keys >> 32, keys & LOW
    inside = np.flatnonzero(current[a_of] & current[b_of] & (keys > start) & (keys <= end))
    if len(inside):
        comp = view.facts.components()
        inside = inside[comp[a_of[inside]] != comp[b_of[inside]]]
    if len(inside) < k and kept.floor is not None:
        return None  # pairs dropped for room might belong here
    top = inside[:k]
    ranked = list(zip(a_of[top].tolist(), b_of[top].tolist(), kept.score[top].tolist(),
                      kept.overlap[top].tolist(), kept.similarity[top].tolist(), strict=True))
    return Page(ranked, min(total, max_pairs), more, last)
