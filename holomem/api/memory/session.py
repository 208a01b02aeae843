"""What every call of one Memory shares: :class:`Session`.

Owns: :class:`Session` — the store, the clock, the configuration in force
(docs/contract.md §4c: recorded by the first Memory, used by every later one and every
door, changed only with ``persist``; :func:`settle`), the policies (the caller's own
named ``custom:NAME`` among them), the embedder and the identity the store pinned for
it, and the observers. A new session decides all of them from one view of the store
and records what the store must learn (its configuration, its embedder's identity) in
one transaction, only once every check passed: a Memory that is refused writes
nothing. Every concept's ``calls`` module takes a Session as its first
argument; ``Memory`` holds one and hands it on. The ``with_*`` calls return a copy
with one policy replaced (in this process only: nothing a ``with_*`` call sets is
recorded). Imports the engine, the events, the policies, the types and the embedder
choice.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Self

import msgspec

from holomem.api.engine import Store, View, validate
from holomem.api.memory import checks
from holomem.api.memory.config import MemoryConfig, config_from_json, config_to_json
from holomem.api.memory.embedding import embedder as embedding
from holomem.api.memory.policies import (
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
    checked_callable,
    resolve,
    supplied_policy,
)
from holomem.embedders import Embedder
from holomem.errors import ConflictError, HolomemError, InvalidError, UnavailableError
from holomem.events import ConfigRecorded, Event
from holomem.projections import vectorindex
from holomem.projections.fusion import EMBEDDER_FUSION

#: A custom forgetting policy: (memory, now in ms) -> ids to forget.
ForgettingPolicy = Callable[[Any, int], list[str]]
#: A custom consolidation policy: (memory, now) -> (source ids, summary text) groups.
ConsolidationPolicy = Callable[[Any, int], list[tuple[list[str], str]]]


#: The most characters of a refused recorded configuration an error shows.
SHOWN = 2000
#: What msgspec says of a field a struct does not have (a newer version's field).
UNKNOWN_FIELD = "unknown field"


def same_policies(a: MemoryConfig, b: MemoryConfig) -> bool:
    """Whether two configurations agree on everything a store holds them to. How a
    query's vector finds its candidates (``vector_search``) is each Memory's own choice:
    a configuration that differs from the recorded one only there applies without a
    conflict (stores recorded before "auto" became the default hold "exact")."""
    return (config_to_json(msgspec.structs.replace(a, vector_search="auto"))
            == config_to_json(msgspec.structs.replace(b, vector_search="auto")))


def decide(recorded: bytes | None, given: MemoryConfig | None,
           initial: MemoryConfig | None, persist: bool) -> tuple[MemoryConfig, bool]:
    """The configuration a new Memory applies over a store that recorded ``recorded``
    (None: nothing yet), and whether the store must record it. A recorded one that
    fails a check of this version (written before the check existed) is replaced by a
    configuration given with ``persist``; one with a field this version does not know
    (written by a newer version) is never replaced. Errors: ``conflict`` (``given``
    differs from the recorded one, without ``persist``), ``invalid_request`` (the
    recorded one is refused, and no configuration is given with ``persist`` to replace
    it, or it has a field this version does not know); the message shows the
    recorded JSON (its first :data:`SHOWN` characters)."""
    try:
        stored = config_from_json(recorded) if recorded is not None else None
    except InvalidError as exc:
        assert recorded is not None
        text = recorded.decode("utf-8", "replace")
        shown = text[:SHOWN] + ("…" if len(text) > SHOWN else "")
        if UNKNOWN_FIELD in exc.message:
            raise InvalidError(
                f"this store's recorded configuration has a field this version does not "
                f"know ({exc.message}): it was probably written by a newer holomem, so "
                f"open the store with that version; the recorded one is {shown}") from exc
        if given is not None and persist:
            return given, True
        raise InvalidError(
            f"this store's recorded configuration is refused ({exc.message}): record "
            "another with Memory(store, config, persist=True) (from the shell, holomem "
            f"config STORE --set FILE); the recorded one is {shown}") from exc
    if given is None:
        config = stored or initial or MemoryConfig()
        return config, stored is None
    if stored is None or same_policies(stored, given):
        return given, stored is None
    if not persist:
        raise ConflictError(
            "this store's configuration differs from the one given: "
            f"{config_to_json(stored).decode()} is recorded; omit the configuration to "
            "use it, or record the new one (Memory(..., persist=True); from the shell, "
            "holomem config STORE --set FILE)")
    return given, True


class Settled(NamedTuple):
    """What a new Memory applies, every check passed, and the events that tell the
    store what it did not know yet (none when it knew it all)."""

    config: MemoryConfig
    policies: Policies
    forgetting: ForgettingPolicy | None
    consolidation: ConsolidationPolicy | None
    embedder: Embedder | None
    events: list[Event]


class Opening(NamedTuple):
    """What a new Memory was given (checked), to be settled against one view."""

    given: MemoryConfig | None
    initial: MemoryConfig | None
    persist: bool
    custom: Mapping[str, Callable[..., Any]]
    embedder: object
    reembed: bool
    now: int

    def settle(self, view: View) -> Settled:
        """The configuration, policies and embedder a new Memory applies over the store
        ``view`` shows, and the events that record what it must (docs/contract.md §4c,
        §4e). A writer's Memory runs this under the write lock, so that two created at
        once over a new store cannot record two configurations unnoticed, and commits
        its events only if every check passed: a refused Memory records nothing.

        Errors: ``invalid_request`` (a missing custom policy, a bad embedder),
        ``conflict`` (another recorded configuration without ``persist``; another
        embedder's vectors without ``reembed``), ``unavailable`` (a built-in embedder
        whose model is not installed; ``vector_search="approximate"`` without the
        ``ann`` extra).
        """
        state = view.state
        config, record = decide(state.memory_config, self.given, self.initial, self.persist)
        applied = Policies.from_config(config, self.custom)
        if applied.vector_search == "approximate" and not vectorindex.available():
            raise UnavailableError("vectorSearch \"approximate\" needs the usearch library: "
                                   f"{vectorindex.INSTALL}")
        forgetting: ForgettingPolicy | None = supplied_policy(
            config.forgetting, self.custom, "forgetting policy")
        consolidation: ConsolidationPolicy | None = supplied_policy(
            config.consolidation, self.custom, "consolidation policy")
        embedder = embedding.choose(self.embedder, config,
                                    state.embedder or state.reembed_target,
                                    (state.embedder, state.reembed_target))
        events: list[Event] = []
        if record:
            events.append(ConfigRecorded(config=config_to_json(config), time=self.now))
        if embedder is not None:
            events.extend(embedding.pin(view, embedder, self.reembed, self.now))
            if config.fusion == "default":
                applied = applied._replace(fusion=EMBEDDER_FUSION)
        return Settled(config, applied, forgetting, consolidation, embedder, events)


def settle(store: Store, opening: Opening) -> Settled:
    """:meth:`Opening.settle` over the store now; a writer commits its events in one
    transaction (a follower records nothing)."""
    if store.read_only:
        # A follower's read answers again when fn raises ``unavailable`` (its generation
        # was replaced meanwhile); settle reads only the view's state in memory, so an
        # ``unavailable`` of its own (a library or a model not installed) is the
        # answer, not a reason to check everything again: it is raised after the read.
        def answer(view: View) -> Settled | HolomemError:
            try:
                return opening.settle(view)
            except HolomemError as exc:
                return exc

        outcome = store.read(answer)
        if isinstance(outcome, HolomemError):
            raise outcome
        return outcome
    settled: list[Settled] = []

    def build(view: View) -> list[Event]:
        settled[:] = [opening.settle(view)]
        return settled[0].events

    store.commit(build)
    return settled[0]


class Session:
    """The store, clock, configuration, policies, embedder and observers of one Memory."""

    def __init__(self, store: Store, config: MemoryConfig | Mapping[str, Any] | None = None, *,
                 clock: Clock | None = None,
                 policies: Mapping[str, Callable[..., Any]] | None = None,
                 initial: MemoryConfig | Mapping[str, Any] | None = None,
                 persist: bool = False, embedder: Embedder | str | None = None,
                 reembed: bool = False) -> None:
        """A session over ``store``, under the store's configuration (docs/contract.md §4c).

        Args:
            config: the configuration to apply. None: the one the store recorded (or,
                on a store that has none yet, ``initial``, else the defaults). When the
                store has none yet, this one is recorded (writer only).
            policies: the caller's own policies a configuration names ``custom:NAME``,
                by NAME (code is never stored: a store whose configuration names one
                needs it supplied again).
            initial: what a door applies to a store that has recorded nothing yet.
            persist: record ``config`` even though the store recorded another one.
            embedder: embeds facts and queries given without a vector (docs/contract.md §4e);
                a built-in's name (``"minilm"``) stands for that built-in. None: the
                configuration's ``embedder`` by name, else the built-in the store
                recorded, else none. Its identity is recorded by the first writer
                that uses one.
            reembed: open even though the store's vectors are another embedder's;
                ``Memory.reembed`` must then rewrite them before remember or recall
                embeds anything.

        Errors (a Memory refused records nothing): ``invalid_request`` (a bad
        configuration, a missing custom policy, an embedder whose identity is outside
        its limits), ``conflict`` (``config`` differs from the store's, without ``persist``; the
        store's vectors are another embedder's, without ``reembed``),
        ``unavailable`` (a built-in embedder whose model is not installed;
        ``vector_search="approximate"`` without the ``ann`` extra).
        """
        if not isinstance(store, Store):
            raise InvalidError("Memory needs a holomem.Store")
        self.store = store
        self.clock: Clock = clock if clock is not None else SystemClock()
        settled = settle(store, Opening(
            given=checks.memory_config(config) if config is not None else None,
            initial=checks.memory_config(initial) if initial is not None else None,
            persist=persist, custom=checks.custom_policies(policies), embedder=embedder,
            reembed=reembed, now=self.now_ms()))
        #: The configuration in force, checked whole (types and every number's range).
        self.config = settled.config
        self.policies = settled.policies
        self.observers: list[Observer] = []
        self.forgetting = settled.forgetting
        self.consolidation = settled.consolidation
        #: The embedder (None: recall is lexical unless a call brings a vector).
        self.embedder: Embedder | None = settled.embedder
        #: The embedder identity this session checks the store's against before it
        #: mixes a vector of its own with the store's (None: no embedder).
        self.pinned = (embedding.pinned(self.embedder) if self.embedder is not None
                       else None)
        #: The Memory this session serves: what a custom forgetting or consolidation
        #: policy is handed (set by the Memory that holds the session).
        self.owner: Any = None

    def check_pinned(self, view: View) -> None:
        """Refuse to mix this session's vectors with another embedder's (§4e): the
        store must still hold the identity this session pinned."""
        if self.pinned is None:
            raise InvalidError("this Memory has no embedder")
        embedding.check_current(view, self.pinned)

    def notify(self, op: str, ids: list[str], revision: int) -> None:
        """Tell every observer what a committed change did."""
        for observer in self.observers:
            observer(Observation(op, list(ids), revision))

    # -- copies with one thing replaced (in this process only) ----------------------------
    def _copy(self, **changes: Any) -> Self:
        """Another session like this one, but for ``changes`` (attribute -> value)."""
        clone = object.__new__(type(self))
        clone.__dict__.update(self.__dict__)
        clone.observers = list(self.observers)
        clone.__dict__.update(changes)
        return clone

    def with_supersession(self, policy: str | SupersessionPolicy) -> Self:
        """Another supersession policy: a built-in name or a callable."""
        return self._copy(policies=self.policies._replace(
            supersession=resolve(policy, SUPERSESSION, "supersession policy")))

    def with_recency(self, policy: RecencyPolicy | None) -> Self:
        """A recency multiplier (age in ms -> factor), or none."""
        return self._copy(policies=self.policies._replace(
            recency=checked_callable(policy, "recency policy", optional=True)))

    def with_entity_extractor(self, extractor: str | EntityExtractor) -> Self:
        """Another entity extractor: a built-in name or a callable."""
        return self._copy(policies=self.policies._replace(
            extractor=resolve(extractor, EXTRACTORS, "entity extractor")))

    def with_forgetting(self, policy: ForgettingPolicy | None) -> Self:
        """``apply_forgetting`` asks ``policy(memory, now_ms)`` for ids."""
        return self._copy(forgetting=checked_callable(policy, "forgetting policy", optional=True))

    def with_consolidation(self, policy: ConsolidationPolicy | None) -> Self:
        """``consolidate`` asks ``policy(memory, now_ms)`` for (source ids, summary
        text) groups."""
        return self._copy(
            consolidation=checked_callable(policy, "consolidation policy", optional=True))

    def with_observer(self, observer: Observer) -> Self:
        """Also call ``observer(Observation)`` after each committed change."""
        return self._copy(observers=[*self.observers, checked_callable(observer, "observer")])

    def now_ms(self) -> int:
        """The clock's reading, checked: a whole number of milliseconds strictly between
        -2**62 and 2**62, the times a store holds (docs/contract.md §5d). Every time the
        memory API takes from its clock comes through here, so a clock that gives a
        float, None or a time out of range is refused before anything is written, not
        journalled. Errors: ``invalid_request``."""
        now: object = self.clock.now_ms()  # (a caller's clock may give anything)
        if isinstance(now, bool) or not isinstance(now, numbers.Integral) \
                or not -validate.TIME_LIMIT < int(now) < validate.TIME_LIMIT:
            raise InvalidError("the clock's now_ms() must give a whole number of "
                               "milliseconds strictly between -2**62 and 2**62, not "
                               f"{str(now)[:40]!r} ({type(now).__name__})")
        return int(now)

    def with_clock(self, clock: Clock) -> Self:
        """Another clock (``now_ms()``)."""
        if not callable(getattr(clock, "now_ms", None)):
            raise InvalidError(f"clock must have now_ms(), got {type(clock).__name__}")
        return self._copy(clock=clock)
