"""Recall latency with embeddings at scale: brute-force cosine at 10k, 100k and 1M facts
(issue 14, item 4).

    python benchmarks/vector_scale.py [--sizes 10000,100000] [--million] [--queries 200]
                                      [--blas-threads N] [--save]

Facts: seeded synthetic 24-word texts (``search_bench.corpus``) each with a caller's
vector — a seeded random unit vector of 384 dimensions (a numpy row), as ``minilm``
gives (latency does not depend on what the vectors mean) — remembered in batches of
10,000 (build time and facts/s reported); the
store is then closed and reopened (the open replays the journal, timed). Queries:
``search_bench``'s "light" 3-6 word queries, each with a random unit vector. In one
run, per size, the same queries through:

- ``recall+vector``: ``Memory.recall(text, embedding=vector, k=10)`` — BM25 and
  cosine over every fact, fused (the default fusion), the top 10;
- ``recall_lexical``: ``Memory.recall(text, k=10)``, the same text without a vector;
- ``numpy_floor``: the brute-force product alone, ``matrix @ vector`` and a top-10
  ``argpartition`` over a float32 matrix of the same vectors held by this script —
  what exact search cannot go below on this machine.

Reports p50/p90/p99 of each, the p50 ratios, build and open times, and the resident
memory. ``--million`` adds 1,000,000 facts (about 1.5 GB of vectors in the store's
projection, as much again for the floor's matrix, plus the store): run only when
``MemAvailable`` in /proc/meminfo leaves room (checked first; the size is skipped
with a message saying so otherwise). The question it answers: does exact search's
p50 at 1M exceed 20 ms (the point where the issue calls for an approximate index)?
The cosine is a BLAS matrix-vector product: on a busy two-core machine OpenBLAS's
threads wait on each other, so ``--blas-threads 1`` (set before numpy loads) shows the
figure with one thread; the count is recorded. Prints one JSON document; writes
benchmarks/results/vector_scale.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 facts")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="set OPENBLAS_NUM_THREADS before numpy loads (0: leave as is)")
    ap.add_argument("--save", action="store_true",
                    help="also write benchmarks/results/vector_scale.json (default: print only)")
    return ap.parse_args()


ARGS = _args()
if ARGS.blas_threads:  # must precede the first import of numpy
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import (  # noqa: E402
    check,
    current_rss_mib,
    emit,
    machine,
    peak_rss_mib,
    percentile,
)
from benchmarks.search_bench import corpus, queries  # noqa: E402
from holomem import Memory, Store  # noqa: E402

DIM = 384
BATCH = 10_000
TARGET_P50_MS_AT_1M = 20.0
#: What 1M facts need besides the store's own files: two float32 matrices (the
#: projection's and the floor's) and room for the store and the query's temporaries.
MILLION_NEEDS_GIB = 6.0


def unit_vectors(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def mem_available_gib() -> float:
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)
    return float("nan")


def _percentiles(ms: list[float]) -> dict[str, float]:
    return {f"p{p}_ms": round(percentile(ms, p), 3) for p in (50, 90, 99)}


def _timed(fn: Any, items: list[Any], warm: int = 10) -> list[float]:
    for item in items[:warm]:
        fn(item)
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def measure(n: int, nq: int, workdir: str) -> dict[str, Any]:
    texts = corpus(n)
    path = os.path.join(workdir, f"v{n}")
    t0 = time.perf_counter()
    with Store.open(path, sync="none") as store:
        memory = Memory(store)
        for start in range(0, n, BATCH):
            vecs = unit_vectors(min(BATCH, n - start), seed=start)
            memory.remember_many(
                {"id": f"f{start + i}", "text": texts[start + i], "embedding": v}
                for i, v in enumerate(vecs))
    build_s = time.perf_counter() - t0
    del texts
    qs = queries(nq)["light"]
    qv = unit_vectors(nq, seed=-1 % 2**32)
    items = list(zip(qs, qv.tolist(), strict=True))
    t0 = time.perf_counter()
    with Store.open(path, sync="none") as store:
        open_s = time.perf_counter() - t0
        memory = Memory(store)
        rss_open = current_rss_mib()
        fused = _timed(lambda it: memory.recall(it[0], embedding=it[1], k=10), items)
        lexical = _timed(lambda it: memory.recall(it[0], k=10), items)
        # A recall with a vector must really rank by it: a fact's own vector finds it.
        probe = unit_vectors(1, seed=(n - 1) // BATCH * BATCH)[0]
        last = memory.recall("zzzz", embedding=probe.tolist(), k=1)
        assert last and last[0].id == f"f{(n - 1) // BATCH * BATCH}", last
    matrix = np.concatenate([unit_vectors(min(BATCH, n - s), seed=s)
                             for s in range(0, n, BATCH)])

    def floor(it: tuple[str, list[float]]) -> None:
        scores = matrix @ np.asarray(it[1], dtype=np.float32)
        np.argpartition(scores, -10)[-10:]

    floor_ms = _timed(floor, items)
    p = {name: _percentiles(ms) for name, ms in
         (("recall+vector", fused), ("recall_lexical", lexical), ("numpy_floor", floor_ms))}
    p50 = {name: v["p50_ms"] for name, v in p.items()}
    return {
        "facts": n, "queries": nq, "build_s": round(build_s, 1),
        "build_facts_per_s": round(n / build_s),
        "reopen_s": round(open_s, 2), "rss_after_open_mib": round(rss_open),
        "latency": p,
        "p50_ratio_vector_to_lexical": round(p50["recall+vector"] / p50["recall_lexical"], 2),
        "p50_ratio_vector_to_floor": round(p50["recall+vector"] / p50["numpy_floor"], 2),
    }


def main() -> None:
    args = ARGS
    sizes = [int(x) for x in args.sizes.split(",") if x]
    skipped: dict[str, str] = {}
    available = mem_available_gib()
    if args.million:
        if available >= MILLION_NEEDS_GIB:
            sizes.append(1_000_000)
        else:
            skipped["1000000"] = (f"skipped: MemAvailable is {available:.1f} GiB, 1M facts "
                                  f"need about {MILLION_NEEDS_GIB} GiB")
            print(skipped["1000000"], file=sys.stderr)
    before = machine(tempfile.gettempdir())
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            runs.append(measure(n, args.queries, d))
            print(f"{n}: {json.dumps(runs[-1]['latency'])}", file=sys.stderr)
    at_million = next((r for r in runs if r["facts"] == 1_000_000), None)
    p50_million = at_million["latency"]["recall+vector"]["p50_ms"] if at_million else None
    result = {
        "benchmark": "vector_scale",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {"dim": DIM, "vectors": "seeded random unit vectors (caller's)",
                       "texts": "search_bench corpus (24 words, Zipf 5,000-word vocabulary)",
                       "queries": "search_bench light queries, each with a random unit vector",
                       "k": 10, "fusion": "default", "sync_while_building": "none",
                       "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS",
                                                              "(unset)"),
                       "mem_available_gib_before": round(available, 1),
                       "peak_rss_mib": round(peak_rss_mib())},
        "skipped": skipped,
        "runs": runs,
        "targets": {
            "recall+vector_p50_ms_at_1M<=20 (else an approximate index is called for)":
                check(p50_million, "<=", TARGET_P50_MS_AT_1M),
        },
    }
    emit("vector_scale", result, args.save)


if __name__ == "__main__":
    main()
