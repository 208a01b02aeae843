"""The harness's children forked from a pre-imported server die as fresh ones do
(holomem.crashtest.forkserver): each arms its crash points and recorder from its own
environment, not from the server's or the previous child's, aborts at the same point and
hit with SIGABRT, leaves the same acknowledgements, trace and operations log, and reports
a failure with its traceback and exit status."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest

from holomem import crashtest as ct
from holomem.crashtest import forkserver
from holomem.log import tap

POINT = "journal.segment.rotate"


def _run(run_dir: Path, env: dict[str, str], record: bool = False
         ) -> subprocess.CompletedProcess[str]:
    run_dir.mkdir()
    return ct.spawn(str(run_dir), None, "full", env, record)


def _left(run_dir: Path) -> tuple[list[str], list[object], int, bool, list[str]]:
    """The trace, then what read_acks reads, then the kinds of operation recorded."""
    trace = (run_dir / "trace.txt").read_text().split()
    registry, results, begun, done = ct.read_acks(str(run_dir / "acks.jsonl"))
    assert registry
    log = run_dir / ct.FAULT_LOG
    kinds = [r.kind for r in tap.parse(log.read_bytes())] if log.exists() else []
    return trace, results, begun, done, kinds


def test_a_forked_child_aborts_at_its_point_and_leaves_what_a_fresh_child_leaves(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ends = {}
    for mode in ("fresh", "forked"):
        monkeypatch.setenv(forkserver.FRESH_ENV, "1" if mode == "fresh" else "0")
        run = tmp_path / mode
        proc = _run(run, {"HOLOMEM_CRASH_AT": f"{POINT}:2",
                          "HOLOMEM_CRASH_TRACE": str(tmp_path / mode / "trace.txt")},
                    record=True)
        assert proc.returncode == -signal.SIGABRT, proc.stderr
        trace, *rest = _left(run)
        assert trace[-1] == POINT and trace.count(POINT) == 2
        ends[mode] = (trace, *rest)
    assert ends["forked"] == ends["fresh"]


def test_each_forked_child_arms_itself_from_its_own_environment(tmp_path: Path) -> None:
    crashed = _run(tmp_path / "a", {"HOLOMEM_CRASH_AT": f"{POINT}:1",
                                    "HOLOMEM_FAULT_LOG": str(tmp_path / "a" / "ops")})
    assert crashed.returncode == -signal.SIGABRT, crashed.stderr
    # The next child from the same server: nothing armed, nothing recorded, no trace.
    clean = _run(tmp_path / "b", {})
    assert clean.returncode == 0, clean.stderr
    _, _, _, done = ct.read_acks(str(tmp_path / "b" / "acks.jsonl"))
    assert done
    assert sorted(os.listdir(tmp_path / "b")) == ["acks.jsonl", "home"]
    # And the one after: traced only, to the end.
    traced = _run(tmp_path / "c", {"HOLOMEM_CRASH_TRACE": str(tmp_path / "c" / "trace.txt")})
    assert traced.returncode == 0, traced.stderr
    assert POINT in (tmp_path / "c" / "trace.txt").read_text().split()


@pytest.mark.parametrize("mode", ["fresh", "forked"])
def test_a_failing_child_reports_its_traceback_and_exit_status(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    monkeypatch.setenv(forkserver.FRESH_ENV, "1" if mode == "fresh" else "0")
    proc = ct.spawn(str(tmp_path), None, "no-such-mode", {}, False)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr and "no-such-mode" in proc.stderr, proc.stderr


def test_a_forked_child_past_its_deadline_is_killed_and_reported_as_subprocess_does(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOMEM_")}
    server = forkserver.ForkServer(env)
    try:
        for name, timeout in (("late", 0.0), ("in-time", 120.0)):
            (tmp_path / name).mkdir()
            args = ["--child", str(tmp_path / name / "store"),
                    str(tmp_path / name / "acks.jsonl")]
            if timeout:  # and the server goes on serving
                done = server.run("holomem.crashtest", args, env, str(tmp_path), timeout)
                assert done.returncode == 0, done.stderr
            else:
                with pytest.raises(subprocess.TimeoutExpired):
                    server.run("holomem.crashtest", args, env, str(tmp_path), timeout)
    finally:
        server.close()
