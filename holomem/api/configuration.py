"""A Memory's configuration: its store, checked config, policies, clock and observers.

Owns: :class:`Configured`, the base of ``Memory`` — construction under the store's
configuration (docs/contract.md §4c: recorded by the first Memory, used by every later one and
every door, changed only with ``persist``; :func:`settle`), the caller's own
policies named ``custom:NAME``, and the ``with_*`` calls that return a copy with one
policy replaced (in this process only: nothing a ``with_*`` call sets is recorded).
Imports the engine, the events, the policies, the types and validate.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self

from holomem.api import embedding, validate
from holomem.api.engine import Store, View
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
    supplied_policy,
)
from holomem.api.types import MemoryConfig, config_from_json, config_to_json
from holomem.embedders import Embedder
from holomem.errors import ConflictError, InvalidError, UnavailableError
from holomem.events import ConfigRecorded, Event
from holomem.projections import vectorindex
from holomem.projections.fusion import EMBEDDER_FUSION

#: A custom forgetting policy: (memory, now in ms) -> ids to forget.
ForgettingPolicy = Callable[[Any, int], list[str]]
#: A custom consolidation policy: (memory, now) -> (source ids, summary text) groups.
ConsolidationPolicy = Callable[[Any, int], list[tuple[list[str], str]]]


def settle(store: Store, given: MemoryConfig | None, initial: MemoryConfig | None,
           persist: bool, now: int) -> MemoryConfig:
    """The configuration a new Memory applies, recording it when the store needs it.

    Decided again under the write lock, so two Memory values created at once over a
    new store cannot record two configurations unnoticed.
    """
    chosen: list[MemoryConfig] = []

    def decide(recorded: bytes | None) -> tuple[MemoryConfig, bool]:
        stored = config_from_json(recorded) if recorded is not None else None
        if given is None:
            config = stored or initial or MemoryConfig()
            return config, stored is None
        if stored is None or config_to_json(stored) == config_to_json(given):
            return given, stored is None
        if not persist:
            raise ConflictError(
                "this store's configuration differs from the one given: "
                f"{config_to_json(stored).decode()} is recorded; omit the configuration to "
                "use it, or record the new one (Memory(..., persist=True); from the shell, "
                "holomem config STORE --set FILE)")
        return given, True

    if store.read_only:
        return decide(store.read(lambda view: view.state.memory_config))[0]

    def build(view: View) -> list[Event]:
        config, record = decide(view.state.memory_config)
        chosen[:] = [config]
        return [ConfigRecorded(config=config_to_json(config), time=now)] if record else []

    store.commit(build)
    return chosen[0]


class Configured:
    """A Memory's configuration, and the ``with_*`` calls that replace one policy."""

    def __init__(self, store: Store, config: MemoryConfig | Mapping[str, Any] | None = None, *,
                 clock: Clock | None = None,
                 policies: Mapping[str, Callable[..., Any]] | None = None,
                 initial: MemoryConfig | Mapping[str, Any] | None = None,
                 persist: bool = False, embedder: Embedder | None = None,
                 reembed: bool = False) -> None:
        """A Memory over ``store``, under the store's configuration (docs/contract.md §4c).

        Args:
            config: the configuration to apply. None: the one the store recorded (or,
                on a store that has none yet, ``initial``, else the defaults). When the
                store has none yet, this one is recorded (writer only).
            policies: the caller's own policies a configuration names ``custom:NAME``,
                by NAME (code is never stored: a store whose configuration names one
                needs it supplied again).
            initial: what a door applies to a store that has recorded nothing yet.
            persist: record ``config`` even though the store recorded another one.
            embedder: embeds facts and queries given without a vector (docs/contract.md §4e).
                None: the configuration's ``embedder`` by name, else the built-in the
                store recorded, else none. Its identity is recorded by the first
                writer that uses one.
            reembed: open even though the store's vectors are another embedder's;
                :meth:`~holomem.Memory.reembed` must then rewrite them before
                remember or recall embeds anything.

        Errors: ``invalid_request`` (a bad configuration, a missing custom policy),
        ``conflict`` (``config`` differs from the store's, without ``persist``; the
        store's vectors are another embedder's, without ``reembed``),
        ``unavailable`` (a built-in embedder whose model is not installed;
        ``vector_search="approximate"`` without the ``ann`` extra).
        """
        if not isinstance(store, Store):
            raise InvalidError("Memory needs a holomem.Store")
        self.store = store
        self.clock: Clock = clock if clock is not None else SystemClock()
        given = validate.memory_config(config) if config is not None else None
        start = validate.memory_config(initial) if initial is not None else None
        #: The configuration in force, checked whole (types and every number's range).
        self.config = settle(store, given, start, persist, self.clock.now_ms())
        custom = validate.custom_policies(policies)
        self.policies = Policies.from_config(self.config, custom)
        if self.policies.approximate and not vectorindex.available():
            raise UnavailableError("vectorSearch \"approximate\" needs the usearch library: "
                                   f"{vectorindex.INSTALL}")
        self._observers: list[Observer] = []
        self._forgetting: ForgettingPolicy | None = supplied_policy(
            self.config.forgetting, custom, "forgetting policy")
        self._consolidation: ConsolidationPolicy | None = supplied_policy(
            self.config.consolidation, custom, "consolidation policy")
        held = store.read(lambda view: view.state.embedder or view.state.reembed_target)
        #: The embedder (None: recall is lexical unless a call brings a vector).
        self.embedder: Embedder | None = embedding.choose(embedder, self.config, held)
        self._pinned = (embedding.settle(store, self.embedder, reembed, self.clock.now_ms())
                        if self.embedder is not None else None)
        if self.embedder is not None and self.config.fusion == "default":
            self.policies = self.policies._replace(fusion=EMBEDDER_FUSION)

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
