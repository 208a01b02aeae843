"""LoCoMo development set: recall with and without the built-in MMR reranker.

    python benchmarks/rerank_locomo.py [--data DIR] [--embedder] [--save]

One store per conversation, one fact per dialog turn, remembered session by
session with a manual clock (as benchmarks/locomo.py does). Each question is asked
with ``Memory.recall(question, k=10)`` and again with ``rerank=MMR(λ)`` for each λ
in :data:`LAMBDAS` (the pool: recall's 100 best candidates); MMR compares
candidates by their HRR content vectors, or with ``--embedder`` by the built-in
MiniLM embeddings (then plain recall is the embedder's default fusion). Reported
over categories 1-4 and per category: recall_any@5, recall_all@5, recall_any@10,
MRR. The target (issue 19): the documented default λ does not lower
recall_any@10 by more than 0.01 against no reranker (MMR trades relevance for
variety, so a gain is not expected on a benchmark scored by the evidence turns).
Prints the JSON; writes benchmarks/results/rerank_locomo[_minilm].json only with
``--save``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import add_save, check, emit, machine
from benchmarks.locomo_data import add_data_argument, data_file, load, metrics, summarise
from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.embedding.embedder import query_vector
from holomem.api.memory.recall.rerank import MMR, MMR_LAMBDA

LAMBDAS = (0.5, 0.7, 0.85, 0.95)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--embedder", action="store_true", help="embed with the built-in MiniLM")
    add_data_argument(ap)
    add_save(ap, "rerank_locomo")
    args = ap.parse_args()
    convs = load(data_file(args.data))
    config = MemoryConfig(embedder="minilm") if args.embedder else MemoryConfig()
    names = ["recall", *(f"recall+mmr{lam}" for lam in LAMBDAS)]
    rerankers = {f"recall+mmr{lam}": MMR(lam) for lam in LAMBDAS}
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {n: [] for n in names}
    facts = 0
    with tempfile.TemporaryDirectory() as d:
        for conv in convs:
            clock = ManualClock(0)
            with Store.open(os.path.join(d, conv.id), sync="none") as store:
                memory = Memory(store, config, clock=clock)
                sessions: dict[int, list[dict[str, object]]] = {}
                for t in conv.turns:
                    sessions.setdefault(t.session, []).append(
                        {"id": t.id, "text": t.text, "event_time": t.event_time_ms})
                for n in sorted(sessions):
                    clock.set(int(sessions[n][0]["event_time"]) + 3_600_000)  # type: ignore[call-overload]
                    memory.remember_many(sessions[n])
                facts += len(conv.turns)
                clock.advance(86_400_000)
                for q in conv.questions:
                    vec: dict[str, Any] = {}
                    if memory.embedder is not None:  # embed once for every setting
                        vec = {"embedding": query_vector(memory.embedder, q.text)}
                    plain = [r.id for r in memory.recall(q.text, k=10, **vec)]
                    rows["recall"].append((q.category, metrics(plain, q.evidence)))
                    for name, fn in rerankers.items():
                        got = [r.id for r in memory.recall(q.text, k=10, rerank=fn, **vec)]
                        rows[name].append((q.category, metrics(got, q.evidence)))
    results = {name: summarise(r) for name, r in rows.items()}
    head = {n: {m: r["cat1-4"][m] for m in ("recall_any@10", "recall_any@5", "mrr")}
            for n, r in results.items()}
    default = f"recall+mmr{MMR_LAMBDA}"
    emit("rerank_locomo" + ("_minilm" if args.embedder else ""), {
        "benchmark": "rerank_locomo",
        "machine": machine("."),
        "conditions": {"data": "LoCoMo dev", "facts": facts,
                       "questions_with_evidence": len(rows["recall"]), "k": 10,
                       "candidate_limit": 100,
                       "vectors": "minilm embeddings" if args.embedder else "HRR content",
                       "default_lambda": MMR_LAMBDA},
        "headline_cat1-4": head,
        "results": results,
        "targets": {"default_lambda_recall_any@10_drop": check(
            round(head["recall"]["recall_any@10"] - head[default]["recall_any@10"], 4)
            if default in head else None, "<=", 0.01)},
    }, args.save)


if __name__ == "__main__":
    main()
