"""Holographic operations: probe, related, reason (issue 8).

Owns: algebraic queries over the HRR structure vectors of facts, with their
capacity checks, and the limits they share with the contradiction scan
(:mod:`.contradiction`). Imports the engine's view, the HRR projection,
the types and validate.

How each one works, and how it stays honest:

- ``probe(entity)``: the facts whose structure binds ``entity`` under the entity
  role — the similarity of each fact's structure pattern with
  ``bind(ROLE_ENTITY, atom(entity))``, i.e. unbinding the role and comparing the
  filler with the atom. A fact is a member when its similarity clears
  :data:`THRESHOLD_SDS` noise standard deviations. The order roles tell which
  position the entity holds ("Alice owes Bob": Alice first; "Bob owes Alice":
  second). A fact whose bundle holds so many items that a member would not clear
  the threshold (signal-to-noise below it) is checked exactly, against its entity
  list, and the result says so (``path``).
- ``related(entity)``: the probe's member facts are bundled, the entity role is
  unbound from the bundle, and every entity atom known in scope (carried by a fact at
  or under the namespace, when one is given: another namespace's names are neither
  compared nor counted) is compared with it (a clean-up memory). The exact answer is
  computed too: each member fact is scored on its own against the entities it lists,
  and the per-fact similarities are summed. The algebra answers only when its
  bundle's estimated signal-to-noise ratio is at least :data:`MIN_SNR` *and* it keeps
  every entity the exact scoring ranks in the top k; otherwise (the estimate is
  optimistic: a bundle of sign patterns loses more than a bundle of the items
  themselves) the exact scoring answers, and ``path`` says "exact per-fact".
- ``reason(entities)``: facts that bind *all* the entities: a fact's score is its
  smallest per-entity similarity, and every entity must clear the threshold.
Bounded work (issue 11): every call's work is bounded by limits on its request —
``k`` <= :data:`MAX_K`, entities per ``reason`` <= :data:`MAX_REASON_ENTITIES`,
and its memory is linear in the store,
never (request x store): similarities are computed over blocks of
:data:`BLOCK` facts, ``reason`` keeps one running minimum instead of a per-entity x
per-fact matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory.types import (
    ProbeHit,
    ProbeResult,
    ReasonHit,
    ReasonResult,
    RelatedHit,
    RelatedResult,
)
from holomem.errors import InvalidError, LimitError
from holomem.projections import hrr
from holomem.projections.namespaces import Namespace

#: Membership: a similarity at least this many noise standard deviations.
THRESHOLD_SDS = 5.0
THRESHOLD = THRESHOLD_SDS * float(hrr.NOISE_SD)
#: A bundle is trusted when its estimated signal-to-noise ratio is at least this.
MIN_SNR = THRESHOLD_SDS
#: The most items a fact's structure bundle may hold and still be trusted.
MAX_ITEMS = max(m for m in range(1, 4096) if hrr.snr(m) >= MIN_SNR)
#: The most results (``k``) of probe, related, reason and contradict.
MAX_K = 1000
#: The most entities one ``reason`` call may AND together.
MAX_REASON_ENTITIES = 32
#: Facts compared at once (a block of packed rows: BLOCK x 128 bytes).
BLOCK = 16_384
def similarity(rows: np.ndarray, slots: np.ndarray, key: np.ndarray) -> np.ndarray:
    """bit_similarity of ``rows[slots]`` with ``key``, a block at a time (no full copy)."""
    out = np.empty(len(slots), dtype=np.float64)
    for i in range(0, len(slots), BLOCK):
        out[i : i + BLOCK] = hrr.bit_similarity(rows[slots[i : i + BLOCK]], key)
    return out


class _Members(NamedTuple):
    slots: np.ndarray  # the slots compared (ascending)
    sims: np.ndarray  # entity-role similarity of each
    member: np.ndarray  # bool: binds the entity
    exact: int  # how many were decided against their entity list (too full to trust)


def _scope(view: View, namespace: Namespace) -> np.ndarray | None:
    """The slots an operation looks at: every live document, or the facts at or under
    a namespace prefix."""
    return view.facts.namespaces.slots(namespace) if namespace else None


def _members(view: View, entity: str,
             slots: np.ndarray | None = None) -> _Members:
    """Which of ``slots`` (default: every live document) bind ``entity``."""
    index = view.hrr()
    if slots is None:
        slots = np.flatnonzero(view.catalog.alive.view())
    sims = similarity(index.structure.view(), slots, index.probe_key(entity))
    items = index.items.view()[slots]
    member = (sims >= THRESHOLD) & (items > 0)
    # Bundles too full for the threshold to be trusted: decide membership exactly.
    weak = np.flatnonzero(items > MAX_ITEMS)
    if len(weak):
        member[weak] = np.isin(slots[weak], view.entities.slots(entity))
    return _Members(slots, sims, member, len(weak))


def probe(view: View, entity: str, k: int = 10, namespace: Namespace = ()) -> ProbeResult:
    """Facts that bind ``entity``, best first. Limits: ``k`` <= :data:`MAX_K`."""
    ent = validate.entity(entity)
    k = validate.positive_int(k, "k", MAX_K)
    index = view.hrr()
    slots, sims, member, exact = _members(view, ent, _scope(view, namespace))
    idx = np.flatnonzero(member)
    order = idx[np.lexsort((slots[idx], -sims[idx]))][:k]
    chosen = slots[order]
    # Which position the entity holds: unbind each order role from the chosen facts.
    rows = index.structure.view()[chosen]
    roles = np.stack([hrr.bit_similarity(rows, index.probe_key(ent, j))
                      for j in range(hrr.ORDER_ROLES)]) if len(chosen) else np.zeros((0, 0))
    hits = []
    for j, i in enumerate(order):
        best = int(np.argmax(roles[:, j]))
        slot = int(slots[i])
        hits.append(ProbeHit(id=view.catalog.ids[slot] or "", score=float(sims[i]),
                             role=best if roles[best, j] >= THRESHOLD else None,
                             role_score=float(roles[best, j]),
                             text=view.record(slot).text))
    return ProbeResult(entity=ent, results=hits, compared=len(slots), threshold=THRESHOLD,
                       path="algebra+exact" if exact else "algebra", exact_checked=exact)


def _exact_related(view: View, index: hrr.HRRIndex, facts: np.ndarray,
                   candidates: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(score, facts) per candidate: each member fact scored on its own, over the
    entities it lists — the sum of its similarities (floored at 0) and the count."""
    rows = index.structure.view()
    is_member = np.zeros(view.catalog.slots, dtype=bool)
    is_member[facts] = True
    scores = np.zeros(len(candidates))
    counts = np.zeros(len(candidates), dtype=np.int64)
    for i, c in enumerate(candidates):
        carriers = view.entities.slots(c)
        listing = carriers[is_member[carriers]]
        if len(listing):
            sims = similarity(rows, listing, index.probe_key(c))
            scores[i] = float(np.maximum(sims, 0.0).sum())
            counts[i] = len(listing)
    return scores, counts


