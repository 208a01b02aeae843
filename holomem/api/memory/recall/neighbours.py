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
    """``fused`` plus the context policy's share of each neighbour's score: a fact's
    neighbours are the facts written just before and after it *in its own namespace*
    (so no fact borrows from, or lends to, another namespace's facts); ``allowed`` (a
    slot mask) restricts the answer.

    Only the candidates and their neighbours are visited (not every fact): a fact's
    total is its own score plus ``weight`` times each neighbour's within ``window``
    places, in the order d = 1, 2, ... (before, then after), the same additions in
    the same order as a pass over every live fact would make."""
    context = policies.context
    assert context is not None
    if not len(fused.slots):
        return fused
    namespaces = view.facts.namespaces
    if len(namespaces.names) <= 1:  # one namespace (or none): write order among all
        catalog = view.catalog
        live = None if catalog.live == catalog.slots else view.live_slots()
        parts = [_near(fused, np.arange(len(fused.slots)), live, catalog.live,
                       context.weight, context.window)]
    else:
        nids = namespaces.of_slot.view()[fused.slots]
        parts = []
        for nid in np.unique(nids).tolist():
            mine = np.flatnonzero(nids == nid)
            if nid < 0:  # (not a fact: no neighbours)
                parts.append((fused.slots[mine], fused.score[mine], mine))
                continue
            members = namespaces.members(nid)
            parts.append(_near(fused, mine, members, len(members), context.weight,
                               context.window))
    slots = np.concatenate([p[0] for p in parts]).astype(np.int64)
    total = np.concatenate([p[1] for p in parts])
    source = np.concatenate([p[2] for p in parts])  # (-1: a neighbour, not a candidate)
    order = np.argsort(slots, kind="stable")
    slots, total, source = slots[order], total[order], source[order]
    if allowed is not None:
        held = allowed[slots]
        slots, total, source = slots[held], total[held], source[held]
    def of(values: np.ndarray) -> np.ndarray:
        return np.where(source >= 0, values[np.maximum(source, 0)], 0.0)

    semantic = None if fused.semantic is None else of(fused.semantic)
    return Fusion(slots, total, of(fused.lexical), semantic, fused.lexical_scale,
                  fused.semantic_best)


def _near(fused: Fusion, mine: np.ndarray, order: np.ndarray | None, n: int, weight: float,
          window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slots, totals, index into ``fused`` or -1) of the candidates ``mine`` (indices
    into ``fused``, ascending) and their neighbours that score above 0, where the
    ``n`` facts in write order are ``order`` (slots ascending; None: the slots
    0..n-1 themselves)."""
    slots = fused.slots[mine]
    pos = slots if order is None else np.searchsorted(order, slots)
    near = np.unique((pos[:, None] + np.arange(-window, window + 1)).ravel())
    near = near[(near >= 0) & (near < n)]

    def at(places: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values`` of the candidates at ``places`` (0 where there is none)."""
        i = np.minimum(np.searchsorted(pos, places), len(pos) - 1)
        return np.where(pos[i] == places, values[i], 0.0)

    score = fused.score[mine]
    total = at(near, score)
    for d in range(1, window + 1):
        total += weight * at(near - d, score)
        total += weight * at(near + d, score)
    keep = near[total > 0]
    i = np.minimum(np.searchsorted(pos, keep), len(pos) - 1)
    source = np.where(pos[i] == keep, mine[i], -1)
    return (keep if order is None else order[keep]), total[total > 0], source
