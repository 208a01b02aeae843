"""The crash harness itself: its checks catch what they claim to, and its power-loss
model of the disk is faithful (a checker that passes everything would prove nothing)."""

from __future__ import annotations

import glob
import os
import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import holomem
from holomem import crashtest as ct
from holomem.log import fs

from .recording import recording


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[Any]]:
    """The workload run to the end in this process: (store path, acknowledgements)."""
    run = tmp_path_factory.mktemp("workload")
    store = str(run / "store")
    ct.run_workload(store, str(run / "acks.jsonl"), None)
    _, results, begun, done = ct.read_acks(str(run / "acks.jsonl"))
    assert done and begun == len(results) == len(ct.plan())
    return store, results


def _copy(src: str, dst: Path) -> str:
    shutil.copytree(src, dst / "store")
    return str(dst / "store")


def _verify(store: str, results: list[Any], acked: int | None = None) -> ct.Verdict:
    n = len(results) if acked is None else acked
    return ct.verify(store, None, ct.plan(), results, n, n)


def test_an_intact_store_passes_every_check(finished: tuple[str, list[Any]],
                                            tmp_path: Path) -> None:
    store, results = finished
    verdict = _verify(_copy(store, tmp_path), results)
    assert verdict.violations == []


def test_a_lost_acknowledged_write_is_caught(finished: tuple[str, list[Any]],
                                             tmp_path: Path) -> None:
    store, results = finished
    copy = _copy(store, tmp_path)
    # Cut the last frame off the journal: an acknowledged remember vanishes. The
    # watermark written at close says it was durable, so the open refuses...
    last = sorted(glob.glob(os.path.join(copy, "gen-*", "seg-*.hlj")))[-1]
    with open(last, "r+b") as f:
        f.truncate(os.path.getsize(last) - 30)
    verdict = _verify(copy, results)
    assert any("does not open without manual repair" in v and "durable" in v
               for v in verdict.violations), verdict.violations
    # ... and where the journal cannot tell (no watermark), the checks themselves do.
    os.unlink(glob.glob(os.path.join(copy, "gen-*", "watermark"))[-1])
    verdict = _verify(copy, results)
    assert any("acknowledged fact f050 is missing" in v for v in verdict.violations)


def test_a_step_that_was_running_may_be_there_or_not_but_wholly(
        finished: tuple[str, list[Any]], tmp_path: Path) -> None:
    store, results = finished
    steps = ct.plan()
    n = len(steps) - 2  # the last remember was running: it is there
    verdict = ct.verify(_copy(store, tmp_path), None, steps, results, n, n + 1)
    assert verdict.violations == [] and verdict.inflight == "present"
    n = len(steps) - 3  # two steps past the acknowledged ones: one too many
    verdict = ct.verify(_copy(store, tmp_path / "again"), None, steps, results, n, n + 1)
    assert any("f050 is present, but nothing acknowledged" in v for v in verdict.violations)


def test_a_partial_batch_is_caught() -> None:
    steps = ct.plan()
    results: list[Any] = [None] * len(steps)
    i = next(n for n, s in enumerate(steps) if s["kind"] == "remember_many")
    ids = [f["id"] for f in steps[i]["facts"]]
    results[i] = [{"id": fid, "created": True, "superseded": []} for fid in ids]
    name = steps[i]["batch"]
    found = ct.partial_batches(steps, {ids[0]: name}, results[: i + 1])
    assert found and "partial transaction" in found[0]
    assert ct.partial_batches(steps, {}, results[: i + 1]) == []
    assert ct.partial_batches(steps, dict.fromkeys(ids, name), results[: i + 1]) == []


def test_a_purged_marker_left_in_any_file_is_caught(finished: tuple[str, list[Any]],
                                                    tmp_path: Path) -> None:
    store, results = finished
    copy = _copy(store, tmp_path)
    with open(os.path.join(copy, "stray.bin"), "wb") as f:
        f.write(b"junk " + ct.MARKERS[0].encode() + b" junk")
    verdict = _verify(copy, results)
    assert any(ct.MARKERS[0] in v and "stray.bin" in v for v in verdict.violations)


