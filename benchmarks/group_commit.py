"""Group commit through ``Memory.remember``, and the bound the CPU sets on it.

    python benchmarks/group_commit.py [--ops 2000] [--rounds 3] [--dir DIR] [--save]

Issue 33 asks for 8 threads remembering on a ``sync="batch"`` store to reach at least
5x one thread on a ``sync="full"`` store. Round by round, interleaved (so that every
ratio compares measurements a few seconds apart on a disk whose fsync latency moves),
each contender remembers ``--ops`` short facts on a new store:

- ``full1``: one thread, ``sync="full"`` (every remember fsyncs before it returns);
- ``batch8``: 8 threads, ``sync="batch"`` (concurrent remembers share fsyncs);
- ``none1`` and ``none8``: the same on ``sync="none"``: no fsync at all, so what is
  left is the CPU a remember costs (validation, planning, encoding, the projections'
  apply) and, at 8 threads, what they pay to take turns with the interpreter's lock.

``none8`` is the most ``batch8`` can reach however well the fsyncs are shared: its ratio
to ``full1`` is the bound reported beside the target, and ``none1``'s is what a
memory layer that hands all eight writers' work to one thread could reach. Also
reported: CPU microseconds per remember (all threads, ``time.process_time``) and
transactions per fsync (the store's own counters, ``Store.counters()``), checked once
under ``strace -f -c`` (when strace is installed) in a child process: ``batch8`` must
make at least one and at most one fsync or fdatasync per transaction.

Prints its target as met or missed; writes benchmarks/results/group_commit.json only with
``--save``. ``--contender NAME`` runs one contender once (the strace child).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import add_save, check, emit, machine, median, strace_counts
from holomem import Memory, Store

CONTENDERS = {"full1": ("full", 1), "batch8": ("batch", 8), "none1": ("none", 1),
              "none8": ("none", 8)}


def run(name: str, root: str, ops: int) -> dict[str, float]:
    """One contender on a new store: rate, CPU per remember, transactions per fsync."""
    sync, threads = CONTENDERS[name]
    path = tempfile.mkdtemp(dir=root)
    store = Store.open(os.path.join(path, "store"), sync=sync)
    memory = Memory(store)
    per = ops // threads
    barrier = threading.Barrier(threads + 1)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(per):
            memory.remember(text=f"writer {k} notes fact {i} about the group commit")

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    before = store.counters()
    cpu0 = time.process_time()
    barrier.wait()
    t0 = time.perf_counter()
    for t in workers:
        t.join()
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    after = store.counters()
    store.close()
    shutil.rmtree(path)
    done = per * threads
    fsyncs = after.fsyncs - before.fsyncs
    return {"per_s": done / elapsed, "cpu_us": cpu / done * 1e6,
            "tx_per_fsync": done / fsyncs if fsyncs else float("inf")}


def strace_check(root: str, ops: int) -> dict[str, Any]:
    """``batch8`` in a child under ``strace -f -c``: syncs per transaction."""
    strace = shutil.which("strace")
    if strace is None:
        return {"how": "none (no strace)", "status": "unchecked"}
    out = os.path.join(root, "strace-batch8.txt")
    subprocess.run([strace, "-f", "-c", "-o", out, sys.executable, os.path.abspath(__file__),
                    "--contender", "batch8", "--ops", str(ops), "--dir", root],
                   check=True, capture_output=True)
    with open(out, encoding="utf-8") as f:
        counts = strace_counts(f.read())
    syncs = counts.get("fsync", 0) + counts.get("fdatasync", 0)
    ok = 1 <= syncs <= ops + 16  # the open and close sync a few files too
    return {"how": "strace -f -c", "transactions": ops, "syncs": syncs,
            "tx_per_sync": round(ops / syncs, 2) if syncs else None,
            "status": "ok" if ok else "failed"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the stores go (default: a temp dir)")
    ap.add_argument("--contender", choices=sorted(CONTENDERS), help=argparse.SUPPRESS)
    add_save(ap, "group_commit")
    args = ap.parse_args()
    if args.contender:
        print(run(args.contender, args.dir or tempfile.gettempdir(), args.ops))
        return
    root = tempfile.mkdtemp(prefix="holomem-gc-", dir=args.dir)
    try:
        info = machine(root)
        rounds: list[dict[str, dict[str, float]]] = []
        for r in range(args.rounds):
            order = list(CONTENDERS)
            order = order[r % len(order):] + order[:r % len(order)]  # each goes first once
            rounds.append({name: run(name, root, args.ops) for name in order})
        syscalls = strace_check(root, args.ops)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def med(name: str, key: str) -> float:
        return round(median([x[name][key] for x in rounds]), 2)

    def ratio(top: str) -> float:
        return round(median([x[top]["per_s"] / x["full1"]["per_s"] for x in rounds]), 2)

    batch = ratio("batch8")
    result: dict[str, Any] = {
        "benchmark": "group_commit",
        "machine": info,
        "conditions": {"ops": args.ops, "rounds": args.rounds, "threads": 8,
                       "facts": "one short text each, no embedder"},
        "median_per_s": {n: round(med(n, "per_s")) for n in CONTENDERS},
        "median_cpu_us_per_remember": {n: med(n, "cpu_us") for n in CONTENDERS},
        "median_tx_per_fsync": {n: med(n, "tx_per_fsync") for n in ("full1", "batch8")},
        "median_ratios_to_full1": {n: ratio(n) for n in ("batch8", "none8", "none1")},
        "bound": {
            "none8_over_full1": ratio("none8"),
            "why": "8 threads with no fsync at all: the CPU per remember, and the turns "
                   "the threads take with the interpreter's lock, cap batch8 there",
        },
        "syscall_check": syscalls,
        "rounds": rounds,
        "targets": {"batch8_over_full1": check(
            batch if syscalls["status"] != "failed" else None, ">=", 5.0)},
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    emit("group_commit", result, args.save)


if __name__ == "__main__":
    main()
