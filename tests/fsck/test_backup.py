"""A repair never loses what it cuts: the backup is kept, durably, before the cut, and
what check, repair and salvage report as cut is what is cut (docs/guarantees.md §7)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, Store
from holomem.fsck import check, salvage
from holomem.log.format import FRAME_FLAG_COMPRESSED, FRAME_HEADER, FRAME_KIND_TRANSACTION
from tests.fsck import corruption as c

REPO = Path(__file__).resolve().parents[2]


def _tear_last_frame(path: str) -> tuple[int, bytes]:
    """Tear the last frame as a crash during its append would (not acknowledged)."""
    c.crash_after_last_frame(path)
    seg = c.segments(path)[-1]
    frame = c.frames(seg)[-1]
    cut_at = frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2
    cut = c.read(seg)[frame.offset : cut_at]
    os.truncate(seg, cut_at)
    return frame.offset, cut


def test_two_repairs_that_cut_at_the_same_offset_keep_both_backups(tmp_path: Path) -> None:
    """The second cut must not overwrite the first one's backup (same file, same
    offset, within the same second)."""
    path = str(tmp_path / "s")
    c.build(path)
    offset1, cut1 = _tear_last_frame(path)
    first = check(path, repair=True)
    assert first.exit_code == 1
    # The same batch written again lands at the same offset; tear it again.
    with Store.open(path, segment_size=c.SEGMENT_SIZE) as store:
        Memory(store, clock=ManualClock(c.CLOCK_START + 1)).remember_many(
            [{"id": t, "text": f"written again: {t}"} for t in c.TAIL])
    offset2, cut2 = _tear_last_frame(path)
    assert offset2 == offset1 and cut2 != cut1
    second = check(path, repair=True)
    assert second.exit_code == 1
    backups = sorted(f.backup for r in (first, second) for f in r.findings if f.backup)
    assert len(backups) == 2 and backups[0] != backups[1]
    assert sorted(c.read(b) for b in backups) == sorted([cut1, cut2])
    assert len(os.listdir(path + ".fsck-backup")) == 2


def test_the_backup_is_durable_before_the_torn_tail_is_cut(tmp_path: Path) -> None:
    """The file layer's log (HOLOMEM_FAULT_LOG) of ``fsck --repair``: the backup
    directory is synced, and so is its parent (it was just created there), before
    the segment is truncated."""
    path = str(tmp_path / "s")
    c.build(path)
    seg = c.segments(path)[-1]
    _tear_last_frame(path)
    fault_log = tmp_path / "fault.log"
    env = dict(os.environ, HOLOMEM_FAULT_LOG=str(fault_log), PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "holomem.fsck", path, "--repair"], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    ops = [line.split("\t") for line in fault_log.read_text().splitlines()]
    cut = next(i for i, op in enumerate(ops) if op[:2] == ["truncate", seg])
    synced_dirs = {op[1] for op in ops[:cut] if op[0] == "dirsync"}
    backup_dir = path + ".fsck-backup"
    assert backup_dir in synced_dirs, ops[:cut]
    assert str(tmp_path) in synced_dirs, f"the new backup directory's entry is not durable: " \
                                         f"{ops[:cut]}"


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = str(tmp_path_factory.mktemp("small") / "s")
    with Store.open(path) as store:
        memory = Memory(store, clock=ManualClock(c.CLOCK_START))
        for i in range(5):
            memory.remember(f"fact {i}")
    return path


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(claimed=st.integers(0, 300), flags=st.sampled_from([0, FRAME_FLAG_COMPRESSED]),
       seq=st.integers(0, 2**64 - 1), checksum=st.integers(0, 2**64 - 1),
       body=st.binary(max_size=300), keep=st.integers(1, 400))
def test_check_repair_and_salvage_report_a_torn_tails_length_as_the_bytes_cut(
        small_store: str, claimed: int, flags: int, seq: int, checksum: int, body: bytes,
        keep: int) -> None:
    """An append that never completed: the first ``keep`` bytes of a frame whose header
    claims a body of ``claimed`` bytes, followed by ``body`` (shorter or longer than it
    claims; the checksum does not match). Check, repair and salvage all report the
    bytes from the torn frame to the end of the file, the bytes the repair cuts and
    backs up -- not the size the frame header claims."""
    torn = (FRAME_HEADER.pack(claimed, flags, FRAME_KIND_TRANSACTION, 0, seq, checksum)
            + body)[:keep]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s")
        shutil.copytree(small_store, path)
        seg = c.segments(path)[-1]
        end = os.path.getsize(seg)
        with open(seg, "ab") as fh:
            fh.write(torn)
        cut = len(torn)

        (found,) = check(path).findings
        assert (found.code, found.path, found.offset, found.length) == \
            ("journal.torn", seg, end, cut)
        (lost,) = salvage(path, os.path.join(tmp, "salvaged")).losses
        assert (lost.path, lost.offset, lost.length) == (seg, end, cut)
        (repaired,) = check(path, repair=True, backup_dir=os.path.join(tmp, "cut")).findings
        assert (repaired.code, repaired.offset, repaired.length) == ("journal.torn", end, cut)
        assert repaired.repaired and repaired.backup is not None
        assert os.path.getsize(repaired.backup) == cut and os.path.getsize(seg) == end
