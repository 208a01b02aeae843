"""Curves from saved benchmark results, as PNG files under benchmarks/results/.

    python benchmarks/plot.py [--results DIR] [--out DIR] [--only NAME[,NAME]]

Reads the JSON documents the benchmarks write with ``--save`` and draws one figure per
entry of :data:`FIGURES`; a figure whose results are missing is skipped with a note on
stderr, never drawn from made-up figures. Each figure is one function taking the
loaded results (a dict of benchmark name -> document) and returning a matplotlib
figure, so a new curve is a new function and a new entry in :data:`FIGURES`:

- ``search_scale.png`` -- search latency (p50) and single-thread throughput against
  store size, for holomem, SQLite FTS5 and tantivy, heavy and light queries
  (``search_bench.json``, and any other results named in ``--search`` that share its
  ``runs`` shape: ``runs[size][engine][heavy|light][p50_ms]``);
- ``group_commit.png`` -- durable transactions/s against the number of threads
  appending, batch mode, beside one thread's ``full`` append and raw write+fsync
  (``journal_bench.json``);
- ``scale.png`` -- benchmarks/scale.py's curve from 1,000 to 1,000,000 facts: search
  and recall latency beside tantivy and SQLite FTS5, ingest, peak memory, open with
  and without a checkpoint, bytes per fact (``scale.json``);
- ``peers.png`` -- benchmarks/peers.py: holomem beside each peer, one bar per system
  (and per query mode) for ingest, single-write latency, query p50, reopen, bytes per
  fact, peak RSS and LoCoMo recall_any@10 (``peers.json``).

matplotlib is a benchmark-only dependency (``pip install 'holomem-db[bench]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from holomem.errors import missing_extra

try:
    import matplotlib

    matplotlib.use("Agg")  # files only, no display

    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
except ImportError as _missing:  # the bench extra is not installed
    raise missing_extra(_missing, "benchmarks/plot.py", "bench") from _missing

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
ENGINES = {"holomem": "holomem", "sqlite_fts5": "SQLite FTS5", "tantivy": "tantivy"}
COLOURS = {"holomem": "tab:blue", "sqlite_fts5": "tab:green", "tantivy": "tab:orange"}
KINDS = {"heavy": "-", "light": "--"}

Results = dict[str, dict[str, Any]]


def load(results_dir: str, names: list[str]) -> Results:
    """The saved documents ``names`` (without ``.json``) found in ``results_dir``."""
    out: Results = {}
    for name in names:
        path = os.path.join(results_dir, f"{name}.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                out[name] = json.load(f)
    return out


def _caption(doc: dict[str, Any]) -> str:
    m = doc.get("machine", {})
    load = m.get("loadavg", ["?"])
    return (f"{m.get('date', '?')[:10]}, commit {m.get('commit', '?')}, {m.get('cpus', '?')} "
            f"cpus, load {load[0]}")


def search_points(docs: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(engine, kind) -> [(size, p50 ms)], merged over ``docs`` (a later one wins)."""
    points: dict[tuple[str, str], dict[int, float]] = {}
    for doc in docs:
        for size, engines in doc.get("runs", {}).items():
            for engine, run in engines.items():
                for kind in KINDS:
                    p50 = run.get(kind, {}).get("p50_ms") if isinstance(run, dict) else None
                    if isinstance(p50, (int, float)):
                        points.setdefault((engine, kind), {})[int(size)] = float(p50)
    return {k: sorted(v.items()) for k, v in points.items()}


