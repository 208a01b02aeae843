"""``python -m holomem.fsck`` and ``python tools/fsck.py``: e2fsck exit codes, readable
text, and JSON that parses (docs/guarantees.md §7)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fsck import corruption as c

REPO = Path(__file__).resolve().parents[2]
ENTRY_POINTS = {
    "module": [sys.executable, "-m", "holomem.fsck"],
    "tools": [sys.executable, str(REPO / "tools" / "fsck.py")],
}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, c.Built]:
    root = tmp_path_factory.mktemp("cli-bases")
    return {"plain": c.build(str(root / "plain")),
            "encrypted": c.build(str(root / "encrypted"), os.urandom(32))}


@pytest.fixture(params=list(ENTRY_POINTS))
def fsck(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        # From another directory: the tools wrapper must find holomem on its own.
        return subprocess.run([*ENTRY_POINTS[request.param], *args], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
    return run


def _copy(base: c.Built, dst: Path) -> str:
    shutil.copytree(base.path, dst)
    return str(dst)


def _tear(path: str) -> tuple[str, int]:
    """Tear the last frame as a crash during its append would (not acknowledged)."""
    c.crash_after_last_frame(path)
    seg = c.segments(path)[-1]
    frame = c.frames(seg)[-1]
    os.truncate(seg, frame.offset + c.FRAME_HEADER_SIZE + 3)
    return seg, frame.offset


def test_clean_store_exits_0(fsck: Any, bases: dict[str, c.Built], tmp_path: Path) -> None:
    path = _copy(bases["plain"], tmp_path / "s")
    done = fsck(path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "clean" in done.stdout
    report = json.loads(fsck(path, "--json").stdout)
    assert report["exit_code"] == 0 and report["clean"] and report["findings"] == []
    assert report["transactions"] > 0 and report["segments"] >= 3


def test_torn_tail_exits_4_then_repair_exits_1_then_clean(
        fsck: Any, bases: dict[str, c.Built], tmp_path: Path) -> None:
    path = _copy(bases["plain"], tmp_path / "s")
    seg, offset = _tear(path)
    done = fsck(path)
    assert done.returncode == 4
    assert seg in done.stdout and f"offset {offset}" in done.stdout  # where, in plain words
    report = json.loads(fsck(path, "--json").stdout)
    assert report["exit_code"] == 4
    torn = [f for f in report["findings"] if f["code"] == "journal.torn"]
    assert [(f["path"], f["offset"], f["repaired"]) for f in torn] == [(seg, offset, False)]

    done = fsck(path, "--repair", "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["exit_code"] == 1
    torn = [f for f in report["findings"] if f["code"] == "journal.torn"]
    assert torn[0]["repaired"] and torn[0]["backup"] and os.path.isfile(torn[0]["backup"])
    assert fsck(path).returncode == 0


def test_uncorrectable_damage_exits_4_with_and_without_repair(
        fsck: Any, bases: dict[str, c.Built], tmp_path: Path) -> None:
    path = _copy(bases["plain"], tmp_path / "s")
    missing = c.segments(path)[1]
    os.unlink(missing)
    before = c.tree(path)
    for args in ([], ["--repair"], ["--repair", "--json"]):
        done = fsck(path, *args)
        assert done.returncode == 4, (args, done.stdout, done.stderr)
        assert missing in done.stdout
    report = json.loads(done.stdout)
    assert any(f["code"] == "corrupt.missing" and not f["repairable"]
               for f in report["findings"])
    assert c.tree(path) == before


def test_a_generation_with_no_segment_left_is_never_clean(
        fsck: Any, bases: dict[str, c.Built], tmp_path: Path) -> None:
    """Every segment and the watermark gone (as when fsck's advice to give up a missing
    segment was followed): open refuses the store, so fsck must not call it clean."""
    path = _copy(bases["plain"], tmp_path / "s")
    gen = os.path.dirname(c.segments(path)[0])
    for segment in c.segments(path):
        os.unlink(segment)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(gen, "watermark"))
    for args in ([], ["--repair"], ["--json"]):
        done = fsck(path, *args)
        assert done.returncode == 4, (args, done.stdout, done.stderr)
    report = json.loads(done.stdout)
    assert not report["clean"]
    assert [f["code"] for f in report["findings"]] == ["corrupt.empty"]


def test_encrypted_store_needs_the_right_key_file(
        fsck: Any, bases: dict[str, c.Built], tmp_path: Path) -> None:
    built = bases["encrypted"]
    assert built.key is not None
    path = _copy(built, tmp_path / "s")
    key_file, wrong_file = tmp_path / "key", tmp_path / "wrong"
    key_file.write_bytes(built.key)
    wrong_file.write_bytes(os.urandom(32))
    assert fsck(path, "--key-file", str(key_file)).returncode == 0
    assert fsck(path).returncode == 8  # no key
    done = fsck(path, "--key-file", str(wrong_file), "--json")
    assert done.returncode == 8
    report = json.loads(done.stdout)
    assert report["exit_code"] == 8 and report["error"].startswith("key.wrong")
    assert fsck(path, "--key-file", str(tmp_path / "no-such-file")).returncode == 8
    assert fsck(path, "--key-file", str(wrong_file), "--repair").returncode == 8


def test_operational_errors_exit_8(fsck: Any, bases: dict[str, c.Built],
                                   tmp_path: Path) -> None:
    assert fsck(str(tmp_path / "nothing-here")).returncode == 8
    empty = tmp_path / "empty"
    empty.mkdir()
    done = fsck(str(empty), "--json")
    assert done.returncode == 8 and json.loads(done.stdout)["error"]
    # A plaintext store given a key.
    path = _copy(bases["plain"], tmp_path / "s")
    key_file = tmp_path / "key"
    key_file.write_bytes(os.urandom(32))
    assert fsck(path, "--key-file", str(key_file)).returncode == 8


def test_repair_of_a_store_open_for_writing_exits_8_and_changes_nothing(
        fsck: Any, bases: dict[str, c.Built], tmp_path: Path) -> None:
    path = _copy(bases["plain"], tmp_path / "s")
    _tear(path)
    # The writer's lock, as an open Store holds it (a writer's open would cut the tail).
    lock = os.open(os.path.join(path, "LOCK"), os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = c.tree(path)
        done = fsck(path, "--repair")
        assert done.returncode == 8, done.stdout + done.stderr
        assert "locked" in done.stdout
        assert c.tree(path) == before
    finally:
        os.close(lock)
    assert fsck(path, "--repair").returncode == 1
