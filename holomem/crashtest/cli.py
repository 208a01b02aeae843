"""The harness's command line: ``python -m holomem.crashtest [options]``.

Owns: the options (:func:`parser`), the run they ask for (the reference runs, then the
matrix), its progress on stderr (:class:`Progress`: one line per case when stderr is not
a terminal -- a CI log, a pipe, a file --, one status line rewritten in place when it
is), and what is printed on stdout: a table of every run and every finding in full
(:func:`table`), or with ``--json`` the same as JSON. Exits 0 if every run passed and
every crash point was reached. Hands ``--child`` to :mod:`holomem.crashtest.child` and
``--fork-server`` to :mod:`holomem.crashtest.forkserver`. The
harness's own files go through :mod:`holomem.log.fs` too, but only the children record
what it does: the parent (and the pool it starts) never has a tap installed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from holomem.crashtest import child, forkserver
from holomem.crashtest.cases import SYNC_MODES, default_jobs, matrix, run_matrix
from holomem.crashtest.run import FAULTS, Reference, Result, reference_run
from holomem.log import fs


def summary(results: Sequence[Result]) -> dict[str, int]:
    """How many runs came to each outcome."""
    out: dict[str, int] = {}
    for r in results:
        out[r.outcome] = out.get(r.outcome, 0) + 1
    return out


def table(results: Sequence[Result], references: Sequence[Reference], seed: int,
          seconds: float) -> str:
    """The readable report: one line per run, then every finding in full."""
    lines = [f"holomem crash-injection harness, seed {seed}"]
    for ref in references:
        never = sorted(p for p, n in ref.hits.items() if n == 0)
        lines.append(f"  {ref.variant}: {len(ref.hits)} crash points, "
                     f"{sum(ref.hits.values())} hits in one uncrashed run of "
                     f"{len(ref.results)} steps"
                     + (f"; NEVER REACHED: {', '.join(never)}" if never else ""))
    head = (f"{'crash point':<28} {'hit':>4}  {'fault':<7} {'store':<15} {'outcome':<11} "
            f"{'crashed in step':<20} {'in-flight':<9} fault effect")
    lines += ["", head, "-" * len(head)]
    for r in results:
        step = f"{r.step} {r.step_kind}" if r.step >= 0 else "-"
        c = r.case
        lines.append(f"{c.point:<28} {c.hit:>4}  {c.fault:<7} {c.variant:<15} "
                     f"{r.outcome:<11} {step:<20} {r.inflight or '-':<9} {r.effect}")
    bad = [r for r in results if r.outcome != "pass"]
    if bad:
        lines += ["", "Findings (rerun one with --point P --hits N --fault F --seed S):"]
        for r in bad:
            c = r.case
            lines.append(f"- {c.point}:{c.hit} {c.fault} {c.variant} "
                         f"(run seed {c.seed}): {r.outcome}"
                         + (f", kept in {r.kept}" if r.kept else ""))
            lines += [f"    {v}" for v in r.violations]
            lines += [f"    note: {n}" for n in r.notes]
    counts = summary(results)
    lines += ["", f"{len(results)} runs in {seconds:.1f} s, seed {seed}: "
              + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))]
    return "\n".join(lines)


class Progress:
    """Progress of the matrix on ``stream``: a line per case finished when the stream is
    not a terminal (so a log shows every case as it ends), else one status line
    rewritten in place. Reference runs are reported as lines either way."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.total = total
        self.done = 0
        self.t0 = time.monotonic()
        self._status = False  # a status line is on screen, not ended

    def reference(self, ref: Reference) -> None:
        self.note(f"crashtest: reference run {ref.variant}: {len(ref.hits)} crash points, "
                  f"{sum(ref.hits.values())} hits in {len(ref.results)} steps "
                  f"({ref.seconds:.1f} s)")

    def case(self, r: Result) -> None:
        self.done += 1
        c = r.case
        what = (f"[{self.done}/{self.total}] {c.variant} {c.point}:{c.hit} {c.fault}: "
                f"{r.outcome}")
        if not self.tty:
            extra = f"; {r.violations[0].splitlines()[0]}" if r.violations else ""
            self.note(f"crashtest {what} ({r.seconds:.1f} s){extra}")
            return
        elapsed = time.monotonic() - self.t0
        width = max(20, shutil.get_terminal_size().columns - 1)
        print(f"\r{f'crashtest {what} ({elapsed:.0f} s)'[:width]}\x1b[K", end="",
              file=self.stream, flush=True)
        self._status = True

    def note(self, text: str) -> None:
        """A line of its own (ending the status line first, on a terminal)."""
        if self._status:
            print(file=self.stream)
            self._status = False
        print(text, file=self.stream, flush=True)

    def close(self) -> None:
        if self._status:
            print(file=self.stream, flush=True)
            self._status = False


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m holomem.crashtest",
                                 description="crash the workload at every crash point and "
                                 "check that every acknowledged write survives")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--soak", action="store_true",
                    help="every hit count of every point (long), not a few")
    ap.add_argument("--encrypted", action="store_true", help="an encrypted store")
    ap.add_argument("--both", action="store_true", help="plain and encrypted stores")
    ap.add_argument("--sync", choices=(*SYNC_MODES, "both"), default="full",
                    help="the store's sync mode (default full)")
    ap.add_argument("--fault", default="crash,power",
                    help=f"comma-separated fault kinds among {', '.join(FAULTS)}, or 'all' "
                    "(default crash,power)")
    ap.add_argument("--point", action="append", help="only this crash point (repeatable)")
    ap.add_argument("--hits", help="only these hit counts, e.g. 1,2,7")
    ap.add_argument("--seed", type=int, default=None,
                    help="base seed of the power-loss faults (default: random, printed)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="runs at a time (default: twice the CPUs)")
    ap.add_argument("--keep", help="copy the directory of every failing run here")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    """Run the harness (with ``--child``: be the child); return the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--child" in argv:
        return child.main(argv)
    if argv[:1] == [forkserver.OPTION] and len(argv) >= 2:
        # The server returns in each child it forks, with what that child is to run.
        forked = forkserver.serve(int(argv[1]), argv[2:])
        return 0 if forked is None else forkserver.run_forked(forked)
    # Only the children record (they get the variable from spawn): not this process,
    # nor the pool's, which inherit its environment.
    os.environ.pop("HOLOMEM_FAULT_LOG", None)
    fs.install_tap(None)
    ap = parser()
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    faults = FAULTS if args.fault == "all" else tuple(args.fault.split(","))
    if set(faults) - set(FAULTS):
        ap.error(f"unknown fault kind in {args.fault!r}")
    keys = [False, True] if args.both else [args.encrypted]
    syncs = SYNC_MODES if args.sync == "both" else (args.sync,)
    hits = [int(h) for h in args.hits.split(",")] if args.hits else None
    t0 = time.monotonic()
    print(f"crashtest: seed {seed}", file=sys.stderr, flush=True)
    progress = Progress(0)
    refs = []
    for enc in keys:
        for sync in syncs:
            refs.append(reference_run(enc, sync))
            progress.reference(refs[-1])
    cases = [c for ref in refs for c in matrix(ref, faults=faults, seed=seed,
                                                points=args.point, hits=hits, soak=args.soak)]
    progress.total = len(cases)
    progress.note(f"crashtest: {len(cases)} runs, {args.jobs or default_jobs()} at a time")
    try:
        results = run_matrix(cases, refs, jobs=args.jobs, keep=args.keep,
                             progress=progress.case)
    finally:
        progress.close()
    seconds = time.monotonic() - t0
    never = [f"{ref.variant}: {p}" for ref in refs for p, n in ref.hits.items() if n == 0]
    if args.json:
        print(json.dumps({
            "seed": seed, "seconds": round(seconds, 3), "summary": summary(results),
            "matrix": {"points": len({c.point for c in cases}), "runs": len(cases),
                       "faults": list(faults), "variants": [r.variant for r in refs]},
            "hits": {r.variant: r.hits for r in refs}, "never_reached": never,
            "results": [r.as_json() for r in results]}, indent=2))
    else:
        print(table(results, refs, seed, seconds))
    ok = all(r.outcome == "pass" for r in results) and not never
    return 0 if ok else 1
