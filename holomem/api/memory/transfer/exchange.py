"""Export and import: facts moved between stores with their whole history (docs/contract.md §4d).

Owns: the export record of a stored fact (:func:`export_record`), reading every fact
at or under a namespace in blocks (:func:`export_blocks`), and planning an import's
transactions (:class:`Importer`): each record checked like a remember, written with
its own ingest time, digest, feedback and confidence, and its supersession links
restored as they were (a link waits until both of its facts are stored, and links
that would close a supersession cycle are refused: :func:`refuse_cycles`); typed
relations ride in the records too (:mod:`.links`). No policy runs on
import: what the source decided is what the target holds. Imports the engine's
view, remember (its checks), transferlinks, the types and validate.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import msgspec
import numpy as np

from holomem.api.engine import Store, View, nesting, validate, vectors
from holomem.api.memory.forget.removal import live_facts
from holomem.api.memory.remember import intake
from holomem.api.memory.transfer import links as transferlinks
from holomem.api.memory.transfer.records import (
    EXPORT_FORMATS,
    ConfidenceHistory,
    ConfidenceRecord,
    FactExport,
    FeedbackRecord,
    LinkRecord,
    RelationRecord,
)
from holomem.api.memory.types import RememberInput
from holomem.errors import ConflictError, InvalidError, LimitError
from holomem.events import (
    ConfidenceSet,
    DocumentAdded,
    Event,
    FactAdded,
    FactLinks,
    FeedbackGiven,
)
from holomem.projections.namespaces import Namespace

#: Facts read under one read block by an export (writers wait at most that long).
EXPORT_BLOCK = 1000
#: Facts per import transaction, and the most one transaction may take.
IMPORT_BATCH = 1000
MAX_IMPORT_BATCH = 10_000
#: The most feedback entries and links one imported record may carry.
MAX_FEEDBACK = 100_000
MAX_LINKS = validate.MAX_IDS
#: The most relations one import call takes besides its records' own.
MAX_IMPORT_RELATIONS = 100_000


def export_record(view: View, slot: int, relations: bool = True,
                  ranks: transferlinks.Ranks | None = None) -> FactExport:
    """The stored fact in ``slot`` as an export record (without its typed relations
    unless ``relations``; ``ranks``: those of ``view``, to share between records)."""
    facts = view.facts
    fid = view.id_of(slot)
    rec = view.record(slot)
    t = facts.times(slot)
    raw = view.vector_as_written(slot)
    turn = facts.turns.get(fid)
    changes = facts.confidence_changes(fid)
    return FactExport(
        id=fid, text=rec.text, ingest_time=t.ingest_time,
        namespace=list(facts.namespace(slot)), subject=t.subject,
        entities=list(rec.entities), metadata=validate.load_metadata(rec.metadata),
        embedding=np.frombuffer(raw, dtype="<f4").tolist() if raw else None,
        event_time=t.event_time, valid_from=t.valid_from, valid_to=t.valid_to,
        requested=list(facts.requested.get(fid, ())),
        links=[LinkRecord(supersedes=link.other, known_at=link.known_at)
               for link in facts.supersedes.get(fid, ())],
        confidence=facts.confidence.get(fid, 1.0),
        feedback=[FeedbackRecord(helpful=h, time=tm, note=n)
                  for h, tm, n in facts.feedback.get(fid, ())],
        digest=t.digest.hex(), ttl_ms=t.ttl_ms,
        relations=transferlinks.records_of(view, slot, ranks) if relations else [],
        speaker=turn.speaker if turn else None, session=turn.session if turn else None,
        position=turn.position if turn else None,
        confidence_history=ConfidenceHistory(
            remembered=facts.confidence_remembered(fid),
            changes=[ConfidenceRecord(time=t, confidence=v) for t, v in changes])
        if changes else None)


def export_blocks(store: Store, prefix: Namespace, block: int = EXPORT_BLOCK
                  ) -> Iterator[builtins.list[FactExport]]:
    """Every fact at or under ``prefix`` that was stored when the export began, in
    write order, ``block`` facts per read (so a long export never holds writers up
    for long). A fact changed meanwhile is exported as its block found it; one
    forgotten meanwhile is left out. A compaction (a purge) meanwhile renumbers the
    slots: the facts not yet read are then found again by their ids."""
    gen, slots, ids = store.read(lambda view: _initial(view, prefix))
    for start in range(0, len(slots), block):
        part = list(zip(slots[start:start + block].tolist(), ids[start:start + block],
                        strict=True))

        def read(view: View, part: builtins.list[tuple[int, str]] = part
                 ) -> builtins.list[FactExport]:
            ranks = transferlinks.Ranks(view)
            if view.generation == gen:
                # Same slots: a fact forgotten and written again lies at another one.
                found = [slot for slot, fid in part if view.slot(fid) == slot]
            else:
                found = [slot for slot in (view.slot(fid) for _, fid in part)
                         if slot >= 0 and view.facts.is_fact[slot]
                         and view.facts.namespace(slot)[:len(prefix)] == prefix]
            return [export_record(view, slot, ranks=ranks) for slot in found]

        yield store.read(read)


def _initial(view: View, prefix: Namespace
             ) -> tuple[int, np.ndarray, builtins.list[str]]:
    slots = live_facts(view, prefix)
    return view.generation, slots, [view.id_of(int(s)) for s in slots]


# -- import -----------------------------------------------------------------------------
class Incoming(NamedTuple):
    """A checked import record: where it came from (1-based), and its payload digest."""

    line: int
    record: FactExport
    digest: bytes
    metadata: bytes  # canonical JSON, as the event holds it
    relations: tuple[transferlinks.Incoming, ...] = ()


def decode(item: object, line: int) -> FactExport:
    """One import record from a JSON line (str or bytes), a dict or a FactExport.
    Errors: ``invalid_request``, ``limit`` (nested deeper than a request may be, found
    before it is decoded, as the contract finds it), each naming the line."""
    what = f"line {line}: the record"
    try:
        if isinstance(item, FactExport):
            return item
        if isinstance(item, (str, bytes, bytearray, memoryview)):
            raw = item.encode() if isinstance(item, str) else bytes(item)
            nesting.check_nesting(raw, what)
            return msgspec.json.decode(raw, type=FactExport)
        if isinstance(item, Mapping):
            record = dict(item)
            nesting.check_depth(record, what=what)
            vector = record.get("embedding")
            if vector is not None and (type(vector) not in (list, tuple)
                                       or vectors.other_numbers(vector)):
                # A numpy array, a buffer or numpy scalars, as remember takes them: the
                # float32 numbers they stand for (checked as every vector is).
                record["embedding"] = vectors.vector(
                    vector, 0, f"line {line}: embedding").tolist()
            return msgspec.convert(record, FactExport)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise InvalidError(f"line {line}: {exc}") from None
    except UnicodeEncodeError:  # msgspec cannot even name a lone surrogate
        raise InvalidError(f"line {line}: the record holds text that is not valid Unicode "
                           "(a lone surrogate)") from None
    raise InvalidError(f"line {line}: a record must be a JSON line, a dict or a FactExport")


def check(x: FactExport, line: int) -> Incoming:
    """Check a record as a remember of the same fact is checked, and the rest of it."""
    where = f"line {line}"
    if x.format not in EXPORT_FORMATS:
        raise InvalidError(f"{where}: format {x.format} is not one this version reads "
                           f"({', '.join(map(str, EXPORT_FORMATS))})")
    validate.doc_id(x.id, f"{where}: id")
    # The remember the record stands for: the fields it holds at their defaults (no
    # entities, no supersedes, confidence 1) are ones that remember left out, so a
    # record without a digest gets the one that remember has (remember.digest, below).
    as_input = RememberInput(
        text=x.text, id=x.id, subject=x.subject, entities=x.entities or None,
        metadata=x.metadata, embedding=x.embedding, event_time=x.event_time,
        valid_from=x.valid_from, valid_to=x.valid_to, supersedes=x.requested or None,
        confidence=None if x.confidence == 1.0 else x.confidence, namespace=x.namespace,
        ttl_ms=x.ttl_ms, speaker=x.speaker, session=x.session, position=x.position)
    try:
        meta = intake.validated(as_input, 0)
    except (InvalidError, LimitError) as exc:
        raise type(exc)(f"{where}: {exc.message.removeprefix('remember: ')}") from None
    ingest = validate.to_ms(x.ingest_time, f"{where}: ingestTime")
    if ingest is None or ingest < 0:
        raise InvalidError(f"{where}: ingestTime must be a time at or after the epoch")
    if len(x.links) > MAX_LINKS:
        raise LimitError(f"{where}: more than {MAX_LINKS} links")
    for link in x.links:
        validate.doc_id(link.supersedes, f"{where}: links")
        validate.to_ms(link.known_at, f"{where}: links knownAt")
        if link.supersedes == x.id:
            raise InvalidError(f"{where}: a fact cannot supersede itself")
    if len(x.feedback) > MAX_FEEDBACK:
        raise LimitError(f"{where}: more than {MAX_FEEDBACK} feedback entries")
    for fb in x.feedback:
        validate.to_ms(fb.time, f"{where}: feedback time")
        if fb.note is not None:
            validate.text(fb.note, f"{where}: feedback note")
    history = x.confidence_history
    if history is not None:
        if not history.changes or len(history.changes) > MAX_FEEDBACK:
            raise LimitError(f"{where}: confidenceHistory holds 1 to {MAX_FEEDBACK} changes")
        for value in (history.remembered, *(c.confidence for c in history.changes)):
            if not 0.0 <= value <= 1.0:
                raise InvalidError(f"{where}: confidenceHistory: a confidence must be "
                                   "between 0 and 1")
        for change in history.changes:
            validate.to_ms(change.time, f"{where}: confidenceHistory time")
        if history.changes[-1].confidence != x.confidence:
            raise InvalidError(f"{where}: the last of confidenceHistory's changes is not "
                               "the record's confidence")
    if x.digest is not None:
        try:
            digest = bytes.fromhex(x.digest)
        except ValueError:
            digest = b""
        if len(digest) != 8:
            raise InvalidError(f"{where}: digest must be 16 hex digits")
    else:  # a record written by hand: the digest a remember of it would have
        digest = intake.digest(as_input)
    links = tuple(transferlinks.checked(x.relations, x.id, where))
    if x.embedding is not None:
        # Kept as float32, as the store keeps it: what is exported again compares equal.
        x = msgspec.structs.replace(
            x, embedding=np.asarray(x.embedding, dtype="<f4").tolist())
    return Incoming(line, x, digest[:8], meta, links)


class Importer:
    """Plans an import's transactions; links wait here until both facts are stored."""

    def __init__(self) -> None:
        self.imported = 0
        self.unchanged = 0
        self.batches = 0
        #: Ids the last planned batch writes.
        self.written: builtins.list[str] = []
        # (successor, predecessor, known_at, line of the successor's record)
        self._waiting: builtins.list[tuple[str, str, int, int]] = []
        #: Typed relations, made once every fact of the import is stored.
        self.relations = transferlinks.Pending()

    @property
    def unresolved_links(self) -> int:
        return len(self._waiting)

    def plan(self, view: View, batch: builtins.list[Incoming]) -> builtins.list[Event]:
        """The events of one transaction (under the write lock): every new fact of
        ``batch``, and every waiting link whose two facts now exist. A batch it
        refuses (a conflict, a link across namespaces) ends the import."""
        events: builtins.list[Event] = []
        here: dict[str, Incoming] = {}
        waiting = list(self._waiting)
        dim = view.embedding_dim
        unchanged = 0
        for item in batch:
            x = item.record
            self.relations.add(item.relations)
            earlier = here.get(x.id)
            slot = view.facts.slot(x.id)
            if earlier is not None or slot >= 0:
                existing = (earlier.record if earlier is not None
                            else export_record(view, slot, relations=False))
                if not _same_payload(existing, x):
                    raise ConflictError(f"line {item.line}: fact {x.id!r} already exists "
                                        "with another payload")
                unchanged += 1
                continue
            if x.id in view.catalog:
                raise ConflictError(f"line {item.line}: id {x.id!r} belongs to a document "
                                    "that is not a fact")
            emb = validate.embedding(x.embedding, dim, f"line {item.line}: embedding")
            if emb and not dim:
                dim = len(emb) // 4
            here[x.id] = item
            events.append(DocumentAdded(
                id=x.id, text=x.text, metadata=item.metadata, embedding=emb,
                entities=tuple(x.entities)))
            events.append(FactAdded(
                id=x.id, ingest_time=x.ingest_time, subject=x.subject,
                event_time=x.event_time, valid_from=x.valid_from, valid_to=x.valid_to,
                requested=tuple(x.requested), digest=item.digest,
                confidence=_remembered(x), namespace=tuple(x.namespace), ttl_ms=x.ttl_ms,
                turn=None if x.speaker is None and x.session is None and x.position is None
                else (x.speaker, x.session, x.position)))
            events.extend(FeedbackGiven(id=x.id, helpful=fb.helpful, time=fb.time,
                                        note=fb.note) for fb in x.feedback)
            if x.confidence_history is not None:
                events.extend(ConfidenceSet(id=x.id, confidence=c.confidence, time=c.time)
                              for c in x.confidence_history.changes)
            waiting.extend((x.id, link.supersedes, link.known_at, item.line)
                           for link in x.links)
        ready, still = self._ready(view, here, waiting)
        if ready:
            refuse_cycles(view, ready)
            events.append(FactLinks(links=tuple(link[:3] for link in ready)))
        self._waiting = still
        self.written = list(here)
        self.imported += len(here)
        self.unchanged += unchanged
        self.batches += 1 if events else 0
        return events

    def _ready(self, view: View, here: Mapping[str, Incoming],
               waiting: builtins.list[tuple[str, str, int, int]]
               ) -> tuple[builtins.list[tuple[str, str, int, int]],
                          builtins.list[tuple[str, str, int, int]]]:
        def namespace(fid: str) -> Namespace | None:
            if fid in here:
                return tuple(here[fid].record.namespace)
            slot = view.facts.slot(fid)
            return view.facts.namespace(slot) if slot >= 0 else None

        ready, still = [], []
        for succ, pred, known_at, line in waiting:
            a, b = namespace(succ), namespace(pred)
            if a is None or b is None:
                still.append((succ, pred, known_at, line))
                continue
            if a != b:
                raise InvalidError(f"line {line}: {succ!r} supersedes {pred!r} of another "
                                   "namespace (supersession never crosses namespaces)")
            ready.append((succ, pred, known_at, line))
        return ready, still


