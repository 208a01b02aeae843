"""Checks on everything a caller hands to a public call, before anything is written.

Owns: the documented limits (docs/contract.md §2, §5d) and the conversion of caller values into
the exact forms events store. Every failure is an :class:`~holomem.errors.InvalidError`
(or :class:`~holomem.errors.LimitError`) with a message that names the field; no
caller input can raise anything else from here.

Also owns the conversions every tier shares: times (:func:`to_ms`), request Structs
from Structs, dicts or keywords (:func:`to_struct`), confidence, pagination cursors and
namespaces (their one-string form is :mod:`.nspath`'s). How deeply a request may nest is
:mod:`.nesting`'s. Imports the tokenizer, the subjects' reserved prefix and the errors;
every tier above imports it, and it imports none of them.

The limits on a request bound the work of every public call (README "Limits"): a
document or fact (text, words, metadata, ids, entities, embedding), a query (bytes
and distinct words), the number of ids or facts in one call, ``k``, and a cursor.
The memory API's own bounds (``k``, candidates, pairs, entities per ``reason``, a
list page) live beside the calls they bound and are listed in the README too.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import numpy as np

from holomem.api.engine import nspath, vectors
from holomem.errors import InvalidError, LimitError
from holomem.projections.subjects import RESERVED_PREFIX
from holomem.projections.tokenize import tokenize

S = TypeVar("S", bound=msgspec.Struct)

MAX_TEXT_BYTES = 64 * 1024
MAX_WORDS = 4096
MAX_METADATA_BYTES = 64 * 1024
MAX_METADATA_DEPTH = 32
MAX_ID_CHARS = 512
MAX_ENTITIES = 256
MAX_ENTITY_CHARS = 256
MAX_EMBEDDING_DIM = vectors.MAX_DIM
MAX_K = 10_000
MAX_QUERY_BYTES = 64 * 1024
#: Distinct words in one query: each costs a posting-list scan.
MAX_QUERY_TERMS = 1024
MAX_BATCH = 100_000
#: Ids in one list argument from a caller (a forget scope, ``supersedes``, a search's
#: ``ids``): as many as one call may write.
MAX_IDS = 100_000
#: Characters of a pagination cursor (the ones holomem gives out are far shorter).
MAX_CURSOR_CHARS = 1024


def _utf8(value: str, field: str) -> bytes:
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidError(f"{field} is not valid Unicode text (lone surrogate?)") from exc


#: What an id may not contain: the C0 control characters and DEL.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def doc_id(value: object, field: str = "id") -> str:
    if not isinstance(value, str):
        raise InvalidError(f"{field} must be a string, got {type(value).__name__}")
    if not value:
        raise InvalidError(f"{field} must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise LimitError(f"{field} is longer than {MAX_ID_CHARS} characters")
    if _CONTROL.search(value):
        raise InvalidError(f"{field} must not contain control characters")
    _utf8(value, field)
    return value


def unreserved(value: str, field: str) -> str:
    """``value``, a name a door turns into a subject, unless it starts with
    :data:`RESERVED_PREFIX`: facts of such a subject are holomem's own, left out of
    recall and listings that do not name them (docs/contract.md, "Reserved subjects"),
    so an item stored under it could be read back but never found."""
    if value.startswith(RESERVED_PREFIX):
        raise InvalidError(f"{field} {value!r} starts with {RESERVED_PREFIX!r}, which "
                           "holomem reserves for its own facts")
    return value


def ids_pass(values: Sequence[object]) -> bool:
    """Whether :func:`doc_id` accepts every one of ``values``, checked together (a
    bulk load's ids or subjects); False says nothing of which fails."""
    if not values or set(map(type, values)) != {str} or not all(values):
        return False
    given: Sequence[str] = values  # type: ignore[assignment]
    if max(map(len, given)) > MAX_ID_CHARS:
        return False
    joined = "".join(given)
    if _CONTROL.search(joined):
        return False
    if not joined.isascii():
        try:
            joined.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def text(value: object, field: str = "text") -> str:
    if not isinstance(value, str):
        raise InvalidError(f"{field} must be a string, got {type(value).__name__}")
    raw = _utf8(value, field)
    if len(raw) > MAX_TEXT_BYTES:
        raise LimitError(f"{field} is {len(raw)} bytes; the limit is {MAX_TEXT_BYTES}")
    # An ASCII text has at most one word per character: no need to count them.
    words = 0 if value.isascii() and len(value) <= MAX_WORDS else len(tokenize(value))
    if words > MAX_WORDS:
        raise LimitError(f"{field} has {words} words; the limit is {MAX_WORDS}")
    return value


def query(value: object) -> str:
    """A query: at most :data:`MAX_QUERY_BYTES` bytes and :data:`MAX_QUERY_TERMS`
    distinct words (each one is a posting-list scan)."""
    if not isinstance(value, str):
        raise InvalidError(f"query must be a string, got {type(value).__name__}")
    if len(_utf8(value, "query")) > MAX_QUERY_BYTES:
        raise LimitError(f"query is longer than {MAX_QUERY_BYTES} bytes")
    terms = len(set(tokenize(value)))
    if terms > MAX_QUERY_TERMS:
        raise LimitError(f"query has {terms} distinct words; the limit is {MAX_QUERY_TERMS}")
    return value


def cursor(value: object, what: str) -> str | None:
    """A pagination cursor as the caller handed it back (None: start from the beginning)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidError(f"{what}: cursor must be a string")
    if len(value) > MAX_CURSOR_CHARS:
        raise LimitError(f"{what}: cursor is longer than {MAX_CURSOR_CHARS} characters")
    return value


def _json_check(value: object, depth: int, path: str) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise LimitError(f"metadata nests deeper than {MAX_METADATA_DEPTH} levels")
    if value is None or isinstance(value, (bool, str)):
        if isinstance(value, str):
            _utf8(value, path)
        return
    if isinstance(value, int):
        if abs(value) > 2**63 - 1:
            raise InvalidError(f"{path}: integer out of the 64-bit range")
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidError(f"{path}: NaN and infinity are not JSON")
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _json_check(item, depth + 1, f"{path}[{i}]")
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidError(f"{path}: keys must be strings")
            _utf8(key, path)
            _json_check(item, depth + 1, f"{path}.{key}")
        return
    raise InvalidError(f"{path}: {type(value).__name__} is not a JSON value")


def _mapping_as_dict(value: object) -> dict[str, Any]:
    # json encodes only dicts; _json_check accepts any Mapping (the API takes one).
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not a JSON value")  # _json_check refused it


def metadata(value: object) -> bytes:
    """Canonical JSON bytes of a metadata dict (empty for None)."""
    if value is None:
        return b""
    if not isinstance(value, Mapping):
        raise InvalidError(f"metadata must be a dict, got {type(value).__name__}")
    return _canonical_json(value, 0, "metadata")


def json_value(value: object, field: str) -> None:
    """``value`` is a JSON value a metadata dict could hold (at one key: the same
    depth, number and size limits), the errors naming ``field``. Errors:
    ``invalid_request``, ``limit``."""
    _canonical_json(value, 1, field)


def _canonical_json(value: object, depth: int, field: str) -> bytes:
    _json_check(value, depth, field)
    raw = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                     allow_nan=False, default=_mapping_as_dict).encode("utf-8")
    if len(raw) > MAX_METADATA_BYTES:
        raise LimitError(f"{field} is {len(raw)} bytes of JSON; the limit is "
                         f"{MAX_METADATA_BYTES}")
    return raw


def load_metadata(raw: bytes) -> dict[str, Any] | None:
    if not raw:
        return None
    value: dict[str, Any] = json.loads(raw)
    return value


def entities(value: object, field: str = "entities") -> tuple[str, ...]:
    if value is None:
        return ()
    if type(value) is list or type(value) is tuple:
        if not value:
            return ()
    elif isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise InvalidError(f"{field} must be a list of strings")
    out: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise InvalidError(f"{field} must hold non-empty strings")
        if len(item) > MAX_ENTITY_CHARS:
            raise LimitError(f"an entity is longer than {MAX_ENTITY_CHARS} characters")
        _utf8(item, field)
        out.append(item)
        if len(out) > MAX_ENTITIES:
            raise LimitError(f"more than {MAX_ENTITIES} entities")
    return tuple(dict.fromkeys(out))


def embedding(value: object, dim: int = 0, field: str = "embedding", *,
              decoded: bool = False) -> bytes:
    """float32 little-endian bytes of a caller embedding (empty for None), checked by
    :func:`holomem.api.engine.vectors.vector` (``decoded`` as there)."""
    if value is None:
        return b""
    return vectors.vector(value, dim, field, decoded=decoded).tobytes()


def positive_int(value: object, field: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidError(f"{field} must be an integer")
    if not 1 <= value <= maximum:
        raise InvalidError(f"{field} must be between 1 and {maximum}")
    return value


def id_list(value: object, field: str = "ids", maximum: int | None = None) -> list[str]:
    """A list of valid ids; at most ``maximum`` of them when given (callers that take
    ids from a client pass :data:`MAX_IDS`)."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidError(f"{field} must be a list of ids")
    out: list[str] = []
    for v in value:
        if maximum is not None and len(out) >= maximum:
            raise LimitError(f"{field} holds more than {maximum} ids")
        out.append(doc_id(v, field))
    return out


# -- times, request Structs, confidence, cursors ----------------------------------------
#: Times are milliseconds since the epoch, strictly within +-2**62.
TIME_LIMIT = 2**62
#: The time fields of a remember input, and of recall options (converted by to_struct).
TIME_FIELDS = ("event_time", "valid_from", "valid_to")
RECALL_TIME_FIELDS = ("as_of", "known_at")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def to_ms(value: object, field: str) -> int | None:
    """Milliseconds since the epoch from an int, an aware datetime, or an ISO 8601 string
    (None stays None).

    A string is how JSON writes a time when it is not a number: ``2024-05-01``,
    ``2024-05-01T12:00:00Z``, ``2024-05-01T14:00:00.250+02:00``; one without an offset
    is UTC (as the CLI reads it: a JSON text has no local time zone, unlike a naive
    ``datetime``, which is the process's local time and so refused). Fractions below a
    millisecond are dropped. Errors: ``invalid_request`` naming ``field``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        value = _iso_time(value, field)
    if isinstance(value, dt.datetime):
        if value.utcoffset() is None:
            raise InvalidError(f"{field}: a datetime must be timezone-aware")
        # Exact integer arithmetic: timestamp() * 1000 is a float, and rounds some
        # whole-millisecond times one millisecond down (e.g. in 2039).
        return (value - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidError(f"{field} must be milliseconds (int), an ISO 8601 string or an "
                           "aware datetime")
    if not -TIME_LIMIT < value < TIME_LIMIT:
        raise InvalidError(f"{field} is out of range")
    return value


#: The longest ISO 8601 time string taken (the longest form is 32 characters).
MAX_TIME_CHARS = 64


def _iso_time(value: str, field: str) -> dt.datetime:
    if len(value) <= MAX_TIME_CHARS:
        try:
            when = dt.datetime.fromisoformat(value)
        except ValueError:
            pass
        else:
            return when if when.utcoffset() is not None else when.replace(tzinfo=dt.UTC)
    shown = value if len(value) <= MAX_TIME_CHARS else value[:MAX_TIME_CHARS] + "..."
    raise InvalidError(f"{field}: {shown!r} is not a time: give milliseconds since the epoch "
                       "or an ISO 8601 date/time such as 2024-05-01T12:00:00Z")


def to_struct(cls: type[S], value: object, fields: Mapping[str, Any], what: str,
              times: Sequence[str] = ()) -> S:
    """A checked request Struct from a Struct, a dict or keyword fields (a dict's keys
    may be the Python names or the JSON ones).

    ``times`` name the fields that also take an aware datetime. An embedding given as
    an array or a buffer is kept as it is (checked where it is used, by
    :func:`vectors.vector`, as a list is); another numpy array becomes a list; a set a
    sorted list (a set has no order; sorting gives the same payload, and content id, in
    every process).
    """
    if type(value) is dict and not fields:
        plain = _plain_names(cls, times)
        if plain.issuperset(value) and all(type(v) in _PLAIN_VALUES for v in value.values()):
            # The common case of a bulk load: a dict under names that are the same in
            # Python and JSON, holding nothing to convert first (what the general
            # path below would pass msgspec anyway).
            try:
                return msgspec.convert(value, cls)
            except (msgspec.ValidationError, TypeError, ValueError, OverflowError,
                    RecursionError) as exc:
                if not any(type(value.get(name)) in (list, tuple)
                           and vectors.other_numbers(value[name]) for name in VECTOR_FIELDS):
                    raise InvalidError(f"{what}: {exc}") from exc
                # (a vector of numpy scalars: taken below, as an array is)
    if value is None:
        raw: dict[str, Any] = dict(fields)
    elif isinstance(value, cls):
        if fields:
            raise InvalidError(f"pass {what} either as an object or as keywords, not both")
        raw = {f: getattr(value, f) for f in value.__struct_fields__}
    elif isinstance(value, Mapping):
        raw = {**value, **fields}
    else:
        raise InvalidError(f"{what} must be a {cls.__name__}, a dict or keyword fields")
    arrays: dict[str, object] = {}
    for name, item in raw.items():
        if name in VECTOR_FIELDS and item is not None and type(item) not in (list, tuple):
            # An array or a buffer is kept as given: it is checked once, where the field
            # is used (vectors.vector), as a list is.
            arrays[name] = item
        elif name in VECTOR_FIELDS and type(item) in (list, tuple) \
                and vectors.other_numbers(item):
            # Numbers that list[float] refuses (numpy scalars: list(array) gives them)
            # become the array they stand for, checked as every vector is.
            arrays[name] = vectors.vector(item, 0, name)
        elif isinstance(item, np.ndarray):
            raw[name] = item.tolist()
        elif isinstance(item, (set, frozenset)):
            try:
                raw[name] = sorted(item)
            except TypeError as exc:
                raise InvalidError(f"{what}: {name} mixes values that cannot be ordered") \
                    from exc
    names = _encoded_names(cls)
    if not names.keys() >= raw.keys():
        encoded = {v: k for k, v in names.items()}
        # A dict may also use the JSON names (camelCase, "$and"): the same fields.
        renamed = {encoded.get(k, k) if isinstance(k, str) and k not in names else k: v
                   for k, v in raw.items()}
        if len(renamed) != len(raw):
            raise InvalidError(f"{what}: a field is given twice (by its Python and JSON names)")
        raw = renamed
        unknown = [k for k in raw if k not in names]
        if unknown:
            raise InvalidError(f"{what}: unknown fields {sorted(map(str, unknown))}")
    for name in times:
        if name in raw:
            raw[name] = to_ms(raw[name], name)
    try:
        # Struct constructors do not check types; converting the fields under their
        # encoded (camelCase) names does, exactly as a JSON request is checked.
        out = msgspec.convert({names[k]: None if k in arrays else v for k, v in raw.items()},
                              cls)
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError,
            RecursionError) as exc:
        raise InvalidError(f"{what}: {exc}") from exc
    return msgspec.structs.replace(out, **arrays) if arrays else out


#: The fields that hold a vector, in every request Struct that has one.
VECTOR_FIELDS = frozenset({"embedding"})
_NAMES: dict[type[Any], dict[str, str]] = {}
_PLAIN_NAMES: dict[tuple[type[Any], tuple[str, ...]], frozenset[str]] = {}
#: Values :func:`to_struct` hands msgspec unchanged (no array, no set).
_PLAIN_VALUES = frozenset({str, int, float, bool, list, dict, type(None)})


def _plain_names(cls: type[Any], times: Sequence[str]) -> frozenset[str]:
    """The fields of ``cls`` whose Python and JSON names agree, but for ``times``."""
    key = (cls, tuple(times))
    names = _PLAIN_NAMES.get(key)
    if names is None:
        names = _PLAIN_NAMES[key] = frozenset(
            k for k, v in _encoded_names(cls).items() if k == v and k not in times)
    return names


def _encoded_names(cls: type[Any]) -> dict[str, str]:
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = dict(zip(cls.__struct_fields__, cls.__struct_encode_fields__,
                                       strict=True))
    return names


def confidence(value: object) -> float:
    """What the agent believes of a fact: a number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InvalidError("confidence must be a number between 0 and 1")
    return float(value)


def encode_cursor(**fields: int | str | list[str]) -> str:
    """An opaque pagination cursor (URL-safe base64 of compact JSON)."""
    raw = json.dumps(fields, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode()


def decode_cursor(value: str, what: str) -> dict[str, Any]:
    """The fields of a cursor :func:`encode_cursor` made; ``invalid_request`` for
    anything else (``what`` names the call that gave it out). A cursor is opaque but
    not secret: a client can decode one, change it and send it back, so every field is
    checked again where it is used (:func:`cursor_ints` for the integers)."""
    try:
        data = json.loads(base64.urlsafe_b64decode(value.encode()),
                          parse_constant=_no_constant)
    except (ValueError, TypeError, RecursionError) as exc:
        raise InvalidError(f"not a cursor {what} gave out") from exc
    if not isinstance(data, dict):
        raise InvalidError(f"not a cursor {what} gave out")
    return data


def scope_tag(prefix: Sequence[str], more: Sequence[str | None] = ()) -> str:
    """What a cursor names of the scope its walk was asked for (the namespace, and
    ``more``: contradict's subject and entity): a cursor given with another scope is
    refused, never continued at its place."""
    raw = json.dumps([list(prefix), *more] if more else list(prefix), ensure_ascii=False)
    return hashlib.blake2b(raw.encode("utf-8"), digest_size=8).hexdigest()


def _no_constant(name: str) -> Any:
    # NaN and Infinity: no cursor holds one (json.loads takes them unless told not to).
    raise ValueError(f"{name} in a cursor")


#: The range of a cursor's integers: what a slot, a time or a generation can be.
_CURSOR_INT = 2**63


def cursor_ints(data: Mapping[str, Any], names: Sequence[str], what: str) -> list[int]:
    """The integer fields ``names`` of a decoded cursor, in that order: each a JSON
    integer (not a float, a boolean or a string) within 64 bits, as
    :func:`encode_cursor` wrote it. Whether each is in its own range (a slot below the
    store's end, ...) is the caller's to check. Errors: ``invalid_request``."""
    out: list[int] = []
    for name in names:
        value = data.get(name)
        if (isinstance(value, bool) or not isinstance(value, int)
                or not -_CURSOR_INT <= value < _CURSOR_INT):
            raise InvalidError(f"not a cursor {what} gave out")
        out.append(value)
    return out


def flag(value: object, field: str) -> bool:
    """A yes/no option: True or False only (a string such as "no" is truthy)."""
    if not isinstance(value, bool):
        raise InvalidError(f"{field} must be True or False, not {type(value).__name__}")
    return value


def store_path(value: object) -> None:
    """Check a store's path: a non-empty str or path-like naming text, without NUL."""
    path = os.fspath(value) if isinstance(value, (str, os.PathLike)) else None
    if not isinstance(path, str) or not path or "\x00" in path:
        raise InvalidError("path must be a non-empty str or os.PathLike text without NUL")


def entity(value: object, field: str = "entity") -> str:
    """One entity name: a non-empty string, within the entity limits."""
    if not isinstance(value, str) or not value:
        raise InvalidError(f"{field} must be a non-empty string")
    return entities([value], field)[0]


#: A namespace holds at most this many strings (docs/contract.md §4a).
MAX_NAMESPACE_DEPTH = 8
#: The longest namespace written as one string: every string of the deepest one at
#: its longest, each character escaped, and the "/" between them.
MAX_NAMESPACE_CHARS = MAX_NAMESPACE_DEPTH * (2 * MAX_ID_CHARS + 1) - 1


def namespace(value: object, field: str = "namespace") -> tuple[str, ...]:
    """A namespace (or a namespace prefix): 0 to :data:`MAX_NAMESPACE_DEPTH` strings, each
    checked like an id, given as a list (or any iterable) of them or as one string
    (``"users/u-42"``, read by :func:`holomem.api.engine.nspath.parse`). None, ``[]`` and
    ``""`` are the root."""
    if value is None:
        return ()
    if isinstance(value, str):
        if len(value) > MAX_NAMESPACE_CHARS:
            raise LimitError(f"{field} is longer than {MAX_NAMESPACE_CHARS} characters")
        value = nspath.parse(value, field)
    elif isinstance(value, (bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidError(f"{field} must be a list of strings (e.g. [\"users\", \"u-42\"]) "
                           "or one string (\"users/u-42\")")
    parts: list[str] = []
    for part in value:
        if len(parts) >= MAX_NAMESPACE_DEPTH:
            raise LimitError(f"{field} holds more than {MAX_NAMESPACE_DEPTH} strings")
        parts.append(doc_id(part, f"{field}[{len(parts)}]"))
    return tuple(parts)


