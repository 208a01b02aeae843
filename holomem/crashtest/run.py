"""One run of the harness: crash the child at a point, apply a fault, check what is left.

Owns: the uncrashed reference run (:func:`reference_run`: what every step returns, and
how often each crash point is reached), a case (:class:`Case`: a crash point, a hit
count, a fault kind, a store variant and a seed), its :class:`Result`, and
:func:`run_case`, which carries out the fault kinds. Imports the child, the workload,
the disk model and the checks; not the matrix or the command line. Its own files (the
trace, copies of stores, kept run directories) go through :mod:`holomem.log.fs`, whose
tap is never installed in this process.

The child runs with ``HOLOMEM_CRASH_AT=point:N`` and aborts the N-th time it reaches
``point`` (:mod:`holomem.log.crashpoints`). The parent checks that it died of SIGABRT at
that very point and hit (``HOLOMEM_CRASH_TRACE``); a child that finishes was "not
reached", never a pass. Then, by fault kind:

- ``crash``: a process crash. What the child wrote is in the page cache, so the
  directory is checked as it was left.
- ``power``: a power cut. The child also runs with ``HOLOMEM_FAULT_LOG``, so its file
  layer records every operation (:mod:`holomem.log.tap`); what is checked is what the
  power-loss model (:mod:`holomem.crashtest.disk`) says a power cut could leave.
- ``recover``: a process crash, then a crash of the recovery (the next open) at every
  point it reaches, the first and the last time; each is checked.
- ``restart``: a process crash; the next process opens the store and acknowledges more
  writes; then the power fails (as for ``power``, over both processes' writes).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import time
import traceback
from typing import Any

from holomem.crashtest.checks import verify
from holomem.crashtest.child import spawn, store_path
from holomem.crashtest.disk import ModelError, power_loss
from holomem.crashtest.workload import RESUMED, plan, read_acks, read_resumed_acks
from holomem.errors import HolomemError
from holomem.log import fs

#: The key of the encrypted variant.
KEY = bytes(range(1, 33))
#: crash: the process aborts; power: a power cut; recover: the process aborts, then the
#: recovery (the next open) aborts too, at every point it reaches; restart: the process
#: aborts, the next one opens the store and acknowledges more writes, then the power fails.
FAULTS = ("crash", "power", "recover", "restart")


def variant_name(encrypted: bool, sync: str) -> str:
    """The name of a store variant, e.g. ``plain/full``."""
    return ("encrypted" if encrypted else "plain") + f"/{sync}"


@dataclasses.dataclass
class Reference:
    """An uncrashed run: what every step returns, and how often each point is hit."""

    encrypted: bool
    sync: str
    results: list[Any]
    hits: dict[str, int]
    registry: list[str]
    seconds: float

    @property
    def variant(self) -> str:
        return variant_name(self.encrypted, self.sync)


def reference_run(encrypted: bool, sync: str = "full", workdir: str | None = None
                  ) -> Reference:
    """Run the workload once without a crash, tracing every crash point reached."""
    t0 = time.monotonic()
    run_dir = fs.make_temp_dir("holomem-crash-ref-", workdir)
    try:
        trace = os.path.join(run_dir, "trace.txt")
        proc = spawn(run_dir, KEY if encrypted else None, sync,
                     {"HOLOMEM_CRASH_TRACE": trace}, record=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the reference run failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-3000:]}")
        registry, results, _, done = read_acks(os.path.join(run_dir, "acks.jsonl"))
        assert done, "the reference run did not finish"
        hits = dict.fromkeys(registry, 0)
        for name in _trace(trace):
            hits[name] = hits.get(name, 0) + 1
    finally:
        fs.remove_tree(run_dir)
    return Reference(encrypted, sync, results, hits, registry, time.monotonic() - t0)


@dataclasses.dataclass(frozen=True)
class Case:
    """One run: crash at the ``hit``-th time the workload reaches ``point``, then apply
    ``fault``, on a store variant; ``seed`` draws the power cut."""

    point: str
    hit: int
    fault: str
    encrypted: bool
    sync: str
    seed: int

    @property
    def variant(self) -> str:
        return variant_name(self.encrypted, self.sync)


@dataclasses.dataclass
class Result:
    """What a :class:`Case` came to."""

    case: Case
    outcome: str  # "pass", "FAIL", "not reached", "ERROR"
    seconds: float
    step: int = -1  # the step that was running when the crash hit
    step_kind: str = ""
    inflight: str = ""
    #: what the fault did: "abort" (a process crash), or the power cut's effect
    effect: str = ""
    violations: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    kept: str = ""

    def as_json(self) -> dict[str, Any]:
        """One flat mapping, the case's fields first (as ``--json`` prints a result)."""
        fields = dataclasses.asdict(self)
        return {**fields.pop("case"), **fields}


