"""The memory API's policies and the clock: built-ins, and the shapes of your own.

Owns: supersession, recency, feedback (the one usefulness formula), entity
extraction, forgetting and consolidation policies, observers, and :class:`Clock`.
Every built-in is chosen by name in :class:`~holomem.api.memory.types.MemoryConfig`; Python
code can pass its own callable with ``Memory.with_*``. Every default changes nothing
(docs/contract.md §4).
:class:`Policies` is the resolved set a Memory applies. Imports the memory API's types.
"""

from __future__ import annotations

import math
import numbers
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from holomem.api.engine.validate import MAX_ENTITIES, MAX_ENTITY_CHARS
from holomem.api.memory.config import (
    CUSTOM_PREFIX,
    ContextConfig,
    DialogueConfig,
    FeedbackConfig,
    FusionConfig,
    MemoryConfig,
    Neighbors,
    RecencyConfig,
)
from holomem.errors import InvalidError
from holomem.projections.embeddings import VectorSearch
from holomem.projections.fusion import DEFAULT_FUSION, FusionParams

# -- clock -------------------------------------------------------------------------------


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...


class SystemClock:
    """Wall-clock time (``time.time_ns``), in milliseconds."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000


def _whole_ms(ms: object) -> int:
    """``ms`` as a clock's time: an integer (not a bool). Errors: ``invalid_request``."""
    if isinstance(ms, bool) or not isinstance(ms, int):
        raise InvalidError(f"a clock's time must be an integer number of milliseconds, "
                           f"not {type(ms).__name__}")
    return ms


class ManualClock:
    """A clock that moves only when told to: for tests and reproducible runs."""

    def __init__(self, start_ms: int = 0) -> None:
        self._now = _whole_ms(start_ms)
        self._mu = threading.Lock()

    def now_ms(self) -> int:
        with self._mu:
            return self._now

    def set(self, ms: int) -> None:
        ms = _whole_ms(ms)
        with self._mu:
            self._now = ms

    def advance(self, ms: int) -> int:
        ms = _whole_ms(ms)
        with self._mu:
            self._now += ms
            return self._now


# -- supersession ------------------------------------------------------------------------


class SubjectMember(NamedTuple):
    """Another stored fact of the new fact's subject, as a supersession policy sees it."""

    id: str
    effective_time: int
    ingest_time: int
    #: True when it comes before the new fact in effect order (effective time, then
    #: ingest time, then write order).
    before: bool
    #: True when it would be current when the new fact begins (ignoring the new fact).
    current_at_start: bool


class NewFact(NamedTuple):
    """The fact being remembered, as a supersession policy sees it."""

    effective_time: int  # when it begins: valid_from, else event_time, else now
    valid_to: int | None  # when it ends: valid_to, or earlier its time to live's end


class Links(NamedTuple):
    supersedes: list[str]
    superseded_by: list[str]


#: (the new fact, the other facts of its subject in effect order)
#: -> the links to write on the new fact.
SupersessionPolicy = Callable[[NewFact, Sequence[SubjectMember]], Links]


def no_supersession(fact: NewFact, members: Sequence[SubjectMember]) -> Links:
    return Links([], [])


def latest_by_subject(fact: NewFact, members: Sequence[SubjectMember]) -> Links:
    """A fact supersedes the facts of its subject that began earlier and are current
    when it begins; if a later-beginning fact of the subject is already stored (the
    facts arrived out of order), the first of those supersedes the new one — unless
    the new fact has expired by then, exactly as it would not have been superseded
    had it arrived first.

    Written this way, the current fact of a subject at any time t is the latest one
    that had begun by t, and each fact's status is the same whatever order the facts
    arrived in.
    """
    supersedes = [m.id for m in members if m.before and m.current_at_start]
    after = [m for m in members if not m.before]
    if after and (fact.valid_to is None or after[0].effective_time < fact.valid_to):
        return Links(supersedes, [after[0].id])
    return Links(supersedes, [])


SUPERSESSION: dict[str, SupersessionPolicy] = {
    "none": no_supersession,
    "latest-by-subject": latest_by_subject,
}

# -- recency -----------------------------------------------------------------------------

#: age in milliseconds (evaluation time minus the fact's effective time, >= 0) -> multiplier
RecencyPolicy = Callable[[int], float]


