"""The document engine's types: what ``Store`` takes and returns (docs/contract.md §2).

Owns: :class:`Document`, :class:`DocumentInput`, :class:`Hit`, :class:`StoreStats`,
:class:`StoreCounters`.
Imports msgspec only.
"""

from __future__ import annotations

from typing import Any

import msgspec


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
    #: how the last open rebuilt state: "replay" (the whole journal) or "checkpoint"
    #: (a checkpoint, then the journal's tail), with "+reconcile" when the text
    #: segment was checked against the journal (and repaired if needed)
    opened_by: str
    open_seconds: float
    #: the store's id (hex): every generation and backup of it carries it
    store_id: str = ""
    #: the sequence number of the newest checkpoint (0: none; docs/guarantees.md §6a)
    checkpoint_seq: int = 0
    #: journal payload bytes applied since it (what a reopen would replay)
    checkpoint_tail_bytes: int = 0
    #: each checkpoint the last open found and did not use, as "file name: reason" (of
    #: a copy of the store whose journal diverged, damaged, of another format...)
    checkpoints_ignored: tuple[str, ...] = ()


class StoreCounters(msgspec.Struct, frozen=True, kw_only=True):
    """What an open store handle did and holds, cheap to read at any moment
    (``Store.counters()``, for an operator's metrics): no lock is waited for, and the
    figures stay readable after ``close`` (the handle's last ones).

    The counts are since this handle opened the store, and only grow.
    """

    #: the write transactions the journal acknowledged (made durable; each is one
    #: write call: a remember of several facts is one)
    acknowledged_writes: int
    #: fsyncs of the journal's segment files (group commits, rotations, explicit
    #: syncs, the one at close); 0 on a ``nats://`` store, which makes none
    fsyncs: int
    #: the live generation's journal size, in bytes
    journal_bytes: int
    #: the revision (the last transaction applied)
    revision: int
    #: the sequence number of the newest checkpoint (0: none)
    checkpoint_seq: int
    #: journal payload bytes applied since it (what a reopen would replay)
    checkpoint_tail_bytes: int
    #: when it was written, in seconds since the epoch (None: no checkpoint)
    checkpoint_time: float | None
    read_only: bool
