"""Planning a remember: from checked inputs to the events of one transaction
(docs/contract.md §3, §4).

Owns: what is checked of an input before the store is consulted (:func:`check`),
content-derived ids and payload digests, idempotent retries and conflicts, and
the supersession links a policy adds (:class:`Planner`, run under the write lock
inside ``Store.commit``). The temporal rules — when a fact begins, its status at a
time, effect order — are the fact index's (:mod:`holomem.projections.facts`); the
planner applies the same functions to facts written earlier in the same batch,
which are not in the index yet. Imports the engine's view, the policies, the
types and validate.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import operator
from collections.abc import Sequence
from typing import NamedTuple, cast

import msgspec
import msgspec.structs

from holomem.api import validate
from holomem.api.engine import View
from holomem.api.policies import (
    Links,
    NewFact,
    Policies,
    SubjectMember,
    latest_by_subject,
    no_entities,
)
from holomem.api.types import Remembered, RememberInput
from holomem.errors import ConflictError, InvalidError
from holomem.events import DocumentAdded, Event, FactAdded
from holomem.projections.namespaces import Namespace
from holomem.projections.subjects import OrderKey
from holomem.projections.temporal import end_time, status_at


class Checked(NamedTuple):
    """An input checked as far as it can be without the store, and its payload digest."""

    input: RememberInput
    digest: bytes  # SHA-256 of the canonical payload (everything but the id)


def convert_all(items: Sequence[object]) -> list[RememberInput] | None:
    """Every input as a RememberInput in one msgspec call, when each is a dict that
    :func:`validate.to_struct` would hand msgspec as it is (under the names Python
    and JSON share, times in milliseconds); None when any is not, or any fails
    (converted one at a time, the first bad one is then named)."""
    if not items or set(map(type, items)) != {dict}:
        return None
    try:
        return msgspec.convert(items, list[RememberInput])
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError, RecursionError):
        return None


def check(x: RememberInput, i: int) -> Checked:
    """Validate everything about one input that does not depend on the store."""
    validated(x, i)
    return Checked(x, digest(x))


def check_all(items: Sequence[RememberInput]) -> list[Checked]:
    """:func:`check` of each input: the same digests, and the same first error (a batch
    that is not plain, or may fail a check, is checked one input at a time)."""
    digests = plain_digests(items)
    if digests is None:
        return [check(x, i) for i, x in enumerate(items)]
    return list(map(Checked, items, digests))


def plain_digests(items: Sequence[RememberInput]) -> list[bytes] | None:
    """The digests of a batch of plain inputs — each an ASCII text holding something
    other than whitespace, no longer than either text limit, and maybe an id and a
    subject, nothing else — checked a column at a time; None unless every input is
    plain and passes."""
    if not items or list(map(_OTHERS, items)).count(_NO_OTHERS) != len(items):
        return None
    texts: list[str] = list(map(_TEXT, items))
    if set(map(type, texts)) != {str}:
        return None
    # ASCII: a byte per character, and at most one word per character (validate.text).
    if (not "".join(texts).isascii()
            or max(map(len, texts)) > min(validate.MAX_TEXT_BYTES, validate.MAX_WORDS)
            or not all(map(str.strip, texts))):
        return None
    subjects: list[str | None] = list(map(_SUBJECT, items))
    for column in (list(map(_ID, items)), subjects):
        given = [v for v in column if v is not None]
        if given and not validate.ids_pass(given):
            return None
    # The canonical payload of such an input (see canonical_payload: keys sorted,
    # "subject" before "text"), its strings as _SORTED spells them.
    enc, sha = _SORTED.encode, hashlib.sha256
    if subjects.count(None) == len(subjects):
        return [sha(b'{"text":' + t + b"}").digest() for t in map(enc, texts)]
    return [sha((b'{"text":' if s is None else b'{"subject":' + enc(s) + b',"text":')
                + enc(t) + b"}").digest() for s, t in zip(subjects, texts, strict=True)]


def validated(x: RememberInput, i: int) -> bytes:
    """Check one input as :func:`check` does; returns its canonical metadata bytes."""
    where = f"input {i}" if i else "remember"
    if x.id is not None:
        validate.doc_id(x.id, f"{where}: id")
    validate.text(x.text, f"{where}: text")
    if not x.text.strip():
        # An empty fact matches no query and says nothing: refuse it (issue 11).
        raise InvalidError(f"{where}: text must not be empty or only whitespace")
    if x.subject is not None:
        validate.doc_id(x.subject, f"{where}: subject")
    # (Absent fields are skipped here: each check passes None, and a bulk load pays
    # for every call.)
    if x.entities is not None:
        validate.entities(x.entities, f"{where}: entities")
    meta = validate.metadata(x.metadata) if x.metadata is not None else b""
    if x.embedding is not None:
        validate.embedding(x.embedding, 0, f"{where}: embedding")
    for name in validate.TIME_FIELDS:
        value = getattr(x, name)
        if value is not None:
            validate.to_ms(value, f"{where}: {name}")
    if x.valid_from is not None and x.valid_to is not None and x.valid_from >= x.valid_to:
        raise InvalidError(f"{where}: valid_from must be before valid_to")
    if x.supersedes is not None:
        validate.id_list(x.supersedes, f"{where}: supersedes", validate.MAX_IDS)
    if x.confidence is not None:
        validate.confidence(x.confidence)
    if x.namespace is not None:
        validate.namespace(x.namespace, f"{where}: namespace")
    if x.ttl_ms is not None:
        validate.positive_int(x.ttl_ms, f"{where}: ttl_ms", validate.TIME_LIMIT)
    return meta


def digest(x: RememberInput) -> bytes:
    """The SHA-256 of an input's canonical payload (everything but its id)."""
    return hashlib.sha256(canonical_payload(x)).digest()


