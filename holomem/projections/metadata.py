"""The metadata index: each top-level metadata key's values, by type, for filters.

Owns: per key, the slots that carry it and their values, split by JSON type —
numbers (as given, so an integer past 2**53 stays exact), strings, booleans, nulls
and the rest (arrays and objects) —
and the slot sets a comparison selects (docs/contract.md §4b: ``$eq``, the ranges, ``$exists``).
Imports numpy, :mod:`holomem.events` and the base. Nothing here is persisted.

Built lazily, like the HRR index: a replay does not parse every document's
metadata; the first filter that needs the index reads the metadata of the slots
not yet indexed (:meth:`ensure`), and from then on each new document is indexed
from its event as it is applied. A vacated slot's entries stay until the next
compaction; every query masks them out with the catalog's ``alive``.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from holomem.events import DocumentAdded, DocumentReplaced, Event
from holomem.projections.base import Change, Later, Snapshot
from holomem.projections.catalog import Catalog

#: slots -> the canonical JSON metadata of each (b"" for none)
Source = Callable[[Sequence[int]], list[bytes]]
#: slots read at once by ensure()
CHUNK = 4096


#: The largest integer magnitude below which every integer is a float64 exactly.
EXACT = 2**53
_EXACT_COMPARE = {"$gt": operator.gt, "$gte": operator.ge, "$lt": operator.lt,
                  "$lte": operator.le}


def same_json(a: object, b: object) -> bool:
    """Equal as JSON values: ``true`` is not ``1`` (Python's ``True == 1`` is)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(map(same_json, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(v, b[k]) for k, v in a.items())
    return a == b


def is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Column:
    """One key's entries: slot lists and value lists by type, arrays made on demand."""

    __slots__ = ("_arrays", "_by_value", "_inexact", "bools", "nulls", "numbers", "others",
                 "present", "strings")

    def __init__(self) -> None:
        self.present: list[int] = []
        #: numbers as given (an integer stays exact: float64 holds 2**53 + 1 as 2**53)
        self.numbers: tuple[list[int], list[float | int]] = ([], [])
        self.strings: tuple[list[int], list[str]] = ([], [])
        self.bools: tuple[list[int], list[bool]] = ([], [])
        self.nulls: list[int] = []
        self.others: list[tuple[int, Any]] = []
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        #: (type, value) -> slots holding it, for numbers, strings and booleans: an
        #: equality is a look-up, not a scan (JSON equality: 1 == 1.0, true != 1).
        #: Python compares an int and a float exactly and a dict key of 1 is the key
        #: of 1.0, so the values are kept as given; a column holding an integer that
        #: float64 cannot hold compares in Python, not in a float64 array.
        self._by_value: dict[tuple[str, object], list[int]] = {}
        self._inexact = False

    def add(self, slot: int, value: object) -> None:
        self._arrays.clear()
        self.present.append(slot)
        if is_number(value):
            self.numbers[0].append(slot)
            self.numbers[1].append(value)  # type: ignore[arg-type]
            self._by_value.setdefault(("n", value), []).append(slot)
            if isinstance(value, int) and not -EXACT <= value <= EXACT:
                self._inexact = True
        elif isinstance(value, str):
            self.strings[0].append(slot)
            self.strings[1].append(value)
            self._by_value.setdefault(("s", value), []).append(slot)
        elif isinstance(value, bool):
            self.bools[0].append(slot)
            self.bools[1].append(value)
            self._by_value.setdefault(("b", value), []).append(slot)
        elif value is None:
            self.nulls.append(slot)
        else:
            self.others.append((slot, value))

    def _array(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        got = self._arrays.get(kind)
        if got is None:
            slots, values = {"numbers": self.numbers, "strings": self.strings,
                             "bools": self.bools}[kind]
            dtype: Any = {"numbers": np.float64, "strings": object, "bools": np.bool_}[kind]
            got = self._arrays[kind] = (np.asarray(slots, dtype=np.int64),
                                        np.asarray(values, dtype=dtype))
        return got

    def equal(self, value: object) -> np.ndarray:
        """Slots whose value equals ``value`` as JSON."""
        if is_number(value):
            key: tuple[str, object] = ("n", value)
        elif isinstance(value, str):
            key = ("s", value)
        elif isinstance(value, bool):
            key = ("b", value)
        else:
            return self._rest(value)
        return np.asarray(self._by_value.get(key, ()), dtype=np.int64)

    def _rest(self, value: object) -> np.ndarray:
        if value is None:
            return np.asarray(self.nulls, dtype=np.int64)
        return np.asarray([s for s, v in self.others if same_json(v, value)], dtype=np.int64)

    def compare(self, op: str, value: float | str) -> np.ndarray:
        """Slots whose value is of ``value``'s type (number or string) and compares
        to it as ``op`` says (``$gt``, ``$gte``, ``$lt``, ``$lte``)."""
        slots, values = self._array("numbers" if is_number(value) else "strings")
        if not len(values):
            return slots
        if is_number(value) and (self._inexact or (
                isinstance(value, int) and not -EXACT <= value <= EXACT)):
            test = _EXACT_COMPARE[op]
            exact = np.fromiter((test(v, value) for v in self.numbers[1][:len(slots)]),
                                dtype=bool, count=len(slots))
            kept: np.ndarray = slots[exact]
            return kept
        if op == "$gt":
            keep = values > value
        elif op == "$gte":
            keep = values >= value
        elif op == "$lt":
            keep = values < value
        else:
            keep = values <= value
        out: np.ndarray = slots[np.asarray(keep, dtype=bool)]
        return out


class MetadataIndex:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._columns: dict[str, _Column] = {}
        self._indexed = 0  # slots [0, _indexed) are in the index
        self._built = False  # ensure() ran: from then on, apply() indexes as it goes

    @property
    def stale(self) -> bool:
        return self._indexed < self.catalog.slots

    def apply(self, seq: int, event: Event, change: Change) -> None:
        if not self._built or change.new < 0 or change.new != self._indexed:
            return  # not built yet (a replay, or no filter so far): ensure() catches up
        assert isinstance(event, (DocumentAdded, DocumentReplaced))
        self._index(change.new, event.metadata)
        self._indexed = change.new + 1

    def add_run(self, seq: int, events: Sequence[DocumentAdded], first: int) -> None:
        """New documents in slots ``first``.. (as ``apply`` of each would)."""
        if self._built and first == self._indexed:
            for k, e in enumerate(events):
                self._index(first + k, e.metadata)
            self._indexed = first + len(events)

    def ensure(self, source: Source) -> None:
        """Index every slot not indexed yet, reading live slots' metadata from ``source``."""
        alive = self.catalog.alive.view()
        while self._indexed < self.catalog.slots:
            end = min(self.catalog.slots, self._indexed + CHUNK)
            todo = [s for s in range(self._indexed, end) if alive[s]]
            for slot, raw in zip(todo, source(todo), strict=True):
                self._index(slot, raw)
            self._indexed = end
        self._built = True

    def _index(self, slot: int, raw: bytes) -> None:
        if not raw:
            return
        for key, value in json.loads(raw).items():
            column = self._columns.get(key)
            if column is None:
                column = self._columns[key] = _Column()
            column.add(slot, value)

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """A column's lists are only appended to: their lengths are taken under the
        lock, and the entries built when the snapshot is encoded — each key's
        entries as (slot, value) pairs in the order they were indexed; arrays and
        objects as JSON."""
        taken = [(key, c, len(c.present), len(c.numbers[0]), len(c.strings[0]),
                  len(c.bools[0]), len(c.nulls), len(c.others))
                 for key, c in self._columns.items()]

        def columns() -> list[list[object]]:
            out: list[list[object]] = []
            for key, c, n_present, n_num, n_str, n_bool, n_null, n_other in taken:
                entries: list[tuple[int, object]] = [
                    *zip(c.numbers[0][:n_num], c.numbers[1][:n_num], strict=True),
                    *zip(c.strings[0][:n_str], c.strings[1][:n_str], strict=True),
                    *zip(c.bools[0][:n_bool], c.bools[1][:n_bool], strict=True),
                    *((s, None) for s in c.nulls[:n_null])]
                others = [[s, json.dumps(v, separators=(",", ":"))]
                          for s, v in c.others[:n_other]]
                out.append([key, c.present[:n_present], entries, others])
            return out

        return {"built": self._built, "indexed": self._indexed, "columns": Later(columns)}

    def restore(self, snap: Snapshot) -> None:
        self._built = bool(snap["built"])
        self._indexed = int(snap["indexed"])
        self._columns = {}
        for key, present, entries, others in snap["columns"]:
            values: dict[int, object] = {s: v for s, v in entries}
            if any(isinstance(v, float) and not -EXACT < v < EXACT for v in values.values()):
                # Written when numbers were kept as float64: an integer past 2**53 may
                # have been rounded. The index is a cache: build it again on use.
                self._built, self._indexed, self._columns = False, 0, {}
                return
            values.update((s, json.loads(v)) for s, v in others)
            if len(values) != len(present):
                raise ValueError(f"metadata: column {key!r} disagrees with its slots")
            column = self._columns[key] = _Column()
            for slot in present:  # indexed in slot order: the same lists, the same order
                column.add(slot, values[slot])
        if self._indexed > self.catalog.slots:
            raise ValueError("metadata: indexed past the catalog")

    def column(self, key: str) -> _Column | None:
        return self._columns.get(key)

    def memory_bytes(self) -> int:
        return sum(64 + 32 * len(c.present) for c in self._columns.values())
