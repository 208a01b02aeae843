"""The child process: the command line the parent starts it with, and what it runs.

Owns: both sides of ``python -m holomem.crashtest --child ...``: the parent starts a
child (:func:`spawn`, with an environment of its own: ``HOLOMEM_CRASH_AT``,
``HOLOMEM_CRASH_TRACE``, and for a power-loss run ``HOLOMEM_FAULT_LOG``, which makes the
child's file layer record every operation in the run's operations log), and the child
parses that command line and runs the workload, the recovery alone (``--recover``) or
the writes after a restart (``--resume``) (:func:`main`). Imports the workload, the
disk model's log name and the fork server that starts the children.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import subprocess
import sys
from collections.abc import Sequence

import holomem
from holomem import Store
from holomem.crashtest import forkserver
from holomem.crashtest.disk import FAULT_LOG
from holomem.crashtest.workload import SEGMENT_SIZE, resume_workload, run_workload

CHILD_TIMEOUT = 120.0
#: Where a run's store lives, under its run directory: in directories that do not exist
#: yet, so that creating the store creates them too, and a power cut may take any of
#: their entries away unless they were synced (issue 11).
STORE_IN_RUN = os.path.join("home", "tenant", "store")


def store_path(run_dir: str) -> str:
    """The store of the run in ``run_dir``."""
    return os.path.join(run_dir, STORE_IN_RUN)


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    """The parent's environment without its ``HOLOMEM_`` variables, with this checkout
    on ``PYTHONPATH``, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOMEM_")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(holomem.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def spawn(run_dir: str, key: bytes | None, sync: str, env: dict[str, str], record: bool,
          recover: bool = False, create: bool = False, resume: bool = False
          ) -> subprocess.CompletedProcess[str]:
    """Run a child on the store in ``run_dir`` and wait for it to end (or abort); with
    ``record``, its file operations are appended to the run's operations log. The child
    is forked from this process's fork server (:mod:`holomem.crashtest.forkserver`), or
    is a fresh interpreter with ``HOLOMEM_CRASH_FRESH=1``; either way it is
    ``python -m holomem.crashtest --child ...`` in ``run_dir`` with ``env``."""
    if record:
        env = {**env, "HOLOMEM_FAULT_LOG": os.path.join(run_dir, FAULT_LOG)}
    acks = "acks-resumed.jsonl" if resume else "acks.jsonl"
    args = ["--child", store_path(run_dir), os.path.join(run_dir, acks), "--sync", sync]
    if recover:
        args.append("--recover")
    if resume:
        args.append("--resume")
    if create:
        args.append("--create")
    if key is not None:
        args += ["--key-hex", key.hex()]
    return forkserver.run("holomem.crashtest", args, env=_child_env(env), cwd=run_dir,
                          timeout=CHILD_TIMEOUT, server_env=_child_env({}))


def main(argv: Sequence[str]) -> int:
    """The child's entry: parse ``argv`` (as :func:`spawn` builds it) and run."""
    ap = argparse.ArgumentParser(prog="python -m holomem.crashtest --child")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("store")
    ap.add_argument("acks")
    ap.add_argument("--key-hex", default="")
    ap.add_argument("--sync", default="full")
    ap.add_argument("--recover", action="store_true",
                    help="only open the store (its recovery) and close it")
    ap.add_argument("--resume", action="store_true",
                    help="open the store, remember a few facts, abort (see RESUMED)")
    ap.add_argument("--create", action="store_true",
                    help="with --recover or --resume: the creation of the store was not "
                    "acknowledged")
    args = ap.parse_args(argv)
    # os.abort() must not write a core file per run.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    key = bytes.fromhex(args.key_hex) or None
    if args.recover:
        Store.open(args.store, key=key, segment_size=SEGMENT_SIZE, sync=args.sync,
                   create=args.create).close()
        return 0
    if args.resume:
        resume_workload(args.store, args.acks, key, args.sync, args.create)
    run_workload(args.store, args.acks, key, args.sync)
    return 0
