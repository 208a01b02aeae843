"""The memory API for asyncio: ``holomem.AsyncMemory`` (docs/contract.md §4e).

Owns: running a blocking call off the event loop so that cancelling it never cuts it
in the middle (:func:`offload`), and :class:`AsyncMemory`, every call of ``Memory``
as a coroutine. A call runs whole in a worker thread: an fsync, a replay or a long
recall never blocks the loop. Cancellation: a call not yet started in a worker never
starts; one already running runs to its end (each call is one transaction, or
batches that are each one), and the cancelled coroutine returns only after it has
ended, so nothing of it is still running once the caller has seen the cancellation.
Imports the memory API and the errors.
"""

from __future__ import annotations

import asyncio
import builtins
import concurrent.futures
import contextlib
import functools
import itertools
import os
import threading
import types
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from holomem.api.engine import Store
from holomem.api.memory.binding import Derived
from holomem.api.memory.memory import Memory
from holomem.api.memory.policies import Clock, Policies
from holomem.api.memory.session import Session
from holomem.api.memory.transfer import exchange
from holomem.errors import InvalidError

T = TypeVar("T")
P = ParamSpec("P")
R = TypeVar("R")

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


class Offloaded(Generic[P, R]):
    """A method of AsyncMemory: the Memory method ``method``, run whole in a worker
    thread (:func:`offload`); its signature and docstring are the Memory method's."""

    def __init__(self, method: Callable[Concatenate[Memory, P], R]) -> None:
        async def run(holder: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs) -> R:
            call = functools.partial(method, holder.memory, *args, **kwargs)
            return await offload(call, holder.executor)

        functools.update_wrapper(run, method)
        self.method = run

    @overload
    def __get__(self, holder: None, owner: type[Any]
                ) -> Callable[Concatenate[AsyncMemory, P], Coroutine[Any, Any, R]]: ...
    @overload
    def __get__(self, holder: AsyncMemory, owner: type[Any]
                ) -> Callable[P, Coroutine[Any, Any, R]]: ...
    def __get__(self, holder: AsyncMemory | None, owner: type[Any]) -> Any:
        if holder is None:
            return self.method
        return types.MethodType(self.method, holder)


class Exported(Generic[P]):
    """AsyncMemory's ``export``: the Memory method ``method`` (its argument check and
    span included), its records read in a worker thread a block at a time
    (:data:`~holomem.api.memory.transfer.exchange.EXPORT_BLOCK` records per worker
    call); its signature and docstring are the Memory method's."""

    def __init__(self, method: Callable[Concatenate[Memory, P], Iterator[dict[str, Any]]]
                 ) -> None:
        async def run(holder: AsyncMemory, /, *args: P.args, **kwargs: P.kwargs
                      ) -> AsyncIterator[dict[str, Any]]:
            records = method(holder.memory, *args, **kwargs)
            block = functools.partial(_take, records, exchange.EXPORT_BLOCK)
            while chunk := await offload(block, holder.executor):
                for record in chunk:
                    yield record

        functools.update_wrapper(run, method)
        self.method = run

    @overload
    def __get__(self, holder: None, owner: type[Any]
                ) -> Callable[Concatenate[AsyncMemory, P], AsyncIterator[dict[str, Any]]]: ...
    @overload
    def __get__(self, holder: AsyncMemory, owner: type[Any]
                ) -> Callable[P, AsyncIterator[dict[str, Any]]]: ...
    def __get__(self, holder: AsyncMemory | None, owner: type[Any]) -> Any:
        if holder is None:
            return self.method
        return types.MethodType(self.method, holder)


def _take(items: Iterator[T], n: int) -> builtins.list[T]:
    """The next ``n`` of ``items`` (fewer at its end; none once it has ended)."""
    return builtins.list(itertools.islice(items, n))


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
        if executor is not None and not isinstance(executor, concurrent.futures.Executor):
            raise InvalidError(f"executor must be a concurrent.futures.Executor or None, "
                               f"not {type(executor).__name__}")
        if isinstance(store_or_memory, Memory):
            if args or kwargs:
                raise TypeError("AsyncMemory(memory) takes no configuration of its own")
            self.memory = store_or_memory
        else:
            self.memory = Memory(store_or_memory, *args, **kwargs)
        self.executor = executor
        #: The Memory's session (what the ``with_*`` calls derive from).
        self.session: Session = self.memory.session

    def _derive(self, session: Session) -> AsyncMemory:
        """An AsyncMemory over ``session``, on the same worker threads."""
        return AsyncMemory(self.memory._derive(session), executor=self.executor)

    @property
    def store(self) -> Store:
        return self.memory.store

    @property
    def config(self) -> Any:
        return self.memory.config

    @property
    def clock(self) -> Clock:
        return self.memory.clock

    @property
    def policies(self) -> Policies:
        return self.memory.policies

    @property
    def embedder(self) -> Any:
        return self.memory.embedder

    # Named one by one, not derived in a loop: holomem ships py.typed, and these lines
    # are what a type checker reads (tests/memory/test_async.py pins them to Memory).
    remember = Offloaded(Memory.remember)
    remember_many = Offloaded(Memory.remember_many)
    remember_conversation = Offloaded(Memory.remember_conversation)
    recall = Offloaded(Memory.recall)
    explain = Offloaded(Memory.explain)
    get = Offloaded(Memory.get)
    history = Offloaded(Memory.history)
    info = Offloaded(Memory.info)
    capabilities = Offloaded(Memory.capabilities)
    export_page = Offloaded(Memory.export_page)
    list = Offloaded(Memory.list)
    list_namespaces = Offloaded(Memory.list_namespaces)
    feedback = Offloaded(Memory.feedback)
    set_confidence = Offloaded(Memory.set_confidence)
    forget = Offloaded(Memory.forget)
    apply_forgetting = Offloaded(Memory.apply_forgetting)
    consolidate = Offloaded(Memory.consolidate)
    relate = Offloaded(Memory.relate)
    relate_many = Offloaded(Memory.relate_many)
    unrelate = Offloaded(Memory.unrelate)
    links = Offloaded(Memory.links)
    why = Offloaded(Memory.why)
    probe = Offloaded(Memory.probe)
    related = Offloaded(Memory.related)
    reason = Offloaded(Memory.reason)
    contradict = Offloaded(Memory.contradict)
    entity_profile = Offloaded(Memory.entity_profile)
    compile_context = Offloaded(Memory.compile_context)
    explain_context = Offloaded(Memory.explain_context)
    save_working_context = Offloaded(Memory.save_working_context)
    load_working_context = Offloaded(Memory.load_working_context)
    list_working_contexts = Offloaded(Memory.list_working_contexts)
    import_ = Offloaded(Memory.import_)
    reembed = Offloaded(Memory.reembed)
    notify = Offloaded(Memory.notify)  # the observers may take their time
    export = Exported(Memory.export)

    async def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """As ``Memory.call``, run in a worker."""
        return await offload(functools.partial(self.memory.call, op, request), self.executor)

    # -- no store involved ----------------------------------------------------------------
    render_context = staticmethod(Memory.render_context)
    with_supersession = Derived(Session.with_supersession)
    with_recency = Derived(Session.with_recency)
    with_entity_extractor = Derived(Session.with_entity_extractor)
    with_forgetting = Derived(Session.with_forgetting)
    with_consolidation = Derived(Session.with_consolidation)
    with_observer = Derived(Session.with_observer)
    with_clock = Derived(Session.with_clock)
