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
shows the BLAS kernels.

Where a single text's time goes (``stages``, ``--stage-texts N``, 0 skips): the word
pieces (the tokenizer), then the forward pass stage by stage — embeddings, and summed
over the layers the QKV product, the attention (scores, softmax, context), the output
product, the LayerNorms, the two feed-forward products and the GELU, and each layer
whole — timed by a staged copy of the encoder over the model's own weights (its GELU
in the tanh form; its vectors checked against ``embed``'s, the lowest cosine
reported), one dialogue turn at a time; with the floating-point work per text, the
GFLOP/s the forward pass reached, and a large square product's GFLOP/s (about what
this BLAS reaches at best here).

Remember latency (``remember``, ``--remember-n N``, 0 skips): ``Memory.remember`` of
one dialogue turn on a durable store (``sync="full"``), without and with the embedder,
and with the turn's vector computed beforehand and passed as the caller's (what the
vector itself costs a remember, the model apart), one call each in turn (the order
rotating) on three stores in one run; p50/p99 of each and the added milliseconds
(p50 and p99 of with minus without, and the median of the per-pair differences).
Target: at most 10 ms added at p50.

Prints one JSON document; saves it as benchmarks/results/embed_bench.json only with
``--save``.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCOMO_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "locomo")
TARGET_SINGLE_PER_S = 150.0
TARGET_REMEMBER_ADDED_MS = 10.0


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
    ap.add_argument("--remember-n", type=int, default=200,
                    help="remembers timed per store (0: skip the remember latency)")
    ap.add_argument("--stage-texts", type=int, default=64,
                    help="dialogue turns the per-stage profile runs over (0: skip)")
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
import math  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import zipfile  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, ROOT)

from benchmarks._common import machine, median, percentile, save  # noqa: E402
from holomem import Memory, Store  # noqa: E402
from holomem.embedders import MiniLM  # noqa: E402
from holomem.embedders import minilm as minilm_module  # noqa: E402
from holomem.embedders.bert import BertWeights, weights_from_state  # noqa: E402


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
        "target_added_p50_ms_at_most": TARGET_REMEMBER_ADDED_MS,
        "verdict": "met" if p50_added <= TARGET_REMEMBER_ADDED_MS else "missed",
    }


def _weights() -> BertWeights:
    """The model's encoder weights, read from its archive as the embedder reads them."""
    from safetensors.numpy import load as load_state
    with zipfile.ZipFile(minilm_module.archive_path()) as archive:
        raw = archive.read(minilm_module.WEIGHTS)
    return weights_from_state(load_state(raw), heads=minilm_module.HEADS,
                              eps=minilm_module.LAYER_NORM_EPS)


def _ln(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    out: np.ndarray = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)
                                  + np.float32(eps)) * g + b
    return out


_TANH_C = np.float32(math.sqrt(2.0 / math.pi))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    inner = _TANH_C * (x + np.float32(0.044715) * x * x * x)
    out: np.ndarray = np.float32(0.5) * x * (np.float32(1.0) + np.tanh(inner))
    return out


STAGES = ("tokenize", "embeddings", "qkv", "attention", "out", "ln1", "ff1", "gelu", "ff2",
          "ln2", "pool")
#: The per-layer stages (summed over the layers).
LAYER_STAGES = STAGES[2:10]


