"""Events: the only things ever written to the journal, and how they are encoded.

Owns: the event types, their tags, and their msgpack encoding. Imports msgspec and
:mod:`holomem.errors`. Projections dispatch on :data:`Event` with ``match``.

Evolution rules (STYLE.md §3): a tag is never reused or renamed; new fields go last
and have defaults; a field's type or meaning never changes. A change to how history
must be read gets a new tag *and* a bump of the journal's read version. Events do
not forbid unknown fields, so an older build skips fields a newer one added.

Encodings chosen for size and exactness: metadata is canonical JSON text (sorted
keys, no whitespace) so its bytes are stable; embeddings are little-endian float32
bytes, exactly what the projections hold.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from holomem.errors import CorruptError


class _Event(msgspec.Struct, frozen=True, kw_only=True, tag_field="t"):
    pass


# -- the document engine ---------------------------------------------------------------
class DocumentAdded(_Event, tag="doc.added", frozen=True, kw_only=True):
    """A document with a new id was stored."""

    id: str
    text: str
    metadata: bytes = b""  # canonical JSON of a dict, or empty
    embedding: bytes = b""  # float32 little-endian, or empty
    entities: tuple[str, ...] = ()


class DocumentReplaced(_Event, tag="doc.replaced", frozen=True, kw_only=True):
    """A document's text, metadata, embedding and entities were replaced as a whole."""

    id: str
    text: str
    metadata: bytes = b""
    embedding: bytes = b""
    entities: tuple[str, ...] = ()


class DocumentDeleted(_Event, tag="doc.deleted", frozen=True, kw_only=True):
    """A document was removed. Its text is zeroed in the text segment."""

    id: str


# -- the memory API -------------------------------------------------------------------
class FactAdded(_Event, tag="fact.added", frozen=True, kw_only=True):
    """The temporal part of a fact; the same transaction adds its document first.

    Times are integer milliseconds since the epoch; ``None`` means unset. Every
    supersession link is written once, here, on the newer fact's event:
    ``supersedes`` lists facts this one supersedes, ``superseded_by`` facts that
    supersede this one (a supersession policy's answer to an older fact arriving
    after a newer one). ``requested`` is the caller's own ``supersedes`` list, kept
    as given; ``digest`` identifies the caller's input, for idempotent retries.
    """

    id: str
    ingest_time: int
    subject: str | None = None
    event_time: int | None = None
    valid_from: int | None = None
    valid_to: int | None = None
    supersedes: tuple[str, ...] = ()
    superseded_by: tuple[str, ...] = ()
    requested: tuple[str, ...] = ()
    digest: bytes = b""
    confidence: float | None = None
    #: The namespace (docs/contract.md §4a): 0 to 8 strings; the empty tuple is the root.
    namespace: tuple[str, ...] = ()
    #: Time to live: the fact expires at ``ingest_time + ttl_ms`` (None: never by itself).
    ttl_ms: int | None = None
    #: A conversation turn (docs/contract.md §4g): (speaker, session, position), any of
    #: them None when not given; None when the fact has none of the three. One field,
    #: not three: every fact event pays for the key of an absent field.
    turn: tuple[str | None, str | None, int | None] | None = None


class FactsForgotten(_Event, tag="fact.forgotten", frozen=True, kw_only=True):
    """Facts removed by ``forget`` (their documents are deleted in the same transaction).

    ``relinks`` re-point links around removed facts: each is (successor,
    predecessor, known_at), a link that now holds directly.
    """

    ids: tuple[str, ...]
    time: int = 0
    relinks: tuple[tuple[str, str, int], ...] = ()


class FactLinks(_Event, tag="fact.links", frozen=True, kw_only=True):
    """Supersession links restored as they were: (successor, predecessor, known_at).

    Written by compaction, which re-creates every live fact in a new generation and
    must keep each link's own known-at time.
    """

    links: tuple[tuple[str, str, int], ...]


class FeedbackGiven(_Event, tag="fact.feedback", frozen=True, kw_only=True):
    """Whether a recalled fact helped: feeds its usefulness, never its confidence."""

    id: str
    helpful: bool
    time: int
    note: str | None = None


