"""The scale curve: what a store of 1,000 to 1,000,000 facts costs, beside SQLite FTS5 and tantivy.

    python benchmarks/scale.py [--sizes 1000,10000,100000] [--million] [--queries 300]
                               [--save]
    python benchmarks/scale.py --million --store DIR [--baseline TREE] [--rounds 3]

For each size, in fresh processes (so that each peak resident set is that
step's own):

- **ingest**: ``Memory.remember_many`` in batches of 5,000, ``sync="none"``, of
  synthetic facts of 8-30 words drawn from a Zipf(1.07) vocabulary of 30,000
  words, one fact in ten with a subject (two facts per subject) under
  ``latest-by-subject``, no checkpoint written: facts/s, peak RSS, bytes on disk
  per fact;
- **open**: ``Store.open`` replaying the journal (no checkpoint), its time, the
  resident bytes it added per fact and the process's peak; then, when the store
  can write checkpoints (``Store.checkpoint``), the time and size of writing one
  and, in another process, the time of an open that loads it;
- **queries**: ``Memory.recall(q)`` (k = 10) and ``Store.search_documents(q, 10)``
  p50/p99 over 3-6-word queries drawn from the corpus distribution ("common
  words"), interleaved with tantivy (its Python binding, in RAM, one thread)
  answering the same query over the same texts in the same process after
  holomem's memory was measured, so their ratio is measured under the same load;
- **the search corpus** of benchmarks/search_bench.py (24 words, Zipf over 5,000
  words) through ``Store.add_documents``: search p50 beside tantivy's, interleaved;
- **SQLite FTS5** (a WAL file, ``synchronous=NORMAL``) and **tantivy** (an index
  directory) building from the same fact texts: rows/s, peak RSS, bytes on disk
  per fact, and FTS5's ``ORDER BY bm25 LIMIT 10`` p50 over the same queries.

``--store DIR`` measures only the queries, on a store kept between runs: ``DIR/facts``
(built there by the ingest step at ``--sizes``' one size, or 1,000,000 with
``--million``, when it does not exist yet; a checkpoint is written at its first open so
that later opens load it). In a fresh process, after one warm pass over every query (so
the impact groups the queries read are built, see holomem/projections/pruning.py),
recall (k = 10) and search_documents beside tantivy over the same texts, interleaved
query by query, wall and CPU time, over three sets: ``corpus`` (the curve's 3-6-word
queries), ``short`` (2-4 words from the corpus distribution) and ``commonest`` (2-4
distinct words among the 12 commonest: the slowest queries there are). ``--baseline
TREE`` (a checkout of another commit) runs the same step with that build, alternately
with this one, ``--rounds`` times each, and gives this / baseline ratios of the medians.
With ``--save`` it writes benchmarks/results/scale_queries.json.

``--million`` adds 1,000,000 facts (many minutes; about 2 GB of disk). Targets
(issue 17 at 1,000,000 facts; issue 16's search row at 10k, 100k and 1M) are
printed met, missed or not measured. ``--save`` writes
benchmarks/results/scale.json and the curves, benchmarks/results/scale.png
(benchmarks/plot.py). ``--add A.json,B.json`` keeps the runs of earlier printed
results for sizes not measured now (``--sizes ""`` measures none: it merges a
``--million`` run made on its own with a default one).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
if "--tree" in sys.argv:  # a worker for another build: its holomem first
    sys.path.insert(0, os.path.abspath(sys.argv[sys.argv.index("--tree") + 1]))

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
from benchmarks.search_bench import _word  # noqa: E402
from benchmarks.search_bench import corpus as search_corpus  # noqa: E402
from benchmarks.search_bench import queries as search_queries  # noqa: E402

VOCAB = 30_000
BATCH = 5000
NOW = 1_800_000_000_000
#: Store.open options that write no checkpoint (so the next open is a full replay)
NO_CHECKPOINTS: dict[str, Any] = {"checkpoint_every": None, "checkpoint_close_min": 1 << 62}


def _zipf(vocab: int) -> np.ndarray:
    p = 1.0 / np.arange(1, vocab + 1) ** 1.07
    out: np.ndarray = p / p.sum()
    return out


def fact_texts(n: int, seed: int = 7) -> list[str]:
    """n facts of 8-30 words from a Zipf(1.07) vocabulary of 30,000 words."""
    rng = np.random.default_rng(seed)
    words = [_word(i) for i in range(VOCAB)]
    lengths = rng.integers(8, 31, size=n)
    flat = rng.choice(VOCAB, size=int(lengths.sum()), p=_zipf(VOCAB)).tolist()
    out, pos = [], 0
    for length in lengths.tolist():
        out.append(" ".join(words[r] for r in flat[pos:pos + length]))
        pos += length
    return out


def fact_queries(n: int, seed: int = 3) -> list[str]:
    """3-6-word queries drawn from the corpus distribution (common words)."""
    rng = np.random.default_rng(seed)
    words = [_word(i) for i in range(VOCAB)]
    p = _zipf(VOCAB)
    return [" ".join(words[r] for r in rng.choice(VOCAB, size=int(rng.integers(3, 7)), p=p))
            for _ in range(n)]


def short_queries(n: int, seed: int = 5) -> list[str]:
    """2-4-word queries drawn from the corpus distribution."""
    rng = np.random.default_rng(seed)
    words = [_word(i) for i in range(VOCAB)]
    p = _zipf(VOCAB)
    return [" ".join(words[r] for r in rng.choice(VOCAB, size=int(rng.integers(2, 5)), p=p))
            for _ in range(n)]


#: The commonest words, of which the ``commonest`` queries take 2-4.
COMMONEST = 12


def commonest_queries(n: int, seed: int = 1) -> list[str]:
    """2-4 distinct words among the COMMONEST commonest: the queries whose top k takes
    the most postings to be sure of (each word is in a large share of the facts)."""
    rng = np.random.default_rng(seed)
    words = [_word(i) for i in range(COMMONEST)]
    return [" ".join(words[r] for r in rng.choice(COMMONEST, size=int(rng.integers(2, 5)),
                                                   replace=False))
            for _ in range(n)]


QUERY_SETS = {"corpus": fact_queries, "short": short_queries, "commonest": commonest_queries}


def _du(path: str) -> int:
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(d, f))
    return total


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _pcts(lat: list[float]) -> dict[str, float]:
    return {"p50_ms": round(median(lat) * 1e3, 4), "p99_ms": round(percentile(lat, 99) * 1e3, 4)}


# -- workers (each runs in its own process) ----------------------------------------------
def worker_ingest(n: int, workdir: str, nq: int) -> dict[str, Any]:
    from holomem import ManualClock, Memory, MemoryConfig, Store

    texts = fact_texts(n)
    path = os.path.join(workdir, "facts")
    t, c = time.perf_counter(), _cpu()
    with Store.open(path, sync="none", **NO_CHECKPOINTS) as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"),
                        clock=ManualClock(NOW))
        for lo in range(0, n, BATCH):
            batch: list[dict[str, Any]] = []
            for i in range(lo, min(n, lo + BATCH)):
                fact: dict[str, Any] = {"id": f"f{i}", "text": texts[i]}
                if i % 10 == 0:
                    fact["subject"] = f"s{i // 20}"
                batch.append(fact)
            memory.remember_many(batch)
    wall = time.perf_counter() - t
    cpu = _cpu() - c
    return {"facts_per_s": round(n / wall, 1), "seconds": round(wall, 2),
            "cpu_s": round(cpu, 2), "facts_per_cpu_s": round(n / max(cpu, 1e-9), 1),
            "peak_rss_mib": round(peak_rss_mib(), 1),
            "disk_bytes_per_fact": round(_du(path) / n, 1)}


def _tantivy_index(texts: list[str], path: str | None) -> Any:
    import tantivy

    sb = tantivy.SchemaBuilder()
    sb.add_text_field("body", stored=False)
    index = tantivy.Index(sb.build(), path=path)
    writer = index.writer(heap_size=256 * 1024 * 1024, num_threads=1)
    for text in texts:
        writer.add_document(tantivy.Document(body=text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index


def _interleaved(fns: dict[str, Any], qs: list[str], warm: int = 20
                 ) -> dict[str, dict[str, float]]:
    """p50/p99 of each of ``fns`` over ``qs``, query by query in turn, after ``warm``
    queries each; wall and CPU time; the ratios of each to the last one's."""
    for q in qs[:warm]:
        for fn in fns.values():
            fn(q)
    lat: dict[str, list[float]] = {name: [] for name in fns}
    cpu: dict[str, list[float]] = {name: [] for name in fns}
    for q in qs:
        for name, fn in fns.items():
            t, c = time.perf_counter(), time.process_time()
            fn(q)
            lat[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    out = {name: {**_pcts(v), **{f"cpu_{k}": x for k, x in _pcts(cpu[name]).items()}}
           for name, v in lat.items()}
    names = list(fns)
    for name in names[:-1]:
        ratios = [a / b for a, b in zip(lat[name], lat[names[-1]], strict=True)]
        out[name][f"p50_over_{names[-1]}"] = round(median(lat[name]) / median(lat[names[-1]]), 3)
        out[name][f"median_ratio_{names[-1]}"] = round(median(ratios), 3)
    return out


def worker_open(n: int, workdir: str, nq: int) -> dict[str, Any]:
    """Open (replay), resident memory, recall and search beside tantivy; a checkpoint."""
    from holomem import ManualClock, Memory, Store

    path = os.path.join(workdir, "facts")
    base = current_rss_mib()
    t, c = time.perf_counter(), _cpu()
    store = Store.open(path, **NO_CHECKPOINTS)
    open_s, open_cpu = time.perf_counter() - t, _cpu() - c
    opened_by = store.stats().opened_by
    resident = current_rss_mib() - base
    out: dict[str, Any] = {"open_s": round(open_s, 3), "open_cpu_s": round(open_cpu, 3),
                           "opened_by": opened_by,
                           "resident_bytes_per_fact": round(resident * 1048576 / n, 1),
                           "index_bytes_per_fact": round(store.stats().index_bytes / n, 1)}
    memory = Memory(store, clock=ManualClock(NOW))
    qs = fact_queries(nq)
    lat = _interleaved({"recall": memory.recall,
                        "search": lambda q: store.search_documents(q, 10)}, qs)
    out["recall"], out["search"] = lat["recall"], lat["search"]
    out["peak_rss_mib"] = round(peak_rss_mib(), 1)  # before anything else is built here
    if hasattr(store, "checkpoint"):
        t = time.perf_counter()
        stats = store.checkpoint()
        out["checkpoint_write_s"] = round(time.perf_counter() - t, 3)
        if stats is not None:
            out["checkpoint_bytes"] = stats.file_bytes
            out["checkpoint_bytes_per_fact"] = round(stats.file_bytes / n, 1)
            out["checkpoint_writer_pause_s"] = round(stats.pause_seconds, 4)
    store.close()
    try:
        index = _tantivy_index(fact_texts(n), None)
    except ImportError:
        out["tantivy"] = {"skipped": "tantivy is not installed"}
        return out
    searcher = index.searcher()
    store = Store.open(path, **NO_CHECKPOINTS)
    tv = _interleaved({"holomem": lambda q: store.search_documents(q, 10),
                       "tantivy": lambda q: searcher.search(index.parse_query(q, ["body"]),
                                                            10).hits}, qs)
    store.close()
    out["search_vs_tantivy"] = tv
    return out


def worker_queries(n: int, workdir: str, nq: int) -> dict[str, Any]:
    """Recall and search beside tantivy over each of QUERY_SETS, on the kept store
    ``workdir/facts`` (``--store``), after a warm pass."""
    from holomem import ManualClock, Memory, Store

    t = time.perf_counter()
    store = Store.open(os.path.join(workdir, "facts"), **NO_CHECKPOINTS)
    out: dict[str, Any] = {"open_s": round(time.perf_counter() - t, 3),
                           "opened_by": store.stats().opened_by}
    if store.stats().documents != n:
        raise SystemExit(f"{workdir}/facts holds {store.stats().documents} facts, not {n}")
    if out["opened_by"] == "replay" and hasattr(store, "checkpoint"):
        store.checkpoint()  # so that the next run opens from it
    index = store.stats().index_bytes
    memory = Memory(store, clock=ManualClock(NOW))
    fns: dict[str, Any] = {"recall": memory.recall,
                           "search": lambda q: store.search_documents(q, 10)}
    try:
        tv = _tantivy_index(fact_texts(n), None)
    except ImportError:
        out["tantivy"] = {"skipped": "tantivy is not installed"}
    else:
        searcher = tv.searcher()
        fns["tantivy"] = lambda q: searcher.search(tv.parse_query(q, ["body"]), 10).hits
    for name, make in QUERY_SETS.items():
        qs = make(nq)
        out[name] = _interleaved(fns, qs, warm=len(qs))
    # What the warm passes built (impact groups, dense columns) beside the postings.
    out["index_bytes_per_fact"] = round(index / n, 1)
    out["index_bytes_per_fact_after"] = round(store.stats().index_bytes / n, 1)
    store.close()
    return out


def worker_open_checkpoint(n: int, workdir: str, nq: int) -> dict[str, Any]:
    from holomem import Store

    base = current_rss_mib()
    t = time.perf_counter()
    with Store.open(os.path.join(workdir, "facts"), **NO_CHECKPOINTS) as store:
        took = time.perf_counter() - t
        return {"open_with_checkpoint_s": round(took, 3),
                "opened_by": store.stats().opened_by,
                "resident_bytes_per_fact": round((current_rss_mib() - base) * 1048576 / n, 1),
                "peak_rss_mib": round(peak_rss_mib(), 1)}


def worker_docs(n: int, workdir: str, nq: int) -> dict[str, Any]:
    """search_bench.py's corpus through add_documents, reopened; search beside tantivy."""
    from holomem import Store

    texts = search_corpus(n)
    path = os.path.join(workdir, "docs")
    with Store.open(path, sync="none", **NO_CHECKPOINTS) as s:
        for lo in range(0, n, 10000):
            s.add_documents([{"id": str(j), "text": texts[j]}
                             for j in range(lo, min(n, lo + 10000))])
    qs = search_queries(nq)["heavy"]
    store = Store.open(path, **NO_CHECKPOINTS)
    try:
        index = _tantivy_index(texts, None)
    except ImportError:
        return {"skipped": "tantivy is not installed"}
    searcher = index.searcher()
    out = _interleaved({"holomem": lambda q: store.search_documents(q, 10),
                        "tantivy": lambda q: searcher.search(index.parse_query(q, ["body"]),
                                                             10).hits}, qs)
    store.close()
    shutil.rmtree(path)
    return out


def worker_sqlite(n: int, workdir: str, nq: int) -> dict[str, Any]:
    import sqlite3

    texts = fact_texts(n)
    path = os.path.join(workdir, "fts5.db")
    t = time.perf_counter()
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("CREATE VIRTUAL TABLE t USING fts5(id UNINDEXED, body)")
    for lo in range(0, n, BATCH):
        con.executemany("INSERT INTO t VALUES (?, ?)",
                        ((f"f{i}", texts[i]) for i in range(lo, min(n, lo + BATCH))))
        con.commit()
    build = time.perf_counter() - t
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    disk = _du(workdir)
    qs = fact_queries(min(nq, 100))

    def search(q: str) -> list[str]:
        return [r[0] for r in con.execute(
            "SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT 10",
            (" OR ".join(q.split()),))]

    lat = _interleaved({"fts5": search}, qs)
    con.close()
    return {"rows_per_s": round(n / build, 1), "peak_rss_mib": round(peak_rss_mib(), 1),
            "disk_bytes_per_fact": round(disk / n, 1), "search": lat["fts5"]}


def worker_tantivy(n: int, workdir: str, nq: int) -> dict[str, Any]:
    texts = fact_texts(n)
    path = os.path.join(workdir, "tantivy")
    os.makedirs(path)
    t = time.perf_counter()
    try:
        _tantivy_index(texts, path)
    except ImportError:
        return {"skipped": "tantivy is not installed"}
    build = time.perf_counter() - t
    return {"rows_per_s": round(n / build, 1), "peak_rss_mib": round(peak_rss_mib(), 1),
            "disk_bytes_per_fact": round(_du(path) / n, 1)}


WORKERS = {"ingest": worker_ingest, "open": worker_open,
           "open_checkpoint": worker_open_checkpoint, "docs": worker_docs,
           "sqlite": worker_sqlite, "tantivy": worker_tantivy, "queries": worker_queries}


def _spawn(worker: str, n: int, workdir: str, nq: int, tree: str = ROOT) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--worker", worker, "--n", str(n),
         "--queries", str(nq), "--workdir", workdir, "--tree", tree],
        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": tree})
    if proc.returncode != 0:
        return {"error": proc.stderr[-2000:]}
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    return result