#: The most facts of a supersession cycle its error names.
CYCLE_NAMED = 8


def refuse_cycles(view: View, links: Sequence[tuple[str, str, int, int]]) -> None:
    """Refuse ``links`` (successor, predecessor, known-at, line of the successor's
    record) if, added to ``view``'s supersession links, they would close a cycle: each
    fact of a cycle supersedes the next, so none would ever be current again, a state
    no remember can make. Errors: ``invalid_request`` naming the line of the cycle's
    last record and the cycle's facts, from that record's on.

    Every cycle holds one of ``links``, so it lies both in what their predecessors
    supersede (transitively) and in what supersedes their successors: the two sets are
    walked a fact at a time, in turn, and the first one complete is searched (depth
    first, without recursion). The work is at most twice the smaller set's: for an
    import in write order, what supersedes the batch's facts (little but the batch);
    for one whose successors come first, what they supersede.
    """
    facts = view.facts
    ahead: dict[str, builtins.list[str]] = {}  # successor -> its new predecessors
    behind: dict[str, builtins.list[str]] = {}  # predecessor -> its new successors
    lines: dict[tuple[str, str], int] = {}
    for succ, pred, _, line in links:
        ahead.setdefault(succ, []).append(pred)
        behind.setdefault(pred, []).append(succ)
        lines[succ, pred] = line

    def supersedes(fid: str) -> builtins.list[str]:
        return [*(link.other for link in facts.supersedes.get(fid, ())), *ahead.get(fid, ())]

    def superseded_by(fid: str) -> builtins.list[str]:
        return [*(link.other for link in facts.superseded_by.get(fid, ())),
                *behind.get(fid, ())]

    down, up = _Closure(behind, supersedes), _Closure(ahead, superseded_by)
    while down.grow() and up.grow():
        pass
    region = down.seen if not down.todo else up.seen
    cycle = _cycle_in(region, list(behind), supersedes)
    if cycle is None:
        return
    # Named from the fact whose record is read last among the cycle's new links.
    line, at = max((lines.get(pair, 0), i)
                   for i, pair in enumerate(zip(cycle, [*cycle[1:], cycle[0]], strict=True)))
    cycle = cycle[at:] + cycle[:at]
    names = list(map(repr, cycle[:CYCLE_NAMED]))
    if len(cycle) > CYCLE_NAMED:
        names.append(f"... ({len(cycle)} facts in all)")
    chain = " supersedes ".join([*names, repr(cycle[0])])
    raise InvalidError(f"line {line}: these facts would supersede one another in a cycle "
                       f"({chain}), so none of them would ever be current")