def search_scale(results: Results, extra: list[str]) -> Figure | None:
    docs = [results[n] for n in ["search_bench", *extra] if n in results]
    points = search_points(docs)
    if not points:
        return None
    fig, (lat, thr) = plt.subplots(1, 2, figsize=(11, 4.2))
    for (engine, kind), pts in sorted(points.items()):
        sizes = [s for s, _ in pts]
        label = f"{ENGINES.get(engine, engine)}, {kind}"
        colour = COLOURS.get(engine)
        lat.plot(sizes, [p for _, p in pts], KINDS[kind], marker="o", label=label, color=colour)
        thr.plot(sizes, [1000 / p for _, p in pts], KINDS[kind], marker="o", label=label,
                 color=colour)
    for ax, what in ((lat, "p50 latency (ms)"), (thr, "queries/s, one thread (1000 / p50)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents in the store")
        ax.set_ylabel(what)
        ax.grid(True, which="both", alpha=0.3)
    lat.legend(fontsize=8)
    fig.suptitle("Search, k = 10: holomem beside SQLite FTS5 and tantivy\n"
                 + "; ".join(_caption(d) for d in docs), fontsize=9)
    fig.tight_layout()
    return fig


def group_commit(results: Results, extra: list[str]) -> Figure | None:
    doc = results.get("journal_bench")
    if doc is None:
        return None
    rates = doc.get("median_tx_per_s", {})
    threads = sorted(int(k[5:]) for k in rates if k.startswith("batch") and k[5:].isdigit())
    if not threads:
        return None
    fig, (abs_ax, ratio_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    abs_ax.plot(threads, [rates[f"batch{t}"] for t in threads], marker="o",
                label="batch (group commit)")
    for name, style in (("full", ":"), ("raw", "--"), ("sqlite", "-.")):
        if name in rates:
            abs_ax.axhline(rates[name], linestyle=style, color="grey",
                           label=f"{name}, one thread ({rates[name]:,}/s)")
    ratios = doc.get("median_ratios", {})
    ratio_pts = [(t, ratios[f"batch{t}_over_full"]) for t in threads
                 if f"batch{t}_over_full" in ratios]
    if ratio_pts:
        ratio_ax.plot([t for t, _ in ratio_pts], [r for _, r in ratio_pts], marker="o",
                      label="batch / full, measured side by side")
    ratio_ax.plot(threads, threads, ":", color="grey",
                  label="T x full: every group holds all T threads")
    ratio_ax.axhline(5, linestyle="--", color="red", alpha=0.5, label="target at 8 threads")
    for ax, what in ((abs_ax, "durable transactions/s"), (ratio_ax, "batch / full")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(threads, [str(t) for t in threads])
        ax.set_xlabel("threads appending")
        ax.set_ylabel(what)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Group commit: journal appends of 138 bytes, sync='batch'\n" + _caption(doc),
                 fontsize=9)
    fig.tight_layout()
    return fig


def _at(runs: dict[str, Any], *keys: str) -> list[tuple[int, float]]:
    """[(size, value)] of ``runs[size][keys...]`` where it is a number."""
    out = []
    for size, row in runs.items():
        cur: Any = row
        for key in keys:
            cur = cur.get(key) if isinstance(cur, dict) else None
        if isinstance(cur, (int, float)):
            out.append((int(size), float(cur)))
    return sorted(out)


def scale_curve(results: Results, extra: list[str]) -> Figure | None:
    """benchmarks/scale.py: latency, ingest, memory, open and disk against facts stored."""
    doc = results.get("scale")
    if doc is None or not doc.get("runs"):
        return None
    runs = doc["runs"]
    panels: list[tuple[str, str, dict[str, list[tuple[int, float]]], bool]] = [
        ("search and recall p50, k = 10 (common-word queries)", "ms", {
            "holomem search_documents": _at(runs, "open", "search_vs_tantivy", "holomem",
                                            "p50_ms"),
            "tantivy (same texts, interleaved)": _at(runs, "open", "search_vs_tantivy",
                                                     "tantivy", "p50_ms"),
            "SQLite FTS5": _at(runs, "sqlite", "search", "p50_ms"),
            "holomem recall": _at(runs, "open", "recall", "p50_ms")}, True),
        ("p99", "ms", {
            "holomem recall": _at(runs, "open", "recall", "p99_ms"),
            "holomem search_documents": _at(runs, "open", "search", "p99_ms")}, True),
        ("ingest", "facts/s", {
            "holomem remember_many (wall)": _at(runs, "ingest", "facts_per_s"),
            "holomem remember_many (per CPU second)": _at(runs, "ingest", "facts_per_cpu_s"),
            "SQLite FTS5 insert": _at(runs, "sqlite", "rows_per_s"),
            "tantivy add_document": _at(runs, "tantivy", "rows_per_s")}, True),
        ("peak resident set", "MiB", {
            "holomem ingest": _at(runs, "ingest", "peak_rss_mib"),
            "holomem open + queries": _at(runs, "open", "peak_rss_mib"),
            "holomem open from a checkpoint": _at(runs, "open_checkpoint", "peak_rss_mib"),
            "SQLite FTS5 build": _at(runs, "sqlite", "peak_rss_mib"),
            "tantivy build": _at(runs, "tantivy", "peak_rss_mib")}, True),
        ("open", "s", {
            "replay (wall)": _at(runs, "open", "open_s"),
            "replay (CPU)": _at(runs, "open", "open_cpu_s"),
            "from a checkpoint (wall)": _at(runs, "open_checkpoint", "open_with_checkpoint_s"),
            "checkpoint write (wall)": _at(runs, "open", "checkpoint_write_s")}, True),
        ("bytes per fact", "bytes", {
            "holomem on disk": _at(runs, "ingest", "disk_bytes_per_fact"),
            "holomem checkpoint": _at(runs, "open", "checkpoint_bytes_per_fact"),
            "holomem resident after open": _at(runs, "open", "resident_bytes_per_fact"),
            "SQLite FTS5 on disk": _at(runs, "sqlite", "disk_bytes_per_fact"),
            "tantivy on disk": _at(runs, "tantivy", "disk_bytes_per_fact")}, True),
    ]
    fig, axes = plt.subplots(3, 2, figsize=(11, 11))
    for ax, (title, unit, series, logy) in zip(axes.flat, panels, strict=True):
        for label, pts in series.items():
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("facts in the store")
        ax.set_ylabel(unit)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("holomem at scale (benchmarks/scale.py)\n" + _caption(doc), fontsize=9)
    fig.tight_layout()
    return fig


def _bars(ax: Any, values: dict[str, float], title: str, unit: str, logy: bool) -> None:
    """One horizontal bar per label (holomem's in blue, the rest grey), value printed."""
    labels = list(values)
    colours = ["tab:blue" if x.startswith("holomem") else "tab:grey" for x in labels]
    ax.barh(labels, [values[x] for x in labels], color=colours)
    for i, x in enumerate(labels):
        ax.text(values[x], i, f" {values[x]:,.3g}", va="center", fontsize=7)
    if logy:
        ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(unit)
    ax.tick_params(axis="y", labelsize=7)
    ax.grid(True, axis="x", which="both", alpha=0.3)


def peers(results: Results, extra: list[str]) -> Figure | None:
    """benchmarks/peers.py: each system's figures side by side (log scales)."""
    doc = results.get("peers")
    if doc is None or not doc.get("table"):
        return None
    rows = {s: r for s, r in doc["table"].items() if "facts" in r}

    def pick(key: str) -> dict[str, float]:
        return {f"{s} ({r['facts']:,})": float(r[key]) for s, r in rows.items()
                if isinstance(r.get(key), (int, float))}

    latency = {f"{s} {mode}": float(r[f"{mode}_p50_ms"]) for s, r in rows.items()
               for mode in ("lexical", "vector", "hybrid", "unranked")
               if isinstance(r.get(f"{mode}_p50_ms"), (int, float))}
    quality = {k: float(v) for k, v in doc.get("locomo_recall_any@10_cat1-4", {}).items()}
    panels = [(pick("ingest_facts_per_s"), "durable ingest (calls of 1,000; Mem0 one by one)",
               "facts/s", True),
              (pick("single_write_p50_ms"), "single write p50", "ms", True),
              (latency, "query p50, k = 10", "ms", True),
              (pick("reopen_s"), "reopen + first query (fresh process)", "s", True),
              (pick("bytes_per_fact"), "bytes on disk per fact written", "bytes", True),
              (pick("peak_rss_mib"), "peak RSS of the measuring process", "MiB", True),
              (quality, "LoCoMo dev recall_any@10, cat. 1-4, same MiniLM vectors", "", False)]
    panels = [p for p in panels if p[0]]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.2 + 0.32 * sum(
        len(p[0]) for p in panels)))
    for ax, (values, title, unit, logy) in zip(np.atleast_1d(axes), panels, strict=True):
        _bars(ax, values, title, unit, logy)
    fig.suptitle("holomem beside its peers (benchmarks/peers.py)\n" + _caption(doc),
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.98))
    return fig


