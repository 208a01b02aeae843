"""The holographic calls: probe, related, reason and contradict (docs/contract.md §4).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Each answers from one view: :mod:`.algebra` for the HRR queries,
:mod:`.contradiction` for pairs of current facts that likely disagree.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from holomem.api.engine import validate
from holomem.api.memory import filters
from holomem.api.memory.holographic import algebra, contradiction
from holomem.api.memory.session import Session
from holomem.api.memory.types import ContradictResult, ProbeResult, ReasonResult, RelatedResult


def probe(s: Session, /, entity: str, k: int = 10, namespace: Sequence[str] | None = None
          ) -> ProbeResult:
    """Facts whose HRR structure binds ``entity`` (algebra, not keyword lookup);
    ``namespace``: only facts at or under that prefix.

    Limits: ``k`` <= ``holographic.MAX_K``; ``entity`` <= 256 characters."""
    ns = validate.namespace(namespace)
    return s.store.read(lambda view: algebra.probe(view, entity, k, ns))


def related(s: Session, /, entity: str, k: int = 10, namespace: Sequence[str] | None = None
            ) -> RelatedResult:
    """Entities structurally associated with ``entity`` (bound in the same facts).

    The algebra answers only when it keeps every entity the exact per-fact scoring
    ranks in the top k (else ``path`` is "exact per-fact").
    Limits: ``k`` <= ``holographic.MAX_K``."""
    ns = validate.namespace(namespace)
    return s.store.read(lambda view: algebra.related(view, entity, k, ns))


def reason(s: Session, /, entities: Sequence[str], k: int = 10,
           namespace: Sequence[str] | None = None) -> ReasonResult:
    """Facts that bind every one of ``entities`` (AND).

    Limits: 1 to ``holographic.MAX_REASON_ENTITIES`` entities, ``k`` <=
    ``holographic.MAX_K``."""
    ns = validate.namespace(namespace)
    return s.store.read(lambda view: algebra.reason(view, entities, k, ns))


def contradict(s: Session, /, *, subject: str | None = None, entity: str | None = None,
               k: int = 10, max_pairs: int = contradiction.MAX_PAIRS,
               cursor: str | None = None, namespace: Sequence[str] | None = None,
               filter: Mapping[str, Any] | None = None) -> ContradictResult:
    """Pairs of current facts that likely contradict; counts what was compared.

    Limits: ``k`` <= ``holographic.MAX_K``, ``max_pairs`` <=
    ``contradiction.MAX_PAIRS_LIMIT``; a page stops there and gives a cursor."""
    now = s.now_ms()
    ns = validate.namespace(namespace)
    where = filters.compile_filter(filter)
    return s.store.read(lambda view: contradiction.contradict(
        view, now, subject=subject, entity=entity, k=k, max_pairs=max_pairs,
        cursor=cursor, namespace=ns, where=where))