class _Closure:
    """The facts reachable from some seeds by ``step``, found one fact at a time."""

    def __init__(self, seeds: Iterable[str], step: Callable[[str], builtins.list[str]]) -> None:
        self.seen = set(seeds)
        self.todo = list(self.seen)
        self.step = step

    def grow(self) -> bool:
        """Take the next fact's neighbours; False once every fact has been taken."""
        if not self.todo:
            return False
        for other in self.step(self.todo.pop()):
            if other not in self.seen:
                self.seen.add(other)
                self.todo.append(other)
        return True


def _cycle_in(region: set[str], roots: builtins.list[str],
              supersedes: Callable[[str], builtins.list[str]]) -> builtins.list[str] | None:
    """A cycle among the facts of ``region`` reachable from ``roots`` (each fact
    superseding the next, the last the first), or None."""
    done: set[str] = set()
    for root in roots:
        if root in done or root not in region:
            continue
        path, on_path = [root], {root}
        nexts = [iter(supersedes(root))]
        while nexts:
            for other in nexts[-1]:
                if other in on_path:
                    return path[path.index(other):]
                if other in region and other not in done:
                    path.append(other)
                    on_path.add(other)
                    nexts.append(iter(supersedes(other)))
                    break
            else:
                fid = path.pop()
                on_path.discard(fid)
                done.add(fid)
                nexts.pop()
    return None


