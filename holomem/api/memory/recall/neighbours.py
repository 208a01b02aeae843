"""The context policy's share of recall scores (docs/contract.md §4 Recall).

Owns: :func:`with_context` — each candidate's score plus the context policy's weight
times its neighbours' (in write order, within the policy's window), visiting only
the candidates and their neighbours. Recall's ranking (:mod:`.rank`) calls it.
Imports the engine's view, the policies and the fusion type.
"""

from __future__ import annotations

import numpy as np

from holomem.api.engine import View
from holomem.api.memory.policies import Policies
from holomem.projections.fusion import Fusion


def with_context(view: View, policies: Policies, fused: Fusion,
                 allowed: np.ndarray | None) -> Fusion:
    """``fused`` plus the context policy's share of each neighbour's score (in write
    order); ``allowed`` (a slot mask) restricts the answer.

    Only the candidates and their neighbours are visited (not every fact): a fact's
    total is its own score plus ``weight`` times each neighbour's within ``window``
    places, in the order d = 1, 2, ... (before, then after), the same additions in
    the same order as a pass over every live fact would make."""
    context = policies.context
    assert context is not None
    weight, window = context.weight, context.window
    catalog = view.catalog
    # Positions in write order among the live facts (the slots themselves when none
    # has been vacated).
    dense = catalog.live == catalog.slots
    live = None if dense else view.live_slots()
    pos = fused.slots if live is None else np.searchsorted(live, fused.slots)
    n = catalog.live
    if not len(pos):
        return fused
    near = np.unique((pos[:, None] + np.arange(-window, window + 1)).ravel())
    near = near[(near >= 0) & (near < n)]

    def at(places: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values`` of the candidates at ``places`` (0 where there is none)."""
        i = np.minimum(np.searchsorted(pos, places), len(pos) - 1)
        return np.where(pos[i] == places, values[i], 0.0)

    total = at(near, fused.score)
    for d in range(1, window + 1):
        total += weight * at(near - d, fused.score)
        total += weight * at(near + d, fused.score)
    keep = near[total > 0]
    total = total[total > 0]
    slots = keep if live is None else live[keep]
    if allowed is not None:
        held = allowed[slots]
        keep, slots, total = keep[held], slots[held], total[held]
    semantic = None if fused.semantic is None else at(keep, fused.semantic)
    return Fusion(slots.astype(np.int64), total, at(keep, fused.lexical), semantic,
                  fused.lexical_scale, fused.semantic_best)
