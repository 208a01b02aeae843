"""Compaction: the live state rewritten into a new generation (docs/guarantees.md §6).

Owns: the events that re-create every live document and fact as it is now
(:func:`live_events`), which transactions already hold them and go over whole
(:func:`whole_transactions`), the writing of them into a new generation, whose
projections are the old ones renumbered (:func:`rewrite`), and the order of a whole
compaction (:func:`compact`: rewrite, switch, erase the old generation), under the
locks the store hands it (``Store.compact``).
Imports the log, the projections and the engine's view.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import Union, get_args

import msgspec
import numpy as np

from holomem import events as ev
from holomem.api.engine.checkpointing import Checkpointer
from holomem.api.engine.replay import text_file
from holomem.api.engine.view import View
from holomem.events import (
    ConfidenceSet,
    ConfigRecorded,
    DocumentAdded,
    DocumentReplaced,
    EmbedderRecorded,
    Event,
    FactAdded,
    FactLinks,
    FeedbackGiven,
    RelationAdded,
    StoreSettings,
)
from holomem.log import crashpoints as cp
from holomem.log.backend import JournalBackend, RewriteTarget
from holomem.log.recordfile import RecordFile
from holomem.projections.base import Kept, compaction_check, gc_paused
from holomem.projections.firstwords import FirstWords
from holomem.projections.state import ProjectionState
from holomem.projections.text import Carried, TextRecord, bodies_of

#: Events per transaction when compaction writes a new generation.
BATCH = 2048
#: Live documents whose records are read (and events made) at a time.
SLOTS = 1024

#: The least share of the live documents whose transactions wrote nothing since removed
#: for a compaction to look for transactions to carry whole (below it, reading every
#: frame to choose them costs more than it saves: benchmarks/README.md, issue 33).
WHOLE_SHARE = 0.8

P_COMPACT_BEGIN = cp.point("store.compact.begin", "compaction starts (a purge is recorded)")
P_COMPACT_WRITTEN = cp.point(
    "store.compact.written", "the new generation's journal is written; text segment not sealed")
P_COMPACT_DONE = cp.point("store.compact.done", "the old generation is erased")


def live_events(view: View, slots: np.ndarray, records: list[TextRecord]
                ) -> list[list[Event]]:
    """For each of ``slots`` (ascending), the events that re-create its document (and
    fact) as it is now, from its text record (``records``, :meth:`View.records`), the
    facts' events made a column at a time (:meth:`FactIndex.fact_events`)."""
    facts = view.facts
    is_fact = facts.is_fact.view()[slots]
    fact_events = iter(facts.fact_events(slots[is_fact]))
    feedback = facts.feedback
    # No vector anywhere: every document's embedding as written is empty.
    vectors = view.embeddings.has.view()[slots].tolist() if view.embedding_dim else None
    out: list[list[Event]] = []
    for k, (slot, rec, fact) in enumerate(zip(slots.tolist(), records, is_fact.tolist(),
                                              strict=True)):
        events: list[Event] = [DocumentAdded(
            id=rec.id, text=rec.text, metadata=rec.metadata,
            embedding=view.vector_as_written(slot) if vectors is not None and vectors[k]
            else b"", entities=rec.entities)]
        out.append(events)
        if fact:
            events.append(next(fact_events))
            given = feedback.get(rec.id)
            if given:
                events.extend(FeedbackGiven(id=rec.id, helpful=h, time=tm, note=n)
                              for h, tm, n in given)
            # Each confidence set since, with its time (the FactAdded holds the one it
            # was remembered with): get and list with known_at answer as before.
            events.extend(ConfidenceSet(id=rec.id, confidence=v, time=tm)
                          for tm, v in facts.confidence_changes(rec.id))
    return out


def live_relations(view: View) -> list[Event]:
    """Events that re-create every live link between facts, in the order they were
    made, each with its own time and metadata (both ends are written before)."""
    rel = view.relations
    src, dst = rel.src.view(), rel.dst.view()
    return [RelationAdded(from_id=view.id_of(int(src[r])), to_id=view.id_of(int(dst[r])),
                          relation=rel.relation(r), time=rel.time.item(r),
                          metadata=rel.metadata(r))
            for r in rel.live_rows().tolist()]


