"""A Memory's embedder: which one, whether the store agrees, and re-embedding
(docs/contract.md §4e).

Owns: choosing the embedder (:func:`choose`: the caller's object, else the
configuration's name, else the built-in the store recorded) and checking its identity
(:func:`check_identity`: the limits a store records one within), pinning that identity
in the store (:func:`pin`: recorded by the first writer; another identity is a
``conflict``), embedding what a call did not bring a vector for (:func:`vectors`),
and the batches of a re-embed (:func:`reembed_step`), resumable after a crash: its
target is recorded first, each batch rewrites vectors in place, and the last one
records the new identity in the same transaction. Imports the embedders, the
engine, the events and the types.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from typing import NamedTuple

import msgspec
import numpy as np

from holomem.api.engine import Store, View, validate
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.progress import Progress, offset
from holomem.api.memory.remember.intake import Checked
from holomem.embedders import Embedder, EmbedderIdentity, by_name
from holomem.embedders.registry import NAMES
from holomem.errors import ConflictError, InvalidError
from holomem.events import EmbedderRecorded, Event, VectorsSet

log = logging.getLogger("holomem")

#: Facts a re-embed rewrites per transaction (by default), and at most.
REEMBED_BATCH = 256
MAX_REEMBED_BATCH = 4096
#: Texts per call of the embedder, so that a long batch reports its progress as it goes
#: (a text's vector never depends on the batch it is embedded in).
EMBED_CHUNK = 128
#: The longest name, digest or pooling an identity may give (characters).
MAX_IDENTITY_CHARS = 256
#: The widest vector an identity may give: the most numbers an embedding may hold.
MAX_DIM = validate.MAX_EMBEDDING_DIM
#: The most tokens an identity may say its embedder reads.
MAX_TOKENS = 2**31 - 1


def identity_json(identity: EmbedderIdentity) -> bytes:
    """An identity's canonical JSON: what the store records and compares."""
    return msgspec.json.encode(msgspec.to_builtins(identity), order="sorted")


def describe(raw: bytes) -> str:
    ident = msgspec.json.decode(raw)
    return f"{ident.get('name')!r} ({ident.get('dim')} dimensions, digest " \
           f"{str(ident.get('digest'))[:12]}…)"


