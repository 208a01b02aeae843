"""holomem as a LangGraph store: :class:`HolomemStore`, a ``langgraph.store.base.BaseStore``.

Owns: the translation of LangGraph's store operations (``GetOp``, ``PutOp``,
``SearchOp``, ``ListNamespacesOp``, run by ``batch`` / ``abatch`` and the
``get`` / ``put`` / ``delete`` / ``search`` / ``list_namespaces`` methods BaseStore
builds on them) into ``holomem.Memory`` calls. Imports LangGraph (the ``langgraph``
extra) and the memory API; nothing else in holomem imports this module.

How an item is stored (docs/contract.md §3, §4a, §4b):

- **Where**: a LangGraph namespace is the holomem namespace of the same strings, under
  the store's own ``namespace`` prefix (default: the root). The key is the fact's
  ``subject``; subjects belong to a namespace, so one key in two namespaces is two items.
- **What**: the value is the fact's ``metadata`` (its top-level keys are the value's,
  so LangGraph's filters are holomem's metadata filters), plus the marker key
  :data:`MARK` that tells an item from the other facts of a store shared with other
  doors. The fact's text is what search finds: the value's ``index`` fields (the
  store's ``index["fields"]``, default ``["$"]``, the whole value as JSON), or the key
  alone for ``index=False``.
- **Updates are supersessions**: a put of an existing key remembers a new fact that
  names the current one in ``supersedes`` (explicitly, so it holds whatever
  supersession policy the Memory applies). ``Memory.history`` of either id shows every
  value the key had, and ``recall(..., as_of=t)`` sees the value current at t.
  ``created_at`` is the first version's ingest time, ``updated_at`` the current one's.
- **Delete is a forget** of every version of the key (``include_chain``), purged when
  the store was built with ``purge=True`` (docs/guarantees.md §6).
- **Search**: with a query, ``Memory.recall`` restricted to the namespace prefix and
  the filter (BM25; semantic as well when the Memory has an embedder, or with
  ``index["embed"]``); without one, ``Memory.list`` in write order. ``score`` is the
  recall score (None for a listing).

Ops of one batch run in order, each seeing the ones before it; a batch is checked
whole before anything runs, but is not one transaction. The puts and deletes of every
HolomemStore of a process over one Store take turns (a put reads the current version
before it supersedes it); another process cannot write to a Store that one holds.
TTLs are not supported (``supports_ttl`` is False). A key is a subject, so a put
refuses a key that starts with ``holomem:``, the prefix of holomem's reserved subjects,
whose facts search would never list (get and delete still take one). Bad input raises
LangGraph's own ``InvalidNamespaceError`` for a namespace (``BaseStore`` raises it for
the same namespaces), otherwise a holomem ``InvalidError`` or ``LimitError`` naming what
is wrong (an embedding function's own failure aside, never another exception).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import threading
import weakref
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from holomem.errors import missing_extra

try:
    from langgraph.store.base import (
        NOT_PROVIDED,
        BaseStore,
        Embeddings,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        NamespacePath,
        NotProvided,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        ensure_embeddings,
        get_text_at_path,
        tokenize_path,
    )
except ImportError as _missing:  # the langgraph extra is not installed
    raise missing_extra(_missing, "holomem.integrations.langgraph", "langgraph") \
        from _missing

from holomem.api.engine import Store, validate
from holomem.api.memory import filters
from holomem.api.memory.memory import Memory
from holomem.api.memory.types import FactRecord
from holomem.errors import InvalidError, LimitError

__all__ = ["MARK", "HolomemStore"]

#: The metadata key that marks a fact as a LangGraph item (its value: the item format,
#: 1). A value may not use it as a key.
MARK = "$langgraph"
FORMAT = 1
#: The most results one search may reach (offset + limit): what one recall returns.
MAX_SEARCH = 1000
#: The operators LangGraph's filters define, and those holomem adds (§4b).
FILTER_OPS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists")
_PAGE = 1000  # facts or namespaces read per page

_LOCKS: weakref.WeakKeyDictionary[Store, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_LOCK = threading.Lock()


def _writer_lock(store: Store) -> threading.Lock:
    with _LOCKS_LOCK:
        return _LOCKS.setdefault(store, threading.Lock())


class _Put(NamedTuple):
    """A checked PutOp of a value: what the fact will hold."""

    namespace: tuple[str, ...]
    key: str
    metadata: dict[str, Any]
    text: str
    embed: bool  # whether index["embed"] embeds its text (it came from index fields)


class _Search(NamedTuple):
    """A checked SearchOp: the holomem namespace and filter it reads."""

    prefix: list[str]
    filter: dict[str, Any]
    limit: int
    offset: int
    query: str | None


def _sequence(namespace: object, what: str) -> None:
    if not isinstance(namespace, (tuple, list)):
        raise InvalidNamespaceError(f"{what} must be a tuple of strings, got "
                                    f"{type(namespace).__name__}")


def _labels(namespace: object, what: str, *, wildcards: bool = False) -> tuple[str, ...]:
    """A namespace (or a pattern) as a tuple of strings LangGraph and holomem both take."""
    _sequence(namespace, what)
    assert isinstance(namespace, (tuple, list))  # for the type checker: _sequence checked
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


def _count(value: object, what: str, *, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidError(f"{what} must be an integer >= {least}, got {value!r}")
    return value


def _key(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidError(f"key must be a string, got {type(value).__name__}")
    return validate.doc_id(value, "key")


def _ms_time(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` starts (``prefix``) or ends (``suffix``) with the pattern,
    ``"*"`` standing for any one label."""
    path = tuple(condition.path)
    if len(path) > len(namespace):
        return False
    part = namespace[:len(path)] if condition.match_type == "prefix" \
        else namespace[len(namespace) - len(path):]
    return all(p in ("*", n) for p, n in zip(path, part, strict=True))


