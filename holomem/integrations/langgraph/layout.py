"""How a :class:`~holomem.integrations.langgraph.saver.HolomemSaver` lays LangGraph's
checkpoints out as holomem facts.

Owns: the namespaces (one per thread, and under it one per checkpoint namespace), the
reserved subjects, the fact ids, and the encoding of a serialized value (LangGraph's
``serde.dumps_typed`` pair: a type name and bytes) as base64 slices in the metadata of
one or more facts (:func:`pack`, :func:`unpack`). Imports the engine's checks and the
memory API's input type; it knows nothing of LangGraph's classes.

The layout (README, "LangGraph checkpoints"):

- A thread lives in the namespace ``(*base, thread_id)``; a checkpoint namespace of
  the thread (``""`` for the root graph, ``"node:task"`` for a subgraph) in
  ``(*base, thread_id, "ns:" + checkpoint_ns)``. So forgetting the thread's namespace
  forgets all of it.
- A checkpoint is a *head* fact of subject :data:`HEAD` (its id, parent, run,
  serialized metadata, and the serialized checkpoint's first slice of at most
  :data:`SLICE_CHARS` base64 characters), followed, when the checkpoint is larger,
  by *parts*: facts of subject :data:`PART` holding the next slices. A pending write
  is one fact of subject ``WRITES + checkpoint_id`` holding the value's first slice,
  followed by parts when the value is larger. The subjects are reserved
  (``holomem:``), so recall, list and consolidation of other doors never see these
  facts.
- The heads of a checkpoint namespace are one supersession chain: a new head
  supersedes the newest head when that one is older (by checkpoint id), so the newest
  checkpoint is always a current head (the only one, unless heads were put out of
  order), found without reading the others, and ``Memory.history`` of a head shows
  the namespace's checkpoints.
- Ids are derived from the base, thread, checkpoint namespace and checkpoint id (and
  task id and write index): a retry of a put writes nothing twice.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from typing import Any, NamedTuple

from holomem.api.engine import validate
from holomem.api.memory.types import RememberInput
from holomem.errors import CorruptError, InvalidError, LimitError

#: The metadata key that marks a saver's fact; its value is the layout's format, 1.
MARK = "$langgraph.saver"
FORMAT = 1
#: The subjects of a checkpoint's head, of a slice of a larger value, and (followed by
#: the checkpoint id) of a checkpoint's pending writes.
HEAD = "holomem:langgraph/checkpoint"
PART = "holomem:langgraph/part"
WRITES = "holomem:langgraph/writes/"
#: The base64 characters of one slice: its fact's metadata stays under holomem's 64 KiB.
SLICE_CHARS = 60_000
#: The largest serialized checkpoint or write value (the bytes ``dumps_typed`` gives).
MAX_VALUE_BYTES = 32 << 20
#: The largest serialized checkpoint metadata (it lives whole in the head).
MAX_METADATA_BYTES = 40_000
#: The label prefix of a checkpoint namespace under its thread's namespace.
NS_PREFIX = "ns:"
TEXTS = {HEAD: "langgraph checkpoint", PART: "langgraph checkpoint part",
         WRITES: "langgraph pending write"}


class Place(NamedTuple):
    """Where one checkpoint namespace of one thread lives."""

    base: tuple[str, ...]
    thread: str
    ns: str

    @property
    def namespace(self) -> list[str]:
        return [*self.base, self.thread, NS_PREFIX + self.ns]

    def digest(self, *more: object) -> str:
        key = json.dumps([list(self.base), self.thread, self.ns, *more], ensure_ascii=False)
        return hashlib.sha256(key.encode("utf-8")).hexdigest()[:40]

    def head_id(self, checkpoint_id: str) -> str:
        return f"lgc-{self.digest(checkpoint_id)}"

    def write_id(self, checkpoint_id: str, task_id: str, idx: int, value: str = "") -> str:
        return f"lgw-{self.digest(checkpoint_id, task_id, idx, value)}"


def thread_label(base: Sequence[str], thread_id: object) -> str:
    """The namespace label of a thread: its id as a string, checked as holomem's."""
    if thread_id is None or isinstance(thread_id, (bytes, dict, list, tuple)):
        raise InvalidError("config['configurable']['thread_id'] must be a string, got "
                           f"{type(thread_id).__name__}")
    label = validate.doc_id(str(thread_id), "thread_id")
    return label


