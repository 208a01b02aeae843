"""Journal backends: what the engine needs of a journal, and choosing one by path.

Owns: :class:`JournalBackend`, the interface both journals implement -- the segmented
files of a store directory (:class:`~holomem.log.journal.Journal`) and a NATS
JetStream stream (:class:`~holomem.log.stream.journal.StreamJournal`, for a
``nats://`` path) -- and :func:`open_journal`. Imports the standard library, the log,
and the stream journal only when a ``nats://`` path asks for it (the ``nats`` extra).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from holomem.errors import HolomemError, InvalidError, install_extra
from holomem.log.envelope import Envelope
from holomem.log.follower import Refreshed
from holomem.log.format import DEFAULT_SEGMENT_SIZE
from holomem.log.journal import Journal, JournalStats
from holomem.log.stream.url import is_stream


class RewriteTarget(Protocol):
    """A new generation being written by compaction."""

    @property
    def dir(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def last_seq(self) -> int: ...
    def append(self, payloads: Sequence[bytes]) -> int: ...
    def abandon(self) -> None: ...


class JournalBackend(Protocol):
    """A store's journal: transactions of opaque payloads, numbered, durable."""

    @property
    def path(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def sync_mode(self) -> str:
        """``"full"``, ``"batch"`` or ``"none"`` (``Store.open(sync=...)``): ``"none"``
        acknowledges a transaction once written, before any fsync."""
    @property
    def generation(self) -> int: ...
    @property
    def gen_dir(self) -> str: ...
    @property
    def first_seq(self) -> int: ...
    @property
    def last_seq(self) -> int: ...
    @property
    def durable_seq(self) -> int: ...
    @property
    def store_id(self) -> bytes: ...
    @property
    def envelope(self) -> Envelope | None: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def failed(self) -> HolomemError | None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def local_text(self) -> bool:
        """Whether this opener keeps (writes) its own text segment."""
    @property
    def durable_local(self) -> bool:
        """Whether files in :attr:`gen_dir` outlive this opener (worth checkpointing)."""
    def stats(self) -> JournalStats: ...
    def append(self, payloads: Sequence[bytes]) -> int: ...
    def enqueue(self, payloads: Sequence[bytes]) -> int: ...
    def wait(self, seq: int) -> None: ...
    def sync(self) -> None: ...
    def replay(self, from_seq: int = 0) -> Iterator[tuple[int, list[bytes]]]: ...
    def read(self, seq: int) -> list[bytes]: ...
    def digest(self, seq: int) -> bytes | None:
        """What a checkpoint of transaction ``seq`` is bound to: the journal's digest up
        to it (None: this journal keeps no checkpoint, and trusts none)."""
    def refresh(self) -> Refreshed: ...
    def replaced(self) -> bool: ...
    def release_retired(self) -> None: ...
    def begin_rewrite(self) -> Any: ...
    def refile(self, rewrite: Any, seqs: Sequence[int]) -> list[int]:
        """Carry transactions ``seqs`` (ascending) of this generation into ``rewrite``,
        each whole and unchanged, each the next transaction there; their new numbers."""
    def switch(self, rewrite: Any) -> str: ...
    def erase_generation(self, gen_dir: str, *, zero: bool) -> int: ...
    def close(self) -> None: ...


def open_journal(path: str | os.PathLike[str], *, key: bytes | None, sync: str,
                 segment_size: int = DEFAULT_SEGMENT_SIZE, read_only: bool = False,
                 create: bool = True) -> JournalBackend:
    """The journal at ``path``: a ``nats://`` address opens a stream journal, anything
    else a store directory. Errors: those of either journal's open; ``invalid_request``
    for a ``nats://`` path without the ``nats`` extra installed."""
    if is_stream(path):
        if segment_size != DEFAULT_SEGMENT_SIZE:
            raise InvalidError("segment_size does not apply to a nats:// store")
        try:
            from holomem.log.stream.journal import StreamJournal
        except ImportError as exc:
            raise InvalidError("a nats:// store needs the nats extra "
                               f"({install_extra('nats')}): {exc}") from exc
        return StreamJournal.open(str(path), key=key, sync=sync, read_only=read_only,
                                  create=create)
    return Journal.open(path, key=key, sync=sync, segment_size=segment_size,
                        read_only=read_only, create=create)