def _filter(flt: object) -> dict[str, Any]:
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
    for key, cond in flt.items():
        if not isinstance(key, str):
            raise InvalidError(f"filter keys must be strings, got {key!r}")
        if key == MARK:
            raise InvalidError(f"filter: {MARK!r} is holomem's marker, not a value key")
        if isinstance(cond, Mapping) and not any(str(k).startswith("$") for k in cond):
            raise InvalidError(
                f"filter.{key}: a nested object filter is not supported; filter on "
                "top-level keys of the value, or compare the whole object with "
                '{"$eq": {...}}')
        if isinstance(cond, Mapping):
            unknown = sorted(str(op) for op in cond if op not in FILTER_OPS)
            if unknown:
                raise InvalidError(f"filter.{key}: unknown operators {unknown}; operators "
                                   f"are {', '.join(FILTER_OPS)}")
        conditions[key] = cond
    out = {"metadata": conditions}
    filters.compile_filter(out)  # checked now, so that a bad one fails its batch whole
    return out


class HolomemStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are facts of a holomem ``Memory``.

    Args:
        memory: the Memory that holds the items; its store may be shared with other
            doors (their facts are not items).
        namespace: the holomem namespace under which LangGraph's namespaces live
            (default the root: a LangGraph namespace is the holomem namespace of the
            same strings). Together they hold at most 8 strings.
        index: LangGraph's ``IndexConfig``: ``fields`` (the value paths whose text is
            searched, default ``["$"]``, the whole value); ``embed`` (a LangChain
            ``Embeddings`` or an embedding function, when the Memory has no embedder of
            its own: its vectors are the facts' and the queries'); ``dims`` (checked
            against the embedder's dimension).
        purge: make every delete a purge: no file keeps the deleted values afterwards
            (a compaction per delete; docs/guarantees.md §6).

    Errors: ``invalid_request`` (an unknown index key, two embedders, a dimension that
    is not the embedder's), ``InvalidNamespaceError`` (a bad ``namespace``).
    """

    supports_ttl = False

    def __init__(self, memory: Memory, *, namespace: Sequence[str] = (),
                 index: IndexConfig | None = None, purge: bool = False) -> None:
        if not isinstance(memory, Memory):
            raise InvalidError(f"HolomemStore needs a holomem.Memory, got "
                               f"{type(memory).__name__}")
        base = _labels(namespace, "namespace")
        if len(base) >= validate.MAX_NAMESPACE_DEPTH:
            raise InvalidNamespaceError(f"namespace {base!r} leaves no room for LangGraph's "
                                        f"(holomem namespaces hold at most "
                                        f"{validate.MAX_NAMESPACE_DEPTH} strings)")
        self.memory = memory
        self.namespace = base
        self.purge = bool(purge)
        config: Mapping[str, Any] = index or {}
        if not isinstance(config, Mapping):
            raise InvalidError("index must be a dict (LangGraph's IndexConfig)")
        unknown = sorted(str(k) for k in config if k not in ("fields", "embed", "dims"))
        if unknown:
            raise InvalidError(f"index: unsupported keys {unknown}; HolomemStore takes "
                               "fields, embed and dims")
        self.fields: list[str] = self._paths(config.get("fields") or ["$"], "index.fields")
        self.embeddings: Embeddings | None = None
        if config.get("embed") is not None:
            if memory.embedder is not None:
                raise InvalidError("index.embed: the Memory has an embedder of its own; "
                                   "give one or the other")
            self.embeddings = ensure_embeddings(config["embed"])
        self.dims: int | None = None
        if config.get("dims") is not None:
            self.dims = _count(config["dims"], "index.dims", least=1)
            if memory.embedder is not None and memory.embedder.identity.dim != self.dims:
                raise InvalidError(f"index.dims is {self.dims}, but the Memory's embedder "
                                   f"gives {memory.embedder.identity.dim} dimensions")
        # A put reads the key's current version, then supersedes it: one at a time for
        # every HolomemStore of this process over the same Store.
        self._writing = _writer_lock(memory.store)

    # -- BaseStore ------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (each sees the ones before it); one result per op.

        Every op is checked before the first runs, and the texts of every put are
        embedded together (with ``index["embed"]``). Errors: ``invalid_request``,
        ``limit``, ``InvalidNamespaceError``; a holomem error of the call an op makes.
        """
        if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Iterable):
            raise InvalidError("batch takes an iterable of LangGraph ops")
        todo = list(ops)
        checked = [self._check(op) for op in todo]
        vectors = self._embed_puts([c for c in checked if isinstance(c, _Put)])
        return [self._run(op, c, vectors) for op, c in zip(todo, checked, strict=True)]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread, so that no fsync or recall blocks the loop."""
        if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Iterable):
            raise InvalidError("abatch takes an iterable of LangGraph ops")
        return await asyncio.to_thread(self.batch, list(ops))

    # BaseStore's methods check a namespace's labels before they batch, but iterate it
    # first: a namespace that is no sequence (None, a number) would be a TypeError from
    # inside LangGraph. These overrides refuse it first and otherwise defer to BaseStore.
    def get(self, namespace: tuple[str, ...], key: str, *,
            refresh_ttl: bool | None = None) -> Item | None:
        _sequence(namespace, "namespace")
        return super().get(namespace, key, refresh_ttl=refresh_ttl)

    async def aget(self, namespace: tuple[str, ...], key: str, *,
                   refresh_ttl: bool | None = None) -> Item | None:
        _sequence(namespace, "namespace")
        return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    def search(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
               filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
               refresh_ttl: bool | None = None) -> list[SearchItem]:
        _sequence(namespace_prefix, "namespace_prefix")
        return super().search(namespace_prefix, query=query, filter=filter, limit=limit,
                              offset=offset, refresh_ttl=refresh_ttl)

    async def asearch(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
                      filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
                      refresh_ttl: bool | None = None) -> list[SearchItem]:
        _sequence(namespace_prefix, "namespace_prefix")
        return await super().asearch(namespace_prefix, query=query, filter=filter,
                                     limit=limit, offset=offset, refresh_ttl=refresh_ttl)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *,
            ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        _sequence(namespace, "namespace")
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        _sequence(namespace, "namespace")
        await super().aput(namespace, key, value, index, ttl=ttl)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        _sequence(namespace, "namespace")
        super().delete(namespace, key)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        _sequence(namespace, "namespace")
        await super().adelete(namespace, key)

    def list_namespaces(self, *, prefix: NamespacePath | None = None,
                        suffix: NamespacePath | None = None, max_depth: int | None = None,
                        limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        _sequence(prefix or (), "prefix")
        _sequence(suffix or (), "suffix")
        return super().list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth,
                                       limit=limit, offset=offset)

    async def alist_namespaces(self, *, prefix: NamespacePath | None = None,
                               suffix: NamespacePath | None = None,
                               max_depth: int | None = None, limit: int = 100,
                               offset: int = 0) -> list[tuple[str, ...]]:
        _sequence(prefix or (), "prefix")
        _sequence(suffix or (), "suffix")
        return await super().alist_namespaces(prefix=prefix, suffix=suffix,
                                              max_depth=max_depth, limit=limit, offset=offset)

    # -- checking -------------------------------------------------------------------------
    def _paths(self, paths: object, what: str) -> list[str]:
        if isinstance(paths, str) or not isinstance(paths, (list, tuple)):
            raise InvalidError(f"{what} must be a list of field paths")
        for path in paths:
            if not isinstance(path, str) or not path:
                raise InvalidError(f"{what}: a path must be a non-empty string, got {path!r}")
            try:
                tokenize_path(path)
            except (ValueError, IndexError) as exc:
                raise InvalidError(f"{what}: {path!r} is not a field path: {exc}") from exc
        return list(paths)

    def _full(self, namespace: tuple[str, ...], what: str) -> list[str]:
        """The holomem namespace of a LangGraph one."""
        if len(self.namespace) + len(namespace) > validate.MAX_NAMESPACE_DEPTH:
            room = validate.MAX_NAMESPACE_DEPTH - len(self.namespace)
            raise InvalidNamespaceError(f"{what} {namespace!r} has more than {room} labels "
                                        f"(holomem namespaces hold at most "
                                        f"{validate.MAX_NAMESPACE_DEPTH} strings"
                                        + (f", {len(self.namespace)} of them this store's"
                                           if self.namespace else "") + ")")
        return [*self.namespace, *namespace]

    def _check(self, op: object) -> object:
        """``op`` checked before any op runs (a _Put for a put of a value)."""
        if isinstance(op, GetOp):
            ns = _labels(op.namespace, "namespace")
            self._full(ns, "namespace")
            return GetOp(ns, _key(op.key))
        if isinstance(op, PutOp):
            return self._check_put(op)
        if isinstance(op, SearchOp):
            prefix = _labels(op.namespace_prefix, "namespace_prefix")
            limit = _count(op.limit, "limit")
            offset = _count(op.offset, "offset")
            if op.query is not None and not isinstance(op.query, str):
                raise InvalidError(f"query must be a string, got {type(op.query).__name__}")
            if op.query and offset + limit > MAX_SEARCH:
                raise LimitError(f"a search with a query reaches at most {MAX_SEARCH} "
                                 f"results (offset + limit is {offset + limit})")
            return _Search(self._full(prefix, "namespace_prefix"), _filter(op.filter), limit,
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
                checked.append(MatchCondition(c.match_type, _labels(c.path, c.match_type,
                                                                    wildcards=True)))
            depth = None if op.max_depth is None else _count(op.max_depth, "max_depth", least=1)
            return ListNamespacesOp(tuple(checked), depth, _count(op.limit, "limit"),
                                    _count(op.offset, "offset"))
        raise InvalidError(f"not a LangGraph store op: {type(op).__name__}")

    def _check_put(self, op: PutOp) -> _Put | PutOp:
        ns = _labels(op.namespace, "namespace")
        if not ns:
            raise InvalidNamespaceError("a put needs a namespace (it cannot be empty)")
        if ns[0] == "langgraph":
            raise InvalidNamespaceError(f'namespace {ns!r}: the root label "langgraph" is '
                                        "reserved by LangGraph")
        self._full(ns, "namespace")
        key = _key(op.key)
        if op.ttl is not None:
            raise InvalidError("HolomemStore does not support TTLs (supports_ttl is False); "
                               "put with ttl=None")
        if op.value is None:
            return PutOp(ns, key, None)
        validate.unreserved(key, "key")  # (a delete of such a key still runs)
        value = op.value
        if not isinstance(value, Mapping):
            raise InvalidError(f"the value of {key!r} must be a dict (or None to delete), "
                               f"got {type(value).__name__}")
        if MARK in value:
            raise InvalidError(f"the value of {key!r} uses the key {MARK!r}, which marks "
                               "holomem's LangGraph items")
        if op.index is not None and op.index is not False:
            paths = self._paths(op.index, "index")
        else:
            paths = self.fields
        metadata = {**value, MARK: FORMAT}
        try:
            validate.metadata(metadata)  # JSON, within holomem's size and depth limits
        except InvalidError as exc:
            raise type(exc)(f"the value of {key!r} in {ns!r}: {exc}") from exc
        found: list[str] = []
        if op.index is not False:
            plain = json.loads(json.dumps(value, default=dict))  # as stored: tuples as lists
            found = [t for p in paths for t in get_text_at_path(plain, p)]
        # Without indexed text, the key is what a query can find (text is never blank).
        text = "\n".join(found) if "".join(found).strip() else key if key.strip() \
            else json.dumps(value, default=dict, ensure_ascii=False)
        try:
            validate.text(text, "text")
        except LimitError as exc:
            raise LimitError(f"the indexed text of {key!r} in {ns!r}: {exc}") from exc
        return _Put(ns, key, metadata, text, bool("".join(found).strip()))

    def _embed_puts(self, puts: list[_Put]) -> dict[int, list[float]]:
        """index["embed"]'s vectors of the puts' texts, by id of the _Put (one call)."""
        todo = [p for p in puts if p.embed]
        if self.embeddings is None or not todo:
            return {}
        vectors = self._vectors(self.embeddings.embed_documents([p.text for p in todo]),
                                len(todo))
        return {id(p): v for p, v in zip(todo, vectors, strict=True)}

    def _vectors(self, raw: object, n: int) -> list[list[float]]:
        if not isinstance(raw, Sequence) or len(raw) != n:
            raise InvalidError(f"index.embed gave {type(raw).__name__} for {n} texts, not "
                               f"{n} vectors")
        out = []
        for vector in raw:
            try:
                floats = [float(x) for x in vector]
            except (TypeError, ValueError) as exc:
                raise InvalidError("index.embed gave a vector that is not numbers") from exc
            if not floats or not all(math.isfinite(x) for x in floats):
                raise InvalidError("index.embed gave an empty or non-finite vector")
            if self.dims is not None and len(floats) != self.dims:
                raise InvalidError(f"index.embed gave {len(floats)} dimensions; index.dims "
                                   f"is {self.dims}")
            out.append(floats)
        return out

    # -- running --------------------------------------------------------------------------
    def _run(self, op: object, checked: object, vectors: dict[int, list[float]]) -> Result:
        if isinstance(checked, GetOp):
            return self._get(checked.namespace, checked.key)
        if isinstance(checked, _Put):
            self._put(checked, vectors.get(id(checked)))
            return None
        if isinstance(checked, PutOp):
            self._delete(checked.namespace, checked.key)
            return None
        if isinstance(checked, _Search):
            return self._search(checked)
        assert isinstance(checked, ListNamespacesOp), op  # _check returns nothing else
        return self._list_namespaces(checked)

    def _versions(self, namespace: tuple[str, ...], key: str) -> list[FactRecord]:
        """Every stored version of the item, in write order."""
        full = self._full(namespace, "namespace")
        flt = {"subject": key, "metadata": {MARK: {"$exists": True}}}
        out: list[FactRecord] = []
        cursor = None
        while True:
            page = self.memory.list(cursor=cursor, limit=_PAGE, filter=flt, history="all",
                                    namespace=full)
            out.extend(r for r in page.facts if r.namespace == full)
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

    def _put(self, put: _Put, vector: list[float] | None) -> None:
        with self._writing:
            previous = [r.id for r in self._current(self._versions(put.namespace, put.key))]
            self.memory.remember(text=put.text, subject=put.key, metadata=put.metadata,
                                 namespace=self._full(put.namespace, "namespace"),
                                 supersedes=previous or None, embedding=vector)

    def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        with self._writing:
            ids = [r.id for r in self._versions(namespace, key)]
            if ids:
                self.memory.forget({"ids": ids}, include_chain=True, purge=self.purge)

    def _created(self, record: FactRecord) -> int:
        """The first version's ingest time (the chain, in effect order, starts there)."""
        return min(r.ingest_time for r in self.memory.history(record.id))

    def _search(self, op: _Search) -> list[SearchItem]:
        if op.limit == 0:
            return []
        prefix = op.prefix
        found: list[tuple[FactRecord, float | None]] = []
        if op.query:
            vector = None
            if self.embeddings is not None:
                vector = self._vectors([self.embeddings.embed_query(op.query)], 1)[0]
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
        start = self._full(lead, "prefix")
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