def ns_label(checkpoint_ns: object) -> str:
    if not isinstance(checkpoint_ns, str):
        raise InvalidError(f"checkpoint_ns must be a string, got {type(checkpoint_ns).__name__}")
    validate.doc_id(NS_PREFIX + checkpoint_ns, "checkpoint_ns")
    return checkpoint_ns


def checkpoint_id(value: object, what: str = "checkpoint_id") -> str:
    if not isinstance(value, str):
        raise InvalidError(f"{what} must be a string, got {type(value).__name__}")
    validate.doc_id(WRITES + value, what)  # it ends a subject: the same rules and length
    return value


def namespace_of_thread(base: Sequence[str], thread: str) -> list[str]:
    return [*base, thread]


def place_of(base: Sequence[str], namespace: Sequence[str]) -> Place | None:
    """The Place a fact's namespace names, or None when it is no saver namespace."""
    n = len(base)
    if len(namespace) != n + 2 or tuple(namespace[:n]) != tuple(base):
        return None
    label = namespace[n + 1]
    if not label.startswith(NS_PREFIX):
        return None
    return Place(tuple(base), namespace[n], label[len(NS_PREFIX):])


# -- values in slices -------------------------------------------------------------------
def slices(raw: bytes, what: str) -> list[str]:
    """``raw`` as base64 slices of at most :data:`SLICE_CHARS` characters (one, maybe
    empty, for an empty value)."""
    if len(raw) > MAX_VALUE_BYTES:
        raise LimitError(f"{what} is {len(raw)} bytes serialized; a HolomemSaver keeps at "
                         f"most {MAX_VALUE_BYTES}")
    text = base64.b64encode(raw).decode("ascii")
    return [text[i:i + SLICE_CHARS] for i in range(0, len(text), SLICE_CHARS)] or [""]


