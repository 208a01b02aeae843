"""Checkpoints (issue 17 item 1): open time with and without one, write time, size, and
the pause a checkpoint imposes on writers.

At each size (100,000 facts by default; ``--million`` adds 1,000,000 after a
MemAvailable check) a store is filled through ``Memory.remember_many`` in batches of
5,000 synthetic 8-30-word facts, one in ten with a subject, ``latest-by-subject``,
``sync="none"``. Then, in one run, side by side:

- open by a full replay (no checkpoint), median of ``--rounds`` opens;
- ``Store.checkpoint()``: seconds, file and payload bytes, and ``pause_seconds`` (how
  long the state lock was held for the snapshot: what writers wait for);
- open from the checkpoint (the tail is empty), median of ``--rounds`` opens, and its
  ratio to the full replay;
- the writer's view of the pause: a thread remembering one fact at a time while
  another thread writes a checkpoint; the slowest remember during the checkpoint
  beside the p99 of the same remembers without one (the GIL is shared, so encoding
  slows writers a little even though they hold no lock in common with it).

Beside each wall time, the CPU time of the same step (the machine is shared: on a
loaded one wall time is several times CPU time).

``--baseline TREE`` (a checkout of another commit, e.g. ``git archive <commit> | tar
-x -C /tmp/base``) measures both builds in one run on copies of the same store: each
round runs every step above in a subprocess for the baseline, then for this tree,
and the JSON gives both side by side with their ratios (this tree / baseline).

Targets (at 1,000,000 facts; at other sizes the same figures are printed and the
targets say "not measured"): open with a checkpoint <= 2 s and <= 0.15x a full replay,
checkpoint write <= 10 s. Prints one JSON document (machine, load before and after);
``--save`` writes benchmarks/results/checkpoint_bench.json. :func:`measure` is what
benchmarks/scale.py calls for its curve.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--tree" in sys.argv:  # a worker for another build: its holomem first
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--tree") + 1]))

from benchmarks._common import check, emit, machine, median, peak_rss_mib, percentile  # noqa: E402
from holomem import ManualClock, Memory, MemoryConfig, Store  # noqa: E402

BATCH = 5_000
CONFIG = MemoryConfig(supersession="latest-by-subject")
#: What 1M facts need in memory (the state, a copy being restored, the payload).
MILLION_NEEDS_GIB = 6.0
_WORDS = [f"w{i}" for i in range(20_000)]


def facts(n: int, seed: int = 7) -> list[dict[str, Any]]:
    """Synthetic facts: 8-30 words from a Zipf-like vocabulary, 1 in 10 with a subject."""
    rng = random.Random(seed)
    # Cumulative weights once (choices would sum the 20,000 weights on every call);
    # the draws are the same.
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(_WORDS))))
    out = []
    for i in range(n):
        words = rng.choices(_WORDS, cum_weights=cum, k=rng.randint(8, 30))
        f: dict[str, Any] = {"id": f"f{i}", "text": " ".join(words)}
        if i % 10 == 0:
            f["subject"] = f"s{i % 5000}"
        out.append(f)
    return out


def _open(path: str) -> tuple[float, float, Store]:
    """(wall seconds, CPU seconds, the store) of one open."""
    t0, c0 = time.perf_counter(), time.process_time()
    store = Store.open(path, sync="none", checkpoint_every=None, checkpoint_close_min=1 << 62)
    return time.perf_counter() - t0, time.process_time() - c0, store


def _writer_pause(path: str, rounds: int) -> dict[str, Any]:
    """Remember latencies of a writer thread with and without a concurrent checkpoint."""
    _, _, store = _open(path)
    memory = Memory(store, CONFIG, clock=ManualClock(2_000_000_000_000))
    stop = threading.Event()
    lat: list[tuple[float, float]] = []

    def writer() -> None:
        i = 0
        while not stop.is_set():
            t0 = time.perf_counter()
            memory.remember(text=f"pause probe {i} with a few words", id=f"p{os.getpid()}-{i}")
            lat.append((t0, time.perf_counter() - t0))
            i += 1

    th = threading.Thread(target=writer)
    th.start()
    time.sleep(1.0)
    windows, pauses, cpus, seconds = [], [], [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        stats = store.checkpoint()
        windows.append((t0, time.perf_counter()))
        if stats is not None:
            pauses.append(stats.pause_seconds)
            cpus.append(stats.pause_cpu_seconds)
            seconds.append(stats.seconds)
        time.sleep(0.5)
    stop.set()
    th.join()
    store.close()
    during = [d for t, d in lat if any(a <= t <= b for a, b in windows)]
    outside = [d for t, d in lat if not any(a - 0.05 <= t <= b + 0.05 for a, b in windows)]
    return {
        "lock_pause_ms": {"median": round(median(pauses) * 1000, 2),
                          "max": round(max(pauses, default=0) * 1000, 2),
                          "cpu_median": round(median(cpus) * 1000, 2)},
        "checkpoint_seconds_under_writes": round(median(seconds), 3),
        "remember_ms_during_checkpoint": {"n": len(during),
                                          "max": round(max(during, default=0) * 1000, 2),
                                          "p99": round(percentile(during, 99) * 1000, 2)},
        "remember_ms_otherwise": {"n": len(outside),
                                  "p50": round(percentile(outside, 50) * 1000, 3),
                                  "p99": round(percentile(outside, 99) * 1000, 2),
                                  "max": round(max(outside, default=0) * 1000, 2)},
    }


def build(n: int, path: str) -> float:
    """Fill a store at ``path`` with ``n`` facts; the seconds it took."""
    t0 = time.perf_counter()
    _, _, store = _open(path)
    memory = Memory(store, CONFIG, clock=ManualClock(1_700_000_000_000))
    data = facts(n)
    for i in range(0, n, BATCH):
        memory.remember_many(data[i : i + BATCH])
    del data
    store.close()
    return time.perf_counter() - t0


def steps(path: str, rounds: int) -> dict[str, Any]:
    """Open by replay, write a checkpoint, open from it, and the writer's pause, on the
    store at ``path`` (its checkpoints erased first, so the first open replays)."""
    for root, _, names in os.walk(path):
        for name in names:
            if name.startswith("checkpoint-"):
                os.remove(os.path.join(root, name))
    replay, replay_cpu = [], []
    for _ in range(rounds):
        s, c, store = _open(path)
        replay.append(s)
        replay_cpu.append(c)
        store.close()
    _, _, store = _open(path)
    c0 = time.process_time()
    stats = store.checkpoint()
    write_cpu = time.process_time() - c0
    assert stats is not None
    store.close()
    from_ckpt, from_ckpt_cpu = [], []
    for _ in range(rounds):
        s, c, store = _open(path)
        assert store.stats().opened_by.startswith("checkpoint")
        from_ckpt.append(s)
        from_ckpt_cpu.append(c)
        store.close()
    journal = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path)
                  for f in fs if f.endswith(".hlj"))
    return {
        "open_replay_seconds": round(median(replay), 3),
        "open_replay_cpu_seconds": round(median(replay_cpu), 3),
        "open_checkpoint_seconds": round(median(from_ckpt), 3),
        "open_checkpoint_cpu_seconds": round(median(from_ckpt_cpu), 3),
        "open_ratio": round(median(from_ckpt) / median(replay), 3),
        "open_cpu_ratio": round(median(from_ckpt_cpu) / median(replay_cpu), 3),
        "checkpoint_write_seconds": stats.seconds,
        "checkpoint_write_cpu_seconds": round(write_cpu, 3),
        "checkpoint_pause_seconds": stats.pause_seconds,
        "checkpoint_pause_cpu_seconds": stats.pause_cpu_seconds,
        "checkpoint_file_bytes": stats.file_bytes,
        "checkpoint_payload_bytes": stats.payload_bytes,
        "journal_bytes": journal,
        "writer": _writer_pause(path, rounds),
    }


def measure(n: int, workdir: str, rounds: int = 3) -> dict[str, Any]:
    """Open times with and without a checkpoint, its write time, size and pause, at
    ``n`` facts (a store built in ``workdir``)."""
    path = os.path.join(workdir, f"ckpt-{n}")
    ingest = build(n, path)
    out = {"facts": n, "ingest_seconds": round(ingest, 2), **steps(path, rounds)}
    out["checkpoint_bytes_per_fact"] = round(out["checkpoint_file_bytes"] / n, 1)
    return out


#: Figures compared between two builds (this tree / the baseline).
COMPARED = ("open_checkpoint_seconds", "open_checkpoint_cpu_seconds", "open_replay_cpu_seconds",
            "checkpoint_write_seconds", "checkpoint_write_cpu_seconds",
            "checkpoint_pause_seconds", "checkpoint_pause_cpu_seconds", "checkpoint_file_bytes")


def _worker(tree: str, path: str, rounds: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", path,
                          "--tree", tree, "--rounds", str(rounds)],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": tree})
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def compare(n: int, workdir: str, baseline: str, rounds: int,
            store: str | None = None) -> dict[str, Any]:
    """Both builds on copies of one store of ``n`` facts (``store``: copies of that
    one, built by :func:`build` before), interleaved round by round (one round of each
    step per subprocess); medians over the rounds, and ratios."""
    path = os.path.join(workdir, f"ckpt-{n}")
    ingest: float | None = None
    if store is None:
        ingest = build(n, path)
    else:
        path = store
    trees = {"baseline": os.path.abspath(baseline), "this": ROOT}
    copies = {}
    for name in trees:
        copies[name] = os.path.join(workdir, f"ckpt-{n}-{name}")
        shutil.copytree(path, copies[name])
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            runs[name].append(_worker(tree, copies[name], 1))
    sides = {name: {k: round(median([r[k] for r in rs]), 4)
                    for k in rs[0] if isinstance(rs[0][k], (int, float))}
             for name, rs in runs.items()}
    for name, rs in runs.items():
        sides[name]["writer"] = rs[-1]["writer"]
    ratios = {k: round(sides["this"][k] / sides["baseline"][k], 3)
              for k in COMPARED if sides["baseline"].get(k)}
    return {"facts": n, "ingest_seconds": None if ingest is None else round(ingest, 2),
            "rounds": rounds, "store": store, "baseline_tree": trees["baseline"], **sides["this"],
            "checkpoint_bytes_per_fact": round(sides["this"]["checkpoint_file_bytes"] / n, 1),
            "baseline": sides["baseline"], "this_over_baseline": ratios}


def _mem_available_gib() -> float:
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="100000")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 facts")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to build the stores (default: tmp)")
    ap.add_argument("--save", action="store_true",
                    help="also write benchmarks/results/checkpoint_bench.json")
    ap.add_argument("--baseline", default=None,
                    help="a checkout of another build, measured beside this one in one run")
    ap.add_argument("--store", default=None,
                    help="with --baseline and one size: copies of this store (built by "
                         "build() with that many facts) instead of building one")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(steps(args.worker, args.rounds)))
        return
    sizes = [int(x) for x in args.sizes.split(",") if x]
    skipped: dict[str, str] = {}
    if args.million:
        available = _mem_available_gib()
        if available >= MILLION_NEEDS_GIB:
            sizes.append(1_000_000)
        else:
            skipped["1000000"] = f"MemAvailable {available:.1f} GiB < {MILLION_NEEDS_GIB}"
    before = machine(args.dir or tempfile.gettempdir())
    runs = []
    with tempfile.TemporaryDirectory(dir=args.dir) as d:
        for n in sizes:
            runs.append(compare(n, d, args.baseline, args.rounds, args.store) if args.baseline
                        else measure(n, d, args.rounds))
            print(f"{n}: {runs[-1]}", file=sys.stderr)
    million = next((r for r in runs if r["facts"] == 1_000_000), None)
    result = {
        "benchmark": "checkpoint_bench",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {"facts": "synthetic 8-30 words, Zipf over 20,000 words, 1 in 10 "
                                "with a subject", "config": "latest-by-subject",
                       "batch": BATCH, "sync": "none", "rounds": args.rounds,
                       "peak_rss_mib": round(peak_rss_mib())},
        "skipped": skipped,
        "runs": runs,
        "targets": {
            "open_with_checkpoint_seconds_at_1M<=2":
                check(million["open_checkpoint_seconds"] if million else None, "<=", 2.0),
            "open_with_checkpoint_over_replay_at_1M<=0.15":
                check(million["open_ratio"] if million else None, "<=", 0.15),
            "checkpoint_write_seconds_at_1M<=10":
                check(million["checkpoint_write_seconds"] if million else None, "<=", 10.0),
        },
    }
    emit("checkpoint_bench", result, args.save)


if __name__ == "__main__":
    main()
