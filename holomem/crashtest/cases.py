"""Which cases run, and running them: the crash matrix and its pool.

Owns: the matrix (every registered crash point, times a few hit counts: 1, 2, 3, the
middle and the last time the uncrashed workload reaches it, or with ``soak`` every one;
times the fault kinds; for a plain or encrypted store in ``full`` or ``batch`` sync
mode), the seed of each case (drawn from a base seed, so that a failing run is replayed
with ``--point P --hits N --fault F --seed S``), and a pool that runs the cases in
parallel, each in a process of its own (:func:`case_pool`, which several matrices can
share). What a case is, and what running one does, is
:mod:`holomem.crashtest.run`, the one module of the harness this one imports.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import multiprocessing
import os
import random
from collections.abc import Callable, Iterator, Sequence

from holomem.crashtest.run import Case, Reference, Result, run_case

#: What a plain run tries (``recover`` runs a dozen children per case: ask for it).
DEFAULT_FAULTS = ("crash", "power")
SYNC_MODES = ("full", "batch")


def hit_counts(total: int, soak: bool = False) -> list[int]:
    """The hit counts tried for a point the workload reaches ``total`` times."""
    if soak:
        return list(range(1, total + 1))
    return sorted({n for n in (1, 2, 3, (total + 1) // 2, total) if 1 <= n <= total})


def case_seed(base: int, point: str, hit: int, fault: str, variant: str) -> int:
    return random.Random(f"{base}/{point}/{hit}/{fault}/{variant}").getrandbits(32)


def matrix(reference: Reference, *, faults: Sequence[str] = DEFAULT_FAULTS, seed: int = 0,
           points: Sequence[str] | None = None, hits: Sequence[int] | None = None,
           soak: bool = False) -> list[Case]:
    cases = []
    for point in sorted(points if points is not None else reference.hits):
        total = reference.hits.get(point, 0)
        for fault in faults:
            # A recover case crashes every recovery it causes: never every hit count.
            counts = (list(hits) if hits is not None
                      else hit_counts(total, soak and fault != "recover"))
            for n in counts:
                cases.append(Case(point, n, fault, reference.encrypted, reference.sync,
                                  case_seed(seed, point, n, fault, reference.variant)))
    return cases


def default_jobs() -> int:
    """Runs at a time: twice the CPUs, since a run spends much of its time in fsync."""
    env = os.environ.get("HOLOMEM_CRASH_JOBS", "")
    return int(env) if env.isdigit() and int(env) > 0 else 2 * (os.cpu_count() or 1)


@contextlib.contextmanager
def case_pool(jobs: int | None = None) -> Iterator[concurrent.futures.Executor]:
    """The processes that run cases, ``jobs`` at a time (default :func:`default_jobs`),
    for one or several :func:`run_matrix` calls: each process imports the harness and
    starts its fork server once, however many matrices it serves."""
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs or default_jobs(),
                                                mp_context=ctx) as pool:
        yield pool


def run_matrix(cases: Sequence[Case], references: Sequence[Reference], *,
               jobs: int | None = None, workdir: str | None = None, keep: str | None = None,
               progress: Callable[[Result], None] | None = None,
               pool: concurrent.futures.Executor | None = None) -> list[Result]:
    """Run every case, ``jobs`` at a time (each job: a child, then the checks), in
    ``pool`` (:func:`case_pool`; by default one of its own).

    ``references`` holds the uncrashed run of each variant the cases use.
    """
    by_variant = {r.variant: r.results for r in references}
    results: list[Result] = []
    with contextlib.ExitStack() as stack:
        if pool is None:
            pool = stack.enter_context(case_pool(jobs))
        futures = [pool.submit(run_case, c, by_variant[c.variant], workdir, keep)
                   for c in cases]
        for fut in concurrent.futures.as_completed(futures):
            r = fut.result()
            results.append(r)
            if progress is not None:
                progress(r)
    order = {c: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order[r.case])
    return results
