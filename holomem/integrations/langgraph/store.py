"""The LangGraph ``BaseStore`` itself: :class:`HolomemStore`.

Owns: a HolomemStore's options (its Memory, namespace prefix, ``index`` config and
purge), the batch (every op checked by :mod:`.checks` before the first runs, the puts'
texts embedded together by :mod:`.vectors`, then each op run by :mod:`.items` in
order), and BaseStore's methods, which refuse a namespace that is no sequence before
BaseStore iterates it. Imports LangGraph's ``BaseStore`` and the memory API.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    Embeddings,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    NamespacePath,
    NotProvided,
    Op,
    Result,
    SearchItem,
    ensure_embeddings,
)

from holomem.api.engine import validate
from holomem.api.memory.memory import Memory
from holomem.errors import InvalidError
from holomem.integrations.langgraph import checks
from holomem.integrations.langgraph.checks import sequence
from holomem.integrations.langgraph.items import Items
from holomem.integrations.langgraph.vectors import IndexEmbeddings


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
        base = checks.labels(namespace, "namespace")
        if len(base) >= validate.MAX_NAMESPACE_DEPTH:
            raise InvalidNamespaceError(f"namespace {base!r} leaves no room for LangGraph's "
                                        f"(holomem namespaces hold at most "
                                        f"{validate.MAX_NAMESPACE_DEPTH} strings)")
        if not isinstance(purge, bool):
            raise InvalidError("purge must be True or False")
        self.memory = memory
        self.namespace = base
        self.purge = purge
        config: Mapping[str, Any] = index or {}
        if not isinstance(config, Mapping):
            raise InvalidError("index must be a dict (LangGraph's IndexConfig)")
        unknown = sorted(str(k) for k in config if k not in ("fields", "embed", "dims"))
        if unknown:
            raise InvalidError(f"index: unsupported keys {unknown}; HolomemStore takes "
                               "fields, embed and dims")
        self.fields: list[str] = checks.paths(config.get("fields") or ["$"], "index.fields")
        self.embeddings: Embeddings | None = None
        if config.get("embed") is not None:
            if memory.embedder is not None:
                raise InvalidError("index.embed: the Memory has an embedder of its own; "
                                   "give one or the other")
            self.embeddings = _embeddings(config["embed"])
        self.dims: int | None = None
        if config.get("dims") is not None:
            self.dims = checks.count(config["dims"], "index.dims", least=1)
            if memory.embedder is not None and memory.embedder.identity.dim != self.dims:
                raise InvalidError(f"index.dims is {self.dims}, but the Memory's embedder "
                                   f"gives {memory.embedder.identity.dim} dimensions")
        self._index = None if self.embeddings is None \
            else IndexEmbeddings(self.embeddings, self.dims, lambda: memory.store.embedding_dim)
        self._items = Items(memory, base, purge=self.purge, index=self._index)

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
        checked = [checks.check(op, self.namespace, self.fields) for op in todo]
        puts = [c for c in checked if isinstance(c, checks.Put)]
        vectors = {} if self._index is None else self._index.puts(puts)
        return [self._items.run(op, c, vectors) for op, c in zip(todo, checked, strict=True)]

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
        sequence(namespace, "namespace")
        return super().get(namespace, key, refresh_ttl=refresh_ttl)

    async def aget(self, namespace: tuple[str, ...], key: str, *,
                   refresh_ttl: bool | None = None) -> Item | None:
        sequence(namespace, "namespace")
        return await super().aget(namespace, key, refresh_ttl=refresh_ttl)

    def search(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
               filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
               refresh_ttl: bool | None = None) -> list[SearchItem]:
        sequence(namespace_prefix, "namespace_prefix")
        return super().search(namespace_prefix, query=query, filter=filter, limit=limit,
                              offset=offset, refresh_ttl=refresh_ttl)

    async def asearch(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
                      filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
                      refresh_ttl: bool | None = None) -> list[SearchItem]:
        sequence(namespace_prefix, "namespace_prefix")
        return await super().asearch(namespace_prefix, query=query, filter=filter,
                                     limit=limit, offset=offset, refresh_ttl=refresh_ttl)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
            index: Literal[False] | list[str] | None = None, *,
            ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        sequence(namespace, "namespace")
        super().put(namespace, key, value, index, ttl=ttl)

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any],
                   index: Literal[False] | list[str] | None = None, *,
                   ttl: float | NotProvided | None = NOT_PROVIDED) -> None:
        sequence(namespace, "namespace")
        await super().aput(namespace, key, value, index, ttl=ttl)

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        sequence(namespace, "namespace")
        super().delete(namespace, key)

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        sequence(namespace, "namespace")
        await super().adelete(namespace, key)

    def list_namespaces(self, *, prefix: NamespacePath | None = None,
                        suffix: NamespacePath | None = None, max_depth: int | None = None,
                        limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        sequence(prefix or (), "prefix")
        sequence(suffix or (), "suffix")
        return super().list_namespaces(prefix=prefix, suffix=suffix, max_depth=max_depth,
                                       limit=limit, offset=offset)

    async def alist_namespaces(self, *, prefix: NamespacePath | None = None,
                               suffix: NamespacePath | None = None,
                               max_depth: int | None = None, limit: int = 100,
                               offset: int = 0) -> list[tuple[str, ...]]:
        sequence(prefix or (), "prefix")
        sequence(suffix or (), "suffix")
        return await super().alist_namespaces(prefix=prefix, suffix=suffix,
                                              max_depth=max_depth, limit=limit, offset=offset)


def _embeddings(embed: object) -> Embeddings:
    """``index["embed"]`` as LangChain ``Embeddings``: an ``Embeddings``, a sync function
    of a list of texts, or a provider string LangGraph knows. An async function is
    refused: every op, ``abatch``'s too, embeds in the thread that runs the batch."""
    if inspect.iscoroutinefunction(embed):
        raise InvalidError("index.embed is an async function; HolomemStore embeds in the "
                           "thread that runs each batch: give a sync function or a "
                           "LangChain Embeddings")
    if not (isinstance(embed, (Embeddings, str)) or callable(embed)):
        raise InvalidError(f"index.embed must be a LangChain Embeddings, an embedding "
                           f"function or a provider string, not {type(embed).__name__}")
    try:
        return ensure_embeddings(embed)
    except (ValueError, ImportError, TypeError) as exc:
        raise InvalidError(f"index.embed: {exc}") from exc
