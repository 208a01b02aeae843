"""AsyncMemory: every call of Memory as a coroutine that never blocks the event loop,
and cancellation that never leaves a call half applied (a call cancelled before it
started never runs; one cancelled while running runs whole, and the coroutine ends
only after it has).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import threading
from collections.abc import Sequence

import pytest

from holomem import AsyncMemory, ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.policies import Links, NewFact, SubjectMember, SupersessionPolicy

#: Plain methods on purpose: they touch no store.
PLAIN = {"render_context", "with_supersession", "with_recency", "with_entity_extractor",
         "with_forgetting", "with_consolidation", "with_observer", "with_clock"}


def public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n))}


def names(cls: type) -> set[str]:
    """Every public name of ``cls``: its methods and its properties."""
    return {n for n in dir(cls) if not n.startswith("_")}


def test_async_memory_has_every_public_name_of_memory_with_the_same_signature() -> None:
    # Compared whole, so that a method added to Memory one day cannot be forgotten here.
    assert names(Memory) - names(AsyncMemory) == set()
    assert names(AsyncMemory) == names(Memory)  # (its memory and executor: per value)
    for name in public(Memory) - PLAIN:
        fn = getattr(AsyncMemory, name)
        assert inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn), name
        assert inspect.signature(fn) == inspect.signature(getattr(Memory, name)), name
    for name in names(Memory) - public(Memory):  # the properties
        assert isinstance(getattr(AsyncMemory, name), property), name


def test_async_memory_answers_its_properties_as_its_memory_does(
        store: Store, clock: ManualClock) -> None:
    am = AsyncMemory(store, clock=clock)
    for name in names(Memory) - public(Memory):
        assert getattr(am, name) == getattr(am.memory, name), name
    assert am.clock is clock


async def _outcome(fn: object, *args: object, **kwargs: object) -> type[BaseException] | None:
    """The class of what calling ``fn`` raised (None: it answered), awaited or iterated
    as it needs."""
    try:
        answer = fn(*args, **kwargs)  # type: ignore[operator]
        if inspect.isawaitable(answer):
            await answer
        elif hasattr(answer, "__aiter__"):
            [r async for r in answer]
        elif hasattr(answer, "__next__"):
            list(answer)
    except Exception as exc:
        return type(exc)
    return None


#: Arguments that fit no call: a keyword none takes, more positional ones than any takes.
WRONG: list[tuple[tuple[object, ...], dict[str, object]]] = [
    ((), {"no_such_argument": 1}), ((None,) * 12, {})]


def test_arguments_that_do_not_fit_raise_the_same_error_in_memory_and_async_memory(
        store: Store) -> None:
    async def main() -> None:
        am = AsyncMemory(store)
        for name in sorted(public(Memory) - PLAIN):
            for args, kwargs in WRONG:
                sync = await _outcome(getattr(am.memory, name), *args, **kwargs)
                both = await _outcome(getattr(am, name), *args, **kwargs)
                assert sync is not None and both is sync, (name, args, kwargs, sync, both)

    asyncio.run(main())


def test_an_executor_that_is_not_one_is_refused_when_async_memory_is_made(store: Store) -> None:
    from holomem import InvalidError

    for executor in (5, "pool", threading.Thread):
        with pytest.raises(InvalidError, match="executor"):
            AsyncMemory(store, executor=executor)  # type: ignore[arg-type]
        with pytest.raises(InvalidError, match="executor"):
            AsyncMemory(Memory(store), executor=executor)  # type: ignore[arg-type]


def test_async_calls_answer_as_memory_does(store: Store, clock: ManualClock) -> None:
    async def main() -> None:
        am = AsyncMemory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        first = await am.remember("Ann lives in Oslo", subject="city", namespace=["u1"])
        await am.remember("Ann lives in Rome", subject="city", namespace=["u1"])
        results = await am.recall("Ann lives", {"history": "all", "namespace": ["u1"]})
        assert results == am.memory.recall("Ann lives", history="all", namespace=["u1"])
        assert (await am.get(first.id)).status == "superseded"
        assert len((await am.list()).facts) == 2
        assert (await am.list_namespaces()).namespaces[0].namespace == ["u1"]
        exported = [r async for r in am.export()]
        assert exported == list(am.memory.export())
        report = await am.import_(exported)
        assert report.unchanged == 2
        assert (await am.call("get", {"id": first.id}))["fact"]["id"] == first.id

    asyncio.run(main())


def blocking_supersession(started: threading.Event, release: threading.Event
                          ) -> SupersessionPolicy:
    def policy(new: NewFact, members: Sequence[SubjectMember]) -> Links:
        started.set()
        assert release.wait(30), "the test never released the call"
        return Links([], [])
    return policy


def test_a_long_call_never_blocks_the_event_loop(store: Store, clock: ManualClock) -> None:
    started, release = threading.Event(), threading.Event()
    am = AsyncMemory(store, clock=clock).with_supersession(
        blocking_supersession(started, release))

    async def main() -> None:
        call = asyncio.create_task(am.remember("Ann lives in Oslo", subject="city"))
        while not started.is_set():
            await asyncio.sleep(0.01)
        # The call is inside the store's write lock, in a worker: the loop still runs.
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0)
            ticks += 1
        assert ticks == 5 and not call.done()
        release.set()
        assert (await call).created

    asyncio.run(main())


def test_a_call_cancelled_while_running_runs_whole_and_the_coroutine_waits_for_it(
        store: Store, clock: ManualClock) -> None:
    started, release = threading.Event(), threading.Event()
    am = AsyncMemory(store, clock=clock).with_supersession(
        blocking_supersession(started, release))
    batch = [{"text": f"fact {i}", "subject": "s"} for i in range(50)]

    async def main() -> None:
        call = asyncio.create_task(am.remember_many(batch))
        while not started.is_set():
            await asyncio.sleep(0.01)
        call.cancel()
        await asyncio.sleep(0.05)
        assert not call.done(), "the coroutine ended while its call still ran"
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(main())
    assert len(Memory(store, clock=clock).list(limit=1000).facts) == 50  # all, not some


def test_a_call_cancelled_before_a_worker_took_it_never_runs(
        store: Store, clock: ManualClock) -> None:
    started, release = threading.Event(), threading.Event()
    one = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    blocked = AsyncMemory(Memory(store, clock=clock).with_supersession(
        blocking_supersession(started, release)), executor=one)
    other = AsyncMemory(Memory(store, clock=clock), executor=one)

    async def main() -> None:
        first = asyncio.create_task(blocked.remember("first", subject="s"))
        while not started.is_set():
            await asyncio.sleep(0.01)
        queued = asyncio.create_task(other.remember("never written"))
        await asyncio.sleep(0.01)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await first

    try:
        asyncio.run(main())
    finally:
        one.shutdown()
    texts = [f.text for f in Memory(store, clock=clock).list().facts]
    assert texts == ["first"]


def test_errors_reach_the_awaiting_caller_unchanged(store: Store) -> None:
    from holomem import InvalidError

    async def main() -> None:
        with pytest.raises(InvalidError):
            await AsyncMemory(store).remember("   ")

    asyncio.run(main())


def test_wrapping_a_memory_takes_no_configuration(store: Store) -> None:
    with pytest.raises(TypeError):
        AsyncMemory(Memory(store), MemoryConfig())


def test_a_result_nobody_receives_is_handed_to_discard() -> None:
    from holomem.api.memory.aio import offload

    started, release = threading.Event(), threading.Event()
    discarded: list[str] = []

    def work() -> str:
        started.set()
        assert release.wait(30)
        return "a tenant held"

    async def main() -> None:
        task = asyncio.create_task(offload(work, discard=discarded.append))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0.02)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert discarded == ["a tenant held"]