def run_case(case: Case, reference: list[Any], workdir: str | None = None,
             keep: str | None = None) -> Result:
    """Crash the workload at ``case``, recover, check; never raises for a finding."""
    t0 = time.monotonic()
    steps = plan()
    res = Result(case, "pass", 0.0)
    run_dir = fs.make_temp_dir("holomem-crash-", workdir)
    key = KEY if case.encrypted else None
    try:
        trace = os.path.join(run_dir, "trace.txt")
        env = {"HOLOMEM_CRASH_AT": f"{case.point}:{case.hit}", "HOLOMEM_CRASH_TRACE": trace}
        powered = case.fault in ("power", "restart")
        proc = spawn(run_dir, key, case.sync, env, record=powered)
        _, acked, begun, done = read_acks(os.path.join(run_dir, "acks.jsonl"))
        res.step = begun - 1
        res.step_kind = steps[res.step]["kind"] if begun else ""
        if proc.returncode == 0 and done:
            res.outcome = "not reached"
            return res
        if proc.returncode != -signal.SIGABRT:
            res.outcome = "ERROR"
            res.violations.append(f"the child exited with {proc.returncode}, not SIGABRT: "
                                  f"{proc.stderr.strip()[-2000:]}")
            return res
        reached = _trace(trace)
        if not reached or reached[-1] != case.point or reached.count(case.point) != case.hit:
            res.outcome = "ERROR"
            res.violations.append(f"the child aborted, but not at {case.point}:{case.hit} "
                                  f"(last point reached: {reached[-1:]})")
            return res
        if acked != reference[: len(acked)]:
            res.outcome = "ERROR"
            res.violations.append("the workload is not deterministic: acknowledgements "
                                  "differ from the reference run")
            return res
        store_dir = store_path(run_dir)
        res.effect = "abort"
        extra: dict[str, str] = {}
        if case.fault == "restart":
            extra = _restart(res, run_dir, key, case.sync, len(acked) == 0)
            if res.outcome != "pass":
                return res
        if case.fault == "recover":
            _recovery_crashes(res, run_dir, key, case.sync, steps, reference, len(acked),
                              begun)
            return res
        if powered:
            target = os.path.join(run_dir, "store-power-cut")
            try:
                res.notes += power_loss(run_dir, store_dir, target, case.seed)
                res.effect = res.notes[-1].split(":")[0]
            except ModelError as exc:
                res.outcome = "ERROR"
                res.violations.append(str(exc))
                return res
            store_dir = target
        verdict = verify(store_dir, key, steps, reference, len(acked), begun, extra)
        res.violations += verdict.violations
        res.inflight = verdict.inflight
        res.notes += verdict.notes
        if res.violations:
            res.outcome = "FAIL"
        return res
    except Exception as exc:  # a harness bug must show up as a result, not kill the pool
        res.outcome = "ERROR"
        res.violations.append(f"harness error: {exc!r}\n{traceback.format_exc()}")
        return res
    finally:
        res.seconds = round(time.monotonic() - t0, 3)
        if keep is not None and res.outcome != "pass":
            fs.make_dirs(keep)
            dest = os.path.join(keep, f"{case.fault}-{'enc' if case.encrypted else 'plain'}-"
                                f"{case.sync}-{case.point}-{case.hit}")
            fs.remove_tree(dest)
            fs.copy_tree(run_dir, dest)
            res.kept = dest
        with contextlib.suppress(HolomemError):  # a leftover temporary directory is harmless
            fs.remove_tree(run_dir)


