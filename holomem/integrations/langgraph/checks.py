"""What a LangGraph op may hold, checked before any op of a batch runs, and its
holomem form.

Owns: the checks of LangGraph's namespaces (as LangGraph's ``InvalidNamespaceError``),
keys, counts and field paths; the mapping of a LangGraph namespace to the holomem one
under a store's prefix (:func:`full`); a filter on the value as holomem's metadata
filter (:func:`item_filter`); and each op checked into what runs it (:func:`check`:
a :class:`Put` of a value, a :class:`Search`, or the op with its fields checked).
Imports LangGraph's op types, the engine's checks and the memory API's filters.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NamedTuple

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
    get_text_at_path,
    tokenize_path,
)

from holomem.api.engine import validate
from holomem.api.memory import filters
from holomem.errors import InvalidError, LimitError

#: The metadata key that marks a fact as a LangGraph item (its value: the item format,
#: 1). A value may not use it as a key.
MARK = "$langgraph"
FORMAT = 1
#: The most results one search may reach (offset + limit): what one recall returns.
MAX_SEARCH = 1000
#: The operators LangGraph's filters define, and those holomem adds (§4b).
FILTER_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")


class Put(NamedTuple):
    """A checked PutOp of a value: what the fact will hold."""

    namespace: tuple[str, ...]
    key: str
    metadata: dict[str, Any]
    text: str
    embed: bool  # whether index["embed"] embeds its text (it came from index fields)


class Search(NamedTuple):
    """A checked SearchOp: the holomem namespace and filter it reads."""

    prefix: list[str]
    filter: dict[str, Any]
    limit: int
    offset: int
    query: str | None


def sequence(namespace: object, what: str) -> None:
    if not isinstance(namespace, (tuple, list)):
        raise InvalidNamespaceError(f"{what} must be a tuple of strings, got "
                                    f"{type(namespace).__name__}")


def labels(namespace: object, what: str, *, wildcards: bool = False) -> tuple[str, ...]:
    """A namespace (or a pattern) as a tuple of strings LangGraph and holomem both take."""
    sequence(namespace, what)
    assert isinstance(namespace, (tuple, list))  # for the type checker: sequence checked
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(f"{what} {tuple(namespace)!r}: labels must be "
                                        f"strings, not {type(label).__name__}")
        if not label:
            raise InvalidNamespaceError(f"{what} {tuple(namespace)!r}: a label is empty")
        if "." in label:
            raise InvalidNamespaceError(f"{what} {tuple(namespace)!r}: label {label!r} "
                                        "contains a period")
        if label == "*" and wildcards:
            continue
        try:
            validate.doc_id(label, "label")
        except InvalidError as exc:
            raise InvalidNamespaceError(f"{what} {tuple(namespace)!r}: {exc}") from exc
    return tuple(namespace)


def count(value: object, what: str, *, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidError(f"{what} must be an integer >= {least}, got {value!r}")
    return value


def key(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidError(f"key must be a string, got {type(value).__name__}")
    return validate.doc_id(value, "key")


def paths(value: object, what: str) -> list[str]:
    """A list of LangGraph field paths (``index["fields"]``, a put's ``index``)."""
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidError(f"{what} must be a list of field paths")
    for path in value:
        if not isinstance(path, str) or not path:
            raise InvalidError(f"{what}: a path must be a non-empty string, got {path!r}")
        try:
            tokenize_path(path)
        except (ValueError, IndexError) as exc:
            raise InvalidError(f"{what}: {path!r} is not a field path: {exc}") from exc
    return list(value)


def full(base: tuple[str, ...], namespace: tuple[str, ...], what: str) -> list[str]:
    """The holomem namespace of a LangGraph one, under the store's ``base``."""
    if len(base) + len(namespace) > validate.MAX_NAMESPACE_DEPTH:
        room = validate.MAX_NAMESPACE_DEPTH - len(base)
        raise InvalidNamespaceError(f"{what} {namespace!r} has more than {room} labels "
                                    f"(holomem namespaces hold at most "
                                    f"{validate.MAX_NAMESPACE_DEPTH} strings"
                                    + (f", {len(base)} of them this store's"
                                       if base else "") + ")")
    return [*base, *namespace]


def item_filter(flt: object) -> dict[str, Any]:
    """LangGraph's filter on the value as holomem's metadata filter (§4b), items only.

    A key's condition is a value (equality; an object or list compares whole) or an
    object of operators. LangGraph's nested-object match (``{"a": {"b": 1}}`` holding
    for any ``a`` that has ``b == 1``) has no metadata-filter equivalent: refused.
    """
    conditions: dict[str, Any] = {MARK: {"$exists": True}}
    if flt is None:
        return {"metadata": conditions}
    if not isinstance(flt, Mapping):
        raise InvalidError(f"filter must be a dict of value keys, got {type(flt).__name__}")
    for name, cond in flt.items():
        if not isinstance(name, str):
            raise InvalidError(f"filter keys must be strings, got {name!r}")
        if name == MARK:
            raise InvalidError(f"filter: {MARK!r} is holomem's marker, not a value key")
        if isinstance(cond, Mapping) and not any(str(k).startswith("$") for k in cond):
            raise InvalidError(
                f"filter.{name}: a nested object filter is not supported; filter on "
                "top-level keys of the value, or compare the whole object with "
                '{"$eq": {...}}')
        if isinstance(cond, Mapping):
            unknown = sorted(str(op) for op in cond if op not in FILTER_OPS)
            if unknown:
                raise InvalidError(f"filter.{name}: unknown operators {unknown}; operators "
                                   f"are {', '.join(FILTER_OPS)}")
        conditions[name] = cond
    out = {"metadata": conditions}
    filters.compile_filter(out)  # checked now, so that a bad one fails its batch whole
    return out


def check(op: object, base: tuple[str, ...], fields: list[str]) -> object:
    """``op`` checked before any op runs (a :class:`Put` for a put of a value), for a
    store under ``base`` whose puts index ``fields`` unless they say otherwise."""
    if isinstance(op, GetOp):
        ns = labels(op.namespace, "namespace")
        full(base, ns, "namespace")
        return GetOp(ns, key(op.key))
    if isinstance(op, PutOp):
        return check_put(op, base, fields)
    if isinstance(op, SearchOp):
        prefix = labels(op.namespace_prefix, "namespace_prefix")
        limit = count(op.limit, "limit")
        offset = count(op.offset, "offset")
        if op.query is not None and not isinstance(op.query, str):
            raise InvalidError(f"query must be a string, got {type(op.query).__name__}")
        if op.query and offset + limit > MAX_SEARCH:
            raise LimitError(f"a search with a query reaches at most {MAX_SEARCH} "
                             f"results (offset + limit is {offset + limit})")
        return Search(full(base, prefix, "namespace_prefix"), item_filter(op.filter), limit,
                      offset, op.query or None)
    if isinstance(op, ListNamespacesOp):
        conditions = op.match_conditions or ()
        if not isinstance(conditions, (tuple, list)):
            raise InvalidError("match_conditions must be a tuple of MatchCondition")
        checked = []
        for c in conditions:
            if not isinstance(c, MatchCondition) or c.match_type not in ("prefix",
                                                                         "suffix"):
                raise InvalidError(f"not a prefix or suffix MatchCondition: {c!r}")
            checked.append(MatchCondition(c.match_type, labels(c.path, c.match_type,
                                                               wildcards=True)))
        depth = None if op.max_depth is None else count(op.max_depth, "max_depth", least=1)
        return ListNamespacesOp(tuple(checked), depth, count(op.limit, "limit"),
                                count(op.offset, "offset"))
    raise InvalidError(f"not a LangGraph store op: {type(op).__name__}")


def check_put(op: PutOp, base: tuple[str, ...], fields: list[str]) -> Put | PutOp:
    """A put of a value as the fact it remembers; a put of None (a delete) as a PutOp."""
    ns = labels(op.namespace, "namespace")
    if not ns:
        raise InvalidNamespaceError("a put needs a namespace (it cannot be empty)")
    if ns[0] == "langgraph":
        raise InvalidNamespaceError(f'namespace {ns!r}: the root label "langgraph" is '
                                    "reserved by LangGraph")
    full(base, ns, "namespace")
    name = key(op.key)
    if op.ttl is not None:
        raise InvalidError("HolomemStore does not support TTLs (supports_ttl is False); "
                           "put with ttl=None")
    if op.value is None:
        return PutOp(ns, name, None)
    validate.unreserved(name, "key")  # (a delete of such a key still runs)
    value = op.value
    if not isinstance(value, Mapping):
        raise InvalidError(f"the value of {name!r} must be a dict (or None to delete), "
                           f"got {type(value).__name__}")
    if MARK in value:
        raise InvalidError(f"the value of {name!r} uses the key {MARK!r}, which marks "
                           "holomem's LangGraph items")
    given = op.index is not None and op.index is not False
    indexed = paths(op.index, "index") if given else fields
    metadata = {**value, MARK: FORMAT}
    try:
        validate.metadata(metadata)  # JSON, within holomem's size and depth limits
    except InvalidError as exc:
        raise type(exc)(f"the value of {name!r} in {ns!r}: {exc}") from exc
    found: list[str] = []
    if op.index is not False:
        plain = json.loads(json.dumps(value, default=dict))  # as stored: tuples as lists
        found = [t for p in indexed for t in get_text_at_path(plain, p)]
    # Without indexed text, the key is what a query can find (text is never blank).
    text = "\n".join(found) if "".join(found).strip() else name if name.strip() \
        else json.dumps(value, default=dict, ensure_ascii=False)
    try:
        validate.text(text, "text")
    except LimitError as exc:
        raise LimitError(f"the indexed text of {name!r} in {ns!r}: {exc}") from exc
    return Put(ns, name, metadata, text, bool("".join(found).strip()))