def revectored(batch: builtins.list[Incoming],
               embed: Callable[[builtins.list[str]], builtins.list[builtins.list[float]] | None],
               drop: bool) -> builtins.list[Incoming]:
    """``batch`` with the embedder's vectors for records that carry none (every record,
    with ``drop``); without an embedder (``embed`` gives None), ``drop`` only removes
    them."""
    todo = [i for i, x in enumerate(batch) if drop or x.record.embedding is None]
    if not todo:
        return batch
    vecs = embed([batch[i].record.text for i in todo])
    out = list(batch)
    for row, i in enumerate(todo):
        x = batch[i]
        vec = vecs[row] if vecs is not None else None
        out[i] = x._replace(record=msgspec.structs.replace(x.record, embedding=vec))
    return out


def _remembered(x: FactExport) -> float | None:
    """The confidence the record's fact was remembered with (None: 1.0)."""
    value = (x.confidence if x.confidence_history is None
             else x.confidence_history.remembered)
    return None if value == 1.0 else value


def _same_payload(stored: FactExport, incoming: FactExport) -> bool:
    """Whether ``incoming`` is the fact ``stored`` is: compared on everything but its
    relations (not the fact's payload: made on their own) and its format; a record
    that carries no digest is compared on everything else."""
    strip: dict[str, Any] = {"relations": [], "format": EXPORT_FORMATS[-1]}
    ours = msgspec.structs.replace(incoming, **strip)
    theirs = msgspec.structs.replace(stored, **strip)
    if incoming.digest is None:
        theirs = msgspec.structs.replace(theirs, digest=None)
    return ours == theirs


