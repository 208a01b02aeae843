"""A HolomemStore's items as facts of its Memory: the checked ops run as Memory calls.

Owns: :class:`Items` — a get (the key's current version, ``created_at`` its first
one's), a put (a new fact superseding the current version), a delete (a forget of
every version), a search (a recall, or a listing without a query) and the listing of
namespaces, each from an op :mod:`.checks` checked; and the lock that makes the puts
and deletes of every HolomemStore of this process over one Store take turns. Imports
LangGraph's item types and the memory API.
"""

from __future__ import annotations

import datetime as dt
import threading
import weakref

from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    Result,
    SearchItem,
)

from holomem.api.engine import Store
from holomem.api.memory.dates import moment
from holomem.api.memory.memory import Memory
from holomem.api.memory.types import FactRecord
from holomem.integrations.langgraph.checks import MARK, Put, Search, full
from holomem.integrations.langgraph.vectors import IndexEmbeddings

_PAGE = 1000  # facts or namespaces read per page

_LOCKS: weakref.WeakKeyDictionary[Store, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def _writer_lock(store: Store) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(store, threading.Lock())


def _ms_time(ms: int) -> dt.datetime:
    """``ms`` as LangGraph's datetime; a time past the years it can hold (an import may
    bring one) is the nearest it can."""
    at = moment(ms)
    if at is not None:
        return at
    return (dt.datetime.max if ms > 0 else dt.datetime.min).replace(tzinfo=dt.UTC)


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with the pattern,
    ``"*"`` standing for any one label."""
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" \
        else namespace[len(namespace) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


class Items:
    """The items under ``namespace`` in ``memory``; deletes purge when ``purge``;
    ``index`` embeds a search's query (None: the Memory's embedder, if any)."""

    def __init__(self, memory: Memory, namespace: tuple[str, ...], *, purge: bool,
                 index: IndexEmbeddings | None) -> None:
        self.memory = memory
        self.namespace = namespace
        self.purge = purge
        self.index = index
        # A put reads the key's current version, then supersedes it: one at a time for
        # every HolomemStore of this process over the same Store.
        self._writing = _writer_lock(memory.store)

    def run(self, op: object, checked: object, vectors: dict[int, list[float]]) -> Result:
        """The result of ``op``, checked as ``checked``; ``vectors``: the puts', by id."""
        if isinstance(checked, GetOp):
            return self._get(checked.namespace, checked.key)
        if isinstance(checked, Put):
            self._put(checked, vectors.get(id(checked)))
            return None
        if isinstance(checked, PutOp):
            self._delete(checked.namespace, checked.key)
            return None
        if isinstance(checked, Search):
            return self._search(checked)
        assert isinstance(checked, ListNamespacesOp), op  # check returns nothing else
        return self._list_namespaces(checked)

    def _versions(self, namespace: tuple[str, ...], key: str) -> list[FactRecord]:
        """Every stored version of the item, in write order."""
        ns = full(self.namespace, namespace, "namespace")
        flt = {"subject": key, "metadata": {MARK: {"$exists": True}}}
        out: list[FactRecord] = []
        cursor = None
        while True:
            page = self.memory.list(cursor=cursor, limit=_PAGE, filter=flt, history="all",
                                    namespace=ns)
            out.extend(r for r in page.facts if r.namespace == ns)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    @staticmethod
    def _current(versions: list[FactRecord]) -> list[FactRecord]:
        return [r for r in versions if r.status == "current"]

    def _item(self, record: FactRecord, created: int) -> Item:
        value = {k: v for k, v in (record.metadata or {}).items() if k != MARK}
        return Item(value=value, key=record.subject or "",
                    namespace=tuple(record.namespace[len(self.namespace):]),
                    created_at=_ms_time(created), updated_at=_ms_time(record.ingest_time))

    def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        versions = self._versions(namespace, key)
        current = self._current(versions)
        if not current:
            return None
        return self._item(current[-1], min(r.ingest_time for r in versions))

    def _put(self, put: Put, vector: list[float] | None) -> None:
        with self._writing:
            previous = [r.id for r in self._current(self._versions(put.namespace, put.key))]
            self.memory.remember(text=put.text, subject=put.key, metadata=put.metadata,
                                 namespace=full(self.namespace, put.namespace, "namespace"),
                                 supersedes=previous or None, embedding=vector)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        with self._writing:
            ids = [r.id for r in self._versions(namespace, key)]
            if ids:
                self.memory.forget({"ids": ids}, include_chain=True, purge=self.purge)

    def _created(self, record: FactRecord) -> int:
        """The first version's ingest time (the chain, in effect order, starts there)."""
        return min(r.ingest_time for r in self.memory.history(record.id))

    def _search(self, op: Search) -> list[SearchItem]:
        if op.limit == 0:
            return []
        prefix = op.prefix
        found: list[tuple[FactRecord, float | None]] = []
        if op.query:
            vector = None
            if self.index is not None:
                vector = self.index.query(op.query)
            hits = self.memory.recall(op.query, k=op.offset + op.limit, namespace=prefix,
                                      filter=op.filter, history="current", embedding=vector)
            found = [(h.fact, h.score) for h in hits[op.offset:]]
        else:
            skip, cursor = op.offset, None
            while len(found) < op.limit:
                page = self.memory.list(cursor=cursor, limit=_PAGE, filter=op.filter,
                                        history="current", namespace=prefix)
                for record in page.facts:
                    if skip:
                        skip -= 1
                    elif len(found) < op.limit:
                        found.append((record, None))
                if page.next_cursor is None:
                    break
                cursor = page.next_cursor
        out = []
        for record, score in found:
            item = self._item(record, self._created(record))
            out.append(SearchItem(namespace=item.namespace, key=item.key, value=item.value,
                                  created_at=item.created_at, updated_at=item.updated_at,
                                  score=score))
        return out

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = op.match_conditions or ()
        # Read only under the longest literal lead of a prefix condition.
        lead: tuple[str, ...] = ()
        for c in conditions:
            if c.match_type == "prefix":
                literal = tuple(c.path)
                if "*" in literal:
                    literal = literal[:literal.index("*")]
                lead = max(lead, literal, key=len)
        start = full(self.namespace, lead, "prefix")
        names: set[tuple[str, ...]] = set()
        cursor = None
        while True:
            page = self.memory.list_namespaces(prefix=start, limit=_PAGE, cursor=cursor)
            for entry in page.namespaces:
                name = tuple(entry.namespace[len(self.namespace):])
                if name and all(_matches(c, name) for c in conditions):
                    names.add(name[:op.max_depth] if op.max_depth is not None else name)
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        return sorted(names)[op.offset:op.offset + op.limit]
