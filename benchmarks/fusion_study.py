"""Fusion study on the LoCoMo development set (issue 14, item 3): how recall should
combine BM25 with the built-in embedder's cosine, and with the context policy.

    python benchmarks/fusion_study.py [--data DIR] [--quick] [--cache DIR] [--save]

``--data DIR``: the LoCoMo directory holding ``locomo_dev.json`` (default
``../shared/data/locomo/`` beside the repository). Facts and questions as in
``benchmarks/locomo.py`` (one store per conversation, one fact per turn, remembered
session by session with a manual clock). Two stores per conversation: one without
vectors, for the lexical rows (exactly what ``locomo.py`` measures), and one written
through the embedder hook (``Memory(store, embedder=...)``: ``remember_many`` embeds
every turn, ``recall`` embeds every question), for the rows with the ``minilm``
embedder.

The embedder's vectors are cached by text under ``--cache`` (default
``/tmp/holomem-embed-cache/<first 16 hex digits of the embedder's identity
digest>/``, never in the repository): the first run embeds every turn and question
(a few minutes on two cores), later runs read them. The hook is then fed from the
cache by an embedder with MiniLM's identity; since MiniLM's vector for a text never
depends on the batch it is in, that is what the real embedder gives, and each run
re-embeds a sample of cached texts with the real model and stops if a byte differs.

Rows (each a MemoryConfig, recall(question, k=10), ``candidate_limit`` 100 unless
named): the lexical default; lexical + context (neighbour weight 0.1-1.0 x window
1-3); minilm with the embedder's default fusion (what ``fusion="default"`` gives a
Memory with an embedder: floored, lexical weight 0.55 — the default this study chose
before it, linear at 0.4, is the ``linear(w=0.4)`` row) and with linear lexical
weights 0.0-0.8 (0.5 is document search's fusion, 0.5 bm25/max +
0.5 cosine, the default before the study), each without context and with every neighbour
weight 0.1-0.5 x window 1-3; minilm with RRF (rank offset 10-60 x lexical weight
0.5-0.7), without context and with five context settings (RRF was behind everywhere
in a first run of the full grid, and weights 0.3-0.4 worst, so its grid is smaller);
candidate depths 10 and 400 for three rows. Metrics per category 1-4 and over 1-4:
recall_any@10, recall_all@10, MRR (first hit within 10) and recall_any@5,
recall_all@5, MRR@5 — the k=5 figures are the first five of the same ranking, which
the run checks against recall(k=5) for one row of each code path (document search,
linear and RRF fusion, context).

The lexical default must stay bit for bit what ``benchmarks/results/locomo.json``
recorded (compared metric by metric). The default for the embedder configuration is
chosen by a rule printed with it: among minilm rows with context, the best
recall_any@10 + recall_any@5 over categories 1-4 whose MRR is not below the lexical
default's (so neither k is sacrificed for the other). A leave-one-conversation-out
run of the same rule (choose on five conversations, score the sixth) says how much
of the chosen row's figure is the choice fitting this data. Targets (cat 1-4,
recall_any@10): lexical default >= 0.685, lexical + context >= 0.72, minilm +
context >= 0.78, the chosen row's MRR >= the lexical default's; printed met/missed.

Prints one JSON document; writes benchmarks/results/fusion_study.json only with
``--save``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import RESULTS, add_save, check, emit, machine  # noqa: E402
from benchmarks.locomo_data import (  # noqa: E402
    CATEGORIES,
    Conversation,
    add_data_argument,
    data_file,
    load,
)
from benchmarks.locomo_data import metrics as locomo_metrics  # noqa: E402
from benchmarks.locomo_data import summarise as locomo_summarise  # noqa: E402
from holomem import ManualClock, Memory, MemoryConfig, Store  # noqa: E402
from holomem.api.memory.config import ContextConfig, FusionConfig, Neighbors  # noqa: E402
from holomem.embedders import EmbedderIdentity, MiniLM  # noqa: E402

TARGETS = {"lexical": 0.685, "lexical+context": 0.72, "minilm+context": 0.78}
HEADLINE = "cat1-4"
METRICS = ("recall_any@10", "recall_all@10", "mrr@10", "recall_any@5", "recall_all@5",
           "mrr@5")


# -- the embedder, fed from a cache ---------------------------------------------------
def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """MiniLM's vectors for texts embedded beforehand (its identity, so the store
    records what the real embedder would); a text not in the cache is an error."""

    def __init__(self, identity: EmbedderIdentity, vectors: dict[str, npt.NDArray[np.float32]]
                 ) -> None:
        self._identity = identity
        self._vectors = vectors

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self._vectors[_key(t)] for t in texts]).astype(np.float32)


def cached_vectors(texts: list[str], cache_dir: str | None
                   ) -> tuple[CachedEmbedder, dict[str, Any]]:
    """Every text's MiniLM vector, from the cache where it holds them; the rest are
    embedded (in batches of 32) and added to it."""
    real = MiniLM()
    ident = real.identity
    folder = cache_dir or os.path.join(tempfile.gettempdir(), "holomem-embed-cache",
                                       ident.digest[:16])
    os.makedirs(folder, exist_ok=True)
    # Named by the identity too: a folder given by the caller may hold another
    # revision's vectors.
    path = os.path.join(folder, f"vectors-{ident.digest[:16]}.npz")
    vectors: dict[str, npt.NDArray[np.float32]] = {}
    if os.path.exists(path):
        with np.load(path) as z:
            for k, v in zip(z["keys"].tolist(), z["vectors"], strict=True):
                vectors[k] = v
    todo = list(dict.fromkeys(t for t in texts if _key(t) not in vectors))
    t0 = time.perf_counter()
    for i in range(0, len(todo), 32):
        chunk = todo[i:i + 32]
        for text, v in zip(chunk, real.embed(chunk), strict=True):
            vectors[_key(text)] = v
        print(f"embedded {min(i + 32, len(todo))}/{len(todo)}", file=sys.stderr)
    took = time.perf_counter() - t0
    if todo:
        keys = sorted(vectors)
        tmp = path + ".tmp.npz"
        np.savez(tmp, keys=np.array(keys), vectors=np.stack([vectors[k] for k in keys]))
        os.replace(tmp, path)
    # The cache must give exactly what the model gives: re-embed a sample.
    sample = sorted(set(texts))[:: max(1, len(set(texts)) // 16)][:16]
    fresh = real.embed(sample)
    same = all(vectors[_key(t)].tobytes() == fresh[i].tobytes() for i, t in enumerate(sample))
    if not same:
        raise SystemExit(f"the cache {path} disagrees with the model: delete it and rerun")
    return CachedEmbedder(ident, vectors), {
        "path": path, "texts": len(set(texts)), "embedded_now": len(todo),
        "embed_s": round(took, 1), "sample_checked_bytes_equal": len(sample)}


# -- the rows ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Row:
    name: str
    family: str  # lexical | lexical+context | minilm | minilm+context
    config: MemoryConfig
    candidate_limit: int = 100

    @property
    def embedded(self) -> bool:
        return self.family.startswith("minilm")


def _context(weight: float, window: int) -> ContextConfig:
    return ContextConfig(neighbors=Neighbors(weight=weight, window=window))


def grid(quick: bool) -> list[Row]:
    ctx_lex = [(w, n) for n in (1, 2, 3) for w in (0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 1.0)]
    # With the linear fusion every context setting; RRF (well behind in a first run
    # of the whole grid, lexical weights 0.3 and 0.4 worst) with a few.
    ctx_linear = [(w, n) for n in (1, 2, 3) for w in (0.1, 0.2, 0.3, 0.4, 0.5)]
    ctx_rrf = [(0.3, 1), (0.1, 2), (0.2, 2), (0.3, 2), (0.5, 2)]
    linear: tuple[float, ...] = (0.0, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    rrf = [(k, w) for k in (10, 20, 40, 60) for w in (0.5, 0.6, 0.7)]
    if quick:
        ctx_lex, ctx_linear, ctx_rrf = [(0.3, 1), (0.5, 2)], [(0.3, 1)], [(0.3, 1)]
        linear, rrf = (0.3, 0.7), [(60, 0.5)]
    rows = [Row("lexical", "lexical", MemoryConfig())]
    for w, n in ctx_lex:
        rows.append(Row(f"lexical+ctx(w={w},n={n})", "lexical+context",
                        MemoryConfig(context=_context(w, n))))
    fusions: list[tuple[str, Any]] = [("default", "default")]
    fusions += [(f"linear(w={w})", FusionConfig(method="linear", lexical_weight=w))
                for w in linear]
    fusions += [(f"rrf(k={k},w={w})", FusionConfig(method="rrf", lexical_weight=w, rrf_k=k))
                for k, w in rrf]
    for fname, fusion in fusions:
        rows.append(Row(f"minilm {fname}", "minilm",
                        MemoryConfig(fusion=fusion)))
        for w, n in (ctx_rrf if fname.startswith("rrf") else ctx_linear):
            rows.append(Row(f"minilm {fname}+ctx(w={w},n={n})", "minilm+context",
                            MemoryConfig(fusion=fusion, context=_context(w, n))))
    # Candidate depth: how many fused candidates recall evaluates before its top k.
    depth_of = ["lexical+ctx(w=0.3,n=1)", "minilm default", "minilm default+ctx(w=0.3,n=1)"]
    by_name = {r.name: r for r in rows}
    for name in depth_of:
        for depth in ((10, 400) if not quick else (10,)):
            base = by_name[name]
            rows.append(Row(f"{name} depth={depth}", base.family, base.config, depth))
    return rows


# -- running ------------------------------------------------------------------------------
@dataclass
class Answers:
    """Per row, per question (in order): the ranked ids (k=10)."""

    questions: list[tuple[str, int, list[str]]]  # (conversation, category, evidence)
    ranked: dict[str, list[list[str]]]
    k5_checked: dict[str, bool]


def remember_turns(memory: Memory, conv: Conversation, clock: ManualClock) -> None:
    """A conversation's turns as "Speaker: text" facts (the harness's text), session by
    session, the clock an hour past each session's date, then a day on."""
    sessions: dict[int, list[dict[str, object]]] = {}
    for t in conv.turns:
        sessions.setdefault(t.session, []).append(
            {"id": t.id, "text": t.text, "event_time": t.event_time_ms,
             "metadata": {"session": t.session, "speaker": t.speaker}})
    for n in sorted(sessions):
        clock.set(int(sessions[n][0]["event_time"]) + 3_600_000)  # type: ignore[call-overload]
        memory.remember_many(sessions[n])
    clock.advance(86_400_000)


