"""How fast the built-in "minilm" embedder is on this machine (issue 14, item 2).

    python benchmarks/embed_bench.py [--rounds 5] [--texts 256] [--batch 32]
                                     [--blas-threads N] [--one-thread-too]
                                     [--profile] [--data DIR] [--save]

Texts are LoCoMo development dialogue turns (``--data DIR``, default
``../shared/data/locomo/`` beside the repository; when the file is not there, a warning
on stderr says so and a synthetic 24-word corpus is used, named in the output's
conditions) and, for single queries, LoCoMo questions.
After loading the model (timed once, cold), each round times:

- ``single``: ``embed([text])`` for every text, one call each — what a ``recall``
  (one query) or a ``remember`` of one fact adds; texts/s, and the per-call latency
  percentiles over every call of every round;
- ``single_queries``: the same for the questions;
- ``batched``: ``embed(chunk)`` over the texts in chunks of ``--batch`` — what
  ``remember_many`` and a re-embed pay per text.

Reports the median over rounds, the token counts of the texts, the BLAS and its thread
count, the machine and its load average before and after (the CPU is shared: on a busy
machine OpenBLAS's threads wait on each other, so compare runs at similar load, and
``--blas-threads 1``, or ``--one-thread-too`` in the same run, shows the figure with
one BLAS thread, which a busy machine hurts far less). Target: at least 150 single
texts/s, judged for the dialogue turns and for the questions. ``--profile`` prints the
heaviest functions of one single-text pass (cProfile) to stderr; it cannot see inside
numpy, for which a sampling profiler with native frames (``py-spy record --native``)
shows the BLAS kernels. Prints one JSON document; saves it as
benchmarks/results/embed_bench.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCOMO_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "locomo")
TARGET_SINGLE_PER_S = 150.0


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--texts", type=int, default=256, help="texts per round")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--blas-threads", type=int, default=0,
                    help="set OPENBLAS_NUM_THREADS before numpy loads (0: leave as is)")
    ap.add_argument("--one-thread-too", action="store_true",
                    help="then measure again in a child with OPENBLAS_NUM_THREADS=1")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--data", metavar="DIR", default=LOCOMO_DIR,
                    help="the LoCoMo development set's directory, holding locomo_dev.json "
                    "(default: ../shared/data/locomo/ beside the repository)")
    ap.add_argument("--save", action="store_true",
                    help="also write benchmarks/results/embed_bench.json")
    return ap.parse_args()


ARGS = _args()
if ARGS.blas_threads:  # must precede the first import of numpy
    os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.blas_threads)

import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, ROOT)

from benchmarks._common import machine, median, percentile, save  # noqa: E402
from holomem.embedders import MiniLM  # noqa: E402


def _texts(n: int) -> tuple[str, list[str], list[str]]:
    path = ARGS.data if ARGS.data.endswith(".json") else os.path.join(ARGS.data,
                                                                      "locomo_dev.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            records = json.load(f)
        turns = [turn["text"] for r in records for key, session in r["conversation"].items()
                 if key.startswith("session_") and isinstance(session, list)
                 for turn in session]
        questions = [q["question"] for r in records for q in r["qa"]]
        return "locomo_dev dialogue turns / questions", turns[:n], questions[:n]
    print(f"warning: the LoCoMo development set is not at {path} (pass --data DIR): "
          "measuring on a synthetic corpus instead", file=sys.stderr)
    from benchmarks.search_bench import corpus, queries
    return "synthetic 24-word corpus / 3-6 word queries", corpus(n), queries(n)["heavy"]


def _blas() -> dict[str, Any]:
    try:
        info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        return {"name": info.get("name"), "version": info.get("version"),
                "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "(unset)")}
    except Exception as exc:  # a numpy without show_config(mode=...): say so, go on
        return {"error": repr(exc)}


def _single(embed: Any, texts: list[str], latencies: list[float]) -> float:
    t0 = time.perf_counter()
    for text in texts:
        t = time.perf_counter()
        embed([text])
        latencies.append(time.perf_counter() - t)
    return len(texts) / (time.perf_counter() - t0)


def _batched(embed: Any, texts: list[str], size: int) -> float:
    t0 = time.perf_counter()
    for i in range(0, len(texts), size):
        embed(texts[i:i + size])
    return len(texts) / (time.perf_counter() - t0)


def _verdict(per_s: float) -> str:
    return "met" if per_s >= TARGET_SINGLE_PER_S else "missed"


def measure() -> dict[str, Any]:
    before = machine(ROOT)
    source, texts, questions = _texts(ARGS.texts)
    embedder = MiniLM()
    t = time.perf_counter()
    embedder.embed(["warm up"])  # the first call loads the model
    load_s = time.perf_counter() - t
    embed = embedder.embed

    def counts(xs: list[str]) -> dict[str, float]:
        n = [len(embedder.token_ids(x)) for x in xs]
        return {"median": float(np.median(n)), "mean": round(float(np.mean(n)), 1),
                "max": max(n)}

    _single(embed, texts[:16], [])
    if ARGS.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.runcall(_single, embed, texts, [])
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(15)

    single, queries, batched = [], [], []
    lat_single: list[float] = []
    lat_queries: list[float] = []
    for _ in range(ARGS.rounds):
        single.append(_single(embed, texts, lat_single))
        queries.append(_single(embed, questions, lat_queries))
        batched.append(_batched(embed, texts, ARGS.batch))

    def latency(xs: list[float]) -> dict[str, float]:
        return {f"p{p}_ms": round(percentile(xs, p) * 1e3, 2) for p in (50, 90, 99)}

    return {
        "benchmark": "embed_bench",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {
            "embedder": embedder.identity.name, "digest": embedder.identity.digest,
            "texts": source, "n_texts": len(texts), "n_questions": len(questions),
            "tokens_per_text": counts(texts), "tokens_per_question": counts(questions),
            "rounds": ARGS.rounds, "batch": ARGS.batch, "blas": _blas(),
            "numpy": np.__version__,
        },
        "load_s": round(load_s, 3),
        "single": {"texts_per_s": round(median(single), 1),
                   "rounds": [round(x, 1) for x in single], **latency(lat_single)},
        "single_queries": {"texts_per_s": round(median(queries), 1),
                           "rounds": [round(x, 1) for x in queries], **latency(lat_queries)},
        "batched": {"batch": ARGS.batch, "texts_per_s": round(median(batched), 1),
                    "rounds": [round(x, 1) for x in batched]},
        "targets": {
            "single_texts_per_s_at_least": TARGET_SINGLE_PER_S,
            "single": _verdict(median(single)),
            "single_queries": _verdict(median(queries)),
        },
    }


def main() -> None:
    result = measure()
    if ARGS.one_thread_too:
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--blas-threads", "1",
             "--rounds", str(ARGS.rounds), "--texts", str(ARGS.texts),
             "--batch", str(ARGS.batch), "--data", ARGS.data], capture_output=True, text=True,
            check=True)
        one = json.loads(child.stdout)
        result["one_blas_thread"] = {
            k: one[k] for k in ("loadavg_after", "single", "single_queries", "batched",
                                "targets")}
        result["one_blas_thread"]["loadavg_before"] = one["machine"]["loadavg"]
    if ARGS.save:
        save("embed_bench", result)
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
