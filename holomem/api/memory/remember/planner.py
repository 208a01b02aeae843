"""Planning a remember: from checked inputs to the events of one transaction
(docs/contract.md §3, §4).

Owns: idempotent retries and conflicts, and the supersession links a policy adds
(:class:`Planner`, run under the write lock inside ``Store.commit``), for inputs
already checked (:mod:`.intake`). The temporal rules — when a fact begins, its status at a
time, effect order — are the fact index's (:mod:`holomem.projections.facts`); the
planner applies the same functions to facts written earlier in the same batch,
which are not in the index yet. Imports the engine's view, the policies, the
types and validate.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple, cast

import numpy as np

from holomem.api.engine import View, validate, vectors
from holomem.api.memory.policies import (
    Links,
    NewFact,
    Policies,
    SubjectMember,
    latest_by_subject,
    no_entities,
    no_supersession,
)
from holomem.api.memory.remember import intake
from holomem.api.memory.types import Remembered, RememberInput
from holomem.errors import ConflictError, InvalidError
from holomem.events import DocumentAdded, Event, FactAdded
from holomem.projections.namespaces import Namespace
from holomem.projections.subjects import OrderKey
from holomem.projections.temporal import end_time, status_at


def _paired(docs: list[DocumentAdded], facts: Sequence[FactAdded]) -> list[Event]:
    """Each new fact's two events, back to back: its document, then its FactAdded."""
    return list(itertools.chain.from_iterable(zip(docs, facts, strict=True)))


def _found_entities(found: object) -> tuple[str, ...]:
    """What an entity extractor found, checked (its empty list, at once)."""
    return () if type(found) is list and not found else validate.entities(found)

