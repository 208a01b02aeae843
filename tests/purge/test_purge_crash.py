"""A purge cut short by a crash is finished by the next open: the marker goes anyway.

docs/guarantees.md §6 and issue 5: "once ``forget(..., purge=True)`` has been acknowledged, the
removed text is gone from every file after the next successful open, whatever
happened in between"; and since the purge request is recorded in the removal's own
transaction (issue 11, item 7), the same holds for a crash at any point after
which the removal is durable: the facts are gone only with their purge pending.

The crash points reached during the forget are found by running the workload
(``workload.py``) once with ``HOLOMEM_CRASH_TRACE``. Then, for each of them, a child
runs the same workload with ``HOLOMEM_CRASH_AT=name:N`` and dies by ``os.abort()``
there; the parent reopens the store with ``holomem.Store.open`` and checks that

- the forget is all or nothing: the marked facts are all there or all gone;
- the marker is in no file at all if the crash came at or after
  ``store.compact.begin`` (or after the forget returned), or whenever the facts
  are gone: no crash can leave the removal durable and its purge unrecorded;
- the unrelated facts read back exactly as in an uncrashed store in the same state
  (every ``get()`` and every recall, compared as plain data);
- ``holomem.fsck.check`` finds nothing uncorrectable in the crashed store, and
  finds the store clean after the reopen.

Every point reached during the forget is crashed at: every hit of a point reached
at most ``ALL_HITS_UP_TO`` times, and of one reached more often (fsyncs, text
record writes) the first, the last and a spread between them, plus every hit from
the switch of generations to the end of the erasure, where the removed text is
being destroyed. ``pytest --exhaustive`` (or ``HOLOMEM_PURGE_CRASH_ALL=1``) crashes
at every hit of every point (about a hundred per store, and the double-crash test at
every hit too). Each
child also traces its points, which proves the abort landed at the point and hit
count aimed at. The children are forked from a process that imported holomem once
(holomem.crashtest.forkserver; ``HOLOMEM_CRASH_FRESH=1``: fresh interpreters).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from holomem.crashtest import forkserver
from holomem.fsck import check
from tests import exhaustive
from tests.purge import markers
from tests.purge import workload as w

REPO = Path(__file__).resolve().parents[2]
EVERY_HIT = exhaustive.on("HOLOMEM_PURGE_CRASH_ALL")
ALL_HITS_UP_TO = 6
SPREAD = 5
#: Points the purge path must reach; the test fails if the trace misses one.
PURGE_POINTS = {
    "store.compact.begin", "store.compact.written", "store.compact.done",
    "journal.generation.created", "journal.generation.switched",
    "fs.erase.zeroed", "fs.erase.unlinked", "fs.rename.before", "fs.rename.after",
    "fs.fsync.before", "fs.fsync.after", "fs.dirsync.before", "fs.dirsync.after",
    "recordfile.zero", "recordfile.seal", "recordfile.write",
    "journal.frame.write.before", "journal.frame.write.after",
}


class Case(NamedTuple):
    name: str
    hit: int  # N of HOLOMEM_CRASH_AT=name:N, counted from the child's start
    position: int  # index among the crash points reached during the forget
    after_begin: bool  # at or after the first store.compact.begin


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HOLOMEM_CRASH_AT", "HOLOMEM_CRASH_TRACE", "HOLOMEM_FAULT_LOG")}
    env["PYTHONPATH"] = str(REPO)
    env.update(extra)
    return env


def _workload(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m tests.purge.workload ARGS``: forked from a process that imported
    holomem already, as the crash harness's children are (or a fresh interpreter with
    HOLOMEM_CRASH_FRESH=1); it arms its crash point from ``env`` all the same."""
    return forkserver.run("tests.purge.workload", args, env=env, cwd=str(REPO), timeout=120,
                          server_env=_env(), preload=["tests.purge.workload"])


def _run_child(store: str, key: bytes | None, env: dict[str, str],
               abort_after_forget: bool = False) -> subprocess.CompletedProcess[str]:
    args = [store]
    if key is not None:
        args += ["--key", key.hex()]
    if abort_after_forget:
        args.append("--abort-after-forget")
    return _workload(args, env)