class ConfidenceSet(_Event, tag="fact.confidence", frozen=True, kw_only=True):
    """What the agent now believes of a fact, in [0, 1]; set only by an explicit call."""

    id: str
    confidence: float
    time: int


class StoreSettings(_Event, tag="store.settings", frozen=True, kw_only=True):
    """Settings the live state implies but no live document may carry any more.

    Written first by compaction: the embedding dimension stays fixed (docs/contract.md §2) even
    when no document with an embedding survives.
    """

    embedding_dim: int = 0


class ConfigRecorded(_Event, tag="memory.config", frozen=True, kw_only=True):
    """The memory configuration every door applies to this store (docs/contract.md §4c).

    ``config`` is the canonical JSON of a ``MemoryConfig`` (camelCase, sorted keys);
    a custom Python policy appears in it by name only. The last one recorded holds.
    """

    config: bytes
    time: int = 0


class VectorsSet(_Event, tag="doc.vectors", frozen=True, kw_only=True):
    """New embeddings for stored documents, in place: their slots, text and order do
    not change (a re-embed). ``vectors`` holds ``len(ids)`` float32 little-endian
    vectors of the store's dimension, back to back."""

    ids: tuple[str, ...]
    vectors: bytes


class EmbedderRecorded(_Event, tag="memory.embedder", frozen=True, kw_only=True):
    """The embedder whose vectors the store holds (docs/contract.md §4e): its identity as canonical
    JSON. ``pending``: a re-embed to this identity has begun and not finished (the
    identity in force stays the previous one until the same identity is recorded
    without ``pending``)."""

    identity: bytes
    pending: bool = False
    time: int = 0


class PurgeRequested(_Event, tag="store.purge", frozen=True, kw_only=True):
    """A compaction that erases removed text must run; finished on the next open if cut."""

    time: int = 0


# -- relations between facts ---------------------------------------------------------
class RelationAdded(_Event, tag="rel.added", frozen=True, kw_only=True):
    """A typed, directed link ``from_id -[relation]-> to_id`` between two stored facts.

    ``time`` is when the store learned it (the link's ingest time, milliseconds);
    ``metadata`` is canonical JSON of a dict, or empty. Compaction writes every live
    link again with its own time and metadata.
    """

    from_id: str
    to_id: str
    relation: str
    time: int
    metadata: bytes = b""


class RelationRemoved(_Event, tag="rel.removed", frozen=True, kw_only=True):
    """The link ``from_id -[relation]-> to_id`` was removed (``unrelate``)."""

    from_id: str
    to_id: str
    relation: str
    time: int = 0


Event = (
    DocumentAdded
    | DocumentReplaced
    | DocumentDeleted
    | FactAdded
    | FactsForgotten
    | FactLinks
    | FeedbackGiven
    | ConfidenceSet
    | StoreSettings
    | PurgeRequested
    | ConfigRecorded
    | VectorsSet
    | EmbedderRecorded
    | RelationAdded
    | RelationRemoved
)

_encoder = msgspec.msgpack.Encoder()
_decoder: msgspec.msgpack.Decoder[Event] = msgspec.msgpack.Decoder(Event)


def encode(event: Event) -> bytes:
    return _encoder.encode(event)


def encode_all(events: Sequence[Event]) -> list[bytes]:
    """``[encode(e) for e in events]``, without a Python call per event."""
    return list(map(_encoder.encode, events))


def decode_all(payloads: Sequence[bytes], *, seq: int = 0) -> list[Event]:
    """``[decode(p, seq=seq) for p in payloads]``, without a Python call per payload."""
    try:
        return list(map(_decoder.decode, payloads))
    except msgspec.DecodeError:
        pass
    return [decode(p, seq=seq) for p in payloads]  # raises for the first bad one


def decode(payload: bytes, *, seq: int = 0) -> Event:
    """Decode one journal payload. Errors: ``corrupt`` (an unknown or malformed event)."""
    try:
        return _decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise CorruptError(
            f"transaction {seq} holds an event this build cannot read: {exc}") from exc
