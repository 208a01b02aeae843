"""A writer process killed (``os.abort``) at any named crash point its workload reaches on
a stream store loses no acknowledged write, duplicates none, and keeps a finished forget:
the next writer (after the lease) finds exactly what was acknowledged."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter

from holomem import Memory, Store
from tests import exhaustive

from .cluster import Cluster, needs_server

pytestmark = needs_server
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LONG = exhaustive.on("HOLOMEM_LONG")
#: Without --exhaustive (or HOLOMEM_LONG=1): the points of the write path's three kinds of step.
SHORT = ("recordfile.write", "store.compact.written", "stream.generation.switched")


def _run(url: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.stream.crash_child", url],
                          env=dict(os.environ, PYTHONPATH=ROOT, **env), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def _reached(single: Cluster, tmp_path: object) -> list[str]:
    trace = os.path.join(str(tmp_path), "trace")
    done = _run(single.url("crash-trace", lease=1), HOLOMEM_CRASH_TRACE=trace)
    assert done.returncode == 0 and done.stdout.strip().endswith("done"), done.stderr[-2000:]
    with open(trace, encoding="utf-8") as f:
        return sorted({line.strip() for line in f if line.strip()})


def test_a_crash_at_each_reached_point_loses_and_duplicates_nothing(
        single: Cluster, tmp_path: object) -> None:
    points = _reached(single, tmp_path)
    assert "stream.generation.switched" in points and "recordfile.write" in points
    # Every point with --exhaustive (or HOLOMEM_LONG=1); in CI one of each kind of step.
    for n, point in enumerate(points if LONG else [p for p in SHORT if p in points]):
        store = f"crash-{n}"
        child = _run(single.url(store, lease=1), HOLOMEM_CRASH_AT=f"{point}:1")
        assert child.returncode != 0, f"{point}: the child did not crash"
        lines = child.stdout.split("\n")
        acked = [line[3:] for line in lines if line.startswith("ok ")]
        forgot = [line.split()[1] for line in lines if line.startswith("forgot ")]
        with Store.open(single.url(store, lease=1, wait=10)) as again:
            memory = Memory(again)
            texts = Counter(memory.get(i).text for i in again.ids())  # type: ignore[union-attr]
            for fid in forgot:
                assert memory.get(fid) is None, point
        first = "the crash workload's fact 0"
        # Every acknowledged remember is there once; the first fact is gone if its forget
        # returned. What the crash interrupted (a remember, the forget) is wholly there or
        # wholly absent.
        assert all(texts[t] == 1 for t in acked if t != first), point
        assert texts[first] == 0 if forgot else texts[first] <= 1, point
        assert all(c == 1 for c in texts.values()), f"{point}: a duplicate"
        assert set(texts) <= {f"the crash workload's fact {i}" for i in range(9)}
