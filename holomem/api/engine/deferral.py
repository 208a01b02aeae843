"""Commits whose durability the caller waits for itself: ``Engine.deferring()``, and who
hears of a commit when.

Owns: :class:`Deferred` — what a ``deferring`` block records: the newest revision its
commits wrote and its reads saw, which the caller must wait to be durable before it
tells anyone of the block's results — :class:`WouldBlock`, what a commit of a
block that may not wait raises when another writer or a reader holds the store — and
:class:`Deferrals`: each thread's block, and the listeners of ``Engine.subscribe``,
who hear of a commit once it is durable (of a deferred one, once a wait saw it so).
Imports the standard library, the events' type and the journal's interface.

Why: a caller that serves many requests on one thread (the HTTP server's event loop)
can then run a small write there and wait for its fsync without a thread of its own,
so that the requests of one group commit share one wait (holomem.api.memory.aiowait).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

from holomem.errors import InvalidError
from holomem.events import Event
from holomem.log.backend import JournalBackend


class WouldBlock(Exception):
    """A commit in a ``deferring(blocking=False)`` block would have waited for a lock:
    it wrote nothing (raised before its transaction took a place in the journal).
    Run the call where it may wait."""


class Deferred:
    """A ``deferring`` block in progress on one thread, for one store."""

    __slots__ = ("blocking", "revision")

    def __init__(self, *, blocking: bool) -> None:
        #: whether a commit may wait for the store's locks (else :class:`WouldBlock`)
        self.blocking = blocking
        #: the newest revision the block wrote or read (0: none): wait for it to be
        #: durable before anyone learns of what the block did or saw
        self.revision = 0

    def saw(self, revision: int) -> None:
        self.revision = max(self.revision, revision)


class Deferrals:
    """One store's ``deferring`` blocks (``local.block``: this thread's, absent: none)
    and its listeners, with the deferred commits they have not heard of yet."""

    def __init__(self, journal: JournalBackend) -> None:
        #: ``.block``: this thread's :meth:`block` (absent: none)
        self.local = threading.local()
        self.listeners: list[Callable[[int, list[Event]], None]] = []
        #: deferred commits not yet durable, whose listeners have not heard of them
        self.unheard: list[tuple[int, list[Event]]] = []
        self._unheard_lock = threading.Lock()
        self._journal = journal

    @contextlib.contextmanager
    def block(self, *, blocking: bool) -> Iterator[Deferred]:
        """A block, on this thread, whose commits and reads do not wait for durability.

        A commit returns once its transaction has its place in the journal and is
        applied; a read answers without waiting for the writes it saw. The
        :class:`Deferred` yielded records the newest revision either touched: the caller
        must not tell anyone of what the block did or saw before
        :meth:`wait_durable` of it returned (that is how nothing unsynced ever
        escapes). Listeners of :meth:`subscribe` hear of a deferred commit once a
        wait (this block's or any later one) has seen it durable. With
        ``blocking=False`` a commit that would wait for the store's locks (another
        writer, a reader holding the state) raises
        :class:`~holomem.api.engine.deferral.WouldBlock` and writes nothing. Blocks do
        not nest.
        """
        if getattr(self.local, "block", None) is not None:
            raise InvalidError("deferring blocks do not nest")
        block = self.local.block = Deferred(blocking=blocking)
        try:
            yield block
        finally:
            self.local.block = None

    def hold(self, seq: int, events: list[Event]) -> None:
        """A deferred commit: its listeners hear of it once a wait saw it durable."""
        with self._unheard_lock:
            self.unheard.append((seq, events))

    def wait_durable(self, revision: int) -> None:
        """``Engine.wait_durable``: then listeners hear of the deferred commits it covers."""
        if revision > self._journal.durable_seq:
            self._journal.wait(revision)
        if self.unheard:
            self.tell_durable()

    def tell(self, seq: int, events: list[Event]) -> None:
        """Listeners hear of a durable transaction; deferred ones it covers first."""
        if self.unheard:
            self.tell_durable()
        for listener in list(self.listeners):
            listener(seq, events)

    def tell_durable(self) -> None:
        durable = self._journal.durable_seq
        with self._unheard_lock:
            ready = [told for told in self.unheard if told[0] <= durable]
            self.unheard = [told for told in self.unheard if told[0] > durable]
        for seq, events in ready:
            for listener in list(self.listeners):
                listener(seq, events)
