"""Building a generation's projections from its journal, and trusting its text segment.

Owns: the replay of a whole generation into fresh projections (:func:`build`), the
decoded transactions of a stretch of the journal (:func:`transactions`),
the reconciliation of the text segment with what the journal says it must hold,
and the retries of a follower whose generation the writer replaces while it
replays. Imports the log and the projections; the file of the text segment is a
:class:`~holomem.log.recordfile.RecordFile` opened here.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
from collections.abc import Iterator
from typing import NamedTuple

from holomem import events as ev
from holomem.api.engine import checkpointing
from holomem.api.engine.view import Transactions
from holomem.errors import UnavailableError
from holomem.log import fs
from holomem.log.backend import JournalBackend
from holomem.log.format import TEXT_FILE
from holomem.log.recordfile import RecordFile
from holomem.projections.state import ProjectionState

log = logging.getLogger("holomem")

#: How many times in a row a follower rebuilds because the writer replaced the
#: generation it was reading, before it reports the store unavailable.
FOLLOW_RETRIES = 64


class Built(NamedTuple):
    state: ProjectionState
    text_file: RecordFile
    #: the sequence number of the last transaction replayed
    last: int
    #: True when the text segment had to be checked against the journal
    reconciled: bool
    #: the sequence number of the checkpoint restored (0: the whole journal replayed)
    checkpoint: int = 0
    #: journal payload bytes replayed after it (the tail a new checkpoint would cover)
    tail: int = 0
    #: each checkpoint found and not used, as ``name: reason``
    ignored: tuple[str, ...] = ()
    #: when the checkpoint restored was written (its file's time; None: none restored)
    checkpoint_time: float | None = None

    @property
    def opened_by(self) -> str:
        """How the state was rebuilt (``StoreStats.opened_by``)."""
        how = "checkpoint" if self.checkpoint else "replay"
        return how + "+reconcile" if self.reconciled else how


def text_file(journal: JournalBackend, directory: str, generation: int, *, read_only: bool,
              salt: int | None = None) -> RecordFile:
    """The text segment of the generation in ``directory`` (created, by a writer, with
    ``salt`` when given: see :class:`RecordFile`)."""
    return RecordFile(os.path.join(directory, TEXT_FILE), store_id=journal.store_id,
                      generation=generation, envelope=journal.envelope, read_only=read_only,
                      salt=salt)


def build(journal: JournalBackend, *, read_only: bool) -> Built:
    """Replay the whole live generation into fresh projections.

    On a follower, a compaction may replace the generation while it is replayed
    (its files zeroed and unlinked: ``unavailable`` from the journal); then the
    journal moves to the live generation and the replay starts again there.
    """
    for _ in range(FOLLOW_RETRIES):
        try:
            return _build_once(journal, read_only=read_only)
        except UnavailableError:
            if not read_only or not journal.replaced():
                raise
            journal.refresh()  # resets to the live generation
    raise UnavailableError(f"the store at {journal.path!r} changed generation "
                           f"{FOLLOW_RETRIES} times while a follower rebuilt; try again")


def transactions(journal: JournalBackend, from_seq: int, last: int
                 ) -> Iterator[tuple[int, list[ev.Event]]]:
    """The journal's transactions from ``from_seq`` up to ``last``, decoded. Nothing
    past ``last`` is read to its end (a stream follower's replay that reads to the end
    moves its tail past it: see ``StreamJournal.replay``)."""
    if from_seq > last:
        return
    for seq, payloads in journal.replay(from_seq):
        if seq > last:
            break
        yield seq, ev.decode_all(payloads, seq=seq)


def _build_once(journal: JournalBackend, *, read_only: bool) -> Built:
    # A follower of a store directory never writes its text segment, not even after
    # refresh(): it keeps computing placements (the same as the writer's) and reads the
    # writer's records. On a stream every node writes its own (journal.local_text).
    own = journal.local_text
    records = text_file(journal, journal.gen_dir, journal.generation, read_only=not own)
    try:
        found = checkpointing.load(journal, records, read_only=read_only)
        loaded = found.loaded
        if loaded is not None:
            state, last = loaded.state, loaded.seq
        else:
            state = ProjectionState(records, writes_text=own)
            # Not 0: a generation compacted from a store with nothing live holds no
            # event, yet the revision must not go back to before the events it replaced.
            last = journal.first_seq - 1
        tail = 0
        with state.replaying():
            for seq, payloads in journal.replay(last + 1):
                state.apply_all(seq, ev.decode_all(payloads, seq=seq))
                tail += sum(map(len, payloads))
                last = seq
    except BaseException:
        records.close()
        raise
    reconciled = False if not own else _reconcile_text(journal, state, records, last)
    _trim_heap()
    return Built(state, records, last, reconciled,
                 checkpoint=loaded.seq if loaded is not None else 0, tail=tail,
                 ignored=found.ignored,
                 checkpoint_time=fs.modified(loaded.path) if loaded is not None else None)


def _reconcile_text(journal: JournalBackend, state: ProjectionState, records: RecordFile,
                    last: int) -> bool:
    """Make the text segment hold exactly the live records; False if it was trusted."""
    if not records.rebuilt and records.synced_seq == last and records.size() == state.text.end:
        return False  # sealed after the last event: trusted as is
    transactions = Transactions(journal)
    rewritten, zeroed = state.text.reconcile(
        records.read_all(), state.catalog.alive.view(), state.catalog.seq.view(),
        state.catalog.ids, lambda slot: transactions.document(state, slot))
    if records.size() != state.text.end:
        # Cut stale bytes past the end, or extend with zeros when the last
        # records belong to removed documents (so the next open trusts the file).
        records.truncate(state.text.end)
    records.seal(last)
    if (rewritten or zeroed) and not records.rebuilt:
        log.warning("text segment repaired from the journal: %d records rewritten, "
                    "%d stale ranges zeroed", rewritten, zeroed)
    return True


def _trim_heap() -> None:
    """Hand the heap that replay's temporaries freed back to the OS (glibc keeps it)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)
