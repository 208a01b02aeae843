"""Durable transactions per second: holomem's journal beside the disk's own limit and SQLite.

    python benchmarks/journal_bench.py [--ops 2000] [--rounds 5] [--threads 1,2,4,8,16]
                                       [--dir DIR] [--no-syscall-check] [--save]

Contenders:

- ``raw``: ``os.write`` + ``os.fsync`` of the same bytes a frame takes, appended to a
  plain file: the floor the disk sets for one durable append;
- ``full``: ``Journal.append`` of one payload per transaction, sync="full";
- ``sqlite``: stdlib sqlite3, WAL, synchronous=FULL, one row (the same text) per
  transaction;
- ``batch<T>``: ``Journal.append`` from T threads, sync="batch" (group commit), for
  each T of ``--threads``.

The disk is shared (several engineers, one virtual disk): its fsync latency moves by
more than ten times within a minute. Contenders measured one after another in windows
of a second see different disks, and a ratio of such rates can be anything -- an
earlier version once printed ``full_over_raw 9.6``. So every ratio here is taken
between measurements close in time: ``raw``, ``full`` and ``sqlite`` run interleaved in
blocks of ``--block`` transactions (the order turning each block), and each
``batch<T>`` run is framed by a ``full`` run just before and just after it, its ratio
taken against their mean. Medians over rounds are reported, of the rates and of the
ratios computed within each round.

Two checks make a figure trustworthy before it is printed as a win:

- the syscalls of each contender, counted once in a child process under
  ``strace -f -c`` (or, without strace, holomem's own fault log ``HOLOMEM_FAULT_LOG``
  for the journal's contenders): ``raw``, ``full`` and ``sqlite`` must fsync (or
  fdatasync) at least once per transaction, ``batch<T>`` at least once and at most
  once per transaction; the transactions per fsync are reported;
- plausibility: ``full`` does all that ``raw`` does and more, so ``full`` above 1.25x
  ``raw`` is impossible; T threads share one sync among at most T transactions and
  one sync runs at a time, so ``batch<T>`` can pass T x ``full`` only by the CPU time
  ``full`` spends beside each fsync, and above 2T x ``full`` it is impossible for the
  disk -- it happens when the machine, not the disk, sets the pace: with more
  runnable processes than CPUs, a single thread waits for a CPU after every fsync
  (milliseconds at a load average of 20 on 2 cores) while T threads hold T places in
  the run queue. A target whose measure failed either check is reported ``suspect``
  (with the reason and the load average), never ``met``.

After the rounds, ``cycle_profile`` shows where the time goes: one more run of ``full``
and of each ``batch<T>`` with ``os.fsync`` timed (outside the rates and ratios above):
transactions per fsync, the median fsync, and the median time from one fsync's end to
the next one's start -- for ``batch<T>``, the appenders of the last group coming back
and the next group being written, while the disk waits. With 8 among ``--threads`` it
also runs ``batch8_2_per_wait``, the prototype of the next step: the same 8 threads each
enqueue two transactions (``Journal.enqueue``) before waiting for the second, so a
group costs half as many hand-overs per transaction; its ``over_full`` is against the
profile's own ``full`` run. It is not a contender (one wait acknowledges two
transactions), only the measure of what fewer wake-ups per transaction would give.

Prints its targets as met, missed or suspect; writes benchmarks/results/journal_bench.json
only with ``--save``. ``--contender NAME`` runs one contender once and prints its rate
(the syscall check's child).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import (
    add_save,
    check,
    emit,
    machine,
    median,
    percentile,
    strace_counts,
)
from holomem.log import Journal
from holomem.log.format import FRAME_HEADER_SIZE

#: Transactions of each contender in the syscall check's child.
CHECK_OPS = 200
#: ``full`` faster than this times ``raw`` (in one round) cannot be true.
FULL_OVER_RAW_MAX = 1.25
SYNC_CALLS = ("fsync", "fdatasync")
WRITE_CALLS = ("write", "pwrite64", "pwritev", "pwritev2", "writev")


def _texts(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    return [" ".join(rng.choice(words) for _ in range(24)).encode() for _ in range(n)]


class Raw:
    """write + fsync of a frame's bytes, appended to a plain file."""

    name = "raw"

    def __init__(self, d: str) -> None:
        self.path = os.path.join(d, "raw.bin")
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.pad = bytes(FRAME_HEADER_SIZE + 8)  # header, payload count and length

    def op(self, t: bytes) -> None:
        os.write(self.fd, self.pad + t)
        os.fsync(self.fd)

    def close(self) -> None:
        os.close(self.fd)
        os.unlink(self.path)


