"""Progress where people look (issue 27, item 10; docs/contract.md §4, "Progress").

A long call reports to the caller's ``progress`` callback, and only there: the count
done, never decreasing, while an embedder works through a long batch (before anything
is written) and after each write, the last call with the total. A ``progress`` that is
not callable is refused before anything is written. :class:`holomem.ProgressLines`
turns those counts into lines at a bounded rate: off a terminal a line at most every
``every`` seconds plus a last one, on a terminal one line rewritten in place. Its clock
is injected, so no test sleeps or measures time.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest

from holomem import AsyncMemory, InvalidError, ManualClock, Memory, ProgressLines, Store
from holomem.api.memory.embedding.embedder import EMBED_CHUNK
from tests.memory.test_embedder_hook import Fake

N = 2 * EMBED_CHUNK + 44  # three calls of the embedder


class Steps:
    """A progress callback that notes each count with the facts the store then holds."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.seen: list[tuple[int, int]] = []

    def __call__(self, done: int) -> None:
        self.seen.append((done, self.store.stats().documents))

    @property
    def counts(self) -> list[int]:
        return [n for n, _ in self.seen]


def test_remember_many_reports_a_long_embedding_batch_before_it_is_written(
        store: Store, clock: ManualClock) -> None:
    fake = Fake()
    memory = Memory(store, clock=clock, embedder=fake)
    steps = Steps(store)
    memory.remember_many([{"text": f"fact {i}"} for i in range(N)], progress=steps)
    assert fake.calls == [EMBED_CHUNK, EMBED_CHUNK, 44]
    assert steps.seen == [(EMBED_CHUNK, 0), (2 * EMBED_CHUNK, 0), (N, 0), (N, N)]


def test_remember_many_without_an_embedder_reports_once_written(
        store: Store, clock: ManualClock) -> None:
    steps = Steps(store)
    Memory(store, clock=clock).remember_many([{"text": "a"}, {"text": "b"}], progress=steps)
    assert steps.seen == [(2, 2)]


def test_import_reports_as_each_batch_is_embedded_then_written(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "a", sync="none") as a, \
            Store.open(tmp_path / "b", sync="none") as b:
        Memory(a, clock=clock).remember_many([{"text": f"fact {i}"} for i in range(N)])
        steps = Steps(b)
        Memory(b, clock=clock, embedder=Fake()).import_(Memory(a).export(),
                                                        batch_size=200, progress=steps)
    # the first batch of 200: embedded 128, then 200, then written; the second, of 100,
    # embedded in one call, then written
    assert steps.seen == [(128, 0), (200, 0), (200, 200), (N, 200), (N, N)]


def test_reembed_reports_as_each_batch_is_embedded_then_written(
        tmp_path: Path, clock: ManualClock) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        Memory(store, clock=clock, embedder=Fake("1")).remember_many(
            [{"text": f"fact {i}"} for i in range(N)])
        steps = Steps(store)
        new = Memory(store, clock=clock, embedder=Fake("2"), reembed=True)
        assert new.reembed(batch_size=200, progress=steps) == N
    assert steps.counts == [128, 200, 200, N, N]


def test_async_remember_many_passes_its_progress_on(store: Store, clock: ManualClock) -> None:
    steps = Steps(store)
    memory = AsyncMemory(Memory(store, clock=clock, embedder=Fake()))
    asyncio.run(memory.remember_many([{"text": "a"}, {"text": "b"}], progress=steps))
    assert steps.counts == [2, 2]


@pytest.mark.parametrize("bad", [5, "lines", [print]])
def test_a_progress_that_is_not_callable_is_refused_before_anything_is_written(
        tmp_path: Path, clock: ManualClock, bad: object) -> None:
    with Store.open(tmp_path / "a", sync="none") as a, \
            Store.open(tmp_path / "b", sync="none") as b:
        source = Memory(a, clock=clock, embedder=Fake("1"))
        source.remember_many([{"text": f"fact {i}"} for i in range(5)])
        target = Memory(b, clock=clock)
        revision = b.stats().revision
        with pytest.raises(InvalidError, match="progress"):
            target.import_(source.export(), batch_size=2, progress=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidError, match="progress"):
            target.remember_many([{"text": "x"}], progress=bad)  # type: ignore[arg-type]
        assert b.stats().revision == revision
        again = Memory(a, clock=clock, embedder=Fake("2"), reembed=True)
        revision = a.stats().revision
        with pytest.raises(InvalidError, match="progress"):
            again.reembed(progress=bad)  # type: ignore[arg-type]
        assert a.stats().revision == revision  # not even begun


# -- the reporter ---------------------------------------------------------------------------
class Seconds:
    """An injected monotonic clock, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_a_line_at_most_every_interval_and_a_last_one() -> None:
    clock, log = Seconds(), io.StringIO()
    progress = ProgressLines("import", log, clock=clock)
    for t, done in [(0.5, 100), (1.9, 300), (2.0, 400), (3.9, 700), (4.1, 800),
                    (5.0, 900), (7.0, 1_200)]:
        clock.now = 100 + t
        progress(done)
    clock.now = 107.5
    progress.close()
    assert log.getvalue().splitlines() == [
        "import: 400 facts (200/s)", "import: 800 facts (195/s)",
        "import: 1,200 facts (171/s)", "import: 1,200 facts in 7.5 s"]


def test_a_call_that_ends_before_the_first_line_is_due_shows_nothing() -> None:
    clock, log = Seconds(), io.StringIO()
    with ProgressLines("export", log, clock=clock) as progress:
        clock.now += 1.5
        progress(50_000)
    assert log.getvalue() == ""


def test_every_zero_shows_every_step() -> None:
    clock, log = Seconds(), io.StringIO()
    with ProgressLines("re-embed", log, every=0, clock=clock) as progress:
        for done in (128, 256, 300):
            clock.now += 1
            progress(done)
    assert log.getvalue().splitlines() == [
        "re-embed: 128 facts (128/s)", "re-embed: 256 facts (128/s)",
        "re-embed: 300 facts (100/s)", "re-embed: 300 facts in 3.0 s"]


def test_on_a_terminal_one_line_is_rewritten_in_place_and_ended() -> None:
    clock, screen = Seconds(), Terminal()
    with ProgressLines("import", screen, clock=clock) as progress:
        for done in (10, 20, 30):
            clock.now += 0.25
            progress(done)
    assert screen.getvalue() == ("\rimport: 10 facts (40/s)\x1b[K"
                                 "\rimport: 20 facts (40/s)\x1b[K"
                                 "\rimport: 30 facts (40/s)\x1b[K"
                                 "\rimport: 30 facts in 0.8 s\x1b[K\n")


@pytest.mark.parametrize("every", [-1, float("nan"), float("inf"), "2", True])
def test_an_interval_that_is_not_seconds_is_refused(every: object) -> None:
    with pytest.raises(InvalidError, match="every"):
        ProgressLines("import", io.StringIO(), every=every)  # type: ignore[arg-type]