def _spread(total: int) -> set[int]:
    """The first hit, the last, and SPREAD - 2 evenly between them."""
    return {1 + (total - 1) * j // (SPREAD - 1) for j in range(SPREAD)}


def _plan(trace: list[str]) -> list[Case]:
    start = trace.index(w.TRACE_SEPARATOR)
    end = trace.index(w.TRACE_RETURNED)
    before = Counter(trace[:start])
    during = trace[start + 1 : end]
    begin = during.index("store.compact.begin")
    switched = during.index("journal.generation.switched")
    done = during.index("store.compact.done")
    totals = Counter(during)
    seen: Counter[str] = Counter()
    cases = []
    for pos, name in enumerate(during):
        seen[name] += 1
        k, total = seen[name], totals[name]
        if (EVERY_HIT or total <= ALL_HITS_UP_TO or switched <= pos <= done
                or k in _spread(total)):
            cases.append(Case(name, before[name] + k, pos, pos >= begin))
    return cases


def _reference(tmp: Path, key: bytes | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """What the unrelated facts look like with the marked facts live, and forgotten."""
    path = str(tmp / "reference")
    store, memory = w.open_memory(path, key)
    w.remember_all(memory)
    live = w.observe(memory)
    w.forget_marked(memory, purge=False)
    forgotten = w.observe(memory)
    store.close()
    return live, forgotten


def _verify(path: str, key: bytes | None, child: subprocess.CompletedProcess[str],
            must_be_purged: bool, refs: tuple[dict[str, Any], dict[str, Any]]) -> list[str]:
    """Everything wrong with the store after the crash; [] if all is well."""
    if child.returncode != -signal.SIGABRT:
        return [f"the child did not abort there: exit {child.returncode}, "
                f"stderr {child.stderr[-500:]!r}"]
    said = child.stdout.splitlines()
    if "remembered" not in said:
        return [f"the crash came before the facts were remembered: {said}"]
    acknowledged = any(line.startswith("forget-returned") for line in said)
    return _verify_store(path, key, acknowledged or must_be_purged, refs)


def _verify_store(path: str, key: bytes | None, must_be_purged: bool,
                  refs: tuple[dict[str, Any], dict[str, Any]]) -> list[str]:
    problems = []
    if key is not None and markers.plaintext_files_with(path, w.MARKER_BYTES):
        problems.append("the crashed store holds the marker in plaintext")
    # Before the reopen, fsck may find what the crash left (leftovers, a pending
    # purge, a stale text segment), but nothing it could not repair.
    pre = check(path, key=key)
    if pre.error is not None or not all(f.repairable for f in pre.findings):
        problems.append(f"fsck calls the crashed store uncorrectable: {pre.error} "
                        f"{[(f.code, f.path, f.offset) for f in pre.findings]}")
    # The reopen, under the test: it finishes an interrupted purge.
    store, memory = w.open_memory(path, key)
    try:
        present = [memory.get(i) is not None for i in w.marked_ids()]
        observed = w.observe(memory)
        hits = markers.files_with(path, w.MARKER_BYTES, key)
    finally:
        store.close()
    if any(present) and not all(present):
        problems.append(f"a partial forget is visible: {present}")
    gone = not any(present)
    if must_be_purged and not gone:
        problems.append("the marked facts survived an acknowledged or recorded purge")
    expected = refs[1] if gone else refs[0]
    if observed != expected:
        diff = [i for i in expected["get"] if expected["get"][i] != observed["get"].get(i)]
        problems.append(f"unrelated facts changed: get() differs for {diff}; recall "
                        f"{'differs' if expected['recall'] != observed['recall'] else 'same'}")
    if (must_be_purged or gone) and hits:
        problems.append(f"the marker is still on disk after reopen (facts "
                        f"{'gone' if gone else 'present'}): {hits}")
    if key is not None and markers.plaintext_files_with(path, w.MARKER_BYTES):
        problems.append("the marker is on disk in plaintext")
    if markers.files_with(path, w.MARKER_BYTES, key) != hits:
        problems.append("closing the reopened store changed where the marker is")
    report = check(path, key=key)
    if report.exit_code != 0:
        problems.append(f"fsck exit {report.exit_code}: "
                        f"{[(f.code, f.path, f.offset) for f in report.findings]} "
                        f"{report.error}")
    return problems


@pytest.mark.parametrize("kind", ["plain", "encrypted"])
def test_purge_crash_at_every_point_leaves_no_marker_after_reopen(tmp_path: Path,
                                                                  kind: str) -> None:
    key = os.urandom(32) if kind == "encrypted" else None
    trace_file = tmp_path / "trace"
    traced = _run_child(str(tmp_path / "traced"), key,
                        _env(HOLOMEM_CRASH_TRACE=str(trace_file)))
    assert traced.returncode == 0, traced.stderr
    trace = trace_file.read_text().splitlines()
    cases = _plan(trace)
    reached = {c.name for c in cases}
    assert reached >= PURGE_POINTS, f"never reached during the purge: {PURGE_POINTS - reached}"
    refs = _reference(tmp_path, key)

    def run(i: int, case: Case) -> list[str]:
        path = str(tmp_path / f"crash-{i:03d}")
        own_trace = tmp_path / f"trace-{i:03d}"
        child = _run_child(path, key, _env(HOLOMEM_CRASH_AT=f"{case.name}:{case.hit}",
                                           HOLOMEM_CRASH_TRACE=str(own_trace)))
        where = f"{case.name}:{case.hit} (step {case.position} of the forget)"
        # The fault landed where it was aimed: the child's last point is this one,
        # the N-th time, during the forget (the trace is written before the abort).
        lines = own_trace.read_text().splitlines() if own_trace.exists() else []
        during = lines[lines.index(w.TRACE_SEPARATOR) + 1 :] if w.TRACE_SEPARATOR in lines else []
        if (not during or w.TRACE_RETURNED in during or lines[-1] != case.name
                or lines.count(case.name) != case.hit):
            return [f"{where}: the crash did not land there (trace ends {lines[-3:]})"]
        after_begin = "store.compact.begin" in during
        if after_begin != case.after_begin:
            return [f"{where}: the child took another path than the traced run"]
        return [f"{where}: {p}" for p in _verify(path, key, child, after_begin, refs)]

    def acknowledged() -> list[str]:
        path = str(tmp_path / "acknowledged")
        child = _run_child(path, key, _env(), abort_after_forget=True)
        return [f"abort after forget returned: {p}" for p in _verify(path, key, child, True,
                                                                     refs)]

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = [pool.submit(run, i, c) for i, c in enumerate(cases)]
        futures.append(pool.submit(acknowledged))
        problems = [p for f in futures for p in f.result()]
    print(f"{kind}: crashed at {len(cases)} points of the purge "
          f"({len(reached)} distinct names)")
    assert problems == [], "\n".join(problems)


def _run_reopen(store: str, key: bytes | None, env: dict[str, str]
                ) -> subprocess.CompletedProcess[str]:
    args = [store, "--reopen"]
    if key is not None:
        args += ["--key", key.hex()]
    return _workload(args, env)


@pytest.mark.parametrize("kind", ["plain", "encrypted"])
def test_a_crash_while_reopening_finishes_the_purge_on_the_open_after(tmp_path: Path,
                                                                      kind: str) -> None:
    """Crash once in the purge (the new generation written, not switched in), then
    again at each point the recovering open reaches (its first hit; every hit with
    HOLOMEM_PURGE_CRASH_ALL=1): the open after that still erases the marker."""
    key = os.urandom(32) if kind == "encrypted" else None
    crashed = str(tmp_path / "crashed")
    first = _run_child(crashed, key, _env(HOLOMEM_CRASH_AT="store.compact.written:1"))
    assert first.returncode == -signal.SIGABRT, first.stderr
    assert "forget-started" in first.stdout.splitlines()
    refs = _reference(tmp_path, key)

    traced = str(tmp_path / "traced")
    shutil.copytree(crashed, traced)
    trace_file = tmp_path / "trace"
    done = _run_reopen(traced, key, _env(HOLOMEM_CRASH_TRACE=str(trace_file)))
    assert done.returncode == 0, done.stderr
    trace = trace_file.read_text().splitlines()
    assert "store.compact.done" in trace and "fs.erase.zeroed" in trace
    totals = Counter(trace)
    cases = sorted({(name, n) for name in totals
                    for n in (range(1, totals[name] + 1) if EVERY_HIT else (1,))})

    def run(i: int, name: str, n: int) -> list[str]:
        path = str(tmp_path / f"reopen-{i:03d}")
        shutil.copytree(crashed, path)
        child = _run_reopen(path, key, _env(HOLOMEM_CRASH_AT=f"{name}:{n}"))
        if child.returncode != -signal.SIGABRT:
            return [f"{name}:{n}: the reopen did not abort there: exit {child.returncode}"]
        return [f"second crash at {name}:{n}: {p}"
                for p in _verify_store(path, key, True, refs)]

    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = [pool.submit(run, i, name, n) for i, (name, n) in enumerate(cases)]
        problems = [p for f in futures for p in f.result()]
    assert problems == [], "\n".join(problems)
