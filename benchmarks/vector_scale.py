"""Recall latency with embeddings at scale, exact beside approximate search, at 10k, 100k
and 1M facts (issue 14, item 4).

    python benchmarks/vector_scale.py [--sizes 10000,100000] [--million] [--queries 200]
                                      [--vectors clustered|random] [--blas-threads N] [--save]

Facts: seeded synthetic 24-word texts (``search_bench.corpus``) each with a caller's
384-dimension unit vector, remembered in batches of 10,000 (build time and facts/s
reported); the store is then closed and reopened (the open replays the journal, timed).
Vectors (``--vectors``): ``clustered`` (default) — 2,000 seeded topic centres, each fact a
centre plus Gaussian noise (cosine about 0.75 to its centre, 0.55 between two facts of
a topic), which, like sentence embeddings, has neighbourhoods; each query vector is a
fact's vector plus as much noise again (a question near what answers it). ``random``:
independent random unit vectors and random query vectors — no neighbourhoods at all,
the worst case for any approximate index (every cosine is about 0 +- 0.05). Queries:
``search_bench``'s "light" 3-6 word queries with those vectors. In one run, per size, the
same queries through:

- ``exact``: ``Memory.recall(text, embedding=vector, k=10)`` — BM25 of every matching
  fact, the cosine of every vector, the best ``candidate_limit`` cosines and every lexical
  match fused (the default fusion), the top 10;
- ``approximate``: the same with ``MemoryConfig(vector_search="approximate")`` — from
  50,000 facts the vector's candidates come from the in-memory HNSW index (built at the
  first query: ``index_build_s``); below that it is exact search;
- ``exact_vector_only`` / ``approximate_vector_only``: a query text that matches nothing
  ("zzzz"), so the ranking is the vector's alone — the stricter measure of the index;
- ``recall_lexical``: the text without a vector;
- ``numpy_floor``: ``matrix @ vector`` and a top-10 ``argpartition`` over a float32
  matrix held by this script — what exact search cannot go below on this machine.

Reports p50/p90/p99 of each (wall time, and this thread's CPU time: on a loaded machine
the wall time mostly measures the other processes), recall@10 of approximate against
exact (the share of exact search's 10 ids that approximate search also returns, for fused
and for vector-only queries), the p50 ratios, build, open and index-build times, and the
resident memory.
``--million`` adds 1,000,000 facts (about 1.5 GB of vectors in the projection, as much
again for the floor's matrix, about 0.5 GB of index, plus the store): run only when
``MemAvailable`` in /proc/meminfo leaves room (checked first; skipped with a message
saying so otherwise). The cosine is a BLAS matrix-vector product: on a busy two-core
machine OpenBLAS's threads wait on each other, so ``--blas-threads 1`` (set before numpy
loads) shows the figure with one thread; the count is recorded. Prints one JSON document;
writes benchmarks/results/vector_scale.json only with ``--save`` (a run of 1M facts alone,
``--sizes "" --million``, writes vector_scale_1m.json).
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
    ap.add_argument("--vectors", choices=("clustered", "random"), default="clustered",
                    help="the vector model (see the docstring)")
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
from holomem import Memory, MemoryConfig, Store  # noqa: E402

DIM = 384
BATCH = 10_000
TARGET_P50_MS_AT_1M = 20.0
TOPICS = 2_000
NOISE = 0.9  # per-dimension noise around a topic centre of unit-variance coordinates
#: What 1M facts need besides the store's own files: two float32 matrices (the
#: projection's and the floor's) and room for the store and the query's temporaries.
MILLION_NEEDS_GIB = 6.0


def _normalised(v: np.ndarray) -> np.ndarray:
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def unit_vectors(n: int, seed: int) -> np.ndarray:
    """The vectors of the facts ``seed`` .. ``seed + n - 1`` (a batch: seed = its start)."""
    rng = np.random.default_rng(seed)
    if ARGS.vectors == "random":
        return _normalised(rng.standard_normal((n, DIM), dtype=np.float32))
    centres = np.random.default_rng(12345).standard_normal((TOPICS, DIM), dtype=np.float32)
    v = centres[rng.integers(0, TOPICS, n)]
    v += NOISE * rng.standard_normal((n, DIM), dtype=np.float32)
    return _normalised(v)


def query_vectors(n: int, facts: int) -> np.ndarray:
    rng = np.random.default_rng(7)
    if ARGS.vectors == "random":
        return _normalised(rng.standard_normal((n, DIM), dtype=np.float32))
    # A fact's vector plus as much noise again: near what answers it, not on it.
    out = np.empty((n, DIM), dtype=np.float32)
    for i, fact in enumerate(rng.integers(0, facts, n)):
        start = int(fact) // BATCH * BATCH
        out[i] = unit_vectors(min(BATCH, facts - start), seed=start)[int(fact) - start]
    out += NOISE * rng.standard_normal((n, DIM), dtype=np.float32) / np.sqrt(DIM)
    return _normalised(out)


def mem_available_gib() -> float:
    with open("/proc/meminfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / (1024 * 1024)
    return float("nan")


def _percentiles(ms: list[float]) -> dict[str, float]:
    return {f"p{p}_ms": round(percentile(ms, p), 3) for p in (50, 90, 99)}


#: Per query, the CPU time of this thread (ms), beside the wall time: on a machine other
#: processes load, the wall time grows with their share of the cores, the CPU time much
#: less (with one BLAS thread the query runs on this thread alone).
CPU_MS: dict[int, list[float]] = {}


def _timed(fn: Any, items: list[Any], warm: int = 10) -> list[float]:
    for item in items[:warm]:
        fn(item)
    out, cpu = [], []
    for item in items:
        c = time.thread_time()
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1e3)
        cpu.append((time.thread_time() - c) * 1e3)
    CPU_MS[id(out)] = cpu
    return out


def _ids(results: list[Any]) -> list[str]:
    return [r.id for r in results]


def _overlap(approx: list[list[str]], exact: list[list[str]]) -> float:
    found = sum(len(set(a) & set(e)) for a, e in zip(approx, exact, strict=True))
    return round(found / max(1, sum(len(e) for e in exact)), 4)


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
    qv = query_vectors(nq, n)
    items = list(zip(qs, qv.tolist(), strict=True))
    alone = [("zzzz", v) for v in qv.tolist()]
    t0 = time.perf_counter()
    with Store.open(path, sync="none") as store:
        open_s = time.perf_counter() - t0
        exact = Memory(store)
        approx = Memory(store, MemoryConfig(vector_search="approximate"), persist=True)
        rss_open = current_rss_mib()
        t0 = time.perf_counter()
        approx.recall(qs[0], embedding=items[0][1], k=10)  # builds the index (50k and up)
        index_s = time.perf_counter() - t0
        active = store.read(lambda v: v.embeddings.index is not None)

        def run(m: Memory, it: tuple[str, list[float]]) -> list[str]:
            return _ids(m.recall(it[0], embedding=it[1], k=10))

        ms = {"exact": _timed(lambda it: run(exact, it), items),
              "approximate": _timed(lambda it: run(approx, it), items),
              "exact_vector_only": _timed(lambda it: run(exact, it), alone),
              "approximate_vector_only": _timed(lambda it: run(approx, it), alone),
              "recall_lexical": _timed(lambda it: exact.recall(it[0], k=10), items)}
        recall_at_10 = {
            "fused": _overlap([run(approx, it) for it in items],
                              [run(exact, it) for it in items]),
            "vector_only": _overlap([run(approx, it) for it in alone],
                                    [run(exact, it) for it in alone])}
        rss_index = current_rss_mib()
        # A recall with a vector must really rank by it: a fact's own vector finds it.
        last = (n - 1) // BATCH * BATCH
        probe = unit_vectors(min(BATCH, n - last), seed=last)[0]
        for m in (exact, approx):
            found = m.recall("zzzz", embedding=probe.tolist(), k=1)
            assert found and found[0].id == f"f{last}", found
    matrix = np.concatenate([unit_vectors(min(BATCH, n - s), seed=s)
                             for s in range(0, n, BATCH)])

    def floor(it: tuple[str, list[float]]) -> None:
        scores = matrix @ np.asarray(it[1], dtype=np.float32)
        np.argpartition(scores, -10)[-10:]

    ms["numpy_floor"] = _timed(floor, items)
    p = {name: _percentiles(v) for name, v in ms.items()}
    cpu = {name: _percentiles(CPU_MS.pop(id(v))) for name, v in ms.items()}
    p50 = {name: v["p50_ms"] for name, v in p.items()}
    return {
        "facts": n, "queries": nq, "build_s": round(build_s, 1),
        "build_facts_per_s": round(n / build_s),
        "reopen_s": round(open_s, 2), "rss_after_open_mib": round(rss_open),
        "approximate_index_used": active, "index_build_s": round(index_s, 1),
        "rss_with_index_mib": round(rss_index),
        "latency": p, "cpu_time_per_query": cpu,
        "recall_at_10_approximate_vs_exact": recall_at_10,
        "p50_ratio_approximate_to_exact": round(p50["approximate"] / p50["exact"], 3),
        "p50_ratio_exact_to_floor": round(p50["exact"] / p50["numpy_floor"], 2),
        "p50_ratio_exact_to_lexical": round(p50["exact"] / p50["recall_lexical"], 2),
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
    p50_million = at_million["latency"]["approximate"]["p50_ms"] if at_million else None
    exact_million = at_million["latency"]["exact"]["p50_ms"] if at_million else None
    recall_million = (at_million["recall_at_10_approximate_vs_exact"]["vector_only"]
                      if at_million else None)
    result = {
        "benchmark": "vector_scale",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {"dim": DIM, "vectors": "seeded unit vectors (caller's; see vector_model)",
                       "texts": "search_bench corpus (24 words, Zipf 5,000-word vocabulary)",
                       "vector_model": ARGS.vectors,
                       "queries": "search_bench light queries, each with a query vector",
                       "k": 10, "fusion": "default", "sync_while_building": "none",
                       "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS",
                                                              "(unset)"),
                       "mem_available_gib_before": round(available, 1),
                       "peak_rss_mib": round(peak_rss_mib())},
        "skipped": skipped,
        "runs": runs,
        "targets": {
            "approximate recall+vector p50_ms at 1M <= 20":
                check(p50_million, "<=", TARGET_P50_MS_AT_1M),
            "exact recall+vector p50_ms at 1M <= 20 (informative: exact search's floor)":
                check(exact_million, "<=", TARGET_P50_MS_AT_1M),
            "approximate vector-only recall@10 vs exact at 1M >= 0.9":
                check(recall_million, ">=", 0.9),
        },
    }
    # A run of 1M facts alone (--sizes "" --million) saves beside the smaller sizes' run.
    emit("vector_scale_1m" if sizes == [1_000_000] else "vector_scale", result, args.save)


if __name__ == "__main__":
    main()
