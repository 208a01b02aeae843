"""A write or sync of the journal that ends in an exception other than the file layer's
(KeyboardInterrupt, an exception from a signal handler) leaves nothing acknowledged that
is not durable, strands no appender, and lets close() return.

Such an exception says nothing of what became of the bytes: a write may have stopped
before, within or after the ``pwrite``, and a sync may have failed (EIO) before the
exception replaced its error. So the journal is failed, exactly as after an I/O error:
nothing more is acknowledged and every waiting appender is told so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from holomem.errors import JournalFailedError
from holomem.log import Journal, fs

TIMEOUT = 10.0  # a bounded join: it only runs out if a thread hangs


class Interrupted(BaseException):
    """What the test's "signal handler" raises (as KeyboardInterrupt would)."""


def _interrupt_once(real: Callable[..., None], *, before: bool,
                    when: Callable[[], None] = lambda: None) -> Callable[..., None]:
    """``real``, but its first call raises :class:`Interrupted` before (or after)
    doing its work, once ``when()`` returned."""
    calls = [0]

    def call(*args: object) -> None:
        calls[0] += 1
        if calls[0] > 1:
            return real(*args)
        when()
        if not before:
            real(*args)
        raise Interrupted

    return call


def _run(fn: Callable[[], object]) -> tuple[threading.Thread, list[object]]:
    """Run ``fn`` in a daemon thread; its result or exception lands in the list."""
    out: list[object] = []

    def body() -> None:
        try:
            out.append(fn())
        except BaseException as exc:  # the test looks at it
            out.append(exc)

    th = threading.Thread(target=body, daemon=True)
    th.start()
    return th, out


def _closes(j: Journal) -> None:
    th, out = _run(j.close)
    th.join(TIMEOUT)
    assert not th.is_alive(), "close() hung on the interrupted write"
    assert out == [None]


def _replayed(store: str) -> list[bytes]:
    with Journal.open(store, read_only=True) as j:
        return [p[0] for _, p in j.replay()]


@pytest.mark.parametrize("mode", ["full", "batch", "none"])
@pytest.mark.parametrize("before", [True, False], ids=["before-the-write", "after-it"])
def test_nothing_is_acknowledged_after_an_interrupted_write_and_close_returns(
        tmp_path: Path, mode: str, before: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "store")
    j = Journal.open(store, sync=mode)
    j.append([b"acknowledged"])
    monkeypatch.setattr(fs, "write_at", _interrupt_once(fs.write_at, before=before))
    with pytest.raises(Interrupted):
        j.append([b"interrupted"])
    # Written or not, the interrupted frame is unknown: a later frame written after
    # it and acknowledged would be lost behind a hole (replay stops at the first
    # frame that does not check).
    with pytest.raises(JournalFailedError):
        j.append([b"after"])
    assert j.failed is not None
    _closes(j)
    assert _replayed(store) in ([b"acknowledged"], [b"acknowledged", b"interrupted"])


@pytest.mark.parametrize("mode", ["full", "batch", "none"])
def test_a_sync_that_ends_in_an_exception_fails_the_journal(
        tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # An fsync that failed (EIO) may be what the exception replaced: a later sync may
    # then succeed with the bytes lost, so nothing after it may be acknowledged.
    store = str(tmp_path / "store")
    j = Journal.open(store, sync=mode)
    j.append([b"acknowledged"])
    j.sync()
    monkeypatch.setattr(fs, "sync", _interrupt_once(fs.sync, before=True))
    with pytest.raises(Interrupted):
        j.append([b"interrupted"])
        assert mode == "none"  # which syncs only when asked
        j.sync()
    with pytest.raises(JournalFailedError):
        j.append([b"after"])
    with pytest.raises(JournalFailedError):
        j.sync()
    assert j.durable_seq == (2 if mode == "none" else 1)  # none: written, not synced
    _closes(j)
    assert _replayed(store) in ([b"acknowledged"], [b"acknowledged", b"interrupted"])


@pytest.mark.parametrize("phase", ["write", "sync"])
def test_the_appenders_of_a_group_whose_leader_was_interrupted_are_told_and_not_stranded(
        tmp_path: Path, phase: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Batch mode: one appender parks on the group another leads; the leader's write or
    # sync ends in an exception. Nobody else appends, so nothing else would wake the
    # parked appender: it must learn that its transaction failed.
    store = str(tmp_path / "store")
    j = Journal.open(store, sync="batch")
    j.append([b"acknowledged"])
    first = j.enqueue([b"parked"])
    second = j.enqueue([b"leader"])
    waiting_started = threading.Event()

    def once_parked() -> None:
        waiting_started.set()
        group = j._appender._in_flight[0]  # the group being written
        deadline = TIMEOUT
        while len(group.waiters) < 1 and deadline > 0:  # the other appender parked
            threading.Event().wait(0.001)
            deadline -= 0.001
        assert len(group.waiters) == 1

    name = "write_at" if phase == "write" else "sync"
    monkeypatch.setattr(fs, name, _interrupt_once(getattr(fs, name), before=True,
                                                  when=once_parked))
    leader, led = _run(lambda: j.wait(second))
    assert waiting_started.wait(TIMEOUT)
    parked, told = _run(lambda: j.wait(first))
    leader.join(TIMEOUT)
    assert len(led) == 1 and isinstance(led[0], Interrupted)
    parked.join(TIMEOUT)
    assert not parked.is_alive(), "the parked appender was never woken"
    assert len(told) == 1 and isinstance(told[0], JournalFailedError), told
    assert j.durable_seq == 1
    _closes(j)
    assert _replayed(store)[0] == b"acknowledged"


def test_a_leader_interrupted_in_batch_mode_leaves_the_lock_free(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The leader writes with the appender's lock released: leaving by an exception it
    # must neither keep the write marked as running nor release a lock it does not hold.
    store = str(tmp_path / "store")
    j = Journal.open(store, sync="batch")
    monkeypatch.setattr(fs, "write_at", _interrupt_once(fs.write_at, before=True))
    with pytest.raises(Interrupted):
        j.append([b"interrupted"])
    appender = j._appender
    assert not appender._lock.locked()
    assert not appender._flushing and not appender._syncing
    with pytest.raises(JournalFailedError):
        j.append([b"after"])
    _closes(j)
    assert _replayed(store) == []  # nothing was acknowledged, and nothing was written
