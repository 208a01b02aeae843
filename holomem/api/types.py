"""The memory API's types: inputs, options, results and configuration (docs/contract.md §4, §5).

Owns: every Struct the memory API takes or returns. Python attributes are
snake_case; their JSON form (``Memory.call``, HTTP, CLI) is camelCase, and
request types reject unknown fields so that a client's typo fails loudly. Times
are integer milliseconds since the epoch (Python calls also accept aware
``datetime`` values, converted on the way in).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
import msgspec.structs

from holomem.api import nspath
from holomem.api.graphtypes import GraphBounds, GraphReach, GraphRecall
from holomem.errors import InvalidError

History = Literal["current", "all", "historical"]
#: A namespace, or a namespace prefix, as a request gives it (docs/contract.md §4a): a
#: list of its strings, or all of them in one string (``"users/u-42"``, as
#: :mod:`holomem.api.nspath` writes it).
NamespaceArg = list[str] | str | None
Status = Literal["current", "superseded", "expired", "not-yet-valid"]


class Request(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
              forbid_unknown_fields=True):
    """Every request shape: camelCase in JSON, unknown fields refused."""


class _Response(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    pass


# -- remember ---------------------------------------------------------------------------
class RememberInput(Request, frozen=True):
    """One fact to store. Only ``text`` is required; see docs/contract.md §3 for the fields."""

    text: str
    id: str | None = None
    subject: str | None = None
    entities: list[str] | None = None
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    event_time: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    supersedes: list[str] | None = None
    #: What the agent believes, in [0, 1] (default 1). Changed later only by
    #: ``set_confidence``; feedback never touches it. It never hides a fact.
    confidence: float | None = None
    #: Where the fact lives (docs/contract.md §4a): 0 to 8 non-empty strings, e.g.
    #: ``["memories", "user-42"]`` or ``"memories/user-42"``; empty or absent is the root.
    namespace: NamespaceArg = None
    #: Time to live in ms (1 to 2**62): the fact expires at its ingest time + ttl_ms
    #: (status ``expired`` from then, as with ``valid_to``); None: it never does by itself.
    ttl_ms: int | None = None

    def __post_init__(self) -> None:
        # A namespace given as one string becomes its list here, so the payload, and the
        # content id derived from it, are the list's. A string that does not parse stays
        # as it is, for validate.namespace to refuse with the input it belongs to named.
        if type(self.namespace) is str:
            try:
                parts = nspath.parse(self.namespace)
            except InvalidError:
                return
            msgspec.structs.force_setattr(self, "namespace", parts)


class Remembered(_Response, frozen=True):
    id: str
    created: bool
    ingest_time: int
    superseded: list[str] = []


# -- records and recall -----------------------------------------------------------------
class FeedbackEntry(_Response, frozen=True):
    helpful: bool
    time: int
    note: str | None = None


class FactRecord(_Response, frozen=True):
    """A stored fact: every RememberInput field as stored, its ingest time, status and links.

    ``supersedes`` and ``superseded_by`` are the links that hold now (the caller's
    own and those a supersession policy added, re-pointed around forgotten facts).
    """

    id: str
    text: str
    ingest_time: int
    status: Status
    subject: str | None = None
    entities: list[str] = []
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    event_time: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    supersedes: list[str] = []
    superseded_by: list[str] = []
    confidence: float = 1.0
    helpful: int = 0
    unhelpful: int = 0
    feedback: list[FeedbackEntry] = []
    namespace: list[str] = []
    #: The time to live it was remembered with, and when that ends (ingest + ttl).
    ttl_ms: int | None = None
    expires_at: int | None = None


class RecallOptions(Request, frozen=True):
    k: int = 10
    as_of: int | None = None
    known_at: int | None = None
    history: History = "current"
    subject: str | None = None
    entities: list[str] | None = None
    embedding: list[float] | None = None
    explain: bool = False
    candidate_limit: int = 100
    #: Only facts at or under this namespace prefix (None or []: the root, everything).
    namespace: NamespaceArg = None
    #: Only facts this filter holds for (docs/contract.md §4b; the grammar is in
    #: holomem.api.filters).
    filter: dict[str, Any] | None = None
    #: Fold in facts the top hits reach through links and entities (docs/contract.md
    #: §4f; None: off, and recall is exactly what it is without the option).
    graph: GraphRecall | None = None


class MatchedTerm(_Response, frozen=True):
    term: str
    tf: int
    idf: float
    score: float


class FusionInfo(_Response, frozen=True):
    """How the score was fused: ``method`` is "bm25" or "bm25+cosine"."""

    method: str
    lexical_weight: float
    semantic_weight: float
    fused_score: float


class ChainEntry(_Response, frozen=True):
    id: str
    status: Status
    effective_time: int


class Explanation(_Response, frozen=True):
    id: str
    retrieved: bool
    rank: int | None
    lexical_score: float
    semantic_score: float | None
    fusion: FusionInfo
    matched_terms: list[MatchedTerm]
    recency_multiplier: float
    history_multiplier: float
    status: Status | None
    valid_at: int
    chain: list[ChainEntry]
    score: float = 0.0
    usefulness_multiplier: float = 1.0
    context_bonus: float = 0.0
    reason: str = ""
    #: The fact's time to live and when it ends (None: remembered without one).
    ttl_ms: int | None = None
    expires_at: int | None = None
    #: With a reranker (Python only): its place in the reranker's order (None: left
    #: out, or no reranker); ``rank`` stays recall's own.
    reranked_rank: int | None = None
    #: How graph recall reached this fact (docs/contract.md §4f), or None.
    graph: GraphReach | None = None
    #: What a bound of graph recall cut from the walk (None: nothing, or no graph).
    graph_bounds: GraphBounds | None = None


class Recalled(_Response, frozen=True, omit_defaults=True):
    id: str
    text: str
    score: float
    status: Status
    fact: FactRecord
    explanation: Explanation | None = None


# -- forget -----------------------------------------------------------------------------
class ForgetScope(Request, frozen=True, omit_defaults=True):
    """Exactly one of the fields must be set."""

    ids: list[str] | None = None
    subject: str | None = None
    entity: str | None = None
    ingested_before: int | None = None
    event_before: int | None = None
    metadata: dict[str, Any] | None = None
    #: Every fact at or under this namespace (``[]``: every fact of the store).
    namespace: NamespaceArg = None


class ForgetOptions(Request, frozen=True):
    include_chain: bool = False
    dry_run: bool = False
    purge: bool = False
    #: Restrict the scope to facts at or under this namespace prefix (default: all).
    within: NamespaceArg = None


class Relink(_Response, frozen=True):
    successor: str
    predecessor: str


class ForgetReport(_Response, frozen=True):
    removed: list[str]
    relinked: list[Relink]
    dry_run: bool
    purged: bool
    #: typed links (``relate``) removed with the facts, each counted once
    unlinked: int = 0


class MaintenanceOptions(Request, frozen=True):
    """Options of ``apply_forgetting``: nothing happens unless ``dry_run`` is False."""

    dry_run: bool = True
    include_chain: bool = False
    purge: bool = False
    #: Only facts at or under this namespace prefix (default: all).
    namespace: NamespaceArg = None


class ConsolidateOptions(Request, frozen=True):
    dry_run: bool = True
    allow_destructive: bool = False
    #: Only facts at or under this namespace prefix (default: all).
    namespace: NamespaceArg = None


class ConsolidationGroup(_Response, frozen=True):
    sources: list[str]
    summary_id: str
    text: str


class ConsolidationReport(_Response, frozen=True):
    """What a consolidation planned (``groups``), wrote (``added``) and removed.

    ``sources_kept`` (JSON ``sourcesKept``) says why the sources stay when the policy
    asks to remove them (``removeSources``) and the call did not pass
    ``allow_destructive=True`` (in a dry run too: the real run will need the flag).
    None otherwise: the sources were removed (or will be), the policy keeps them as
    history by design, or nothing was planned.
    """

    dry_run: bool
    groups: list[ConsolidationGroup]
    added: list[str]
    removed: list[str]
    sources_kept: str | None = None


# -- holographic operations, feedback, audit ------------------------------------------
class ProbeHit(_Response, frozen=True):
    """A fact that binds the entity. ``role`` is the order role it fills best
    (0 = named first, 1 = second, ...; None when it fills none clearly)."""

    id: str
    score: float
    role: int | None = None
    role_score: float = 0.0
    text: str = ""


class ProbeResult(_Response, frozen=True):
    entity: str
    results: list[ProbeHit]
    #: facts compared, the membership threshold used, and which path answered
    #: ("algebra": HRR unbinding; "algebra+exact": facts whose bundle is too full
    #: to trust (low signal-to-noise) were checked against their entity list).
    compared: int
    threshold: float
    path: str
    exact_checked: int = 0


class RelatedHit(_Response, frozen=True):
    entity: str
    score: float
    facts: int


class RelatedResult(_Response, frozen=True):
    entity: str
    results: list[RelatedHit]
    facts_bundled: int
    snr: float
    path: str
    compared: int


class ReasonHit(_Response, frozen=True):
    id: str
    score: float
    scores: list[float]
    text: str = ""


class ReasonResult(_Response, frozen=True):
    entities: list[str]
    results: list[ReasonHit]
    compared: int
    threshold: float
    path: str


class ContradictionPair(_Response, frozen=True):
    a: str
    b: str
    score: float
    overlap: float
    content_similarity: float
    shared: list[str]


class ContradictResult(_Response, frozen=True):
    pairs: list[ContradictionPair]
    compared_facts: int
    compared_pairs: int
    #: True when max_pairs stopped the scan; continue from next_cursor.
    bound_hit: bool
    next_cursor: str | None = None


class FeedbackReport(_Response, frozen=True):
    """A fact's votes after a feedback call.

    ``usefulness`` is their balance, (helpful - unhelpful) / (n + 2), in (-1, 1) — 0
    means balanced, not zeroed. ``multiplier`` is what recall multiplies the fact's
    score by: 1 + weight * usefulness under a feedback policy, 1 without one.
    """

    id: str
    helpful: int
    unhelpful: int
    usefulness: float
    multiplier: float = 1.0


class ListFilter(Request, frozen=True):
    """What ``list`` walks: a subject, an entity, a status, and the filter of docs/contract.md §4b
    (its keys, at the top level of the same object)."""

    subject: str | None = None
    entity: str | None = None
    status: Status | None = None
    metadata: dict[str, Any] | None = None
    ingested_after: int | None = None
    ingested_before: int | None = None
    event_after: int | None = None
    event_before: int | None = None
    all_of: list[dict[str, Any]] | None = msgspec.field(default=None, name="$and")
    any_of: list[dict[str, Any]] | None = msgspec.field(default=None, name="$or")
    none_of: dict[str, Any] | None = msgspec.field(default=None, name="$not")

    def conditions(self) -> dict[str, Any] | None:
        """The docs/contract.md §4b part, in its JSON form (None when it has none)."""
        names = {"metadata": "metadata", "ingested_after": "ingestedAfter",
                 "ingested_before": "ingestedBefore", "event_after": "eventAfter",
                 "event_before": "eventBefore", "all_of": "$and", "any_of": "$or",
                 "none_of": "$not"}
        out = {json: getattr(self, f) for f, json in names.items()
               if getattr(self, f) is not None}
        return out or None


class ListPage(_Response, frozen=True):
    facts: list[FactRecord]
    next_cursor: str | None
    scanned: int


# -- configuration ------------------------------------------------------------------------
# Every number of the configuration carries its documented range (README "Policies"), as
# msgspec constraints: decoding JSON (config_from_json) and converting a Struct built in
# Python (validate.memory_config, which Memory uses) check exactly the same rules.
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
    and (``expired_ttl``) facts whose time to live has run out."""

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


