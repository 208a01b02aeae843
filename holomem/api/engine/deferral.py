"""Commits whose durability the caller waits for itself: ``Engine.deferring()``.

Owns: :class:`Deferred` — what a ``deferring`` block records: the newest revision its
commits wrote and its reads saw, which the caller must wait to be durable before it
tells anyone of the block's results — and :class:`WouldBlock`, what a commit of a
block that may not wait raises when another writer or a reader holds the store.
Imports nothing.

Why: a caller that serves many requests on one thread (the HTTP server's event loop)
can then run a small write there and wait for its fsync without a thread of its own,
so that the requests of one group commit share one wait (holomem.api.memory.aiowait).
"""

from __future__ import annotations


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
