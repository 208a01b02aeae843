"""Durable transactions per second: holomem's journal beside the disk's own limit and SQLite.

    python benchmarks/journal_bench.py [--ops 2000] [--rounds 5] [--dir DIR]

In one run, interleaved round by round so that the machine's noise hits every
contender alike:

- ``raw``: ``os.write`` + ``os.fsync`` of the same bytes a frame takes, appended to a
  plain file: the floor the disk sets for one durable append;
- ``full``: ``Journal.append`` of one payload per transaction, sync="full";
- ``sqlite``: stdlib sqlite3, WAL, synchronous=FULL, one row (the same text) per
  transaction;
- ``batch8``: ``Journal.append`` from 8 threads, sync="batch" (group commit).

Reports the median over rounds of each rate and of the ratios computed within each
round. Prints its targets as met or missed; writes benchmarks/results/journal_bench.json
only with ``--save``.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sqlite3
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import add_save, check, emit, machine, median, percentile
from holomem.log import Journal
from holomem.log.format import FRAME_HEADER_SIZE


def _texts(n: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(5000)]
    return [" ".join(rng.choice(words) for _ in range(24)).encode() for _ in range(n)]


def bench_raw(d: str, texts: list[bytes]) -> tuple[float, list[float]]:
    path = os.path.join(d, "raw.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    frame_overhead = FRAME_HEADER_SIZE + 8  # header, payload count and length
    lat = []
    t0 = time.perf_counter()
    for t in texts:
        s = time.perf_counter()
        os.write(fd, bytes(frame_overhead) + t)
        os.fsync(fd)
        lat.append(time.perf_counter() - s)
    el = time.perf_counter() - t0
    os.close(fd)
    os.unlink(path)
    return len(texts) / el, lat


def bench_full(d: str, texts: list[bytes]) -> tuple[float, list[float]]:
    path = os.path.join(d, "full")
    lat = []
    with Journal.open(path, sync="full") as j:
        t0 = time.perf_counter()
        for t in texts:
            s = time.perf_counter()
            j.append([t])
            lat.append(time.perf_counter() - s)
        el = time.perf_counter() - t0
    shutil.rmtree(path)
    return len(texts) / el, lat


def bench_sqlite(d: str, texts: list[bytes]) -> tuple[float, list[float]]:
    path = os.path.join(d, "bench.sqlite")
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body BLOB)")
    lat = []
    t0 = time.perf_counter()
    for t in texts:
        s = time.perf_counter()
        con.execute("BEGIN")
        con.execute("INSERT INTO t (body) VALUES (?)", (t,))
        con.execute("COMMIT")
        lat.append(time.perf_counter() - s)
    el = time.perf_counter() - t0
    con.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    return len(texts) / el, lat


def bench_batch(d: str, texts: list[bytes], threads: int) -> float:
    path = os.path.join(d, "batch")
    with Journal.open(path, sync="batch") as j:
        per = len(texts) // threads
        barrier = threading.Barrier(threads + 1)

        def work(k: int) -> None:
            barrier.wait()
            for t in texts[k * per : (k + 1) * per]:
                j.append([t])

        ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        barrier.wait()
        t0 = time.perf_counter()
        for t in ts:
            t.join()
        el = time.perf_counter() - t0
        assert j.last_seq == per * threads
    shutil.rmtree(path)
    return per * threads / el


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=2000, help="transactions per contender per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default=None, help="directory on the disk to measure (default: tmp)")
    add_save(ap, "journal_bench")
    args = ap.parse_args()
    base = args.dir or tempfile.gettempdir()
    texts = _texts(args.ops)
    rounds: list[dict[str, float]] = []
    lat: dict[str, list[float]] = {"raw": [], "full": [], "sqlite": []}
    with tempfile.TemporaryDirectory(dir=base) as d:
        for _ in range(args.rounds):
            r: dict[str, float] = {}
            r["raw"], l1 = bench_raw(d, texts)
            r["full"], l2 = bench_full(d, texts)
            r["sqlite"], l3 = bench_sqlite(d, texts)
            r["batch8"] = bench_batch(d, texts * 4, 8)
            lat["raw"] += l1
            lat["full"] += l2
            lat["sqlite"] += l3
            rounds.append(r)
    keys = ["raw", "full", "sqlite", "batch8"]
    result = {
        "benchmark": "journal_bench",
        "machine": machine(base),
        "conditions": {
            "ops_per_round": args.ops, "rounds": args.rounds, "payload_bytes":
            round(sum(map(len, texts)) / len(texts)), "batch_threads": 8,
            "batch_ops_per_round": args.ops * 4, "fsync": "os.fsync", "dir": base,
        },
        "median_tx_per_s": {k: round(median([r[k] for r in rounds])) for k in keys},
        "median_latency_us": {k: round(median(v) * 1e6, 1) for k, v in lat.items()},
        "p99_latency_us": {k: round(percentile(v, 99) * 1e6, 1) for k, v in lat.items()},
        "median_ratios": {
            "full_over_raw": round(median([r["full"] / r["raw"] for r in rounds]), 3),
            "full_over_sqlite": round(median([r["full"] / r["sqlite"] for r in rounds]), 3),
            "batch8_over_full": round(median([r["batch8"] / r["full"] for r in rounds]), 2),
        },
        "rounds": rounds,
    }
    ratio = result["median_ratios"]
    result["targets"] = {"full_over_raw": check(ratio["full_over_raw"], ">=", 0.8),
                         "full_over_sqlite": check(ratio["full_over_sqlite"], ">=", 1.0),
                         "batch8_over_full": check(ratio["batch8_over_full"], ">=", 5)}
    emit("journal_bench", result, args.save)


if __name__ == "__main__":
    main()
