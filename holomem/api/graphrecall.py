"""Graph recall: the facts reached from recall's top hits (docs/contract.md §4f).

Owns: the check of recall's ``graph`` option and its limits, and :func:`reach` — from
each seed (a top hit), the facts one or two steps away through typed links (both
directions) and through entities both facts carry, each with the bonus it earns
and the path that brought it. Recall (:mod:`.recall`) folds them into its ranking;
explain reports the path. Imports the engine's view, relations and the types.

Scoring, written down once: a fact reached ``h`` steps from a seed of score ``s``
earns the bonus ``weight ** h * s`` (the seed's score is the query's own scale, so
the bonus is the seed's normalised score times the weight, in the same units as
every other score); a fact reached from several seeds keeps its largest bonus (the
first found, among equals). It scores its own fused score plus the bonus, times
its multipliers. With ``weight < 1`` a reached fact never outranks the hit that
reached it on the bonus alone, so it displaces a direct hit only by outranking it.

Bounds: an entity held by more than :data:`MAX_ENTITY_FANOUT` facts is too common
to say anything and is not walked; at most :data:`MAX_REACHED` facts are reached
per recall (seeds in rank order, each one's links in the order they were made,
then its entities in their order on the fact).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import msgspec

from holomem.api import relations, validate
from holomem.api.engine import View
from holomem.api.graphtypes import GraphReach, GraphRecall, GraphStep
from holomem.errors import InvalidError, LimitError

MAX_GRAPH_HOPS = 2
MAX_ENTITY_FANOUT = 50
MAX_REACHED = 2000
#: The weight the benchmark chose (benchmarks/graph_bench.py, LoCoMo multi-hop).
DEFAULT_WEIGHT = GraphRecall().weight


def checked(value: object) -> GraphRecall | None:
    """The checked ``graph`` option (a GraphRecall or a dict), or None (off)."""
    if value is None:
        return None
    if isinstance(value, GraphRecall):
        g = value
    elif isinstance(value, dict):
        try:
            g = msgspec.convert(value, GraphRecall, from_attributes=False)
        except msgspec.ValidationError as exc:
            raise InvalidError(f"graph: {exc}") from exc
    else:
        raise InvalidError("graph must be an object such as {\"hops\": 1, \"weight\": 0.3}")
    if isinstance(g.hops, bool) or not isinstance(g.hops, int) or g.hops < 1:
        raise InvalidError("graph.hops must be an integer of at least 1")
    if g.hops > MAX_GRAPH_HOPS:
        raise LimitError(f"graph.hops is at most {MAX_GRAPH_HOPS}; got {g.hops}")
    if isinstance(g.weight, bool) or not isinstance(g.weight, (int, float)) or not (
            0.0 <= g.weight <= 1.0):
        raise InvalidError("graph.weight must be a number from 0 to 1")
    if not isinstance(g.links, bool) or not isinstance(g.entities, bool):
        raise InvalidError("graph.links and graph.entities must be true or false")
    if g.relation is not None:
        validate.doc_id(g.relation, "graph.relation")
    return g


class Step(NamedTuple):
    src: int
    dst: int
    via: str  # "link" | "entity"
    name: str  # the relation or the entity


class Reached(NamedTuple):
    seed: int
    bonus: float
    path: tuple[Step, ...]


def reach(view: View, seeds: Sequence[tuple[int, float]], g: GraphRecall, at: int,
          known_at: int | None) -> dict[int, Reached]:
    """The facts reached from ``seeds`` (slot, score; best first), by slot. Seeds
    themselves are never in the answer; the caller checks what else a result must be."""
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
                        if len(out) >= MAX_REACHED:
                            return out
                        out[step.dst] = Reached(seed, bonus, route)
                    elif bonus > have.bonus:
                        out[step.dst] = Reached(seed, bonus, route)
            frontier = nxt
    return out


def _steps(view: View, slot: int, g: GraphRecall, rid: int, at: int,
           known_at: int | None) -> list[Step]:
    out: list[Step] = []
    facts = view.facts
    if g.links:
        rel = view.relations
        for row in rel.rows(slot, "both"):
            if rid != -2 and rel.rel.item(row) != rid:
                continue
            if not relations.visible(view, row, at, known_at):
                continue
            a, b = rel.src.item(row), rel.dst.item(row)
            out.append(Step(slot, b if a == slot else a, "link", rel.relation(row)))
    if g.entities:
        for entity in view.record(slot).entities:
            members = view.entities.slots(entity)
            if len(members) > MAX_ENTITY_FANOUT:
                continue
            home = facts.namespace(slot)  # entities, like subjects, never cross namespaces
            out.extend(Step(slot, m, "entity", entity) for m in members.tolist()
                       if m != slot and facts.is_fact.item(m) and facts.namespace(m) == home)
    return out


def explained(view: View, reached: Reached) -> GraphReach:
    """What explain says of a reached fact: its seed, hops, bonus and path."""
    return GraphReach(
        seed=view.id_of(reached.seed), hops=len(reached.path), bonus=reached.bonus,
        path=[GraphStep(from_id=view.id_of(s.src), to_id=view.id_of(s.dst), via=s.via,  # type: ignore[arg-type]
                        relation=s.name if s.via == "link" else None,
                        entity=s.name if s.via == "entity" else None)
              for s in reached.path])
