"""The memory API, ``holomem.Memory`` (SPEC §3, §4): facts over time on a Store.

Owns: remember (ids, idempotency, conflicts, supersession links), recall (status
filtering, multipliers, the identity rule), explain, get and history. Forgetting
and maintenance live in :mod:`holomem.api.forgetting`; the JSON contract in
:mod:`holomem.api.contract`. The fact index itself is a projection of the Store
(:mod:`holomem.projections.facts`), so every ``Memory`` over one ``Store`` reads
the same, current index: a handle never needs rebuilding after another's write.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from typing import Any, NamedTuple, TypeVar

import msgspec
import numpy as np

from holomem.api import audit, contract, forgetting, holographic, validate
from holomem.api.documents import Store, _State
from holomem.api.policies import (
    EXTRACTORS,
    SUPERSESSION,
    Clock,
    EntityExtractor,
    Links,
    NewFact,
    Observation,
    Observer,
    RecencyPolicy,
    SubjectMember,
    SupersessionPolicy,
    SystemClock,
    exponential_recency,
    feedback_balance,
    usefulness_multiplier,
)
from holomem.api.types import (
    ChainEntry,
    ConsolidateOptions,
    ConsolidationReport,
    ContextConfig,
    ContradictResult,
    Explanation,
    FactRecord,
    FeedbackConfig,
    FeedbackEntry,
    FeedbackReport,
    ForgetOptions,
    ForgetReport,
    ForgetScope,
    FusionInfo,
    ListFilter,
    ListPage,
    MaintenanceOptions,
    MatchedTerm,
    MemoryConfig,
    Neighbors,
    ProbeResult,
    ReasonResult,
    Recalled,
    RecallOptions,
    RecencyConfig,
    RelatedResult,
    Remembered,
    RememberInput,
)
from holomem.errors import ConflictError, InvalidError, LimitError, NotFoundError
from holomem.events import ConfidenceSet, DocumentAdded, Event, FactAdded, FeedbackGiven
from holomem.projections.facts import CURRENT
from holomem.projections.fusion import W_LEXICAL, W_SEMANTIC, Fusion, top_k

#: Limits of the memory API's calls (README "Limits"); the others are in validate.
MAX_CANDIDATES = 1000
MAX_RECALL_K = 1000
#: Facts in one remember_many call (one transaction; the plan is linear in it).
MAX_FACTS = 10_000
#: Ids in one forget scope.
MAX_FORGET_IDS = validate.MAX_IDS
TIME_LIMIT = 2**62
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_ms(value: object, field: str) -> int | None:
    """Milliseconds since the epoch from an aware datetime or an int (None stays None)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.utcoffset() is None:
            raise InvalidError(f"{field}: a datetime must be timezone-aware")
        # Exact integer arithmetic: timestamp() * 1000 is a float, and rounds some
        # whole-millisecond times one millisecond down (e.g. in 2039).
        return (value - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidError(f"{field} must be milliseconds (int) or an aware datetime")
    if not -TIME_LIMIT < value < TIME_LIMIT:
        raise InvalidError(f"{field} is out of range")
    return value


_TIME_FIELDS = ("event_time", "valid_from", "valid_to")
_RECALL_TIME_FIELDS = ("as_of", "known_at")


def _struct(cls: type[Any], value: object, fields: Mapping[str, Any], what: str,
            times: Sequence[str]) -> Any:
    """A validated request Struct from a Struct, a snake_case dict, or keyword fields."""
    if value is None:
        raw: dict[str, Any] = dict(fields)
    elif isinstance(value, cls):
        if fields:
            raise InvalidError(f"pass {what} either as an object or as keywords, not both")
        raw = {f: getattr(value, f) for f in value.__struct_fields__}
    elif isinstance(value, Mapping):
        raw = {**value, **fields}
    else:
        raise InvalidError(f"{what} must be a {cls.__name__}, a dict or keyword fields")
    for name in times:
        if name in raw:
            raw[name] = to_ms(raw[name], name)
    for name, value in raw.items():
        if isinstance(value, np.ndarray):
            raw[name] = value.tolist()  # an embedding as a numpy array
        elif isinstance(value, (set, frozenset)):
            # A set has no order; a sorted list gives the same payload (and content id)
            # in every process.
            try:
                raw[name] = sorted(value)
            except TypeError as exc:
                raise InvalidError(f"{what}: {name} mixes values that cannot be ordered") \
                    from exc
    names = _encoded_names(cls)
    unknown = [k for k in raw if k not in names]
    if unknown:
        raise InvalidError(f"{what}: unknown fields {sorted(map(str, unknown))}")
    try:
        # Struct constructors do not check types; converting the fields under their
        # encoded (camelCase) names does, exactly as a JSON request is checked.
        return msgspec.convert({names[k]: v for k, v in raw.items()}, cls)
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError) as exc:
        raise InvalidError(f"{what}: {exc}") from exc


_NAMES: dict[type[Any], dict[str, str]] = {}


