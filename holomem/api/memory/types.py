"""The memory tier's shared types: inputs, options and results (docs/contract.md §4, §5).

Owns: the Structs the memory API takes or returns (the configuration's are
:mod:`.config`'s; the records of export and import :mod:`.transfer.records`'). Python attributes are
snake_case; their JSON form (``Memory.call``, HTTP, CLI) is camelCase, and
request types reject unknown fields so that a client's typo fails loudly. Times
are integer milliseconds since the epoch (Python calls also accept aware
``datetime`` values, converted on the way in).
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
import msgspec.structs

from holomem.api.engine import nspath
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.graph.types import GraphBounds, GraphReach, GraphRecall
from holomem.api.memory.shapes import Request, Response
from holomem.errors import InvalidError

History = Literal["current", "all", "historical"]
#: A namespace, or a namespace prefix, as a request gives it (docs/contract.md §4a): a
#: list of its strings, or all of them in one string (``"users/u-42"``, as
#: :mod:`holomem.api.engine.nspath` writes it).
NamespaceArg = list[str] | str | None
Status = Literal["current", "superseded", "expired", "not-yet-valid"]


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
    #: A conversation turn (docs/contract.md §4g): who said it (an id-like string), the
    #: session it belongs to and its position there (0 to 2**62). Each may be given on
    #: its own; ``remember_conversation`` sets all three.
    speaker: str | None = None
    session: str | None = None
    position: int | None = None

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


class Remembered(Response, frozen=True):
    id: str
    created: bool
    ingest_time: int
    superseded: list[str] = []


# -- records and recall -----------------------------------------------------------------
class FeedbackEntry(Response, frozen=True):
    helpful: bool
    time: int
    note: str | None = None


class FactRecord(Response, frozen=True):
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
    #: Its conversation turn, when it is one (docs/contract.md §4g).
    speaker: str | None = None
    session: str | None = None
    position: int | None = None


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
    #: holomem.api.memory.filters).
    filter: dict[str, Any] | None = None
    #: Fold in facts the top hits reach through links and entities (docs/contract.md
    #: §4f; None: off, and recall is exactly what it is without the option).
    graph: GraphRecall | None = None


class MatchedTerm(Response, frozen=True):
    term: str
    tf: int
    idf: float
    score: float


class FusionInfo(Response, frozen=True, omit_defaults=True):
    """How the score was fused: ``method`` is "bm25", "bm25+cosine" (the linear
    fusion), "bm25+cosine bounded", "bm25+cosine floored" or "bm25+cosine rrf". With the
    linear, bounded or floored fusion, ``lexical_part`` and ``semantic_part`` are the two
    signals as the fusion normalised them: ``lexical_weight * lexical_part + semantic_weight *
    semantic_part`` is the fused score before any context share (None, and left out
    of the JSON, otherwise)."""

    method: str
    lexical_weight: float
    semantic_weight: float
    fused_score: float
    lexical_part: float | None = None
    semantic_part: float | None = None


class ChainEntry(Response, frozen=True):
    id: str
    status: Status
    effective_time: int


class DialogueExplained(Response, frozen=True):
    """The dialogue signals' part of a fact's score (docs/contract.md §4g): its score
    is (its score with the context policy's share + ``reply_bonus``) times
    ``speaker_multiplier`` times ``date_multiplier`` times ``session_multiplier``."""

    #: what it borrowed through reply links (from the turn it answers, its best answer)
    reply_bonus: float = 0.0
    #: the part of ``reply_bonus`` borrowed through links the reply rule inferred
    reply_inferred: float = 0.0
    #: 1 + the speaker boost when the question names the turn's speaker, else 1
    speaker_multiplier: float = 1.0
    #: 1 + the date boost when its event time falls in a window the question names
    date_multiplier: float = 1.0
    #: 1 + the session prior's share: how its session's best turn scored against the best
    session_multiplier: float = 1.0
    #: the speakers the question names, and the windows [start, end) ms of its dates
    speakers_named: list[str] = []
    date_windows: list[list[int]] = []


class Explanation(Response, frozen=True):
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
    #: The fact's conversation turn, when it is one (docs/contract.md §4g).
    speaker: str | None = None
    session: str | None = None
    position: int | None = None
    #: What the dialogue signals did to its score (None: they are off;
    #: docs/contract.md §4g).
    dialogue: DialogueExplained | None = None


class Recalled(Response, frozen=True, omit_defaults=True):
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


class Relink(Response, frozen=True):
    successor: str
    predecessor: str


class ForgetReport(Response, frozen=True):
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


class ConsolidationGroup(Response, frozen=True):
    sources: list[str]
    summary_id: str
    text: str


class ConsolidationReport(Response, frozen=True):
    """What a consolidation planned (``groups``), wrote (``added``) and removed.

    ``sources_kept`` (JSON ``sourcesKept``) says why the sources stay when the policy
    asks to remove them (``removeSources``) and the call did not pass
    ``allow_destructive=True`` (in a dry run too: the real run will need the flag).
    None otherwise: the sources were removed (or will be), the policy keeps them as
    history by design, or nothing was planned. With ``removeSources``, ``groups`` also
    holds the summaries an earlier run wrote whose sources are still stored (a rerun
    with the flag removes them).
    """

    dry_run: bool
    groups: list[ConsolidationGroup]
    added: list[str]
    removed: list[str]
    sources_kept: str | None = None


# -- holographic operations, feedback, audit ------------------------------------------
class ProbeHit(Response, frozen=True):
    """A fact that binds the entity. ``role`` is the order role it fills best
    (0 = named first, 1 = second, ...; None when it fills none clearly)."""

    id: str
    score: float
    role: int | None = None
    role_score: float = 0.0
    text: str = ""


class ProbeResult(Response, frozen=True):
    entity: str
    results: list[ProbeHit]
    #: facts compared, the membership threshold used, and which path answered
    #: ("algebra": HRR unbinding; "algebra+exact": facts whose bundle is too full
    #: to trust (low signal-to-noise) were checked against their entity list).
    compared: int
    threshold: float
    path: str
    exact_checked: int = 0


class RelatedHit(Response, frozen=True):
    entity: str
    score: float
    facts: int


class RelatedResult(Response, frozen=True):
    entity: str
    results: list[RelatedHit]
    facts_bundled: int
    snr: float
    path: str
    compared: int


class ReasonHit(Response, frozen=True):
    id: str
    score: float
    scores: list[float]
    text: str = ""


class ReasonResult(Response, frozen=True):
    entities: list[str]
    results: list[ReasonHit]
    compared: int
    threshold: float
    path: str


class ContradictionPair(Response, frozen=True):
    a: str
    b: str
    score: float
    overlap: float
    content_similarity: float
    shared: list[str]


class ContradictResult(Response, frozen=True):
    pairs: list[ContradictionPair]
    compared_facts: int
    compared_pairs: int
    #: True when max_pairs stopped the scan; continue from next_cursor.
    bound_hit: bool
    next_cursor: str | None = None


class FeedbackReport(Response, frozen=True):
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
    #: A turn's fields (docs/contract.md §4g): a value, or a condition of operators.
    #: Unset when not given: ``null`` is a value (``{"$eq": null}``), refused as a
    #: turn's field is, as recall refuses it, never taken for "no condition".
    speaker: Any = msgspec.UNSET
    session: Any = msgspec.UNSET
    position: Any = msgspec.UNSET

    def conditions(self) -> dict[str, Any] | None:
        """The docs/contract.md §4b part, in its JSON form (None when it has none)."""
        names = {"metadata": "metadata", "ingested_after": "ingestedAfter",
                 "ingested_before": "ingestedBefore", "event_after": "eventAfter",
                 "event_before": "eventBefore", "all_of": "$and", "any_of": "$or",
                 "none_of": "$not", "speaker": "speaker", "session": "session",
                 "position": "position"}
        turn = ("speaker", "session", "position")
        out = {json: getattr(self, f) for f, json in names.items()
               if getattr(self, f) is not (msgspec.UNSET if f in turn else None)}
        return out or None


class ListPage(Response, frozen=True):
    facts: list[FactRecord]
    next_cursor: str | None
    scanned: int


# -- namespaces ---------------------------------------------------------------------------
class NamespaceCount(Response, frozen=True):
    namespace: list[str]
    facts: int


class NamespacePage(Response, frozen=True):
    """Namespaces that hold facts, sorted; continue from ``next_cursor`` when set."""

    namespaces: list[NamespaceCount]
    next_cursor: str | None = None


class MemoryInfo(Response, frozen=True):
    """What ``Memory.info`` tells of a store: its facts, the embedder whose vectors it
    holds (and a re-embed under way), and the configuration in force."""

    facts: int
    namespaces: int
    embedder: dict[str, Any] | None
    reembed_pending: dict[str, Any] | None
    config: MemoryConfig


class Capabilities(Response, frozen=True):
    """What ``Memory.capabilities`` tells a client before it calls: this build's version,
    the contract ops it serves (and which of them can write), the built-in embedders
    and whether each one's model is installed, which optional extras are installed,
    and the format versions it writes and reads."""

    version: str
    ops: list[str]
    writes: list[str]
    embedders: dict[str, bool]
    extras: dict[str, bool]
    formats: dict[str, int | list[int]]
