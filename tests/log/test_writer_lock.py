"""One writer per store, across processes; followers open freely and never write.

docs/contract.md §2: "a second process that opens it for writing gets a clear StoreLockedError.
Store.open(path, read_only=True) opens a follower that never writes".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
import surgery

from holomem.errors import StoreLockedError
from holomem.log import Journal

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Run in a second interpreter: open the store, report what happened as JSON.
CHILD = """
import json, sys
from holomem.errors import HolomemError
from holomem.log import Journal
mode, path = sys.argv[1], sys.argv[2]
try:
    j = Journal.open(path, read_only=(mode == "read"), sync="none")
except HolomemError as exc:
    print(json.dumps({"code": exc.code, "type": type(exc).__name__}))
    sys.exit(0)
with j:
    out = {"code": "ok", "last_seq": j.last_seq, "replayed": len(list(j.replay()))}
    if mode == "write":
        out["appended"] = j.append([b"from the second process"])
    if mode == "hold":
        print(json.dumps(out), flush=True)
        sys.stdin.readline()  # hold the lock until killed
print(json.dumps(out))
"""


def _child(mode: str, store: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, store], capture_output=True, text=True,
        timeout=60, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    result: dict[str, object] = json.loads(proc.stdout)
    return result


def test_a_second_process_cannot_open_a_locked_store_for_writing(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        for i in range(3):
            j.append([f"tx {i}".encode()])
        assert _child("write", store) == {"code": "locked", "type": "StoreLockedError"}
        # Followers are allowed while the writer holds the lock, and see its frames.
        before = surgery.snapshot(store)
        assert _child("read", store) == {"code": "ok", "last_seq": 3, "replayed": 3}
        with Journal.open(store, read_only=True) as follower:
            assert follower.last_seq == 3
            follower.refresh()
            assert [j.read(s) for s in (1, 2, 3)] == [follower.read(s) for s in (1, 2, 3)]
        assert surgery.snapshot(store) == before  # the followers wrote nothing at all
        assert j.append([b"still the writer"]) == 4
    # Once the first writer closed, the second process may write.
    assert _child("write", store) == {
        "code": "ok", "last_seq": 4, "replayed": 4, "appended": 5}
    with Journal.open(store, read_only=True) as j:
        assert j.read(5) == [b"from the second process"]


def test_a_second_writer_in_the_same_process_is_refused(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        with pytest.raises(StoreLockedError) as info:
            Journal.open(store, sync="none")
        assert info.value.code == "locked"
        assert j.append([b"unaffected"]) == 1
    with Journal.open(store, sync="none") as j:
        assert j.last_seq == 1


def test_the_lock_dies_with_the_process_that_held_it(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    Journal.open(store).close()
    holder = subprocess.Popen(
        [sys.executable, "-c", CHILD, "hold", store], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
    )
    try:
        assert holder.stdout is not None
        assert json.loads(holder.stdout.readline())["code"] == "ok"
        with pytest.raises(StoreLockedError):
            Journal.open(store)
        holder.send_signal(signal.SIGKILL)  # no close, no cleanup: a crash
        holder.wait(timeout=60)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=60)
        for stream in (holder.stdin, holder.stdout):
            if stream is not None:
                stream.close()
    with Journal.open(store, sync="none") as j:  # no stale lock
        assert j.append([b"after the crash"]) == 1


def test_a_read_only_open_writes_nothing_even_with_a_torn_tail_or_leftovers(
    tmp_path: object,
) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        j.append([b"one"])
        j.append([b"two"])
    surgery.append(surgery.segment_paths(store)[-1], b"torn tail bytes")
    os.mkdir(os.path.join(store, "gen-00000002.tmp"))  # an interrupted compaction
    os.remove(os.path.join(store, "LOCK"))
    before = surgery.snapshot(store)
    with Journal.open(store, read_only=True) as j:
        assert list(j.replay()) == [(1, [b"one"]), (2, [b"two"])]
        j.refresh()
        assert j.read(2) == [b"two"]
    assert _child("read", store)["replayed"] == 2
    assert surgery.snapshot(store) == before