# -- the power-loss model ------------------------------------------------------------------
def _scenario(run: Path) -> str:
    """A small history through the file layer, recorded as in a power-loss run."""
    with recording(run / ct.FAULT_LOG):
        return _history(run)


def _history(run: Path) -> str:
    store = str(run / "store")
    fs.mkdir(store)
    fs.sync_dir(str(run))
    a = os.path.join(store, "a")
    fd = fs.create(a)
    fs.write_at(fd, b"A" * 100, 0, a)
    fs.sync(fd, a)
    fs.sync_dir(store)
    fs.write_at(fd, b"B" * 50, 100, a)  # unsynced append
    fs.write_at(fd, b"C" * 10, 20, a)  # unsynced overwrite of synced bytes
    fs.close(fd)
    b = os.path.join(store, "b")
    fd = fs.create(b)  # its directory entry is never synced
    fs.write_at(fd, b"b" * 10, 0, b)
    fs.sync(fd, b)
    fs.close(fd)
    return store


def test_the_power_loss_model_keeps_synced_bytes_and_varies_the_rest(tmp_path: Path) -> None:
    store = _scenario(tmp_path)
    disk = ct.Disk(str(tmp_path), str(tmp_path / ct.FAULT_LOG))
    assert disk.current(store) == ct.read_tree(store)  # all writes applied: what is on disk
    outcomes: set[str] = set()
    b_vanished = False
    for seed in range(60):
        cut, _notes = disk.power_cut(store, random.Random(seed))
        assert cut is not None
        a = cut["a"]
        assert isinstance(a, bytes)
        assert a[:20] == b"A" * 20 and a[30:100] == b"A" * 70  # synced, never touched
        assert 100 <= len(a) <= 150
        if set(a) - set(b"ABC"):
            outcomes.add("garbled")
        elif a == b"A" * 100:
            outcomes.add("dropped")
        elif len(a) < 150:
            outcomes.add("cut")
        b_vanished = b_vanished or "b" not in cut
    assert outcomes == {"garbled", "dropped", "cut"}
    assert b_vanished


def test_a_write_behind_the_file_layer_s_back_is_caught(tmp_path: Path) -> None:
    store = _scenario(tmp_path)
    with open(os.path.join(store, "a"), "ab") as f:  # not through holomem.log.fs
        f.write(b"sneaky")
    with pytest.raises(ct.ModelError, match="does not match the disk"):
        ct.power_loss(str(tmp_path), store, str(tmp_path / "cut"), 1)


def test_every_injected_fault_lands_on_the_disk(tmp_path: Path) -> None:
    store = _scenario(tmp_path)
    target = str(tmp_path / "cut")
    notes = ct.power_loss(str(tmp_path), store, target, 3)
    assert any("unsynced" in n for n in notes)
    assert notes[-1].endswith("differ from what the process left")
    with open(os.path.join(target, "a"), "rb") as f:
        assert f.read() != b"A" * 20 + b"C" * 10 + b"A" * 70 + b"B" * 50


@pytest.mark.parametrize("key", [None, ct.KEY], ids=["plain", "encrypted"])
def test_the_marker_scan_sees_through_compression_and_encryption(
        tmp_path: Path, key: bytes | None) -> None:
    store = holomem.Store.open(tmp_path / "store", key=key)
    memory = holomem.Memory(store)
    # Long and repetitive: the frame is zstd-compressed, so the raw bytes lack it.
    memory.remember(text=" ".join([ct.MARKERS[0]] * 40))
    store.close()
    found = ct.scan_files(str(tmp_path / "store"), ct.marker_needle(
        {"marker": ct.MARKERS[0]}), key=key)
    assert any("seg-00000001.hlj (compressed or sealed)" in f for f in found), found
    if key is not None:  # and nothing is in plaintext
        assert ct.scan_files(str(tmp_path / "store"), {"m": ct.MARKERS[0].encode()}) == []