def canonical_payload(x: RememberInput) -> bytes:
    """The canonical JSON of an input's payload: keys sorted, no spaces, non-ASCII
    as is — the bytes Python's ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` gives, which define every content id."""
    # The root namespace is no namespace: [] and None give the same payload (and the
    # same content id as a fact written before namespaces existed).
    if x.confidence is None and x.embedding is None and (x.metadata is None
                                                         or _plain(x.metadata)):
        # Only strings, integers, booleans, None, lists and dicts: msgspec writes
        # the same bytes as json.dumps, several times faster (with floats it spells
        # exponents its own way: 1e16 for 1e+16). The payload's fields as a Struct
        # that leaves out what is None, encoded with every key sorted.
        values = _PAYLOAD_VALUES(msgspec.structs.astuple(x))
        if x.namespace is not None and not x.namespace:
            values = (*values[:_NAMESPACE_AT], None, *values[_NAMESPACE_AT + 1:])
        return _SORTED.encode(_Payload(*values))
    payload = {k: v for k, v in msgspec.to_builtins(x).items()
               if k != "id" and v is not None and not (k == "namespace" and not v)}
    canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return canon.encode("utf-8")


#: RememberInput's fields but its id: the payload, under the same JSON names.
_PAYLOAD_FIELDS = [f for f in RememberInput.__struct_fields__ if f != "id"]
_Payload = msgspec.defstruct("_Payload", [(f, object, None) for f in _PAYLOAD_FIELDS],
                             omit_defaults=True, rename="camel")
_PAYLOAD_VALUES = operator.itemgetter(*(RememberInput.__struct_fields__.index(f)
                                        for f in _PAYLOAD_FIELDS))
_NAMESPACE_AT = _PAYLOAD_FIELDS.index("namespace")
_SORTED = msgspec.json.Encoder(order="sorted")

#: What makes an input plain for check_all: every field but these three unset; and
#: simple for the planner (Planner._simple_run): every field but the text and the id.
_TEXT, _ID, _SUBJECT = (operator.attrgetter(f) for f in ("text", "id", "subject"))
_OTHERS = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                                if f not in ("text", "id", "subject")))
_NO_OTHERS = (None,) * (len(RememberInput.__struct_fields__) - 3)
_REST = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                              if f not in ("text", "id")))
_NO_REST = (None,) * (len(RememberInput.__struct_fields__) - 2)