def related(view: View, entity: str, k: int = 10, namespace: Namespace = ()
            ) -> RelatedResult:
    """Entities bound in the same facts as ``entity``. Limits: ``k`` <= :data:`MAX_K`."""
    ent = validate.entity(entity)
    k = validate.positive_int(k, "k", MAX_K)
    index = view.hrr()
    scope = _scope(view, namespace)
    m = _members(view, ent, scope)
    facts = m.slots[m.member]
    candidates = [e for e in view.entities.names(scope) if e != ent]
    if not len(facts) or not candidates:
        return RelatedResult(entity=ent, results=[], facts_bundled=len(facts), snr=0.0,
                             path="algebra", compared=len(candidates))
    structure = index.structure.view()
    items = int(index.items.view()[facts].sum())
    ratio = hrr.snr(items)
    exact, counts = _exact_related(view, index, facts, candidates)
    listed = np.flatnonzero(counts > 0)
    exact_order = listed[np.lexsort((listed, -exact[listed]))]
    chosen: np.ndarray = exact_order[:k]
    scores = exact
    path = "exact per-fact"
    if ratio >= MIN_SNR:
        # One bank: bundle the facts, then compare every candidate with it.
        total = np.zeros(hrr.D, dtype=np.float32)
        for i in range(0, len(facts), BLOCK):
            total += hrr.unpack(structure[facts[i : i + BLOCK]]).sum(axis=0)
        bank = hrr.pack(total)
        algebra = np.empty(len(candidates))
        for i in range(0, len(candidates), BLOCK):
            keys = np.stack([index.probe_key(c) for c in candidates[i : i + BLOCK]])
            algebra[i : i + BLOCK] = hrr.bit_similarity(keys, bank)
        passed = np.flatnonzero(algebra >= THRESHOLD)
        top = passed[np.lexsort((passed, -algebra[passed]))][:k]
        # The estimate is optimistic; the algebra answers only if it drops nothing
        # that the exact scoring ranks in the top k.
        if set(chosen.tolist()) <= set(top.tolist()):
            chosen, scores, path = top, algebra, "algebra"
    hits = [RelatedHit(entity=candidates[i], score=float(scores[i]), facts=int(counts[i]))
            for i in chosen.tolist()]
    return RelatedResult(entity=ent, results=hits, facts_bundled=len(facts), snr=ratio,
                         path=path, compared=len(candidates))


def reason(view: View, entities: Sequence[str], k: int = 10, namespace: Namespace = ()
           ) -> ReasonResult:
    """Facts that bind every one of ``entities`` (AND).

    Limits: 1 to :data:`MAX_REASON_ENTITIES` entities, ``k`` <= :data:`MAX_K`. Memory
    is linear in the store whatever the number of entities: the per-fact score is a
    running minimum, and each entity after the first is compared only with the facts
    that bound every entity before it.
    """
    if isinstance(entities, str) or not isinstance(entities, Sequence) or not entities:
        raise InvalidError("entities must be a non-empty list of strings")
    if len(entities) > MAX_REASON_ENTITIES:
        raise LimitError(f"reason takes at most {MAX_REASON_ENTITIES} entities; "
                         f"got {len(entities)}")
    ents = [validate.entity(e, "entities") for e in entities]
    k = validate.positive_int(k, "k", MAX_K)
    first = _members(view, ents[0], _scope(view, namespace))
    compared, exact = len(first.slots), first.exact
    slots, score = first.slots[first.member], first.sims[first.member]
    for e in ents[1:]:
        if not len(slots):
            break
        m = _members(view, e, slots)
        slots, score = slots[m.member], np.minimum(score, m.sims)[m.member]
    order = np.lexsort((slots, -score))[:k]
    chosen = slots[order]
    index = view.hrr()
    rows = index.structure.view()
    per = np.stack([similarity(rows, chosen, index.probe_key(e)) for e in ents]) \
        if len(chosen) else np.zeros((len(ents), 0))
    return ReasonResult(
        entities=ents,
        results=[ReasonHit(id=view.catalog.ids[int(slot)] or "", score=float(score[i]),
                           scores=[float(x) for x in per[:, j]],
                           text=view.record(int(slot)).text)
                 for j, (i, slot) in enumerate(zip(order, chosen, strict=True))],
        compared=compared, threshold=THRESHOLD,
        path="algebra+exact" if exact else "algebra")
