"""Graph recall: the facts reached from recall's top hits (docs/contract.md §4f).

Owns: the check of recall's ``graph`` option and its limits, the rules of the walk
(below) — from each seed (a top hit), the facts one or two steps away through typed
links (both directions) and through entities both facts carry, each with the bonus
it earns and the path that brought it — and what a walk answers (:class:`Reach`,
paths built only for the facts explain asks about). The walk itself is
:func:`.walk.reach`. Recall (:mod:`holomem.api.memory.recall.rank`) folds the reached facts
into its ranking; explain reports the path and any bound that cut the walk. Imports
the engine's view and the types.

Scoring, written down once: a fact reached ``h`` steps from a seed of score ``s``
earns the bonus ``weight ** h * s`` (the seed's score is the query's own scale, so
the bonus is the seed's normalised score times the weight, in the same units as
every other score); a fact reached from several seeds keeps its largest bonus (the
first found, among equals). It scores its own fused score plus the bonus, times
its multipliers. With ``weight < 1`` a reached fact never outranks the hit that
reached it on the bonus alone, so it displaces a direct hit only by outranking it.

Bounds: an entity held by more than :data:`MAX_ENTITY_FANOUT` facts of the walked
fact's namespace (known at ``known_at``) is too common to say anything and is not
walked; at most :data:`MAX_REACHED` facts are reached per recall (seeds in rank
order, each one's links in the order they were made, then its entities in their order
on the fact). Neither cuts silently: the walk records the entities it left and
whether it stopped at the cap, and explain reports both
(``Explanation.graph_bounds``). Together they bound the work: the walk walks from the
seeds and, with two hops, on from each fact it reached once, so from at most
``2 k + MAX_REACHED`` facts (:mod:`.walk`).
"""

from __future__ import annotations

from typing import NamedTuple

import msgspec
import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory.graph.types import GraphBounds, GraphReach, GraphRecall, GraphStep
from holomem.errors import InvalidError, LimitError

MAX_GRAPH_HOPS = 2
MAX_ENTITY_FANOUT = 50
MAX_REACHED = 2000
#: How many of the entities not walked explain names (it counts them all).
MAX_NAMED_ENTITIES = 20
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


#: How a step went, in the walk's arrays.
LINK, ENTITY = 0, 1


class Reach:
    """What one graph walk reached: ``slots`` (ascending) with their ``bonus``, and what
    a bound left out (``too_common``: entities met and not walked, with the number of
    facts holding each; ``capped``: the walk stopped at :data:`MAX_REACHED`; ``steps``:
    the links and entity-to-fact moves it followed). A fact's
    seed and path (at most two steps: ``mid`` is the fact between, -1 after one hop)
    are held as arrays and made into Steps only when asked for (:meth:`get`: explain)."""

    def __init__(self, slots: np.ndarray, bonus: np.ndarray, hops: np.ndarray,
                 seed: np.ndarray, seeds: np.ndarray, mid: np.ndarray,
                 how: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                 relation_names: list[str], entity_names: list[str],
                 too_common: dict[str, int], capped: bool, steps: int = 0) -> None:
        self.slots, self.bonus = slots, bonus
        #: how many steps the walk took (links and entity-to-fact moves followed)
        self.steps = steps
        self._hops, self._seed, self._seeds, self._mid, self._how = hops, seed, seeds, mid, how
        self._relation_names, self._entity_names = relation_names, entity_names
        self.too_common, self.capped = too_common, capped

    @classmethod
    def empty(cls) -> Reach:
        """A walk that reached nothing: one instance, shared (a Reach is never changed
        once made)."""
        return _NOTHING

    def __len__(self) -> int:
        return len(self.slots)

    def _index(self, slot: int) -> int:
        i = int(np.searchsorted(self.slots, slot))
        return i if i < len(self.slots) and int(self.slots[i]) == slot else -1

    def __contains__(self, slot: object) -> bool:
        return isinstance(slot, (int, np.integer)) and self._index(int(slot)) >= 0

    def _step(self, src: int, dst: int, via: int, name: int) -> Step:
        if via == LINK:
            return Step(src, dst, "link", self._relation_names[name])
        return Step(src, dst, "entity", self._entity_names[name])

    def get(self, slot: int) -> Reached | None:
        """How ``slot`` was reached (its seed, bonus and path), or None."""
        i = self._index(slot)
        if i < 0:
            return None
        seed = int(self._seeds[int(self._seed[i])])
        via1, name1, via2, name2 = (int(a[i]) for a in self._how)
        if int(self._hops[i]) == 1:
            path: tuple[Step, ...] = (self._step(seed, slot, via1, name1),)
        else:
            mid = int(self._mid[i])
            path = (self._step(seed, mid, via1, name1), self._step(mid, slot, via2, name2))
        return Reached(seed, float(self.bonus[i]), path)

    def __getitem__(self, slot: int) -> Reached:
        got = self.get(slot)
        if got is None:
            raise KeyError(slot)
        return got

    def items(self) -> list[tuple[int, Reached]]:
        """Every reached fact and how, by slot (builds every path)."""
        return [(s, self[s]) for s in self.slots.tolist()]


_NONE = np.zeros(0, dtype=np.int64)
_NOTHING = Reach(_NONE, np.zeros(0), _NONE, _NONE, _NONE, _NONE, (_NONE, _NONE, _NONE, _NONE),
                 [], [], {}, False)


def explained(view: View, reached: Reached) -> GraphReach:
    """What explain says of a reached fact: its seed, hops, bonus and path."""
    return GraphReach(
        seed=view.id_of(reached.seed), hops=len(reached.path), bonus=reached.bonus,
        path=[GraphStep(from_id=view.id_of(s.src), to_id=view.id_of(s.dst), via=s.via,  # type: ignore[arg-type]
                        relation=s.name if s.via == "link" else None,
                        entity=s.name if s.via == "entity" else None)
              for s in reached.path])


def bounds(reach: Reach) -> GraphBounds | None:
    """What explain says of the bounds that cut ``reach`` (None: none cut it)."""
    if not reach.too_common and not reach.capped:
        return None
    named = dict(list(reach.too_common.items())[:MAX_NAMED_ENTITIES])
    return GraphBounds(entities_not_walked=named,
                       entities_not_walked_count=len(reach.too_common),
                       max_entity_fanout=MAX_ENTITY_FANOUT, reached_cap=reach.capped,
                       max_reached=MAX_REACHED)


def positions(slots: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index in ``slots`` of each of ``wanted``, whether it is there at all); ``slots``
    distinct, in any order."""
    if not len(slots):
        return np.zeros(len(wanted), dtype=np.int64), np.zeros(len(wanted), dtype=bool)
    sorter = np.argsort(slots, kind="stable")
    at = np.minimum(np.searchsorted(slots[sorter], wanted), len(slots) - 1)
    n = sorter[at]
    return n, slots[n] == wanted
