"""A Memory's configuration: :class:`MemoryConfig` and its parts (docs/contract.md §4c).

Owns: the configuration's Structs, the documented range of every number in it (as msgspec
constraints, so decoding JSON and converting a Struct built in Python check the same
rules), and its canonical JSON (:func:`config_to_json`, :func:`config_from_json`): what a
store records and what two configurations are compared by. Imports msgspec and the errors.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from holomem.errors import InvalidError

# -- configuration ------------------------------------------------------------------------
# Every number of the configuration carries its documented range (README "Policies"), as
# msgspec constraints: decoding JSON (config_from_json) and converting a Struct built in
# Python (checks.memory_config, which Memory uses) check exactly the same rules.
#: The largest duration or time in milliseconds (times are kept below 2**62).
MAX_MS = 2**62


#: The widest context window (neighbours on each side): a recall does window passes.
MAX_CONTEXT_WINDOW = 100


HalfLifeMs = Annotated[int, msgspec.Meta(gt=0, le=MAX_MS, description="> 0 ms")]


DurationMs = Annotated[int, msgspec.Meta(ge=0, le=MAX_MS, description=">= 0 ms")]


Fraction = Annotated[float, msgspec.Meta(ge=0.0, le=1.0, description="in [0, 1]")]


Window = Annotated[int, msgspec.Meta(ge=1, le=MAX_CONTEXT_WINDOW,
                                     description=f"1 to {MAX_CONTEXT_WINDOW}")]


class _Config(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
              forbid_unknown_fields=True):
    pass


class Exponential(_Config, frozen=True):
    """Recency multiplier 0.5 ** (age / half_life_ms); ``half_life_ms`` > 0."""

    half_life_ms: HalfLifeMs


class RecencyConfig(_Config, frozen=True):
    exponential: Exponential


class ForgettingConfig(_Config, frozen=True):
    """Built-in forgetting: facts expired, or superseded, for longer than a duration (>= 0),
    and (``expired_ttl``) facts whose time to live has run out. A fact expires at its end,
    the earlier of ``valid_to`` and its ingest time + ``ttl_ms`` (docs/contract.md §3),
    so ``expired_for_longer_than_ms`` counts a TTL's end as it counts a ``valid_to``."""

    expired_for_longer_than_ms: DurationMs | None = None
    superseded_for_longer_than_ms: DurationMs | None = None
    #: Facts whose time to live has run out (``remember(ttl_ms=...)``), at once.
    expired_ttl: bool = False


class Duplicates(_Config, frozen=True):
    """Exact duplicates (same words) always; near ones at this word-set Jaccard or above
    (``near_threshold`` in [0, 1]; 1 means exact duplicates only)."""

    near_threshold: Fraction = 1.0


class ConsolidationConfig(_Config, frozen=True):
    duplicates: Duplicates
    #: Remove the sources once their summary is written; only a call that also passes
    #: ``allow_destructive=True`` does so (the report says when sources were kept).
    remove_sources: bool = False


class FeedbackConfig(_Config, frozen=True):
    """Usefulness from feedback: multiplier = 1 + weight * (helpful - unhelpful) / (n + 2).

    ``weight`` in [0, 1]: the multiplier stays within (1 - weight, 1 + weight), above
    zero, so feedback reorders facts but never hides one.
    """

    weight: Fraction = 0.5


class Neighbors(_Config, frozen=True):
    """Facts written next to each other lend each other ``weight`` (in [0, 1]) times their
    score, up to ``window`` (1 to :data:`MAX_CONTEXT_WINDOW`) facts on each side."""

    weight: Fraction = 0.3
    window: Window = 1


class ContextConfig(_Config, frozen=True):
    neighbors: Neighbors


#: The largest boost a dialogue multiplier may add (a multiplier is 1 + boost).
MAX_BOOST = 10.0


Boost = Annotated[float, msgspec.Meta(ge=0.0, le=MAX_BOOST,
                                      description=f"0 to {MAX_BOOST:g}")]


class Replies(_Config, frozen=True):
    """The reply links of a conversation (``replies_to``, docs/contract.md §4g) in
    recall: an answer borrows ``answer`` (in [0, 1]) times the score of the turn it
    answers; a turn borrows ``question`` (in [0, 1]) times its best answer's score.
    ``infer``: a turn stored with no ``replies_to`` link of its own (by ``remember``
    with speaker, session and position, say) answers the turn the reply rule names —
    the nearest earlier turn of its session by another speaker, at most 8 positions
    back — as if the link were stored."""

    answer: Fraction = 0.0
    question: Fraction = 0.0
    infer: bool = False