def _staged(w: BertWeights, ids: list[int], spent: dict[str, list[float]]) -> np.ndarray:
    """The encoder's forward pass over one sequence, each stage's seconds appended to
    ``spent`` (the layer stages summed over the layers; ``layer<i>``: layer i whole)."""
    clock = time.perf_counter
    n = len(ids)
    d, heads = w.dim, w.heads
    t = clock()
    x = _ln(w.word[np.array(ids)] + w.position[:n], w.ln_g, w.ln_b, w.eps)
    spent["embeddings"].append(clock() - t)
    sums = dict.fromkeys(LAYER_STAGES, 0.0)
    for i, layer in enumerate(w.layers):
        t0 = t = clock()
        qkv = x @ layer.qkv_w + layer.qkv_b
        sums["qkv"] += clock() - t
        t = clock()
        q, k, v = qkv.reshape(n, 3, heads, d // heads).transpose(1, 2, 0, 3)
        scores = q @ k.transpose(0, 2, 1)  # the query is pre-scaled in the weights
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(1, 0, 2).reshape(n, d)
        sums["attention"] += clock() - t
        t = clock()
        a = ctx @ layer.out_w + layer.out_b + x
        sums["out"] += clock() - t
        t = clock()
        x = _ln(a, layer.ln1_g, layer.ln1_b, w.eps)
        sums["ln1"] += clock() - t
        t = clock()
        h = x @ layer.ff1_w + layer.ff1_b
        sums["ff1"] += clock() - t
        t = clock()
        h = _gelu_tanh(h)
        sums["gelu"] += clock() - t
        t = clock()
        f = h @ layer.ff2_w + layer.ff2_b + x
        sums["ff2"] += clock() - t
        t = clock()
        x = _ln(f, layer.ln2_g, layer.ln2_b, w.eps)
        sums["ln2"] += clock() - t
        spent.setdefault(f"layer{i}", []).append(clock() - t0)
    for key, value in sums.items():
        spent[key].append(value)
    t = clock()
    vector = x.mean(axis=0)
    vector /= np.sqrt(np.sum(vector * vector))
    spent["pool"].append(clock() - t)
    out: np.ndarray = vector
    return out


def _flops(w: BertWeights, n: int) -> float:
    """Floating-point operations (2 per multiply-add) of one n-token sequence's products."""
    d = w.dim
    ff = w.layers[0].ff1_w.shape[1]
    per_layer = 2 * n * d * (3 * d + d + 2 * ff) + 2 * 2 * n * n * d
    return float(per_layer * len(w.layers))


def _square_gflops() -> float:
    a = np.random.default_rng(0).standard_normal((1024, 1024), dtype=np.float32)
    a @ a
    best = math.inf
    for _ in range(5):
        t = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t)
    return 2 * 1024 ** 3 / best / 1e9


def stages(embedder: MiniLM, texts: list[str]) -> dict[str, Any]:
    """Where one text's time goes: median ms per stage over ``texts``, one at a time."""
    w = _weights()
    spent: dict[str, list[float]] = {s: [] for s in STAGES}
    cosines, flops, whole = [], [], []
    for text in texts[:4]:  # warm up
        _staged(w, embedder.token_ids(text), {s: [] for s in STAGES})
    for text in texts:
        t = time.perf_counter()
        ids = embedder.token_ids(text)
        spent["tokenize"].append(time.perf_counter() - t)
        t = time.perf_counter()
        vector = _staged(w, ids, spent)
        whole.append(time.perf_counter() - t + spent["tokenize"][-1])
        flops.append(_flops(w, len(ids)))
        cosines.append(float(vector @ embedder.embed([text])[0]))
    forward = sum(sum(spent[s]) for s in STAGES[1:])
    return {
        "texts": len(texts),
        "median_total_ms": round(median(whole) * 1e3, 3),
        "median_ms": {s: round(median(v) * 1e3, 3) for s, v in spent.items()},
        "share_of_total": {s: round(sum(spent[s]) / sum(whole), 3) for s in STAGES},
        "gflop_per_text_mean": round(sum(flops) / len(flops) / 1e9, 3),
        "forward_gflops_reached": round(sum(flops) / forward / 1e9, 1),
        "square_1024_sgemm_gflops": round(_square_gflops(), 1),
        "staged_vs_embed_cosine_min": round(min(cosines), 6),
    }


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

    profile = stages(embedder, texts[:ARGS.stage_texts]) if ARGS.stage_texts else None
    remembered = (remember_latency(embedder, texts, ARGS.remember_n) if ARGS.remember_n
                  else None)

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
        "stages": profile,
        "remember": remembered,
        "targets": {
            "single_texts_per_s_at_least": TARGET_SINGLE_PER_S,
            "single": _verdict(median(single)),
            "single_queries": _verdict(median(queries)),
            "remember_added_p50_ms_at_most": TARGET_REMEMBER_ADDED_MS,
            "remember": remembered["verdict"] if remembered else "not measured",
        },
    }


def main() -> None:
    result = measure()
    if ARGS.one_thread_too:
        child = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "--blas-threads", "1",
             "--rounds", str(ARGS.rounds), "--texts", str(ARGS.texts),
             "--batch", str(ARGS.batch), "--data", ARGS.data,
             "--remember-n", str(ARGS.remember_n), "--stage-texts", str(ARGS.stage_texts)],
            capture_output=True, text=True, check=True)
        one = json.loads(child.stdout)
        result["one_blas_thread"] = {
            k: one[k] for k in ("loadavg_after", "single", "single_queries", "batched",
                                "stages", "remember", "targets")}
        result["one_blas_thread"]["loadavg_before"] = one["machine"]["loadavg"]
    if ARGS.save:
        save("embed_bench", result)
    else:
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
