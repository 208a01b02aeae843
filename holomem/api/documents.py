"""The document engine, ``holomem.Store`` (SPEC §2): the journal wired to its projections.

Owns: opening a store (replay into every projection, reconciling the text
segment), the document calls, search with score fusion, and followers. Imports
anything; this is where the log meets the projections.

Concurrency: writers are serialised by a write lock held from validation to
apply; readers take only the state lock, which a writer holds just while it
applies an event that is already durable. So a search never waits for an fsync
and never sees a write that is not yet durable.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import numpy as np

from holomem import events as ev
from holomem.api import validate
from holomem.errors import (
    ClosedError,
    CorruptError,
    InvalidError,
    LimitError,
    ReadOnlyError,
    UnavailableError,
)
from holomem.events import (
    DocumentAdded,
    DocumentDeleted,
    DocumentReplaced,
    Event,
    FactAdded,
    FactLinks,
    FeedbackGiven,
    PurgeRequested,
    StoreSettings,
)
from holomem.log import Journal
from holomem.log import crashpoints as cp
from holomem.log.format import DEFAULT_SEGMENT_SIZE, TEXT_FILE
from holomem.log.journal import Rewrite
from holomem.log.recordfile import RecordFile
from holomem.projections.base import Change
from holomem.projections.bm25 import BM25
from holomem.projections.catalog import Catalog
from holomem.projections.embeddings import Embeddings
from holomem.projections.entities import Entities
from holomem.projections.facts import FactIndex
from holomem.projections.fusion import Fusion, fuse, top_k
from holomem.projections.hrr import HRRIndex
from holomem.projections.text import TextRecord, TextSegment
from holomem.projections.tokenize import tokenize

log = logging.getLogger("holomem")
_T = TypeVar("_T")

#: Events per transaction when compaction writes a new generation.
COMPACT_BATCH = 2048
#: How many times in a row a follower rebuilds because the writer replaced the
#: generation it was reading, before it reports the store unavailable.
FOLLOW_RETRIES = 64

#: Per thread: how deep in ``Store.reading()`` blocks it is, per store (by id), so that
#: a follower moves to a new generation only where no block of its holds the old state.
_READING = threading.local()


def _reading_depths() -> dict[int, int]:
    depths: dict[int, int] | None = getattr(_READING, "depths", None)
    if depths is None:
        depths = _READING.depths = {}
    return depths

P_COMPACT_BEGIN = cp.point("store.compact.begin", "compaction starts (a purge is recorded)")
P_COMPACT_WRITTEN = cp.point(
    "store.compact.written", "the new generation's journal is written; text segment not sealed")
P_COMPACT_DONE = cp.point("store.compact.done", "the old generation is erased")


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """A stored document as ``get_document`` returns it."""

    id: str
    text: str
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    entities: tuple[str, ...] = ()


class DocumentInput(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One document for ``add_documents``."""

    id: str
    text: str
    metadata: dict[str, Any] | None = None
    embedding: list[float] | None = None
    entities: tuple[str, ...] = ()


class Hit(msgspec.Struct, frozen=True, kw_only=True):
    """One search result. ``semantic_score`` is None when no embedding was given."""

    id: str
    score: float
    lexical_score: float
    semantic_score: float | None = None


class StoreStats(msgspec.Struct, frozen=True, kw_only=True):
    documents: int
    revision: int
    generation: int
    segments: int
    journal_bytes: int
    text_bytes: int
    index_bytes: int
    encrypted: bool
    sync: str
    read_only: bool
    #: how the last open rebuilt state: "replay" (text segment trusted) or
    #: "replay+reconcile" (the text segment was checked, and repaired if needed)
    opened_by: str
    open_seconds: float


