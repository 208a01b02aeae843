"""Search latency, build and open time, and memory: holomem beside SQLite FTS5 and tantivy.

    python benchmarks/search_bench.py [--sizes 10000,100000] [--queries 500] [--million]

Corpus: seeded synthetic documents of 24 words drawn from a Zipf-distributed
5,000-word vocabulary. Queries: 3-6 words, "heavy" ones drawn from the corpus
distribution (so they usually hold very common words), "light" ones from ranks
100-4999. Every engine answers the same queries for the top 10 by BM25:

- holomem: ``Store.search_documents`` on a store built with ``add_documents`` and
  then closed and reopened (the open replays the journal);
- SQLite FTS5 (stdlib sqlite3, in memory): ``... MATCH 'a OR b' ORDER BY bm25(t) LIMIT 10``;
- tantivy (its Python bindings, optional): the same words as a disjunction.

Each engine runs in its own process, so resident memory is its own: reported are
holomem's whole resident set after opening (in a process that did nothing
else: the build ran in another) and its peak during the open, beside the
SQLite and tantivy processes' peaks while building their in-memory indexes.
``--million`` adds a 1,000,000-document holomem run (open time, search p50,
memory). Prints its targets (at 100,000 documents) as met or missed; writes
benchmarks/results/search_bench.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from benchmarks._common import (  # noqa: E402
    add_save,
    check,
    current_rss_mib,
    emit,
    machine,
    median,
    peak_rss_mib,
    percentile,
)

VOCAB = 5000


def _word(rank: int) -> str:
    letters = "bcdfghjklmnprstvz"
    vowels = "aeiou"
    out = []
    r = rank + 17
    while r:
        out.append(letters[r % len(letters)] + vowels[(r // len(letters)) % len(vowels)])
        r //= len(letters) * len(vowels)
    return "".join(out)


def corpus(n: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCAB + 1) ** 1.07
    p /= p.sum()
    words = [_word(i) for i in range(VOCAB)]
    ranks = rng.choice(VOCAB, size=(n, 24), p=p)
    return [" ".join(words[r] for r in row) for row in ranks]


def queries(n: int, seed: int = 2) -> dict[str, list[str]]:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCAB + 1) ** 1.07
    p /= p.sum()
    words = [_word(i) for i in range(VOCAB)]
    heavy = [" ".join(words[r] for r in rng.choice(VOCAB, size=rng.integers(3, 7), p=p))
             for _ in range(n)]
    light = [" ".join(words[r] for r in rng.integers(100, VOCAB, size=rng.integers(3, 7)))
             for _ in range(n)]
    return {"heavy": heavy, "light": light}


def _latencies(fn, qs: list[str]) -> dict[str, float]:  # type: ignore[no-untyped-def]
    for q in qs[:20]:
        fn(q)
    lat = []
    for q in qs:
        t = time.perf_counter()
        fn(q)
        lat.append(time.perf_counter() - t)
    return {"p50_ms": round(median(lat) * 1e3, 4), "p95_ms": round(percentile(lat, 95) * 1e3, 4)}


def worker_holomem_build(n: int, nq: int, workdir: str) -> dict[str, object]:
    from holomem import Store

    docs = corpus(n)
    t = time.perf_counter()
    with Store.open(os.path.join(workdir, "store"), sync="none") as s:
        for i in range(0, n, 10000):
            s.add_documents([{"id": str(j), "text": docs[j]} for j in range(i, min(n, i + 10000))])
    return {"build_s": round(time.perf_counter() - t, 3)}


def worker_holomem(n: int, nq: int, workdir: str) -> dict[str, object]:
    """Open the store the build worker left (a fresh process: replay), then search."""
    qs = queries(nq)
    from holomem import Store

    base = current_rss_mib()
    t = time.perf_counter()
    s = Store.open(os.path.join(workdir, "store"))
    open_s = time.perf_counter() - t
    total = current_rss_mib()
    out: dict[str, object] = {"open_s": round(open_s, 3), "rss_mib": round(total, 1),
                              "rss_delta_bytes_per_doc": round((total - base) * 1048576 / n, 1),
                              "index_bytes_per_doc": round(s.stats().index_bytes / n, 1),
                              "peak_rss_mib": round(peak_rss_mib(), 1)}
    for kind, qlist in qs.items():
        out[kind] = _latencies(lambda q: s.search_documents(q, 10), qlist)
    s.close()
    return out


def worker_sqlite(n: int, nq: int, workdir: str) -> dict[str, object]:
    import sqlite3

    docs = corpus(n)
    qs = queries(nq)
    base = current_rss_mib()
    t = time.perf_counter()
    con = sqlite3.connect(":memory:")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body)")
    con.executemany("INSERT INTO t VALUES (?, ?)", ((str(i), d) for i, d in enumerate(docs)))
    con.commit()
    build = time.perf_counter() - t
    rss = current_rss_mib() - base
    out: dict[str, object] = {"build_s": round(build, 3), "rss_mib": round(rss, 1),
                              "rss_bytes_per_doc": round(rss * 1048576 / n, 1),
                              "peak_rss_mib": round(peak_rss_mib(), 1)}

    def search(q: str) -> list[str]:
        m = " OR ".join(q.split())
        return [r[0] for r in con.execute(
            "SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10", (m,))]

    for kind, qlist in qs.items():
        out[kind] = _latencies(search, qlist)
    return out


def worker_tantivy(n: int, nq: int, workdir: str) -> dict[str, object]:
    try:
        import tantivy
    except ImportError:
        return {"skipped": "tantivy is not installed (pip install tantivy)"}
    docs = corpus(n)
    qs = queries(nq)
    base = current_rss_mib()
    t = time.perf_counter()
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("id", stored=True, tokenizer_name="raw")
    sb.add_text_field("body", stored=False)
    schema = sb.build()
    index = tantivy.Index(schema, path=None)
    writer = index.writer(heap_size=256 * 1024 * 1024, num_threads=1)
    for i, d in enumerate(docs):
        writer.add_document(tantivy.Document(id=str(i), body=d))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    build = time.perf_counter() - t
    rss = current_rss_mib() - base
    out: dict[str, object] = {"build_s": round(build, 3), "rss_mib": round(rss, 1),
                              "rss_bytes_per_doc": round(rss * 1048576 / n, 1),
                              "peak_rss_mib": round(peak_rss_mib(), 1)}

    def search(q: str) -> list[object]:
        query = index.parse_query(q, ["body"])
        return [a for _, a in searcher.search(query, 10).hits]

    for kind, qlist in qs.items():
        out[kind] = _latencies(search, qlist)
    return out


WORKERS = {"holomem_build": worker_holomem_build, "holomem": worker_holomem,
           "sqlite_fts5": worker_sqlite, "tantivy": worker_tantivy}


def _spawn(engine: str, n: int, nq: int, workdir: str) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", engine, "--n", str(n), "--queries", str(nq),
         "--workdir", workdir], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def run_worker(engine: str, n: int, nq: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        if engine != "holomem":
            return _spawn(engine, n, nq, d)
        built = _spawn("holomem_build", n, nq, d)
        return {**built, **_spawn("holomem", n, nq, d)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--million", action="store_true", help="add a 1,000,000-document run")
    add_save(ap, "search_bench")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.n, args.queries, args.workdir)))
        return
    sizes = [int(x) for x in args.sizes.split(",")]
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for n in sizes:
        runs[str(n)] = {engine: run_worker(engine, n, args.queries)
                        for engine in ("holomem", "sqlite_fts5", "tantivy")}
    if args.million:
        runs["1000000"] = {"holomem": run_worker("holomem", 1_000_000, args.queries)}
    ratios: dict[str, dict[str, float]] = {}
    for n, r in runs.items():
        h, sq, tv = (r.get(e, {}) for e in ("holomem", "sqlite_fts5", "tantivy"))
        pairs = {
            "heavy_p50_vs_sqlite": (h, sq, "heavy"), "light_p50_vs_sqlite": (h, sq, "light"),
            "heavy_p50_vs_tantivy": (h, tv, "heavy"), "light_p50_vs_tantivy": (h, tv, "light"),
        }
        ratio: dict[str, float] = {}
        for name, (a, b, kind) in pairs.items():
            if isinstance(a.get(kind), dict) and isinstance(b.get(kind), dict):
                ratio[name] = round(a[kind]["p50_ms"] / b[kind]["p50_ms"], 3)
        if "open_s" in h and "build_s" in sq:
            ratio["open_vs_sqlite_build"] = round(h["open_s"] / sq["build_s"], 3)
            ratio["rss_after_open_vs_sqlite_peak"] = round(h["rss_mib"] / sq["peak_rss_mib"], 3)
            ratio["peak_rss_vs_sqlite_peak"] = round(h["peak_rss_mib"] / sq["peak_rss_mib"], 3)
        ratios[n] = ratio
    at = ratios.get("100000", {})
    emit("search_bench", {
        "benchmark": "search_bench",
        "machine": machine(tempfile.gettempdir()),
        "conditions": {"docs": "24 words, Zipf(1.07) over 5,000 words", "queries": args.queries,
                       "k": 10, "holomem_sync_during_build": "none (bulk load)",
                       "sqlite": "in-memory FTS5, bm25()", "tantivy": "in RAM, 1 thread"},
        "runs": runs,
        "ratios": ratios,
        "targets_at_100000": {
            "heavy_p50_vs_tantivy": check(at.get("heavy_p50_vs_tantivy"), "<=", 1.5),
            "heavy_p50_vs_sqlite": check(at.get("heavy_p50_vs_sqlite"), "<=", 0.1),
            "open_vs_sqlite_build": check(at.get("open_vs_sqlite_build"), "<=", 2),
            "rss_after_open_vs_sqlite_peak": check(at.get("rss_after_open_vs_sqlite_peak"),
                                                   "<=", 2)},
    }, args.save)


if __name__ == "__main__":
    main()
