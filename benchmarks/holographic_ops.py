"""probe, related, reason and contradict against planted ground truth, beside the Hermes
holographic plugin.

    python benchmarks/holographic_ops.py [--sizes 1000,10000] [--queries 50] [--no-peer]
        [--rounds 7] [--history 3000x6] [--save]

A seeded synthetic corpus with known structure:

- every fact names one or two entities (invented capitalised names), given to
  holomem as the fact's entities, in the order they appear in the text;
- pair facts ("Kavo owes Lumi ...") plant known multi-entity facts and known
  co-occurrences;
- contradiction pairs: two current facts of one subject slot with different values
  ("Kavo lives in Varo" / "Kavo lives in Tessa"), no supersession between them;
- distractors: facts that share an entity but say unrelated things.

Measured per operation: precision@10 and recall@10 against the planted truth, and
the median latency. contradict is paged through the whole store (every page, at the
default 100,000 pairs a page) and timed, wall and CPU, on its first call (which builds
the candidates it keeps between calls), then ``--rounds`` times from the kept
candidates and as many times by the scan that compares every candidate pair (the two
interleaved; their answers must agree), then once after each of ``--rounds`` single
remembers (the kept candidates catching up with one new fact).

A second store, ``--history SUBJECTSxVERSIONS`` (3000x6 unless ``--history none``), is
history-heavy: each of 150 people has SUBJECTS/150 subjects ("Kavo's job is ..."), each
remembered VERSIONS times under ``latest-by-subject``, so one fact in VERSIONS is
current and the rest are superseded (plus 20 planted contradictions: a second current
fact in a subject, remembered with supersession turned off for the call). contradict
is measured there the same way, kept beside the scan, and right after each of
``--rounds`` new versions.

The peer is Hermes Agent's holographic memory plugin (``hermes-agent`` 0.19.0, an
optional benchmark dependency): its ``MemoryStore`` and ``FactRetriever`` are imported
from the installed package and fed the same fact texts. Prints its targets (at 10,000
facts) as met or missed; writes benchmarks/results/holographic_ops.json only with
``--save``.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import add_save, check, emit, machine, median
from holomem import Memory, MemoryConfig, Store
from holomem.api.memory.holographic import kept

VERBS = ["likes", "visits", "paints", "studies", "collects", "repairs", "sells", "writes about"]
OBJECTS = ["old maps", "red bicycles", "jazz records", "mountain trails", "glass jars",
           "wooden boats", "silver coins", "green tea", "night trains", "paper kites",
           "stone bridges", "small gardens", "loud radios", "quiet libraries", "fresh bread"]
PAIR_VERBS = ["owes", "trusts", "teaches", "visits", "calls", "helps"]
PLACES = ["Varo", "Tessa", "Mirel", "Oskan", "Pellin", "Qorra", "Rundel", "Sava"]


def _name(i: int) -> str:
    cons = "bdfgklmnprstvz"
    vows = "aeiou"
    s = ""
    n = i + 31
    while n:
        s += cons[n % len(cons)] + vows[(n // len(cons)) % len(vows)]
        n //= len(cons) * len(vows)
    return s.capitalize() + "x"


def corpus(n: int, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    n_ent = max(40, n // 20)
    names = [_name(i) for i in range(n_ent)]
    facts: list[dict[str, Any]] = []
    contradictions: list[tuple[str, str]] = []
    n_contra = max(10, n // 50)
    for c in range(n_contra):
        who = names[c % n_ent]
        a, b = rng.sample(PLACES, 2)
        ia, ib = f"x{len(facts)}", f"x{len(facts) + 1}"
        facts.append({"id": ia, "text": f"{who} lives in {a}", "entities": [who],
                      "subject": f"{who.lower()}/home{c}"})
        facts.append({"id": ib, "text": f"{who} lives in {b}", "entities": [who],
                      "subject": f"{who.lower()}/home{c}"})
        contradictions.append((ia, ib))
    while len(facts) < n:
        fid = f"x{len(facts)}"
        if rng.random() < 0.35:
            a, b = rng.sample(names, 2)
            facts.append({"id": fid, "entities": [a, b],
                          "text": f"{a} {rng.choice(PAIR_VERBS)} {b} {rng.choice(OBJECTS)}"})
        else:
            a = rng.choice(names)
            facts.append({"id": fid, "entities": [a],
                          "text": f"{a} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"})
    return {"names": names, "facts": facts, "contradictions": contradictions}


ASPECTS = ["job", "car", "city", "pet", "team", "hobby", "school", "bank", "doctor",
           "drink", "band", "phone", "street", "game", "book", "shop", "club", "film",
           "tool", "coach"]
HISTORY_PEOPLE = 150


def history_corpus(subjects: int, versions: int, seed: int = 11) -> dict[str, Any]:
    """``subjects`` subjects of HISTORY_PEOPLE people, ``versions`` versions each (remembered
    version by version, so each supersedes the one before), and 20 planted pairs."""
    rng = random.Random(seed)
    people = [_name(500 + i) for i in range(HISTORY_PEOPLE)]
    per = max(1, subjects // len(people))
    subject_list = [(p, f"{a}{j}") for p in people for j in range(per)
                    for a in [ASPECTS[j % len(ASPECTS)]]][:subjects]
    rounds = []
    for v in range(versions):
        rounds.append([{"id": f"h{v}-{s}", "entities": [who],
                        "text": f"{who}'s {aspect} is {rng.choice(OBJECTS)} {v}",
                        "subject": f"{who.lower()}/{aspect}"}
                       for s, (who, aspect) in enumerate(subject_list)])
    planted = []
    for c in range(20):  # a second current fact in a subject: no supersession
        who, aspect = subject_list[c * max(1, len(subject_list) // 20) % len(subject_list)]
        last = next(f for f in rounds[-1] if f["subject"] == f"{who.lower()}/{aspect}")
        other = rng.choice([o for o in OBJECTS if o not in last["text"]])
        planted.append({"id": f"p{c}", "entities": [who], "subject": last["subject"],
                        "text": f"{who}'s {aspect} is {other} {versions - 1}"})
    return {"rounds": rounds, "planted": planted, "people": people,
            "contradictions": [(p["id"], next(f["id"] for f in rounds[-1]
                                              if f["subject"] == p["subject"]))
                               for p in planted]}


def truth(data: dict[str, Any]) -> dict[str, Any]:
    by_entity: dict[str, set[str]] = {}
    co: dict[str, set[str]] = {}
    for f in data["facts"]:
        for e in f["entities"]:
            by_entity.setdefault(e, set()).add(f["id"])
            co.setdefault(e, set()).update(x for x in f["entities"] if x != e)
    return {"by_entity": by_entity, "co": co}


def _prec_recall(got: list[str], relevant: set[str]) -> tuple[float, float]:
    top = got[:10]
    if not top:
        return 0.0, 0.0
    hit = sum(1 for g in top if g in relevant)
    return hit / len(top), hit / min(10, len(relevant)) if relevant else 0.0


def _page_through(m: Memory, k: int) -> tuple[list[Any], int, int, int, float, float]:
    """Every page of contradict (the default bound stops a call at 100,000 pairs):
    (pairs, pairs compared, pages, facts compared, wall ms, CPU ms)."""
    w, c = time.perf_counter(), time.process_time()
    candidates, compared, pages, cursor = [], 0, 0, None
    while True:
        res = m.contradict(k=k, cursor=cursor)
        candidates.extend(res.pairs)
        compared += res.compared_pairs
        pages += 1
        cursor = res.next_cursor
        if cursor is None:
            break
    return (candidates, compared, pages, res.compared_facts, (time.perf_counter() - w) * 1e3,
            (time.process_time() - c) * 1e3)


def _contradict(m: Memory, planted: set[tuple[str, ...]], rounds: int,
                write: Callable[[int], object]) -> dict[str, Any]:
    """contradict paged through the whole store: the first call (which builds the kept
    candidates), then ``rounds`` of the kept path and of the scan (every candidate pair
    compared, the path the kept one must agree with) interleaved, then ``rounds`` right
    after ``write(i)`` remembers one more fact each (the kept candidates catching up)."""
    k = len(planted)
    first = _page_through(m, k)
    kept_runs, scan_runs = [], []
    real = kept.answer
    for _ in range(rounds):
        kept_runs.append(_page_through(m, k))
        kept.answer = lambda *a, **kw: None  # the scan answers
        try:
            scan_runs.append(_page_through(m, k))
        finally:
            kept.answer = real
        if scan_runs[-1][:4] != kept_runs[-1][:4]:
            raise AssertionError("the kept candidates and the scan answered differently")
    after_write = []
    for i in range(rounds):
        write(i)
        after_write.append(_page_through(m, k))
    candidates, compared, pages, facts = kept_runs[-1][:4]
    candidates.sort(key=lambda p: -p.score)
    found = {tuple(sorted((p.a, p.b))) for p in candidates[: len(planted)]}
    wall = median([r[4] for r in kept_runs])
    scan_wall = median([r[4] for r in scan_runs])
    return {
        "recall": round(len(found & planted) / len(planted), 4),
        "precision": round(len(found & planted) / max(1, len(found)), 4),
        "latency_ms": round(wall, 2), "cpu_ms": round(median([r[5] for r in kept_runs]), 2),
        "scan_latency_ms": round(scan_wall, 2),
        "scan_cpu_ms": round(median([r[5] for r in scan_runs]), 2),
        "scan_over_kept": round(scan_wall / wall, 1) if wall else None,
        "first_call_ms": round(first[4], 2), "first_call_cpu_ms": round(first[5], 2),
        "after_one_write_ms": round(median([r[4] for r in after_write]), 2),
        "after_one_write_cpu_ms": round(median([r[5] for r in after_write]), 2),
        "compared_pairs": compared, "compared_facts": facts, "pages": pages, "rounds": rounds}


def run_holomem(data: dict[str, Any], t: dict[str, Any], queries: list[str],
                pairs: list[tuple[str, str]], workdir: str, rounds: int) -> dict[str, Any]:
    store = Store.open(os.path.join(workdir, "holomem"), sync="none")
    m = Memory(store)
    for i in range(0, len(data["facts"]), 5000):
        m.remember_many(data["facts"][i : i + 5000])
    t0 = time.perf_counter()
    m.probe(queries[0])  # builds the HRR vectors once
    build = time.perf_counter() - t0
    out: dict[str, Any] = {"hrr_build_s": round(build, 3)}
    results: dict[str, list[tuple[float, float, float]]] = {"probe": [], "related": [],
                                                            "reason": []}
    for e in queries:
        s = time.perf_counter()
        got = [h.id for h in m.probe(e, 10).results]
        results["probe"].append((*_prec_recall(got, t["by_entity"][e]), time.perf_counter() - s))
        s = time.perf_counter()
        rel = [h.entity for h in m.related(e, 10).results]
        results["related"].append((*_prec_recall(rel, t["co"].get(e, set())),
                                   time.perf_counter() - s))
    for a, b in pairs:
        both = t["by_entity"][a] & t["by_entity"][b]
        s = time.perf_counter()
        got = [h.id for h in m.reason([a, b], 10).results]
        results["reason"].append((*_prec_recall(got, both), time.perf_counter() - s))
    planted = {tuple(sorted(p)) for p in data["contradictions"]}
    out["contradict"] = _contradict(m, planted, rounds, lambda i: m.remember(
        {"text": f"{queries[0]} writes about night trains {i}", "entities": [queries[0]]}))
    with store.reading() as view:
        out["contradict"]["kept_bytes"] = view.candidates.memory_bytes()
    for op, rows in results.items():
        out[op] = {"precision@10": round(sum(r[0] for r in rows) / len(rows), 4),
                   "recall@10": round(sum(r[1] for r in rows) / len(rows), 4),
                   "latency_p50_ms": round(median([r[2] for r in rows]) * 1e3, 3)}
    store.close()
    return out


def run_history(data: dict[str, Any], workdir: str, rounds: int) -> dict[str, Any]:
    """contradict over the history-heavy store (see the module docstring)."""
    store = Store.open(os.path.join(workdir, "history"), sync="none")
    m = Memory(store, MemoryConfig(supersession="latest-by-subject"))
    for batch in data["rounds"]:  # one version of every subject per call
        for i in range(0, len(batch), 5000):
            m.remember_many(batch[i : i + 5000])
    m.with_supersession("none").remember_many(data["planted"])
    m.probe(data["people"][0])  # builds the HRR vectors once
    last = data["rounds"][-1]
    planted = {tuple(sorted(p)) for p in data["contradictions"]}

    def new_version(i: int) -> None:
        f = last[(37 * i + 5) % len(last)]
        m.remember({**f, "id": f"{f['id']}-next{i}", "text": f"{f['text']} then {i}"})

    out = _contradict(m, planted, rounds, new_version)
    with store.reading() as view:
        out["kept_bytes"] = view.candidates.memory_bytes()
        out["stored_facts"] = int(view.facts.facts)
    store.close()
    return out


def _peer_modules() -> tuple[Any, Any] | None:
    spec = importlib.util.find_spec("plugins.memory.holographic")
    if spec is None:
        return None
    store_mod = importlib.import_module("plugins.memory.holographic.store")
    retr_mod = importlib.import_module("plugins.memory.holographic.retrieval")
    return store_mod, retr_mod


def run_peer(data: dict[str, Any], t: dict[str, Any], queries: list[str],
             pairs: list[tuple[str, str]], workdir: str) -> dict[str, Any]:
    mods = _peer_modules()
    if mods is None:
        return {"skipped": "hermes-agent is not installed (pip install hermes-agent==0.19.0)"}
    store_mod, retr_mod = mods
    store = store_mod.MemoryStore(db_path=os.path.join(workdir, "peer.db"))
    retriever = retr_mod.FactRetriever(store)
    by_content: dict[str, str] = {}
    t0 = time.perf_counter()
    for f in data["facts"]:
        fid = store.add_fact(f["text"])
        by_content[str(fid)] = f["id"]
    ingest_s = time.perf_counter() - t0

    def ids(rows: list[dict[str, Any]]) -> list[str]:
        return [by_content.get(str(r.get("fact_id")), "") for r in rows]

    results: dict[str, list[tuple[float, float, float]]] = {"probe": [], "related": [],
                                                            "reason": []}
    for e in queries:
        s = time.perf_counter()
        got = ids(retriever.probe(e, limit=10))
        results["probe"].append((*_prec_recall(got, t["by_entity"][e]), time.perf_counter() - s))
        s = time.perf_counter()
        rows = retriever.related(e, limit=10)
        # The peer's related returns facts; score it by the entities those facts name.
        names = []
        for fid in ids(rows):
            f = next((x for x in data["facts"] if x["id"] == fid), None)
            names.extend(x for x in (f["entities"] if f else []) if x != e)
        results["related"].append((*_prec_recall(list(dict.fromkeys(names)),
                                                 t["co"].get(e, set())),
                                   time.perf_counter() - s))
    for a, b in pairs:
        both = t["by_entity"][a] & t["by_entity"][b]
        s = time.perf_counter()
        got = ids(retriever.reason([a, b], limit=10))
        results["reason"].append((*_prec_recall(got, both), time.perf_counter() - s))
    planted = {tuple(sorted(p)) for p in data["contradictions"]}
    s = time.perf_counter()
    rows = retriever.contradict(limit=len(planted))
    lat = time.perf_counter() - s
    found = set()
    for r in rows:
        a = by_content.get(str((r.get("fact_a") or {}).get("fact_id")), "")
        b = by_content.get(str((r.get("fact_b") or {}).get("fact_id")), "")
        found.add(tuple(sorted((a, b))))
    out: dict[str, Any] = {"ingest_s": round(ingest_s, 1), "contradict": {
        "recall": round(len(found & planted) / len(planted), 4),
        "precision": round(len(found & planted) / max(1, len(found)), 4),
        "latency_ms": round(lat * 1e3, 2)}}
    for op, rs in results.items():
        out[op] = {"precision@10": round(sum(r[0] for r in rs) / len(rs), 4),
                   "recall@10": round(sum(r[1] for r in rs) / len(rs), 4),
                   "latency_p50_ms": round(median([r[2] for r in rs]) * 1e3, 3)}
    store.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--rounds", type=int, default=7,
                    help="contradict page-throughs per path (kept, scan, after a write)")
    ap.add_argument("--peer-queries", type=int, default=10,
                    help="queries per op for the peer (it scans every fact in Python: slow)")
    ap.add_argument("--history", default="3000x6",
                    help="SUBJECTSxVERSIONS of the history-heavy store, or none")
    add_save(ap, "holographic_ops")
    args = ap.parse_args()
    runs: dict[str, Any] = {}
    for n in (int(x) for x in args.sizes.split(",")):
        data = corpus(n)
        t = truth(data)
        rng = random.Random(n)
        frequent = [e for e, ids in t["by_entity"].items() if len(ids) >= 10]
        queries = rng.sample(frequent, min(args.queries, len(frequent)))
        pair_facts = [f for f in data["facts"] if len(f["entities"]) == 2]
        pairs = [tuple(f["entities"]) for f in rng.sample(pair_facts,
                                                           min(args.queries, len(pair_facts)))]
        with tempfile.TemporaryDirectory() as d:
            runs[str(n)] = {"holomem": run_holomem(data, t, queries, pairs, d, args.rounds)}
            if not args.no_peer:
                runs[str(n)]["hermes_holographic"] = run_peer(
                    data, t, queries[: args.peer_queries], pairs[: args.peer_queries], d)
    history: dict[str, Any] = {}
    if args.history != "none":
        subjects, versions = (int(x) for x in args.history.lower().split("x"))
        with tempfile.TemporaryDirectory() as d:
            history = run_history(history_corpus(subjects, versions), d, args.rounds)
        history = {"subjects": subjects, "versions": versions, **history}
    at = runs.get("10000", {}).get("holomem", {})

    def got(op: str, key: str) -> float | None:
        value = at.get(op, {}).get(key)
        return float(value) if value is not None else None

    emit("holographic_ops", {
        "benchmark": "holographic_ops", "machine": machine(tempfile.gettempdir()),
        "conditions": {"queries_per_op": args.queries, "peer_queries_per_op": args.peer_queries,
                       "seed": 7,
                       "entities": "n/20 invented names; 35% of facts name two",
                       "contradictions": "n/50 planted pairs (same subject, other value)"},
        "runs": runs,
        "history": history,
        "targets_at_10000": {
            "probe_precision@10": check(got("probe", "precision@10"), ">=", 0.9),
            "reason_precision@10": check(got("reason", "precision@10"), ">=", 0.9),
            "contradict_recall": check(got("contradict", "recall"), ">=", 0.9),
            "contradict_precision": check(got("contradict", "precision"), ">=", 0.8),
            **{f"{op}_latency_ms": check(got(op, "latency_p50_ms"), "<", 10)
               for op in ("probe", "related", "reason")},
            "contradict_latency_ms": check(got("contradict", "latency_ms"), "<=", 10),
            "contradict_after_one_write_ms": check(got("contradict", "after_one_write_ms"),
                                                   "<=", 10)},
        "targets_history": {
            "contradict_recall": check(history.get("recall"), ">=", 0.9),
            "contradict_latency_ms": check(history.get("latency_ms"), "<=", 10),
            "contradict_after_one_write_ms": check(history.get("after_one_write_ms"),
                                                   "<=", 10)} if history else {},
    }, args.save)


if __name__ == "__main__":
    main()