#: A policy of the caller's own, named in a stored configuration: ``custom:NAME``. The
#: callable itself is code, so it is never stored: ``Memory(store, policies={NAME: fn})``
#: supplies it again, and a door that cannot refuses the store clearly.
CUSTOM_PREFIX = "custom:"
_CUSTOM = r"custom:[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
#: The forgetting policy's names: the built-in ``expired-ttl`` is
#: ``ForgettingConfig(expired_ttl=True)`` (facts whose time to live has run out).
ForgettingName = Annotated[str, msgspec.Meta(
    pattern=f"^(none|expired-ttl|{_CUSTOM})$",
    description='"none", "expired-ttl" or "custom:NAME"')]
SupersessionName = Annotated[str, msgspec.Meta(
    pattern=f"^(none|latest-by-subject|{_CUSTOM})$",
    description='"none", "latest-by-subject" or "custom:NAME"')]
ExtractorName = Annotated[str, msgspec.Meta(
    pattern=f"^(none|regex|{_CUSTOM})$", description='"none", "regex" or "custom:NAME"')]
PolicyName = Annotated[str, msgspec.Meta(pattern=f"^(none|{_CUSTOM})$",
                                         description='"none" or "custom:NAME"')]


class FusionConfig(_Config, frozen=True):
    """How recall combines BM25 with cosine when a query has a vector (docs/contract.md §4e):
    ``linear`` (w * bm25 / max bm25 + (1 - w) * cosine) or ``rrf`` (reciprocal ranks,
    w / (rrfK + lexical rank) + (1 - w) / (rrfK + semantic rank)); w is
    ``lexical_weight``."""

    method: Literal["linear", "rrf"] = "linear"
    lexical_weight: Fraction = 0.5
    rrf_k: Annotated[int, msgspec.Meta(ge=1, le=10_000)] = 60


