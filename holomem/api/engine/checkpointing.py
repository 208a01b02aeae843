"""Checkpoints of a store: which one an open trusts, and when a new one is written.

Owns: choosing the checkpoint an open restores (only one valid and bound to the
journal, its journal digest the journal's own; any other is reported, and erased by
the writer), refusing the writer's open when a checkpoint proves that acknowledged
transactions are missing from the journal's end, the checks of a store's checkpoint
options, and the writer's checkpoints (:class:`Checkpointer`: the journal bytes not
covered by a checkpoint, the automatic trigger and its background thread, the one
written on close, the statistics of the last one written). It takes the state's
snapshot under the engine's state lock (:mod:`holomem.api.engine.core`) and calls
:func:`write` outside it. Imports the log and the projections (docs/guarantees.md §6a
says what a checkpoint promises).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

import msgspec

from holomem.errors import InvalidError, TruncatedError
from holomem.log import checkpoint as ckfile
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.backend import JournalBackend
from holomem.projections import checkpoint as codec
from holomem.projections.base import RecordStore
from holomem.projections.state import ProjectionState

log = logging.getLogger("holomem")

P_CKPT_LOADED = cp.point("checkpoint.loaded",
                         "open restored a checkpoint; the journal's tail is not replayed yet")

#: Journal bytes past the last checkpoint after which the writer starts a new one in
#: the background (``Store.open(checkpoint_every=...)``; None: only on close and
#: ``Store.checkpoint()``).
DEFAULT_EVERY = 64 * 1024 * 1024
#: On close, a checkpoint is written only if at least this many journal bytes are
#: not covered by one (or the automatic mark is passed): below it the tail replays
#: in milliseconds, and a file per tiny store is not worth its fsyncs.
DEFAULT_CLOSE_MIN = 256 * 1024


def check_options(every: int | None, close_min: int) -> None:
    """``invalid_request`` unless ``Store.open``'s checkpoint options are byte counts."""
    if every is not None and (not isinstance(every, int) or every < 1):
        raise InvalidError("checkpoint_every must be a positive number of bytes or None")
    if not isinstance(close_min, int) or close_min < 0:
        raise InvalidError("checkpoint_close_min must be a number of bytes >= 0")


class CheckpointStats(msgspec.Struct, frozen=True, kw_only=True):
    """What writing one checkpoint cost (``Store.checkpoint()``'s answer)."""

    #: the sequence number it holds the state of
    seq: int
    #: the file's name in the generation directory
    name: str
    file_bytes: int
    payload_bytes: int
    #: how long writers were held (the snapshot under the state lock), seconds
    pause_seconds: float
    #: the CPU time of that snapshot (on a loaded machine, much less than the above)
    pause_cpu_seconds: float
    #: the whole write, snapshot to directory fsync, seconds
    seconds: float


class Loaded(NamedTuple):
    state: ProjectionState
    seq: int
    path: str


class Found(NamedTuple):
    """What an open found: the checkpoint restored (None: the whole journal is
    replayed), and each one it did not use for a reason, as ``name: reason``."""

    loaded: Loaded | None
    ignored: tuple[str, ...]


def load(journal: JournalBackend, records: RecordStore, *, read_only: bool) -> Found:
    """The newest checkpoint of the live generation that is valid and bound to the
    journal, restored. Every other checkpoint found is reported with the reason (a
    warning, and :attr:`Found.ignored`), and the writer erases them and any
    interrupted temporary file.

    Errors: ``corrupt.truncated`` (the writer only, nothing erased) when a checkpoint
    past the journal's end proves its transactions were acknowledged
    (:func:`refuse_lost_tail`)."""
    gen_dir = journal.gen_dir
    found = ckfile.listing(gen_dir)
    if not read_only and journal.durable_local:
        refuse_lost_tail(journal, found)
    chosen: Loaded | None = None
    rejected: list[str] = []
    ignored: list[str] = []
    for seq, path in reversed(found):
        if chosen is not None:
            rejected.append(path)  # older than the one in use: replaced, not erased yet
            continue
        reason = _inconsistent(journal, seq)
        digest = journal.digest(seq) if reason is None else None
        if reason is None and digest is None:
            reason = "this journal keeps no checkpoint"
        if digest is not None:
            try:
                _, payload = ckfile.read(path, store_id=journal.store_id,
                                         generation=journal.generation, digest=digest,
                                         schema=codec.SCHEMA, envelope=journal.envelope)
                state = codec.restore(records, payload, writes_text=not read_only)
            except (ckfile.Invalid, ValueError) as exc:
                reason = str(exc)
            else:
                chosen = Loaded(state, seq, path)
                cp.hit(P_CKPT_LOADED)
                continue
        if read_only and seq > journal.last_seq:
            # A follower's journal is a view of the writer's as of its last look: a
            # checkpoint the writer wrote since is ahead of it, and nothing is wrong.
            log.info("checkpoint %s not used yet: %s", path, reason)
        else:
            log.warning("checkpoint %s ignored: %s", path, reason)
        ignored.append(f"{os.path.basename(path)}: {reason}")
        rejected.append(path)
    if not read_only:
        ckfile.erase([*rejected, *ckfile.leftovers(gen_dir)], gen_dir)
    return Found(chosen, tuple(ignored))