def _trace(path: str) -> list[str]:
    """The crash points a child reached, in order (none if it wrote no trace)."""
    return (fs.read_file_or_none(path) or b"").decode().split()


def _restart(res: Result, run_dir: str, key: bytes | None, sync: str, create: bool
             ) -> dict[str, str]:
    """Start a second process on the crashed store, its operations appended to the same
    log as the first one's (for the power cut that follows); return the facts it
    acknowledged (id -> text)."""
    proc = spawn(run_dir, key, sync, {}, record=True, create=create, resume=True)
    acked = read_resumed_acks(os.path.join(run_dir, "acks-resumed.jsonl"))
    if proc.returncode != -signal.SIGABRT or len(acked) != len(RESUMED):
        res.outcome = "FAIL"
        res.violations.append(f"the store did not reopen and take writes after the crash "
                              f"(exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    res.notes.append(f"after the crash, a new process acknowledged {', '.join(acked)}")
    texts = {f["id"]: f["text"] for f in RESUMED}
    return {fid: texts[fid] for fid in acked}


def _recovery_crashes(res: Result, run_dir: str, key: bytes | None, sync: str,
                      steps: list[dict[str, Any]], reference: list[Any], acked: int,
                      begun: int) -> None:
    """Crash the recovery of a crashed store at every point it reaches (the first and
    last time), and check each result like a first crash (docs/guarantees.md §6; lesson 9: a second
    crash during recovery is survivable too)."""
    crashed = store_path(run_dir)

    def attempt(name: str, env: dict[str, str]) -> tuple[str, subprocess.CompletedProcess[str]]:
        sub = os.path.join(run_dir, name)
        fs.make_dirs(os.path.dirname(store_path(sub)))
        fs.copy_tree(crashed, store_path(sub))
        return sub, spawn(sub, key, sync, env, record=False, recover=True,
                          create=acked == 0)  # step 0 (the open) was not acknowledged

    sub, proc = attempt("traced", {"HOLOMEM_CRASH_TRACE": os.path.join(run_dir, "rtrace")})
    fs.remove_tree(sub)
    if proc.returncode != 0:
        res.outcome = "FAIL"
        res.violations.append(f"the recovery failed (exit {proc.returncode}): "
                              f"{proc.stderr.strip()[-2000:]}")
        return
    hits: dict[str, int] = {}
    for name in _trace(os.path.join(run_dir, "rtrace")):
        hits[name] = hits.get(name, 0) + 1
    tried = 0
    for point, total in sorted(hits.items()):
        for n in sorted({1, total}):
            sub, proc = attempt(f"r-{point}-{n}", {"HOLOMEM_CRASH_AT": f"{point}:{n}"})
            tried += 1
            if proc.returncode != -signal.SIGABRT:
                res.outcome = "ERROR"
                res.violations.append(f"recovery crash at {point}:{n}: the child exited "
                                      f"with {proc.returncode}, not SIGABRT")
                continue
            verdict = verify(store_path(sub), key, steps, reference, acked, begun)
            res.violations += [f"recovery crash at {point}:{n}: {v}"
                               for v in verdict.violations]
            fs.remove_tree(sub)
    res.effect = (f"{tried} recovery crashes" if tried
                  else "nothing to crash: the recovery reached no crash point")
    res.notes.append(f"the recovery reached {sum(hits.values())} crash points: "
                     + ", ".join(f"{p} x{n}" for p, n in sorted(hits.items())))
    if res.violations and res.outcome == "pass":
        res.outcome = "FAIL"
