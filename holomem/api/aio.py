"""The memory API for asyncio: ``holomem.AsyncMemory`` (docs/contract.md §4e).

Owns: running a blocking call off the event loop so that cancelling it never cuts it
in the middle (:func:`offload`), and :class:`AsyncMemory`, every call of ``Memory``
as a coroutine. A call runs whole in a worker thread: an fsync, a replay or a long
recall never blocks the loop. Cancellation: a call not yet started in a worker never
starts; one already running runs to its end (each call is one transaction, or
batches that are each one), and the cancelled coroutine returns only after it has
ended, so nothing of it is still running once the caller has seen the cancellation.
Imports the memory API.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import functools
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any, TypeVar

from holomem.api import transfer, validate
from holomem.api.configuration import ConsolidationPolicy, ForgettingPolicy
from holomem.api.context import CompiledContext, ContextDecision
from holomem.api.engine import Store
from holomem.api.graphtypes import (
    LinkList,
    RelateManyResult,
    RelateResult,
    UnrelateResult,
    WhyResult,
)
from holomem.api.memory import Memory
from holomem.api.policies import Clock, EntityExtractor, Observer, RecencyPolicy, SupersessionPolicy
from holomem.api.types import (
    ConsolidationReport,
    ContradictResult,
    Explanation,
    FactRecord,
    FeedbackReport,
    ForgetReport,
    ImportReport,
    ListPage,
    MemoryInfo,
    NamespacePage,
    ProbeResult,
    ReasonResult,
    Recalled,
    RelatedResult,
    Remembered,
)
from holomem.api.working import WorkingContext, WorkingContextList

T = TypeVar("T")

_default: concurrent.futures.ThreadPoolExecutor | None = None
_default_lock = threading.Lock()


def default_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The worker threads AsyncMemory values share unless given their own."""
    global _default
    with _default_lock:
        if _default is None:
            _default = concurrent.futures.ThreadPoolExecutor(
                max_workers=min(32, (os.cpu_count() or 1) + 4),
                thread_name_prefix="holomem-async")
        return _default


async def offload(fn: Callable[[], T], executor: concurrent.futures.Executor | None = None,
                  *, discard: Callable[[T], None] | None = None) -> T:
    """``fn()`` in a worker thread. Cancelled before a worker took it: it never runs.
    Cancelled while it runs: the coroutine waits for its end, hands a result nobody
    will receive to ``discard`` (to release what it holds), then raises
    ``CancelledError``; an error of ``fn`` is dropped."""
    work = (executor or default_executor()).submit(fn)
    waiting = asyncio.wrap_future(work)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        if work.cancel():
            raise
        while not waiting.done():
            # Cancelled again: wait on. Its own error: the result belongs to nobody now.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.shield(waiting)
        if not waiting.cancelled() and waiting.exception() is None and discard is not None:
            discard(waiting.result())
        raise


