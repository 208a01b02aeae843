"""What is checked of a remember's input before the store is consulted, and what it
derives from the input alone (docs/contract.md §3, §4).

Owns: :class:`Checked` and the checks (:func:`check`, :func:`check_all`, a column at a
time for plain inputs: :func:`convert_all`, :func:`plain_digests`), the canonical
payload and its digest (:func:`digest`: what an identical retry is recognised by, and
what an import computes for a record that brings none), and the id derived from it
(:func:`content_id`). The planner (:mod:`.planner`) takes what these give. Imports the
engine's value checks and the types.
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Sequence
from typing import NamedTuple

import msgspec
import msgspec.structs

from holomem.api.engine import validate
from holomem.api.memory.types import RememberInput
from holomem.errors import InvalidError


class Checked(NamedTuple):
    """An input checked as far as it can be without the store, and its payload digest."""

    input: RememberInput
    digest: bytes  # SHA-256 of the canonical payload (everything but the id)


def convert_all(items: Sequence[object]) -> list[RememberInput] | None:
    """Every input as a RememberInput in one msgspec call, when each is a dict that
    :func:`validate.to_struct` would hand msgspec as it is (under the names Python
    and JSON share, times in milliseconds); None when any is not, or any fails
    (converted one at a time, the first bad one is then named)."""
    if not items or set(map(type, items)) != {dict}:
        return None
    try:
        return msgspec.convert(items, list[RememberInput])
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError, RecursionError):
        return None


def check(x: RememberInput, i: int) -> Checked:
    """Validate everything about one input that does not depend on the store."""
    validated(x, i)
    return Checked(x, digest(x))


def check_all(items: Sequence[RememberInput]) -> list[Checked]:
    """:func:`check` of each input: the same digests, and the same first error (a batch
    that is not plain, or may fail a check, is checked one input at a time)."""
    digests = plain_digests(items)
    if digests is None:
        return [check(x, i) for i, x in enumerate(items)]
    return list(map(Checked, items, digests))


def plain_digests(items: Sequence[RememberInput]) -> list[bytes] | None:
    """The digests of a batch of plain inputs — each an ASCII text holding something
    other than whitespace, no longer than either text limit, and maybe an id and a
    subject, nothing else — checked a column at a time; None unless every input is
    plain and passes."""
    if not items or list(map(OTHERS, items)).count(NO_OTHERS) != len(items):
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
        return [sha(b'{"text":' + t + b"}").digest() for t in map(enc, texts)]
    return [sha((b'{"text":' if s is None else b'{"subject":' + enc(s) + b',"text":')
                + enc(t) + b"}").digest() for s, t in zip(subjects, texts, strict=True)]


def validated(x: RememberInput, i: int) -> bytes:
    """Check one input as :func:`check` does; returns its canonical metadata bytes."""
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
    if x.embedding is not None:
        validate.embedding(x.embedding, 0, f"{where}: embedding")
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
    return meta


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


def digest(x: RememberInput) -> bytes:
    """The SHA-256 of an input's canonical payload (everything but its id)."""
    return hashlib.sha256(canonical_payload(x)).digest()


def canonical_payload(x: RememberInput) -> bytes:
    """The canonical JSON of an input's payload: keys sorted, no spaces, non-ASCII
    as is — the bytes Python's ``json.dumps(sort_keys=True, separators=(",", ":"),
    ensure_ascii=False)`` gives, which define every content id."""
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

#: What makes an input plain for check_all: every field but these three unset; and
#: simple for the planner (Planner._simple_run): every field but the text and the id.
TEXT, ID, SUBJECT = (operator.attrgetter(f) for f in ("text", "id", "subject"))
OTHERS = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                                if f not in ("text", "id", "subject")))
NO_OTHERS = (None,) * (len(RememberInput.__struct_fields__) - 3)
REST = operator.attrgetter(*(f for f in RememberInput.__struct_fields__
                              if f not in ("text", "id")))
NO_REST = (None,) * (len(RememberInput.__struct_fields__) - 2)


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
