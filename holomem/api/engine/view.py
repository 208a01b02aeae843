"""The engine's read handle: the projections of one revision, and the records behind them.

Owns: :class:`View` — the only way the memory API reads the engine: the
projections (catalog, fact index, postings, embeddings, entities, HRR), the text
record of a slot (from the text segment or, failing that, the journal), scored
search, and the id restrictions of the filtered path; and :class:`ReaderWrites`, the
engine's side of what a view may change while it is read (a record healed, an index
built lazily), under the engine's locks. Imports the log (to read a transaction
back), the projections and :mod:`holomem.api.engine.validate`.

A view is handed out by ``Store.reading()`` (readers) and to the ``build`` of
``Store.commit`` (under the write lock): it stays valid for that block only.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

import numpy as np

from holomem import events as ev
from holomem.api.engine.types import Hit
from holomem.errors import CorruptError
from holomem.events import DocumentAdded, DocumentReplaced, Event, PurgeRequested, VectorsSet
from holomem.log.backend import JournalBackend
from holomem.projections.bm25 import BM25
from holomem.projections.candidates import Candidates, Scorer
from holomem.projections.catalog import Catalog
from holomem.projections.embeddings import OVERSAMPLE, Embeddings, unit
from holomem.projections.entities import Entities
from holomem.projections.facts import FactIndex
from holomem.projections.fusion import (
    DEFAULT_FUSION,
    Fusion,
    FusionParams,
    aligned,
    fuse,
    scored,
    top_k,
)
from holomem.projections.hrr import HRRIndex
from holomem.projections.metadata import MetadataIndex
from holomem.projections.relations import Relations
from holomem.projections.state import ProjectionState
from holomem.projections.text import Carried, TextRecord
from holomem.projections.tokenize import tokenize

DocEvent = DocumentAdded | DocumentReplaced
#: Records a view keeps once read (then it forgets them all and starts again), and
#: the largest it keeps (text and metadata bytes): at most ~0.5 MiB held.
RECORDS_KEPT = 32
RECORD_KEPT_BYTES = 16 * 1024
#: The approximate path's first lexical depth: BM25's best this many (or every match)
#: are candidates, so that the bound on a document outside them is usually low enough
#: at once (their cosines are one small gather).
LEXICAL_FIRST = 256
#: And the index's first depth: its nearest this many (the index explores about as many
#: whatever it is asked for: vectorindex.EXPANSION_SEARCH), so that the cosine it leaves
#: to a document outside them is usually low enough to leave most lexical candidates
#: unscored (:meth:`View._candidates`).
SEMANTIC_FIRST = 32
#: Of the lexical candidates outside the index's list, the BM25 best this many (or the
#: depth, when more) are scored first: with the index's list they set the score the
#: others must be able to reach to be scored at all.
LEXICAL_SCORED_FIRST = 64
#: The worst cosine the index proposed is an estimate of where the vectors it left out
#: lie, not a bound (it compares 8-bit copies, and a graph search passes over some
#: nearer vectors): a lexical candidate is left unscored only if it stays below the k-th
#: score with this much more cosine than that worst one.
FLOOR_MARGIN = 0.05
#: A query with at least its depth and at most this many lexical candidates scores every
#: one of them (no vector of theirs left unread) and asks the index for a shallow list
#: (:data:`SEMANTIC_SHALLOW`, ``vectorindex.EXPANSION_SHALLOW``): the graph then only has
#: to find the few vectors near enough to pass them, and the deeper search it saves costs
#: more than the few hundred vectors read (benchmarks/vector_scale.py).
SHALLOW_LEXICAL = 1_000
SEMANTIC_SHALLOW = 8
#: and asks it for that many and one (not twice as many, OVERSAMPLE): every lexical
#: candidate is scored, so its list's worst cosine prunes nothing.
SHALLOW_OVERSAMPLE = 1
#: Rewrites a record that did not read back intact (the writer's; None on a follower).
Heal = Callable[[ProjectionState, int, int, DocEvent], None]


class ReaderWrites:
    """What a reader may write, under the engine's ``write_lock`` and ``state_lock``;
    ``current()`` answers the engine's state."""

    def __init__(self, write_lock: threading.RLock, state_lock: threading.RLock,
                 current: Callable[[], ProjectionState]) -> None:
        self._write_lock = write_lock
        self._state_lock = state_lock
        self._current = current

    def heal(self, state: ProjectionState, slot: int, seq: int, event: DocEvent) -> None:
        """Rewrite a record of ``state`` that did not read back intact (a :data:`Heal`)."""
        # Unless a writer is busy: a reader may hold the state lock here, and waiting
        # for the write lock would invert the writers' lock order.
        if self._write_lock.acquire(blocking=False):
            try:
                with self._state_lock:
                    if state is self._current() and state.catalog.alive.view()[slot]:
                        state.text.rewrite(slot, seq, event)
            finally:
                self._write_lock.release()

    def locked(self, build: Callable[[], None]) -> None:
        # A lazily built index (HRR, metadata) is filled in under the state lock, so no
        # writer applies an event to it halfway.
        with self._state_lock:
            build()


