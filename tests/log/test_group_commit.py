"""Durability modes: batch mode shares fsyncs between concurrent appenders without
losing, duplicating or reordering anything; none mode syncs only when asked.

docs/contract.md §2: "batch" (group commit: concurrent callers share one fsync; each call still
returns only after its event is durable), "none" (tests and bulk loads).
"""

from __future__ import annotations

import os
import threading
import time

import pytest
import surgery

from holomem.log import Journal

THREADS = 8
PER_THREAD = 40


class FsyncCounter:
    """Wraps os.fsync, counts calls, and can make each one take ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.real = os.fsync
        self.calls = 0
        self.delay = delay

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        self.real(fd)


def _hammer(j: Journal, tag: str) -> dict[int, list[bytes]]:
    """THREADS threads append concurrently; return seq -> payloads as acknowledged."""
    results: dict[int, list[bytes]] = {}
    errors: list[BaseException] = []
    mu = threading.Lock()
    start = threading.Barrier(THREADS)

    def work(t: int) -> None:
        try:
            start.wait()
            for i in range(PER_THREAD):
                # Varied sizes so that frames of one group straddle rotations.
                tx = [f"{tag} thread {t} item {i} ".encode() * (1 + (i * 7 + t) % 13)]
                seq = j.append(tx)
                with mu:
                    assert seq not in results, f"sequence number {seq} given twice"
                    results[seq] = tx
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return results



def record_syncs(store: str, monkeypatch: pytest.MonkeyPatch, *,
                 delay: float = 0.0) -> dict[str, int]:
    """Patch os.fsync (after ``delay`` seconds) to note, in the returned ``{"seq"}``, the
    last frame of the segment each fsync made durable."""
    real = os.fsync
    synced = {"seq": 0}

    def fsync(fd: int) -> None:
        if delay:
            time.sleep(delay)
        real(fd)
        # Everything written to the segment before this fsync is now durable.
        with open(surgery.segment_paths(store)[-1], "rb") as f:
            frames = surgery.frames(f.read())
        if frames:
            synced["seq"] = max(synced["seq"], frames[-1].seq)

    monkeypatch.setattr(os, "fsync", fsync)
    return synced

@pytest.mark.parametrize("segment_size", [4096, 64 * 1024 * 1024], ids=["rotating", "one-segment"])
def test_concurrent_batch_appends_get_unique_sequence_numbers_and_all_survive_reopen(
    tmp_path: object, segment_size: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    # A disk-like fsync (a millisecond) keeps a group's leader in its fsync while the
    # other threads queue frames, rotate, and wait: the interleavings to exercise.
    counter = FsyncCounter(delay=0.001)
    monkeypatch.setattr(os, "fsync", counter)
    with Journal.open(store, sync="batch", segment_size=segment_size, compress=False) as j:
        results = _hammer(j, "a")
        assert j.last_seq == THREADS * PER_THREAD
    total = THREADS * PER_THREAD
    assert sorted(results) == list(range(1, total + 1))
    assert counter.calls >= 1
    if segment_size == 4096:
        assert len(surgery.segment_paths(store)) > 3
    with Journal.open(store, read_only=True) as j:
        replayed = dict(j.replay())
        assert replayed == results
        assert [j.read(s) for s in sorted(results)] == [results[s] for s in sorted(results)]
    # Per thread, the order of its own appends is the order of their sequence numbers.
    for t in range(THREADS):
        mine = [s for s in sorted(results) if f"thread {t} item".encode() in results[s][0]]
        items = [int(results[s][0].split(b"item ")[1].split(b" ")[0]) for s in mine]
        assert items == list(range(PER_THREAD))


def test_each_batch_append_returns_only_after_an_fsync_covering_it(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    j = Journal.open(store, sync="batch")
    synced_upto = record_syncs(store, monkeypatch)
    with j:
        for i in range(20):
            seq = j.append([f"item {i}".encode()])
            assert synced_upto["seq"] >= seq


def test_none_mode_never_fsyncs_on_append_and_sync_makes_everything_durable(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    Journal.open(store).close()
    counter = FsyncCounter()
    with Journal.open(store, sync="none") as j:
        # Counted from here: the open itself syncs what a crashed writer may have left.
        monkeypatch.setattr(os, "fsync", counter)
        results = _hammer(j, "n")
        assert sorted(results) == list(range(1, THREADS * PER_THREAD + 1))
        assert counter.calls == 0
        j.sync()
        assert counter.calls == 1
        j.append([b"after sync"])
        j.sync()
        assert counter.calls == 2
    with Journal.open(store, read_only=True) as j:
        assert dict(j.replay()) == {**results, THREADS * PER_THREAD + 1: [b"after sync"]}


def test_full_mode_fsyncs_before_every_append_returns(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    Journal.open(store).close()
    counter = FsyncCounter()
    with Journal.open(store, sync="full") as j:
        # Counted from here: the open itself syncs what a crashed writer may have left.
        monkeypatch.setattr(os, "fsync", counter)
        for i in range(1, 6):
            j.append([b"x"])
            assert counter.calls == i


@pytest.mark.parametrize("mode", ["batch", "full", "none"])
def test_replay_and_read_on_the_writer_during_concurrent_appends_see_a_consistent_prefix(
    tmp_path: object, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = os.path.join(str(tmp_path), "store")
    monkeypatch.setattr(os, "fsync", FsyncCounter(delay=0.001))
    seen: list[dict[int, list[bytes]]] = []
    errors: list[BaseException] = []
    done = threading.Event()
    with Journal.open(store, sync=mode, segment_size=4096) as j:

        def watch() -> None:
            try:
                while not done.is_set():
                    snapshot = dict(j.replay())
                    assert sorted(snapshot) == list(range(1, len(snapshot) + 1))
                    last = j.last_seq
                    if last:
                        snapshot[last] = j.read(last)
                    seen.append(snapshot)
            except BaseException as exc:
                errors.append(exc)

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            results = _hammer(j, mode)
        finally:
            done.set()
            watcher.join()
    if errors:
        raise errors[0]
    assert len(seen) > 1
    for snapshot in seen:  # whatever a reader saw was, and stays, exactly what was appended
        assert all(results[seq] == payloads for seq, payloads in snapshot.items())


def test_batch_appenders_that_come_and_go_all_return_and_each_is_synced(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A group waits for as many transactions as the last one held. Threads that stop
    # at different times, and callers that enqueue now and wait later, leave groups
    # short of that: each must still be led (by its first appender, after waiting at
    # most a sync's time), never left with nobody to write it.
    store = os.path.join(str(tmp_path), "store")
    Journal.open(store).close()
    synced = record_syncs(store, monkeypatch, delay=0.0005)
    errors: list[BaseException] = []
    acked: list[int] = []
    with Journal.open(store, sync="batch") as j:

        def work(t: int) -> None:
            try:
                for i in range(4 + 9 * t):  # 4 .. 67 appends: threads stop one by one
                    if i % 5 == t % 5:
                        seq = j.enqueue([f"{t} {i}".encode()])
                        j.wait(seq)
                    else:
                        seq = j.append([f"{t} {i}".encode()])
                    assert synced["seq"] >= seq  # returned only after a sync covering it
                    acked.append(seq)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)  # bounded: an appender nobody wakes would hang here
        assert not any(th.is_alive() for th in threads), "an appender was never woken"
        if errors:
            raise errors[0]
        assert sorted(acked) == list(range(1, j.last_seq + 1))
    total = sum(4 + 9 * t for t in range(THREADS))
    with Journal.open(store, read_only=True) as j:
        assert len(dict(j.replay())) == total
