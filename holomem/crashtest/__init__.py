"""``python -m holomem.crashtest``: the crash-injection harness (docs/guarantees.md §6, issue 6).

A tool, like :mod:`holomem.fsck`: it imports anything. This package owns nothing itself;
it says how a run goes and gathers the names the harness's tests and callers use. Its
modules, in the order a run uses them:

- :mod:`~holomem.crashtest.workload`: the child's deterministic workload and the
  acknowledgement lines it writes;
- :mod:`~holomem.crashtest.child`: the child process, both sides of its command line;
- :mod:`~holomem.crashtest.forkserver`: where the children are forked from: a process
  that imported holomem once;
- :mod:`~holomem.crashtest.disk`: the power-loss model of the disk: what a power cut
  could leave, rebuilt from the operations log the child's file layer records
  (:mod:`holomem.log.tap`);
- :mod:`~holomem.crashtest.scan`: finding bytes in a store's files, through compression
  and encryption;
- :mod:`~holomem.crashtest.checks`: what is verified after every crash;
- :mod:`~holomem.crashtest.run`: one run: crash, apply the fault kind, check;
- :mod:`~holomem.crashtest.cases`: the matrix of cases and the pool that runs them;
- :mod:`~holomem.crashtest.cli`: the command line, its table and ``--json``.

How a run goes:

1. A child process (``python -m holomem.crashtest --child ...``) runs a fixed,
   deterministic workload over the memory API, writing a ``begin`` line before each
   step and an ``ack`` line once it returns, so the parent knows exactly which steps
   were acknowledged and which one was running.
2. The child runs with ``HOLOMEM_CRASH_AT=point:N`` and aborts the N-th time it reaches
   ``point`` (:mod:`holomem.log.crashpoints`); the parent checks that it died there.
3. The fault kind decides what is checked: the directory as the crash left it
   (``crash``), what a power cut could have left of it (``power``: the child records
   every file operation through the file layer's tap), each crash of its
   recovery (``recover``), or what a power cut leaves after a second process has
   acknowledged more writes (``restart``).
4. The store is reopened with no manual repair, and every acknowledged write, link and
   removal is checked, along with fsck, purges and the absence of plaintext.

The matrix is every registered crash point, times a few hit counts, times the fault
kinds, for a plain or encrypted store in ``full`` or ``batch`` sync mode. Power cuts are
seeded from ``--seed`` (printed); a failing run is replayed with
``--point P --hits N --fault F --seed S``.
"""

from __future__ import annotations

from holomem.crashtest.cases import (
    DEFAULT_FAULTS,
    SYNC_MODES,
    case_pool,
    case_seed,
    default_jobs,
    hit_counts,
    matrix,
    run_matrix,
)
from holomem.crashtest.checks import CHECK_MS, Verdict, marker_needle, partial_batches, verify
from holomem.crashtest.child import CHILD_TIMEOUT, STORE_IN_RUN, spawn, store_path
from holomem.crashtest.cli import Progress, main, parser, summary, table
from holomem.crashtest.disk import FAULT_LOG, Disk, ModelError, power_loss, read_tree
from holomem.crashtest.run import (
    FAULTS,
    KEY,
    Case,
    Reference,
    Result,
    reference_run,
    run_case,
    variant_name,
)
from holomem.crashtest.scan import scan_files
from holomem.crashtest.workload import (
    BASE_MS,
    CONFIG,
    MARKERS,
    RESUMED,
    SEGMENT_SIZE,
    STEP_MS,
    plan,
    read_acks,
    read_resumed_acks,
    resume_workload,
    run_workload,
)

__all__ = [
    "BASE_MS", "CHECK_MS", "CHILD_TIMEOUT", "CONFIG", "DEFAULT_FAULTS", "FAULTS",
    "FAULT_LOG", "KEY", "MARKERS", "RESUMED", "SEGMENT_SIZE", "STEP_MS", "STORE_IN_RUN",
    "SYNC_MODES",
    "Case", "Disk", "ModelError", "Progress", "Reference", "Result", "Verdict",
    "case_pool", "case_seed", "default_jobs", "hit_counts", "main", "marker_needle", "matrix",
    "parser", "partial_batches", "plan", "power_loss", "read_acks", "read_resumed_acks",
    "read_tree", "reference_run", "resume_workload", "run_case", "run_matrix",
    "run_workload", "scan_files", "spawn", "store_path", "summary", "table",
    "variant_name", "verify",
]