class DialogueConfig(_Config, frozen=True):
    """Conversation-aware recall (docs/contract.md §4g): the reply links, the speakers
    and the dates a question names. Every part at its default changes nothing.

    ``speaker``: a turn whose speaker the question names scores ``1 + speaker`` times
    its score; ``mute_speakers``: a speaker's name in the question is left out of the
    words BM25 matches (it is matched against the speaker field instead).
    ``dates``: a fact whose event time falls in a window the question names (an
    absolute date, a month or a year, or one relative to ``as_of``, else now:
    "yesterday", "last week", "last month", ...) scores ``1 + dates`` times its score.
    ``session``: the session prior — after the other signals, a turn scores
    ``1 + session * b / top`` times its score, ``b`` the best score among the turns of
    its session, ``top`` the best session's: the conversation that best matches the
    question comes forward as a whole.
    """

    replies: Replies = Replies()
    speaker: Boost = 0.0
    mute_speakers: bool = False
    dates: Boost = 0.0
    session: Boost = 0.0


#: A policy of the caller's own, named in a stored configuration: ``custom:NAME``. The
#: callable itself is code, so it is never stored: ``Memory(store, policies={NAME: fn})``
#: supplies it again, and a door that cannot refuses the store clearly.
CUSTOM_PREFIX = "custom:"


_CUSTOM = r"custom:[A-Za-z0-9][A-Za-z0-9._-]{0,63}"


def _whole(pattern: str) -> str:
    r"""A pattern that only a whole string matches. msgspec checks a pattern with Python's
    ``re.search``, whose ``$`` also matches before a final line break: "expired-ttl\n"
    passed, then named no policy (a KeyError, or a policy silently not applied).
    ``(?!\n)`` refuses that and, unlike ``\Z``, means the same to a JSON Schema validator
    (the OpenAPI document carries these patterns)."""
    return f"^(?:{pattern})(?!\\n)$"


#: The forgetting policy's names: the built-in ``expired-ttl`` is
#: ``ForgettingConfig(expired_ttl=True)`` (facts whose time to live has run out).
ForgettingName = Annotated[str, msgspec.Meta(
    pattern=_whole(f"none|expired-ttl|{_CUSTOM}"),
    description='"none", "expired-ttl" or "custom:NAME"')]


SupersessionName = Annotated[str, msgspec.Meta(
    pattern=_whole(f"none|latest-by-subject|{_CUSTOM}"),
    description='"none", "latest-by-subject" or "custom:NAME"')]


ExtractorName = Annotated[str, msgspec.Meta(
    pattern=_whole(f"none|regex|{_CUSTOM}"), description='"none", "regex" or "custom:NAME"')]


PolicyName = Annotated[str, msgspec.Meta(pattern=_whole(f"none|{_CUSTOM}"),
                                         description='"none" or "custom:NAME"')]


class FusionConfig(_Config, frozen=True):
    """How recall combines BM25 with cosine when a query has a vector (docs/contract.md §4e):
    ``linear`` (w * bm25 / max bm25 + (1 - w) * cosine), ``bounded`` (each part
    relative to the best candidate's, BM25's never to less than one word's most, the
    cosine's through exp(gap / 0.2): a single weak lexical hit does not beat a clearly
    better semantic match), ``floored`` (the bounded fusion with BM25 relative to the
    best candidate's but never to less than a fixed 4.0, a weak match's score; the
    default with an embedder, at w = 0.55) or ``rrf`` (reciprocal ranks, w / (rrfK +
    lexical rank) + (1 - w) / (rrfK + semantic rank)); w is ``lexical_weight``."""

    method: Literal["linear", "bounded", "floored", "rrf"] = "linear"
    lexical_weight: Fraction = 0.5
    rrf_k: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 60


EmbedderName = Annotated[str, msgspec.Meta(
    pattern=_whole(r"[a-z0-9][a-z0-9._-]{0,63}"),
    description='a built-in embedder, e.g. "minilm"')]


