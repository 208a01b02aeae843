"""Recall restricted to a namespace or by a metadata filter, beside unrestricted recall,
and export+import (issue 13).

    python benchmarks/namespaces.py [--facts 100000] [--namespaces 1000] [--queries 300]
                                    [--quick] [--profile] [--save]

Corpus (seeded): facts of 8-30 words drawn from the Zipf(1.07) vocabulary of
``search_bench``; each fact in one of ``--namespaces`` namespaces
``["org<j % 10>", "user<j>"]`` (``j`` uniform, so about 100 facts per namespace at the
defaults), one in ten with a subject, and metadata ``{"bucket": i % 100, "source":
..., "turn": i}`` on every fact, so that ``{"metadata": {"bucket": b}}`` holds for 1 %.
Built with ``remember_many`` in batches of 5,000 on a store opened with
``sync="none"``, then closed and reopened (a replay), and queried through
``Memory.recall`` (k = 10, default configuration).

Queries are the heavy (corpus-distributed words) and light (ranks 100-4999) sets of
``search_bench``. For every query, interleaved and in a rotating order, one recall of
each kind:

- ``all``: unrestricted;
- ``namespace``: ``namespace`` = one namespace, drawn at random per query;
- ``org_prefix``: ``namespace`` = ``["org<m>"]``, a prefix over about 10 % of the facts;
- ``filter_1pct``: ``filter`` = ``{"metadata": {"bucket": b}}``, b random per query;
- ``filter_50pct``: ``filter`` = ``{"metadata": {"bucket": {"$lt": 50}}}``.

Before any of them, the first namespace recall and the first filtered recall are timed
once on their own (the metadata index is built on first use). Reported: p50 / p90 /
p99 per kind and query set, each kind's p50 over ``all``'s p50 (measured in the same
run, side by side), and the median of the per-query ratios.

Export+import: when ``Memory`` has ``export`` and ``import_``, every record of
``export()`` is collected, then ``import_`` restores them into a new, empty store
(sync "full", the default); facts/s = facts / (export s + import s), with a check that
the target holds as many documents as the source, and the JSON Lines encode and decode
of the records timed on the side. Without them, that measure is reported as not
available.

Targets (issue 13, at 100,000 facts in 1,000 namespaces): ``namespace`` p50 at most
0.5x ``all``; ``filter_1pct`` p50 at most 0.5x ``all`` (each judged for the heavy and
the light queries); export+import at least 20,000 facts/s. ``--quick`` runs 5,000 facts
in 50 namespaces with 50 queries per set (a smoke run; its verdicts mean nothing).
``--profile`` prints cProfile's heaviest functions of the namespace and filtered
recalls to stderr. Prints one JSON document; saves it as
benchmarks/results/namespaces.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from benchmarks._common import machine, median, percentile, save  # noqa: E402
from benchmarks.search_bench import VOCAB, _word, queries  # noqa: E402
from holomem import Memory, Store  # noqa: E402

TARGET_NAMESPACE_RATIO = 0.5
TARGET_FILTER_RATIO = 0.5
TARGET_EXPORT_IMPORT_PER_S = 20_000.0
BATCH = 5000
ORGS = 10
BUCKETS = 100
SOURCES = ("chat", "email", "doc", "note", "calendar")
KINDS = ("all", "namespace", "org_prefix", "filter_1pct", "filter_50pct")


def namespace_of(j: int) -> list[str]:
    return [f"org{j % ORGS}", f"user{j}"]


def facts(n: int, namespaces: int, seed: int = 13) -> list[dict[str, Any]]:
    """The corpus: ``n`` remember inputs over ``namespaces`` namespaces."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, VOCAB + 1) ** 1.07
    p /= p.sum()
    words = [_word(i) for i in range(VOCAB)]
    lengths = rng.integers(8, 31, size=n)
    ranks = rng.choice(VOCAB, size=int(lengths.sum()), p=p)
    owner = rng.integers(0, namespaces, size=n)
    source = rng.integers(0, len(SOURCES), size=n)
    topic = rng.integers(0, 50, size=n)
    out = []
    at = 0
    for i in range(n):
        size = int(lengths[i])
        fact: dict[str, Any] = {
            "id": f"f{i}",
            "text": " ".join(words[r] for r in ranks[at:at + size]),
            "namespace": namespace_of(int(owner[i])),
            "metadata": {"bucket": i % BUCKETS, "source": SOURCES[int(source[i])], "turn": i},
        }
        at += size
        if i % 10 == 0:
            fact["subject"] = f"topic{int(topic[i])}"
        out.append(fact)
    return out