def run(convs: list[Conversation], rows: list[Row], embedder: CachedEmbedder | None,
        k5_rows: Sequence[str]) -> Answers:
    answers = Answers([], {r.name: [] for r in rows}, {})
    with tempfile.TemporaryDirectory() as d:
        for conv in convs:
            for embedded in (False, True):
                chosen = [r for r in rows if r.embedded == embedded]
                if not chosen or (embedded and embedder is None):
                    continue
                clock = ManualClock(0)
                e = embedder if embedded else None
                path = os.path.join(d, conv.id + ("-minilm" if embedded else ""))
                with Store.open(path, sync="none") as store:
                    remember_turns(Memory(store, clock=clock, embedder=e), conv, clock)
                    for row in chosen:
                        m = Memory(store, row.config, clock=clock, persist=True, embedder=e)
                        out = answers.ranked[row.name]
                        for q in conv.questions:
                            got = m.recall(q.text, k=10, candidate_limit=row.candidate_limit)
                            ids = [r.id for r in got]
                            out.append(ids)
                            if row.name in k5_rows:
                                five = [r.id for r in m.recall(
                                    q.text, k=5, candidate_limit=row.candidate_limit)]
                                ok = answers.k5_checked.get(row.name, True)
                                answers.k5_checked[row.name] = ok and five == ids[:5]
            answers.questions += [(conv.id, q.category, q.evidence) for q in conv.questions]
            print(f"{conv.id}: {len(conv.questions)} questions x {len(rows)} rows",
                  file=sys.stderr)
    return answers