class Full:
    """Journal.append, sync="full"."""

    name = "full"

    def __init__(self, d: str) -> None:
        self.path = os.path.join(d, "full")
        self.j = Journal.open(self.path, sync="full")

    def op(self, t: bytes) -> None:
        self.j.append([t])

    def close(self) -> None:
        self.j.close()
        shutil.rmtree(self.path)


class Sqlite:
    """One row per transaction, WAL, synchronous=FULL."""

    name = "sqlite"

    def __init__(self, d: str) -> None:
        self.path = os.path.join(d, "bench.sqlite")
        self.con = sqlite3.connect(self.path, isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=FULL")
        self.con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")

    def op(self, t: bytes) -> None:
        self.con.execute("BEGIN")
        self.con.execute("INSERT INTO t (body) VALUES (?)", (t,))
        self.con.execute("COMMIT")

    def close(self) -> None:
        self.con.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.unlink(self.path + suffix)


SINGLE = {c.name: c for c in (Raw, Full, Sqlite)}


def interleaved(d: str, texts: list[bytes], block: int, turn: int
                ) -> tuple[dict[str, float], dict[str, list[float]]]:
    """raw, full and sqlite over ``texts``, in blocks of ``block`` transactions each
    in turn (the order rotating by one each block); their rates and latencies."""
    items = [c(d) for c in SINGLE.values()]
    spent = {c.name: 0.0 for c in items}
    lat: dict[str, list[float]] = {c.name: [] for c in items}
    try:
        for b, i in enumerate(range(0, len(texts), block)):
            chunk = texts[i:i + block]
            k = (b + turn) % len(items)
            for c in items[k:] + items[:k]:
                ls = lat[c.name]
                t0 = time.perf_counter()
                for t in chunk:
                    s = time.perf_counter()
                    c.op(t)
                    ls.append(time.perf_counter() - s)
                spent[c.name] += time.perf_counter() - t0
    finally:
        for c in items:
            c.close()
    return {n: len(texts) / s for n, s in spent.items()}, lat


def run_full(d: str, texts: list[bytes]) -> tuple[float, float]:
    """``full`` over ``texts``: (transactions/s, process CPU microseconds per transaction)."""
    c = Full(d)
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            c.op(t)
        return (len(texts) / (time.perf_counter() - t0),
                (time.process_time() - c0) / len(texts) * 1e6)
    finally:
        c.close()


def run_batch(d: str, texts: list[bytes], threads: int) -> tuple[float, float]:
    """``threads`` threads appending ``texts`` between them, batch mode: (transactions/s,
    process CPU microseconds per transaction, every thread's and the kernel's)."""
    return timed_batch(d, texts, threads)[:2]


def timed_batch(d: str, texts: list[bytes], threads: int, per_wait: int = 1
                ) -> tuple[float, float, float, float]:
    """:func:`run_batch`, and the ``perf_counter`` times its appends began and ended.
    With ``per_wait`` > 1 each thread enqueues that many transactions, then waits for
    the last of them (one wake-up per ``per_wait`` transactions instead of one each)."""
    path = os.path.join(d, "batch")
    per = len(texts) // threads // per_wait * per_wait
    with Journal.open(path, sync="batch") as j:
        barrier = threading.Barrier(threads + 1)

        def work(k: int) -> None:
            barrier.wait()
            mine = texts[k * per:(k + 1) * per]
            if per_wait == 1:
                for t in mine:
                    j.append([t])
                return
            for i in range(0, per, per_wait):
                for t in mine[i:i + per_wait - 1]:
                    j.enqueue([t])
                j.wait(j.enqueue([mine[i + per_wait - 1]]))

        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        barrier.wait()
        t0, c0 = time.perf_counter(), time.process_time()
        for t in ts:
            t.join()
        t1 = time.perf_counter()
        el, cpu = t1 - t0, time.process_time() - c0
        assert j.last_seq == per * threads
    shutil.rmtree(path)
    return per * threads / el, cpu / (per * threads) * 1e6, t0, t1


class SyncSpans:
    """``os.fsync`` timed while in use (the cycle profile's runs only, never the rates):
    the ``perf_counter`` start and end of each call."""

    def __init__(self) -> None:
        self.spans: list[tuple[float, float]] = []
        self._real = os.fsync

    def __enter__(self) -> SyncSpans:
        real, spans, clock = self._real, self.spans, time.perf_counter

        def fsync(fd: int) -> None:
            t0 = clock()
            real(fd)
            spans.append((t0, clock()))

        os.fsync = fsync
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real

    def between(self, t0: float, t1: float) -> dict[str, float]:
        """The syncs that began in [t0, t1]: how many, and the median time each took
        and the median time from one's end to the next one's start (microseconds)."""
        inside = [sp for sp in self.spans if t0 <= sp[0] <= t1]
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(inside)]
        return {"fsyncs": len(inside),
                "fsync_us": round(median([b - a for a, b in inside]) * 1e6, 1),
                "between_fsyncs_us": round(median(gaps) * 1e6, 1) if gaps else 0.0}


