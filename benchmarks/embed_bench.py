"""How fast the built-in "minilm" embedder is on this machine, against the fixed
plain-numpy reference, in one run (issue 29, item 1; issue 14, item 2).

    python benchmarks/embed_bench.py [--reference PATH] [--data DIR] [--rounds 5]
                                     [--texts 256] [--single 64] [--remember-n 200]
                                     [--save]

``--reference`` is the path of the reference embedder's source file (default
``../shared/reference/minilm_numpy.py`` beside the repository), loaded from there and
never copied: all-MiniLM-L6-v2 in float32 numpy, padded batches of 64. Both run on the
same model files (the reference on ``model.zip`` unpacked into a temporary folder).
Texts are LoCoMo development dialogue turns (``--data DIR``, default
``../shared/data/locomo/``; when the file is not there, a warning on stderr says so and
a synthetic corpus is used, named in the output's conditions).

Each round, in alternating order:
- ``batch``: one ``embed`` call of ``--texts`` turns, texts/s, for holomem and the
  reference;
- ``single``: ``embed([text])`` for each of ``--single`` turns, one call each, the
  median latency of each side.
The ratios (holomem over the reference's texts/s, the reference's latency over
holomem's) are taken per round; medians are quoted. Also: the cosine of every holomem
vector to the reference's (the 8-bit model against float32), and ``remember``: durable
remembers (``sync="full"``) of one turn each without and with the embedder, and with
the vector given by the caller, on three stores in one run, the order rotating.

Targets: batch >= 8x the reference, single >= 4x faster, every cosine >= 0.99, and a
durable remember with the embedder adding <= 5 ms at p50. Records the machine and its
load before and after (the CPU is shared: compare ratios, which both sides pay).
Prints one JSON document; writes benchmarks/results/embed_bench.json only with
``--save``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
import zipfile
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import check, emit, machine, median, percentile  # noqa: E402
from holomem import Memory, Store  # noqa: E402
from holomem.embedders import MiniLM  # noqa: E402
from holomem.embedders import minilm as minilm_module  # noqa: E402

SHARED = os.path.join(os.path.dirname(ROOT), "shared")
TARGET_BATCH_RATIO = 8.0
TARGET_SINGLE_SPEEDUP = 4.0
TARGET_COSINE = 0.99
TARGET_REMEMBER_ADDED_MS = 5.0


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reference", metavar="PATH",
                    default=os.path.join(SHARED, "reference", "minilm_numpy.py"))
    ap.add_argument("--data", metavar="DIR", default=os.path.join(SHARED, "data", "locomo"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--texts", type=int, default=256, help="texts in each batch call")
    ap.add_argument("--single", type=int, default=64, help="single-text calls per round")
    ap.add_argument("--remember-n", type=int, default=200,
                    help="remembers timed per store (0: skip)")
    ap.add_argument("--save", action="store_true",
                    help="also write benchmarks/results/embed_bench.json")
    return ap.parse_args()


def _texts(data: str, n: int) -> tuple[str, list[str]]:
    path = data if data.endswith(".json") else os.path.join(data, "locomo_dev.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            records = json.load(f)
        turns = [turn["text"] for r in records for key, session in r["conversation"].items()
                 if key.startswith("session_") and isinstance(session, list)
                 for turn in session]
        return "locomo_dev dialogue turns", turns[:n]
    print(f"warning: the LoCoMo development set is not at {path} (pass --data DIR): "
          "measuring on a synthetic corpus instead", file=sys.stderr)
    from benchmarks.search_bench import corpus
    return "synthetic 24-word corpus", corpus(n)


def _reference(path: str, model_dir: str) -> Any:
    """The reference embedder, loaded from its file (not copied anywhere)."""
    spec = importlib.util.spec_from_file_location("minilm_reference", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the reference embedder from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with zipfile.ZipFile(minilm_module.archive_path()) as archive:
        archive.extractall(model_dir)
    return module.MiniLM(model_dir)


def _batch_rate(embed: Any, texts: list[str]) -> float:
    t = time.perf_counter()
    embed(texts)
    return len(texts) / (time.perf_counter() - t)


def _single_ms(embed: Any, texts: list[str]) -> float:
    spent = []
    for text in texts:
        t = time.perf_counter()
        embed([text])
        spent.append((time.perf_counter() - t) * 1e3)
    return median(spent)


def remember_latency(embedder: MiniLM, texts: list[str], n: int) -> dict[str, Any]:
    """Durable remembers of one turn each, without and with the embedder, in turn."""
    plain_ms: list[float] = []
    embedded_ms: list[float] = []
    vector_ms: list[float] = []
    with tempfile.TemporaryDirectory() as d:
        with Store.open(os.path.join(d, "plain"), sync="full") as s1, \
                Store.open(os.path.join(d, "embedded"), sync="full") as s2, \
                Store.open(os.path.join(d, "vector"), sync="full") as s3:
            plain, embedded = Memory(s1), Memory(s2, embedder=embedder)
            given = Memory(s3)  # the caller brings the vector: no model in the call
            for i in range(n + 8):  # the first 8 of each warm up
                text = f"{texts[i % len(texts)]} ({i})"  # every fact a new one
                vector = embedder.embed([text])[0].tolist()
                arms: list[tuple[Memory, list[float], dict[str, Any]]] = [
                    (plain, plain_ms, {}), (embedded, embedded_ms, {}),
                    (given, vector_ms, {"embedding": vector})]
                for memory, out, extra in arms[i % 3:] + arms[:i % 3]:  # order rotates
                    t = time.perf_counter()
                    memory.remember(text, id=f"f{i}", **extra)
                    if i >= 8:
                        out.append((time.perf_counter() - t) * 1e3)
        filesystem = machine(d)["filesystem"]
    added = [e - p for p, e in zip(plain_ms, embedded_ms, strict=True)]

    def pct(xs: list[float]) -> dict[str, float]:
        return {"p50_ms": round(percentile(xs, 50), 2), "p99_ms": round(percentile(xs, 99), 2)}

    p50_added = percentile(embedded_ms, 50) - percentile(plain_ms, 50)
    return {
        "n": n, "sync": "full", "filesystem": filesystem,
        "without_embedder": pct(plain_ms), "with_embedder": pct(embedded_ms),
        "with_a_callers_vector": pct(vector_ms),
        "added_by_a_callers_vector_p50_ms": round(percentile(vector_ms, 50)
                                                  - percentile(plain_ms, 50), 2),
        "added_p50_ms": round(p50_added, 2),
        "added_p99_ms": round(percentile(embedded_ms, 99) - percentile(plain_ms, 99), 2),
        "added_median_of_pairs_ms": round(median(added), 2),
    }


def measure(args: argparse.Namespace) -> dict[str, Any]:
    what, texts = _texts(args.data, max(args.texts, args.single))
    batch, singles = texts[:args.texts], texts[:args.single]
    embedder = MiniLM()
    with tempfile.TemporaryDirectory() as model_dir:
        before = machine(model_dir)
        t = time.perf_counter()
        embedder.load()
        load_s = time.perf_counter() - t
        reference = _reference(args.reference, model_dir)
        ours, theirs = embedder.embed(batch), reference.embed(batch)
        cosines = np.sum(ours.astype(np.float64) * theirs, axis=1)
        rounds: list[dict[str, float]] = []
        for r in range(args.rounds):
            sides = [("holomem", embedder.embed), ("reference", reference.embed)]
            row: dict[str, float] = {}
            for name, embed in sides if r % 2 == 0 else sides[::-1]:
                row[f"{name}_batch_per_s"] = _batch_rate(embed, batch)
                row[f"{name}_single_ms"] = _single_ms(embed, singles)
            row["batch_ratio"] = row["holomem_batch_per_s"] / row["reference_batch_per_s"]
            row["single_speedup"] = row["reference_single_ms"] / row["holomem_single_ms"]
            rounds.append(row)
    remember = remember_latency(embedder, texts, args.remember_n) if args.remember_n else {}

    def med(key: str) -> float:
        return round(median([row[key] for row in rounds]), 2)

    return {
        "benchmark": "embed_bench",
        "conditions": {"texts": what, "batch_texts": len(batch),
                       "single_texts": len(singles), "rounds": args.rounds,
                       "reference": os.path.abspath(args.reference),
                       "embedder": {"name": embedder.identity.name,
                                    "revision": minilm_module.REVISION,
                                    "digest": embedder.identity.digest,
                                    "threads": minilm_module.MAX_WORKERS},
                       "model_load_s": round(load_s, 2)},
        "machine_before": before,
        "batch": {"holomem_per_s": med("holomem_batch_per_s"),
                  "reference_per_s": med("reference_batch_per_s"),
                  "ratio": med("batch_ratio")},
        "single": {"holomem_ms": med("holomem_single_ms"),
                   "reference_ms": med("reference_single_ms"),
                   "speedup": med("single_speedup")},
        "cosine_to_reference": {"min": round(float(cosines.min()), 4),
                                "mean": round(float(cosines.mean()), 5)},
        "remember": remember,
        "rounds": [{k: round(v, 2) for k, v in row.items()} for row in rounds],
        "targets": {
            "batch_ratio": check(med("batch_ratio"), ">=", TARGET_BATCH_RATIO),
            "single_speedup": check(med("single_speedup"), ">=", TARGET_SINGLE_SPEEDUP),
            "min_cosine": check(round(float(cosines.min()), 4), ">=", TARGET_COSINE),
            "remember_added_p50_ms": check(remember.get("added_p50_ms"), "<=",
                                           TARGET_REMEMBER_ADDED_MS),
        },
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    args = _args()
    emit("embed_bench", measure(args), args.save)


if __name__ == "__main__":
    main()