def save_figure(fig: Figure | None, name: str, out: str = RESULTS) -> str:
    """Save ``fig`` as ``out/name`` (nothing when there is no figure); returns the path."""
    if fig is None:
        return f"{name}: no results"
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


#: figure file -> (results it reads, the function drawing it)
FIGURES: dict[str, tuple[list[str], Callable[[Results, list[str]], Figure | None]]] = {
    "search_scale.png": (["search_bench"], search_scale),
    "group_commit.png": (["journal_bench"], group_commit),
    "scale.png": (["scale"], scale_curve),
    "peers.png": (["peers"], peers),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--results", default=RESULTS, help="where the saved JSON documents are")
    ap.add_argument("--out", default=RESULTS, help="where the PNG files go")
    ap.add_argument("--only", default="", help="figure names (comma separated), default all")
    ap.add_argument("--search", default="",
                    help="more results (names, comma separated) with search_bench's runs shape")
    args = ap.parse_args()
    extra = [x for x in args.search.split(",") if x]
    wanted = [x for x in args.only.split(",") if x] or list(FIGURES)
    os.makedirs(args.out, exist_ok=True)
    for name in wanted:
        if name not in FIGURES:
            sys.exit(f"no figure {name!r}; there are {', '.join(FIGURES)}")
        needs, draw = FIGURES[name]
        fig = draw(load(args.results, needs + extra), extra)
        if fig is None:
            print(f"{name}: skipped (no results in {args.results} for {', '.join(needs)})",
                  file=sys.stderr)
            continue
        path = os.path.join(args.out, name)
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