class AsyncMemory:
    """Every call of :class:`~holomem.Memory` as a coroutine, run in worker threads.

    ``AsyncMemory(store, config, ...)`` takes what ``Memory`` takes (building it runs
    in the caller's thread: it may record the configuration), or wraps a Memory:
    ``AsyncMemory(memory)``. ``executor``: the worker threads (default: a pool shared
    by every AsyncMemory of the process). The ``with_*`` calls and
    :meth:`render_context` touch no store and stay plain methods.
    """

    def __init__(self, store_or_memory: Store | Memory, *args: Any,
                 executor: concurrent.futures.Executor | None = None, **kwargs: Any) -> None:
        if isinstance(store_or_memory, Memory):
            if args or kwargs:
                raise TypeError("AsyncMemory(memory) takes no configuration of its own")
            self.memory = store_or_memory
        else:
            self.memory = Memory(store_or_memory, *args, **kwargs)
        self.executor = executor

    @property
    def store(self) -> Store:
        return self.memory.store

    @property
    def config(self) -> Any:
        return self.memory.config

    @property
    def embedder(self) -> Any:
        return self.memory.embedder

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await offload(functools.partial(fn, *args, **kwargs), self.executor)

    # -- writing ------------------------------------------------------------------------
    async def remember(self, input: Any = None, /, **fields: Any) -> Remembered:
        return await self._run(self.memory.remember, input, **fields)

    async def remember_many(self, inputs: Iterable[Any], *, progress: Any = None
                            ) -> builtins.list[Remembered]:
        return await self._run(self.memory.remember_many, inputs, progress=progress)

    async def feedback(self, id: str, helpful: bool, note: str | None = None
                       ) -> FeedbackReport:
        return await self._run(self.memory.feedback, id, helpful, note)

    async def set_confidence(self, id: str, confidence: float) -> FactRecord:
        return await self._run(self.memory.set_confidence, id, confidence)

    async def compile_context(self, query: str, budget_tokens: int,
                              namespace: Any = None, fragments: Any = None,
                              **options: Any) -> CompiledContext:
        return await self._run(self.memory.compile_context, query, budget_tokens, namespace,
                               fragments, **options)

    async def explain_context(self, query: str, budget_tokens: int, id: str,
                              namespace: Any = None, fragments: Any = None,
                              **options: Any) -> ContextDecision:
        return await self._run(self.memory.explain_context, query, budget_tokens, id,
                               namespace, fragments, **options)

    async def save_working_context(self, namespace: Any, session: str, state: Any
                                   ) -> WorkingContext:
        return await self._run(self.memory.save_working_context, namespace, session, state)

    async def load_working_context(self, namespace: Any, session: str,
                                   save: int | None = None) -> WorkingContext:
        return await self._run(self.memory.load_working_context, namespace, session, save)

    async def list_working_contexts(self, namespace: Any = None) -> WorkingContextList:
        return await self._run(self.memory.list_working_contexts, namespace)

    async def forget(self, scope: Any, options: Any = None, /, **fields: Any) -> ForgetReport:
        return await self._run(self.memory.forget, scope, options, **fields)

    async def apply_forgetting(self, options: Any = None, /, **fields: Any) -> ForgetReport:
        return await self._run(self.memory.apply_forgetting, options, **fields)

    async def consolidate(self, options: Any = None, /, **fields: Any) -> ConsolidationReport:
        return await self._run(self.memory.consolidate, options, **fields)

    async def reembed(self, **kwargs: Any) -> int:
        return await self._run(self.memory.reembed, **kwargs)

    async def import_(self, records: Iterable[Any], **kwargs: Any) -> ImportReport:
        """As ``Memory.import_``; ``records`` is read in the worker (a plain iterable)."""
        return await self._run(self.memory.import_, records, **kwargs)

    # -- reading ------------------------------------------------------------------------
    async def info(self) -> MemoryInfo:
        return await self._run(self.memory.info)

    async def get(self, id: str) -> FactRecord | None:
        return await self._run(self.memory.get, id)

    async def history(self, id: str) -> builtins.list[FactRecord]:
        return await self._run(self.memory.history, id)

    async def recall(self, query: str, options: Any = None, /, **fields: Any
                     ) -> builtins.list[Recalled]:
        return await self._run(self.memory.recall, query, options, **fields)

    async def explain(self, query: str, id: str, options: Any = None, /, **fields: Any
                      ) -> Explanation:
        return await self._run(self.memory.explain, query, id, options, **fields)

    async def list(self, cursor: str | None = None, limit: int = 100, filter: Any = None,
                   history: str = "all", namespace: Sequence[str] | None = None) -> ListPage:
        return await self._run(self.memory.list, cursor, limit, filter, history, namespace)

    async def list_namespaces(self, prefix: Sequence[str] | None = None,
                              max_depth: int | None = None, limit: int = 100,
                              cursor: str | None = None) -> NamespacePage:
        return await self._run(self.memory.list_namespaces, prefix, max_depth, limit, cursor)

    async def probe(self, entity: str, k: int = 10, namespace: Sequence[str] | None = None
                    ) -> ProbeResult:
        return await self._run(self.memory.probe, entity, k, namespace)

    async def related(self, entity: str, k: int = 10,
                      namespace: Sequence[str] | None = None) -> RelatedResult:
        return await self._run(self.memory.related, entity, k, namespace)

    async def reason(self, entities: Sequence[str], k: int = 10,
                     namespace: Sequence[str] | None = None) -> ReasonResult:
        return await self._run(self.memory.reason, entities, k, namespace)

    async def contradict(self, *, subject: str | None = None, entity: str | None = None,
                         k: int = 10, max_pairs: int | None = None, cursor: str | None = None,
                         namespace: Sequence[str] | None = None, filter: Any = None
                         ) -> ContradictResult:
        extra = {} if max_pairs is None else {"max_pairs": max_pairs}
        return await self._run(self.memory.contradict, subject=subject, entity=entity, k=k,
                               cursor=cursor, namespace=namespace, filter=filter, **extra)

    async def export(self, namespace: Sequence[str] | None = None
                     ) -> AsyncIterator[dict[str, Any]]:
        """As ``Memory.export``, each block of facts read in a worker."""
        blocks = transfer.export_blocks(self.store, validate.namespace(namespace))
        while True:
            block = await self._run(next, blocks, None)
            if block is None:
                return
            for record in block:
                yield transfer.as_dict(record)

    # -- relations (docs/contract.md §4f) -------------------------------------------------
    async def relate(self, from_id: str, to_id: str, relation: str, metadata: Any = None,
                     **kwargs: Any) -> RelateResult:
        return await self._run(self.memory.relate, from_id, to_id, relation, metadata,
                               **kwargs)

    async def relate_many(self, links: Any, **kwargs: Any) -> RelateManyResult:
        """As ``Memory.relate_many`` (one transaction: all or nothing)."""
        return await self._run(self.memory.relate_many, links, **kwargs)

    async def unrelate(self, from_id: str, to_id: str, relation: str,
                       **kwargs: Any) -> UnrelateResult:
        return await self._run(self.memory.unrelate, from_id, to_id, relation, **kwargs)

    async def links(self, id: str, relation: str | None = None, direction: str = "out",
                    **kwargs: Any) -> LinkList:
        return await self._run(self.memory.links, id, relation, direction, **kwargs)

    async def why(self, query_or_id: str, max_hops: int = 2, relation: Any = None,
                  filter: Any = None, **kwargs: Any) -> WhyResult:
        return await self._run(self.memory.why, query_or_id, max_hops, relation, filter,
                               **kwargs)

    async def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        return await self._run(self.memory.call, op, request)

    # -- no store involved ----------------------------------------------------------------
    render_context = staticmethod(Memory.render_context)

    def _wrap(self, memory: Memory) -> AsyncMemory:
        return AsyncMemory(memory, executor=self.executor)

    def with_supersession(self, policy: str | SupersessionPolicy) -> AsyncMemory:
        return self._wrap(self.memory.with_supersession(policy))

    def with_recency(self, policy: RecencyPolicy | None) -> AsyncMemory:
        return self._wrap(self.memory.with_recency(policy))

    def with_entity_extractor(self, extractor: str | EntityExtractor) -> AsyncMemory:
        return self._wrap(self.memory.with_entity_extractor(extractor))

    def with_forgetting(self, policy: ForgettingPolicy | None) -> AsyncMemory:
        return self._wrap(self.memory.with_forgetting(policy))

    def with_consolidation(self, policy: ConsolidationPolicy | None) -> AsyncMemory:
        return self._wrap(self.memory.with_consolidation(policy))

    def with_observer(self, observer: Observer) -> AsyncMemory:
        return self._wrap(self.memory.with_observer(observer))

    def with_clock(self, clock: Clock) -> AsyncMemory:
        return self._wrap(self.memory.with_clock(clock))