class Transactions:
    """Transactions read back from the journal, indexed by document id; the last one
    read is kept, so the slots one transaction wrote (read one after another by an
    export, a compaction or a reconcile) cost one read and one decode in all."""

    def __init__(self, journal: JournalBackend) -> None:
        self._journal = journal
        self._seq = -1
        self._docs: dict[str, DocEvent] = {}
        self._vectors: dict[str, bytes] = {}

    def _load(self, seq: int) -> None:
        if seq == self._seq:
            return
        docs: dict[str, DocEvent] = {}
        vectors: dict[str, bytes] = {}
        for payload in self._journal.read(seq):
            event = ev.decode(payload, seq=seq)
            if isinstance(event, (DocumentAdded, DocumentReplaced)):
                docs[event.id] = event  # the last one: a batch may write an id twice
            elif isinstance(event, VectorsSet) and event.ids:
                size = len(event.vectors) // len(event.ids)
                for i, doc_id in enumerate(event.ids):
                    vectors[doc_id] = event.vectors[i * size:(i + 1) * size]
        self._seq, self._docs, self._vectors = seq, docs, vectors

    def document(self, state: ProjectionState, slot: int) -> DocEvent:
        """The event that wrote ``slot``.

        Errors: ``corrupt`` (the transaction does not hold it), ``unavailable`` (a
        follower's generation was replaced and zeroed meanwhile), ``io``.
        """
        seq = state.catalog.seq.item(slot)
        doc_id = state.catalog.ids[slot]
        self._load(seq)
        found = self._docs.get(doc_id or "")
        if found is None:
            raise CorruptError(f"transaction {seq} does not hold document {doc_id!r}")
        return found

    def vector(self, seq: int, doc_id: str) -> bytes:
        """The vector a re-embed (transaction ``seq``) wrote for ``doc_id``."""
        self._load(seq)
        found = self._vectors.get(doc_id)
        if found is None:
            raise CorruptError(f"transaction {seq} does not hold the vector of {doc_id!r}")
        return found