def _encodable(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _text(value: object, field: str, *, empty: bool = False) -> None:
    if not isinstance(value, str) or (not value and not empty) \
            or len(value) > MAX_IDENTITY_CHARS or any(c < " " or c == "\x7f" for c in value) \
            or not _encodable(value):
        least = 0 if empty else 1
        raise InvalidError(f"the embedder's identity.{field} must be a string of {least} to "
                           f"{MAX_IDENTITY_CHARS} characters without control characters "
                           "that encodes as UTF-8 (no lone surrogate), "
                           f"not {repr(value)[:40]} ({type(value).__name__})")


def _whole(value: object, field: str, most: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise InvalidError(f"the embedder's identity.{field} must be a whole number from 1 "
                           f"to {most:,}, not {repr(value)[:40]} ({type(value).__name__})")


def check_identity(identity: object) -> EmbedderIdentity:
    """``identity``, checked to be one a store can record and an embedder can meet:
    ``name`` and ``digest`` 1 to :data:`MAX_IDENTITY_CHARS` characters, ``pooling`` at
    most that many, none with a control character or a lone surrogate; ``dim`` a whole
    number from 1 to :data:`MAX_DIM`; ``normalized`` a bool; ``max_tokens`` from 1 to
    :data:`MAX_TOKENS`.
    A Struct's constructor checks nothing, so ``EmbedderIdentity(dim=0)`` is only
    refused here, before anything is recorded. Errors: ``invalid_request``."""
    if not isinstance(identity, EmbedderIdentity):
        raise InvalidError("embedder must have an identity (EmbedderIdentity) and "
                           "embed(texts)")
    _text(identity.name, "name")
    _text(identity.digest, "digest")
    _text(identity.pooling, "pooling", empty=True)
    _whole(identity.dim, "dim", MAX_DIM)
    _whole(identity.max_tokens, "max_tokens", MAX_TOKENS)
    if not isinstance(identity.normalized, bool):
        raise InvalidError("the embedder's identity.normalized must be True or False, not "
                           f"{type(identity.normalized).__name__}")
    return identity


def already_recorded(identity: object, known: Sequence[bytes | None]) -> bool:
    """Whether ``identity`` is one the store recorded already (``known``: its
    embedder's and its re-embed target's). Such an identity is not held to
    :func:`check_identity`'s limits: a store an earlier version wrote with an identity
    outside them (an empty digest, no token limit) opens with its own embedder."""
    if not isinstance(identity, EmbedderIdentity) or not any(known):
        return False
    try:
        return identity_json(identity) in known
    except (TypeError, ValueError):  # not JSON at all: never recorded
        return False


def choose(given: object, config: MemoryConfig, recorded: bytes | None,
           known: Sequence[bytes | None] = ()) -> Embedder | None:
    """The embedder a Memory uses. ``recorded``: the identity whose built-in is used
    when neither ``given`` nor the configuration names one; ``known``: every identity
    the store recorded (see :func:`already_recorded`). Errors: ``invalid_request`` (not
    an embedder, an identity the store has not recorded outside
    :func:`check_identity`'s limits, an unknown name, a name that disagrees with the
    object), ``unavailable`` (a built-in whose model is not installed). A name given in
    place of the object (``"minilm"``) is the built-in of that name."""
    if isinstance(given, str):
        given = by_name(given)
    if given is not None:
        if not isinstance(given, Embedder):
            raise InvalidError("embedder must have an identity (EmbedderIdentity) and "
                               "embed(texts)")
        if not already_recorded(given.identity, known):
            check_identity(given.identity)
        if config.embedder is not None and config.embedder != given.identity.name:
            raise InvalidError(f"the configuration names embedder {config.embedder!r}, "
                               f"the embedder given is {given.identity.name!r}")
        return given
    if config.embedder is not None:
        return _built_in(config.embedder)
    if recorded is not None:
        name = msgspec.json.decode(recorded).get("name")
        if name in NAMES:
            return _built_in(name)
        log.warning("this store's vectors come from the embedder %s, which is not built "
                    "in: recall is lexical unless Memory(store, embedder=...) supplies it",
                    describe(recorded))
    return None


def _built_in(name: str) -> Embedder:
    """The built-in ``name``, its identity checked as a caller's would be."""
    embedder = by_name(name)
    check_identity(embedder.identity)
    return embedder


class Pinned(NamedTuple):
    """The embedder's identity as the store holds it."""

    mine: bytes  # canonical identity JSON of the Memory's embedder


def pin(view: View, embedder: Embedder, reembed: bool, now: int) -> list[Event]:
    """The event that records the embedder's identity on a store that has none (none
    if the store holds it already); run under the write lock by the Memory that opens,
    with the configuration's event, so that a refused Memory records neither.

    Errors: ``conflict`` when the store holds another embedder's vectors (or vectors
    of another dimension), or a re-embed is under way, and ``reembed`` is False.
    """
    mine = identity_json(embedder.identity)
    state = view.state
    if state.embedder == mine and state.reembed_target is None:
        return []
    dim = view.embedding_dim
    if dim and dim != embedder.identity.dim:
        # The projection's matrix has one width per generation: vectors of another
        # width go into a new store (export, then import with this embedder).
        raise ConflictError(
            f"this store holds {dim}-dimensional vectors; the embedder "
            f"{embedder.identity.name!r} gives {embedder.identity.dim}: a store keeps "
            "one dimension, so move the facts to a new store (export, then import "
            "with drop_embeddings=True into a Memory with this embedder)")
    if state.embedder is None and state.reembed_target is None:
        return [EmbedderRecorded(identity=mine, time=now)]
    if reembed:
        return []
    target = state.reembed_target
    if target is None:
        assert state.embedder is not None  # (neither is None: handled above)
        raise ConflictError(
            f"this store's vectors come from the embedder {describe(state.embedder)}, not "
            f"{describe(mine)}: pass reembed=True and call reembed() to rewrite "
            "every vector with this one")
    # A re-embed that stopped before its end: the vectors are partly the target's.
    def this(raw: bytes | None) -> str:
        return " (this one)" if raw == mine else ""

    was = f"from the embedder {describe(state.embedder)} " if state.embedder else ""
    raise ConflictError(
        f"a re-embed of this store's vectors {was}to {describe(target)} is under way: "
        "it stopped before its end, so the vectors are partly each embedder's. To "
        f"finish it, open with the embedder it goes to{this(target)} and reembed=True, "
        "then call reembed()" + (f"; to go back, do the same with the one it started "
                                 f"from{this(state.embedder)}" if state.embedder else ""))


def pinned(embedder: Embedder) -> Pinned:
    """The identity :func:`pin` records for ``embedder``."""
    return Pinned(identity_json(embedder.identity))


def check_current(view: View, pinned: Pinned) -> None:
    """Refuse to mix vectors: ``conflict`` unless the store's vectors are this
    embedder's (or a re-embed to it is under way, whose new facts are its own)."""
    state = view.state
    if state.embedder == pinned.mine and state.reembed_target is None:
        return
    if state.reembed_target == pinned.mine:
        return
    held = state.reembed_target or state.embedder
    raise ConflictError(
        f"this store's vectors are not those of {describe(pinned.mine)}"
        + (f" but of {describe(held)}" if held else "")
        + ": call reembed() first")


def vectors(embedder: Embedder, texts: Sequence[str], progress: Progress | None = None
            ) -> np.ndarray:
    """``embedder.embed`` of ``texts``, :data:`EMBED_CHUNK` at a time, checked: float32
    ``[len(texts), dim]``, finite; ``progress(n)`` after each chunk, n the texts
    embedded so far. Errors: ``invalid_request`` naming what the embedder got wrong."""
    parts = []
    for start in range(0, len(texts), EMBED_CHUNK):
        parts.append(_checked(embedder, texts[start:start + EMBED_CHUNK]))
        if progress is not None:
            progress(start + len(parts[-1]))
    if not parts:  # (int: an identity recorded before the limits may give 8.0)
        return np.zeros((0, int(embedder.identity.dim)), dtype=np.float32)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _checked(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    name = embedder.identity.name
    got = embedder.embed(list(texts))
    try:
        out = np.asarray(got)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise InvalidError(f"the embedder {name!r} returned something that is not an "
                           f"array of numbers: {exc}") from exc
    want = (len(texts), embedder.identity.dim)
    if out.shape != want:
        raise InvalidError(f"the embedder {name!r} returned an array of "
                           f"shape {out.shape}, not {want}")
    if out.dtype.kind not in "iuf":  # (booleans, strings, dates, objects: as a caller's)
        raise InvalidError(f"the embedder {name!r} returned items of type {out.dtype}, "
                           "not numbers")
    with np.errstate(over="ignore"):
        out = out.astype("<f4", copy=False)
    if not np.isfinite(out).all() or not np.abs(out).sum(axis=1).all():
        raise InvalidError(f"the embedder {name!r} returned a vector "
                           "that is not finite, or all zeros")
    return out


def fill(checked: list[Checked], embedder: Embedder, progress: Progress | None = None
         ) -> tuple[list[Checked], bool]:
    """``checked`` with a vector for every input that brought none (a caller's vector
    wins; ``progress`` as :func:`vectors`'); whether any was embedded. The payload
    digest is the caller's input's, so a retry of the same input is still recognised."""
    todo = [i for i, c in enumerate(checked) if c.vector is None]
    if not todo:
        return checked, False
    vecs = vectors(embedder, [checked[i].input.text for i in todo], progress)
    out = list(checked)
    for row, i in enumerate(todo):
        # The embedder's vector, checked by vectors(): carried as it is (the input
        # itself still brings none, so the digest stays the caller's input's).
        out[i] = checked[i]._replace(vector=vecs[row])
    return out, True


def query_vector(embedder: Embedder, query: str) -> list[float]:
    return vectors(embedder, [query])[0].tolist()  # type: ignore[no-any-return]


def recorded(view: View) -> EmbedderIdentity | None:
    """The identity of the embedder whose vectors the store holds (None: none yet)."""
    raw = view.state.embedder
    return msgspec.json.decode(raw, type=EmbedderIdentity) if raw is not None else None


class Batch(NamedTuple):
    """The next documents a re-embed rewrites: (slot, id, text) each, found from slot
    ``start`` on."""

    items: list[tuple[int, str, str]]
    start: int


def batch_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidError("batch_size must be a positive integer")
    if value > MAX_REEMBED_BATCH:
        raise InvalidError(f"batch_size is at most {MAX_REEMBED_BATCH}")
    return value


def start(view: View, pinned: Pinned, now: int) -> list[Event]:
    """The event that begins a re-embed to ``pinned`` (none if it is under way or not
    needed)."""
    state = view.state
    if state.reembed_target == pinned.mine:
        return []
    if state.embedder == pinned.mine and state.reembed_target is None:
        return []
    return [EmbedderRecorded(identity=pinned.mine, pending=True, time=now)]


def next_batch(view: View, size: int, after: int) -> Batch:
    """At most ``size`` live documents from slot ``after`` on (or from where the
    recorded re-embed got to, if further: a resumed re-embed skips what it did)."""
    live = view.live_slots()
    cursor = max(after, view.state.reembed_cursor)
    todo = live[np.searchsorted(live, cursor):][:size]
    return Batch([(int(s), view.id_of(int(s)), view.record(int(s)).text) for s in todo],
                 cursor)


def write(view: View, pinned: Pinned, batch: Batch, vecs: np.ndarray, now: int
          ) -> tuple[list[Event], bool]:
    """Events that store ``vecs`` for the documents of ``batch`` still in their slots,
    and, when no live document is left after them, the new identity; (events, done).
    Under the write lock. A re-embed another Memory finished meanwhile: nothing to
    write; one it turned to another embedder: ``conflict``."""
    if view.state.reembed_target != pinned.mine:
        if view.state.embedder == pinned.mine:
            return [], True
        raise ConflictError("another re-embed, to another embedder, began meanwhile")
    ids, rows = [], []
    for i, (slot, doc_id, _text) in enumerate(batch.items):
        if view.slot(doc_id) == slot:
            ids.append(doc_id)
            rows.append(vecs[i])
    events: list[Event] = []
    if ids:
        events.append(VectorsSet(ids=tuple(ids), vectors=np.stack(rows).astype("<f4")
                                 .tobytes()))
    end = batch.items[-1][0] + 1 if batch.items else batch.start
    live = view.live_slots()
    done = not len(live) or int(live[-1]) < end
    if done:
        events.append(EmbedderRecorded(identity=pinned.mine, time=now))
    return events, done


class _Step:
    """One re-embed transaction: ``build`` runs under the write lock."""

    def __init__(self, pinned: Pinned, batch: Batch, vecs: np.ndarray, now: int) -> None:
        self.pinned, self.batch, self.vecs, self.now = pinned, batch, vecs, now
        self.done = False

    def build(self, view: View) -> list[Event]:
        events, self.done = write(view, self.pinned, self.batch, self.vecs, self.now)
        return events


def reembed(store: Store, embedder: Embedder, pinned: Pinned, size: int,
            now: Callable[[], int], progress: Progress | None) -> int:
    """Rewrite every live document's vector (see ``Memory.reembed``); returns how many."""
    store.commit(lambda view: start(view, pinned, now()))
    after = done = 0
    while True:
        batch = store.read(functools.partial(next_batch, size=size, after=after))
        vecs = vectors(embedder, [t for _, _, t in batch.items], offset(progress, done))
        step = _Step(pinned, batch, vecs, now())
        store.commit(step.build)
        done += len(batch.items)
        if progress is not None:
            progress(done)
        if step.done:
            return done
        after = batch.items[-1][0] + 1 if batch.items else batch.start