class _State:
    """Every projection of one generation, built together and swapped as a whole."""

    def __init__(self, text_store: RecordFile | None) -> None:
        self.catalog = Catalog()
        self.text = TextSegment(text_store)
        self.bm25 = BM25(self.catalog)
        self.embeddings = Embeddings(self.catalog)
        self.entities = Entities(self.catalog)
        self.hrr = HRRIndex(self.catalog)
        self.facts = FactIndex(self.catalog)
        self.text_store = text_store
        #: A PurgeRequested event in this generation: a purge was asked for and its
        #: compaction has not switched generations yet.
        self.purge_pending = False

    def apply(self, seq: int, event: Event) -> Change:
        change = self.catalog.apply(seq, event)
        if change.new >= 0 or change.old >= 0:
            self.text.apply(seq, event, change)
            self.bm25.apply(seq, event, change)
            self.embeddings.apply(seq, event, change)
            self.entities.apply(seq, event, change)
            # The HRR index needs no call: it encodes new slots lazily.
        elif isinstance(event, StoreSettings):
            self.embeddings.apply(seq, event, change)
        self.facts.apply(seq, event, change)
        if isinstance(event, PurgeRequested):
            self.purge_pending = True
        return change

    def index_bytes(self) -> int:
        return (self.bm25.memory_bytes() + self.embeddings.memory_bytes()
                + self.hrr.memory_bytes() + self.facts.memory_bytes()
                + self.catalog.seq.nbytes + self.catalog.alive.nbytes
                + self.text.offset.nbytes + self.text.size.nbytes)