class View:
    """The projections at one revision. Read-only; valid inside the block that gave it."""

    def __init__(self, state: ProjectionState, *, revision: int, generation: int,
                 journal: JournalBackend, heal: Heal | None,
                 locked: Callable[[Callable[[], None]], None]) -> None:
        self.state = state
        self.revision = revision
        self.generation = generation
        self._journal = journal
        self._heal = heal
        self._locked = locked
        self._transactions = Transactions(journal)
        #: the records read in this block, by slot (a few: graph recall reads its
        #: seeds' for their entities, then recall the same facts' for the results)
        self._records: dict[int, TextRecord] = {}

    # -- the projections --------------------------------------------------------------
    @property
    def catalog(self) -> Catalog:
        return self.state.catalog

    @property
    def facts(self) -> FactIndex:
        return self.state.facts

    @property
    def bm25(self) -> BM25:
        return self.state.bm25

    @property
    def embeddings(self) -> Embeddings:
        return self.state.embeddings

    @property
    def entities(self) -> Entities:
        return self.state.entities

    @property
    def relations(self) -> Relations:
        return self.state.relations

    @property
    def candidates(self) -> Candidates:
        return self.state.candidates

    @property
    def embedding_dim(self) -> int:
        """The store's embedding dimension (0 until the first embedding)."""
        return self.state.embeddings.dim

    @property
    def purge_pending(self) -> bool:
        return self.state.purge_pending

    def purge_request(self) -> list[Event]:
        """The event that records a purge request, for a ``commit`` build to add to the
        removal it belongs with (empty when a purge is already pending).

        Recorded in the removal's own transaction, the request survives every crash
        that the removal survives, so the next open finishes the purge.
        """
        return [] if self.state.purge_pending else [PurgeRequested()]

    def slot(self, doc_id: str) -> int:
        """The slot of a live document, or -1."""
        return self.state.catalog.slot(doc_id)

    def id_of(self, slot: int) -> str:
        return self.state.catalog.ids[slot] or ""

    def live_slots(self) -> np.ndarray:
        """Slots of every live document, in write order."""
        return np.flatnonzero(self.state.catalog.alive.view())

    # -- records ----------------------------------------------------------------------
    def record(self, slot: int) -> TextRecord:
        """The text record of ``slot``, from the text segment or, failing that, the journal.

        A record that does not read back intact is rewritten (writer only). On a
        follower whose generation the writer replaced and zeroed since the block
        began, this is ``unavailable`` (never ``corrupt``): the next block answers
        from the new generation.
        """
        kept = self._records.get(slot)
        if kept is not None:
            return kept
        state = self.state
        seq = state.catalog.seq.item(slot)
        rec = state.text.read(slot, seq)
        if rec is None or rec.id != state.catalog.ids[slot]:
            event = self._transactions.document(state, slot)
            if self._heal is not None:
                self._heal(state, slot, seq, event)
            rec = TextRecord(event.id, event.text, event.metadata, event.entities)
        if len(rec.text) + len(rec.metadata) <= RECORD_KEPT_BYTES:
            if len(self._records) >= RECORDS_KEPT:
                self._records.clear()
            self._records[slot] = rec
        return rec

    def records_of(self, slots: Sequence[int]) -> list[TextRecord]:
        """:meth:`record` of each of a few ``slots`` in any order (recall's k): those
        not read in this block already are read one read each, their bodies decoded
        in one call; one that does not read back intact comes as :meth:`record`'s."""
        kept = self._records
        todo: Sequence[int]
        if kept:
            out: list[TextRecord | None] = [kept.get(slot) for slot in slots]
            todo = [i for i, rec in enumerate(out) if rec is None]
            wanted = [slots[i] for i in todo]
        else:  # (the usual case: nothing read in this block yet)
            out = [None] * len(slots)
            todo = range(len(slots))
            wanted = list(slots)
        if wanted:
            state = self.state
            ids = state.catalog.ids
            text = state.text
            # (A version 2 file's records are not bound to their transactions' seqs.)
            seqs = (state.catalog.seq.view()[np.asarray(wanted, dtype=np.intp)].tolist()
                    if text.binds_seq else None)
            found = text.read_each(wanted, seqs)
            for i, slot, rec in zip(todo, wanted, found, strict=True):
                if rec is None or rec.id != ids[slot]:
                    rec = self.record(slot)
                elif len(rec.text) + len(rec.metadata) <= RECORD_KEPT_BYTES:
                    if len(kept) >= RECORDS_KEPT:
                        kept.clear()
                    kept[slot] = rec
                out[i] = rec
        return out  # type: ignore[return-value]

    def records(self, slots: np.ndarray, carried: list[Carried | None] | None = None
                ) -> list[TextRecord]:
        """:meth:`record` of each of ``slots`` (ascending), read from the text segment in
        a few large reads (a compaction reads every live record); a record that does
        not read back intact comes from the journal, as in :meth:`record`. With
        ``carried``, each one's bytes in the file and body are appended to it (None for
        one that came from the journal): see :meth:`TextSegment.carry`."""
        state = self.state
        ids = state.catalog.ids
        wanted = slots.tolist()
        raw: list[Carried | None] | None = [] if carried is not None else None
        found = state.text.read_many(wanted, state.catalog.seq.view()[slots].tolist(), raw)
        out = [rec if rec is not None and rec.id == ids[slot] else self.record(slot)
               for slot, rec in zip(wanted, found, strict=True)]
        if carried is not None and raw is not None:
            carried.extend(kept if rec is not None and rec.id == ids[slot] else None
                           for slot, rec, kept in zip(wanted, found, raw, strict=True))
        return out

    def event(self, slot: int) -> DocEvent:
        """The document event that wrote ``slot`` (the caller's bytes, as written)."""
        return self._transactions.document(self.state, slot)

    def vector_as_written(self, slot: int) -> bytes:
        """The embedding of ``slot`` as it was written (b"": none) — not the unit vector
        the projection holds, which normalising again would move by an ulp: the
        document event's, or that of the re-embed that replaced it."""
        embeddings = self.state.embeddings
        if embeddings.vector(slot) is None:
            return b""
        seq = embeddings.replaced.get(slot)
        if seq is None:
            return self.event(slot).embedding
        return self._transactions.vector(seq, self.id_of(slot))

    # -- search -------------------------------------------------------------------------
    def allowed(self, ids: Sequence[str] | None) -> np.ndarray | None:
        """A slot mask of ``ids`` (None: every document): the filtered path's
        restriction, as :meth:`fused`, :meth:`search` and :meth:`similar` take it."""
        if ids is None:
            return None
        mask = np.zeros(self.state.catalog.slots, dtype=bool)
        for doc_id in ids:
            slot = self.state.catalog.slot(doc_id)
            if slot >= 0:
                mask[slot] = True
        return mask

    def mask(self, slots: np.ndarray) -> np.ndarray:
        """A slot mask holding ``slots``."""
        out = np.zeros(self.state.catalog.slots, dtype=bool)
        out[slots] = True
        return out

    def fused(self, query: str, embedding: bytes, allowed: np.ndarray | None,
              fusion: FusionParams = DEFAULT_FUSION, depth: int | None = None,
              approximate: bool = False, include: np.ndarray | None = None) -> Fusion:
        """BM25 (and cosine with an ``embedding``) of every matching document, fused;
        ``allowed`` (a slot mask) restricts the candidates.

        With ``depth`` (linear fusion only, lexical weight below 1), the vector proposes
        only the documents whose cosine is among its ``depth`` best (every lexical match
        stays a candidate): the fused top ``depth`` is the same as over every document,
        and the fusion and ranking after it never touch the whole store. With
        ``approximate`` too, the approximate index proposes them, and the lexical
        candidates are BM25's best ``depth`` instead of every match (docs/contract.md
        §4e): the fused top ``depth`` is then approximate, each candidate's score still
        exact. ``include``: slots that are candidates whatever their cosine's rank (with
        it, every lexical match stays a candidate, so theirs are scored whole)."""
        if embedding and depth is not None and _truncates(fusion) and approximate \
                and include is None:
            found = self._nearest(query, np.frombuffer(embedding, dtype="<f4"), allowed,
                                  fusion, depth)
            if found is not None:
                return found
        lex = self.state.bm25.score(query, allowed)
        sem = None
        if embedding:
            if depth is not None and not _truncates(fusion):
                depth = None
            if depth is not None:  # every lexical match is scored by its own cosine
                include = lex[0] if include is None else np.union1d(lex[0], include)
            sem = self.state.embeddings.cosine(np.frombuffer(embedding, dtype="<f4"), allowed,
                                               depth, approximate, include)
        ceiling = self.state.bm25.word_ceiling() if fusion.method == "bounded" else 0.0
        return fuse(lex, sem, fusion, ceiling)

    def _nearest(self, query: str, vector: np.ndarray, allowed: np.ndarray | None,
                 fusion: FusionParams, depth: int) -> Fusion | None:
        """:meth:`fused`'s approximate path: BM25's ``n`` best and the approximate index's
        ``n`` nearest, for ``n`` from ``depth`` up, until no document outside both lists
        could enter the fused top ``depth`` — a document scoring the worst of each list
        on both signals ranks below that top. A lexical candidate outside the index's
        list is scored by its cosine only if it could enter that top with the most
        cosine the index leaves to such a document (:meth:`_candidates`); with few
        lexical candidates (:data:`SHALLOW_LEXICAL`), every one is scored and the first
        search of the index is shallow. None: search exactly (a restriction that allows
        few documents)."""
        bm25, embeddings = self.state.bm25, self.state.embeddings
        ceiling = bm25.word_ceiling() if fusion.method == "bounded" else 0.0
        q = unit(vector)  # (once: every cosine below is of this vector)
        lex_n, sem_n = max(depth, LEXICAL_FIRST), max(depth, SEMANTIC_FIRST)
        shallow: bool | None = None  # (decided by the first round's lexical candidates)
        while True:
            # Every document BM25 says may be among its lex_n best (often every match:
            # cheap to score, and the more lexical candidates the lower the bound).
            lex_slots, lex_scores, lex_floor = bm25.top_bounded(query, lex_n, allowed)
            if shallow is None:
                shallow = depth <= len(lex_slots) <= SHALLOW_LEXICAL
                if shallow:
                    sem_n = max(depth, SEMANTIC_SHALLOW)
            found = embeddings.nearest(
                q, allowed, sem_n * (SHALLOW_OVERSAMPLE if shallow else OVERSAMPLE), shallow)
            if found is None:
                return None
            sem_floor = found[2]
            prune = not shallow
            # BM25 of a candidate the index proposed and the lexical list does not hold:
            # 0 when that list holds every match, else its own score (it may match).
            outside = (_no_match if lex_floor == 0.0
                       else functools.partial(bm25.scores_of, query))
            while True:
                fused, unscored = self._candidates(q, (lex_slots, lex_scores), found,
                                                   outside, fusion, ceiling, depth, prune)
                n = len(fused.score)
                kth = float(np.partition(fused.score, n - depth)[n - depth]) if n >= depth \
                    else -np.inf
                # Four phantoms, scored as the candidates are (their scale, their best
                # cosine): the worst of the lexical list alone, of the vector's alone, of
                # both, and the best lexical candidate left unscored (its cosine at most
                # the vector list's worst and the margin, or the index would have
                # proposed it).
                bound = scored(np.array([lex_floor, 0.0, lex_floor, unscored]),
                               np.clip([-1.0, sem_floor, sem_floor, sem_floor + FLOOR_MARGIN], 0.0,
                                       1.0),
                               fusion, fused.lexical_scale, fused.semantic_best).tolist()
                if not prune or unscored < 0.0 or bound[3] < kth:
                    break
                prune = False  # (a candidate left unscored could enter: score them all)
            if n <= depth and lex_floor == 0.0 and sem_floor < 0.0:
                return fused  # every candidate there is
            more_lex = lex_floor > 0.0 and bound[0] >= kth
            more_sem = sem_floor > 0.0 and bound[1] >= kth
            if not (more_lex or more_sem):
                if bound[2] < kth or (lex_floor == 0.0 and sem_floor <= 0.0):
                    return fused
                more_lex, more_sem = lex_floor > 0.0, sem_floor > 0.0
            lex_n, sem_n = lex_n * (4 if more_lex else 1), sem_n * (4 if more_sem else 1)
            shallow = False  # (a deeper round searches and prunes as usual)

    def _candidates(self, q: np.ndarray, lexical: tuple[np.ndarray, np.ndarray],
                    nearest: tuple[np.ndarray, np.ndarray, float],
                    outside: Callable[[np.ndarray], np.ndarray], fusion: FusionParams,
                    ceiling: float, depth: int, prune: bool) -> tuple[Fusion, float]:
        """The fused scores of the index's list (``nearest``: slots ascending, cosine,
        floor) and of BM25's (``lexical``: slots ascending, scores), each candidate
        scored exactly (``outside``: the BM25 of those of the index's list that the
        lexical list does not hold), and the best BM25 score of a lexical candidate
        left out (-1.0: none). With ``prune``, a lexical candidate outside the index's
        list is left out when, even with the floor's cosine, it scores below the
        ``depth``-th best of the index's list and BM25's ``depth`` best: its cosine (a
        gathered row each) is never computed. Without it, or when fewer than ``depth``
        are scored, every lexical candidate is scored (the exact path's candidates)."""
        lex_slots, lex_scores = lexical
        sem_slots, sem_cos, floor = nearest
        first_n = max(depth, LEXICAL_SCORED_FIRST)
        if not prune or len(lex_slots) <= first_n:
            return self._every_candidate(q, lexical, nearest, outside, fusion, ceiling), -1.0
        # BM25 of each of the index's list; which lexical candidates it holds.
        sem_lex = np.zeros(len(sem_slots))
        inside = np.zeros(len(lex_slots), dtype=bool)
        if len(sem_slots):
            at = np.minimum(np.searchsorted(sem_slots, lex_slots), len(sem_slots) - 1)
            inside = sem_slots[at] == lex_slots
            own = np.ones(len(sem_slots), dtype=bool)
            own[at[inside]] = False
            sem_lex[at[inside]] = lex_scores[inside]
            sem_lex[own] = outside(sem_slots[own])
        rest = np.flatnonzero(~inside)  # (indices into the lexical list)
        cosines = self.state.embeddings.cosines
        unscored = -1.0
        if len(rest) > first_n:
            # BM25's best outside the index's list first: with the index's list, a k-th
            # score that the others must reach with the floor's cosine to matter.
            order = np.argpartition(-lex_scores[rest], first_n - 1)
            first, others = rest[order[:first_n]], rest[order[first_n:]]
            first_cos = cosines(q, lex_slots[first])
            # (its lexical scale is the best BM25 there is: BM25's best is in one list)
            prelim = aligned(np.concatenate([sem_slots, lex_slots[first]]),
                             np.concatenate([sem_lex, lex_scores[first]]),
                             np.concatenate([sem_cos, first_cos]), fusion, ceiling)
            n = len(prelim.score)
            kth = float(np.partition(prelim.score, n - depth)[n - depth])
            other_lex = lex_scores[others]
            reach = min(1.0, max(floor + FLOOR_MARGIN, 0.0))
            could = scored(other_lex, np.full(len(others), reach), fusion,
                           prelim.lexical_scale, prelim.semantic_best) >= kth
            more = others[could]
            left = other_lex[~could]
            unscored = float(left.max()) if len(left) else -1.0
            picked = np.concatenate([first, more])
            cand_cos = np.concatenate([first_cos, cosines(q, lex_slots[more])])
        else:
            picked = rest
            cand_cos = cosines(q, lex_slots[rest])
        slots = np.concatenate([sem_slots, lex_slots[picked]])
        lex = np.concatenate([sem_lex, lex_scores[picked]])
        sem = np.concatenate([sem_cos, cand_cos])
        order = np.argsort(slots, kind="stable")
        return aligned(slots[order], lex[order], sem[order], fusion, ceiling), unscored

    def _every_candidate(self, q: np.ndarray, lexical: tuple[np.ndarray, np.ndarray],
                         nearest: tuple[np.ndarray, np.ndarray, float],
                         outside: Callable[[np.ndarray], np.ndarray], fusion: FusionParams,
                         ceiling: float) -> Fusion:
        """:meth:`_candidates` with every lexical candidate scored: the lexical list's
        cosines in one gather (the few rows the index's list shares with it were read
        just now), and the index's own candidates added to it (their BM25 from
        ``outside``)."""
        lex_slots, lex_scores = lexical
        sem_slots, sem_cos, _ = nearest
        cos = self.state.embeddings.cosines(q, lex_slots)
        own = np.ones(len(sem_slots), dtype=bool)  # (proposed by the index alone)
        if len(lex_slots) and len(sem_slots):
            at = np.minimum(np.searchsorted(lex_slots, sem_slots), len(lex_slots) - 1)
            own = lex_slots[at] != sem_slots
        if not own.any():
            return aligned(lex_slots, lex_scores, cos, fusion, ceiling)
        slots = np.concatenate([lex_slots, sem_slots[own]])
        order = np.argsort(slots, kind="stable")
        return aligned(slots[order], np.concatenate([lex_scores, outside(sem_slots[own])])[order],
                       np.concatenate([cos, sem_cos[own]])[order], fusion, ceiling)

    def best(self, query: str, k: int, allowed: np.ndarray | None) -> Fusion:
        """:meth:`fused` without an embedding, for the documents that may be among the
        ``k`` best (the same scores; ``top_k`` of either gives the same ``k``): BM25's
        pruned top k, which does not score every matching document."""
        return fuse(self.state.bm25.top(query, k, allowed), None)

    def search(self, query: str, k: int, embedding: bytes, allowed: np.ndarray | None,
               approximate: bool = False) -> list[Hit]:
        """The ``k`` best documents, best first; ties in write order (docs/contract.md §2)."""
        fused, order = self.top(query, k, embedding, allowed, approximate)
        ids_of = self.state.catalog.ids
        # Python values of the k hits, a column at a time (not a numpy scalar each).
        scores = fused.score[order].tolist()
        lexical = scores if fused.lexical is fused.score else fused.lexical[order].tolist()
        semantic = ([None] * len(scores) if fused.semantic is None
                    else fused.semantic[order].tolist())
        return [Hit(id=ids_of[slot] or "", score=score, lexical_score=lex, semantic_score=sem)
                for slot, score, lex, sem in zip(fused.slots[order].tolist(), scores, lexical,
                                                 semantic, strict=True)]

    def top(self, query: str, k: int, embedding: bytes, allowed: np.ndarray | None,
            approximate: bool = False) -> tuple[Fusion, np.ndarray]:
        """:meth:`search`'s answer before it becomes hits: the fused scores and the
        indices of the ``k`` best among them, best first."""
        fused = (self.fused(query, embedding, allowed, depth=k, approximate=approximate)
                 if embedding else self.best(query, k, allowed))
        return fused, top_k(fused.slots, fused.score, k)

    def hrr(self) -> HRRIndex:
        """The HRR index with every document encoded (encoded lazily, once)."""
        index = self.state.hrr
        if index.stale:
            def source(slots: Sequence[int]) -> list[tuple[str, tuple[str, ...]]]:
                recs = [self.record(s) for s in slots]
                return [(r.text, r.entities) for r in recs]
            def encode() -> None:
                index.ensure(source)
            self._locked(encode)
        return index

    def catch_up_candidates(self, current: np.ndarray, scorer: Scorer, budget: int,
                            block: int) -> bool:
        """Bring the contradiction candidates up to date with the facts ``current``
        marks (built on first use, then only what changed; at most about ``budget``
        raw pairs scored per call), under the state lock; whether they now hold
        exactly those facts."""
        done = [False]

        def catch_up() -> None:
            done[0] = self.state.candidates.ensure(current, scorer, budget, block)
        self._locked(catch_up)
        return done[0]

    def metadata(self) -> MetadataIndex:
        """The metadata index with every live document in it (built lazily, once)."""
        index = self.state.metadata
        if index.stale:
            def source(slots: Sequence[int]) -> list[bytes]:
                return [self.record(s).metadata for s in slots]
            self._locked(lambda: index.ensure(source))
        return index

    def similar(self, text: str, k: int, allowed: np.ndarray | None) -> list[Hit]:
        """Documents whose HRR content vector is most similar to ``text``'s."""
        index = self.hrr()
        slots, scores = index.similar(tokenize(text), allowed)
        ids_of = self.state.catalog.ids
        return [Hit(id=ids_of[int(slots[i])] or "", score=float(scores[i]), lexical_score=0.0)
                for i in top_k(slots, scores, k)]


def _no_match(slots: np.ndarray) -> np.ndarray:
    """The BM25 of documents that match no query term."""
    return np.zeros(len(slots))


def _truncates(fusion: FusionParams) -> bool:
    """Whether a fusion's top ``depth`` depends only on the ``depth`` best cosines (and
    every lexical match): linear, bounded or floored (a document's part rises with its
    own cosine and depends otherwise only on the best one), with some weight on the
    vector. RRF ranks a lexical match by its cosine's rank among every document,
    which a cut would lose."""
    return fusion.method in ("linear", "bounded", "floored") and fusion.lexical_weight < 1.0