def batches(items: Iterable[object], size: int) -> Iterator[builtins.list[Incoming]]:
    """Checked records ``size`` at a time; blank lines are skipped (and counted)."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidError("import_ takes an iterable of records (JSON lines or dicts)")
    batch: builtins.list[Incoming] = []
    for line, item in enumerate(items, 1):
        if isinstance(item, (str, bytes)) and not item.strip():
            continue
        batch.append(check(decode(item, line), line))
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def relation_list(items: Iterable[Any]) -> builtins.list[transferlinks.Incoming]:
    """The checked relations of an import's ``relations`` (RelationRecords or dicts).
    Errors: ``invalid_request``, ``limit`` (naming ``relations[i]``)."""
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        raise InvalidError("relations must be a list of relation records")
    records: builtins.list[RelationRecord] = []
    for i, item in enumerate(items):
        if len(records) >= MAX_IMPORT_RELATIONS:
            raise LimitError(f"relations: at most {MAX_IMPORT_RELATIONS} per import call")
        try:
            records.append(item if isinstance(item, RelationRecord)
                           else msgspec.convert(item, RelationRecord))
        except msgspec.ValidationError as exc:
            raise InvalidError(f"relations[{i}]: {exc}") from None
    return transferlinks.checked(records, None, "relations")


def batch_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidError("batch_size must be a positive integer")
    if value > MAX_IMPORT_BATCH:
        raise LimitError(f"batch_size is at most {MAX_IMPORT_BATCH}")
    return value


def as_dict(record: FactExport) -> dict[str, Any]:
    """A record's JSON form as a dict (camelCase)."""
    out: dict[str, Any] = msgspec.to_builtins(record)
    return out
