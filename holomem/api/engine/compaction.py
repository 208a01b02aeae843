"""Compaction: the live state rewritten into a new generation (docs/guarantees.md §6).

Owns: the events that re-create every live document and fact as it is now
(:func:`live_events`), and the writing of them into a new generation with its
projections built alongside (:func:`rewrite`). The switch of generations and the
erasure of the old one are the store's (``Store.compact``): they need its locks.
Imports the log, the projections and the engine's view.
"""

from __future__ import annotations

import numpy as np

from holomem import events as ev
from holomem.api.engine.replay import text_file
from holomem.api.engine.view import View
from holomem.events import (
    ConfigRecorded,
    DocumentAdded,
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
from holomem.projections.state import ProjectionState
from holomem.projections.text import Carried

#: Events per transaction when compaction writes a new generation.
BATCH = 2048
#: Live documents whose records are read (and events made) at a time.
SLOTS = 1024

P_COMPACT_BEGIN = cp.point("store.compact.begin", "compaction starts (a purge is recorded)")
P_COMPACT_WRITTEN = cp.point(
    "store.compact.written", "the new generation's journal is written; text segment not sealed")
P_COMPACT_DONE = cp.point("store.compact.done", "the old generation is erased")


def live_events(view: View, slots: np.ndarray,
                carried: list[Carried | None] | None = None) -> list[list[Event]]:
    """For each of ``slots`` (ascending), the events that re-create its document (and
    fact) as it is now: the records read in a few large reads, the facts' times a
    column at a time. With ``carried``, each record's bytes and body as read are
    appended to it, in the same order (see :meth:`View.records`)."""
    records = view.records(slots, carried)
    facts = view.facts
    is_fact = facts.is_fact.view()[slots]
    times = iter(facts.times_many(slots[is_fact]))
    out: list[list[Event]] = []
    for slot, rec, fact in zip(slots.tolist(), records, is_fact.tolist(), strict=True):
        events: list[Event] = [DocumentAdded(
            id=rec.id, text=rec.text, metadata=rec.metadata,
            embedding=view.vector_as_written(slot), entities=rec.entities)]
        out.append(events)
        if fact:
            t = next(times)
            events.append(FactAdded(
                id=rec.id, ingest_time=t.ingest_time, subject=t.subject,
                event_time=t.event_time, valid_from=t.valid_from, valid_to=t.valid_to,
                requested=facts.requested.get(rec.id, ()), digest=t.digest,
                confidence=facts.confidence.get(rec.id), namespace=facts.namespace(slot),
                ttl_ms=t.ttl_ms))
            events.extend(FeedbackGiven(id=rec.id, helpful=h, time=tm, note=n)
                       for h, tm, n in facts.feedback.get(rec.id, ()))
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


def rewrite(journal: JournalBackend, target: RewriteTarget, view: View,
            old: RecordFile | None) -> tuple[ProjectionState, RecordFile]:
    """Write the live state of ``view`` into ``target``, building its projections as we
    go; the new text segment is written sequentially and sealed.

    When the text segment ``old`` it replaces is a version 2 file (FORMAT.md §9.1),
    the new one keeps its salt, and every record that reads back intact from ``old``
    is copied into it as it is, rather than encoded (and sealed) again: in a version 2
    file a record is bound to neither its offset nor its sequence number.
    """
    carry = old is not None and old.available and old.version == 2
    records = text_file(journal, target.dir, target.generation, read_only=False,
                        salt=old.salt if carry and old is not None else None)
    carry = carry and old is not None and records.carries(old)
    state = ProjectionState(records)
    #: the records read for the documents of ``batch``, in order (None: no carry)
    carried: list[Carried | None] | None = [] if carry else None
    batch: list[Event] = []
    if view.embedding_dim:
        batch.append(StoreSettings(embedding_dim=view.embedding_dim))
    source = view.state
    if source.memory_config is not None:
        batch.append(ConfigRecorded(config=source.memory_config))
    if source.embedder is not None:
        batch.append(EmbedderRecorded(identity=source.embedder))
    if source.reembed_target is not None:
        # The vectors go over as they are; the re-embed starts over in the new
        # generation (rewriting a vector twice gives the same vector).
        batch.append(EmbedderRecorded(identity=source.reembed_target, pending=True))

    def flush() -> None:
        nonlocal carried
        if batch:
            seq = target.append([ev.encode(e) for e in batch])
            if carried is not None:
                state.text.carry(carried)  # one per DocumentAdded of the batch
                carried = []
            state.apply_all(seq, batch)
            state.flush()
            batch.clear()

    try:
        with state.rewriting():
            slots = view.live_slots()
            for start in range(0, len(slots), SLOTS):
                read: list[Carried | None] | None = [] if carried is not None else None
                chunk = live_events(view, slots[start:start + SLOTS], read)
                for k, events in enumerate(chunk):
                    batch.extend(events)  # a document's events stay in one transaction
                    if carried is not None and read is not None:
                        carried.append(read[k])
                    if len(batch) >= BATCH:
                        flush()
            links = view.facts.all_links()
            if links:
                batch.append(FactLinks(links=tuple(links)))
            for event in live_relations(view):
                batch.append(event)
                if len(batch) >= BATCH:
                    flush()
            flush()
        if carried is not None:
            state.text.carry(())  # every record taken; none left for later writes
        cp.hit(P_COMPACT_WRITTEN)
        records.seal(target.last_seq)
    except BaseException:
        records.close()
        raise
    return state, records

