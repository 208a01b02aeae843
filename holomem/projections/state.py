"""Every projection of one generation, built together and swapped as a whole.

Owns: :class:`ProjectionState` — the catalog, text segment, BM25 postings,
embeddings, entity postings, HRR index, fact index and relations of one generation, the one
``apply`` that feeds an event to each of them in order, the bulk mode in which a
replay batches their work, and the state of a compacted generation renumbered from
the old one's (:meth:`ProjectionState.compacted`). Imports the
other projections and :mod:`holomem.events`; the text segment's file comes in
as a :class:`~holomem.projections.base.RecordStore`, so nothing here opens a path.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Iterator, Sequence
from operator import attrgetter
from typing import cast

import numpy as np

from holomem.events import (
    ConfigRecorded,
    DocumentAdded,
    EmbedderRecorded,
    Event,
    FactAdded,
    PurgeRequested,
    StoreSettings,
    VectorsSet,
)
from holomem.projections import bulkfacts, compactfacts
from holomem.projections.base import (
    Change,
    Kept,
    RecordStore,
    Snapshot,
    compaction_check,
    gc_paused,
)
from holomem.projections.bm25 import BM25
from holomem.projections.candidates import Candidates
from holomem.projections.catalog import Catalog
from holomem.projections.embeddings import Embeddings
from holomem.projections.entities import Entities
from holomem.projections.facts import FactIndex
from holomem.projections.hrr import HRRIndex
from holomem.projections.metadata import MetadataIndex
from holomem.projections.relations import Relations
from holomem.projections.text import TextSegment

#: A run of at least this many new documents in one transaction takes the bulk path.
BULK_MIN = 8


_ID = attrgetter("id")
_ENTITIES = attrgetter("entities")


class ProjectionState:
    """The projections of one generation. ``records`` is the text segment's file
    (None: none); ``writes_text=False`` for a follower, which reads the writer's."""

    def __init__(self, records: RecordStore | None, *, writes_text: bool = True) -> None:
        self.catalog = Catalog()
        self.text = TextSegment(records, writes=writes_text)
        self.bm25 = BM25(self.catalog)
        self.embeddings = Embeddings(self.catalog)
        self.entities = Entities(self.catalog)
        self.hrr = HRRIndex(self.catalog)
        self.facts = FactIndex(self.catalog)
        self.metadata = MetadataIndex(self.catalog)
        self.relations = Relations(self.catalog)
        #: Contradiction candidates: built by the first contradict, never checkpointed.
        self.candidates = Candidates(self.catalog, self.facts, self.entities)
        #: A PurgeRequested event in this generation: a purge was asked for and its
        #: compaction has not switched generations yet.
        self.purge_pending = False
        #: The memory configuration last recorded (ConfigRecorded), or None.
        self.memory_config: bytes | None = None
        #: The identity (canonical JSON) of the embedder whose vectors the store
        #: holds, or None; a re-embed under way: its target, and the slots below
        #: ``reembed_cursor`` it has rewritten so far.
        self.embedder: bytes | None = None
        self.reembed_target: bytes | None = None
        self.reembed_cursor = 0

    def apply(self, seq: int, event: Event) -> Change:
        change = self.catalog.apply(seq, event)
        if change.new >= 0 or change.old >= 0:
            self.text.apply(seq, event, change)
            self.bm25.apply(seq, event, change)
            self.embeddings.apply(seq, event, change)
            self.entities.apply(seq, event, change)
            self.metadata.apply(seq, event, change)
            self.candidates.apply(event, change)
            # The HRR index needs no call: it encodes new slots lazily.
        elif isinstance(event, (StoreSettings, VectorsSet)):
            self.embeddings.apply(seq, event, change)
            if isinstance(event, VectorsSet) and self.reembed_target is not None:
                slots = [self.catalog.slot(i) for i in event.ids]
                self.reembed_cursor = max([self.reembed_cursor, *(s + 1 for s in slots)])
        self.facts.apply(seq, event, change)
        self.relations.apply(event, change)
        if isinstance(event, PurgeRequested):
            self.purge_pending = True
        elif isinstance(event, ConfigRecorded):
            self.memory_config = event.config
        elif isinstance(event, EmbedderRecorded):
            if event.pending:
                self.reembed_target, self.reembed_cursor = event.identity, 0
            else:
                self.embedder, self.reembed_target = event.identity, None
        return change

    def apply_all(self, seq: int, events: Sequence[Event]) -> None:
        """Apply the events of one transaction in order: the same state as
        :meth:`apply` on each of them.

        A run of documents with new ids (each followed, or not, by its fact's
        FactAdded) — what ``remember_many`` and ``add_documents`` write — goes
        through the projections' bulk paths, a column at a time rather than an
        event at a time.
        """
        i, n = 0, len(events)
        while i < n:
            end, docs, ids, facts = self._new_documents(events, i)
            if len(docs) >= BULK_MIN:
                self._add_run(seq, docs, ids, facts)
                i = end
                continue
            stop = max(end, i + 1)
            while i < stop:
                self.apply(seq, events[i])
                i += 1

    def _new_documents(self, events: Sequence[Event], i: int
                       ) -> tuple[int, list[DocumentAdded], list[str],
                                  tuple[Sequence[int], list[FactAdded]]]:
        """The longest run from ``i`` of DocumentAdded events whose ids are neither
        live nor earlier in the run, each optionally followed by its own FactAdded:
        (where the run ends, its documents, their ids, (the indexes of the documents
        that have a fact, ascending; their facts))."""
        docs: list[DocumentAdded] = []
        ids: list[str] | None = None
        with_fact: list[int] = []
        es: list[FactAdded] = []
        found: list[int] = []  # the index of each document's event
        ks: Sequence[int] = with_fact
        starts: Sequence[int] = found
        n = len(events)
        if i == 0 and n >= 2 and n % 2 == 0:
            # What remember_many writes: each document followed by its fact; seen
            # without a Python step per event.
            evens, odds = events[0::2], events[1::2]
            if set(map(type, evens)) == {DocumentAdded} and set(map(type, odds)) == {FactAdded}:
                docs = cast("list[DocumentAdded]", list(evens))
                pairs = cast("list[FactAdded]", list(odds))
                ids = list(map(_ID, docs))
                if ids == list(map(_ID, pairs)):
                    ks, es = range(len(pairs)), pairs
                    starts = range(0, n, 2)
                    i = n
                else:
                    docs, ids = [], None
        while i < n:
            e = events[i]
            if type(e) is not DocumentAdded:
                break
            found.append(i)
            docs.append(e)
            i += 1
            if i < n:
                f = events[i]
                if type(f) is FactAdded and f.id == e.id:
                    with_fact.append(len(docs) - 1)
                    es.append(f)
                    i += 1
        if ids is None:
            ids = list(map(_ID, docs))
        if len(set(ids)) == len(ids) and self.catalog.none_live(ids):
            return i, docs, ids, (ks, es)
        # Rare: the run ends before the first id that is live or repeated.
        seen: set[str] = set()
        for m, doc_id in enumerate(ids):
            if doc_id in seen or doc_id in self.catalog:
                cut = bisect.bisect_left(ks, m)  # (ks ascend)
                return starts[m], docs[:m], ids[:m], (ks[:cut], es[:cut])
            seen.add(doc_id)
        raise AssertionError("unreachable")

    def _add_run(self, seq: int, docs: list[DocumentAdded], ids: list[str],
                 facts: tuple[Sequence[int], list[FactAdded]]) -> None:
        first = self.catalog.add_run(seq, ids)
        self.text.add_run(seq, docs, first)
        self.bm25.add_run(docs, first)
        self.embeddings.add_run(seq, docs, first)
        if any(map(_ENTITIES, docs)):
            for k, d in enumerate(docs):
                if d.entities:
                    self.entities.apply(seq, d, Change(first + k, -1))
                    self.candidates.note(first + k, d.entities)
        self.metadata.add_run(seq, docs, first)
        bulkfacts.add_run(self.facts, first, len(docs), *facts)

    @contextlib.contextmanager
    def replaying(self) -> Iterator[None]:
        """Replay mode: text placements are computed but not written (the caller
        reconciles the file once afterwards), and BM25 merges once, at the end."""
        with self.text.placing_only(), self.bm25.bulk(), self.relations.bulk():
            yield

    def flush(self) -> None:
        """Write the text records collected so far (inside ``text.buffered()``)."""
        self.text.flush()

    # -- compaction -------------------------------------------------------------------
    def compacted(self, old: ProjectionState, kept: Kept, seqs: np.ndarray,
                  words: Sequence[str]) -> None:
        """Fill this fresh state with the documents ``kept`` of ``old``: exactly what a
        replay of the journal a compaction wrote builds (tests/purge/test_purged_state.py
        compares the two attribute by attribute), from ``old``'s projections instead of
        every event applied again. ``seqs``: the transaction that wrote each kept
        document's events; ``words``: their distinct words in first-occurrence order
        (see :meth:`BM25.compacted`). The text placements and the entities come first,
        from the records the compaction writes (:meth:`TextSegment.place`,
        :meth:`Entities.add_lists`); the HRR and metadata indexes are built on use, as
        after a replay; the contradiction candidates are not built."""
        n = len(kept.slots)
        # The records are placed (one per kept document), nothing else is filled yet.
        assert len(self.text.offset) == n and not self.catalog.slots
        self.catalog.compacted(old.catalog, kept, seqs)
        self.bm25.compacted(old.bm25, kept, words)
        self.embeddings.compacted(old.embeddings, kept)
        compactfacts.compacted(self.facts, old.facts, kept)
        self.relations.compacted(old.relations, kept)
        # The journal records the configuration and embedder again; a re-embed under
        # way starts over (nothing in the new generation was re-embedded yet).
        self.memory_config, self.embedder = old.memory_config, old.embedder
        self.reembed_target = old.reembed_target
        # Every per-slot projection covers the same slots (restore() checks the same).
        compaction_check(len(self.text.offset) == len(self.bm25.postings.doclen)
                         == len(self.embeddings.has) == len(self.facts.is_fact)
                         == self.catalog.slots == n,
                         "the projections do not cover the same kept slots")

    # -- checkpoints ------------------------------------------------------------------
    #: The projections a checkpoint holds, in the order they are restored.
    PARTS = ("catalog", "text", "bm25", "embeddings", "entities", "hrr", "facts", "metadata",
             "relations")

    def snapshot(self) -> dict[str, Snapshot]:
        """Every projection's state, cheaply (see :data:`~holomem.projections.base.Snapshot`);
        the caller holds the state lock, so no event is applied halfway."""
        with gc_paused():
            parts: dict[str, Snapshot] = {name: getattr(self, name).snapshot()
                                          for name in self.PARTS}
        parts["state"] = {"purge_pending": self.purge_pending, "memory_config": self.memory_config,
                          "embedder": self.embedder, "reembed_target": self.reembed_target,
                          "reembed_cursor": self.reembed_cursor}
        return parts

    def restore(self, parts: dict[str, Snapshot]) -> None:
        """Fill this fresh state from :meth:`snapshot`'s parts. ``ValueError`` (or a
        ``KeyError`` / ``TypeError``) when they do not fit together."""
        with gc_paused():
            for name in self.PARTS:
                getattr(self, name).restore(parts[name])
        slots = self.catalog.slots
        if not (len(self.text.offset) == len(self.bm25.postings.doclen)
                == len(self.embeddings.has) == len(self.facts.is_fact) == slots):
            raise ValueError("projections of different lengths")
        st = parts["state"]
        self.purge_pending = bool(st["purge_pending"])
        self.memory_config, self.embedder = st["memory_config"], st["embedder"]
        self.reembed_target, self.reembed_cursor = st["reembed_target"], int(st["reembed_cursor"])

    def stop_background(self) -> None:
        """Stop the work these projections run on threads of their own (a build of the
        approximate vector index): the store closes, or a new generation replaces them."""
        self.embeddings.stop_index()

    def index_bytes(self) -> int:
        """Resident bytes of the in-memory indexes (an estimate for ``stats()``)."""
        return (self.bm25.memory_bytes() + self.embeddings.memory_bytes()
                + self.hrr.memory_bytes() + self.facts.memory_bytes()
                + self.metadata.memory_bytes() + self.relations.memory_bytes()
                + self.candidates.memory_bytes()
                + self.catalog.seq.nbytes + self.catalog.alive.nbytes
                + self.text.offset.nbytes + self.text.size.nbytes)