def recency_multiplier(policy: RecencyPolicy, age_ms: int) -> float:
    """What ``policy`` gives a fact of ``age_ms``, checked: a finite number, 0 or more
    (a caller's policy answering anything else is ``invalid_request``)."""
    got: object = policy(age_ms)
    if isinstance(got, bool) or not isinstance(got, numbers.Real) \
            or not math.isfinite(got) or got < 0:
        raise InvalidError(f"the recency policy returned {got!r} for age {age_ms} ms; a "
                           "multiplier must be a finite number, 0 or more")
    return float(got)


def exponential_recency(half_life_ms: int) -> RecencyPolicy:
    if half_life_ms <= 0:
        raise ValueError("half_life_ms must be positive")

    def multiplier(age_ms: int) -> float:
        return math.pow(0.5, max(0, age_ms) / half_life_ms)

    return multiplier


# -- feedback ---------------------------------------------------------------------------


def feedback_balance(helpful: int, total: int) -> float:
    """(helpful - unhelpful) / (n + 2): the balance of a fact's votes, in (-1, 1).

    0 with no votes; -1/3 after one unhelpful vote. It is not a multiplier: see
    :func:`usefulness_multiplier`.
    """
    return (2 * helpful - total) / (total + 2)


def usefulness_multiplier(weight: float | None, helpful: int, total: int) -> float:
    """What recall multiplies a fact's score by: 1 + weight * balance under a feedback
    policy (``weight`` in [0, 1], so the multiplier stays within (1 - weight, 1 + weight),
    above zero: feedback reorders facts but never hides one); 1 without one (None)."""
    if weight is None or not total:
        return 1.0
    return 1.0 + weight * feedback_balance(helpful, total)


# -- entity extraction ---------------------------------------------------------------------

EntityExtractor = Callable[[str], list[str]]

#: Capitalised words that start sentences or address people without naming anything.
_NOT_NAMES = frozenset(
    "a about after all also an and any are as at be because been before but by can could did "
    "do does done during each even every for from good great had has have he hello her here "
    "hers hey hi him his how however i if in into is it its just let like maybe me might more "
    "most my no nor not now oh ok okay on once only or our ours out over please really she "
    "should since so some such sure than thank thanks that the their theirs them then there "
    "these they this those though through to too us very was we well were what when where "
    "whether which while who whom whose why will with would wow yeah yes yet you your yours"
    .split()
)
_WORD = re.compile(r"[^\W_][\w'\u2019\-]*|\S|\s+")


def regex_entities(text: str) -> list[str]:
    """Names in ``text``: runs of capitalised words separated by single spaces.

    "Alice Smith met Bob in New York" -> ["Alice Smith", "Bob", "New York"]. A run
    ends at any punctuation, line break or lower-case word, so "Alice, Bob" and
    "Alice and Bob" give two entities, never one. Possessive "'s" is dropped;
    leading capitalised function words ("The", "When", "I", ...) are dropped, and a
    run made only of them is not an entity. Entities keep their exact spelling:
    nothing is merged by case folding. Order of first appearance, no repeats.

    What it finds is always what a fact may hold (docs/contract.md §5d), so no text the
    store takes is refused for its entities: a name longer than ``MAX_ENTITY_CHARS``
    characters is none, and only the first ``MAX_ENTITIES`` names (in text order) are
    kept.
    """
    out: dict[str, None] = {}
    run: list[str] = []

    def close() -> None:
        while run and run[0].casefold() in _NOT_NAMES:
            run.pop(0)
        name = " ".join(run)
        if name and len(name) <= MAX_ENTITY_CHARS:
            out.setdefault(name, None)
        run.clear()

    pending_space = False
    for m in _WORD.finditer(text):
        if len(out) >= MAX_ENTITIES:
            break
        tok = m.group()
        if tok.isspace():
            if tok != " " or not run:
                close()
            pending_space = tok == " "
            continue
        if tok[0].isupper() and tok[0].isalpha():
            word = re.sub(r"['\u2019]s$", "", tok)
            if run and not pending_space:
                close()
            run.append(word)
            if word != tok:  # a possessive ends the name
                close()
        else:
            close()
        pending_space = False
    close()
    return list(out)[:MAX_ENTITIES]


def no_entities(text: str) -> list[str]:
    return []


EXTRACTORS: dict[str, EntityExtractor] = {"none": no_entities, "regex": regex_entities}


# -- observers ---------------------------------------------------------------------------


class Observation(NamedTuple):
    """What a committed change did: ``op`` is remember, forget or feedback."""

    op: str
    ids: list[str]
    revision: int


Observer = Callable[[Observation], None]


# -- the policies in force -----------------------------------------------------------------

