"""Recall with embeddings at scale: holomem's exact and "auto" vector search beside
lexical recall on the same store, and Chroma's HNSW on the same vectors (issue 29).

    python benchmarks/vector_scale.py [--sizes 20000,100000] [--million] [--queries 200]
                                      [--vectors clustered|random] [--blas-threads N]
                                      [--no-peers] [--save]

Facts: seeded synthetic 24-word texts (``search_bench.corpus``) each with a caller's
384-dimension unit vector, remembered in batches of 10,000 (facts/s reported); the store
is then closed and reopened. Vectors (``--vectors``): ``clustered`` (default) — 2,000
seeded topic centres, each fact a centre plus Gaussian noise, which, like sentence
embeddings, has neighbourhoods; each query vector is a fact's vector plus as much noise
again. ``random``: independent random unit vectors (the worst case for any approximate
index). Queries: ``search_bench``'s "light" 3-6 word queries with those vectors.

Each (system, size) runs in a child process of its own, so that its resident memory is
its own. holomem, per size, the same queries through:

- ``hybrid_exact``: ``recall(text, embedding=vector, k=10)`` with ``vectorSearch
  "exact"`` — every vector's cosine;
- ``hybrid_auto``: the same with the default ``"auto"`` — from ``AUTO_MIN`` facts the
  candidates come from the in-memory HNSW index, built in the background after the first
  query (``index_build_s``; a ``remember`` made while it builds is timed:
  ``remember_during_build_ms``);
- ``vector_only_exact`` / ``vector_only_auto``: a text that matches nothing ("zzzz");
- ``lexical``: the text without a vector.

Chroma (when ``chromadb`` is installed, the ``peers`` extra; ``--no-peers`` skips it): a
local persistent collection with cosine HNSW, the same vectors added in batches of 5,000
(with their texts), and ``query(query_embeddings=[vector], n_results=10)`` for the same
query vectors — Chroma has no fusion of text and vector, so its figure is a vector query.

Reported: p50/p90/p99 (wall time), recall@10 against exact search (holomem: auto vs
exact, fused and vector-only; Chroma: its top 10 against the exact top 10 of the same
vectors by numpy), ingest facts/s, resident memory after loading and bytes per fact (on
disk, and resident growth over the process before the store was opened). Targets: hybrid
auto p50 <= 4x lexical p50 at 20k and 100k; top-10 overlap >= 0.95; at 1M hybrid p50 <=
20 ms. ``--million`` adds 1,000,000 facts (checked against ``MemAvailable`` first). Prints
one JSON document; writes benchmarks/results/vector_scale.json only with ``--save`` (a
run of 1M alone, ``--sizes "" --million``, writes vector_scale_1m.json).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="20000,100000")
    ap.add_argument("--million", action="store_true", help="also 1,000,000 facts")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--vectors", choices=("clustered", "random"), default="clustered",
                    help="the vector model (see the docstring)")
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="set OPENBLAS_NUM_THREADS before numpy loads (0: leave as is)")
    ap.add_argument("--no-peers", action="store_true", help="skip Chroma even if installed")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)  # "holomem:N", "chroma:N"
    ap.add_argument("--workdir", default="", help=argparse.SUPPRESS)
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
from holomem.projections.embeddings import AUTO_MIN  # noqa: E402

DIM = 384
BATCH = 10_000
TARGET_P50_MS_AT_1M = 20.0
TARGET_RATIO_TO_LEXICAL = 4.0
TARGET_OVERLAP = 0.95
CHROMA_BATCH = 5_000
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


def _timed(fn: Any, items: list[Any], warm: int = 10) -> list[float]:
    for item in items[:warm]:
        fn(item)
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1e3)
    return out


def _dir_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def _all_vectors(n: int) -> np.ndarray:
    return np.concatenate([unit_vectors(min(BATCH, n - s), seed=s) for s in range(0, n, BATCH)])


def _ids(results: list[Any]) -> list[str]:
    return [r.id for r in results]


def _overlap(approx: list[list[str]], exact: list[list[str]]) -> float:
    found = sum(len(set(a) & set(e)) for a, e in zip(approx, exact, strict=True))
    return round(found / max(1, sum(len(e) for e in exact)), 4)


def measure_holomem(n: int, nq: int, workdir: str) -> dict[str, Any]:
    rss_before = current_rss_mib()  # (the process before any store: as for Chroma)
    texts = corpus(n)
    path = os.path.join(workdir, f"v{n}")
    t0 = time.perf_counter()
    with Store.open(path, sync="none") as store:
        memory = Memory(store)
        for start in range(0, n, BATCH):
            vecs = unit_vectors(min(BATCH, n - start), seed=start)
            memory.remember_many(
                {"id": f"f{start + i}", "text": texts[start + i], "embedding": v}
                for i, v in enumerate(vecs.tolist()))
    build_s = time.perf_counter() - t0
    del texts
    qs = queries(nq)["light"]
    qv = query_vectors(nq, n)
    items = list(zip(qs, qv.tolist(), strict=True))
    alone = [("zzzz", v) for v in qv.tolist()]
    with Store.open(path, sync="none") as store:
        exact = Memory(store, MemoryConfig(vector_search="exact"))
        auto = Memory(store)  # the default: "auto"
        t0 = time.perf_counter()
        auto.recall(qs[0], embedding=items[0][1], k=10)  # starts the build (from AUTO_MIN)
        first_query_ms = (time.perf_counter() - t0) * 1e3
        building = store.read(lambda v: v.embeddings.build is not None)
        during_ms = None
        if building:  # a writer while the index builds: acknowledged at once
            t = time.perf_counter()
            auto.remember(text="written while the index builds", id="during",
                          embedding=unit_vectors(1, seed=n + 1)[0].tolist())
            during_ms = round((time.perf_counter() - t) * 1e3, 3)
            while store.read(lambda v: v.embeddings.build is not None):
                time.sleep(0.05)
        index_s = time.perf_counter() - t0
        used = store.read(lambda v: v.embeddings.index is not None)

        def run(m: Memory, it: tuple[str, list[float]]) -> list[str]:
            return _ids(m.recall(it[0], embedding=it[1], k=10))

        ms = {"hybrid_exact": _timed(lambda it: run(exact, it), items),
              "hybrid_auto": _timed(lambda it: run(auto, it), items),
              "vector_only_exact": _timed(lambda it: run(exact, it), alone),
              "vector_only_auto": _timed(lambda it: run(auto, it), alone),
              "lexical": _timed(lambda it: exact.recall(it[0], k=10), items)}
        overlap = {"fused": _overlap([run(auto, it) for it in items],
                                     [run(exact, it) for it in items]),
                   "vector_only": _overlap([run(auto, it) for it in alone],
                                           [run(exact, it) for it in alone])}
        rss = current_rss_mib()
        # A recall with a vector must really rank by it: a fact's own vector finds it.
        last = (n - 1) // BATCH * BATCH
        probe = unit_vectors(min(BATCH, n - last), seed=last)[0]
        for m in (exact, auto):
            found = m.recall("zzzz", embedding=probe.tolist(), k=1)
            assert found and found[0].id == f"f{last}", found
    p = {name: _percentiles(v) for name, v in ms.items()}
    p50 = {name: v["p50_ms"] for name, v in p.items()}
    return {
        "system": "holomem", "facts": n, "queries": nq,
        "ingest_facts_per_s": round(n / build_s), "auto_min": AUTO_MIN,
        "first_query_ms": round(first_query_ms, 2),
        "approximate_index_used": used, "index_build_s": round(index_s, 1),
        "remember_during_build_ms": during_ms,
        "rss_mib": round(rss), "resident_bytes_per_fact": round((rss - rss_before) * 2**20 / n),
        "disk_bytes_per_fact": round(_dir_bytes(path) / n),
        "latency": p,
        "recall_at_10_auto_vs_exact": overlap,
        "p50_ratio_hybrid_auto_to_lexical": round(p50["hybrid_auto"] / p50["lexical"], 2),
        "p50_ratio_hybrid_exact_to_lexical": round(p50["hybrid_exact"] / p50["lexical"], 2),
    }


def measure_chroma(n: int, nq: int, workdir: str) -> dict[str, Any]:
    import chromadb  # the peers extra

    texts = corpus(n)
    path = os.path.join(workdir, f"chroma{n}")
    rss_before = current_rss_mib()
    client = chromadb.PersistentClient(path=path)
    col = client.create_collection("facts", metadata={"hnsw:space": "cosine"})
    t0 = time.perf_counter()
    for start in range(0, n, BATCH):
        vecs = unit_vectors(min(BATCH, n - start), seed=start)
        for s in range(0, len(vecs), CHROMA_BATCH):
            part = vecs[s:s + CHROMA_BATCH]
            col.add(ids=[f"f{start + s + i}" for i in range(len(part))],
                    embeddings=part, documents=texts[start + s:start + s + len(part)])
    ingest_s = time.perf_counter() - t0
    del texts
    qv = query_vectors(nq, n)
    items = qv.tolist()
    ms = {"vector_query": _timed(lambda v: col.query(query_embeddings=[v], n_results=10),
                                 items)}
    got = [col.query(query_embeddings=[v], n_results=10)["ids"][0] for v in items]
    rss = current_rss_mib()
    matrix = _all_vectors(n)
    exact = [[f"f{i}" for i in np.argsort(-(matrix @ v))[:10]] for v in qv]
    return {
        "system": f"chroma {chromadb.__version__}", "facts": n, "queries": nq,
        "ingest_facts_per_s": round(n / ingest_s),
        "rss_mib": round(rss), "resident_bytes_per_fact": round((rss - rss_before) * 2**20 / n),
        "disk_bytes_per_fact": round(_dir_bytes(path) / n),
        "latency": {name: _percentiles(v) for name, v in ms.items()},
        "recall_at_10_vs_exact": _overlap(got, exact),
        "note": "a vector query: Chroma has no fusion of text and vector",
    }


def child(spec: str, nq: int, workdir: str) -> dict[str, Any]:
    """One (system, size) measured in a process of its own (its memory its own)."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", spec, "--queries", str(nq),
           "--workdir", workdir, "--vectors", ARGS.vectors]
    if ARGS.blas_threads:
        cmd += ["--blas-threads", str(ARGS.blas_threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def chroma_available() -> bool:
    return importlib.util.find_spec("chromadb") is not None


def main() -> None:
    args = ARGS
    if args.child:
        system, n = args.child.split(":")
        fn = measure_holomem if system == "holomem" else measure_chroma
        print(json.dumps(fn(int(n), args.queries, args.workdir)))
        return
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
    peers = not args.no_peers and chroma_available()
    if not args.no_peers and not peers:
        skipped["chroma"] = "chromadb is not installed (pip install 'holomem-db[peers]')"
    before = machine(tempfile.gettempdir())
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for n in sizes:
            for system in ("holomem", "chroma") if peers else ("holomem",):
                runs.append(child(f"{system}:{n}", args.queries, d))
                print(f"{system} {n}: {json.dumps(runs[-1]['latency'])}", file=sys.stderr)
    ours = {r["facts"]: r for r in runs if r["system"] == "holomem"}

    def ratio(n: int) -> float | None:
        return ours[n]["p50_ratio_hybrid_auto_to_lexical"] if n in ours else None

    overlaps = [r["recall_at_10_auto_vs_exact"]["fused"] for r in ours.values()]
    million = ours.get(1_000_000)
    result = {
        "benchmark": "vector_scale",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {"dim": DIM, "vectors": "seeded unit vectors (caller's; see vector_model)",
                       "texts": "search_bench corpus (24 words, Zipf 5,000-word vocabulary)",
                       "vector_model": ARGS.vectors,
                       "queries": "search_bench light queries, each with a query vector",
                       "k": 10, "fusion": "default", "sync_while_building": "none",
                       "query_vectors_passed_as": "lists of floats",
                       "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS",
                                                              "(unset)"),
                       "mem_available_gib_before": round(available, 1),
                       "peak_rss_mib_of_parent": round(peak_rss_mib())},
        "skipped": skipped,
        "runs": runs,
        "targets": {
            "hybrid auto p50 <= 4x lexical p50 at 20k":
                check(ratio(20_000), "<=", TARGET_RATIO_TO_LEXICAL),
            "hybrid auto p50 <= 4x lexical p50 at 100k":
                check(ratio(100_000), "<=", TARGET_RATIO_TO_LEXICAL),
            "top-10 overlap auto vs exact (fused) >= 0.95 at every size":
                check(min(overlaps) if overlaps else None, ">=", TARGET_OVERLAP),
            "hybrid auto p50_ms at 1M <= 20":
                check(million["latency"]["hybrid_auto"]["p50_ms"] if million else None,
                      "<=", TARGET_P50_MS_AT_1M),
        },
    }
    # A run of 1M facts alone (--sizes "" --million) saves beside the smaller sizes' run.
    emit("vector_scale_1m" if sizes == [1_000_000] else "vector_scale", result, args.save)


if __name__ == "__main__":
    main()