def cycle_profile(d: str, ops: int, threads: list[int]) -> dict[str, Any]:
    """Where a durable transaction's time goes, from one more run of ``full`` and of
    each ``batch<T>`` with ``os.fsync`` timed: a batch run's rate is about
    ``tx_per_fsync / (fsync_us + between_fsyncs_us)``, ``between`` being the time the
    disk waits while the appenders of the last group come back and the next group is
    written; for ``full``, ``between`` is a transaction's time outside its fsync."""
    out: dict[str, Any] = {}
    texts = _texts(ops, seed=99)
    c = Full(d)
    try:
        with SyncSpans() as spans:
            t0 = time.perf_counter()
            for t in texts:
                c.op(t)
            t1 = time.perf_counter()
    finally:
        c.close()
    out["full"] = {**spans.between(t0, t1), "tx_per_s": round(len(texts) / (t1 - t0))}
    for t in threads:
        n = batch_ops(ops, t)
        with SyncSpans() as spans:
            rate, cpu, t0, t1 = timed_batch(d, _texts(n, seed=98), t)
        got = spans.between(t0, t1)
        out[f"batch{t}"] = {"tx_per_fsync": round(n / max(1, got["fsyncs"]), 2), **got,
                            "cpu_us_per_tx": round(cpu, 1), "tx_per_s": round(rate)}
    if 8 in threads:
        # The next step's prototype: the same 8 threads, each enqueuing two transactions
        # before it waits, so a group's hand-overs are half as many per transaction
        # (what bounds batch8 above). Not a contender: one wait now stands for two
        # acknowledgements.
        n = batch_ops(ops, 8)
        with SyncSpans() as spans:
            rate, cpu, t0, t1 = timed_batch(d, _texts(n, seed=97), 8, per_wait=2)
        got = spans.between(t0, t1)
        out["batch8_2_per_wait"] = {
            "tx_per_fsync": round(n / max(1, got["fsyncs"]), 2), **got,
            "cpu_us_per_tx": round(cpu, 1), "tx_per_s": round(rate),
            "over_full": round(rate / out["full"]["tx_per_s"], 2)}
    return out


def framed_batch(d: str, texts: list[bytes], threads: int, ref_ops: int
                 ) -> dict[str, float]:
    """``batch<threads>`` framed by a ``full`` run before and after: its rate, the rate
    over full's, and the CPU microseconds per transaction of both."""
    before, cpu_before = run_full(d, texts[:ref_ops])
    rate, cpu = run_batch(d, texts, threads)
    after, cpu_after = run_full(d, texts[:ref_ops])
    b = f"batch{threads}"
    return {b: rate, f"{b}_over_full": rate / ((before + after) / 2), f"{b}_cpu_us": cpu,
            f"{b}_full_cpu_us": (cpu_before + cpu_after) / 2}


