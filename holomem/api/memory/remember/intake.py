"""What is checked of a remember's input before the store is consulted, and what it
derives from the input alone (docs/contract.md §3, §4).

Owns: :class:`Checked` and the checks (:func:`check`, :func:`check_all`, a column at a
time for plain inputs: :func:`convert_all`, :func:`plain_digests`), the canonical
payload and its digest (:func:`digest`: what an identical retry is recognised by, and
what an import computes for a record that brings none; :func:`legacy_digest`, the
digest the versions before digest 2 gave an input with a vector), and the id derived
from it (:func:`content_id`). A vector is checked here once (the engine's
:func:`~holomem.api.engine.vectors.vector`, or :func:`~holomem.api.engine.vectors.matrix`
for a batch) and carried on in :class:`Checked` as the float32 array stored. The
planner (:mod:`.planner`) takes what these give. Imports the engine's value checks and
the types.

The payload digest (docs/contract.md §3, "Payload digests"): SHA-256 of the canonical
JSON payload (:func:`canonical_payload`) for an input without a vector (digest 1, as
ever); for one with a vector, digest 2: SHA-256 of :data:`DIGEST_2`, the canonical JSON
of the payload without the vector, a newline, and the vector's float32 little-endian
bytes — so the numbers are hashed as the bytes stored, whatever form they came in
(a list, a numpy array of any float or integer type, a buffer), and no float is ever
spelled out in JSON. (The JSON holds no raw newline, and a digest 1 preimage begins
with ``{``: the two never meet.)
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Sequence
from typing import NamedTuple

import msgspec
import msgspec.structs
import numpy as np

from holomem.api.engine import validate, vectors
from holomem.api.memory.types import RememberInput
from holomem.errors import InvalidError


class Checked(NamedTuple):
    """An input checked as far as it can be without the store, its payload digest, and
    its vector: the caller's, checked (or the embedder's), as float32."""

    input: RememberInput
    digest: bytes  # the payload digest (everything but the id; see the module docstring)
    vector: np.ndarray | None = None


class Converted(NamedTuple):
    """A batch converted by :func:`convert_all`: its inputs, and its vectors already
    checked together (the rows of :func:`vectors.matrix`, in the inputs' order; None:
    not checked yet)."""

    inputs: list[RememberInput]
    vectors: np.ndarray | None = None


def convert_all(items: Sequence[object]) -> Converted | None:
    """Every input as a RememberInput in one msgspec call, when each is a dict that
    :func:`validate.to_struct` would hand msgspec as it is (under the names Python
    and JSON share, times in milliseconds); None when any is not, or any fails
    (converted one at a time, the first bad one is then named)."""
    if not items or set(map(type, items)) != {dict}:
        return None
    # A vector is set aside and put back as it is (msgspec takes lists only, and reads
    # a list's numbers one by one): check_all checks the batch's vectors together.
    # Lists are set aside only when they are all lists of floats (checked here, in one
    # pass); else msgspec converts them, and says which number is not one.
    given = {i: e for i, e in enumerate(map(_EMBEDDING_OF, items)) if e is not None}
    checked: np.ndarray | None = None
    if given and set(map(type, given.values())) == {list}:
        checked = vectors.matrix(list(given.values()), decoded=False)
    arrays = given if checked is not None else {
        i: e for i, e in given.items() if type(e) is not list}
    batch: Sequence[object] = items if not arrays else [
        {**d, "embedding": None} if i in arrays else d for i, d in enumerate(items)]  # type: ignore[dict-item]
    try:
        out = msgspec.convert(batch, list[RememberInput])
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError, RecursionError):
        return None
    # (Set on the structs just made, which nothing else holds yet: no copy of each.)
    set_field = msgspec.structs.force_setattr
    for i, e in arrays.items():
        set_field(out[i], "embedding", e)
    return Converted(out, checked)


def check(x: RememberInput, i: int, vec: np.ndarray | None = None) -> Checked:
    """Validate everything about one input that does not depend on the store (``vec``:
    its vector, when already checked)."""
    _, vec = _validated(x, i, vec)
    return Checked(x, digest(x, vec), vec)


def check_all(items: Sequence[RememberInput], checked: np.ndarray | None = None
              ) -> list[Checked]:
    """:func:`check` of each input: the same digests, and the same first error (a batch
    that is not plain, or may fail a check, is checked one input at a time). The
    vectors of a batch are checked together when they can be (:func:`vectors.matrix`;
    ``checked``: already, by :func:`convert_all`)."""
    given: list[object] = list(map(EMBEDDING, items))
    rows: list[np.ndarray | None] | None = None
    if checked is not None or any(g is not None for g in given):  # (an array's == is elementwise)
        m = checked if checked is not None else vectors.matrix(
            [g for g in given if g is not None])
        if m is None:  # one at a time: the first bad vector is named
            return [check(x, i) for i, x in enumerate(items)]
        it = iter(m)
        rows = [None if g is None else next(it) for g in given]
    digests = plain_digests(items, rows)
    if digests is None:
        if rows is None:
            return [check(x, i) for i, x in enumerate(items)]
        return [check(x, i, v) for i, (x, v) in enumerate(zip(items, rows, strict=True))]
    return list(map(Checked, items, digests, rows if rows is not None else [None] * len(items)))


def plain_digests(items: Sequence[RememberInput],
                  rows: Sequence[np.ndarray | None] | None = None) -> list[bytes] | None:
    """The digests of a batch of plain inputs — each an ASCII text holding something
    other than whitespace, no longer than either text limit, and maybe an id, a
    subject and a vector (``rows``: each input's, checked; None: no input has one),
    nothing else — checked a column at a time; None unless every input is plain and
    passes."""
    if not items or list(map(OTHERS_BUT_VECTOR, items)).count(NO_OTHERS_BUT_VECTOR) != len(items):
        return None
    if rows is None and any(e is not None for e in map(EMBEDDING, items)):
        return None
    texts: list[str] = list(map(TEXT, items))
    if set(map(type, texts)) != {str}:
        return None
    # ASCII: a byte per character, and at most one word per character (validate.text).
    if (not "".join(texts).isascii()
            or max(map(len, texts)) > min(validate.MAX_TEXT_BYTES, validate.MAX_WORDS)
            or not all(map(str.strip, texts))):
        return None
    subjects: list[str | None] = list(map(SUBJECT, items))
    for column in (list(map(ID, items)), subjects):
        given = [v for v in column if v is not None]
        if given and not validate.ids_pass(given):
            return None
    # The canonical payload of such an input (see canonical_payload: keys sorted,
    # "subject" before "text"), its strings as _SORTED spells them.
    enc, sha = _SORTED.encode, hashlib.sha256
    if subjects.count(None) == len(subjects):
        payloads = [b'{"text":' + t + b"}" for t in map(enc, texts)]
    else:
        payloads = [(b'{"text":' if s is None else b'{"subject":' + enc(s) + b',"text":')
                    + enc(t) + b"}" for s, t in zip(subjects, texts, strict=True)]
    if rows is None:
        return [sha(p).digest() for p in payloads]
    return [sha(p).digest() if v is None else _digest_2(p, v)
            for p, v in zip(payloads, rows, strict=True)]


def validated(x: RememberInput, i: int) -> bytes:
    """Check one input as :func:`check` does; returns its canonical metadata bytes."""
    return _validated(x, i)[0]


def _validated(x: RememberInput, i: int, vec: np.ndarray | None = None
               ) -> tuple[bytes, np.ndarray | None]:
    """:func:`validated`, and the input's vector checked (``vec``, when given: already
    checked)."""
    where = f"input {i}" if i else "remember"
    if x.id is not None:
        validate.doc_id(x.id, f"{where}: id")
    validate.text(x.text, f"{where}: text")
    if not x.text.strip():
        # An empty fact matches no query and says nothing: refuse it (issue 11).
        raise InvalidError(f"{where}: text must not be empty or only whitespace")
    if x.subject is not None:
        validate.doc_id(x.subject, f"{where}: subject")
    # (Absent fields are skipped here: each check passes None, and a bulk load pays
    # for every call.)
    if x.entities is not None:
        validate.entities(x.entities, f"{where}: entities")
    meta = validate.metadata(x.metadata) if x.metadata is not None else b""
    if vec is None and x.embedding is not None:
        # A list here was decoded as list[float] (a RememberInput is always converted
        # by msgspec): its items are numbers. An array or a buffer is as given.
        vec = vectors.vector(x.embedding, 0, f"{where}: embedding", decoded=True)
    for name in validate.TIME_FIELDS:
        value = getattr(x, name)
        if value is not None:
            validate.to_ms(value, f"{where}: {name}")
    if x.valid_from is not None and x.valid_to is not None and x.valid_from >= x.valid_to:
        raise InvalidError(f"{where}: valid_from must be before valid_to")
    if x.supersedes is not None:
        validate.id_list(x.supersedes, f"{where}: supersedes", validate.MAX_IDS)
    if x.confidence is not None:
        validate.confidence(x.confidence)
    if x.namespace is not None:
        validate.namespace(x.namespace, f"{where}: namespace")
    if x.ttl_ms is not None:
        validate.positive_int(x.ttl_ms, f"{where}: ttl_ms", validate.TIME_LIMIT)
    if x.speaker is not None:
        validate.doc_id(x.speaker, f"{where}: speaker")
    if x.session is not None:
        validate.doc_id(x.session, f"{where}: session")
    if x.position is not None:
        position(x.position, f"{where}: position")
    return meta, vec


#: The greatest position a conversation turn may have.
MAX_POSITION = 2**62


def position(value: object, field: str) -> int:
    """A turn's position: an integer from 0 to :data:`MAX_POSITION`. Errors:
    ``invalid_request``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidError(f"{field} must be an integer")
    if not 0 <= value <= MAX_POSITION:
        raise InvalidError(f"{field} must be between 0 and {MAX_POSITION}")
    return value