def per_question(ranked: list[str], evidence: list[str]) -> dict[str, float]:
    rel = set(evidence)
    first = next((i + 1 for i, doc in enumerate(ranked) if doc in rel), None)
    out = {}
    for k in (10, 5):
        top = set(ranked[:k])
        out[f"recall_any@{k}"] = float(bool(rel & top))
        out[f"recall_all@{k}"] = float(rel <= top)
        out[f"mrr@{k}"] = 1.0 / first if first is not None and first <= k else 0.0
    return out


def table(values: list[dict[str, float]], cats: list[int]) -> dict[str, dict[str, float]]:
    """Means per category name and over 1-4, with counts."""
    groups: dict[str, list[dict[str, float]]] = {}
    for cat, v in zip(cats, values, strict=True):
        groups.setdefault(CATEGORIES[cat], []).append(v)
        if cat != 5:
            groups.setdefault(HEADLINE, []).append(v)
    out = {}
    for name in [HEADLINE, *(CATEGORIES[c] for c in (1, 2, 3, 4))]:
        vs = groups.get(name, [])
        out[name] = {m: round(sum(v[m] for v in vs) / len(vs), 4) if vs else float("nan")
                     for m in METRICS}
        out[name]["n"] = len(vs)
    return out


def criterion(t: dict[str, float]) -> float:
    return t["recall_any@10"] + t["recall_any@5"]


