"""Ingest with caller vectors beside the same ingest without them, in one run (issue 29).

    python benchmarks/vector_ingest.py [--n 20000] [--dim 384] [--rounds 3] [--profile KIND]

The facts: the 24-word Zipf texts of ``search_bench.py`` (the same seed), no ids, written
with ``Memory.remember_many`` in batches of 10,000 (the most one call takes) on a store
opened with ``sync="none"`` and checkpoints off. Each measurement runs in its own
process, the kinds interleaved within a round:

- ``plain``: the texts alone;
- ``lists``: each fact with a unit 384-d vector as a Python list of floats (what a JSON
  request decodes to, and what ``tolist()`` gives);
- ``numpy``: the same vectors as float32 numpy rows, one per fact;
- ``array``: the same vectors as ``array.array("f")``, one per fact.

Before each measurement the parent calls ``os.sync()``: a measurement's journal (30 MB
with vectors) is otherwise still being written back while the next one runs, and that
writeback, on a 2-core machine, landed on whichever kind came next (ratios moved
between 0.40 and 0.62 from run to run). The vectors are made before the clock starts
(fixed seed, unit length). Figures are
medians over rounds, wall seconds beside CPU seconds (``time.process_time``), since the
machine is shared. Targets: facts/s with vectors over facts/s without, >= 0.5, for lists
and for numpy rows. ``--profile KIND`` prints a cProfile table of one measurement
instead. Prints JSON and a line per target; writes benchmarks/results/vector_ingest.json
only with ``--save``.
"""

from __future__ import annotations

import argparse
import array
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
KINDS = ("plain", "lists", "numpy", "array")


def _inputs(kind: str, n: int, dim: int) -> list[dict[str, Any]]:
    import numpy as np

    texts = corpus(n)
    if kind == "plain":
        return [{"text": t} for t in texts]
    rng = np.random.default_rng(29)
    vecs = rng.standard_normal((n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    rows: list[Any]
    if kind == "lists":
        rows = vecs.tolist()
    elif kind == "numpy":
        rows = list(vecs)
    else:
        rows = [array.array("f", r.tobytes()) for r in vecs]
    return [{"text": t, "embedding": v} for t, v in zip(texts, rows, strict=True)]


def worker(kind: str, n: int, dim: int, workdir: str) -> dict[str, Any]:
    from holomem import Memory, Store

    inputs = _inputs(kind, n, dim)
    with Store.open(os.path.join(workdir, kind), sync="none", checkpoint_every=None,
                    checkpoint_close_min=2**62) as store:
        memory = Memory(store)
        t, c = time.perf_counter(), time.process_time()
        for i in range(0, n, BATCH):
            memory.remember_many(inputs[i : i + BATCH])
        seconds, cpu = time.perf_counter() - t, time.process_time() - c
        stored = len(store)
    return {"seconds": round(seconds, 3), "cpu": round(cpu, 3), "per_s": round(n / seconds),
            "facts": stored}


def _spawn(kind: str, n: int, dim: int, workdir: str) -> dict[str, Any]:
    os.sync()  # (the last measurement's journal written back first: a quiet disk for each)
    proc = subprocess.run([sys.executable, __file__, "--worker", kind, "--n", str(n),
                           "--dim", str(dim), "--workdir", workdir],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="facts per measurement")
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=3, help="runs of each measurement (median)")
    ap.add_argument("--profile", choices=KINDS)
    add_save(ap, "vector_ingest")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.dim, args.workdir)))
        return
    if args.profile:
        with tempfile.TemporaryDirectory() as d:
            prof = cProfile.Profile()
            prof.enable()
            worker(args.profile, args.n, args.dim, d)
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        return
    load_before = os.getloadavg()
    rounds: dict[str, list[dict[str, Any]]] = {k: [] for k in KINDS}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as d:
            for kind in KINDS:
                rounds[kind].append(_spawn(kind, args.n, args.dim, d))
    runs: dict[str, Any] = {}
    for kind, results in rounds.items():
        ok = [r for r in results if "error" not in r]
        if not ok:
            runs[kind] = results[0]
            continue
        seconds = median([r["seconds"] for r in ok])
        runs[kind] = {"per_s": round(args.n / seconds), "seconds": seconds,
                      "cpu": median([r["cpu"] for r in ok]), "facts": ok[0]["facts"],
                      "rounds": [r["seconds"] for r in ok],
                      "cpu_rounds": [r["cpu"] for r in ok]}
    ratios: dict[str, float] = {}
    plain = runs["plain"]
    for kind in KINDS[1:]:
        if "seconds" in plain and "seconds" in runs[kind]:
            ratios[f"{kind}_vs_plain"] = round(plain["seconds"] / runs[kind]["seconds"], 3)
            ratios[f"{kind}_vs_plain_cpu"] = round(plain["cpu"] / runs[kind]["cpu"], 3)
    targets = {f"{kind}_vs_plain": check(ratios.get(f"{kind}_vs_plain"), ">=", 0.5)
               for kind in ("lists", "numpy")}
    result = {
        "benchmark": "vector_ingest",
        "machine": {**machine(tempfile.gettempdir()),
                    "loadavg_before": [round(x, 2) for x in load_before]},
        "conditions": {"facts": args.n, "dim": args.dim, "batch": BATCH,
                       "texts": "24 words, Zipf(1.07) over 5,000 words (search_bench's "
                                "corpus), no ids",
                       "vectors": "unit, float32, seed 29; made before the clock starts",
                       "holomem": "Memory.remember_many, sync='none', checkpoints off, "
                                  "no embedder",
                       "rounds": args.rounds},
        "runs": runs,
        "ratios": ratios,
        "targets": targets,
    }
    emit("vector_ingest", result, args.save)


if __name__ == "__main__":
    main()
