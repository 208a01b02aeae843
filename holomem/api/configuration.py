"""A Memory's configuration: its store, checked config, policies, clock and observers.

Owns: :class:`Configured`, the base of ``Memory`` — construction from a
``MemoryConfig`` (checked whole) and the ``with_*`` calls that return a copy with
one policy replaced. Imports the engine, the policies, the types and validate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

from holomem.api import validate
from holomem.api.engine import Store
from holomem.api.policies import (
    EXTRACTORS,
    SUPERSESSION,
    Clock,
    EntityExtractor,
    Observation,
    Observer,
    Policies,
    RecencyPolicy,
    SupersessionPolicy,
    SystemClock,
    resolve,
)
from holomem.api.types import MemoryConfig
from holomem.errors import InvalidError

#: A custom forgetting policy: (memory, now in ms) -> ids to forget.
ForgettingPolicy = Callable[[Any, int], list[str]]
#: A custom consolidation policy: (memory, now) -> (source ids, summary text) groups.
ConsolidationPolicy = Callable[[Any, int], list[tuple[list[str], str]]]


class Configured:
    """A Memory's configuration, and the ``with_*`` calls that replace one policy."""

    def __init__(self, store: Store, config: MemoryConfig | None = None, *,
                 clock: Clock | None = None) -> None:
        if not isinstance(store, Store):
            raise InvalidError("Memory needs a holomem.Store")
        self.store = store
        #: The configuration, checked whole (types and every number's range).
        self.config = validate.memory_config(config if config is not None else MemoryConfig())
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.policies = Policies.from_config(self.config)
        self._observers: list[Observer] = []
        self._forgetting: ForgettingPolicy | None = None
        self._consolidation: ConsolidationPolicy | None = None

    def _copy(self) -> Self:
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone._observers = list(self._observers)
        return clone

    def with_supersession(self, policy: str | SupersessionPolicy) -> Self:
        """A Memory with another supersession policy: a built-in name or a callable."""
        clone = self._copy()
        clone.policies = self.policies._replace(
            supersession=resolve(policy, SUPERSESSION, "supersession policy"))
        return clone

    def with_recency(self, policy: RecencyPolicy | None) -> Self:
        """A Memory with a recency multiplier (age in ms -> factor), or none."""
        if policy is not None and not callable(policy):
            raise InvalidError("recency policy must be a callable or None")
        clone = self._copy()
        clone.policies = self.policies._replace(recency=policy)
        return clone

    def with_entity_extractor(self, extractor: str | EntityExtractor) -> Self:
        """A Memory with another entity extractor: a built-in name or a callable."""
        clone = self._copy()
        clone.policies = self.policies._replace(
            extractor=resolve(extractor, EXTRACTORS, "entity extractor"))
        return clone

    def with_forgetting(self, policy: ForgettingPolicy | None) -> Self:
        """A Memory whose ``apply_forgetting`` asks ``policy(memory, now_ms)`` for ids."""
        clone = self._copy()
        clone._forgetting = policy
        return clone

    def with_consolidation(self, policy: ConsolidationPolicy | None) -> Self:
        """A Memory whose ``consolidate`` asks ``policy(memory, now_ms)`` for
        (source ids, summary text) groups."""
        clone = self._copy()
        clone._consolidation = policy
        return clone

    def with_observer(self, observer: Observer) -> Self:
        """A Memory that also calls ``observer(Observation)`` after each committed change."""
        if not callable(observer):
            raise InvalidError("observer must be callable")
        clone = self._copy()
        clone._observers.append(observer)
        return clone

    def with_clock(self, clock: Clock) -> Self:
        if not hasattr(clock, "now_ms"):
            raise InvalidError("clock must have now_ms()")
        clone = self._copy()
        clone.clock = clock
        return clone

    def notify(self, op: str, ids: list[str], revision: int) -> None:
        """Tell every observer what a committed change did."""
        for observer in self._observers:
            observer(Observation(op, list(ids), revision))
