"""The bounded fusion against the embedder's default on the LoCoMo development set
(issue 29, item 5).

    python benchmarks/fusion_bounded.py [--data DIR] [--cache DIR] [--save]

Facts, questions and metrics as in ``benchmarks/fusion_study.py`` (one store per
conversation, one fact per turn, ``recall(question, k=10)``), with the same vector
cache (``--cache``, default ``/tmp/holomem-embed-cache/<digest>/``: the first run
embeds every text, later runs read them and re-embed a sample to check them). Rows:
MiniLM with the embedder's default fusion (linear, lexical weight 0.4) and with the
bounded fusion at lexical weights 0.5, 0.55 and 0.6, each without context and with
the context policy at neighbour weight 0.4, window 2 (the configuration issue 29
counts). The lexical default is never touched by a fusion (a query without a vector
is scored by BM25 alone), so it is not rerun here: ``benchmarks/locomo.py`` measures it.

Targets, cat 1-4: the bounded fusion (lexical weight 0.55) + context recall_any@10 not
below the default + context's, measured in the same run. Prints JSON; writes
benchmarks/results/fusion_bounded.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import add_save, check, emit, machine  # noqa: E402
from benchmarks.fusion_study import cached_vectors, per_question, remember_turns  # noqa: E402
from benchmarks.locomo_data import add_data_argument, data_file, load  # noqa: E402
from holomem import ManualClock, Memory, MemoryConfig, Store  # noqa: E402
from holomem.api.memory.config import ContextConfig, FusionConfig, Neighbors  # noqa: E402

METRICS = ("recall_any@10", "recall_any@5", "mrr@10")
CONTEXT = ContextConfig(neighbors=Neighbors(weight=0.4, window=2))
WEIGHTS = (0.5, 0.55, 0.6)


def rows() -> dict[str, MemoryConfig]:
    out = {"default": MemoryConfig(), "default+ctx(0.4,2)": MemoryConfig(context=CONTEXT)}
    for w in WEIGHTS:
        fusion = FusionConfig(method="bounded", lexical_weight=w)
        out[f"bounded(w={w})"] = MemoryConfig(fusion=fusion)
        out[f"bounded(w={w})+ctx(0.4,2)"] = MemoryConfig(fusion=fusion, context=CONTEXT)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(ap)
    ap.add_argument("--cache", default=None, help="the vector cache directory")
    add_save(ap, "fusion_bounded")
    args = ap.parse_args()
    before = machine(ROOT)
    convs = load(data_file(args.data))
    texts = [t.text for c in convs for t in c.turns] + [q.text for c in convs
                                                         for q in c.questions]
    embedder, cache = cached_vectors(texts, args.cache)
    configs = rows()
    scored: dict[str, list[dict[str, float]]] = {name: [] for name in configs}
    cats: list[int] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        for conv in convs:
            clock = ManualClock(0)
            with Store.open(os.path.join(d, conv.id), sync="none") as store:
                memory = Memory(store, clock=clock, embedder=embedder)
                remember_turns(memory, conv, clock)
                for name, config in configs.items():
                    m = Memory(store, config, clock=clock, persist=True, embedder=embedder)
                    scored[name] += [per_question([r.id for r in m.recall(q.text, k=10)],
                                                  q.evidence) for q in conv.questions]
            cats += [q.category for q in conv.questions]
    idx = [i for i, c in enumerate(cats) if c != 5]
    head = {name: {m: round(sum(v[i][m] for i in idx) / len(idx), 4) for m in METRICS}
            for name, v in scored.items()}
    counted, base = "bounded(w=0.55)+ctx(0.4,2)", "default+ctx(0.4,2)"
    result: dict[str, Any] = {
        "benchmark": "fusion_bounded",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {"conversations": [c.id for c in convs], "questions_cat1-4": len(idx),
                       "embedder": embedder.identity.name,
                       "embedder_digest": embedder.identity.digest, "vector_cache": cache,
                       "recall_s": round(time.perf_counter() - t0, 1)},
        "headline_cat1-4": head,
        "targets": {f"{counted} recall_any@10 >= {base}'s": check(
            head[counted]["recall_any@10"], ">=", head[base]["recall_any@10"])},
    }
    emit("fusion_bounded", result, args.save)


if __name__ == "__main__":
    main()