EmbedderName = Annotated[str, msgspec.Meta(
    pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$", description='a built-in embedder, e.g. "minilm"')]


class MemoryConfig(_Config, frozen=True):
    """Every policy, with a default that changes nothing (docs/contract.md §4).

    The constructor checks nothing (msgspec Structs never do); ``Memory`` and
    :func:`holomem.api.validate.memory_config` check every field's type and range.
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
    #: The fusion of the two signals. "default": with an embedder, linear with lexical
    #: weight 0.4 (chosen on LoCoMo, benchmarks/fusion_study.py); without one, document
    #: search's own (linear, 0.5), so that a caller's own vectors rank as search does.
    fusion: Literal["default"] | FusionConfig = "default"
    #: How a query's vector finds its candidates: "exact" (every vector's cosine) or
    #: "approximate" (an in-memory HNSW index, the ``ann`` extra, over stores of at least
    #: 50,000 facts; docs/contract.md §4e "Vector search at scale").
    vector_search: Literal["exact", "approximate"] = "exact"


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


# -- namespaces ---------------------------------------------------------------------------
class NamespaceCount(_Response, frozen=True):
    namespace: list[str]
    facts: int


class NamespacePage(_Response, frozen=True):
    """Namespaces that hold facts, sorted; continue from ``next_cursor`` when set."""

    namespaces: list[NamespaceCount]
    next_cursor: str | None = None


def config_to_json(config: MemoryConfig) -> bytes:
    """The canonical JSON of a configuration (camelCase, sorted keys): what a store
    records, and what two configurations are compared by."""
    return msgspec.json.encode(msgspec.to_builtins(config), order="sorted")


# -- export and import (docs/contract.md §4d) ------------------------------------------
class LinkRecord(Request, frozen=True):
    """A supersession link, kept in the successor's record: this fact supersedes
    ``supersedes``, known from ``known_at`` (ms) on."""

    supersedes: str
    known_at: int


class RelationRecord(Request, frozen=True):
    """A typed relation ``from_id -[relation]-> to_id`` in an export record (format 2):
    kept in the record of whichever end the export writes later, so the other end is
    always on an earlier line. ``time``: when the source store learned it; ``order``:
    its place in the order the source made its links (import makes them in that
    order, so ``links`` and ``why`` answer as the source did)."""

    from_id: str
    to_id: str
    relation: str
    time: int
    metadata: dict[str, Any] | None = None
    order: int | None = None


class FeedbackRecord(Request, frozen=True):
    helpful: bool
    time: int
    note: str | None = None


#: The version of :class:`FactExport`'s form an export writes (2: records carry
#: ``relations``); import reads :data:`EXPORT_FORMATS`, any other is refused.
EXPORT_FORMAT = 2
EXPORT_FORMATS = (1, 2)


class FactExport(Request, frozen=True):
    """One fact as ``Memory.export`` writes it and ``Memory.import_`` reads it: all it
    takes to rebuild the fact exactly (JSON: camelCase, one object per line).

    ``embedding`` is the caller's vector as written; ``requested`` the caller's own
    ``supersedes`` list; ``links`` every supersession link this fact holds as the
    successor (its own, a policy's, re-pointed ones), each with its known-at time;
    ``digest`` the hex payload digest that makes a retried remember idempotent;
    ``relations`` the typed links whose later-written end this fact is (format 2).
    """

    id: str
    text: str
    ingest_time: int
    namespace: list[str] = []
    subject: str | None = None
    entities: list[str] = []
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    event_time: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    requested: list[str] = []
    links: list[LinkRecord] = []
    confidence: float = 1.0
    feedback: list[FeedbackRecord] = []
    digest: str | None = None
    format: int = EXPORT_FORMAT
    ttl_ms: int | None = None
    relations: list[RelationRecord] = []


class ImportReport(_Response, frozen=True):
    """What ``import_`` did: facts written, facts already there with the same payload
    (no-ops), transactions, supersession links whose other fact never arrived (not
    written), typed relations written, and relations an end of which is not a stored
    fact (not written)."""

    imported: int
    unchanged: int
    batches: int
    unresolved_links: int = 0
    relations: int = 0
    unresolved_relations: int = 0


class MemoryInfo(_Response, frozen=True):
    """What ``Memory.info`` tells of a store: its facts, the embedder whose vectors it
    holds (and a re-embed under way), and the configuration in force."""

    facts: int
    namespaces: int
    embedder: dict[str, Any] | None
    reembed_pending: dict[str, Any] | None
    config: MemoryConfig