def refuse_lost_tail(journal: JournalBackend, found: list[tuple[int, str]]) -> None:
    """``corrupt.truncated`` if one of the checkpoints ``found`` (sequence number, path)
    is past the end of the writer's journal and proves it durable (:func:`ckfile.vouches
    <holomem.log.checkpoint.vouches>`): every checkpoint is written only after the
    journal's fsync through its sequence number (:func:`write`), so the journal has
    lost acknowledged transactions -- its last segment file, or its last frames, are
    gone. The file is the evidence: it is not erased.

    A checkpoint of a build before that rule (no flag), or one that does not read back
    as this store's, proves nothing: it is ignored as before. A follower never calls
    this: a checkpoint past its view of the journal is the writer's, newer."""
    last = journal.last_seq
    for seq, path in reversed(found):
        if seq <= last:
            return
        proven = ckfile.vouches(path, store_id=journal.store_id,
                                generation=journal.generation, envelope=journal.envelope)
        if proven is None or proven <= last:
            continue
        missing = (f"transaction {proven} is" if proven == last + 1
                   else f"transactions {last + 1} to {proven} are")
        raise TruncatedError(
            f"transactions up to {proven} were acknowledged (the checkpoint "
            f"{os.path.basename(path)} holds the state after {proven} and was written only "
            f"once they were durable), but the journal ends at transaction {last}: "
            f"{missing} missing, the journal's last segment file or its last frames "
            "deleted or lost. The store was not opened; the checkpoint is kept as the "
            "evidence. Restore the store from a backup; or run `python -m holomem.fsck "
            f"{journal.path} --salvage DEST` (with --key-file for an encrypted store) to "
            "copy every intact transaction into a new store; or, to give up those "
            f"transactions and open the journal as it is, delete {path}",
            path=path, offset=0, length=fs.path_size(path))


def _inconsistent(journal: JournalBackend, seq: int) -> str | None:
    if seq > journal.last_seq:
        return (f"it holds the state after transaction {seq}, past the journal's last "
                f"durable one, {journal.last_seq}")
    if seq < journal.first_seq - 1:
        return f"transaction {seq} is before this generation's first, {journal.first_seq}"
    return None


