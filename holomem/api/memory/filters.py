"""Filters (docs/contract.md §4b): which facts a recall, explain, list or contradict may return.

Owns: the filter grammar, its checks and limits (:func:`compile_filter`), and its
evaluation into a slot mask over the metadata index, the fact index's times and
the catalog (:func:`evaluate`) — vectorised, never a scan of records. Imports the
engine's view, the metadata projection and validate.

The grammar, as JSON::

    filter     := { clause, ... }                     every clause must hold
    clause     := "metadata": { key: condition, ... }  top-level metadata keys
                | "ingestedAfter" | "ingestedBefore" | "eventAfter" | "eventBefore": ms
                | "speaker" | "session": condition    a turn's fields (§4g):
                | "position": condition               $eq $ne $in $nin $exists; position
                                                      also $gt $gte $lt $lte
                | "$and": [filter, ...] | "$or": [filter, ...] | "$not": filter
    condition  := value                               the same as {"$eq": value}
                | { op: value, ... }                  every op must hold
    op         := $eq $ne $gt $gte $lt $lte $in $nin $exists

Semantics, written down once: ``$eq`` is JSON equality (``true`` is not ``1``; an
object or array value compares whole); ``$ne``, ``$nin`` and ``$not`` are
complements, so they also hold for a fact that lacks the key; ``$gt``, ``$gte``,
``$lt`` and ``$lte`` compare numbers with numbers and strings with strings (a value
of another type never matches; an operand that is neither is refused); ``$exists``
takes true or false. "After" and "before" are strict. A plain document (not a
fact) has no ingest or event time, so a time clause never holds for it; a fact
without an event time matches no event clause. A turn clause reads the fact's own
field, as ``$eq`` on a metadata key reads the key: a fact that is not a turn has
none (``{"$exists": false}`` holds for it, ``$ne`` too). The turn clauses are answered
from the fact index's turn table (:mod:`holomem.projections.turns`): a speaker's or
a session's facts are a look-up, a position range a pass over the turns only.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.errors import InvalidError, LimitError
from holomem.projections.metadata import is_number
from holomem.projections.temporal import UNSET

#: How deeply $and / $or / $not may nest, how many conditions one filter may hold,
#: and how many values one $in / $nin may list.
MAX_DEPTH = 8
MAX_NODES = 64
MAX_IN = 1000

_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
_TIMES = ("ingestedAfter", "ingestedBefore", "eventAfter", "eventBefore")
#: A turn's fields, and the operators each takes.
_TURN = {"speaker": ("$eq", "$ne", "$in", "$nin", "$exists"),
         "session": ("$eq", "$ne", "$in", "$nin", "$exists"),
         "position": _OPS}
_KEYS = ("metadata", *_TIMES, *_TURN, "$and", "$or", "$not")


class Condition(NamedTuple):
    key: str
    op: str
    value: Any


class Filter(NamedTuple):
    """A checked filter: every part must hold."""

    conditions: tuple[Condition, ...]
    times: tuple[tuple[str, int], ...]
    all_of: tuple[Filter, ...]
    any_of: tuple[tuple[Filter, ...], ...]
    none_of: tuple[Filter, ...]
    #: conditions on a turn's fields (``Condition.key`` is the field's name)
    turn: tuple[Condition, ...] = ()


def unreserved(view: View) -> np.ndarray | None:
    """The slot mask of every slot but the facts of a reserved subject (holomem's own,
    such as working contexts: docs/contract.md §4 "Reserved subjects"); None when the
    store holds none. Recall, list, contradict and consolidation apply it unless the
    caller asks for a subject by name."""
    reserved = view.facts.reserved_mask()
    if reserved is None:
        return None
    out: np.ndarray = ~reserved[:view.catalog.slots]
    return out


def compile_filter(value: object, field: str = "filter") -> Filter | None:
    """A checked :class:`Filter` from its JSON form (None: no filter).

    Errors: ``invalid_request`` (an unknown key or operator, a wrong type for an
    operator, not an object), ``limit`` (nested deeper than :data:`MAX_DEPTH`, more
    than :data:`MAX_NODES` conditions, a ``$in`` of more than :data:`MAX_IN` values).
    """
    if value is None:
        return None
    count = [0]
    return _compile(value, field, 1, count)


def _node(count: list[int], where: str) -> None:
    count[0] += 1
    if count[0] > MAX_NODES:
        raise LimitError(f"{where}: a filter holds at most {MAX_NODES} conditions")


def _compile(value: object, where: str, depth: int, count: list[int]) -> Filter:
    if depth > MAX_DEPTH:
        raise LimitError(f"{where}: a filter is at most {MAX_DEPTH} objects deep, the outermost "
                         "counted")
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidError(f"{where} must be an object")
    unknown = sorted(k for k in value if k not in _KEYS)
    if unknown:
        raise InvalidError(f"{where}: unknown keys {unknown}; a filter takes "
                           f"{', '.join(_KEYS)}")
    conditions: list[Condition] = []
    times: list[tuple[str, int]] = []
    all_of: list[Filter] = []
    any_of: list[tuple[Filter, ...]] = []
    none_of: list[Filter] = []
    turn: list[Condition] = []
    for key, item in value.items():
        if key == "metadata":
            conditions.extend(_metadata(item, f"{where}.metadata", count))
        elif key in _TURN:
            turn.extend(_turn(key, item, f"{where}.{key}", count))
        elif key in _TIMES:
            _node(count, where)
            ms = validate.to_ms(item, f"{where}.{key}")
            if ms is None:
                raise InvalidError(f"{where}.{key} must be a time (milliseconds)")
            times.append((key, ms))
        else:
            if key == "$not":
                none_of.append(_compile(item, f"{where}.$not", depth + 1, count))
                continue
            if not isinstance(item, list) or not item:
                raise InvalidError(f"{where}.{key} must be a non-empty list of filters")
            parts = tuple(_compile(f, f"{where}.{key}[{i}]", depth + 1, count)
                          for i, f in enumerate(item))
            if key == "$and":
                all_of.extend(parts)
            else:
                any_of.append(parts)
    return Filter(tuple(conditions), tuple(times), tuple(all_of), tuple(any_of),
                  tuple(none_of), tuple(turn))


def _turn(key: str, value: object, where: str, count: list[int]) -> list[Condition]:
    ops = value if isinstance(value, Mapping) else {"$eq": value}
    out = []
    for op, operand in ops.items():
        _node(count, where)
        if op not in _TURN[key]:
            raise InvalidError(f"{where}: {key} takes the operators "
                               f"{', '.join(_TURN[key])}; got {op!r}")
        checked = _operand(op, operand, where)
        wanted = (int,) if key == "position" else (str,)
        items = checked if op in ("$in", "$nin") else [] if op == "$exists" else [checked]
        for item in items:
            if isinstance(item, bool) or not isinstance(item, wanted):
                raise InvalidError(f"{where}: {key} values are "
                                   f"{'integers' if key == 'position' else 'strings'}; "
                                   f"got {item!r}")
        out.append(Condition(key, op, checked))
    return out


def _metadata(value: object, where: str, count: list[int]) -> list[Condition]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise InvalidError(f"{where} must be an object of metadata keys")
    out = []
    for key, cond in value.items():
        # Any key a metadata dict can hold ("" and control characters included), so
        # every stored key can be selected.
        validate.json_value(key, f"{where} key")
        here = f"{where}.{key}"
        ops = cond if isinstance(cond, Mapping) and any(
            isinstance(k, str) and k.startswith("$") for k in cond) else {"$eq": cond}
        for op, operand in ops.items():
            _node(count, here)
            out.append(Condition(key, op, _operand(op, operand, here)))
    return out


def _operand(op: object, value: object, where: str) -> Any:
    if op not in _OPS:
        raise InvalidError(f"{where}: unknown operator {op!r}; operators are "
                           f"{', '.join(_OPS)} (an object value mixing them with plain "
                           "keys is refused)")
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if not (is_number(value) or isinstance(value, str)):
            raise InvalidError(f"{where}: {op} compares numbers or strings, not "
                               f"{type(value).__name__}")
        if is_number(value) and not np.isfinite(float(value)):  # type: ignore[arg-type]
            raise InvalidError(f"{where}: {op} needs a finite number")
    elif op in ("$in", "$nin"):
        if not isinstance(value, list):
            raise InvalidError(f"{where}: {op} takes a list of values")
        if len(value) > MAX_IN:
            raise LimitError(f"{where}: {op} lists at most {MAX_IN} values")
    elif op == "$exists" and not isinstance(value, bool):
        raise InvalidError(f"{where}: $exists takes true or false")
    validate.json_value(value, where)  # a JSON value, within the metadata limits
    return value


def evaluate(view: View, flt: Filter) -> np.ndarray:
    """The mask of live documents ``flt`` holds for (over every slot)."""
    live: np.ndarray = view.catalog.alive.view().copy()
    out: np.ndarray = live & _mask(view, flt, live)
    return out


def _mask(view: View, flt: Filter, live: np.ndarray) -> np.ndarray:
    out = live.copy()
    for cond in flt.conditions:
        out &= _condition(view, cond, live)
    for key, ms in flt.times:
        out &= _time(view, key, ms, len(live))
    for cond in flt.turn:
        out &= _turn_mask(view, cond, live)
    for part in flt.all_of:
        out &= _mask(view, part, live)
    for parts in flt.any_of:
        either = np.zeros(len(live), dtype=bool)
        for part in parts:
            either |= _mask(view, part, live)
        out &= either
    for part in flt.none_of:
        out &= live & ~_mask(view, part, live)
    return out


def _condition(view: View, cond: Condition, live: np.ndarray) -> np.ndarray:
    key, op, value = cond
    column = view.metadata().column(key)
    if op in ("$ne", "$nin") or (op == "$exists" and value is False):
        positive = Condition(key, {"$ne": "$eq", "$nin": "$in"}.get(op, "$exists"),
                             True if op == "$exists" else value)
        held: np.ndarray = live & ~_condition(view, positive, live)
        return held
    mask = np.zeros(len(live), dtype=bool)
    if column is None:
        return mask
    if op == "$exists":
        mask[np.asarray(column.present, dtype=np.int64)] = True
    elif op == "$eq":
        mask[column.equal(value)] = True
    elif op == "$in":
        for item in value:
            mask[column.equal(item)] = True
    else:
        mask[column.compare(op, value)] = True
    return mask


_COMPARE = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt, "$lte": operator.le}


def _turn_mask(view: View, cond: Condition, live: np.ndarray) -> np.ndarray:
    key, op, value = cond
    if op in ("$ne", "$nin") or (op == "$exists" and value is False):
        positive = Condition(key, {"$ne": "$eq", "$nin": "$in"}.get(op, "$exists"),
                             True if op == "$exists" else value)
        held: np.ndarray = live & ~_turn_mask(view, positive, live)
        return held
    turns = view.facts.turns
    if key == "speaker" and op in ("$eq", "$in"):
        ids = [f for v in (value if op == "$in" else [value]) for f in turns.speaker_facts(v)]
    elif key == "session" and op in ("$eq", "$in"):
        ids = [f for v in (value if op == "$in" else [value]) for f in turns.session_facts(v)]
    else:  # $exists, or a position: a pass over the turns
        index = ("speaker", "session", "position").index(key)
        test = ((lambda v: v is not None) if op == "$exists"
                else (lambda v: v is not None and v == value) if op == "$eq"
                else (lambda v: v is not None and v in value) if op == "$in"
                else (lambda v: v is not None and _COMPARE[op](v, value)))
        ids = [f for f, t in turns.of.items() if test(t[index])]
    mask = np.zeros(len(live), dtype=bool)
    slot = view.catalog.slot
    mask[[s for s in map(slot, ids) if 0 <= s < len(live)]] = True
    return mask


def _time(view: View, key: str, ms: int, n: int) -> np.ndarray:
    facts = view.facts
    col = (facts.ingest if key.startswith("ingested") else facts.event).view()[:n]
    is_fact = facts.is_fact.view()[:n]
    held = col > ms if key.endswith("After") else col < ms
    out: np.ndarray = is_fact & (col != UNSET) & held
    return out