def _named(value: object) -> Iterator[str]:
    """Every string in ``value`` (an event's field), through tuples."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, tuple):
        for v in value:
            yield from _named(v)


class _DocPeek(msgspec.Struct, tag_field="t", tag="doc.added", frozen=True):
    """What :func:`whole_transactions` reads of a DocumentAdded (the rest is skipped)."""

    id: str


class _FactPeek(msgspec.Struct, tag_field="t", tag="fact.added", frozen=True):
    """What :func:`whole_transactions` reads of a FactAdded: its links."""

    id: str
    supersedes: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()
    requested: tuple[str, ...] = ()


#: Every other event, by its tag alone (none of its fields decoded).
_OTHERS = tuple(msgspec.defstruct(f"_{cls.__name__}Peek", [], tag_field="t",
                                  tag=cls.__struct_config__.tag, frozen=True)
                for cls in get_args(Event) if cls not in (DocumentAdded, FactAdded))
_peek = msgspec.msgpack.Decoder(Union[(_DocPeek, _FactPeek, *_OTHERS)])


_ID = attrgetter("id")
_SUPERSEDES = attrgetter("supersedes")
_SUPERSEDED_BY = attrgetter("superseded_by")
_REQUESTED = attrgetter("requested")


def _peeked(payloads: list[bytes]) -> list[object] | None:
    """The payloads peeked at (:data:`_peek`), or None when one does not decode so."""
    try:
        return list(map(_peek.decode, payloads))
    except msgspec.DecodeError:
        return None


def _adds(events: Sequence[object]) -> int | None:
    """How many documents ``events`` add, when they are nothing but documents added, each
    followed or not by its own fact without a link or a requested link (what
    ``remember_many`` and ``add_documents`` write, and what a compaction writes for a
    document without feedback); None otherwise."""
    n = len(events)
    types = set(map(type, events))
    if types == {_DocPeek}:
        return n
    if n % 2 == 0 and types == {_DocPeek, _FactPeek}:
        # What remember_many writes, each document then its fact: seen a column at a time.
        docs_, facts = events[0::2], events[1::2]
        if (set(map(type, docs_)) == {_DocPeek} and set(map(type, facts)) == {_FactPeek}
                and list(map(_ID, docs_)) == list(map(_ID, facts))
                and not any(map(_SUPERSEDES, facts)) and not any(map(_SUPERSEDED_BY, facts))
                and not any(map(_REQUESTED, facts))):
            return n // 2
    docs = 0
    prev: object = None
    for e in events:
        if type(e) is _DocPeek:
            docs += 1
        elif not (type(e) is _FactPeek and isinstance(prev, _DocPeek) and prev.id == e.id
                  and not e.supersedes and not e.superseded_by and not e.requested):
            return None
        prev = e
    return docs


def whole_transactions(journal: JournalBackend, view: View) -> list[int]:
    """The transactions of the live generation that a compaction may carry over whole,
    as they are, instead of writing their documents' events again (ascending).

    A transaction qualifies when it only adds documents (each with or without its own
    fact, no link; :func:`_adds`), every document it added is still live (none deleted,
    replaced, forgotten or purged), and no other transaction of the generation names
    any of them (a feedback, a confidence, a link, a re-linking forget, a relation, a
    re-embedded vector, another fact...). Its events are then exactly the events a
    compaction would write for those documents, holding nothing removed: each document
    as it was written and still is. Reads and decodes every transaction.
    """
    catalog = view.catalog
    seq_of, alive = catalog.seq.view(), catalog.alive.view()
    #: the sequence numbers of transactions that wrote a slot no longer live
    dead = np.unique(seq_of[~alive])
    live = int(np.count_nonzero(alive))
    if not live or np.count_nonzero(~np.isin(seq_of[alive], dead)) < WHOLE_SHARE * live:
        # Too few documents could be carried for the reading to pay (every frame is
        # read to choose them): write everything again.
        return []
    vacated = set(dead.tolist())
    adds: dict[int, int] = {}
    named: set[str] = set()
    for seq, payloads in journal.replay(journal.first_seq):
        peeked = _peeked(payloads) if seq not in vacated else None
        docs = _adds(peeked) if peeked is not None else None
        if docs is not None:
            adds[seq] = docs
            continue
        for e in ev.decode_all(payloads, seq=seq):
            if isinstance(e, (DocumentAdded, DocumentReplaced)):
                named.add(e.id)  # (text, metadata and entities name no document)
            else:
                for field in e.__struct_fields__:
                    named.update(_named(getattr(e, field)))
    touched = {int(seq_of[s]) for s in map(catalog.slot, named) if s >= 0}
    written = np.bincount(seq_of, minlength=journal.last_seq + 1) if len(seq_of) else None
    return [seq for seq, docs in adds.items()
            if docs and seq not in touched and written is not None
            and seq < len(written) and int(written[seq]) == docs]


def rewrite(journal: JournalBackend, target: RewriteTarget, view: View,
            old: RecordFile | None) -> tuple[ProjectionState, RecordFile]:
    """Write the live state of ``view`` into ``target`` and its new text segment (written
    sequentially and sealed), and build the new generation's projections.

    The projections are not built by applying the events written: they are the old
    ones with the kept documents renumbered (:meth:`ProjectionState.compacted`), which
    equals what a replay of the new journal builds (tests/purge/test_purged_state.py).
    Only the records are read (for the events), and their words listed in the order a
    replay meets them, for the vocabulary.

    When the text segment ``old`` it replaces is a version 2 file (FORMAT.md §9.1),
    the new one keeps its salt, and every record that reads back intact from ``old``
    is copied into it as it is, rather than encoded (and sealed) again: in a version 2
    file a record is bound to neither its offset nor its sequence number.

    A transaction that already holds exactly the events this would write for its
    documents (:func:`whole_transactions`) is carried over whole instead, its frame
    refiled as bytes (:meth:`holomem.log.journal.Journal.refile`); its records are read
    all the same, for their words, entities and bytes.
    """
    carry = old is not None and old.available and old.version == 2
    records = text_file(journal, target.dir, target.generation, read_only=False,
                        salt=old.salt if carry and old is not None else None)
    carry = carry and old is not None and records.carries(old)
    state = ProjectionState(records)
    source = view.state
    kept = Kept.live(source.catalog.alive.view())
    #: the transaction that writes each kept document (its slot in the new generation)
    seqs = np.zeros(len(kept.slots), dtype=np.int64)
    #: the kept documents' distinct words, in the order a replay meets them
    words = FirstWords()
    #: the record bodies of the documents in ``batch`` and (carry) what was read of
    #: each, in order
    bodies: list[bytes] = []
    carried: list[Carried | None] | None = [] if carry else None
    placed = 0
    batch: list[Event] = []
    if view.embedding_dim:
        batch.append(StoreSettings(embedding_dim=view.embedding_dim))
    if source.memory_config is not None:
        batch.append(ConfigRecorded(config=source.memory_config))
    if source.embedder is not None:
        batch.append(EmbedderRecorded(identity=source.embedder))
    if source.reembed_target is not None:
        # The vectors go over as they are; the re-embed starts over in the new
        # generation (rewriting a vector twice gives the same vector).
        batch.append(EmbedderRecorded(identity=source.reembed_target, pending=True))

    def flush() -> None:
        nonlocal carried, placed
        if batch:
            seq = target.append(ev.encode_all(batch))
            if carried is not None:
                state.text.carry(carried)  # one per DocumentAdded of the batch
                carried = []
            # A document's events are all in its batch: its slot is written by ``seq``.
            state.text.place(seq, bodies)
            seqs[placed:placed + len(bodies)] = seq
            placed += len(bodies)
            bodies.clear()
            state.flush()
            batch.clear()

    try:
        # Every live document's events and records pass through here, a few dozen
        # objects each, none of them in a cycle: the collector would walk them again
        # and again (a tenth of a purge's time at 100,000 facts).
        with gc_paused(), state.text.buffered():
            # The settings go in a transaction of their own, so that every later one
            # holding nothing but documents can be carried whole by the next compaction.
            flush()
            whole = set(whole_transactions(journal, view))
            # The kept slots in runs written by one transaction each (a transaction's
            # documents have adjacent slots).
            written = source.catalog.seq.view()[kept.slots]
            cuts = (np.flatnonzero(written[1:] != written[:-1]) + 1).tolist()
            runs = zip([0, *cuts], [*cuts, len(written)], strict=True) if len(written) else ()
            for lo, hi in runs:
                if int(written[lo]) not in whole:
                    for start in range(lo, hi, SLOTS):
                        chunk = kept.slots[start:min(hi, start + SLOTS)]
                        read: list[Carried | None] | None = (
                            [] if carried is not None else None)
                        recs = view.records(chunk, read)
                        state.entities.add_lists(start, [r.entities for r in recs])
                        words.add([r.text for r in recs])
                        chunk_bodies = bodies_of(recs)  # (each event's fields: its record's)
                        for k, events in enumerate(live_events(view, chunk, recs)):
                            batch.extend(events)  # a document's events: one transaction
                            bodies.append(chunk_bodies[k])
                            if carried is not None and read is not None:
                                carried.append(read[k])
                            if len(batch) >= BATCH:
                                flush()
                    continue
                # A transaction carried over whole: its records are read (their words,
                # entities and bytes, as for any other), its events are not made.
                flush()
                run_bodies: list[bytes] = []
                run_carried: list[Carried | None] = []
                for start in range(lo, hi, SLOTS):
                    chunk = kept.slots[start:min(hi, start + SLOTS)]
                    read = [] if carried is not None else None
                    recs = view.records(chunk, read)
                    state.entities.add_lists(start, [r.entities for r in recs])
                    words.add([r.text for r in recs])
                    run_bodies.extend(bodies_of(recs))
                    if read is not None:
                        run_carried.extend(read)
                (seq,) = journal.refile(target, [int(written[lo])])
                if carried is not None:
                    state.text.carry(run_carried)
                state.text.place(seq, run_bodies)
                seqs[lo:hi] = seq
                placed += hi - lo
                state.flush()
            links = view.facts.all_links()
            if links:
                batch.append(FactLinks(links=tuple(links)))
            for event in live_relations(view):
                batch.append(event)
                if len(batch) >= BATCH:
                    flush()
            flush()
            compaction_check(placed == len(kept.slots), "a kept document was not written once")
            state.compacted(source, kept, seqs, words.words)
        if carried is not None:
            state.text.carry(())  # every record taken; none left for later writes
        cp.hit(P_COMPACT_WRITTEN)
        records.seal(target.last_seq)
    except BaseException:
        records.close()
        raise
    return state, records


def compact(journal: JournalBackend, view: View, text: RecordFile | None,
            ckpt: Checkpointer, state_lock: threading.RLock,
            install: Callable[[ProjectionState, RecordFile, int], RecordFile | None]
            ) -> None:
    """Rewrite the journal into a new generation holding only the live state
    (docs/guarantees.md §6): ``view`` and ``text`` (its text segment) are the old one's;
    the engine's ``install`` swaps in the new state, text segment and revision, answering
    the old text segment. The caller holds the engine's write lock and ``ckpt.lock``.

    Deleted and replaced documents, forgotten facts and their events are left
    behind. The new generation is written beside the old one, synced, and
    switched in by one rename; readers keep answering from the old state until
    that switch. Then the old generation's files are overwritten with zeros,
    synced and unlinked (every compaction, so that no freed block keeps text a
    later purge could not reach). A purge is recorded in the journal before it
    starts — by the removal's own transaction when it follows a forget — so a
    crash at any point is finished by the next open.
    """
    target = journal.begin_rewrite()
    try:
        state, new_text = rewrite(journal, target, view, text)
    except BaseException:
        target.abandon()
        raise
    # The switch and the swap happen together under the state lock: a reader
    # between them would look up the old state's sequence numbers in the new
    # generation's journal. Readers wait for one rename and a few fsyncs.
    with state_lock:
        old_dir = journal.switch(target)
        old_text = install(state, new_text, journal.last_seq)
        ckpt.seq, ckpt.tail, ckpt.written_at = 0, journal.stats().bytes, None
    if old_text is not None:
        old_text.close()
    # Every replaced generation is overwritten with zeros before it is unlinked,
    # purge or not: its journal and text segment may hold text that was removed
    # (or that a later forget removes), and freed blocks would keep it.
    journal.erase_generation(old_dir, zero=True)
    cp.hit(P_COMPACT_DONE)