P = TypeVar("P")


def resolve(value: str | P, builtins: Mapping[str, P], what: str) -> P:
    """A built-in policy by name, or the caller's own callable."""
    if isinstance(value, str):
        if value not in builtins:
            raise InvalidError(f"unknown {what} {value!r}")
        return builtins[value]
    if callable(value):
        return value
    raise InvalidError(f"{what} must be a name or a callable, got {type(value).__name__}")


def checked_callable(value: P, what: str, *, optional: bool = False) -> P:
    """``value``, checked to be the caller's callable (or None, when ``optional``): what
    every ``with_*`` call that takes a function checks at once, so that a wrong value
    fails there and not at the first call that uses it.

    Errors: ``invalid_request`` naming ``what`` and the type given.
    """
    if callable(value) or (optional and value is None):
        return value
    allowed = "a callable or None" if optional else "a callable"
    raise InvalidError(f"{what} must be {allowed}, got {type(value).__name__}")


def supplied_policy(value: object, custom: Mapping[str, Callable[..., Any]], what: str
                    ) -> Any:
    """The caller's own policy a configuration field names ``custom:NAME`` (None when
    it names a built-in). Errors: ``invalid_request`` when NAME was not supplied."""
    if not isinstance(value, str) or not value.startswith(CUSTOM_PREFIX):
        return None
    name = value[len(CUSTOM_PREFIX):]
    if name not in custom:
        raise InvalidError(
            f"the configuration names the custom {what} {name!r}: supply it again with "
            f"Memory(store, policies={{{name!r}: your_function}}) (a door that runs no "
            "Python code cannot open this store)")
    return custom[name]


class Policies(NamedTuple):
    """Every policy a Memory applies, resolved from its configuration (and replaced
    one by one by ``Memory.with_*``). The memory API's modules take this, never the
    Memory."""

    supersession: SupersessionPolicy
    recency: RecencyPolicy | None
    extractor: EntityExtractor
    #: the feedback policy's weight (None: feedback does not change recall)
    feedback_weight: float | None
    #: the context policy's neighbour window and weight (None: off)
    context: Neighbors | None
    #: multiplier of facts that are not current (only matters with history="all")
    historical_weight: float
    #: how BM25 and cosine combine when the query has a vector
    fusion: FusionParams = DEFAULT_FUSION
    #: how a query's vector finds its candidates: "exact", "approximate" (through the
    #: approximate index once it is built) or "auto" (so, from a size on)
    vector_search: VectorSearch = "auto"
    #: conversation-aware recall's signals (None: off)
    dialogue: DialogueConfig | None = None

    @classmethod
    def from_config(cls, config: MemoryConfig,
                    custom: Mapping[str, Callable[..., Any]] | None = None) -> Policies:
        """The policies a (checked) configuration names: built-ins, and the caller's own
        (``custom:NAME``) from ``custom``. Errors: ``invalid_request`` for a custom name
        not supplied."""
        custom = custom or {}

        def pick(value: object, builtins: Mapping[str, P], what: str) -> P:
            own = supplied_policy(value, custom, what)
            return own if own is not None else builtins[value]  # type: ignore[index]

        recency: RecencyPolicy | None = None
        if isinstance(config.recency, RecencyConfig):
            recency = exponential_recency(config.recency.exponential.half_life_ms)
        elif config.recency != "none":
            recency = pick(config.recency, {}, "recency policy")
        return cls(
            supersession=pick(config.supersession, SUPERSESSION, "supersession policy"),
            recency=recency, extractor=pick(config.entity_extractor, EXTRACTORS,
                                            "entity extractor"),
            feedback_weight=(config.feedback.weight
                             if isinstance(config.feedback, FeedbackConfig) else None),
            context=(config.context.neighbors if isinstance(config.context, ContextConfig)
                     else None),
            historical_weight=config.historical_weight,
            fusion=(FusionParams(config.fusion.method, config.fusion.lexical_weight,
                                 config.fusion.rrf_k)
                    if isinstance(config.fusion, FusionConfig) else DEFAULT_FUSION),
            vector_search=config.vector_search,
            dialogue=(config.dialogue if isinstance(config.dialogue, DialogueConfig)
                      else None))

    def usefulness(self, feedback: Sequence[tuple[bool, int, str | None]]) -> float:
        """The usefulness multiplier of a fact with these feedback entries."""
        return usefulness_multiplier(self.feedback_weight, sum(1 for h, _, _ in feedback if h),
                                     len(feedback))