class MemoryConfig(_Config, frozen=True):
    """Every policy, with a default that changes nothing (docs/contract.md §4).

    The constructor checks nothing (msgspec Structs never do); ``Memory`` and
    :func:`holomem.api.engine.checks.memory_config` check every field's type and range.
    """

    supersession: SupersessionName = "none"
    recency: PolicyName | RecencyConfig = "none"
    forgetting: ForgettingName | ForgettingConfig = "none"
    consolidation: PolicyName | ConsolidationConfig = "none"
    entity_extractor: ExtractorName = "none"
    #: Multiplier in [0, 1] for facts that are not current (only matters with
    #: history="all" or "historical").
    historical_weight: Fraction = 1.0
    feedback: Literal["none"] | FeedbackConfig = "none"
    #: Conversation context: a fact's score borrows from the facts written just
    #: before and after it (useful when facts are consecutive turns of a dialogue).
    context: Literal["none"] | ContextConfig = "none"
    #: The built-in embedder facts and queries without a vector are embedded with
    #: (docs/contract.md §4e), or None: none (unless the store recorded one, or Memory(embedder=)).
    embedder: EmbedderName | None = None
    #: The fusion of the two signals. "default": with an embedder, floored with lexical
    #: weight 0.55 (docs/contract.md §4e; the linear fusion at 0.4 before it); without
    #: one, document search's own (linear, 0.5), so that a caller's own vectors rank as
    #: search does.
    fusion: Literal["default"] | FusionConfig = "default"
    #: How a query's vector finds its candidates: "exact" (every vector's cosine),
    #: "approximate" (an in-memory HNSW index, built in the background, at any size) or
    #: "auto" (the index from 10,000 live facts, exact below; docs/contract.md §4e
    #: "Vector search at scale").
    vector_search: Literal["exact", "approximate", "auto"] = "auto"
    #: Conversation-aware recall (reply links, speakers and dates in questions;
    #: docs/contract.md §4g), or "none". :meth:`conversation` gives the recommended one.
    dialogue: Literal["none"] | DialogueConfig = "none"

    @classmethod
    def conversation(cls, embedder: str | None = None) -> MemoryConfig:
        """The configuration recommended for stores of conversations (turns stored by
        ``remember_conversation``; docs/contract.md §4g), measured on the LoCoMo
        development set (benchmarks/locomo.py): the context policy (weight 0.4, window
        2), speaker matching, the date prior and the session prior (each a multiplier of
        up to 2), without an embedder the reply share (0.2, links inferred for turns
        stored without one); with the built-in ``embedder`` named, speaker names muted
        in BM25's words and the ``bounded`` fusion (a clearly better semantic match is
        not beaten by a weak lexical hit). Plain data: print it, store it, change a
        part with ``msgspec.structs.replace``."""
        weight, window = CONVERSATION_CONTEXT
        context = ContextConfig(neighbors=Neighbors(weight=weight, window=window))
        if embedder is None:
            return cls(context=context, dialogue=CONVERSATION_DIALOGUE)
        return cls(context=context, dialogue=CONVERSATION_DIALOGUE_EMBEDDED,
                   fusion=CONVERSATION_FUSION_EMBEDDED, embedder=embedder)


#: The recommended conversation configuration's parts (:meth:`MemoryConfig.conversation`):
#: the context policy's (weight, window), and the dialogue signals.
#: A turn by a speaker the question names, and a fact of a date it names, count double,
#: and so does a turn of the best-matching session (less in a session that matched
#: less); without an embedder an answer borrows a fifth of its question's score (with
#: MiniLM the reply share lowered recall on the LoCoMo development set, so it is off,
#: and the names a question gives are matched against the speaker field only: muted,
#: they gained there and lost without the embedder). With the embedder, the bounded
#: fusion: most misses share no content word with their evidence (issue 30).
CONVERSATION_CONTEXT = (0.4, 2)
CONVERSATION_DIALOGUE = DialogueConfig(replies=Replies(answer=0.2, infer=True), speaker=1.0,
                                       dates=1.0, session=1.0)
CONVERSATION_DIALOGUE_EMBEDDED = DialogueConfig(speaker=1.0, mute_speakers=True, dates=1.0,
                                                session=1.0)
CONVERSATION_FUSION_EMBEDDED = FusionConfig(method="bounded")


def config_from_json(data: bytes | str) -> MemoryConfig:
    """Parse a MemoryConfig from JSON (camelCase); unknown fields are errors, and so is
    any number outside its documented range (the same checks as ``Memory(...)``).

    Errors: ``invalid_request``, naming the field (e.g. ``$.recency.exponential.halfLifeMs``).
    """
    if not isinstance(data, (bytes, str)):
        raise InvalidError(f"config: expected JSON text, got {type(data).__name__}")
    try:
        return msgspec.json.decode(data, type=MemoryConfig)
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError) as exc:
        # DecodeError includes ValidationError (a wrong type or a number out of range).
        raise InvalidError(f"config: {exc}") from exc


def config_to_json(config: MemoryConfig) -> bytes:
    """The canonical JSON of a configuration (camelCase, sorted keys): what a store
    records, and what two configurations are compared by."""
    return msgspec.json.encode(msgspec.to_builtins(config), order="sorted")