def _plain(value: object) -> bool:
    """Whether ``value`` holds only strings, integers, booleans, None, lists and
    dicts with string keys (no float, nothing else either encoder might spell its
    own way)."""
    if value is None or type(value) in (str, int, bool):
        return True
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)  # type: ignore[attr-defined]
    return False


def content_id(digest: bytes) -> str:
    """The id of a fact given without one: derived from its payload, so a retry
    stores one fact."""
    return "f-" + digest[:16].hex()  # (the first 32 hex digits)


def _paired(docs: list[DocumentAdded], facts: Sequence[FactAdded]) -> list[Event]:
    """Each new fact's two events, back to back: its document, then its FactAdded."""
    return list(itertools.chain.from_iterable(zip(docs, facts, strict=True)))


def _found_entities(found: object) -> tuple[str, ...]:
    """What an entity extractor found, checked (its empty list, at once)."""
    return () if type(found) is list and not found else validate.entities(found)

class _Pending(NamedTuple):
    """A fact written earlier in the same batch (later inputs see it)."""

    id: str
    digest: bytes
    ingest: int
    namespace: Namespace
    subject: str | None
    eff: int
    end: int | None  # valid_to, or earlier the end of its time to live
    key: OrderKey


class Planner:
    """The events of one batch, planned against ``view`` (under the write lock)."""

    def __init__(self, view: View, policies: Policies, now: int) -> None:
        self.view = view
        self.policies = policies
        self.now = now
        self.results: list[Remembered] = []
        #: The facts planned so far in the batch, for the inputs after them (but the
        #: simple ones _plan_new plans when nothing after them can ask: see there).
        self._pending: dict[str, _Pending] = {}
        # Kept up to date as the batch grows, so that planning stays linear in the
        # batch: the successors each batch fact gave a fact, and the batch by subject.
        self._batch_succ: dict[str, list[str]] = {}
        self._by_subject: dict[tuple[Namespace, str], list[_Pending]] = {}
        #: latest-by-subject, per subject this batch touched: the greatest order key
        #: of its facts, and those of them that may still be current (see _latest).
        self._heads: dict[tuple[Namespace, str], tuple[OrderKey, list[tuple[OrderKey, str]]]] = {}
        self._dim = view.embedding_dim
        self._next_slot = view.catalog.slots
        self._seq = view.revision + 1

    def plan(self, batch: list[Checked]) -> list[Event]:
        events = self._plan_new(batch)
        if events is None:
            events = []
            for x, digest in batch:
                events.extend(self._one(x, digest))
        return events

    def _plan_new(self, batch: list[Checked]) -> list[Event] | None:
        """:meth:`_one` of each input, in order, when no two inputs share an id and
        none is stored yet (None otherwise, nothing done): then every input makes one
        fact in the next slot, so the simple ones — a text and maybe an id, nothing
        else, most of a bulk load — are planned a column at a time, and only the
        others one by one, each seeing the facts before it in the batch (but inputs
        that add only a subject under latest-by-subject: see :meth:`_plan_latest`)."""
        n = len(batch)
        inputs = [c.input for c in batch]
        digests = [c.digest for c in batch]
        given: list[str | None] = list(map(_ID, inputs))
        fids: list[str] = (list(map(content_id, digests)) if given.count(None) == n
                           else [f if f is not None else content_id(d)
                                 for f, d in zip(given, digests, strict=True)])
        if (len(set(fids)) != n or not self._pending.keys().isdisjoint(fids)
                or not self.view.catalog.none_live(fids)):
            return None
        simple = list(map(_NO_REST.__eq__, map(_REST, inputs)))
        if (simple.count(False) and self.policies.supersession is latest_by_subject
                and self.policies.extractor is no_entities):
            latest = self._plan_latest(inputs, fids, digests, simple)
            if latest is not None:
                return latest
        now, seq, first = self.now, self._seq, self._next_slot
        at = [p for p in range(n) if simple[p]]  # the simple inputs' places
        ids = [fids[p] for p in at]
        shorts = [digests[p][:8] for p in at]
        made = [Remembered(id=f, created=True, ingest_time=now) for f in ids]
        texts = [inputs[p].text for p in at]
        extractor = self.policies.extractor
        facts = [FactAdded(id=f, ingest_time=now, digest=short)
                 for f, short in zip(ids, shorts, strict=True)]
        others = [p for p in range(n) if not simple[p]]
        # Each simple input's two events, back to back; with an entity extractor, the
        # documents are made as it runs, in order (below).
        pairs: list[Event] | None = (_paired(
            [DocumentAdded(id=f, text=t) for f, t in zip(ids, texts, strict=True)], facts)
            if extractor is no_entities else None)
        # Only a supersedes list (or an extractor's error) makes an input look at the
        # simple ones before it (latest-by-subject and a custom policy see the facts
        # of a subject, and a simple fact has none): without either, nothing in this
        # batch asks for them, and they are not noted as pending at all.
        at_once = pairs is not None and not any(inputs[p].supersedes for p in others)
        pending = [] if at_once else [
            (f, _Pending(f, short, now, (), None, now, None, (now, now, seq, first + p)))
            for f, short, p in zip(ids, shorts, at, strict=True)]
        events: list[Event] = []

        def simple_ones(k: int, stop: int) -> None:
            """Simple inputs k..stop - 1 (in their own order)."""
            if pairs is not None:
                events.extend(pairs[2 * k : 2 * stop])
            else:
                events.extend(_paired(
                    [DocumentAdded(id=f, text=t, entities=_found_entities(extractor(t)))
                     for f, t in zip(ids[k:stop], texts[k:stop], strict=True)],
                    facts[k:stop]))
            if not at_once:
                self._pending.update(pending[k:stop])
            self.results.extend(made[k:stop])

        k = 0
        for i, p in enumerate(others):
            if p - i > k:  # the simple inputs before p
                simple_ones(k, p - i)
                k = p - i
            self._next_slot = first + p
            events.extend(self._one(inputs[p], digests[p], fids[p]))
        simple_ones(k, len(at))
        self._next_slot = first + n
        return events

    def _plan_latest(self, inputs: list[RememberInput], fids: list[str], digests: list[bytes],
                     simple: list[bool]) -> list[Event] | None:
        """:meth:`_plan_new`'s answer under latest-by-subject with no entity extractor,
        when every input that is not simple adds only a subject (a text, a subject and
        maybe an id: the root namespace, no time, no supersedes list), and every stored
        fact of those subjects comes before the batch in effect order — else None,
        nothing done. Then each such input begins now, after every fact of its subject,
        and supersedes what :meth:`_latest` would give: the stored heads current now
        for the subject's first input of the batch, the subject's input before it for
        every later one (which began now too, and superseded the rest)."""
        others = [p for p, plain in enumerate(simple) if not plain]
        if list(map(_OTHERS, [inputs[p] for p in others])).count(_NO_OTHERS) != len(others):
            return None
        now, seq, first = self.now, self._seq, self._next_slot
        facts = self.view.facts
        latest: dict[str, str] = {}  # subject -> its last input so far
        links: list[tuple[str, ...]] = []
        for p in others:
            subject = inputs[p].subject
            assert subject is not None  # (not simple, and nothing else set)
            before = latest.get(subject)
            if before is not None:
                links.append((before,))
            else:
                stored = facts.subject_heads(subject)
                if stored is None:
                    links.append(())
                else:
                    last, heads = stored
                    if not last < (now, now, seq, first + p):
                        return None  # a stored fact begins later: ask the policy
                    links.append(tuple([h for k, h in heads
                                        if facts.current_in(k[3], h, now)]))
            latest[subject] = fids[p]
        shorts = [d[:8] for d in digests]
        added = [FactAdded(id=f, ingest_time=now, digest=short)
                 for f, short in zip(fids, shorts, strict=True)]
        made = [Remembered(id=f, created=True, ingest_time=now) for f in fids]
        for p, preds in zip(others, links, strict=True):
            added[p] = FactAdded(id=fids[p], ingest_time=now, subject=inputs[p].subject,
                                 supersedes=preds, digest=shorts[p])
            if preds:
                made[p] = Remembered(id=fids[p], created=True, ingest_time=now,
                                     superseded=list(preds))
        self.results.extend(made)
        self._next_slot = first + len(inputs)
        return _paired(
            [DocumentAdded(id=f, text=t) for f, t in zip(fids, map(_TEXT, inputs), strict=True)],
            added)

    def _one(self, x: RememberInput, digest: bytes, new: str | None = None) -> list[Event]:
        """The events of one input (``new``: its id, when the caller knows that no
        stored fact and no earlier input of the batch has it)."""
        view, facts = self.view, self.view.facts
        fid = new if new is not None else x.id if x.id is not None else content_id(digest)
        slot = view.catalog.slot(fid) if new is None else -1
        if new is None and (slot >= 0 or fid in self._pending):
            if slot >= 0 and not facts.is_fact.item(slot):
                raise ConflictError(f"id {fid!r} belongs to a document that is not a fact")
            first_ingest, same = (
                (facts.ingest.item(slot), facts.times(slot).digest == digest[:8]) if slot >= 0
                else (self._pending[fid].ingest, self._pending[fid].digest == digest[:8]))
            if not same:
                raise ConflictError(f"fact {fid!r} already exists with a different payload")
            self.results.append(Remembered(id=fid, created=False, ingest_time=first_ingest))
            return []
        ns: Namespace = tuple(x.namespace) if x.namespace else ()
        requested: tuple[str, ...] = ()
        if x.supersedes:
            requested = tuple(dict.fromkeys(x.supersedes))
            for target in requested:
                if target == fid or (facts.slot(target) < 0 and target not in self._pending):
                    raise InvalidError(f"supersedes names {target!r}, which is not a stored "
                                       "fact")
                if self._namespace(target) != ns:
                    raise InvalidError(f"supersedes names {target!r}, which lives in another "
                                       "namespace (supersession never crosses namespaces)")
        emb = b""
        if x.embedding is not None:
            emb = validate.embedding(x.embedding, self._dim, "embedding")
            if emb and not self._dim:
                self._dim = len(emb) // 4
        if x.entities is not None:
            entities = tuple(x.entities)
        else:
            entities = _found_entities(self.policies.extractor(x.text))
        now = self.now
        # effective_time and end_time, inline (a bulk load pays each call per fact).
        eff = (x.valid_from if x.valid_from is not None
               else x.event_time if x.event_time is not None else now)
        key: OrderKey = (eff, now, self._seq, self._next_slot)
        end = end_time(x.valid_to, now, x.ttl_ms) if x.ttl_ms is not None else x.valid_to
        supersedes, superseded_by = requested, cast("tuple[str, ...]", ())
        subject = x.subject
        if subject is not None:
            heads = (self._latest(ns, subject, eff, key)
                     if self.policies.supersession is latest_by_subject else None)
            if heads is None:
                self._heads.pop((ns, subject), None)
                links = self._policy_links(ns, subject, NewFact(eff, end), key)
                if links.supersedes:
                    supersedes = tuple(dict.fromkeys([*requested, *links.supersedes]))
                if links.superseded_by:
                    superseded_by = tuple(s for s in dict.fromkeys(links.superseded_by)
                                          if s not in supersedes and s != fid)
            else:  # (what the policy would answer: Links(the heads, []))
                self._heads[(ns, subject)] = (key, [*heads, (key, fid)])
                if heads:
                    supersedes = tuple(dict.fromkeys([*requested, *(h for _, h in heads)]))
        short = digest[:8]
        p = self._pending[fid] = _Pending(fid, short, now, ns, subject, eff, end, key)
        self._next_slot += 1
        if supersedes:
            for pred in supersedes:
                self._batch_succ.setdefault(pred, []).append(fid)
        if superseded_by:
            self._batch_succ.setdefault(fid, []).extend(superseded_by)
        if subject is not None:
            self._by_subject.setdefault((ns, subject), []).append(p)
        self.results.append(Remembered(id=fid, created=True, ingest_time=now,
                                       superseded=list(supersedes)))
        meta = validate.metadata(x.metadata) if x.metadata is not None else b""
        return [
            DocumentAdded(id=fid, text=x.text, metadata=meta, embedding=emb, entities=entities),
            FactAdded(id=fid, ingest_time=now, subject=subject, event_time=x.event_time,
                      valid_from=x.valid_from, valid_to=x.valid_to, supersedes=supersedes,
                      superseded_by=superseded_by, requested=requested, digest=short,
                      confidence=x.confidence, namespace=ns, ttl_ms=x.ttl_ms),
        ]

    def _namespace(self, fid: str) -> Namespace:
        p = self._pending.get(fid)
        return p.namespace if p is not None else self.view.facts.namespace(
            self.view.facts.slot(fid))

    def _start(self, fid: str) -> int:
        p = self._pending.get(fid)
        return p.eff if p is not None else self.view.facts.eff.item(self.view.facts.slot(fid))

    def _current_at(self, fid: str, at: int, key: OrderKey | None = None) -> bool:
        """Whether ``fid`` (stored, or earlier in the batch) is current at ``at``,
        counting the successors the batch gave it (``key``: its place in effect
        order, which ends with its slot, when the caller has it)."""
        succ = self._batch_succ.get(fid)
        batch = [self._start(s) for s in succ] if succ else []
        p = self._pending.get(fid)
        if p is not None:
            return status_at(at, p.eff, p.end, batch) == "current"
        facts = self.view.facts
        if not (facts.current(fid, at) if key is None else facts.current_in(key[3], fid, at)):
            return False
        return not batch or all(s > at for s in batch)

    def _latest(self, ns: Namespace, subject: str, eff: int, new_key: OrderKey
                ) -> list[tuple[OrderKey, str]] | None:
        """latest-by-subject's answer without walking the subject's facts, when the new
        fact comes after every one of them in effect order (facts arriving in time
        order): the facts current when it begins, in effect order, which it supersedes
        — or None (arriving out of order: ask the policy with every fact).

        Exact, not a shortcut: a fact that is not current at ``eff`` — superseded or
        expired, since it has begun — is not current at any later start either
        (links are only added within a batch), so only the facts that were current
        when the last in-order fact began are looked at again: for the stored facts,
        the fact index keeps them (its subject heads, see
        :mod:`holomem.projections.subjects`).
        """
        state = self._heads.get((ns, subject))
        if state is None:
            stored = self.view.facts.subject_heads(subject, ns)
            batch = self._by_subject.get((ns, subject))
            if batch is None and stored is not None:
                state = stored  # (its heads come sorted)
        if state is None:
            members = [(p.key, p.id) for p in batch or ()]
            last = max(members)[0] if members else None
            if stored is not None:
                members += stored[1]
                last = stored[0] if last is None else max(last, stored[0])
            if last is None:
                return []
            members.sort()
            state = (last, members)
        last, heads = state
        if not last < new_key:
            return None
        return [(k, fid) for k, fid in heads if self._current_at(fid, eff, k)]

    def _policy_links(self, ns: Namespace, subject: str, new: NewFact, new_key: OrderKey
                      ) -> Links:
        """Ask the supersession policy, showing it the subject's other facts in the same
        namespace: stored ones and those written earlier in the batch."""
        facts = self.view.facts
        eff = new.effective_time
        members: list[tuple[OrderKey, SubjectMember]] = []
        for fid in facts.subject_members(subject, ns):
            key = facts.order_key(fid)
            members.append((key, SubjectMember(fid, key[0], key[1], key < new_key,
                                               self._current_at(fid, eff))))
        for p in self._by_subject.get((ns, subject), ()):
            members.append((p.key, SubjectMember(p.id, p.eff, p.ingest, p.key < new_key,
                                                 self._current_at(p.id, eff))))
        members.sort(key=lambda m: m[0])
        links = self.policies.supersession(new, [m for _, m in members])
        if not isinstance(links, Links):
            raise InvalidError(f"the supersession policy returned {type(links).__name__}, "
                               "not Links(supersedes, superseded_by)")
        known = {m.id for _, m in members}
        return Links([i for i in links.supersedes if i in known],
                     [i for i in links.superseded_by if i in known])
