"""A follower (``Store.open(read_only=True)``) catching up with the writer.

Owns: :func:`catch_up` — applying the writer's new transactions, or rebuilding from
the new generation when the writer switched (a compaction or purge). The engine
(:mod:`holomem.api.engine.core`) holds the locks and its state, and counts each
thread's ``reading()`` blocks so that a follower moves to a new generation only where
none holds the old state; it hands over how to apply a transaction and how to install
a rebuilt generation. Imports the log, the events, the projections' state and
:mod:`holomem.api.engine.replay`.
"""

from __future__ import annotations

from collections.abc import Callable

from holomem import events as ev
from holomem.api.engine.replay import build
from holomem.errors import UnavailableError
from holomem.events import Event
from holomem.log.backend import JournalBackend
from holomem.log.recordfile import RecordFile
from holomem.projections.state import ProjectionState


def catch_up(journal: JournalBackend, generation: int, revision: int,
             text: RecordFile | None, apply: Callable[[int, list[Event]], None],
             install: Callable[[ProjectionState, RecordFile, int], RecordFile | None]
             ) -> int:
    """Follower only: apply the writer's new transactions (those after ``revision``);
    return the new revision.

    If the writer switched to a new generation (compaction, purge), the follower
    rebuilds from it. A rebuild that fails (``unavailable``, ...) leaves the journal on
    the new generation and the engine's state on the old one: the next catch-up
    rebuilds again, and never applies one generation's transactions onto another's
    state (the engine's readers wait for it, see ``Engine.reading``). Errors:
    ``closed``, ``corrupt``, ``io``, ``unavailable`` (the generation kept being replaced
    while it was read, or the stream did not deliver; try again).

    The engine's state was built from ``generation`` and is at ``revision`` (``text``,
    its text segment); ``apply(seq, events)`` applies one transaction under its state
    lock, and ``install(state, text, last)`` swaps in a state rebuilt from the
    journal's live generation, answering the old text segment. The caller holds the
    engine's write lock.
    """
    result = journal.refresh()
    if not result.reset and journal.generation == generation:
        try:
            applied = revision
            # From the state's own revision on, wherever the journal stands: what the
            # state holds is never applied twice (a rebuild read past a follower's
            # stream tail), what a failed catch-up left out is not skipped.
            for seq, payloads in journal.replay(revision + 1):
                apply(seq, ev.decode_all(payloads, seq=seq))
                revision = seq
            if revision != applied and journal.local_text and text is not None:
                # A follower with its own text segment (a stream store's node)
                # zeroed what a forget removed: on its disk too before returning.
                text.sync()
            return revision
        except UnavailableError:
            # Replaced while being read: what was applied is a true prefix;
            # rebuild from the live generation instead.
            if not journal.replaced():
                raise
            journal.refresh()
    built = build(journal, read_only=True)
    old_text = install(built.state, built.text_file, built.last)
    # No reader holds the old state now (each holds the state lock for its
    # block): the generations it was read from can go.
    journal.release_retired()
    if old_text is not None:
        old_text.close()
    return built.last
