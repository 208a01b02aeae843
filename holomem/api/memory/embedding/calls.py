"""The call that rewrites every stored vector with the session's embedder: reembed
(docs/contract.md §4e).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Which embedder a session uses and the identity the store pins for it are
:mod:`.embedder`'s.
"""

from __future__ import annotations

from holomem.api.memory.embedding import embedder
from holomem.api.memory.progress import Progress, callback
from holomem.api.memory.session import Session
from holomem.errors import InvalidError


def reembed(s: Session, /, *, batch_size: int = embedder.REEMBED_BATCH,
            progress: Progress | None = None) -> int:
    """Rewrite every stored document's vector with this Memory's embedder, in place
    (order, text and ids unchanged), ``batch_size`` per transaction; the store
    records the new identity with the last batch. Resumable: after a crash, open
    again with ``reembed=True`` and call this again; it goes on where it stopped.
    Meanwhile semantic scores mix both models. Returns the documents rewritten.
    ``progress(n)``: the documents done so far, as they are embedded and after each
    batch is written.
    Limits: ``batch_size`` <= ``embedding.MAX_REEMBED_BATCH``.
    Errors: ``invalid_request`` (no embedder), ``conflict`` (another re-embed, to
    another embedder, began meanwhile), ``read_only``.
    """
    if s.embedder is None or s.pinned is None:
        raise InvalidError("reembed() needs a Memory with an embedder")
    done = embedder.reembed(s.store, s.embedder, s.pinned,
                             embedder.batch_size(batch_size), s.clock.now_ms,
                             callback(progress))
    return done
