"""A failed fsync is fatal for the journal handle: it is never retried, nothing more is
acknowledged, and reopening recovers from what is on disk.

After a failed fsync the kernel may have dropped the dirty pages, and a second fsync
can succeed without the data being durable (the "fsyncgate" lesson), so the only
honest continuation is a reopen that re-reads the file.
"""

from __future__ import annotations

import errno
import os
import threading
import time

import pytest

from holomem.errors import FsyncError, JournalFailedError
from holomem.log import Journal


class FailingFsync:
    """os.fsync that fails with EIO the first ``fail`` times, then works."""

    def __init__(self, fail: int = 1) -> None:
        self.real = os.fsync
        self.fail = fail
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.fail > 0:
            self.fail -= 1
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        self.real(fd)


@pytest.mark.parametrize("mode", ["full", "batch", "none"])
def test_an_fsync_failure_stops_the_journal_until_it_is_reopened(
    tmp_path: object, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync=mode) as j:
        acked = [(j.append([f"acked {i}".encode()]), [f"acked {i}".encode()]) for i in range(3)]
        j.sync()
    j = Journal.open(store, sync=mode)
    fsync = FailingFsync()
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(FsyncError) as info:
        # full and batch sync inside append; none mode only when asked.
        j.append([b"unacknowledged"])
        assert mode == "none"
        j.sync()
    assert info.value.code == "io.fsync"
    assert fsync.calls == 1 and fsync.fail == 0  # the failure really landed; fsync works again
    assert j.failed is not None
    for _ in range(3):
        with pytest.raises(JournalFailedError) as failed:
            j.append([b"refused"])
        assert failed.value.code == "io.failed"
    with pytest.raises(JournalFailedError):
        j.sync()
    assert fsync.calls == 1  # the failed fsync was never retried
    j.close()  # closing a failed journal releases it without syncing again
    assert fsync.calls == 1
    with Journal.open(store, sync=mode) as j:
        replayed = list(j.replay())
        # Acknowledged transactions survive; the unacknowledged one may or may not
        # (its write reached the page cache here), but nothing else appears.
        assert replayed in (acked, [*acked, (4, [b"unacknowledged"])])
        assert all(payloads != [b"refused"] for _, payloads in replayed)
        seq = j.append([b"after reopen"])
        assert seq == len(replayed) + 1
        j.sync()
    with Journal.open(store, read_only=True) as j:
        assert list(j.replay()) == [*replayed, (seq, [b"after reopen"])]


def test_an_fsync_failure_during_rotation_stops_the_journal(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    j = Journal.open(store, sync="none", segment_size=4096)
    fsync = FailingFsync()
    monkeypatch.setattr(os, "fsync", fsync)
    acked = []
    with pytest.raises(FsyncError):
        while True:  # none mode fsyncs only to rotate
            tx = [os.urandom(500)]
            acked.append((j.append(tx), tx))
    with pytest.raises(JournalFailedError):
        j.append([b"refused"])
    j.close()
    with Journal.open(store, sync="none", segment_size=4096) as j:
        assert list(j.replay()) == acked
        assert j.append([b"next"]) == len(acked) + 1


def test_a_later_group_is_never_acknowledged_while_an_earlier_groups_sync_may_fail(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The kernel reports a writeback error to one fsync caller only, so a later group's
    # sync that finished first would prove nothing about the earlier group's bytes: one
    # sync runs at a time, and after the earlier one fails the later group fails too.
    store = os.path.join(str(tmp_path), "store")
    Journal.open(store).close()
    j = Journal.open(store, sync="batch")
    real = os.fsync
    first_started = threading.Event()
    running, most = [0], [0]
    calls = []

    def fsync(fd: int) -> None:
        calls.append(fd)
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            if len(calls) == 1:
                first_started.set()
                time.sleep(0.2)  # the second appender comes meanwhile
                raise OSError(errno.EIO, os.strerror(errno.EIO))
            real(fd)
        finally:
            running[0] -= 1

    monkeypatch.setattr(os, "fsync", fsync)
    outcomes: dict[str, object] = {}

    def append(name: str) -> None:
        try:
            outcomes[name] = j.append([name.encode()])
        except Exception as exc:
            outcomes[name] = exc

    first = threading.Thread(target=append, args=("first",))
    first.start()
    assert first_started.wait(10)
    second = threading.Thread(target=append, args=("second",))
    second.start()
    second.join(20)
    first.join(20)
    assert most[0] == 1  # no two syncs of the journal ever ran at once
    assert isinstance(outcomes["first"], FsyncError)
    assert isinstance(outcomes["second"], (FsyncError, JournalFailedError)), outcomes
    j.close()