def _encoded_names(cls: type[Any]) -> dict[str, str]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = dict(zip(cls.__struct_fields__, cls.__struct_encode_fields__,
                                       strict=True))
    return names


P = TypeVar("P")


def _named(value: str | P, builtins: Mapping[str, P], what: str) -> P:
    """A built-in policy by name, or the caller's own callable."""
    if isinstance(value, str):
        if value not in builtins:
            raise InvalidError(f"unknown {what} {value!r}")
        return builtins[value]
    if callable(value):
        return value
    raise InvalidError(f"{what} must be a name or a callable")


def _confidence(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidError("confidence must be a number between 0 and 1")
    return float(value)


class _Pending(NamedTuple):
    """A fact written earlier in the same batch (remember_many: later inputs see it)."""

    id: str
    digest: bytes
    ingest: int
    subject: str | None
    eff: int
    order: int
    supersedes: tuple[str, ...]
    superseded_by: tuple[str, ...]


class _Candidate(NamedTuple):
    slot: int
    rank: int  # 1-based position in document search's ranking
    status: str
    score: float  # fused score times the multipliers
    fused: float
    lexical: float
    semantic: float | None
    recency: float
    history: float
    usefulness: float


class Memory:
    """Facts that hold over time, on top of a :class:`~holomem.Store`."""

    def __init__(self, store: Store, config: MemoryConfig | None = None, *,
                 clock: Clock | None = None) -> None:
        if not isinstance(store, Store):
            raise InvalidError("Memory needs a holomem.Store")
        self.store = store
        #: The configuration, checked whole (types and every number's range).
        self.config = validate.memory_config(config if config is not None else MemoryConfig())
        self.clock: Clock = clock if clock is not None else SystemClock()
        self._supersession: SupersessionPolicy = SUPERSESSION[self.config.supersession]
        self._recency: RecencyPolicy | None = None
        if isinstance(self.config.recency, RecencyConfig):
            self._recency = exponential_recency(self.config.recency.exponential.half_life_ms)
        self._extractor: EntityExtractor = EXTRACTORS[self.config.entity_extractor]
        self._observers: list[Observer] = []
        # Filled in by holomem.api.forgetting (policies that need the whole memory).
        self._forgetting: Callable[[Memory, int], list[str]] | None = None
        self._consolidation: Callable[[Memory, int], list[tuple[list[str], str]]] | None = None
        self._feedback_weight = (self.config.feedback.weight
                                 if isinstance(self.config.feedback, FeedbackConfig) else None)
        self._context: Neighbors | None = (self.config.context.neighbors
                                           if isinstance(self.config.context, ContextConfig)
                                           else None)


    # -- policies -------------------------------------------------------------------------
    def _copy(self) -> Memory:
        clone = object.__new__(Memory)
        clone.__dict__.update(self.__dict__)
        clone._observers = list(self._observers)
        return clone

    def with_supersession(self, policy: str | SupersessionPolicy) -> Memory:
        """A Memory with another supersession policy: a built-in name or a callable."""
        clone = self._copy()
        clone._supersession = _named(policy, SUPERSESSION, "supersession policy")
        return clone

    def with_recency(self, policy: RecencyPolicy | None) -> Memory:
        """A Memory with a recency multiplier (age in ms -> factor), or none."""
        if policy is not None and not callable(policy):
            raise InvalidError("recency policy must be a callable or None")
        clone = self._copy()
        clone._recency = policy
        return clone

    def with_entity_extractor(self, extractor: str | EntityExtractor) -> Memory:
        """A Memory with another entity extractor: a built-in name or a callable."""
        clone = self._copy()
        clone._extractor = _named(extractor, EXTRACTORS, "entity extractor")
        return clone

    def with_forgetting(self, policy: Callable[[Memory, int], list[str]] | None) -> Memory:
        """A Memory whose ``apply_forgetting`` asks ``policy(memory, now_ms)`` for ids."""
        clone = self._copy()
        clone._forgetting = policy
        return clone

    def with_consolidation(
            self, policy: Callable[[Memory, int], list[tuple[list[str], str]]] | None) -> Memory:
        """A Memory whose ``consolidate`` asks ``policy(memory, now_ms)`` for
        (source ids, summary text) groups."""
        clone = self._copy()
        clone._consolidation = policy
        return clone

    def with_observer(self, observer: Observer) -> Memory:
        """A Memory that also calls ``observer(Observation)`` after each committed change."""
        if not callable(observer):
            raise InvalidError("observer must be callable")
        clone = self._copy()
        clone._observers.append(observer)
        return clone

    def with_clock(self, clock: Clock) -> Memory:
        if not hasattr(clock, "now_ms"):
            raise InvalidError("clock must have now_ms()")
        clone = self._copy()
        clone.clock = clock
        return clone

    def _notify(self, op: str, ids: list[str], revision: int) -> None:
        for observer in self._observers:
            observer(Observation(op, list(ids), revision))

    # -- remember ---------------------------------------------------------------------------
    def remember(self, input: RememberInput | Mapping[str, Any] | None = None, /,
                 **fields: Any) -> Remembered:
        """Store one fact (``remember(text=..., subject=..., ...)`` or a RememberInput).

        Same id and same payload again: ``created=False`` and nothing is written.
        Same id, another payload: ``conflict``. The text must hold something other
        than whitespace. Limits: text <= 64 KiB and 4096 words, metadata <= 64 KiB
        of JSON nested <= 32 deep, ids and subject <= 512 characters, <= 256
        entities, embedding <= 8192 numbers, ``supersedes`` <= ``validate.MAX_IDS``
        ids. Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        return self.remember_many([_struct(RememberInput, input, fields, "remember input",
                                           _TIME_FIELDS)])[0]

    def remember_many(self, inputs: Iterable[RememberInput | Mapping[str, Any]]
                      ) -> list[Remembered]:
        """Store several facts in one transaction: all or none; later inputs see earlier ones.

        Limits: at most :data:`MAX_FACTS` facts; each as :meth:`remember`.
        Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
            raise InvalidError("remember_many takes a list of inputs")
        items = []
        for i, x in enumerate(inputs):
            if i >= MAX_FACTS:  # counted while reading: an endless iterable stops here
                raise LimitError(f"more than {MAX_FACTS} facts in one call")
            items.append(_struct(RememberInput, x, {}, f"input {i}", _TIME_FIELDS))
        if not items:
            raise InvalidError("remember_many needs at least one input")
        checked = [self._check_input(x, i) for i, x in enumerate(items)]
        results: list[Remembered] = []

        def build() -> list[Event]:
            results.clear()
            return self._plan(checked, results)

        seq, _ = self.store.commit(build)
        created = [r.id for r in results if r.created]
        if created:
            self._notify("remember", created, seq)
        return list(results)

    def _check_input(self, x: RememberInput, i: int) -> tuple[RememberInput, bytes]:
        """Validate everything about one input that does not depend on the store."""
        where = f"input {i}" if i else "remember"
        if x.id is not None:
            validate.doc_id(x.id, f"{where}: id")
        validate.text(x.text, f"{where}: text")
        if not x.text.strip():
            # An empty fact matches no query and says nothing: refuse it (issue 11).
            raise InvalidError(f"{where}: text must not be empty or only whitespace")
        if x.subject is not None:
            validate.doc_id(x.subject, f"{where}: subject")
        validate.entities(x.entities, f"{where}: entities")
        validate.metadata(x.metadata)
        validate.embedding(x.embedding, 0, f"{where}: embedding")
        for name in _TIME_FIELDS:
            to_ms(getattr(x, name), f"{where}: {name}")
        if x.valid_from is not None and x.valid_to is not None and x.valid_from >= x.valid_to:
            raise InvalidError(f"{where}: valid_from must be before valid_to")
        if x.supersedes is not None:
            validate.id_list(x.supersedes, f"{where}: supersedes", validate.MAX_IDS)
        if x.confidence is not None:
            _confidence(x.confidence)
        payload = {k: v for k, v in msgspec.to_builtins(x).items() if k != "id" and v is not None}
        canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return x, hashlib.sha256(canon.encode("utf-8")).digest()

    def _plan(self, checked: list[tuple[RememberInput, bytes]],
              results: list[Remembered]) -> list[Event]:
        """The events of a batch (runs under the store's write lock)."""
        st = self.store._state
        facts = st.facts
        now = self.clock.now_ms()
        pending: dict[str, _Pending] = {}
        # Kept up to date as the batch grows, so planning stays linear in the batch:
        # the successors each batch fact gives an earlier fact, and the batch's facts
        # by subject.
        extra_succ: dict[str, list[str]] = {}
        by_subject: dict[str, list[_Pending]] = {}
        events: list[Event] = []
        dim = st.embeddings.dim
        for n, (x, digest) in enumerate(checked):
            fid = x.id if x.id is not None else "f-" + digest.hex()[:32]
            slot = facts.slot(fid)
            if slot >= 0 or fid in pending:
                first_ingest, same = (
                    (int(facts.ingest[slot]), facts.times(slot).digest == digest[:8]) if slot >= 0
                    else (pending[fid].ingest, pending[fid].digest == digest[:8]))
                if not same:
                    raise ConflictError(f"fact {fid!r} already exists with a different payload")
                results.append(Remembered(id=fid, created=False, ingest_time=first_ingest))
                continue
            if fid in st.catalog:
                raise ConflictError(f"id {fid!r} belongs to a document that is not a fact")
            requested = tuple(dict.fromkeys(x.supersedes or ()))
            for target in requested:
                if target == fid or (facts.slot(target) < 0 and target not in pending):
                    raise InvalidError(f"supersedes names {target!r}, which is not a stored fact")
            emb = validate.embedding(x.embedding, dim, "embedding")
            if emb and not dim:
                dim = len(emb) // 4
            entities = (tuple(x.entities) if x.entities is not None
                        else validate.entities(self._extractor(x.text)))
            eff = x.valid_from if x.valid_from is not None else (
                x.event_time if x.event_time is not None else now)
            links = (self._policy_links(st, x.subject, NewFact(eff, x.valid_to), now, pending,
                                        extra_succ, by_subject.get(x.subject, []))
                     if x.subject is not None else Links([], []))
            supersedes = tuple(dict.fromkeys([*requested, *links.supersedes]))
            superseded_by = tuple(s for s in dict.fromkeys(links.superseded_by)
                                  if s not in supersedes and s != fid)
            events.append(DocumentAdded(
                id=fid, text=x.text, metadata=validate.metadata(x.metadata), embedding=emb,
                entities=entities))
            events.append(FactAdded(
                id=fid, ingest_time=now, subject=x.subject, event_time=x.event_time,
                valid_from=x.valid_from, valid_to=x.valid_to, supersedes=supersedes,
                superseded_by=superseded_by, requested=requested, digest=digest[:8],
                confidence=x.confidence))
            p = pending[fid] = _Pending(fid, digest[:8], now, x.subject, eff, n, supersedes,
                                        superseded_by)
            for pred in supersedes:
                extra_succ.setdefault(pred, []).append(fid)
            for succ in superseded_by:
                extra_succ.setdefault(fid, []).append(succ)
            if x.subject is not None:
                by_subject.setdefault(x.subject, []).append(p)
            results.append(Remembered(id=fid, created=True, ingest_time=now,
                                      superseded=list(supersedes)))
        return events

    def _policy_links(self, st: _State, subject: str, new: NewFact, now: int,
                      pending: dict[str, _Pending], extra_succ: dict[str, list[str]],
                      same_subject: list[_Pending]) -> Links:
        """Ask the supersession policy, showing it the subject's other facts (stored,
        and written earlier in the batch: ``same_subject``; ``extra_succ`` holds the
        successors the batch gave earlier facts)."""
        facts = st.facts
        eff = new.effective_time
        new_key = (eff, now, 1 << 62)

        def eff_of(fid: str) -> int:
            if fid in pending:
                return pending[fid].eff
            return int(facts.eff[facts.slot(fid)])

        def current_at(fid: str, t: int) -> bool:
            if fid in pending:
                p = pending[fid]
                if t < p.eff:
                    return False
            else:
                slot = facts.slot(fid)
                if facts.status(slot, t) != CURRENT:
                    return False
            return all(eff_of(s) > t for s in extra_succ.get(fid, ()))

        members: list[tuple[tuple[int, int, int], SubjectMember]] = []
        for fid in facts.subject_members(subject):
            slot = facts.slot(fid)
            key = facts.order_key(fid)
            members.append((key, SubjectMember(fid, key[0], int(facts.ingest[slot]),
                                               key < new_key, current_at(fid, eff))))
        for p in same_subject:
            if p.subject == subject:
                key = (p.eff, p.ingest, (1 << 61) + p.order)
                members.append((key, SubjectMember(p.id, p.eff, p.ingest, key < new_key,
                                                   current_at(p.id, eff))))
        members.sort(key=lambda m: m[0])
        links = self._supersession(new, [m for _, m in members])
        known = {m.id for _, m in members}
        return Links([i for i in links.supersedes if i in known],
                     [i for i in links.superseded_by if i in known])

    # -- records ----------------------------------------------------------------------------
    def _record(self, st: _State, slot: int, at: int, known_at: int | None = None
                ) -> FactRecord:
        facts = st.facts
        fid = st.catalog.ids[slot]
        assert fid is not None
        rec = self.store._record(st, slot)
        vec = st.embeddings.vector(slot)
        meta = validate.load_metadata(rec.metadata)
        emb = [float(v) for v in vec] if vec is not None else None
        if not facts.is_fact[slot]:
            return FactRecord(id=fid, text=rec.text, ingest_time=0, status="current",
                              entities=list(rec.entities), metadata=meta, embedding=emb)
        t = facts.times(slot)
        fb = facts.feedback.get(fid, [])
        return FactRecord(
            id=fid, text=rec.text, ingest_time=t.ingest_time,
            status=facts.status(slot, at, known_at),  # type: ignore[arg-type]
            subject=t.subject, entities=list(rec.entities), metadata=meta, embedding=emb,
            event_time=t.event_time, valid_from=t.valid_from, valid_to=t.valid_to,
            supersedes=facts.predecessors(fid, known_at),
            superseded_by=facts.successors(fid, known_at),
            confidence=facts.confidence.get(fid, 1.0),
            helpful=sum(1 for h, _, _ in fb if h), unhelpful=sum(1 for h, _, _ in fb if not h),
            feedback=[FeedbackEntry(helpful=h, time=tm, note=n) for h, tm, n in fb])

    def get(self, id: str) -> FactRecord | None:
        """One stored fact, with its status now, or None. Errors: ``invalid``."""
        fid = validate.doc_id(id)
        now = self.clock.now_ms()
        with self.store.reading() as st:
            slot = st.catalog.slot(fid)
            return None if slot < 0 else self._record(st, slot, now)

    def history(self, id: str) -> list[FactRecord]:
        """Every version of ``id``'s supersession chain, in effect order, status now.

        Errors: ``invalid``, ``not_found``.
        """
        fid = validate.doc_id(id)
        now = self.clock.now_ms()
        with self.store.reading() as st:
            slot = st.catalog.slot(fid)
            if slot < 0:
                raise NotFoundError(f"no fact {fid!r}")
            chain = st.facts.chain(fid) or [fid]
            return [self._record(st, st.catalog.slot(i), now) for i in chain]

    # -- recall -----------------------------------------------------------------------------
    def _options(self, options: RecallOptions | Mapping[str, Any] | None,
                 fields: Mapping[str, Any]) -> RecallOptions:
        o: RecallOptions = _struct(RecallOptions, options, fields, "recall options",
                                   _RECALL_TIME_FIELDS)
        validate.positive_int(o.k, "k", MAX_RECALL_K)
        validate.positive_int(o.candidate_limit, "candidate_limit", MAX_CANDIDATES)
        if o.subject is not None:
            validate.doc_id(o.subject, "subject")
        if o.entities is not None:
            validate.entities(o.entities)
        return o

    def _filter_ids(self, st: _State, o: RecallOptions) -> list[str] | None:
        """Ids of the facts a subject / entities filter allows (None: no filter).

        Intersected one filter at a time over sorted slot arrays, so memory stays
        linear in the store however many entities the filter names.
        """
        if o.subject is None and not o.entities:
            return None
        keep: np.ndarray | None = None
        if o.subject is not None:
            keep = np.unique(np.array([st.facts.slot(i) for i in
                                       st.facts.subject_members(o.subject)], dtype=np.int64))
            keep = keep[keep >= 0]
        for entity in o.entities or ():
            slots = st.entities.slots(entity)
            keep = slots if keep is None else np.intersect1d(keep, slots, assume_unique=True)
            if not len(keep):
                break
        assert keep is not None
        return [i for i in (st.catalog.ids[int(s)] for s in keep) if i]

    def _identity(self, st: _State, o: RecallOptions, at: int) -> bool:
        """SPEC §4's identity rule: nothing can change document search's answer."""
        facts = st.facts
        return (facts.windows == 0 and facts.links == 0 and self._recency is None
                and self._feedback_weight is None and self._context is None
                and o.known_at is None
                and o.history == "current" and facts.max_eff <= at)

    def _embedding(self, st: _State, o: RecallOptions) -> bytes:
        if o.embedding is None or not st.embeddings.dim:
            if o.embedding is not None:
                validate.embedding(o.embedding, 0)
            return b""
        return validate.embedding(o.embedding, st.embeddings.dim)

    def recall(self, query: str, options: RecallOptions | Mapping[str, Any] | None = None,
               **fields: Any) -> list[Recalled]:
        """Facts relevant to ``query``, best first (SPEC §4 Recall).

        Limits: ``query`` <= 64 KiB and ``validate.MAX_QUERY_TERMS`` distinct words,
        ``k`` <= :data:`MAX_RECALL_K`, ``candidate_limit`` <= :data:`MAX_CANDIDATES`,
        ``entities`` <= 256, ``embedding`` <= 8192 numbers.
        Errors: ``invalid_request``, ``limit``.
        """
        q = validate.query(query)
        o = self._options(options, fields)
        now = self.clock.now_ms()
        at = o.as_of if o.as_of is not None else now
        with self.store.reading() as st:
            emb = self._embedding(st, o)
            ids = self._filter_ids(st, o)
            if self._identity(st, o, at):
                hits = self.store._search(st, q, o.k, emb, ids)
                found = [(st.catalog.slot(h.id), h.score) for h in hits]
            else:
                found = [(c.slot, c.score) for c in self._rank(st, q, o, at, emb, ids)[0]]
            expl: list[Explanation | None] = [None] * len(found)
            if o.explain:
                expl = list(self._explain_many(st, q, o, at, emb, ids, [s for s, _ in found]))
            out = []
            for (slot, score), e in zip(found, expl, strict=True):
                rec = self._record(st, slot, at, o.known_at)
                out.append(Recalled(id=rec.id, text=rec.text, score=score, status=rec.status,
                                    fact=rec, explanation=e))
            return out

    def _fused(self, st: _State, q: str, emb: bytes, ids: list[str] | None) -> Fusion:
        if self._context is None:
            return self.store._fused(st, q, emb, ids)
        return self._with_context(st, self.store._fused(st, q, emb, None), ids)

    def _with_context(self, st: _State, fused: Fusion, ids: list[str] | None) -> Fusion:
        """Add the context policy's share of each neighbour's score (in write order)."""
        assert self._context is not None
        weight, window = self._context.weight, self._context.window
        live = np.flatnonzero(st.catalog.alive.view())
        own = np.zeros(len(live))
        own[np.searchsorted(live, fused.slots)] = fused.score
        total = own.copy()
        for d in range(1, window + 1):
            total[d:] += weight * own[:-d]
            total[:-d] += weight * own[d:]
        keep = np.flatnonzero(total > 0)
        if ids is not None:
            allowed = np.zeros(st.catalog.slots, dtype=bool)
            allowed[[st.catalog.slot(i) for i in ids if st.catalog.slot(i) >= 0]] = True
            keep = keep[allowed[live[keep]]]
        slots = live[keep]
        lexical = np.zeros(len(live))
        lexical[np.searchsorted(live, fused.slots)] = fused.lexical
        semantic = None
        if fused.semantic is not None:
            semantic = np.zeros(len(live))
            semantic[np.searchsorted(live, fused.slots)] = fused.semantic
            semantic = semantic[keep]
        return Fusion(slots, total[keep], lexical[keep], semantic)

    def _evaluate(self, st: _State, o: RecallOptions, at: int, fused: Fusion, i: int,
                  rank: int) -> _Candidate | None:
        """Status and multipliers of one search result, or None if unknown at known_at."""
        facts = st.facts
        slot = int(fused.slots[i])
        if facts.is_fact[slot] and not facts.known(slot, o.known_at):
            return None
        status = facts.status(slot, at, o.known_at)
        recency = 1.0
        if self._recency is not None and facts.is_fact[slot]:
            recency = self._recency(max(0, at - int(facts.eff[slot])))
        history = 1.0 if status == CURRENT else self.config.historical_weight
        usefulness = self._usefulness(st, slot)
        base = float(fused.score[i])
        return _Candidate(slot, rank, status, base * recency * history * usefulness, base,
                          float(fused.lexical[i]),
                          float(fused.semantic[i]) if fused.semantic is not None else None,
                          recency, history, usefulness)

    def _usefulness(self, st: _State, slot: int) -> float:
        """The usefulness multiplier of the fact in ``slot`` (policies.usefulness_multiplier)."""
        if self._feedback_weight is None:
            return 1.0
        fid = st.catalog.ids[slot]
        fb = st.facts.feedback.get(fid or "", ())
        return usefulness_multiplier(self._feedback_weight, sum(1 for h, _, _ in fb if h),
                                     len(fb))

    # -- feedback and confidence ----------------------------------------------------------
    def feedback(self, id: str, helpful: bool, note: str | None = None) -> FeedbackReport:
        """Record whether a fact helped. It changes the fact's usefulness (used by recall
        only under a feedback policy), never its confidence, and never hides it.

        The report gives the votes, ``usefulness`` (their balance, (helpful -
        unhelpful) / (n + 2), in (-1, 1): not a multiplier) and ``multiplier``, what
        recall now multiplies the fact's score by (1 without a feedback policy).
        Limits: ``note`` as a fact's text.

        Errors: ``invalid``, ``not_found``.
        """
        fid = validate.doc_id(id)
        if not isinstance(helpful, bool):
            raise InvalidError("helpful must be true or false")
        if note is not None:
            validate.text(note, "note")

        def build() -> list[Event]:
            if self.store._state.facts.slot(fid) < 0:
                raise NotFoundError(f"no fact {fid!r}")
            return [FeedbackGiven(id=fid, helpful=helpful, time=self.clock.now_ms(), note=note)]

        seq, _ = self.store.commit(build)
        self._notify("feedback", [fid], seq)
        with self.store.reading() as st:
            fb = st.facts.feedback.get(fid, [])
            good = sum(1 for h, _, _ in fb if h)
            return FeedbackReport(
                id=fid, helpful=good, unhelpful=len(fb) - good,
                usefulness=feedback_balance(good, len(fb)),
                multiplier=usefulness_multiplier(self._feedback_weight, good, len(fb)))

    def set_confidence(self, id: str, confidence: float) -> FactRecord:
        """Set what the agent believes of a fact, in [0, 1]. Errors: ``invalid``, ``not_found``."""
        fid = validate.doc_id(id)
        value = _confidence(confidence)

        def build() -> list[Event]:
            if self.store._state.facts.slot(fid) < 0:
                raise NotFoundError(f"no fact {fid!r}")
            return [ConfidenceSet(id=fid, confidence=value, time=self.clock.now_ms())]

        self.store.commit(build)
        record = self.get(fid)
        assert record is not None
        return record

    def _wanted(self, o: RecallOptions, status: str) -> bool:
        if o.history == "all":
            return True
        if o.history == "current":
            return status == CURRENT
        return status != CURRENT  # "historical": superseded, expired or not yet valid

    def _rank(self, st: _State, q: str, o: RecallOptions, at: int, emb: bytes,
              ids: list[str] | None) -> tuple[list[_Candidate], list[_Candidate]]:
        """(the k results, every evaluated candidate ranked with history included)."""
        fused = self._fused(st, q, emb, ids)
        # Never examine fewer candidates than results asked for.
        order = top_k(fused.slots, fused.score, max(o.candidate_limit, o.k))
        evaluated = []
        for rank, i in enumerate(order, start=1):
            c = self._evaluate(st, o, at, fused, int(i), rank)
            if c is not None:
                evaluated.append(c)
        evaluated.sort(key=lambda c: (-c.score, c.rank))
        chosen = [c for c in evaluated if self._wanted(o, c.status)][: o.k]
        return chosen, evaluated

    # -- the JSON contract --------------------------------------------------------------------
    def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """SPEC §5: run ``op`` with a camelCase JSON request; return a camelCase response.

        Every op's work is bounded by its request's documented limits (README
        "Limits"); a request nesting deeper than ``contract.MAX_REQUEST_DEPTH`` is
        refused. Errors: ``invalid_request``, ``limit``, ``not_found``, ``conflict``,
        ``read_only`` (see :func:`holomem.api.contract.call`), and nothing else for
        any request.
        """
        return contract.call(self, op, request)

    # -- holographic operations (holomem.api.holographic) and the audit listing ----------
    def probe(self, entity: str, k: int = 10) -> ProbeResult:
        """Facts whose HRR structure binds ``entity`` (algebra, not keyword lookup).

        Limits: ``k`` <= ``holographic.MAX_K``; ``entity`` <= 256 characters."""
        return holographic.probe(self, entity, k)

    def related(self, entity: str, k: int = 10) -> RelatedResult:
        """Entities structurally associated with ``entity`` (bound in the same facts).

        The algebra answers only when it keeps every entity the exact per-fact scoring
        ranks in the top k (else ``path`` is "exact per-fact").
        Limits: ``k`` <= ``holographic.MAX_K``."""
        return holographic.related(self, entity, k)

    def reason(self, entities: Sequence[str], k: int = 10) -> ReasonResult:
        """Facts that bind every one of ``entities`` (AND).

        Limits: 1 to ``holographic.MAX_REASON_ENTITIES`` entities, ``k`` <=
        ``holographic.MAX_K``."""
        return holographic.reason(self, entities, k)

    def contradict(self, *, subject: str | None = None, entity: str | None = None,
                   k: int = 10, max_pairs: int = holographic.MAX_PAIRS,
                   cursor: str | None = None) -> ContradictResult:
        """Pairs of current facts that likely contradict; counts what was compared.

        Limits: ``k`` <= ``holographic.MAX_K``, ``max_pairs`` <=
        ``holographic.MAX_PAIRS_LIMIT``; a page stops there and gives a cursor."""
        return holographic.contradict(self, subject=subject, entity=entity, k=k,
                                      max_pairs=max_pairs, cursor=cursor)

    @staticmethod
    def render_context(results: Iterable[Recalled | FactRecord]) -> str:
        """Recalled facts as a prompt block fenced as untrusted data."""
        return audit.render_context(results)

    # -- forgetting and maintenance (holomem.api.forgetting) -------------------------------
    def forget(self, scope: ForgetScope | Mapping[str, Any],
               options: ForgetOptions | Mapping[str, Any] | None = None,
               **fields: Any) -> ForgetReport:
        """Remove facts: exactly one scope field; options include_chain, dry_run, purge.

        Idempotent. Gone means gone from search, recall, get, history, explain and
        every index at once; the text-segment records are zeroed and synced before
        this returns; with ``purge`` no file keeps their text (SPEC §6).
        Limits: an ``ids`` scope names at most :data:`MAX_FORGET_IDS` ids.
        Errors: ``invalid_request``, ``limit``.
        """
        ids = (scope.ids if isinstance(scope, ForgetScope)
               else scope.get("ids") if isinstance(scope, Mapping) else None)
        if isinstance(ids, Sized) and len(ids) > MAX_FORGET_IDS:
            raise LimitError(f"a forget scope names at most {MAX_FORGET_IDS} ids; "
                             f"got {len(ids)}")
        return forgetting.forget(self, scope, options, fields)

    def apply_forgetting(self, options: MaintenanceOptions | Mapping[str, Any] | None = None,
                         **fields: Any) -> ForgetReport:
        """What the forgetting policy selects; removed only with ``dry_run=False``."""
        return forgetting.apply_forgetting(self, options, fields)

    def consolidate(self, options: ConsolidateOptions | Mapping[str, Any] | None = None,
                    **fields: Any) -> ConsolidationReport:
        """What the consolidation policy plans; applied only with ``dry_run=False``.

        A consolidation adds a fact that supersedes its sources (they stay, as
        history); its id derives from the sources, so a rerun adds nothing.
        """
        return forgetting.consolidate(self, options, fields)

    # -- explain ----------------------------------------------------------------------------
    def explain(self, query: str, id: str,
                options: RecallOptions | Mapping[str, Any] | None = None,
                **fields: Any) -> Explanation:
        """Why ``id`` does or does not come back for ``query`` (SPEC §4 Explain).

        Limits: as :meth:`recall`. Errors: ``invalid_request``, ``limit``, ``not_found``.
        """
        q = validate.query(query)
        fid = validate.doc_id(id)
        o = self._options(options, fields)
        now = self.clock.now_ms()
        at = o.as_of if o.as_of is not None else now
        with self.store.reading() as st:
            slot = st.catalog.slot(fid)
            if slot < 0:
                raise NotFoundError(f"no fact {fid!r}")
            emb = self._embedding(st, o)
            return self._explain_many(st, q, o, at, emb, self._filter_ids(st, o), [slot])[0]

    def _explain_many(self, st: _State, q: str, o: RecallOptions, at: int, emb: bytes,
                      ids: list[str] | None, slots: Sequence[int]) -> list[Explanation]:
        facts = st.facts
        if self._identity(st, o, at):
            chosen_ids = {h.id for h in self.store._search(st, q, o.k, emb, ids)}
        else:
            chosen_ids = {st.catalog.ids[c.slot] or "" for c in self._rank(st, q, o, at, emb,
                                                                              ids)[0]}
        # The rank among every candidate, history included.
        everything = msgspec.structs.replace(o, history="all")
        ranked = self._rank(st, q, everything, at, emb, ids)[1]
        rank_of = {c.slot: (n, c) for n, c in enumerate(ranked, start=1)}
        fused = self._fused(st, q, emb, ids)
        own: dict[int, float] = {}
        if self._context is not None:  # each fact's score before its neighbours' share
            plain = self.store._fused(st, q, emb, None)
            own = dict(zip(plain.slots.tolist(), plain.score.tolist(), strict=True))
        method = "bm25+cosine" if emb else "bm25"
        # Every explained fact's matched terms at once: each term's postings read once.
        terms = st.bm25.matched_many(q, [int(s) for s in slots])
        out = []
        for slot, matched in zip(slots, terms, strict=True):
            fid = st.catalog.ids[slot] or ""
            rank, mine = rank_of.get(slot, (None, None))
            # fused.slots is ascending: a binary search, not a scan per explained fact.
            at_pos = int(np.searchsorted(fused.slots, slot))
            pos = [at_pos] if at_pos < len(fused.slots) and fused.slots[at_pos] == slot else []
            if mine is None and pos:
                mine = self._evaluate(st, o, at, fused, pos[0], 0)
            status = facts.status(slot, at, o.known_at)
            retrieved = fid in chosen_ids
            # known_at ignores the facts ingested after it, in the chain too.
            chain = [ChainEntry(id=c, status=facts.status(facts.slot(c), at, o.known_at),  # type: ignore[arg-type]
                                effective_time=facts.order_key(c)[0])
                     for c in facts.chain(fid) if facts.known(facts.slot(c), o.known_at)
                     ] if facts.is_fact[slot] else []
            out.append(Explanation(
                id=fid, retrieved=retrieved, rank=rank,
                lexical_score=mine.lexical if mine else 0.0,
                semantic_score=mine.semantic if mine else None,
                fusion=FusionInfo(method=method, lexical_weight=W_LEXICAL if emb else 1.0,
                                  semantic_weight=W_SEMANTIC if emb else 0.0,
                                  fused_score=mine.fused if mine else 0.0),
                matched_terms=[MatchedTerm(term=m.term, tf=m.tf, idf=m.idf, score=m.score)
                               for m in matched],
                recency_multiplier=mine.recency if mine else 1.0,
                history_multiplier=mine.history if mine else 1.0,
                status=status if facts.known(slot, o.known_at) else None,  # type: ignore[arg-type]
                valid_at=at, chain=chain, score=mine.score if mine else 0.0,
                usefulness_multiplier=mine.usefulness if mine else 1.0,
                context_bonus=mine.fused - own.get(slot, 0.0) if mine and own else 0.0,
                reason=self._reason(st, o, slot, status, retrieved, rank, len(pos) > 0)))
        return out

    def _reason(self, st: _State, o: RecallOptions, slot: int, status: str, retrieved: bool,
                rank: int | None, matches: bool) -> str:
        if retrieved:
            return "retrieved"
        if not st.facts.known(slot, o.known_at):
            return "ingested after known_at"
        if not matches:
            return "not a candidate: no query term (or embedding) matches it"
        if rank is None:
            return f"not among the {o.candidate_limit} best candidates (candidate_limit)"
        if not self._wanted(o, status):
            return f"its status is {status}, filtered out by history={o.history}"
        return f"ranked below the k={o.k} results"

    # Defined last: inside the class body, the name ``list`` now means this method.
    def list(self, cursor: str | None = None, limit: int = 100,
             filter: ListFilter | Mapping[str, Any] | None = None,
             history: str = "all") -> ListPage:
        """Every stored fact with its status, in write order, a page at a time.

        Exhaustive and stable: a walk interleaved with writes sees every fact exactly
        once. Limits: ``limit`` <= ``audit.MAX_LIMIT``; a page examines at most
        ``audit.MAX_SCAN`` facts, so a sparse status filter may give a short page with a
        cursor. Errors: ``invalid_request``, ``limit``.
        """
        return audit.list_facts(self, cursor, limit, filter, history)
