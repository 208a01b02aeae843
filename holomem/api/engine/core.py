"""The engine's core: a journal wired to its projections, and the concurrency contract.

Owns: :class:`Engine` — opening a store (replay, finishing an interrupted purge),
``commit(build)``, ``reading()`` / ``read(fn)`` (the only way up: a
:class:`~holomem.api.engine.view.View` of one revision), followers' ``refresh``,
``compact``, ``stats``, ``sync`` and ``close``: the state that ties its parts (the
journal, the projections, the revision, the locks, how deep each thread is in
``reading()`` blocks) and the two hot paths, commit and read. Its collaborators:
:mod:`.replay` (building a generation at open, the journal's transactions),
:mod:`.checkpointing` (the checkpoints written), :mod:`.deferral` (deferring blocks,
and who hears of a commit when), :mod:`.view` (what a reader may write),
:mod:`.following` (a follower's catch-up) and :mod:`.compaction` (the new generation
and its switch). The document calls are
:class:`~holomem.api.engine.store.Store`'s, built on these. Imports the log, the
projections and the engine's other modules.

Concurrency: writers are serialised by a write lock held from ``build`` to apply;
readers take only the state lock, which a writer holds just while it applies an
event whose transaction has its place in the journal. A reader never returns a
write before it is durable (it waits for at most one group commit), and a search
never waits for an fsync it does not depend on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

from holomem import events as ev
from holomem.api.engine import checkpointing, compaction, following, replay, validate
from holomem.api.engine.checkpointing import Checkpointer, CheckpointStats
from holomem.api.engine.deferral import Deferrals, Deferred, WouldBlock
from holomem.api.engine.replay import FOLLOW_RETRIES, build
from holomem.api.engine.types import StoreCounters, StoreStats
from holomem.api.engine.view import Heal, ReaderWrites, View
from holomem.errors import ClosedError, InvalidError, ReadOnlyError, UnavailableError
from holomem.events import Event
from holomem.log import crashpoints as cp
from holomem.log.backend import open_journal
from holomem.log.format import DEFAULT_SEGMENT_SIZE
from holomem.log.recordfile import RecordFile
from holomem.projections.state import ProjectionState

log = logging.getLogger("holomem")
T = TypeVar("T")
E = TypeVar("E", bound="Engine")
#: Per thread: how deep in ``reading()`` blocks it is, per store (by id), so that a
#: follower moves to a new generation only where no block of its holds the old state.
_READING = threading.local()


def _reading_depths() -> dict[int, int]:
    depths: dict[int, int] | None = getattr(_READING, "depths", None)
    if depths is None:
        depths = _READING.depths = {}
    return depths


class Engine:
    """A journal and the projections replayed from it. Use ``Store``; a context manager."""

    def __init__(self, path: str | os.PathLike[str], *, key: bytes | None = None,
                 create: bool = True, sync: str = "full", read_only: bool = False,
                 segment_size: int = DEFAULT_SEGMENT_SIZE,
                 checkpoint_every: int | None = checkpointing.DEFAULT_EVERY,
                 checkpoint_close_min: int = checkpointing.DEFAULT_CLOSE_MIN) -> None:
        """Open (or create) the store at ``path``; see ``Store.open``."""
        t0 = time.perf_counter()
        validate.store_path(path)
        validate.flag(create, "create")
        validate.flag(read_only, "read_only")
        self._journal = open_journal(path, key=key, sync=sync, segment_size=segment_size,
                                     read_only=read_only, create=create)
        self.path = self._journal.path
        self.read_only = read_only
        self._write_lock = threading.RLock()
        self._state_lock = threading.RLock()
        writes = ReaderWrites(self._write_lock, self._state_lock, lambda: self._state)
        self._heal: Heal | None = None if read_only else writes.heal
        self._locked = writes.locked
        self._deferrals = Deferrals(self._journal)
        #: ``.block``: this thread's :meth:`deferring` block (absent: none)
        self._deferring = self._deferrals.local
        self._closed = False
        self._text: RecordFile | None = None
        try:
            built = build(self._journal, read_only=read_only)
            self._state, self._text, self._revision = built.state, built.text_file, built.last
            #: the journal generation the state was built from; a follower whose journal
            #: moved on (and whose rebuild failed) never answers from this state
            self._state_generation = self._journal.generation
            self._ckpt = Checkpointer(self._journal, self._state_lock,
                                      lambda: (self._state, self._revision),
                                      every=checkpoint_every, close_min=checkpoint_close_min,
                                      seq=built.checkpoint, tail=built.tail,
                                      written_at=built.checkpoint_time)
            #: how the last open rebuilt state (see StoreStats.opened_by), and the
            #: checkpoints it did not use, with why (StoreStats.checkpoints_ignored)
            self.opened_by, self.checkpoints_ignored = built.opened_by, built.ignored
            if self._state.purge_pending and not read_only:
                # A purge was acknowledged but its compaction did not finish.
                log.warning("finishing an interrupted purge of %s", self.path)
                with self._write_lock:
                    self._compact()
        except BaseException:
            if self._text is not None:
                self._text.close()
            self._journal.close()
            raise
        self.open_seconds = time.perf_counter() - t0

    @classmethod
    def open(cls: type[E], path: str | os.PathLike[str], *, key: bytes | None = None,
             create: bool = True, sync: str = "full", read_only: bool = False,
             segment_size: int = DEFAULT_SEGMENT_SIZE,
             checkpoint_every: int | None = checkpointing.DEFAULT_EVERY,
             checkpoint_close_min: int = checkpointing.DEFAULT_CLOSE_MIN) -> E:
        """Open (or create) a store.

        Args:
            key: 32 raw bytes turn on AES-256-GCM encryption of everything on disk.
            create: create the store when ``path`` holds none.
            sync: ``"full"`` (fsync before every mutating call returns), ``"batch"``
                (group commit) or ``"none"`` (tests and bulk loads: NOT durable).
            read_only: a follower: never writes; call :meth:`refresh` to catch up.
            segment_size: journal segment size in bytes.
            checkpoint_every: journal bytes not covered by a checkpoint after which
                the writer writes one in the background (None: never automatically).
            checkpoint_close_min: close writes a checkpoint when at least this many
                journal bytes are not covered by one (0: always when any are).

        Errors: ``invalid_request``, ``not_found``, ``locked``, ``key.*``, ``corrupt.*``,
        ``io``.
        """
        if sync == "none" and not read_only:
            log.warning("store %s opened with sync='none': writes are NOT durable", path)
        checkpointing.check_options(checkpoint_every, checkpoint_close_min)
        return cls(path, key=key, create=create, sync=sync, read_only=read_only,
                   segment_size=segment_size, checkpoint_every=checkpoint_every,
                   checkpoint_close_min=checkpoint_close_min)

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

    def check(self, *, write: bool = False) -> None:
        """``closed`` if the store is closed; ``read_only`` for a write on a follower."""
        if self._closed:
            raise ClosedError("the store is closed")
        if write and self.read_only:
            raise ReadOnlyError("the store was opened read-only")

    def __len__(self) -> int:
        if self.read_only:
            return self.read(lambda view: view.catalog.live)
        return self._state.catalog.live

    # -- the read handle ----------------------------------------------------------------
    def _view(self, state: ProjectionState) -> View:
        return View(state, revision=self._revision, generation=self._journal.generation,
                    journal=self._journal, heal=self._heal, locked=self._locked)

    @contextlib.contextmanager
    def reading(self) -> Iterator[View]:
        """A view of the current projections, held still (no write applies) for the block.

        On leaving, it waits until every write the block could see is durable (at
        most one group commit), so no answer ever reflects a write that a crash could
        still take back; if that write's fsync fails, the read fails too.

        On a follower, a block first checks whether the writer has switched to a new
        generation (a compaction or purge), or whether the journal is on a generation
        the state was not built from (a rebuild that failed); if so it rebuilds from
        the live one, as :meth:`refresh` does, and answers from it, or raises what the
        rebuild raised (``unavailable``, ...): it never answers from a generation the
        journal left. (Not inside another block of the same thread, which still holds
        the state it started with.)
        """
        self.check()
        depths = _reading_depths()
        key = id(self)
        self._hold_state(outer=not depths.get(key))
        try:
            depths[key] = depths.get(key, 0) + 1
            try:
                revision = self._revision
                yield self._view(self._state)
            finally:
                depths[key] -= 1
                if not depths[key]:
                    del depths[key]
        finally:
            self._state_lock.release()
        if revision > self._journal.durable_seq:
            deferred: Deferred | None = getattr(self._deferring, "block", None)
            if deferred is not None:
                deferred.saw(revision)  # the block's caller waits for it
            else:
                self._journal.wait(revision)

    def _stale(self) -> bool:
        """Follower: the journal is on another generation than the state's."""
        return self._journal.generation != self._state_generation

    def _hold_state(self, *, outer: bool) -> None:
        """Take the state lock for a :meth:`reading` block. A follower's outermost block
        first catches up if the writer switched generations or the state is stale, and
        takes the lock only on a state built from the journal's generation (a rebuild
        that moved the journal meanwhile is waited for, and tried again if it failed).
        Errors: those of :meth:`refresh`."""
        if not (self.read_only and outer):
            self._state_lock.acquire()
            return
        for _ in range(FOLLOW_RETRIES):
            if self._journal.replaced() or self._stale():
                self.refresh()
            self._state_lock.acquire()
            if not self._stale():
                return
            self._state_lock.release()
        raise UnavailableError(f"the store at {self.path!r} kept changing generation "
                               "while a follower caught up; try again")

    def read(self, fn: Callable[[View], T]) -> T:
        """``fn(view)`` inside :meth:`reading`. On a follower, again if ``fn`` failed
        because the writer replaced (and zeroed) the generation it was answering from
        (``unavailable``): the next block answers from the new one. A catch-up that
        fails before ``fn`` runs is not tried again here (it retries what it can
        itself): its error is the read's."""
        retries = FOLLOW_RETRIES if self.read_only else 0
        while True:
            answering = False
            try:
                with self.reading() as view:
                    answering = True
                    return fn(view)
            except UnavailableError:
                if not answering or not retries:
                    raise
                retries -= 1

    # -- writing ----------------------------------------------------------------------
    def commit(self, build: Callable[[View], Sequence[Event]]) -> tuple[int, list[Event]]:
        """Append the events ``build(view)`` returns as one transaction and apply them.

        ``build`` runs under the write lock with a view of the current state, so it
        sees every earlier write and no later one: validation done inside it cannot
        race. The events are applied as soon as the transaction has its place in the
        journal, and the call returns once it is durable (in a :meth:`deferring`
        block: at once). Returns (seq, events); seq is 0 and nothing is written when
        ``build`` returns no event.
        """
        self.check(write=True)
        deferred: Deferred | None = getattr(self._deferring, "block", None)
        waits = deferred is None or deferred.blocking
        if not self._write_lock.acquire(blocking=waits):
            raise WouldBlock("another write holds the store")
        try:
            self.check(write=True)
            events = list(build(self._view(self._state)))
            if not events:
                return 0, []
            payloads = ev.encode_all(events)
            # A block that may not wait takes the state lock before the transaction
            # has its place in the journal, so that it can still back out.
            if not waits and not self._state_lock.acquire(blocking=False):
                raise WouldBlock("a read holds the store's state")
            try:
                seq = self._journal.enqueue(payloads)
                with self._state_lock:
                    self._state.apply_all(seq, events)
                    self._revision = seq
                    self._ckpt.tail += sum(map(len, payloads))
            finally:
                if not waits:
                    self._state_lock.release()
        finally:
            self._write_lock.release()
        # Outside the write lock: in batch mode, the writers that queued meanwhile
        # share this fsync (group commit). Readers see the change now but do not
        # return it before it is durable (see reading()); in a deferring block, the
        # block's caller waits instead.
        if deferred is not None:
            deferred.saw(seq)
            if self._deferrals.listeners:
                self._deferrals.hold(seq, events)
        else:
            self._journal.wait(seq)
            self._deferrals.tell(seq, events)
        if self._ckpt.due():
            self._ckpt.start()
        return seq, events

    def deferring(self, *, blocking: bool = True
                  ) -> contextlib.AbstractContextManager[Deferred]:
        """A block, on this thread, whose commits and reads do not wait for durability
        (:meth:`Deferrals.block <holomem.api.engine.deferral.Deferrals.block>` says how)."""
        return self._deferrals.block(blocking=blocking)

    @property
    def durable_revision(self) -> int:
        """The newest revision known to be durable."""
        return self._journal.durable_seq

    def wait_durable(self, revision: int) -> None:
        """Return once every write up to ``revision`` is durable (batch mode: sharing,
        or leading, a group's sync). Errors: ``io.fsync``, ``io.failed``."""
        self._deferrals.wait_durable(revision)

    # -- checkpoints --------------------------------------------------------------------
    def checkpoint(self) -> CheckpointStats | None:
        """Write a checkpoint of the projections now (docs/guarantees.md §6a); None
        when the newest one already holds the current revision, or on a store that
        keeps no checkpoint (``nats://``) (see
        :meth:`Checkpointer.write <holomem.api.engine.checkpointing.Checkpointer.write>`).
        Errors: ``closed``, ``read_only``, ``io``."""
        self.check(write=True)
        with self._ckpt.lock:
            self.check(write=True)
            return self._ckpt.write()

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
            if self._text is not None and not self._closed:
                self._text.sync()

    def compact(self, *, purge: bool = False) -> None:
        """Rewrite the journal into a new generation holding only the live state
        (docs/guarantees.md §6; :func:`holomem.api.engine.compaction.compact` says how).
        Errors: ``closed``, ``read_only``, ``io``."""
        validate.flag(purge, "purge")
        self.check(write=True)
        with self._write_lock:
            self.check(write=True)
            if purge:
                self.commit(lambda view: view.purge_request())
            cp.hit(compaction.P_COMPACT_BEGIN)
            self._compact()

    def _compact(self) -> None:
        # No checkpoint is written while generations are switched and the old one
        # erased (its checkpoints with it).
        with self._ckpt.lock:
            compaction.compact(self._journal, self._view(self._state), self._text,
                               self._ckpt, self._state_lock, self._install)

    # -- the journal --------------------------------------------------------------------
    def events(self, from_seq: int = 0) -> Iterator[tuple[int, list[Event]]]:
        """Decoded transactions from ``from_seq`` up to the current revision."""
        if isinstance(from_seq, bool) or not isinstance(from_seq, int) or from_seq < 0:
            raise InvalidError(f"from_seq must be an int, 0 or more, not {from_seq!r}")
        self.check()
        yield from replay.transactions(self._journal, from_seq, self._revision)

    def subscribe(self, listener: Callable[[int, list[Event]], None]) -> None:
        """Call ``listener(seq, events)`` after every committed transaction (writer only)."""
        self._deferrals.listeners.append(listener)

    def refresh(self) -> int:
        """Follower only: apply the writer's new transactions; return the new revision
        (:func:`holomem.api.engine.following.catch_up` says how). Errors: ``closed``,
        ``corrupt``, ``io``, ``unavailable`` (try again)."""
        self.check()
        if not self.read_only:
            return self._revision
        with self._write_lock:
            self.check()
            return following.catch_up(self._journal, self._state_generation,
                                      self._revision, self._text, self._follow,
                                      self._install)

    def _follow(self, seq: int, events: list[Event]) -> None:
        with self._state_lock:
            self._state.apply_all(seq, events)
            self._revision = seq

    def _install(self, state: ProjectionState, text: RecordFile, revision: int
                 ) -> RecordFile | None:
        """Swap in ``state`` (with its text segment), built from the journal's live
        generation (a follower's rebuild, or compaction's switch); answer the old text."""
        with self._state_lock:
            old_state = self._state
            old_text, self._state, self._text, self._revision = self._text, state, text, revision
            self._state_generation = self._journal.generation
        old_state.stop_background()
        return old_text

    # -- housekeeping -----------------------------------------------------------------
    def stats(self) -> StoreStats:
        self.check()
        js = self._journal.stats()
        with self._state_lock:
            state, text = self._state, self._text
            return StoreStats(
                documents=state.catalog.live, revision=self._revision,
                generation=js.generation, segments=js.segments, journal_bytes=js.bytes,
                text_bytes=text.size() if text is not None else 0,
                index_bytes=state.index_bytes(), encrypted=js.encrypted, sync=js.sync,
                read_only=self.read_only, opened_by=self.opened_by,
                open_seconds=round(self.open_seconds, 6),
                checkpoint_seq=self._ckpt.seq, checkpoint_tail_bytes=self._ckpt.tail,
                checkpoints_ignored=self.checkpoints_ignored,
                store_id=self._journal.store_id.hex())

    def counters(self) -> StoreCounters:
        """What this handle did and holds (:class:`StoreCounters`): read without waiting
        for any lock, and still after :meth:`close`."""
        js = self._journal.stats()
        ckpt = self._ckpt
        return StoreCounters(
            acknowledged_writes=js.acknowledged, fsyncs=js.fsyncs, journal_bytes=js.bytes,
            revision=self._revision, checkpoint_seq=ckpt.seq,
            checkpoint_tail_bytes=ckpt.tail, checkpoint_time=ckpt.written_at,
            read_only=self.read_only)

    def sync(self) -> None:
        """Make every write durable (needed only with sync="none")."""
        self.check()
        with self._write_lock:
            self._journal.sync()
            if self._text is not None and not self.read_only:
                self._text.sync()

    def close(self) -> None:
        """Sync and close. Idempotent."""
        with self._write_lock:
            if self._closed:
                return
            self._closed = True
            self._ckpt.stop()
            self._state.stop_background()
            try:
                if self._text is not None:
                    if not self.read_only and self._journal.failed is None:
                        self._journal.sync()
                        self._text.seal(self._revision)
                        self._ckpt.on_close()
                    self._text.close()
            finally:
                self._journal.close()

    def __enter__(self: E) -> E:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
