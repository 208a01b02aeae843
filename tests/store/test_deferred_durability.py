"""A deferring block's commits are applied at once and made durable only by the wait its
caller makes; a block that may not wait writes nothing when the store is busy."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from pathlib import Path

import pytest

from holomem import Memory, Store
from holomem.api.engine.deferral import WouldBlock
from holomem.api.memory.aiowait import DurableWaits
from holomem.errors import InvalidError


def test_a_deferred_commit_is_durable_once_its_revision_is_waited_for(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        memory = Memory(store)
        with store.deferring() as deferred:
            memory.remember("the cat sleeps on the mat")
        assert deferred.revision == store.revision
        store.wait_durable(deferred.revision)
        assert store.durable_revision >= deferred.revision
    with Store.open(tmp_path / "s") as again:
        assert [r.text for r in Memory(again).recall("cat")] == ["the cat sleeps on the mat"]


def test_a_block_that_may_not_wait_writes_nothing_while_a_reader_holds_the_state(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        memory = Memory(store)
        before = store.revision
        holding, release = threading.Event(), threading.Event()

        def reader() -> None:
            with store.reading():
                holding.set()
                release.wait(10)

        t = threading.Thread(target=reader)
        t.start()
        holding.wait(10)
        try:
            with store.deferring(blocking=False), pytest.raises(WouldBlock):
                memory.remember("never written")
        finally:
            release.set()
            t.join()
        assert store.revision == before and memory.recall("written") == []
        with pytest.raises(InvalidError), store.deferring(), store.deferring():
            pass


def test_concurrent_waits_share_group_waits_and_all_return_durable(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store, \
            concurrent.futures.ThreadPoolExecutor(2) as pool:
        memory = Memory(store)

        async def main() -> list[int]:
            waits = DurableWaits(store, pool, asyncio.get_running_loop())

            async def one(i: int) -> int:
                with store.deferring() as deferred:
                    memory.remember(f"fact number {i} of the group")
                await waits.wait(deferred.revision)
                assert store.durable_revision >= deferred.revision
                return deferred.revision

            return await asyncio.gather(*(one(i) for i in range(20)))

        revisions = asyncio.run(main())
        assert sorted(revisions) == list(range(min(revisions), min(revisions) + 20))


def test_listeners_hear_of_a_deferred_commit_only_once_it_is_durable(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        memory = Memory(store)
        heard: list[tuple[int, int]] = []
        store.subscribe(lambda seq, events: heard.append((seq, store.durable_revision)))
        with store.deferring() as deferred:
            memory.remember("told only when durable")
        assert heard == []  # not before a wait has seen it durable
        store.wait_durable(deferred.revision)
        memory.remember("a later, waited-for commit")
        assert [seq for seq, _ in heard] == [deferred.revision, store.revision]
        assert all(durable >= seq for seq, durable in heard)