def choose(rows: list[Row], scored: dict[str, list[dict[str, float]]], idx: list[int],
           floor_mrr: float) -> str | None:
    """The rule: minilm+context rows, MRR@10 over ``idx`` >= floor, best criterion."""
    best, best_v = None, -1.0
    for r in rows:
        if r.family != "minilm+context" or r.candidate_limit != 100:
            continue
        vs = [scored[r.name][i] for i in idx]
        mean = {m: sum(v[m] for v in vs) / len(vs) for m in METRICS}
        if mean["mrr@10"] >= floor_mrr and criterion(mean) > best_v:
            best, best_v = r.name, criterion(mean)
    return best


def ranked_by_rule(rows: list[Row], head: dict[str, dict[str, float]], floor_mrr: float
                   ) -> list[str]:
    """Every row the rule considers, best first (those below the MRR floor left out)."""
    names = [r.name for r in rows if r.family == "minilm+context" and r.candidate_limit == 100
             and head[r.name]["mrr@10"] >= floor_mrr]
    return sorted(names, key=lambda n: -criterion(head[n]))


def paired(scored: dict[str, list[dict[str, float]]], a: str, b: str, idx: list[int],
           draws: int = 2000) -> dict[str, Any]:
    """Row ``a`` against row ``b`` on the same questions: questions only one of them
    finds (recall_any@10), and a bootstrap (seeded; questions resampled) 95% interval
    of the difference in recall_any@10 and in the rule's criterion."""
    va = np.array([[scored[a][i]["recall_any@10"], scored[a][i]["recall_any@5"]] for i in idx])
    vb = np.array([[scored[b][i]["recall_any@10"], scored[b][i]["recall_any@5"]] for i in idx])
    diff = va - vb
    rng = np.random.default_rng(14)
    picks = rng.integers(0, len(idx), size=(draws, len(idx)))
    d10 = diff[:, 0][picks].mean(axis=1)
    dc = diff.sum(axis=1)[picks].mean(axis=1)

    def interval(x: np.ndarray) -> list[float]:
        return [round(float(np.percentile(x, 2.5)), 4), round(float(np.percentile(x, 97.5)), 4)]

    return {"against": b, "only_this_finds@10": int((diff[:, 0] > 0).sum()),
            "only_other_finds@10": int((diff[:, 0] < 0).sum()),
            "recall_any@10_diff": round(float(diff[:, 0].mean()), 4),
            "recall_any@10_diff_95%": interval(d10),
            "criterion_diff": round(float(diff.sum(axis=1).mean()), 4),
            "criterion_diff_95%": interval(dc)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_data_argument(ap)
    ap.add_argument("--quick", action="store_true",
                    help="two conversations, a small grid (a smoke run)")
    ap.add_argument("--cache", default=None, help="the vector cache directory")
    add_save(ap, "fusion_study")
    args = ap.parse_args()
    path = data_file(args.data)
    before = machine(ROOT)
    convs = load(path)
    if args.quick:
        convs = convs[:2]
    rows = grid(args.quick)
    texts = [t.text for c in convs for t in c.turns] + [q.text for c in convs
                                                         for q in c.questions]
    embedder, cache = cached_vectors(texts, args.cache)
    t0 = time.perf_counter()
    # One row per code path: document search, the linear and RRF fusions, context.
    k5_rows = ["lexical", "lexical+ctx(w=0.3,n=1)", "minilm default", "minilm linear(w=0.5)",
               "minilm default+ctx(w=0.3,n=1)", "minilm linear(w=0.3)+ctx(w=0.3,n=1)",
               "minilm rrf(k=60,w=0.5)+ctx(w=0.3,n=1)"]
    answers = run(convs, rows, embedder, k5_rows)
    run_s = time.perf_counter() - t0
    cats = [c for _, c, _ in answers.questions]
    scored = {name: [per_question(r, ev) for r, (_, _, ev) in
                     zip(ranked, answers.questions, strict=True)]
              for name, ranked in answers.ranked.items()}
    tables = {name: table(v, cats) for name, v in scored.items()}

    # The lexical default, bit for bit against the recorded locomo.json.
    lexical_rows = [(c, locomo_metrics(r, ev)) for r, (_, c, ev) in
                    zip(answers.ranked["lexical"], answers.questions, strict=True)]
    recorded_path = os.path.join(RESULTS, "locomo.json")
    same_as_recorded: bool | str = "not compared (--quick)"
    if not args.quick and os.path.exists(recorded_path):
        with open(recorded_path, encoding="utf-8") as f:
            recorded = json.load(f)["results"]["recall"]
        same_as_recorded = locomo_summarise(lexical_rows) == recorded

    head = {name: t[HEADLINE] for name, t in tables.items()}
    floor = head["lexical"]["mrr@10"]
    all_idx = [i for i, c in enumerate(cats) if c != 5]
    chosen = choose(rows, scored, all_idx, floor)
    # Leave one conversation out: choose on the others, score the one left out.
    loco: list[dict[str, Any]] = []
    held_scores: list[dict[str, float]] = []
    for conv in convs:
        train = [i for i in all_idx if answers.questions[i][0] != conv.id]
        test = [i for i in all_idx if answers.questions[i][0] == conv.id]
        lex_floor = sum(scored["lexical"][i]["mrr@10"] for i in train) / len(train)
        pick = choose(rows, scored, train, lex_floor)
        if pick is None:
            continue
        held_scores += [scored[pick][i] for i in test]
        loco.append({"held_out": conv.id, "chosen_on_the_rest": pick})
    held = ({m: round(sum(v[m] for v in held_scores) / len(held_scores), 4)
             for m in METRICS} if held_scores else {})
    order = ranked_by_rule(rows, head, floor)
    # Rows that answer every question as the chosen one does (the embedder's default
    # fusion is also a linear weight) are named, not compared.
    same = [n for n in order if chosen and n != chosen and scored[n] == scored[chosen]]
    others = [n for n in order if n != chosen and n not in same]
    search_fusion = next((n for n in others if n.startswith("minilm linear(w=0.5)+")), None)
    rivals = list(dict.fromkeys([*others[:4], *([search_fusion] if search_fusion else [])]))
    against = [paired(scored, chosen, b, all_idx) for b in rivals if chosen]

    def best(family: str) -> str:
        names = [r.name for r in rows if r.family == family and r.candidate_limit == 100]
        return max(names, key=lambda n: (head[n]["recall_any@10"], head[n]["mrr@10"]))

    best_of = {f: best(f) for f in ("lexical+context", "minilm", "minilm+context")}

    def any10(name: str | None) -> float | None:
        return head[name]["recall_any@10"] if name else None

    identical = {"value": same_as_recorded, "target": "== results/locomo.json 'recall'",
                 "status": ("met" if same_as_recorded is True else "missed"
                            if same_as_recorded is False else "not measured")}
    targets = {
        "lexical default recall_any@10 (cat 1-4)": check(any10("lexical"), ">=",
                                                         TARGETS["lexical"]),
        "lexical default bit for bit as recorded": identical,
        f"lexical+context recall_any@10, best row {best_of['lexical+context']}":
            check(any10(best_of["lexical+context"]), ">=", TARGETS["lexical+context"]),
        f"minilm+context recall_any@10, chosen row {chosen}":
            check(any10(chosen), ">=", TARGETS["minilm+context"]),
        f"minilm+context recall_any@10, best row {best_of['minilm+context']}":
            check(any10(best_of["minilm+context"]), ">=", TARGETS["minilm+context"]),
        "chosen row MRR@10 (cat 1-4) not below the lexical default's":
            check(head[chosen]["mrr@10"] if chosen else None, ">=", floor),
    }
    depth_effect = {r.name: head[r.name] == head[r.name.rsplit(" depth=", 1)[0]]
                    for r in rows if r.candidate_limit != 100}
    result = {
        "benchmark": "fusion_study",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "conditions": {
            "data": path, "conversations": [c.id for c in convs],
            "facts": sum(len(c.turns) for c in convs), "questions_with_evidence": len(cats),
            "questions_cat1-4": len(all_idx), "embedder": embedder.identity.name,
            "embedder_digest": embedder.identity.digest, "vector_cache": cache,
            "rows": len(rows), "recall_s": round(run_s, 1), "quick": args.quick,
            "k5_is_first_five_of_k10 (checked rows)": all(answers.k5_checked.values()),
        },
        "rule": ("among minilm rows with context (candidate_limit 100): the best "
                 "recall_any@10 + recall_any@5 over categories 1-4 whose MRR@10 is at "
                 "least the lexical default's"),
        "chosen": chosen,
        "chosen_config": _config_json(next(r for r in rows if r.name == chosen))
        if chosen else None,
        "leave_one_conversation_out": {"picks": loco, "held_out_cat1-4": held,
                                       "in_sample_cat1-4": head.get(chosen or "", {})},
        "rows_identical_to_the_chosen": same,
        "chosen_against_the_next_by_the_rule": against,
        "best_recall_any@10_per_family": {f: {"row": n, **head[n]} for f, n in best_of.items()},
        "candidate_depth_changes_nothing": depth_effect,
        "targets": targets,
        "headline_cat1-4": head,
        "per_category": {name: {k: v for k, v in t.items() if k != HEADLINE}
                         for name, t in tables.items()},
    }
    _print_table(head, rows)
    emit("fusion_study", result, args.save)


def _config_json(row: Row) -> dict[str, Any]:
    c = row.config
    fusion = c.fusion if isinstance(c.fusion, str) else {
        "method": c.fusion.method, "lexical_weight": c.fusion.lexical_weight,
        "rrf_k": c.fusion.rrf_k}
    context = c.context if isinstance(c.context, str) else {
        "weight": c.context.neighbors.weight, "window": c.context.neighbors.window}
    return {"fusion": fusion, "context": context, "candidate_limit": row.candidate_limit}


def _print_table(head: dict[str, dict[str, float]], rows: list[Row]) -> None:
    """The headline table, as text, to stderr (the JSON is on stdout)."""
    w = max(len(r.name) for r in rows)
    print(f"{'row':<{w}}  " + "  ".join(f"{m:>13}" for m in METRICS), file=sys.stderr)
    for r in rows:
        print(f"{r.name:<{w}}  " + "  ".join(f"{head[r.name][m]:>13.4f}" for m in METRICS),
              file=sys.stderr)


if __name__ == "__main__":
    main()