def batch_ops(ops: int, threads: int) -> int:
    """Transactions for a batch run: enough groups to reach a steady state."""
    return max(ops, 250 * threads) // threads * threads


# -- the syscall check ---------------------------------------------------------------

def run_contender(name: str, ops: int, d: str) -> float:
    """One contender, once (the syscall check's child): its rate."""
    texts = _texts(ops)
    m = re.fullmatch(r"batch(\d+)", name)
    if m:
        return run_batch(d, texts, int(m.group(1)))[0]
    c = SINGLE[name](d)
    try:
        t0 = time.perf_counter()
        for t in texts:
            c.op(t)
        return ops / (time.perf_counter() - t0)
    finally:
        c.close()


def _fault_log_counts(path: str) -> dict[str, int]:
    from holomem.log.tap import parse

    counts: dict[str, int] = {}
    with open(path, "rb") as f:
        for r in parse(f.read()):
            counts[r.kind] = counts.get(r.kind, 0) + 1
    return {"fsync": counts.get("sync", 0) + counts.get("dirsync", 0),
            "write": counts.get("write", 0)}


def syscall_check(name: str, d: str, ops: int = CHECK_OPS) -> dict[str, Any]:
    """Run contender ``name`` once in a child and count its syncs and writes."""
    child = [sys.executable, os.path.abspath(__file__), "--contender", name, "--ops", str(ops),
             "--dir", d]
    env = dict(os.environ)
    strace = shutil.which("strace")
    if strace:
        out = os.path.join(d, f"strace-{name}.txt")
        cmd = [strace, "-f", "-c", "-o", out,
               "-e", "trace=" + ",".join(SYNC_CALLS + WRITE_CALLS), *child]
        how = "strace -f -c"
    elif name == "full" or name.startswith("batch"):
        out = os.path.join(d, f"faultlog-{name}.txt")
        env["HOLOMEM_FAULT_LOG"] = out
        cmd = child
        how = "HOLOMEM_FAULT_LOG"
    else:
        return {"how": "none (no strace)", "status": "unchecked"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if proc.returncode != 0:
        return {"how": how, "status": "failed", "why": proc.stderr.strip()[-300:]}
    if strace:
        with open(out, encoding="utf-8") as f:
            counts = strace_counts(f.read())
    else:
        counts = _fault_log_counts(out)
    os.unlink(out)
    syncs = sum(counts.get(c, 0) for c in SYNC_CALLS)
    writes = sum(counts.get(c, 0) for c in WRITE_CALLS)
    batch = name.startswith("batch")
    ok = 1 <= syncs <= ops + 16 if batch else syncs >= ops
    result: dict[str, Any] = {
        "how": how, "transactions": ops, "syncs": syncs, "writes": writes,
        "transactions_per_sync": round(ops / syncs, 2) if syncs else None,
        "status": "checked" if ok else "failed",
    }
    if not ok:
        result["why"] = (f"{syncs} syncs for {ops} transactions"
                         + ("" if batch else ": fewer than one per transaction"))
    return result


def plausible(target: dict[str, Any], value: float, bound: float, why: str,
              checks: list[dict[str, Any]]) -> dict[str, Any]:
    """``target`` unless its measure is impossible (above ``bound``) or a contender it
    rests on failed its syscall check: then status "suspect", with the reason."""
    reasons = []
    if value > bound:
        load = os.getloadavg()[0]
        reasons.append(f"{value} > {bound}: {why} (load average {load:.1f} on "
                       f"{os.cpu_count()} cpus)")
    reasons += [f"{c['contender']}'s syscall check {c['status']}: {c.get('why', '')}"
                for c in checks if c["status"] == "failed"]
    if reasons:
        return {**target, "status": "suspect", "why": "; ".join(reasons)}
    return target


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000, help="transactions per contender per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--block", type=int, default=100,
                    help="transactions per contender before the next one's turn")
    ap.add_argument("--threads", default="1,2,4,8,16", help="thread counts for batch mode")
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: tmp)")
    ap.add_argument("--no-syscall-check", action="store_true")
    ap.add_argument("--contender", default=None, help=argparse.SUPPRESS)
    add_save(ap, "journal_bench")
    args = ap.parse_args()
    base = args.dir or tempfile.gettempdir()
    if args.contender:
        print(json.dumps({args.contender: run_contender(args.contender, args.ops, base)}))
        return
    threads = [int(x) for x in args.threads.split(",")]
    ref_ops = max(100, args.ops // 4)
    rounds: list[dict[str, float]] = []
    lat: dict[str, list[float]] = {n: [] for n in SINGLE}
    checks: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=base) as d:
        if not args.no_syscall_check:
            for name in [*SINGLE, *(f"batch{t}" for t in threads)]:
                checks.append({"contender": name, **syscall_check(name, d)})
        for r in range(args.rounds):
            texts = _texts(args.ops, seed=7 + r)
            rates, ls = interleaved(d, texts, args.block, r)
            row: dict[str, float] = dict(rates)
            for n, v in ls.items():
                lat[n] += v
            for t in threads:
                btexts = _texts(batch_ops(args.ops, t), seed=100 + r)
                row.update(framed_batch(d, btexts, t, ref_ops))
            rounds.append(row)
        profile = cycle_profile(d, args.ops, threads)
    ratio_full_raw = round(median([r["full"] / r["raw"] for r in rounds]), 3)
    ratio_full_sqlite = round(median([r["full"] / r["sqlite"] for r in rounds]), 3)
    batch_ratio = {t: round(median([r[f"batch{t}_over_full"] for r in rounds]), 2)
                   for t in threads}
    result: dict[str, Any] = {
        "benchmark": "journal_bench",
        "machine": machine(base),
        "conditions": {
            "ops_per_round": args.ops, "rounds": args.rounds, "block": args.block,
            "payload_bytes": 138, "batch_threads": threads,
            "batch_ops_per_round": {t: batch_ops(args.ops, t) for t in threads},
            "batch_reference": f"full, {ref_ops} transactions just before and after",
            "fsync": "os.fsync", "dir": base,
        },
        "syscall_checks": checks,
        "median_tx_per_s": {k: round(median([r[k] for r in rounds]))
                            for k in [*SINGLE, *(f"batch{t}" for t in threads)]},
        "median_cpu_us_per_tx": {
            **{f"batch{t}": round(median([r[f"batch{t}_cpu_us"] for r in rounds]), 1)
               for t in threads},
            "full (beside the batch runs)": round(median(
                [r[f"batch{t}_full_cpu_us"] for r in rounds for t in threads]), 1)},
        "median_latency_us": {k: round(median(v) * 1e6, 1) for k, v in lat.items()},
        "p99_latency_us": {k: round(percentile(v, 99) * 1e6, 1) for k, v in lat.items()},
        "median_ratios": {
            "full_over_raw": ratio_full_raw,
            "full_over_sqlite": ratio_full_sqlite,
            **{f"batch{t}_over_full": v for t, v in batch_ratio.items()},
        },
        "cycle_profile": profile,
        "rounds": rounds,
    }
    by = {c["contender"]: c for c in checks}

    def rest_on(*names: str) -> list[dict[str, Any]]:
        return [by[n] for n in names if n in by]

    targets = {
        "full_over_raw": plausible(
            check(ratio_full_raw, ">=", 0.8), ratio_full_raw, FULL_OVER_RAW_MAX,
            "the journal makes the same write and fsync as raw, and more",
            rest_on("raw", "full")),
        "full_over_sqlite": plausible(
            check(ratio_full_sqlite, ">=", 1.0), ratio_full_sqlite, float("inf"), "",
            rest_on("full", "sqlite")),
    }
    if 8 in batch_ratio:
        targets["batch8_over_full"] = plausible(
            check(batch_ratio[8], ">=", 5), batch_ratio[8], 16,
            "8 threads share a sync among at most 8 transactions, one sync at a time",
            rest_on("full", "batch8"))
    result["targets"] = targets
    result["plausibility"] = {
        f"batch{t}_over_full": "ok" if v <= 2 * t else f"impossible ({v} > {2 * t})"
        for t, v in batch_ratio.items()}
    emit("journal_bench", result, args.save)


if __name__ == "__main__":
    main()