def decoded(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        raise CorruptError(f"{what}: a stored slice is not base64 ({exc})") from exc


def joined(pieces: Sequence[str], size: int, what: str) -> bytes:
    raw = decoded("".join(pieces), what)
    if len(raw) != size:
        raise CorruptError(f"{what}: {len(raw)} bytes stored, {size} expected (a part is "
                           "missing or was changed by hand)")
    return raw


def part_id(owner: str, index: int) -> str:
    return f"{owner}-{index}"


def part_inputs(owner: str, pieces: Sequence[str], namespace: list[str],
                first: int) -> list[RememberInput]:
    """The part facts of ``owner`` holding ``pieces`` (numbered from ``first``)."""
    return [RememberInput(id=part_id(owner, first + i), text=TEXTS[PART], subject=PART,
                          namespace=namespace,
                          metadata={MARK: FORMAT, "owner": owner, "part": first + i,
                                    "data": piece})
            for i, piece in enumerate(pieces)]


def head_inputs(place: Place, cid: str, parent: str | None, typed: tuple[str, bytes],
                meta: tuple[str, bytes], run_id: object,
                supersedes: list[str] | None = None) -> list[RememberInput]:
    """A checkpoint's head (the checkpoint's first slice inline) and parts; the head
    supersedes the heads in ``supersedes`` (the namespace's newest, when older)."""
    if len(meta[1]) > MAX_METADATA_BYTES:
        raise LimitError(f"the metadata of checkpoint {cid!r} is {len(meta[1])} bytes "
                         f"serialized; a HolomemSaver keeps at most {MAX_METADATA_BYTES}")
    hid = place.head_id(cid)
    pieces = slices(typed[1], f"checkpoint {cid!r}")
    metadata: dict[str, Any] = {
        MARK: FORMAT, "checkpoint_id": cid, "parent": parent, "type": typed[0],
        "parts": len(pieces), "size": len(typed[1]), "meta_type": meta[0],
        "meta": base64.b64encode(meta[1]).decode("ascii"),
        "run_id": run_id if isinstance(run_id, str) else None, "data": pieces[0]}
    head = RememberInput(id=hid, text=TEXTS[HEAD], subject=HEAD, namespace=place.namespace,
                         metadata=metadata, supersedes=supersedes or None)
    return [head, *part_inputs(hid, pieces[1:], place.namespace, 1)]


def write_inputs(place: Place, cid: str, task_id: str, task_path: str, idx: int,
                 channel: str, typed: tuple[str, bytes], wid: str) -> list[RememberInput]:
    """A pending write's fact (its value's first slice inline) and its parts."""
    pieces = slices(typed[1], f"the write of {channel!r}")
    metadata: dict[str, Any] = {
        MARK: FORMAT, "checkpoint_id": cid, "task_id": task_id, "task_path": task_path,
        "idx": idx, "channel": channel, "type": typed[0], "parts": len(pieces),
        "size": len(typed[1]), "data": pieces[0]}
    fact = RememberInput(id=wid, text=TEXTS[WRITES], subject=WRITES + cid,
                         namespace=place.namespace, metadata=metadata)
    return [fact, *part_inputs(wid, pieces[1:], place.namespace, 1)]


def write_value_key(idx: int, raw: bytes) -> str:
    """What a write's id holds of its value: nothing for an index >= 0 (a retry is the
    same fact), a digest for a special write (index < 0), whose new value replaces the
    stored one and so needs a fact of its own."""
    return "" if idx >= 0 else hashlib.sha256(raw).hexdigest()[:16]


class Head(NamedTuple):
    """A head fact read back."""

    id: str
    checkpoint_id: str
    parent: str | None
    type: str
    parts: int
    size: int
    meta: tuple[str, bytes]
    run_id: str | None
    first: str


class Write(NamedTuple):
    """A pending write's fact read back (its value not yet joined)."""

    id: str
    task_id: str
    task_path: str
    idx: int
    channel: str
    type: str
    parts: int
    size: int
    first: str


def _field(meta: dict[str, Any], name: str, kind: type | tuple[type, ...], fid: str) -> Any:
    value = meta.get(name)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise CorruptError(f"fact {fid!r} is a HolomemSaver fact without a valid {name!r}")
    return value


def read_head(fid: str, meta: dict[str, Any] | None) -> Head | None:
    """The head a fact's metadata holds, or None when it is not a saver head."""
    if not meta or meta.get(MARK) != FORMAT or "meta" not in meta:
        return None
    parent = meta.get("parent")
    run = meta.get("run_id")
    raw = decoded(_field(meta, "meta", str, fid), f"the metadata of {fid!r}")
    return Head(fid, _field(meta, "checkpoint_id", str, fid),
                parent if isinstance(parent, str) else None, _field(meta, "type", str, fid),
                _field(meta, "parts", int, fid), _field(meta, "size", int, fid),
                (_field(meta, "meta_type", str, fid), raw),
                run if isinstance(run, str) else None, _field(meta, "data", str, fid))


def read_write(fid: str, meta: dict[str, Any] | None) -> Write | None:
    if not meta or meta.get(MARK) != FORMAT or "channel" not in meta:
        return None
    return Write(fid, _field(meta, "task_id", str, fid), _field(meta, "task_path", str, fid),
                 _field(meta, "idx", int, fid), _field(meta, "channel", str, fid),
                 _field(meta, "type", str, fid), _field(meta, "parts", int, fid),
                 _field(meta, "size", int, fid), _field(meta, "data", str, fid))


def read_part(fid: str, meta: dict[str, Any] | None) -> str:
    if not meta or meta.get(MARK) != FORMAT:
        raise CorruptError(f"fact {fid!r} is not a HolomemSaver part")
    data: str = _field(meta, "data", str, fid)
    return data