#: What a digest 2 hashes first (see the module docstring).
DIGEST_2 = b"holomem payload digest 2\n"


def digest(x: RememberInput, vec: np.ndarray | None = None) -> bytes:
    """An input's payload digest (everything but its id): digest 1 without a vector,
    digest 2 with one (the module docstring). ``vec``: its vector, already checked."""
    if x.embedding is None and vec is None:
        return hashlib.sha256(canonical_payload(x)).digest()
    if vec is None:
        vec = vectors.vector(x.embedding, 0, decoded=True)
    rest = x if x.embedding is None else msgspec.structs.replace(x, embedding=None)
    return _digest_2(canonical_payload(rest), vec)


def _digest_2(payload: bytes, vec: np.ndarray) -> bytes:
    h = hashlib.sha256(DIGEST_2 + payload + b"\n")
    h.update(vec.data)  # the float32 little-endian bytes, as stored (C-contiguous)
    return h.digest()


def legacy_digest(x: RememberInput) -> bytes | None:
    """The digest the versions before digest 2 gave an input with a vector (SHA-256 of
    its canonical JSON, the vector's numbers spelled as given); None for an input
    without one (its digest never changed). A fact such a version stored keeps its
    digest: a retry of it is recognised by this one."""
    given: object = x.embedding
    if given is None:
        return None
    if isinstance(given, np.ndarray):  # those versions made a list of an array
        x = msgspec.structs.replace(x, embedding=given.tolist())
    elif type(given) is not list:
        return None  # (a buffer or an iterator: those versions refused it)
    return hashlib.sha256(canonical_payload(x)).digest()


