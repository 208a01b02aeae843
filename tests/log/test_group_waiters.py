"""Group commit's parked appenders are all woken once their group is durable (or failed):
each woken thread wakes the next, and a thread that leaves early (an exception from a
signal handler) does not stop the others from being woken; nor, if its own frame is still
waiting to be written, from being asked to lead it.

holomem.log.group: a group's appenders park until :meth:`Waiters.wake_all`, which wakes
the first; every parked thread, once woken, wakes the one parked after it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from holomem.log import Journal, fs, group
from holomem.log.group import Waiters

PARKED = 6


class Left(Exception):
    """Raised by the test's signal handler in the parked main thread."""


def _until(cond: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _park(waiters: Waiters, outer: threading.Lock, n: int, returned: list[int]
          ) -> list[threading.Thread]:
    """Start ``n`` threads that park on ``waiters`` one after another; return them once
    all are parked. Each appends its number to ``returned`` when it returns."""

    def park(k: int) -> None:
        outer.acquire()
        waiters.park(outer)  # returns without ``outer``
        returned.append(k)

    threads = []
    for k in range(n):
        before = len(waiters)
        th = threading.Thread(target=park, args=(k,), daemon=True)
        th.start()
        threads.append(th)
        _until(lambda before=before: len(waiters) == before + 1)
    return threads


def _joined(threads: list[threading.Thread]) -> bool:
    for th in threads:
        th.join(10)  # bounded: a thread nobody wakes would hang here
    return not any(th.is_alive() for th in threads)


def _short_group_and_a_parker(j: Journal) -> tuple[threading.Thread, list[int]]:
    """After one group of 3 transactions (so the next group waits for 3 as well), a
    thread not yet started that appends one more and notes the sequence number it got."""
    first = [j.enqueue([f"early {i}".encode()]) for i in range(3)]
    j.wait(first[-1])
    done: list[int] = []
    parker = threading.Thread(target=lambda: done.append(j.append([b"parked"])), daemon=True)
    return parker, done


def _assert_the_parked_one_was_led(j: Journal, parker: threading.Thread, done: list[int]
                                   ) -> None:
    """The parker's transaction (seq 5, after the gatherer's 4) was led and synced."""
    assert _joined([parker]), "the parked appender was never woken"
    assert done == [5] and j.durable_seq >= 5


def _assert_all_five_kept(store: str) -> None:
    with Journal.open(store, read_only=True) as j:
        assert sorted(p[0] for _, p in j.replay()) == sorted(
            [b"early 0", b"early 1", b"early 2", b"gatherer", b"parked"])


def test_every_parked_thread_returns_after_one_wake_all_and_none_before() -> None:
    waiters, outer, returned = Waiters(), threading.Lock(), []
    threads = _park(waiters, outer, PARKED, returned)
    time.sleep(0.05)
    assert returned == []  # parked until the wake
    with outer:
        waiters.wake_all()
    assert _joined(threads), "a parked thread was never woken"
    assert sorted(returned) == list(range(PARKED))


def test_a_second_wake_all_wakes_nobody_twice() -> None:
    # A failure wakes every group in flight, and a group may be woken by its sync and
    # then by a failure: the second must not release a parked thread's lock again.
    waiters, outer, returned = Waiters(), threading.Lock(), []
    threads = _park(waiters, outer, 3, returned)
    with outer:
        waiters.wake_all()
        waiters.wake_all()
    assert _joined(threads)
    assert sorted(returned) == [0, 1, 2]


class StuckLock:
    """The parked main thread's lock: its blocking acquire never gets the lock, even
    once released; it raises :class:`Left` when ``interrupt`` is set (an exception
    from a signal handler, which may come after the lock was released)."""

    def __init__(self) -> None:
        self.held = False
        self.interrupt = threading.Event()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not self.held:
            self.held = True
            return True
        self.interrupt.wait(10)
        raise Left

    def release(self) -> None:
        self.held = False


@pytest.mark.parametrize("ahead", [0, 2, PARKED], ids=["first", "middle", "last"])
@pytest.mark.parametrize("woken_first", [False, True], ids=["leaves-before-the-wake",
                                                            "leaves-after-the-wake"])
def test_a_parked_thread_that_leaves_early_strands_none_of_the_others(
        ahead: int, woken_first: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    # The main thread parks with ``ahead`` threads parked before it and the rest after;
    # an exception takes it out of its wait before the wake started, or after (the
    # wake then may or may not have reached it: it passes it on itself).
    waiters, outer = Waiters(), threading.Lock()
    returned: list[int] = []
    threads = _park(waiters, outer, ahead, returned)
    stuck = StuckLock()
    main = threading.current_thread()
    monkeypatch.setattr(group, "_new_lock", lambda: (
        stuck if threading.current_thread() is main else threading.Lock()))

    def behind_main() -> None:
        _until(lambda: len(waiters) == ahead + 1)  # the main thread is parked
        threads.extend(_park(waiters, outer, PARKED - ahead, returned))
        if woken_first:
            with outer:
                waiters.wake_all()
            # Those ahead of the main thread return; none behind it (it never woke).
            _until(lambda: len(returned) == ahead)
            time.sleep(0.02)
            assert len(returned) == ahead
        stuck.interrupt.set()

    helper = threading.Thread(target=behind_main, daemon=True)
    helper.start()
    outer.acquire()
    with pytest.raises(Left):
        waiters.park(outer)
    helper.join(10)
    assert not outer.locked()
    if not woken_first:
        time.sleep(0.02)
        assert returned == []  # leaving woke nobody
        with outer:
            waiters.wake_all()
    assert _joined(threads), "a parked thread was never woken"
    assert sorted(returned) == sorted([*range(ahead), *range(PARKED - ahead)])


def test_an_interrupted_gatherer_leaves_its_frames_to_the_appenders_parked_on_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The first appender of a short group gathers (waits for the rest) and the next
    # parks, counting on it to lead. If the gatherer's wait ends in an exception, the
    # parked appender must still see its transaction led and synced.
    store = str(tmp_path / "store")
    with Journal.open(store, sync="batch") as j:
        parker, done = _short_group_and_a_parker(j)
        stuck = StuckLock()
        main = threading.current_thread()
        monkeypatch.setattr(group, "_new_lock", lambda: (
            stuck if threading.current_thread() is main else threading.Lock()))
        waiters = j._appender._open.waiters

        def behind_the_gatherer() -> None:
            _until(lambda: len(waiters) == 1)  # the main thread gathers
            parker.start()
            _until(lambda: len(waiters) == 2)  # and the other appender parked
            stuck.interrupt.set()

        helper = threading.Thread(target=behind_the_gatherer, daemon=True)
        helper.start()
        with pytest.raises(Left):
            j.append([b"gatherer"])  # seq 4
        helper.join(10)
        _assert_the_parked_one_was_led(j, parker, done)
    _assert_all_five_kept(store)


@pytest.mark.parametrize("ahead", [0, 2], ids=["first", "middle"])
def test_a_parked_thread_interrupted_as_it_wakes_still_wakes_the_next(
        ahead: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The exception of a signal handler can come just after the thread's lock was
    # given to it, before it passed the wake on: the threads parked after it must
    # still be woken (nobody else will: their group is durable and gone).
    waiters, outer = Waiters(), threading.Lock()
    returned: list[int] = []
    threads = _park(waiters, outer, ahead, returned)
    main = threading.current_thread()
    real = Waiters._wake_after
    raised = []

    def wake_after(self: Waiters, place: int) -> None:
        if threading.current_thread() is main and not raised:
            raised.append(place)
            raise Left
        real(self, place)

    monkeypatch.setattr(Waiters, "_wake_after", wake_after)

    def behind_main() -> None:
        _until(lambda: len(waiters) == ahead + 1)  # the main thread is parked
        threads.extend(_park(waiters, outer, PARKED - ahead, returned))
        with outer:
            waiters.wake_all()

    helper = threading.Thread(target=behind_main, daemon=True)
    helper.start()
    outer.acquire()
    with pytest.raises(Left):
        waiters.park(outer)
    helper.join(10)
    assert raised == [ahead]  # the exception came once the main thread was woken
    assert not outer.locked()
    assert _joined(threads), "a thread parked after the interrupted one was never woken"
    assert sorted(returned) == sorted([*range(ahead), *range(PARKED - ahead)])


def test_a_gatherer_interrupted_after_its_wait_leaves_its_frames_to_those_parked_on_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As above, but the exception comes once the gatherer's wait returned (at the next
    # step of its loop), before it led the group: the parked appender must not be left
    # waiting for a leader that is gone.
    store = str(tmp_path / "store")
    with Journal.open(store, sync="batch") as j:
        parker, done = _short_group_and_a_parker(j)
        appender = j._appender
        main = threading.current_thread()
        real_wait, real_gather = Waiters.wait, type(appender)._gather

        def wait(self: Waiters, outer: threading.Lock, timeout: float = -1) -> None:
            if threading.current_thread() is not main:
                return real_wait(self, outer, timeout)
            # The gatherer's wait, long enough for the other appender to park on it.
            outer.release()
            parker.start()
            _until(lambda: len(self) == 1)
            outer.acquire()
            return None

        def gather(self: object, lock: threading.Lock) -> None:
            real_gather(self, lock)  # type: ignore[arg-type]
            if threading.current_thread() is main:
                raise Left  # the signal handler's exception, right after the wait

        monkeypatch.setattr(Waiters, "wait", wait)
        monkeypatch.setattr(type(appender), "_gather", gather)
        with pytest.raises(Left):
            j.append([b"gatherer"])  # seq 4
        _assert_the_parked_one_was_led(j, parker, done)
    _assert_all_five_kept(store)


@pytest.mark.parametrize("when", ["while-it-waits", "once-asked"])
def test_an_appender_waiting_to_lead_that_is_interrupted_strands_none_of_the_others(
        tmp_path: Path, when: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two appenders wait while another group is written (the main thread first); when
    # that group is durable one of them is asked to lead the next. If the main thread
    # leaves by an exception -- while it waits (its lock stays in the queue: the call
    # may go to it) or once asked -- the other must not wait for a call that never
    # comes: nobody else appends.
    store = str(tmp_path / "store")
    with Journal.open(store, sync="batch") as j:
        appender = j._appender
        main = threading.current_thread()
        real_write, real_wait = fs.write_at, Waiters.wait
        release_leader = threading.Event()
        writes = [0]

        def write_at(*args: object) -> None:
            writes[0] += 1
            if writes[0] == 1:  # the first group is held until the others wait
                assert release_leader.wait(10)
            real_write(*args)  # type: ignore[arg-type]

        stuck = StuckLock()
        if when == "while-it-waits":
            monkeypatch.setattr(group, "_new_lock", lambda: (
                stuck if threading.current_thread() is main else threading.Lock()))
        else:
            def wait(self: Waiters, outer: threading.Lock, timeout: float = -1) -> None:
                real_wait(self, outer, timeout)
                if threading.current_thread() is main:
                    raise Left  # the signal handler's exception, once asked to lead

            monkeypatch.setattr(Waiters, "wait", wait)
        monkeypatch.setattr(fs, "write_at", write_at)
        outcomes: dict[str, object] = {}

        def append(name: str) -> None:
            outcomes[name] = j.append([name.encode()])

        leader = threading.Thread(target=append, args=("leader",), daemon=True)
        leader.start()
        _until(lambda: appender._flushing)
        waiters = appender._open.waiters
        other = threading.Thread(target=append, args=("other",), daemon=True)

        def behind_main() -> None:
            _until(lambda: len(waiters) == 1)  # the main thread waits
            other.start()
            _until(lambda: len(waiters) == 2)
            if when == "while-it-waits":
                stuck.interrupt.set()
                _until(lambda: not main_waits[0])
            release_leader.set()

        main_waits = [True]
        helper = threading.Thread(target=behind_main, daemon=True)
        helper.start()
        with pytest.raises(Left):
            try:
                j.append([b"main"])
            finally:
                main_waits[0] = False
        assert _joined([helper, leader, other]), "the other appender was never asked to lead"
        assert outcomes["leader"] == 1
        seq = outcomes["other"]
        assert isinstance(seq, int) and j.durable_seq >= seq


class InterruptedLocks:
    """The factory of the parked threads' locks, whose blocking acquires raise
    :class:`Left` now and then (seeded): while the thread still waits, or just after
    it was given the lock -- where an exception from a signal handler comes."""

    def __init__(self, seed: int, rate: float) -> None:
        self._random = random.Random(seed)
        self._guard = threading.Lock()
        self.rate = rate
        self.raised = 0

    def _draw(self) -> float:
        with self._guard:
            return self._random.random()

    def __call__(self) -> object:
        factory = self

        class Lock:
            def __init__(self) -> None:
                self.lock = threading.Lock()
                self.fresh = True

            def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
                if self.fresh:  # taken by its thread before it parks
                    self.fresh = False
                    return self.lock.acquire()
                draw = factory._draw()
                if draw < factory.rate:  # interrupted while it waits (or as it is woken)
                    self.lock.acquire(True, 0.001 if timeout < 0 else min(timeout, 0.001))
                    factory.raised += 1
                    raise Left
                got = self.lock.acquire(blocking, timeout)
                if got and draw > 1 - factory.rate:  # interrupted once woken
                    factory.raised += 1
                    raise Left
                return got

            def release(self) -> None:
                self.lock.release()

        return Lock()


@pytest.mark.parametrize("seed", range(4))
def test_appenders_interrupted_anywhere_they_wait_strand_nobody_and_lose_no_acknowledged_write(
        tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The appenders append in rounds, all at once, and wait for each other between
    # rounds: a thread stranded in a round is not rescued by a later append.
    store = str(tmp_path / "store")
    threads_n, rounds = 6, 40
    locks = InterruptedLocks(seed, rate=0.05)
    monkeypatch.setattr(group, "_new_lock", locks)
    acknowledged: dict[int, bytes] = {}
    interrupted: list[bytes] = []
    between = threading.Barrier(threads_n)
    with Journal.open(store, sync="batch") as j:

        def appender(k: int) -> None:
            for i in range(rounds):
                between.wait(10)  # (broken, and raising, if a thread never returns)
                tx = f"{k}/{i}".encode()
                try:
                    acknowledged[j.append([tx])] = tx
                except Left:
                    interrupted.append(tx)

        threads = [threading.Thread(target=appender, args=(k,), daemon=True)
                   for k in range(threads_n)]
        for th in threads:
            th.start()
        assert _joined(threads), "an appender was stranded"
        assert j.failed is None  # an interrupted wait is not a failed write
        assert all(seq <= j.durable_seq for seq in acknowledged)
    assert locks.raised > 0 and len(acknowledged) + len(interrupted) == threads_n * rounds
    with Journal.open(store, read_only=True) as j:
        replayed = {seq: p[0] for seq, p in j.replay()}
    # Every acknowledged write is there; an interrupted one may or may not be (its frame
    # was queued), and nothing else.
    assert all(replayed.get(seq) == tx for seq, tx in acknowledged.items())
    assert set(replayed.values()) <= set(acknowledged.values()) | set(interrupted)
