"""Bulk ingest and open: holomem beside SQLite FTS5 building the same index, in one run.

    python benchmarks/ingest_bench.py [--sizes 100000] [--rounds 3] [--profile KIND]

Texts: the 24-word Zipf documents of ``search_bench.py`` (the same seed), the same
texts for every contender. Each measurement runs in its own process:

- ``fts5``: SQLite FTS5 into a file in WAL mode, ``synchronous=OFF`` (holomem's
  ``sync="none"`` writes no fsync either), ``executemany`` of 10,000 rows then a
  commit, until every text is in;
- ``plain``: ``Memory.remember_many`` in batches of 10,000 facts (the most one call
  takes) on a store opened with ``sync="none"``, no subjects;
- ``subjects``: the same, with one fact in ten carrying a subject (about ten facts
  per subject) under ``latest-by-subject``, so supersession links are planned;
- ``open``: a fresh process opens the ``plain`` store (replay of the whole journal:
  both stores are written with checkpoints off) and reports the seconds
  ``Store.open`` took.

Ratios are taken within the run: facts/s over FTS5's rows/s (target >= 0.5, with
and without subjects), and holomem's open over FTS5's build (target <= 2). Rounds
run the four measurements interleaved; each figure is the median over rounds, wall
seconds beside CPU seconds (``time.process_time``) since the machine is shared, and
the ratios are given both ways (the targets read the wall ratios).
``--profile plain|subjects|open`` prints a cProfile table of that measurement
instead. Prints JSON and a line per target; writes benchmarks/results/ingest_bench.json
only with ``--save``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import add_save, check, emit, machine, median  # noqa: E402
from benchmarks.search_bench import corpus  # noqa: E402

BATCH = 10_000


def _inputs(n: int, subjects: bool) -> list[dict[str, Any]]:
    texts = corpus(n)
    out: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        fact: dict[str, Any] = {"text": text}
        if subjects and i % 10 == 0:
            fact["subject"] = f"s{(i // 10) % max(1, n // 100)}"
        out.append(fact)
    return out


def worker_fts5(n: int, workdir: str) -> dict[str, Any]:
    import sqlite3

    texts = corpus(n)
    con = sqlite3.connect(os.path.join(workdir, "fts5.db"))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body)")
    t, c = time.perf_counter(), time.process_time()
    for i in range(0, n, BATCH):
        con.executemany("INSERT INTO t VALUES (?, ?)",
                        ((str(j), texts[j]) for j in range(i, min(n, i + BATCH))))
        con.commit()
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    con.close()
    return {"seconds": round(seconds, 3), "cpu": round(cpu, 3), "per_s": round(n / seconds)}


def _ingest(n: int, workdir: str, subjects: bool) -> dict[str, Any]:
    from holomem import Memory, MemoryConfig, Store

    inputs = _inputs(n, subjects)
    path = os.path.join(workdir, "subjects" if subjects else "plain")
    config = MemoryConfig(supersession="latest-by-subject") if subjects else None
    # No checkpoint, written in the background or at close: the open measures replay.
    with Store.open(path, sync="none", checkpoint_every=None,
                    checkpoint_close_min=2**62) as store:
        memory = Memory(store, config)
        t, c = time.perf_counter(), time.process_time()
        for i in range(0, n, BATCH):
            memory.remember_many(inputs[i : i + BATCH])
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
        links = store.read(lambda view: view.facts.links)
    return {"seconds": round(seconds, 3), "cpu": round(cpu, 3), "per_s": round(n / seconds),
            "links": links}


def worker_plain(n: int, workdir: str) -> dict[str, Any]:
    return _ingest(n, workdir, False)


def worker_subjects(n: int, workdir: str) -> dict[str, Any]:
    return _ingest(n, workdir, True)


def worker_open(n: int, workdir: str) -> dict[str, Any]:
    from holomem import Store

    t, c = time.perf_counter(), time.process_time()
    store = Store.open(os.path.join(workdir, "plain"), read_only=True)
    seconds, cpu = time.perf_counter() - t, time.process_time() - c
    docs = len(store)
    store.close()
    return {"seconds": round(seconds, 3), "cpu": round(cpu, 3), "documents": docs}


WORKERS = {"fts5": worker_fts5, "plain": worker_plain, "subjects": worker_subjects,
           "open": worker_open}


def _spawn(kind: str, n: int, workdir: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--n", str(n),
                           "--workdir", workdir], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _profile(kind: str, n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        if kind == "open":
            worker_plain(n, d)
        prof = cProfile.Profile()
        prof.enable()
        WORKERS[kind](n, d)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(40)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each measurement (median)")
    ap.add_argument("--profile", choices=["plain", "subjects", "open"])
    add_save(ap, "ingest_bench")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.n, args.workdir)))
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    if args.profile:
        _profile(args.profile, sizes[0])
        return
    load_before = os.getloadavg()
    runs: dict[str, Any] = {}
    ratios: dict[str, Any] = {}
    for n in sizes:
        rounds: dict[str, list[dict[str, Any]]] = {k: [] for k in WORKERS}
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as d:
                for kind in ("fts5", "plain", "subjects", "open"):  # open reads plain's store
                    rounds[kind].append(_spawn(kind, n, d))
        row: dict[str, Any] = {}
        for kind, results in rounds.items():
            ok = [r for r in results if "error" not in r]
            if not ok:
                row[kind] = results[0]
                continue
            row[kind] = {**ok[0], "seconds": median([r["seconds"] for r in ok]),
                         "cpu": median([r["cpu"] for r in ok]),
                         "rounds": [r["seconds"] for r in ok],
                         "cpu_rounds": [r["cpu"] for r in ok]}
            if "per_s" in ok[0]:
                row[kind]["per_s"] = round(n / row[kind]["seconds"])
        runs[str(n)] = row
        fts, fts_cpu = row["fts5"].get("seconds"), row["fts5"].get("cpu")
        r: dict[str, float] = {}
        if fts:
            for kind in ("plain", "subjects"):
                if "seconds" in row[kind]:
                    r[f"{kind}_rate_vs_fts5"] = round(fts / row[kind]["seconds"], 3)
                    r[f"{kind}_rate_vs_fts5_cpu"] = round(fts_cpu / row[kind]["cpu"], 3)
            if "seconds" in row["open"]:
                r["open_vs_fts5_build"] = round(row["open"]["seconds"] / fts, 3)
                r["open_vs_fts5_build_cpu"] = round(row["open"]["cpu"] / fts_cpu, 3)
        ratios[str(n)] = r
    targets: dict[str, Any] = {}
    for n, r in ratios.items():
        targets[f"plain_rate_vs_fts5@{n}"] = check(r.get("plain_rate_vs_fts5"), ">=", 0.5)
        targets[f"subjects_rate_vs_fts5@{n}"] = check(r.get("subjects_rate_vs_fts5"), ">=", 0.5)
        targets[f"open_vs_fts5_build@{n}"] = check(r.get("open_vs_fts5_build"), "<=", 2)
    result = {
        "benchmark": "ingest_bench",
        "machine": {**machine(tempfile.gettempdir()),
                    "loadavg_before": [round(x, 2) for x in load_before]},
        "conditions": {"texts": "24 words, Zipf(1.07) over 5,000 words (search_bench's corpus)",
                       "batch": BATCH, "holomem": "Memory.remember_many, sync='none'",
                       "subjects": "1 fact in 10 has a subject (about 10 facts each), "
                                   "latest-by-subject",
                       "fts5": "file, journal_mode=WAL, synchronous=OFF, executemany + commit "
                               "per 10,000 rows",
                       "open": "Store.open of the plain store in a fresh process (replay: "
                               "the stores are written with checkpoints off)",
                       "rounds": args.rounds},
        "runs": runs,
        "ratios": ratios,
        "targets": targets,
    }
    emit("ingest_bench", result, args.save)


if __name__ == "__main__":
    main()