def canonical_payload(x: RememberInput) -> bytes:
    """The canonical JSON of an input's payload: keys sorted, no spaces, non-ASCII
    as is — the bytes Python's ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` gives, which define every digest 1 (and every content id of
    a fact without a vector)."""
    # The root namespace is no namespace: [] and None give the same payload (and the
    # same content id as a fact written before namespaces existed).
    if x.confidence is None and x.embedding is None and (x.metadata is None
                                                         or _plain(x.metadata)):
        # Only strings, integers, booleans, None, lists and dicts: msgspec writes
        # the same bytes as json.dumps, several times faster (with floats it spells
        # exponents its own way: 1e16 for 1e+16). The payload's fields as a Struct
        # that leaves out what is None, encoded with every key sorted.
        values = _PAYLOAD_VALUES(msgspec.structs.astuple(x))
        if x.namespace is not None and not x.namespace:
            values = (*values[:_NAMESPACE_AT], None, *values[_NAMESPACE_AT + 1:])
        return _SORTED.encode(_Payload(*values))
    payload = {k: v for k, v in msgspec.to_builtins(x).items()
               if k != "id" and v is not None and not (k == "namespace" and not v)}
    canon = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return canon.encode("utf-8")


#: RememberInput's fields but its id: the payload, under the same JSON names.
_PAYLOAD_FIELDS = [f for f in RememberInput.__struct_fields__ if f != "id"]
_Payload = msgspec.defstruct("_Payload", [(f, object, None) for f in _PAYLOAD_FIELDS],
                             omit_defaults=True, rename="camel")
_PAYLOAD_VALUES = operator.itemgetter(*(RememberInput.__struct_fields__.index(f)
                                        for f in _PAYLOAD_FIELDS))
_NAMESPACE_AT = _PAYLOAD_FIELDS.index("namespace")
_SORTED = msgspec.json.Encoder(order="sorted")

#: What makes an input plain for check_all: every field but these three unset (and
#: plain_digests: but these four); and simple for the planner (Planner._plan_new):
#: every field but the text, the id and the vector.
TEXT, ID, SUBJECT, EMBEDDING = (operator.attrgetter(f)
                                for f in ("text", "id", "subject", "embedding"))
OTHERS = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                                if f not in ("text", "id", "subject")))
NO_OTHERS = (None,) * (len(RememberInput.__struct_fields__) - 3)
OTHERS_BUT_VECTOR = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                                           if f not in ("text", "id", "subject", "embedding")))
#: A dict input's vector, as given.
_EMBEDDING_OF = operator.methodcaller("get", "embedding")
NO_OTHERS_BUT_VECTOR = (None,) * (len(RememberInput.__struct_fields__) - 4)
REST = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                              if f not in ("text", "id", "embedding")))
NO_REST = (None,) * (len(RememberInput.__struct_fields__) - 3)


def _plain(value: object) -> bool:
    """Whether ``value`` holds only strings, integers, booleans, None, lists and
    dicts with string keys (no float, nothing else either encoder might spell its
    own way)."""
    if value is None or type(value) in (str, int, bool):
        return True
    if type(value) is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)  # type: ignore[attr-defined]
    return False


def content_id(digest: bytes) -> str:
    """The id of a fact given without one: derived from its payload, so a retry
    stores one fact."""
    return "f-" + digest[:16].hex()  # (the first 32 hex digits)
