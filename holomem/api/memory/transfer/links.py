"""Typed relations in export and import (docs/contract.md §4d, §4f).

Owns: the relations an export record carries (:func:`records_of`), the check of an
incoming one (:func:`checked`), and the plan of the transactions that make them on
import (:class:`Pending`). Imports the engine's view, relations (its limits and
checks), the types and validate.

Rules, written down once:

- a link is exported in the record of whichever end the export writes later (the
  higher slot: export goes in write order), so its other end is always on an
  earlier line, and a paged or batched import never waits across requests for it;
- each carries its ``time`` and its ``order`` (its row among the source's links,
  which are kept in the order they were made); import makes every relation of a
  call after all of the call's facts, sorted by ``order``, so ``links`` and ``why``
  answer as the source did;
- a relation whose end is not a stored fact once every fact is written is not
  made, and counted (``unresolved_relations``); one joining two namespaces is
  ``invalid_request``; one that exists with other metadata is a ``conflict``; one
  that exists with the same metadata is left alone;
- every relation of a call is checked (:meth:`Pending.check`) in the transaction that
  makes the first of them, so an error in any makes none.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory.graph import relations
from holomem.api.memory.transfer.records import RelationRecord
from holomem.errors import ConflictError, InvalidError, LimitError
from holomem.events import Event, RelationAdded

#: Relations one record may carry: every link leaving and entering its fact.
MAX_RECORD_RELATIONS = 2 * relations.MAX_LINKS_PER_FACT


class Ranks:
    """Each live link's place among the live links, in the order they were made (its
    row less the removed rows before it): what an export writes as ``order``, the
    same for two stores that hold the same links. Worked out once per read."""

    def __init__(self, view: View) -> None:
        self._view = view
        self._before: np.ndarray | None = None

    def __call__(self, row: int) -> int:
        if self._before is None:
            self._before = np.cumsum(self._view.relations.src.view() < 0)
        return row - int(self._before[row])


def records_of(view: View, slot: int, ranks: Ranks | None = None) -> list[RelationRecord]:
    """The links the export record of ``slot`` carries: those whose other end has a
    lower slot (written earlier), in the order they were made."""
    rel = view.relations
    rank = ranks if ranks is not None else Ranks(view)
    out = []
    for row in rel.rows(slot, "both"):
        s, d = rel.src.item(row), rel.dst.item(row)
        if max(s, d) != slot:
            continue
        out.append(RelationRecord(
            from_id=view.id_of(s), to_id=view.id_of(d), relation=rel.relation(row),
            time=rel.time.item(row), metadata=validate.load_metadata(rel.metadata(row)),
            order=rank(row)))
    return out


class Incoming(NamedTuple):
    """A checked relation: where it came from, its canonical metadata, and its sort key."""

    where: str
    record: RelationRecord
    metadata: bytes


def checked(records: list[RelationRecord], owner: str | None, where: str) -> list[Incoming]:
    """Check the relations of one record (``owner``: its fact's id, which must be an
    end of each) or of an import's ``relations`` (``owner`` None).
    Errors: ``invalid_request``, ``limit``, naming ``where``."""
    if len(records) > MAX_RECORD_RELATIONS:
        raise LimitError(f"{where}: more than {MAX_RECORD_RELATIONS} relations")
    out = []
    for i, r in enumerate(records):
        at = where if owner is not None else f"{where}[{i}]"
        try:
            req = relations.request(r.from_id, r.to_id, r.relation, r.metadata)
        except (InvalidError, LimitError) as exc:
            raise type(exc)(f"{at}: relations: {exc.message}") from None
        if owner is not None and owner not in (req.from_id, req.to_id):
            raise InvalidError(f"{at}: relations: {req.from_id!r} -[{req.relation}]-> "
                               f"{req.to_id!r} does not touch this record's fact {owner!r}")
        if isinstance(r.time, bool) or not 0 <= r.time < validate.TIME_LIMIT:
            raise InvalidError(f"{at}: relations: time must be a time at or after the epoch "
                               "and before 2**62 ms")
        if r.order is not None and r.order < 0:
            raise InvalidError(f"{at}: relations: order must be 0 or more")
        out.append(Incoming(at, r, req.metadata))
    return out


class Pending:
    """The relations an import call makes once all of its facts are stored."""

    def __init__(self) -> None:
        self._items: list[Incoming] = []
        self._seen: set[tuple[str, str, str]] = set()
        self.written = 0
        self.unresolved = 0
        self._last = (0, 0)

    def __len__(self) -> int:
        return len(self._items)

    def add(self, items: Iterable[Incoming]) -> None:
        """Keep ``items`` (a link named twice is kept once: the first)."""
        for item in items:
            r = item.record
            key = (r.from_id, r.to_id, r.relation)
            if key not in self._seen:
                self._seen.add(key)
                self._items.append(item)

    def chunks(self, size: int) -> list[list[Incoming]]:
        """Every kept relation in the source's order (``order``, then as given; those
        without one last), ``size`` per transaction."""
        ranked = sorted(range(len(self._items)), key=lambda i: (
            self._items[i].record.order is None, self._items[i].record.order or 0, i))
        items = [self._items[i] for i in ranked]
        self._items, self._seen = [], set()
        return [items[i:i + size] for i in range(0, len(items), size)]

    def check(self, view: View, chunks: list[list[Incoming]]) -> None:
        """Check every relation of ``chunks`` as :meth:`plan` checks them, as if each
        transaction were made after the one before (under the write lock, before the
        first is made): an import that stops on a relation then makes none of them.
        Errors: as :meth:`plan`."""
        _planned(view, [item for chunk in chunks for item in chunk])

    def plan(self, view: View, chunk: list[Incoming]) -> list[Event]:
        """The events of one transaction of relations (under the write lock). Errors:
        ``invalid_request`` (ends in two namespaces), ``conflict``, ``limit``."""
        events, unresolved = _planned(view, chunk)
        self._last = (len(events), unresolved)
        return events

    def done(self) -> None:
        """Count what the last planned transaction did (call once it is written)."""
        written, unresolved = self._last
        self.written += written
        self.unresolved += unresolved


def _planned(view: View, items: list[Incoming]) -> tuple[list[Event], int]:
    """The events that make ``items``, in order, in one transaction, and how many of
    them were left out because an end is not a stored fact. Errors: as
    :meth:`Pending.plan`."""
    facts, rel = view.facts, view.relations
    events: list[Event] = []
    added_out: dict[int, int] = {}
    added_in: dict[int, int] = {}
    unresolved = 0
    for item in items:
        r = item.record
        s, d = facts.slot(r.from_id), facts.slot(r.to_id)
        if s < 0 or d < 0:
            unresolved += 1
            continue
        if facts.namespace(s) != facts.namespace(d):
            raise InvalidError(f"{item.where}: relation {r.from_id!r} -[{r.relation}]-> "
                               f"{r.to_id!r} joins two namespaces (a link never does)")
        row = rel.find(s, d, r.relation)
        if row >= 0:
            if rel.metadata(row) != item.metadata:
                raise ConflictError(f"{item.where}: {r.from_id!r} -[{r.relation}]-> "
                                    f"{r.to_id!r} exists with other metadata")
            continue
        added_out[s] = added_out.get(s, 0) + 1
        added_in[d] = added_in.get(d, 0) + 1
        if rel.degree(s, "out") + added_out[s] > relations.MAX_LINKS_PER_FACT \
                or rel.degree(d, "in") + added_in[d] > relations.MAX_LINKS_PER_FACT:
            raise LimitError(f"{item.where}: relation {r.from_id!r} -[{r.relation}]-> "
                             f"{r.to_id!r} would give a fact more than "
                             f"{relations.MAX_LINKS_PER_FACT} links one way (the limit)")
        events.append(RelationAdded(from_id=r.from_id, to_id=r.to_id,
                                    relation=r.relation, time=r.time,
                                    metadata=item.metadata))
    return events, unresolved