def _turn(x: RememberInput) -> tuple[str | None, str | None, int | None] | None:
    """The FactAdded ``turn`` of an input (None: it gives none of the three fields)."""
    if x.speaker is None and x.session is None and x.position is None:
        return None
    return (x.speaker, x.session, x.position)


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
        #: ... and the predecessors each batch fact was given (see _reaches).
        self._batch_pred: dict[str, list[str]] = {}
        self._by_subject: dict[tuple[Namespace, str], list[_Pending]] = {}
        #: latest-by-subject, per subject this batch touched: the greatest order key
        #: of its facts, and those of them that may still be current (see _latest).
        self._heads: dict[tuple[Namespace, str], tuple[OrderKey, list[tuple[OrderKey, str]]]] = {}
        self._dim = view.embedding_dim
        self._next_slot = view.catalog.slots
        self._seq = view.revision + 1

    def plan(self, batch: list[intake.Checked]) -> list[Event]:
        events = self._plan_new(batch)
        if events is None:
            events = []
            for c in batch:
                events.extend(self._one(c.input, c.digest, vec=c.vector))
        return events

    def _dims_agree(self, vecs: list[np.ndarray | None]) -> bool:
        """Whether every vector of the batch has the store's dimension (or, on a store
        without one yet, the first vector's)."""
        dims = {len(v) for v in vecs if v is not None}
        return not dims or (len(dims) == 1 and (not self._dim or dims == {self._dim}))

    def _plan_new(self, batch: list[intake.Checked]) -> list[Event] | None:
        """:meth:`_one` of each input, in order, when no two inputs share an id and
        none is stored yet (None otherwise, nothing done): then every input makes one
        fact in the next slot, so the simple ones — a text and maybe an id, nothing
        else, most of a bulk load — are planned a column at a time, and only the
        others one by one, each seeing the facts before it in the batch (but inputs
        that add only a subject under latest-by-subject: see :meth:`_plan_latest`)."""
        n = len(batch)
        inputs = [c.input for c in batch]
        digests = [c.digest for c in batch]
        vecs = [c.vector for c in batch]
        if not self._dims_agree(vecs):
            return None  # one at a time: the first vector of another dimension is named
        given: list[str | None] = list(map(intake.ID, inputs))
        fids: list[str] = (list(map(intake.content_id, digests)) if given.count(None) == n
                           else [f if f is not None else intake.content_id(d)
                                 for f, d in zip(given, digests, strict=True)])
        if (len(set(fids)) != n or not self._pending.keys().isdisjoint(fids)
                or not self.view.catalog.none_live(fids)):
            return None
        # Simple: a text, maybe an id and a vector (checked, of the right dimension).
        simple = list(map(intake.NO_REST.__eq__, map(intake.REST, inputs)))
        embs = ([b""] * n if all(v is None for v in vecs)
                else [b"" if v is None else v.tobytes() for v in vecs])
        if (simple.count(False) and self.policies.supersession is latest_by_subject
                and self.policies.extractor is no_entities):
            latest = self._plan_latest(inputs, fids, digests, simple, embs)
            if latest is not None:
                self._fix_dim(vecs)
                return latest
        now, seq, first = self.now, self._seq, self._next_slot
        at = [p for p in range(n) if simple[p]]  # the simple inputs' places
        ids = [fids[p] for p in at]
        shorts = [digests[p][:8] for p in at]
        made = [Remembered(id=f, created=True, ingest_time=now) for f in ids]
        texts = [inputs[p].text for p in at]
        at_embs = [embs[p] for p in at]
        extractor = self.policies.extractor
        facts = [FactAdded(id=f, ingest_time=now, digest=short)
                 for f, short in zip(ids, shorts, strict=True)]
        others = [p for p in range(n) if not simple[p]]
        # Each simple input's two events, back to back; with an entity extractor, the
        # documents are made as it runs, in order (below).
        pairs: list[Event] | None = (_paired(
            [DocumentAdded(id=f, text=t, embedding=e)
             for f, t, e in zip(ids, texts, at_embs, strict=True)], facts)
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
                    [DocumentAdded(id=f, text=t, embedding=e,
                                   entities=_found_entities(extractor(t)))
                     for f, t, e in zip(ids[k:stop], texts[k:stop], at_embs[k:stop],
                                        strict=True)],
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
            events.extend(self._one(inputs[p], digests[p], fids[p], vecs[p]))
        simple_ones(k, len(at))
        self._next_slot = first + n
        self._fix_dim(vecs)
        return events

    def _fix_dim(self, vecs: list[np.ndarray | None]) -> None:
        """The batch's first vector fixes the dimension of a store without one."""
        if not self._dim:
            first = next((v for v in vecs if v is not None), None)
            if first is not None:
                self._dim = len(first)

    def _plan_latest(self, inputs: list[RememberInput], fids: list[str], digests: list[bytes],
                     simple: list[bool], embs: list[bytes]) -> list[Event] | None:
        """:meth:`_plan_new`'s answer under latest-by-subject with no entity extractor,
        when every input that is not simple adds only a subject (a text, a subject and
        maybe an id: the root namespace, no time, no supersedes list), and every stored
        fact of those subjects comes before the batch in effect order — else None,
        nothing done. Then each such input begins now, after every fact of its subject,
        and supersedes what :meth:`_latest` would give: the stored heads current now
        for the subject's first input of the batch, the subject's input before it for
        every later one (which began now too, and superseded the rest)."""
        others = [p for p, plain in enumerate(simple) if not plain]
        rest = list(map(intake.OTHERS, [inputs[p] for p in others]))
        if rest.count(intake.NO_OTHERS) != len(others):
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
            [DocumentAdded(id=f, text=t, embedding=e)
             for f, t, e in zip(fids, map(intake.TEXT, inputs), embs, strict=True)],
            added)

    def _one(self, x: RememberInput, digest: bytes, new: str | None = None,
             vec: np.ndarray | None = None) -> list[Event]:
        """The events of one input (``new``: its id, when the caller knows that no
        stored fact and no earlier input of the batch has it; ``vec``: its vector,
        checked by :mod:`.intake`)."""
        view, facts = self.view, self.view.facts
        fid = new if new is not None else x.id if x.id is not None else intake.content_id(digest)
        slot = view.catalog.slot(fid) if new is None else -1
        if new is None and (slot >= 0 or fid in self._pending):
            if slot >= 0 and not facts.is_fact.item(slot):
                raise ConflictError(f"id {fid!r} belongs to a document that is not a fact")
            first_ingest, same = (
                (facts.ingest.item(slot), facts.times(slot).digest == digest[:8]) if slot >= 0
                else (self._pending[fid].ingest, self._pending[fid].digest == digest[:8]))
            if not same and slot >= 0:
                # A fact a version before digest 2 stored keeps the digest it gave.
                legacy = intake.legacy_digest(x)
                same = legacy is not None and facts.times(slot).digest == legacy[:8]
            if not same:
                raise ConflictError(
                    f"fact {fid!r} already exists with a different payload" if slot >= 0
                    else f"two items of this request have the id {fid!r} with different "
                    "payloads")
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
        if vec is None and x.embedding is not None:  # (intake gives it; kept as a guard)
            vec = vectors.vector(x.embedding, 0, "embedding", decoded=True)
        if vec is not None:
            if self._dim and len(vec) != self._dim:
                raise InvalidError(f"embedding has dimension {len(vec)}; this store's is "
                                   f"{self._dim}")
            emb = vec.tobytes()
            if not self._dim:
                self._dim = len(vec)
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
        if subject is not None and self.policies.supersession is not no_supersession:
            # (The built-in "none" links nothing: its subject's facts are not gathered
            # for it, a cost that grew with every fact of the subject.)
            heads = (self._latest(ns, subject, eff, key)
                     if self.policies.supersession is latest_by_subject else None)
            if heads is None:
                self._heads.pop((ns, subject), None)
                links = self._policy_links(ns, subject, NewFact(eff, end), key)
                if links.supersedes:
                    supersedes = tuple(dict.fromkeys([*requested, *links.supersedes]))
                if links.superseded_by:
                    # A successor the new fact already reaches through what it
                    # supersedes (a supersedes list against time order, say) would
                    # close a cycle in which no fact is ever current: not linked.
                    superseded_by = tuple(s for s in dict.fromkeys(links.superseded_by)
                                          if s not in supersedes and s != fid
                                          and not self._reaches(supersedes, s))
            else:  # (what the policy would answer: Links(the heads, []))
                self._heads[(ns, subject)] = (key, [*heads, (key, fid)])
                if heads:
                    supersedes = tuple(dict.fromkeys([*requested, *(h for _, h in heads)]))
        short = digest[:8]
        p = self._pending[fid] = _Pending(fid, short, now, ns, subject, eff, end, key)
        self._next_slot += 1
        if supersedes:
            self._batch_pred.setdefault(fid, []).extend(supersedes)
            for pred in supersedes:
                self._batch_succ.setdefault(pred, []).append(fid)
        if superseded_by:
            self._batch_succ.setdefault(fid, []).extend(superseded_by)
            for succ in superseded_by:
                self._batch_pred.setdefault(succ, []).append(fid)
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
                      confidence=x.confidence, namespace=ns, ttl_ms=x.ttl_ms,
                      turn=_turn(x)),
        ]

    def _reaches(self, starts: tuple[str, ...], target: str) -> bool:
        """Whether ``target`` is one of ``starts`` or something they supersede,
        directly or through others (stored links and the batch's)."""
        known = self.view.facts.supersedes
        seen = set(starts)
        todo = list(starts)
        while todo:
            fid = todo.pop()
            if fid == target:
                return True
            for pred in (*(link.other for link in known.get(fid, ())),
                         *self._batch_pred.get(fid, ())):
                if pred not in seen:
                    seen.add(pred)
                    todo.append(pred)
        return False

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
