"""A call that raced close() and lost uses no descriptor of the closed journal.

Journal.sync and begin_rewrite check that the journal is open, then ask the appender;
close() may run in between. The appender's descriptor is closed by then, and its number
may already belong to another file: the call must end with ``closed``, not fsync it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holomem.errors import ClosedError
from holomem.log import Journal


@pytest.mark.parametrize("mode", ["full", "batch", "none"])
@pytest.mark.parametrize("call", ["sync", "begin_rewrite"])
def test_a_call_that_lost_the_race_with_close_fsyncs_no_closed_descriptor(
        tmp_path: Path, mode: str, call: str, monkeypatch: pytest.MonkeyPatch) -> None:
    store = str(tmp_path / "store")
    j = Journal.open(store, sync=mode)
    j.append([b"acknowledged"])
    real_check = Journal._check_open
    closed: list[bool] = []

    def check_then_lose_the_race(self: Journal) -> None:
        real_check(self)
        monkeypatch.setattr(Journal, "_check_open", real_check)
        self.close()  # another thread's close, right after the check passed
        closed.append(True)

    synced_after_close: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if closed:
            synced_after_close.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(Journal, "_check_open", check_then_lose_the_race)
    with pytest.raises(ClosedError) as info:
        getattr(j, call)()
    assert info.value.code == "closed"
    assert closed and synced_after_close == []
    assert j.failed is None
    with Journal.open(store, read_only=True) as r:
        assert [p for _, p in r.replay()] == [[b"acknowledged"]]
