"""Guarantee: graph recall's walk and ranking (a hop at a time over the projections'
arrays, and without evaluating candidates one by one when every fact is current) answer
exactly what the straightforward implementation answers — the same facts reached with
the same bonus, seed and path, the same results with bit-identical scores in the same
order, the same candidate pool — on random graphs of facts, links and entities, with
removed links, forgotten facts, supersession, time travel, both bounds cutting and
the seeds walked in batches of any size."""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.engine import View
from holomem.api.memory.facts.records import wanted
from holomem.api.memory.graph import reach, walk
from holomem.api.memory.graph import relations as api_relations
from holomem.api.memory.graph.reach import Reached, Step
from holomem.api.memory.graph.types import GraphRecall
from holomem.api.memory.recall.rank import Candidate, Ranking, checked

WORDS = ("river", "stone", "lamp", "north", "glass", "wolf", "paper", "salt")
ENTITIES = ("E0", "E1", "E2", "E3", "E4", "E5")
RELATIONS = ("cites", "causes")


# -- the straightforward implementation, one step at a time ------------------------------
def _steps(view: View, slot: int, g: GraphRecall, rid: int, at: int,
           known_at: int | None) -> list[Step]:
    out: list[Step] = []
    facts, rel = view.facts, view.relations
    if g.links:
        for row in rel.rows(slot, "both"):
            if rid != -2 and rel.rel.item(row) != rid:
                continue
            if not api_relations.visible(view, row, at, known_at):
                continue
            a, b = rel.src.item(row), rel.dst.item(row)
            out.append(Step(slot, b if a == slot else a, "link", rel.relation(row)))
    if g.entities:
        home = facts.namespace(slot)
        for entity in view.record(slot).entities:
            members = [m for m in view.entities.slots(entity).tolist()
                       if facts.is_fact.item(m) and facts.namespace(m) == home
                       and (known_at is None or facts.ingest.item(m) <= known_at)]
            if len(members) > reach.MAX_ENTITY_FANOUT:
                continue
            out.extend(Step(slot, m, "entity", entity) for m in members if m != slot)
    return out


def reference_reach(view: View, seeds: list[tuple[int, float]], g: GraphRecall, at: int,
                    known_at: int | None) -> dict[int, Reached]:
    seed_slots = {s for s, _ in seeds}
    out: dict[int, Reached] = {}
    rid = -2 if g.relation is None else view.relations.relation_id(g.relation)
    for seed, score in seeds:
        frontier: list[tuple[int, tuple[Step, ...]]] = [(seed, ())]
        seen = {seed}
        for hop in range(1, g.hops + 1):
            bonus = (g.weight ** hop) * score
            nxt: list[tuple[int, tuple[Step, ...]]] = []
            for node, path in frontier:
                for step in _steps(view, node, g, rid, at, known_at):
                    if step.dst in seen:
                        continue
                    seen.add(step.dst)
                    route = (*path, step)
                    nxt.append((step.dst, route))
                    if step.dst in seed_slots:
                        continue
                    have = out.get(step.dst)
                    if have is None:
                        if len(out) >= reach.MAX_REACHED:
                            return out
                        out[step.dst] = Reached(seed, bonus, route)
                    elif bonus > have.bonus:
                        out[step.dst] = Reached(seed, bonus, route)
            frontier = nxt
    return out


def reference_rank(ranking: Ranking, prune: bool
                   ) -> tuple[dict[int, Reached], list[Candidate], list[Candidate]]:
    """(reached, the k results, the ranked pool) as graph recall defines them: every
    candidate evaluated, the walk from the top k, each reached fact scored in turn."""
    o, view = ranking.options, ranking.view
    plain = Ranking(view, ranking.policies, ranking.query,
                    msgspec.structs.replace(o, graph=None), ranking.at, ranking.filter)
    evaluated = plain.rank()[1]
    examined = len(plain.candidates()[1])
    g = reach.checked(o.graph)
    assert g is not None
    seeds = [(c.slot, c.score) for c in evaluated if wanted(o.history, c.status)][: o.k]
    reached = reference_reach(view, seeds, g, ranking.at, o.known_at)
    floor = (seeds[-1][1] if prune and len(seeds) == o.k
             and ranking.policies.feedback_weight is None else None)
    by_slot = {c.slot: n for n, c in enumerate(evaluated)}
    out = list(evaluated)
    extra = examined
    for slot, how in sorted(reached.items()):
        n = by_slot.get(slot)
        if n is not None:
            c = out[n]
            out[n] = ranking.scored(slot, c.rank, c.fused, c.lexical, c.semantic,
                                    bonus=how.bonus)
            continue
        if floor is not None and how.bonus <= floor:
            continue
        if not view.facts.is_fact.item(slot) or not view.facts.known(slot, o.known_at):
            continue
        if ranking.allowed is not None and not ranking.allowed[slot]:
            continue
        extra += 1
        out.append(ranking.scored(slot, extra, 0.0, 0.0, None, bonus=how.bonus))
    out.sort(key=lambda c: (-c.score, c.rank))
    return reached, [c for c in out if wanted(o.history, c.status)][: o.k], out


