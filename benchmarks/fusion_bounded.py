"""The embedder's default fusion (graded) against the default before it (linear, lexical
weight 0.4) and the bounded fusion, on the LoCoMo development set (issue 29, item 5).

    python benchmarks/fusion_bounded.py [--data DIR] [--cache DIR] [--save]

Facts, questions and metrics as in ``benchmarks/fusion_study.py`` (one store per
conversation, one fact per turn, ``recall(question, k=10)``), with the same vector
cache (``--cache``, default ``/tmp/holomem-embed-cache/<digest>/``: the first run
embeds every text, later runs read them and re-embed a sample to check them). Rows,
each without context and with the context policy at neighbour weight 0.4, window 2
(the configuration issue 29 counts): MiniLM with the embedder's default fusion
(``"default"``: graded, lexical weight 0.5), with the old default (linear, 0.4), with
the graded fusion at lexical weights 0.4-0.6, and with the bounded fusion at 0.5, 0.55
and 0.6. The lexical default is never touched by a fusion (a query without a vector is
scored by BM25 alone), so it is not rerun here: ``benchmarks/locomo.py`` measures it.

The held-out check: for each conversation, the graded weight with the best recall_any@10
+ recall_any@5 (with context) on the other five is scored on it; the held-out figures
over all six are printed beside the default's and the old default's on the same
questions, with each conversation's difference between the two defaults (how much of
the gap is one conversation's noise).

Targets, cat 1-4: the default + context recall_any@10 not below the old default +
context's, measured in the same run; the held-out graded figure not below the old
default's. Prints JSON; writes benchmarks/results/fusion_bounded.json only with
``--save``.
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
OLD_DEFAULT = FusionConfig(method="linear", lexical_weight=0.4)
GRADED = (0.4, 0.45, 0.5, 0.55, 0.6)
BOUNDED = (0.5, 0.55, 0.6)
CTX = "+ctx(0.4,2)"


def rows() -> dict[str, MemoryConfig]:
    fusions: dict[str, Any] = {"default": "default", "linear(w=0.4)": OLD_DEFAULT}
    fusions.update({f"graded(w={w})": FusionConfig(method="graded", lexical_weight=w)
                    for w in GRADED})
    fusions.update({f"bounded(w={w})": FusionConfig(method="bounded", lexical_weight=w)
                    for w in BOUNDED})
    out = {}
    for name, fusion in fusions.items():
        out[name] = MemoryConfig(fusion=fusion)
        out[name + CTX] = MemoryConfig(fusion=fusion, context=CONTEXT)
    return out


def mean(values: list[dict[str, float]]) -> dict[str, float]:
    return {m: round(sum(v[m] for v in values) / len(values), 4) for m in METRICS}


def held_out(scored: dict[str, list[dict[str, float]]], convs: list[str], idx: list[int]
             ) -> dict[str, Any]:
    """Leave one conversation out: the graded weight (with context) chosen on the other
    five by recall_any@10 + recall_any@5, scored on the one left out."""
    names = [f"graded(w={w}){CTX}" for w in GRADED]
    picks, held, old, new, per = [], [], [], [], {}
    for conv in sorted(set(convs)):
        train = [i for i in idx if convs[i] != conv]
        test = [i for i in idx if convs[i] == conv]

        def criterion(name: str, train: list[int] = train) -> float:
            got = mean([scored[name][i] for i in train])
            return got["recall_any@10"] + got["recall_any@5"]

        pick = max(names, key=criterion)
        picks.append({"held_out": conv, "chosen_on_the_rest": pick})
        held += [scored[pick][i] for i in test]
        old += [scored["linear(w=0.4)" + CTX][i] for i in test]
        new += [scored["default" + CTX][i] for i in test]
        a, b = (mean([scored[n][i] for i in test])["recall_any@10"]
                for n in ("default" + CTX, "linear(w=0.4)" + CTX))
        per[conv] = {"default": a, "old_default": b, "difference": round(a - b, 4)}
    return {"picks": picks, "held_out_graded_cat1-4": mean(held),
            "default_same_questions": mean(new), "old_default_same_questions": mean(old),
            "default_minus_old_per_conversation_recall_any@10": per}


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
    convs_of: list[str] = []
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
            convs_of += [conv.id] * len(conv.questions)
    idx = [i for i, c in enumerate(cats) if c != 5]
    head = {name: mean([v[i] for i in idx]) for name, v in scored.items()}
    check_out = held_out(scored, convs_of, idx)
    counted, base = "default" + CTX, "linear(w=0.4)" + CTX
    result: dict[str, Any] = {
        "benchmark": "fusion_bounded",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {"conversations": [c.id for c in convs], "questions_cat1-4": len(idx),
                       "embedder": embedder.identity.name,
                       "embedder_digest": embedder.identity.digest, "vector_cache": cache,
                       "recall_s": round(time.perf_counter() - t0, 1),
                       "default": "graded, lexical weight 0.5",
                       "old_default": "linear, lexical weight 0.4"},
        "headline_cat1-4": head,
        "leave_one_conversation_out": check_out,
        "targets": {
            f"{counted} recall_any@10 >= {base}'s": check(
                head[counted]["recall_any@10"], ">=", head[base]["recall_any@10"]),
            "held-out graded recall_any@10 >= the old default's on the same questions": check(
                check_out["held_out_graded_cat1-4"]["recall_any@10"], ">=",
                check_out["old_default_same_questions"]["recall_any@10"])},
    }
    emit("fusion_bounded", result, args.save)


if __name__ == "__main__":
    main()