def run_size(n: int, nq: int, base: str, skip: set[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"load_before": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory(dir=base) as d:
        row["ingest"] = _spawn("ingest", n, d, nq)
        row["open"] = _spawn("open", n, d, nq)
        if "checkpoint_write_s" in row["open"]:
            row["open_checkpoint"] = _spawn("open_checkpoint", n, d, nq)
    for worker in ("docs", "sqlite", "tantivy"):
        if worker in skip:
            row[worker] = {"skipped": "--skip"}
            continue
        with tempfile.TemporaryDirectory(dir=base) as d:
            row[worker] = _spawn(worker, n, d, nq)
    print(f"scale: {n} facts done", file=sys.stderr)
    return row


def _get(row: dict[str, Any], *keys: str) -> Any:
    cur: Any = row
    for key in keys:
        if not isinstance(cur, dict) or key not in cur:
            return None
        cur = cur[key]
    return cur


def targets(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    m = runs.get("1000000", {})
    peak = [v for v in (_get(m, "ingest", "peak_rss_mib"), _get(m, "open", "peak_rss_mib"))
            if v is not None]
    out["peak_rss_mib@1M"] = check(max(peak) if peak else None, "<=", 1024)
    out["resident_bytes_per_fact@1M"] = check(_get(m, "open", "resident_bytes_per_fact"),
                                              "<=", 600)
    out["recall_p50_ms@1M"] = check(_get(m, "open", "recall", "p50_ms"), "<=", 3)
    out["recall_p99_ms@1M"] = check(_get(m, "open", "recall", "p99_ms"), "<=", 15)
    out["ingest_facts_per_s@1M"] = check(_get(m, "ingest", "facts_per_s"), ">=", 50_000)
    ck, replay = _get(m, "open_checkpoint", "open_with_checkpoint_s"), _get(m, "open", "open_s")
    out["open_with_checkpoint_s@1M"] = check(ck, "<=", 2)
    out["open_checkpoint_over_replay@1M"] = check(
        round(ck / replay, 3) if ck is not None and replay else None, "<=", 0.15)
    out["checkpoint_write_s@1M"] = check(_get(m, "open", "checkpoint_write_s"), "<=", 10)
    for n in ("10000", "100000", "1000000"):
        r = runs.get(n, {})
        out[f"facts_search_p50_over_tantivy@{n}"] = check(
            _get(r, "open", "search_vs_tantivy", "holomem", "p50_over_tantivy"), "<=", 1.2)
        out[f"docs_search_p50_over_tantivy@{n}"] = check(
            _get(r, "docs", "holomem", "p50_over_tantivy"), "<=", 1.2)
    return out


#: The figures of the queries step compared between two builds.
_FIGURES = ("p50_ms", "p99_ms", "cpu_p50_ms", "cpu_p99_ms")


def _medians(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each query set's figures, the median over ``runs`` (one queries step each)."""
    out: dict[str, Any] = {}
    for name in QUERY_SETS:
        out[name] = {fn: {f: round(median([r[name][fn][f] for r in runs]), 4)
                          for f in _FIGURES} for fn in runs[0][name]}
        if "tantivy" in runs[0][name]:
            for fn in ("recall", "search"):
                out[name][fn]["p50_over_tantivy"] = round(
                    out[name][fn]["p50_ms"] / out[name]["tantivy"]["p50_ms"], 3)
    return out


def kept_store(args: argparse.Namespace, sizes: list[int]) -> None:
    """``--store``: the queries step on a store kept in ``args.store`` (see the module
    docstring), for this build and ``--baseline``'s, alternately."""
    if len(sizes) != 1:
        raise SystemExit("--store measures one size: --sizes N or --million")
    n, workdir = sizes[0], os.path.abspath(args.store)
    info = machine(workdir)
    built = None
    if not os.path.exists(os.path.join(workdir, "facts")):
        os.makedirs(workdir, exist_ok=True)
        built = _spawn("ingest", n, workdir, args.queries)
        if "error" in built:
            raise SystemExit(built["error"])
    trees = {"this": ROOT}
    if args.baseline:
        trees = {"baseline": os.path.abspath(args.baseline), "this": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            got = _spawn("queries", n, workdir, args.queries, tree)
            if "error" in got:
                raise SystemExit(got["error"])
            runs[name].append(got)
    sides = {name: _medians(rs) for name, rs in runs.items()}
    this = sides["this"]
    result: dict[str, Any] = {
        "benchmark": "scale_queries", "machine": info,
        "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "conditions": {
            "store": f"{workdir}/facts, {n} facts built by this script's ingest step",
            "queries": f"{args.queries} per set, after a warm pass over them; k = 10; "
                       "corpus: 3-6 words from the corpus distribution; short: 2-4 of "
                       f"them; commonest: 2-4 distinct words of the {COMMONEST} commonest",
            "rounds": f"{args.rounds} fresh processes per build, alternately; medians"},
        "built": built, "this": this, "runs": runs,
    }
    if args.baseline:
        result["baseline_tree"] = trees["baseline"]
        result["baseline"] = sides["baseline"]
        result["this_over_baseline"] = {
            name: {fn: {f: round(this[name][fn][f] / sides["baseline"][name][fn][f], 3)
                        for f in _FIGURES if sides["baseline"][name][fn][f]}
                   for fn in ("recall", "search")} for name in this}
    at = f"@{n // 1_000_000}M" if n % 1_000_000 == 0 else f"@{n}"
    targets: dict[str, Any] = {}
    for name, got in this.items():
        targets[f"recall_p50_ms{at}[{name}]"] = check(got["recall"]["p50_ms"], "<=", 3)
        targets[f"recall_p99_ms{at}[{name}]"] = check(got["recall"]["p99_ms"], "<=", 15)
        targets[f"search_p50_over_tantivy{at}[{name}]"] = check(
            got["search"].get("p50_over_tantivy"), "<=", 1.2)
    result["targets"] = targets
    emit("scale_queries", result, args.save)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--million", action="store_true", help="add a 1,000,000-fact run")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--skip", default="", help="comma-separated contenders to leave out at "
                    "1,000,000 facts: docs, sqlite, tantivy (the on-disk build)")
    ap.add_argument("--add", default=None, metavar="RESULT.json[,...]",
                    help="keep the runs of earlier runs' printed JSON (sizes not measured "
                         "now), e.g. a --million run made separately; their machine and load "
                         "are kept under 'added_from'")
    ap.add_argument("--dir", default=None, help="where the stores are built (a temporary "
                    "directory under it; default: the system's)")
    ap.add_argument("--store", default=None, metavar="DIR",
                    help="measure only the queries, on the store DIR/facts (built there "
                         "when absent, at the one size given) kept between runs")
    ap.add_argument("--baseline", default=None, metavar="TREE",
                    help="with --store: a checkout of another build, measured alternately "
                         "with this one")
    ap.add_argument("--rounds", type=int, default=1,
                    help="with --store: queries steps per build (medians)")
    add_save(ap, "scale")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--workdir", help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(WORKERS[args.worker](args.n, args.workdir, args.queries)))
        return
    sizes = [int(x) for x in args.sizes.split(",") if x]
    if args.million and 1_000_000 not in sizes:
        sizes.append(1_000_000)
    if args.store:
        kept_store(args, [1_000_000] if args.million else sizes)
        return
    base = args.dir or tempfile.gettempdir()
    started = time.perf_counter()
    info = machine(base)
    skip = {x for x in args.skip.split(",") if x}
    runs = {str(n): run_size(n, args.queries, base, skip if n >= 1_000_000 else set())
            for n in sizes}
    added: list[dict[str, Any]] = []
    for name in [x for x in (args.add or "").split(",") if x]:
        with open(name, encoding="utf-8") as f:
            earlier = json.load(f)
        added.append({"machine": earlier.get("machine"), "seconds": earlier.get("seconds"),
                      "load_at_end": earlier.get("load_at_end"), "sizes": []})
        for n, row in earlier.get("runs", {}).items():
            if n not in runs:
                runs[n] = row
                added[-1]["sizes"].append(n)
    runs = dict(sorted(runs.items(), key=lambda kv: int(kv[0])))
    result = {
        "benchmark": "scale",
        "machine": info,
        "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "seconds": round(time.perf_counter() - started, 1),
        "conditions": {
            "facts": "8-30 words, Zipf(1.07) over 30,000 words; 1 in 10 with a subject "
                     "(2 facts per subject), latest-by-subject; remember_many batches of "
                     f"{BATCH}, sync='none'",
            "queries": f"{args.queries} of 3-6 words from the corpus distribution; k = 10",
            "docs": "benchmarks/search_bench.py's corpus (24 words, Zipf over 5,000), "
                    "heavy queries, add_documents",
            "tantivy": "Python binding, in RAM for latency (one thread), on disk for size",
            "sqlite": "FTS5 in a WAL file, synchronous=NORMAL, bm25() LIMIT 10",
            "checkpoint": "none during ingest; Store.checkpoint() after the replayed "
                          "open's queries, then a fresh process opens from it"},
        "runs": runs,
        "targets": targets(runs),
    }
    if added:
        result["added_from"] = added
    emit("scale", result, args.save)
    if args.save:
        from benchmarks.plot import save_figure, scale_curve

        print(f"plot: {save_figure(scale_curve({'scale': result}, []), 'scale.png')}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