# -- random stores ------------------------------------------------------------------------
def _build(memory: Memory, clock: ManualClock, rng: random.Random, n: int,
           subjects: bool) -> list[int]:
    """Facts in two namespaces (some with subjects: supersession), links, unlinks and
    forgets; returns the times passed on the way."""
    times = []
    ids = []
    for i in range(n):
        clock.advance(rng.randint(1, 5))
        times.append(clock.now_ms())
        fact: dict[str, Any] = {
            "id": f"f{i}", "namespace": ["a"] if rng.random() < 0.7 else ["b"],
            "text": " ".join(rng.choices(WORDS, k=rng.randint(1, 4))),
            "entities": rng.sample(ENTITIES, rng.randint(0, 3))}
        if subjects and rng.random() < 0.3:
            fact["subject"] = rng.choice(("s1", "s2"))
        memory.remember_many([fact])
        ids.append(f"f{i}")
    ns = {f: memory.get(f) for f in ids}
    for _ in range(rng.randint(0, 4 * n)):
        clock.advance(rng.randint(0, 3))
        x, y = rng.sample(ids, 2)
        fx, fy = ns[x], ns[y]
        if fx is None or fy is None or fx.namespace != fy.namespace:
            continue
        roll = rng.random()
        if roll < 0.8:
            memory.relate(x, y, rng.choice(RELATIONS))
        elif roll < 0.95:
            memory.unrelate(x, y, rng.choice(RELATIONS))
        else:
            memory.forget({"ids": [x]})
            ns[x] = None
        times.append(clock.now_ms())
    return times


option = st.fixed_dictionaries({
    "k": st.integers(1, 8), "candidate_limit": st.integers(1, 8),
    "history": st.sampled_from(("current", "current", "all", "historical")),
    "namespace": st.sampled_from((None, None, ["a"])),
    "graph": st.fixed_dictionaries({
        "hops": st.integers(1, 2), "weight": st.sampled_from((0.0, 0.2, 0.5, 1.0)),
        "links": st.booleans(), "entities": st.booleans(),
        "relation": st.sampled_from((None, None, "cites", "never_made"))}),
})


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 24), subjects=st.booleans(),
       fanout=st.sampled_from((2, 4, 50)), cap=st.sampled_from((1, 3, 2000)),
       batch=st.sampled_from(((16, 1 << 16), (1, 1), (2, 8))),
       queries=st.lists(st.tuples(st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
                                  option, st.integers(0, 3)), min_size=1, max_size=6))
def test_graph_recall_answers_what_the_step_by_step_walk_answers(
        seed: int, n: int, subjects: bool, fanout: int, cap: int, batch: tuple[int, int],
        queries: list[tuple[list[str], dict[str, Any], int]]) -> None:
    rng = random.Random(seed)
    saved = reach.MAX_ENTITY_FANOUT, reach.MAX_REACHED
    saved_batch = walk.FIRST_BATCH, walk.BATCH_STEPS
    reach.MAX_ENTITY_FANOUT, reach.MAX_REACHED = fanout, cap
    walk.FIRST_BATCH, walk.BATCH_STEPS = batch  # seeds walked in small batches
    try:
        with tempfile.TemporaryDirectory() as d, \
                Store.open(Path(d) / "s", sync="none") as store:
            clock = ManualClock(1_000_000)
            config = MemoryConfig(supersession="latest-by-subject" if subjects else "none")
            memory = Memory(store, config, clock=clock)
            times = _build(memory, clock, rng, n, subjects)
            for words, fields, when in queries:
                fields = dict(fields)
                if when == 1:
                    fields["as_of"] = rng.choice(times)
                elif when == 2:
                    fields["known_at"] = rng.choice(times)
                o, where = checked(None, fields)
                at = o.as_of if o.as_of is not None else clock.now_ms()
                query = " ".join(words)

                def compare(view: View, o: Any = o, where: Any = where, at: int = at,
                            query: str = query) -> None:
                    ranking = Ranking(view, memory.policies, query, o, at, where)
                    found = ranking.results()
                    reached, chosen, pool = reference_rank(ranking, prune=True)
                    assert found == [(c.slot, c.score) for c in chosen]
                    assert ranking.reached.items() == sorted(reached.items())
                    assert ranking.rank()[1] == pool
                    everything = reference_rank(ranking, prune=False)[2]
                    assert ranking.rank(history="all")[1] == everything
                    assert ranking.reached.items() == sorted(reached.items())

                store.read(compare)
    finally:
        reach.MAX_ENTITY_FANOUT, reach.MAX_REACHED = saved
        walk.FIRST_BATCH, walk.BATCH_STEPS = saved_batch