class Checkpointer:
    """The writer's checkpoints. ``lock`` is held while one is written, and by a
    compaction while it replaces the generation (so a checkpoint never lands in a
    generation being erased). ``current()`` answers the engine's state and revision;
    it is called, and ``tail`` kept, under the engine's ``state_lock``."""

    def __init__(self, journal: JournalBackend, state_lock: threading.RLock,
                 current: Callable[[], tuple[ProjectionState, int]], *, every: int | None,
                 close_min: int, seq: int, tail: int, written_at: float | None = None
                 ) -> None:
        if not journal.durable_local:
            # This opener's local files go when it closes (a stream store's node):
            # a checkpoint there would never be read.
            every, close_min = None, 2**62
        self.every = every
        self.close_min = close_min
        #: the sequence number of the newest checkpoint (0: none)
        self.seq = seq
        #: journal payload bytes applied since that checkpoint (kept under the state lock)
        self.tail = tail
        #: when that checkpoint was written, in seconds since the epoch (None: none)
        self.written_at = written_at
        self.lock = threading.Lock()
        self.last: CheckpointStats | None = None
        self._journal = journal
        self._state_lock = state_lock
        self._current = current
        self._stopped = False
        self._mu = threading.Lock()
        self._thread: threading.Thread | None = None

    def past_every(self) -> bool:
        return self.every is not None and self.tail >= self.every

    def due(self) -> bool:
        return self.past_every() and self._thread is None

    def start(self) -> None:
        """Write checkpoints in a background thread unless one already runs."""
        with self._mu:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="holomem-checkpoint",
                                            daemon=True)
            self._thread.start()

    def _run(self) -> None:
        try:
            self._background()
        finally:
            with self._mu:
                self._thread = None

    def stop(self) -> None:
        """The store is closing: no background checkpoint starts another; wait for it."""
        self._stopped = True
        thread = self._thread
        if thread is not None:
            thread.join()

    def write(self) -> CheckpointStats | None:
        """Write a checkpoint of the projections now (docs/guarantees.md §6a); None
        when the newest one already holds the current revision, or when the journal
        keeps none (a stream store: its node's files go when it closes). ``lock`` held.

        Writers wait only while the state is snapshotted (``pause_seconds``); the
        encoding and the file's writing and fsyncs run outside the lock. The file
        is never ahead of the durable journal: it waits for its revision's fsync
        first (with ``sync="none"``, it makes that fsync).
        """
        if not self._journal.durable_local:
            return None  # a checkpoint in files erased on close would never be read
        started = time.perf_counter()
        with self._state_lock:
            state, seq = self._current()
            if seq <= self.seq:
                return None
            cpu = time.thread_time()
            tail = self.tail
            parts = state.snapshot()
            cpu = time.thread_time() - cpu
        pause = time.perf_counter() - started
        stats = write(self._journal, parts, seq, pause=pause, pause_cpu=cpu, started=started)
        with self._state_lock:
            self.seq = seq
            self.tail -= tail
            self.written_at = time.time()
        self.last = stats
        return stats

    def on_close(self) -> None:
        """Close writes one when enough journal bytes are not covered by one."""
        if not (self.tail and (self.tail >= self.close_min or self.past_every())):
            return
        try:
            with self.lock:
                self.write()
        except Exception as exc:  # every write is durable already; the next open replays
            log.warning("no checkpoint written on closing %s: %s", self._journal.path, exc)

    def _background(self) -> None:
        try:
            # Again while writers kept the tail past the mark meanwhile (their commits
            # saw this thread running and started none).
            while self.past_every() and not self._stopped:
                with self.lock:
                    if self._stopped or self._journal.failed is not None:
                        return
                    if self.write() is None:
                        return
        except Exception as exc:  # the journal stays correct; the next attempt retries
            log.warning("automatic checkpoint of %s failed: %s", self._journal.path, exc)


def write(journal: JournalBackend, parts: dict[str, dict[str, object]], seq: int, *,
          pause: float, pause_cpu: float, started: float) -> CheckpointStats:
    """Encode ``parts`` (the state after transaction ``seq``), wait until ``seq`` is
    durable (a checkpoint is never ahead of the journal), write the file bound to the
    journal's digest up to ``seq``, and erase every other checkpoint of the generation.

    In every sync mode the file follows an fsync of the journal through ``seq``, and
    says so (the journal-synced flag, FORMAT.md §9.2): a checkpoint is then proof that
    those transactions were durable, and one past the journal's end after a crash
    means acknowledged transactions were lost (:func:`refuse_lost_tail`)."""
    journal.wait(seq)
    if journal.sync_mode == "none":
        # "none" acknowledged seq once written, before any fsync: a power cut could
        # still take it from the journal and leave this file ahead of it.
        journal.sync()
    digest = journal.digest(seq)
    assert digest is not None  # only a journal whose files stay is checkpointed
    gen_dir = journal.gen_dir
    payload = codec.encode(parts)
    written = ckfile.write(gen_dir, store_id=journal.store_id, generation=journal.generation,
                           seq=seq, digest=digest, schema=codec.SCHEMA,
                           envelope=journal.envelope, payload=payload, journal_synced=True)
    ckfile.erase([p for s, p in ckfile.listing(gen_dir) if s != seq], gen_dir)
    return CheckpointStats(seq=seq, name=os.path.basename(written.path),
                           file_bytes=written.size, payload_bytes=written.payload,
                           pause_seconds=round(pause, 6), pause_cpu_seconds=round(pause_cpu, 6),
                           seconds=round(time.perf_counter() - started, 6))