def _trim_heap() -> None:
    """Hand the heap that replay's temporaries freed back to the OS (glibc keeps it)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


def _doc_event(cls: type[DocumentAdded] | type[DocumentReplaced], doc_id: str, text: str,
               metadata: bytes, embedding: bytes, entities: tuple[str, ...]
               ) -> DocumentAdded | DocumentReplaced:
    return cls(id=doc_id, text=text, metadata=metadata, embedding=embedding, entities=entities)


class Store:
    """An embedded document store over an event-sourced journal. A context manager."""

    def __init__(self, path: str | os.PathLike[str], *, key: bytes | None = None,
                 create: bool = True, sync: str = "full", read_only: bool = False,
                 segment_size: int = DEFAULT_SEGMENT_SIZE) -> None:
        """Open (or create) the store at ``path``; see :meth:`open`."""
        t0 = time.perf_counter()
        self._journal = Journal.open(path, key=key, sync=sync, segment_size=segment_size,
                                     read_only=read_only, create=create)
        self.path = self._journal.path
        self.read_only = read_only
        self._write_lock = threading.RLock()
        self._state_lock = threading.RLock()
        self._closed = False
        self._listeners: list[Callable[[int, list[Event]], None]] = []
        self.opened_by = "replay"
        try:
            self._state, self._revision = self._build()
            if self._state.purge_pending and not read_only:
                # A purge was acknowledged but its compaction did not finish.
                log.warning("finishing an interrupted purge of %s", self.path)
                with self._write_lock:
                    self._compact()
        except BaseException:
            self._close_quietly()
            raise
        self.open_seconds = time.perf_counter() - t0

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, key: bytes | None = None,
             create: bool = True, sync: str = "full", read_only: bool = False,
             segment_size: int = DEFAULT_SEGMENT_SIZE) -> Store:
        """Open (or create) a store.

        Args:
            key: 32 raw bytes turn on AES-256-GCM encryption of everything on disk.
            create: create the store when ``path`` holds none.
            sync: ``"full"`` (fsync before every mutating call returns), ``"batch"``
                (group commit) or ``"none"`` (tests and bulk loads: NOT durable).
            read_only: a follower: never writes; call :meth:`refresh` to catch up.
            segment_size: journal segment size in bytes.

        Errors: ``invalid``, ``not_found``, ``locked``, ``key.*``, ``corrupt.*``, ``io``.
        """
        if sync == "none" and not read_only:
            log.warning("store %s opened with sync='none': writes are NOT durable", path)
        return cls(path, key=key, create=create, sync=sync, read_only=read_only,
                   segment_size=segment_size)

    # -- building state from the journal ----------------------------------------------
    def _text_store(self) -> RecordFile:
        j = self._journal
        return RecordFile(os.path.join(j.gen_dir, TEXT_FILE), store_id=j.store_id,
                          generation=j.generation, envelope=j.envelope,
                          read_only=self.read_only)

    def _build(self) -> tuple[_State, int]:
        """Replay the whole live generation into fresh projections.

        On a follower, a compaction may replace the generation while it is replayed
        (its files zeroed and unlinked: ``unavailable`` from the journal); then the
        journal moves to the live generation and the replay starts again there.
        """
        for _ in range(FOLLOW_RETRIES):
            try:
                return self._build_once()
            except UnavailableError:
                if not self.read_only or not self._journal.replaced():
                    raise
                self._journal.refresh()  # resets to the live generation
        raise UnavailableError(f"the store at {self.path!r} changed generation "
                               f"{FOLLOW_RETRIES} times while a follower rebuilt; try again")

    def _build_once(self) -> tuple[_State, int]:
        text_store = self._text_store()
        try:
            state = _State(text_store)
            state.text.deferred = True
            state.bm25.deferred = True
            # Not 0: a generation compacted from a store with nothing live holds no
            # event, yet the revision must not go back to before the events it replaced.
            last = self._journal.first_seq - 1
            for seq, payloads in self._journal.replay():
                for payload in payloads:
                    state.apply(seq, ev.decode(payload, seq=seq))
                last = seq
        except BaseException:
            text_store.close()
            raise
        state.bm25.merge()
        state.bm25.deferred = False
        # A follower never writes its text segment, not even after refresh(): it keeps
        # computing placements (the same as the writer's) and reads the writer's records.
        state.text.deferred = self.read_only
        if not self.read_only:
            self._reconcile_text(state, last)
        _trim_heap()
        return state, last

    def _reconcile_text(self, state: _State, last: int) -> None:
        store = state.text_store
        assert store is not None
        if (not store.rebuilt and store.synced_seq == last
                and store.size() == state.text.end):
            return  # sealed after the last event: trusted as is
        self.opened_by = "replay+reconcile"
        rewritten, zeroed = state.text.reconcile(
            store.read_all(), state.catalog.alive.view(), state.catalog.seq.view(),
            lambda slot: self._fetch(state, slot))
        if store.size() != state.text.end:
            # Cut stale bytes past the end, or extend with zeros when the last
            # records belong to removed documents (so the next open trusts the file).
            store.truncate(state.text.end)
        store.seal(last)
        if (rewritten or zeroed) and not store.rebuilt:
            log.warning("text segment repaired from the journal: %d records rewritten, "
                        "%d stale ranges zeroed", rewritten, zeroed)

    def _fetch(self, state: _State, slot: int) -> DocumentAdded | DocumentReplaced:
        """The event that wrote ``slot``, read back from the journal."""
        seq = int(state.catalog.seq.view()[slot])
        doc_id = state.catalog.ids[slot]
        found: DocumentAdded | DocumentReplaced | None = None
        for payload in self._journal.read(seq):
            event = ev.decode(payload, seq=seq)
            if isinstance(event, (DocumentAdded, DocumentReplaced)) and event.id == doc_id:
                found = event  # the last one: a batch may write the same id twice
        if found is None:
            raise CorruptError(f"transaction {seq} does not hold document {doc_id!r}")
        return found

    # -- properties -------------------------------------------------------------------
    @property
    def revision(self) -> int:
        """The sequence number of the last applied transaction; grows with every write."""
        return self._revision

    @property
    def generation(self) -> int:
        return self._journal.generation

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def embedding_dim(self) -> int:
        """The store's embedding dimension (0 until the first embedding)."""
        return self._state.embeddings.dim

    def _check(self, write: bool = False) -> None:
        if self._closed:
            raise ClosedError("the store is closed")
        if write and self.read_only:
            raise ReadOnlyError("the store was opened read-only")

    def __len__(self) -> int:
        return self._state.catalog.live

    # -- writing ----------------------------------------------------------------------
    def commit(self, build: Callable[[], Sequence[Event]]) -> tuple[int, list[Event]]:
        """Append the events ``build()`` returns as one transaction and apply them.

        ``build`` runs under the write lock, so it sees every earlier write and no
        later one: validation done inside it cannot race. The events are applied as
        soon as the transaction has its place in the journal, and the call returns
        once it is durable. Returns (seq, events); seq is 0 and nothing is written
        when ``build`` returns no event.
        """
        self._check(write=True)
        with self._write_lock:
            self._check(write=True)
            events = list(build())
            if not events:
                return 0, []
            payloads = [ev.encode(e) for e in events]
            seq = self._journal.enqueue(payloads)
            with self._state_lock:
                for e in events:
                    self._state.apply(seq, e)
                self._revision = seq
        # Outside the write lock: in batch mode, the writers that queued meanwhile
        # share this fsync (group commit). Readers see the change now but do not
        # return it before it is durable (see reading()).
        self._journal.wait(seq)
        for listener in list(self._listeners):
            listener(seq, events)
        return seq, events

    def add_document(self, id: str, text: str, *, metadata: Mapping[str, Any] | None = None,
                     embedding: Sequence[float] | None = None,
                     entities: Iterable[str] | None = None) -> int:
        """Store a document, replacing any document with the same id.

        Returns the revision (sequence number) that holds it. Errors: ``invalid``,
        ``limit``, ``closed``, ``read_only``, ``io``.
        """
        return self._add([(id, text, metadata, embedding, entities)])

    def add_documents(self, docs: Iterable[DocumentInput | Mapping[str, Any]]) -> int:
        """Store several documents in one atomic transaction (all or none).

        Each item is a :class:`DocumentInput` or a dict with the same fields.
        Errors: as :meth:`add_document`; nothing is written if any item is invalid.
        """
        if isinstance(docs, (str, bytes, Mapping)) or not isinstance(docs, Iterable):
            raise InvalidError("add_documents takes a list of documents")
        items: list[tuple[object, object, object, object, object]] = []
        for i, d in enumerate(docs):
            if isinstance(d, DocumentInput):
                items.append((d.id, d.text, d.metadata, d.embedding, d.entities))
            elif isinstance(d, Mapping):
                unknown = set(d) - {"id", "text", "metadata", "embedding", "entities"}
                if unknown:
                    raise InvalidError(f"document {i}: unknown fields {sorted(unknown)}")
                if "id" not in d or "text" not in d:
                    raise InvalidError(f"document {i}: 'id' and 'text' are required")
                items.append((d["id"], d["text"], d.get("metadata"), d.get("embedding"),
                              d.get("entities")))
            else:
                raise InvalidError(f"document {i}: expected a DocumentInput or a dict")
            if len(items) > validate.MAX_BATCH:
                raise LimitError(f"more than {validate.MAX_BATCH} documents in one call")
        if not items:
            raise InvalidError("add_documents needs at least one document")
        return self._add(items)

    def _add(self, items: Sequence[tuple[object, object, object, object, object]]) -> int:
        checked = []
        dim = self.embedding_dim
        for doc_id, text, metadata, embedding, entities in items:
            emb = validate.embedding(embedding, dim)
            if emb and not dim:
                dim = len(emb) // 4
            checked.append((validate.doc_id(doc_id), validate.text(text),
                            validate.metadata(metadata), emb, validate.entities(entities)))

        def build() -> list[Event]:
            seen = set()
            out: list[Event] = []
            for doc_id, text, metadata, emb, ents in checked:
                exists = doc_id in seen or doc_id in self._state.catalog
                seen.add(doc_id)
                cls = DocumentReplaced if exists else DocumentAdded
                out.append(_doc_event(cls, doc_id, text, metadata, emb, ents))
            if self.embedding_dim and any(
                    e.embedding and len(e.embedding) // 4 != self.embedding_dim
                    for e in out if isinstance(e, (DocumentAdded, DocumentReplaced))):
                raise InvalidError(f"embedding dimension differs from the store's "
                                   f"({self.embedding_dim})")
            return out

        seq, _ = self.commit(build)
        return seq

    def delete_document(self, id: str, *, purge: bool = False) -> bool:
        """Remove a document; its text record is zeroed and synced before this returns.

        Returns False (and writes nothing) if there was no such document.
        With ``purge`` the journal is then compacted so no file holds its text
        (see :meth:`compact`). Errors: ``invalid``, ``closed``, ``read_only``, ``io``.
        """
        doc_id = validate.doc_id(id)

        def build() -> list[Event]:
            if doc_id not in self._state.catalog:
                return []
            return [DocumentDeleted(id=doc_id), *(self.purge_request() if purge else ())]

        seq, _ = self.commit(build)
        if seq:
            self.sync_text()
        if purge:
            self.compact(purge=True)
        return bool(seq)

    def sync_text(self) -> None:
        """Sync the live text segment (zeroed records reach the disk).

        The text segment is looked up under the write lock: a compaction that ran
        since the caller's commit has switched generations and closed the old file
        (after overwriting it with zeros and syncing it), so the live one is the only
        one left to sync. After close, :meth:`close` has sealed it already.
        """
        if self.read_only:
            return
        with self._write_lock:
            store = self._state.text_store
            if store is not None and not self._closed:
                store.sync()

    def purge_request(self) -> list[Event]:
        """The event that records a purge request, for a ``commit`` build to add to the
        removal it belongs with (empty when a purge is already pending). Call it
        inside the build, under the write lock.

        Recorded in the removal's own transaction, the request survives every crash
        that the removal survives, so the next open finishes the purge.
        """
        return [] if self._state.purge_pending else [PurgeRequested()]

    def compact(self, *, purge: bool = False) -> None:
        """Rewrite the journal into a new generation holding only the live state (SPEC §6).

        Deleted and replaced documents, forgotten facts and their events are left
        behind. The new generation is written beside the old one, synced, and
        switched in by one rename; readers keep answering from the old state until
        that switch. Then the old generation's files are overwritten with zeros,
        synced and unlinked (every compaction, so that no freed block keeps text a
        later purge could not reach). A purge is recorded in the journal before it
        starts — by the removal's own transaction when it follows a forget — so a
        crash at any point is finished by the next open.
        Errors: ``closed``, ``read_only``, ``io``.
        """
        self._check(write=True)
        with self._write_lock:
            self._check(write=True)
            if purge:
                self.commit(self.purge_request)
            cp.hit(P_COMPACT_BEGIN)
            self._compact()

    def _compact(self) -> None:
        rewrite = self._journal.begin_rewrite()
        try:
            state = self._rewrite(rewrite)
        except BaseException:
            rewrite.abandon()
            raise
        # The switch and the swap happen together under the state lock: a reader
        # between them would look up the old state's sequence numbers in the new
        # generation's journal. Readers wait for one rename and a few fsyncs.
        with self._state_lock:
            old_dir = self._journal.switch(rewrite)
            old, self._state = self._state, state
            self._revision = self._journal.last_seq
        if old.text_store is not None:
            old.text_store.close()
        # Every replaced generation is overwritten with zeros before it is unlinked,
        # purge or not: its journal and text segment may hold text that was removed
        # (or that a later forget removes), and freed blocks would keep it.
        self._journal.erase_generation(old_dir, zero=True)
        cp.hit(P_COMPACT_DONE)

    def _rewrite(self, rewrite: Rewrite) -> _State:
        """Write the live state into ``rewrite`` and build its projections as we go."""
        j = self._journal
        text_store = RecordFile(rewrite.derived_path(TEXT_FILE), store_id=j.store_id,
                                generation=rewrite.generation, envelope=j.envelope,
                                read_only=False)
        state = _State(text_store)
        state.bm25.deferred = True
        state.text.start_buffer()
        old = self._state
        batch: list[Event] = []
        if old.embeddings.dim:
            batch.append(StoreSettings(embedding_dim=old.embeddings.dim))

        def flush() -> None:
            if batch:
                seq = rewrite.append([ev.encode(e) for e in batch])
                for e in batch:
                    state.apply(seq, e)
                state.text.flush()
                batch.clear()

        for slot in np.flatnonzero(old.catalog.alive.view()):
            batch.extend(self._live_events(old, int(slot)))
            if len(batch) >= COMPACT_BATCH:
                flush()
        links = old.facts.all_links()
        if links:
            batch.append(FactLinks(links=tuple(links)))
        flush()
        state.bm25.merge()
        state.bm25.deferred = False
        state.text.buffer = None
        cp.hit(P_COMPACT_WRITTEN)
        text_store.seal(rewrite.last_seq)
        return state

    def _live_events(self, st: _State, slot: int) -> list[Event]:
        """Events that re-create the document (and fact) in ``slot`` as it is now."""
        rec = self._record(st, slot)
        # The caller's vector as written, not the unit vector the projection holds:
        # normalising that again on replay would move it by an ulp per compaction.
        emb = self._fetch(st, slot).embedding if st.embeddings.vector(slot) is not None else b""
        out: list[Event] = [DocumentAdded(
            id=rec.id, text=rec.text, metadata=rec.metadata, embedding=emb,
            entities=rec.entities)]
        facts = st.facts
        if facts.is_fact[slot]:
            t = facts.times(slot)
            out.append(FactAdded(
                id=rec.id, ingest_time=t.ingest_time, subject=t.subject,
                event_time=t.event_time, valid_from=t.valid_from, valid_to=t.valid_to,
                requested=facts.requested.get(rec.id, ()), digest=t.digest,
                confidence=facts.confidence.get(rec.id)))
            out.extend(FeedbackGiven(id=rec.id, helpful=h, time=tm, note=n)
                       for h, tm, n in facts.feedback.get(rec.id, ()))
        return out

    # -- reading ----------------------------------------------------------------------
    def has_document(self, id: str) -> bool:
        doc_id = validate.doc_id(id)
        with self.reading() as state:
            return doc_id in state.catalog

    def get_document(self, id: str) -> Document | None:
        """The document stored under ``id``, or None.

        Errors: ``invalid``, ``closed``, ``corrupt``.
        """
        doc_id = validate.doc_id(id)
        return self._following(lambda: self._get_document(doc_id))

    def _following(self, read: Callable[[], _T]) -> _T:
        """``read()``; on a follower, again if the writer replaced (and zeroed) the
        generation it was answering from (``unavailable``): the next reading block
        answers from the new one."""
        for _ in range(FOLLOW_RETRIES if self.read_only else 0):
            try:
                return read()
            except UnavailableError:
                continue
        return read()

    def _get_document(self, doc_id: str) -> Document | None:
        with self.reading() as state:
            slot = state.catalog.slot(doc_id)
            if slot < 0:
                return None
            vector = state.embeddings.vector(slot)
            rec = self._record(state, slot)
        return Document(id=doc_id, text=rec.text, metadata=validate.load_metadata(rec.metadata),
                        embedding=vector.tolist() if vector is not None else None,
                        entities=rec.entities)

    def _record(self, state: _State, slot: int) -> TextRecord:
        """The text record of ``slot``, from the text segment or, failing that, the journal.

        A record that does not read back intact is rewritten (writer only). On a
        follower, ``state`` may be of a generation the writer has replaced since the
        block began: its files stay readable (the follower keeps them open) unless the
        writer zeroed them, and then the read is ``unavailable`` (never ``corrupt``);
        the next :meth:`reading` block answers from the new generation.
        """
        seq = int(state.catalog.seq.view()[slot])
        rec = state.text.read(slot, seq)
        if rec is not None and rec.id == state.catalog.ids[slot]:
            return rec
        event = self._fetch(state, slot)
        # Heal the record, unless a writer is busy: a reader may hold the state lock
        # here, and waiting for the write lock would invert the writers' lock order.
        if not self.read_only and self._write_lock.acquire(blocking=False):
            try:
                with self._state_lock:
                    if state is self._state and state.catalog.alive.view()[slot]:
                        state.text.rewrite(slot, seq, event)
            finally:
                self._write_lock.release()
        return TextRecord(event.id, event.text, event.metadata, event.entities)

    def _hrr_ready(self, state: _State) -> HRRIndex:
        """The HRR index with every document encoded (encodes lazily, once)."""
        if state.hrr.stale:
            def source(slots: Sequence[int]) -> list[tuple[str, tuple[str, ...]]]:
                recs = [self._record(state, s) for s in slots]
                return [(r.text, r.entities) for r in recs]
            with self._state_lock:
                state.hrr.ensure(source)
        return state.hrr

    def similar_documents(self, text: str, k: int = 10, *,
                          ids: Iterable[str] | None = None) -> list[Hit]:
        """Documents whose HRR content vector is most similar to ``text``'s, best first.

        Word order counts (see :mod:`holomem.projections.hrr`). ``score`` is the cosine;
        ``lexical_score`` is 0. Errors: ``invalid``, ``closed``.
        """
        self._check()
        q = validate.query(text)
        k = validate.positive_int(k, "k", validate.MAX_K)
        wanted = validate.id_list(ids, "ids", validate.MAX_IDS) if ids is not None else None
        with self.reading() as state:
            index = self._hrr_ready(state)
            slots, scores = index.similar(tokenize(q), self._allowed(state, wanted))
            order = top_k(slots, scores, k)
            return [Hit(id=state.catalog.ids[int(slots[i])] or "", score=float(scores[i]),
                        lexical_score=0.0) for i in order]

    def search_documents(self, query: str, k: int = 10, *,
                         embedding: Sequence[float] | None = None,
                         ids: Iterable[str] | None = None) -> list[Hit]:
        """The ``k`` best documents for ``query``, best first (SPEC §2).

        Lexical scoring is BM25 (k1 = 1.2, b = 0.4). With ``embedding``, cosine
        similarity is fused in (see :mod:`holomem.projections.fusion`). ``ids``
        restricts the search to those documents. Ties are broken by the order in
        which the documents were written. Errors: ``invalid``, ``closed``.
        """
        self._check()
        q = validate.query(query)
        k = validate.positive_int(k, "k", validate.MAX_K)
        emb = validate.embedding(embedding, self.embedding_dim) if embedding is not None else b""
        if emb and not self.embedding_dim:
            emb = b""  # no document has an embedding: cosine has nothing to compare
        wanted = validate.id_list(ids, "ids", validate.MAX_IDS) if ids is not None else None
        with self.reading() as state:
            return self._search(state, q, k, emb, wanted)

    def _allowed(self, state: _State, ids: list[str] | None) -> np.ndarray | None:
        if ids is None:
            return None
        mask = np.zeros(state.catalog.slots, dtype=bool)
        for doc_id in ids:
            slot = state.catalog.slot(doc_id)
            if slot >= 0:
                mask[slot] = True
        return mask

    def _search(self, state: _State, q: str, k: int, emb: bytes,
                ids: list[str] | None) -> list[Hit]:
        fused = self._fused(state, q, emb, ids)
        order = top_k(fused.slots, fused.score, k)
        return [
            Hit(id=state.catalog.ids[int(fused.slots[i])] or "", score=float(fused.score[i]),
                lexical_score=float(fused.lexical[i]),
                semantic_score=float(fused.semantic[i]) if fused.semantic is not None else None)
            for i in order
        ]

    def _fused(self, state: _State, q: str, emb: bytes, ids: list[str] | None) -> Fusion:
        allowed = self._allowed(state, ids)
        lex = state.bm25.score(q, allowed)
        sem = None
        if emb:
            sem = state.embeddings.cosine(np.frombuffer(emb, dtype="<f4"), allowed)
        return fuse(lex, sem)

    @contextlib.contextmanager
    def reading(self) -> Iterator[_State]:
        """The current projections, held still (no write applies) for the block.

        On leaving, it waits until every write the block could see is durable (at
        most one group commit), so no answer ever reflects a write that a crash could
        still take back; if that write's fsync fails, the read fails too.

        On a follower, a block first checks whether the writer has switched to a new
        generation (a compaction or purge); if so it rebuilds from that one, as
        :meth:`refresh` does, and answers from it. (Not inside another block of the
        same thread, which still holds the old state.)
        """
        self._check()
        depths = _reading_depths()
        key = id(self)
        if self.read_only and not depths.get(key) and self._journal.replaced():
            self.refresh()
        with self._state_lock:
            depths[key] = depths.get(key, 0) + 1
            try:
                revision = self._revision
                yield self._state
            finally:
                depths[key] -= 1
                if not depths[key]:
                    del depths[key]
        if revision > self._journal.durable_seq:
            self._journal.wait(revision)

    def ids_with_entity(self, entity: str) -> list[str]:
        """Ids of live documents that carry ``entity`` exactly, in write order."""
        with self.reading() as state:
            return [state.catalog.ids[int(s)] or "" for s in state.entities.slots(entity)]

    def ids(self) -> list[str]:
        """Ids of every live document, in write order."""
        with self.reading() as state:
            return state.catalog.live_ids()

    def events(self, from_seq: int = 0) -> Iterator[tuple[int, list[Event]]]:
        """Decoded transactions from ``from_seq`` up to the current revision."""
        self._check()
        last = self._revision
        for seq, payloads in self._journal.replay(from_seq):
            if seq > last:
                break
            yield seq, [ev.decode(p, seq=seq) for p in payloads]

    def subscribe(self, listener: Callable[[int, list[Event]], None]) -> None:
        """Call ``listener(seq, events)`` after every committed transaction (writer only)."""
        self._listeners.append(listener)

    # -- followers ----------------------------------------------------------------------
    def refresh(self) -> int:
        """Follower only: apply the writer's new transactions; return the new revision.

        If the writer switched to a new generation (compaction, purge), the follower
        rebuilds from it, and readers keep answering from the old state until the new
        one is complete. Errors: ``closed``, ``corrupt``, ``io``, ``unavailable`` (the
        generation kept being replaced while it was read; try again).
        """
        self._check()
        if not self.read_only:
            return self._revision
        with self._write_lock:
            self._check()
            result = self._journal.refresh()
            if not result.reset:
                try:
                    for seq, payloads in self._journal.replay(result.from_seq):
                        events = [ev.decode(p, seq=seq) for p in payloads]
                        with self._state_lock:
                            for e in events:
                                self._state.apply(seq, e)
                            self._revision = seq
                    return self._revision
                except UnavailableError:
                    # Replaced while being read: what was applied is a true prefix;
                    # rebuild from the live generation instead.
                    if not self._journal.replaced():
                        raise
                    self._journal.refresh()
            state, last = self._build()
            with self._state_lock:
                old, self._state, self._revision = self._state, state, last
            # No reader holds the old state now (each holds the state lock for its
            # block): the generations it was read from can go.
            self._journal.release_retired()
            if old.text_store is not None:
                old.text_store.close()
            return last

    # -- housekeeping -----------------------------------------------------------------
    def stats(self) -> StoreStats:
        self._check()
        js = self._journal.stats()
        state = self._state
        return StoreStats(
            documents=state.catalog.live, revision=self._revision, generation=js.generation,
            segments=js.segments, journal_bytes=js.bytes,
            text_bytes=state.text_store.size() if state.text_store is not None else 0,
            index_bytes=state.index_bytes(), encrypted=js.encrypted, sync=js.sync,
            read_only=self.read_only, opened_by=self.opened_by,
            open_seconds=round(self.open_seconds, 6))

    def sync(self) -> None:
        """Make every write durable (needed only with sync="none")."""
        self._check()
        with self._write_lock:
            self._journal.sync()
            store = self._state.text_store
            if store is not None and not self.read_only:
                store.sync()

    def _close_quietly(self) -> None:
        store = getattr(self, "_state", None)
        if store is not None and store.text_store is not None:
            store.text_store.close()
        self._journal.close()

    def close(self) -> None:
        """Sync and close. Idempotent."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            try:
                store = self._state.text_store
                if store is not None:
                    if not self.read_only and self._journal.failed is None:
                        self._journal.sync()
                        store.seal(self._revision)
                    store.close()
            finally:
                self._journal.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