def build(path: str, corpus: list[dict[str, Any]]) -> float:
    """Seconds to remember the corpus in batches on a sync="none" store."""
    t = time.perf_counter()
    with Store.open(path, sync="none") as store:
        memory = Memory(store)
        for i in range(0, len(corpus), BATCH):
            memory.remember_many(corpus[i:i + BATCH])
    return time.perf_counter() - t


def options(kind: str, rng: np.random.Generator, namespaces: int) -> dict[str, Any]:
    if kind == "namespace":
        return {"namespace": namespace_of(int(rng.integers(namespaces)))}
    if kind == "org_prefix":
        return {"namespace": [f"org{int(rng.integers(ORGS))}"]}
    if kind == "filter_1pct":
        return {"filter": {"metadata": {"bucket": int(rng.integers(BUCKETS))}}}
    if kind == "filter_50pct":
        return {"filter": {"metadata": {"bucket": {"$lt": BUCKETS // 2}}}}
    return {}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def latencies(xs: list[float]) -> dict[str, float]:
    return {f"p{p}_ms": round(percentile(xs, p) * 1e3, 3) for p in (50, 90, 99)}


def recall_runs(memory: Memory, qsets: dict[str, list[str]], namespaces: int
                ) -> dict[str, Any]:
    """Every kind for every query, interleaved in a rotating order."""
    rng = np.random.default_rng(7)
    out: dict[str, Any] = {}
    for qkind, qs in qsets.items():
        for q in qs[:10]:  # warm up every path (caches, allocator)
            for kind in KINDS:
                memory.recall(q, options(kind, rng, namespaces))
        lat: dict[str, list[float]] = {kind: [] for kind in KINDS}
        found: dict[str, list[int]] = {kind: [] for kind in KINDS}
        for n, q in enumerate(qs):
            order = KINDS[n % len(KINDS):] + KINDS[:n % len(KINDS)]
            for kind in order:
                o = options(kind, rng, namespaces)
                t = time.perf_counter()
                res = memory.recall(q, o)
                s = time.perf_counter() - t
                lat[kind].append(s)
                found[kind].append(len(res))
        base = median(lat["all"])
        per_kind: dict[str, Any] = {}
        for kind in KINDS:
            row: dict[str, Any] = {**latencies(lat[kind]),
                                   "mean_results": round(float(np.mean(found[kind])), 2)}
            if kind != "all":
                row["p50_over_all"] = round(median(lat[kind]) / base, 3)
                row["median_per_query_ratio"] = round(
                    median([a / b for a, b in zip(lat[kind], lat["all"], strict=True)]), 3)
            per_kind[kind] = row
        out[qkind] = per_kind
    return out


def namespace_sizes(memory: Memory) -> dict[str, float]:
    """How many namespaces hold facts, and how many facts each holds (every page)."""
    counts: list[int] = []
    cursor = None
    while True:
        page = memory.list_namespaces(limit=1000, cursor=cursor)
        counts.extend(c.facts for c in page.namespaces)
        cursor = page.next_cursor
        if cursor is None:
            break
    return {"namespaces_holding_facts": len(counts), "facts_per_namespace_min": min(counts),
            "facts_per_namespace_median": median(counts),
            "facts_per_namespace_max": max(counts)}


def cold_firsts(memory: Memory, q: str, namespaces: int) -> dict[str, float]:
    """The first namespace and the first filtered recall after the open, timed alone."""
    rng = np.random.default_rng(3)
    ns_s, _ = timed(lambda: memory.recall(q, options("namespace", rng, namespaces)))
    flt_s, _ = timed(lambda: memory.recall(q, options("filter_1pct", rng, namespaces)))
    again_s, _ = timed(lambda: memory.recall(q, options("filter_1pct", rng, namespaces)))
    return {"first_namespace_recall_ms": round(ns_s * 1e3, 2),
            "first_filtered_recall_ms": round(flt_s * 1e3, 2),
            "second_filtered_recall_ms": round(again_s * 1e3, 2)}


def profile(memory: Memory, qsets: dict[str, list[str]], namespaces: int) -> None:
    rng = np.random.default_rng(5)
    for qkind, qs in qsets.items():
        for kind in ("all", "namespace", "org_prefix", "filter_1pct"):
            prof = cProfile.Profile()
            prof.enable()
            for q in qs[:100]:
                memory.recall(q, options(kind, rng, namespaces))
            prof.disable()
            print(f"--- cProfile: {len(qs[:100])} {qkind} recalls, kind {kind} ---",
                  file=sys.stderr)
            pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(15)


def export_import(memory: Memory, source: Store, workdir: str) -> dict[str, Any]:
    if not (hasattr(Memory, "export") and hasattr(Memory, "import_")):
        return {"status": "not available",
                "reason": "this holomem has no Memory.export / Memory.import_ yet"}
    n = source.stats().documents
    try:
        # getattr: written before these methods landed; it runs either way.
        export_s, records = timed(lambda: list(getattr(memory, "export")()))  # noqa: B009
        with Store.open(os.path.join(workdir, "target")) as target:
            into = Memory(target)
            import_s, _ = timed(lambda: getattr(into, "import_")(records))  # noqa: B009
            imported = target.stats().documents
    except Exception as exc:  # report what failed, never a figure
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    encode_s, lines = timed(lambda: [json.dumps(r, separators=(",", ":")) for r in records])
    decode_s, _ = timed(lambda: [json.loads(line) for line in lines])
    per_s = n / (export_s + import_s)
    return {
        "status": "measured",
        "facts": n, "records_exported": len(records), "documents_after_import": imported,
        "same_count": imported == n,
        "export_s": round(export_s, 3), "import_s": round(import_s, 3),
        "export_per_s": round(n / export_s, 1), "import_per_s": round(n / import_s, 1),
        "facts_per_s": round(per_s, 1),
        "jsonl_encode_s": round(encode_s, 3), "jsonl_decode_s": round(decode_s, 3),
        "jsonl_bytes": sum(len(line) + 1 for line in lines),
        "facts_per_s_with_jsonl": round(n / (export_s + import_s + encode_s + decode_s), 1),
        "target_sync": "full",
    }


def verdict(ok: bool) -> str:
    return "met" if ok else "missed"


def targets(runs: dict[str, Any], exim: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, name, limit in (("namespace", "namespace_p50_over_all", TARGET_NAMESPACE_RATIO),
                              ("filter_1pct", "filter_1pct_p50_over_all",
                               TARGET_FILTER_RATIO)):
        ratios = {qkind: runs[qkind][kind]["p50_over_all"] for qkind in runs}
        out[name] = {"at_most": limit, **ratios,
                     "verdict": verdict(all(r <= limit for r in ratios.values()))}
    if exim.get("status") == "measured":
        rate = exim["facts_per_s"]
        out["export_import_facts_per_s"] = {
            "at_least": TARGET_EXPORT_IMPORT_PER_S, "measured": rate,
            "verdict": verdict(rate >= TARGET_EXPORT_IMPORT_PER_S and exim["same_count"])}
    else:
        out["export_import_facts_per_s"] = {"at_least": TARGET_EXPORT_IMPORT_PER_S,
                                            "verdict": exim.get("status", "not available")}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--namespaces", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=300, help="queries per set (heavy, light)")
    ap.add_argument("--quick", action="store_true",
                    help="5,000 facts, 50 namespaces, 50 queries per set")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--save", action="store_true",
                    help="also write benchmarks/results/namespaces.json")
    args = ap.parse_args()
    if args.quick:
        args.facts, args.namespaces, args.queries = 5000, 50, 50
    before = machine(tempfile.gettempdir())
    corpus = facts(args.facts, args.namespaces)
    qsets = queries(args.queries)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "store")
        build_s = build(path, corpus)
        del corpus
        open_s, store = timed(lambda: Store.open(path))
        with store:
            memory = Memory(store)
            sizes = namespace_sizes(memory)
            firsts = cold_firsts(memory, qsets["heavy"][0], args.namespaces)
            runs = recall_runs(memory, qsets, args.namespaces)
            if args.profile:
                profile(memory, qsets, args.namespaces)
            exim = export_import(memory, store, d)
    result = {
        "benchmark": "namespaces",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {
            "facts": args.facts, "namespaces": args.namespaces,
            **sizes,
            "texts": "8-30 words, Zipf(1.07) over 5,000 words",
            "namespace_shape": '["org<j % 10>", "user<j>"], j uniform',
            "subjects": "1 in 10 facts", "metadata": '{"bucket": i % 100, "source", "turn"}',
            "ingest": f"remember_many, batches of {BATCH}, sync none",
            "queries_per_set": args.queries, "k": 10, "quick": args.quick,
        },
        "build_s": round(build_s, 2),
        "build_facts_per_s": round(args.facts / build_s, 1),
        "open_s": round(open_s, 3),
        **firsts,
        "recall": runs,
        "export_import": exim,
        "targets": targets(runs, exim),
    }
    if args.save:
        save("namespaces", result)
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
