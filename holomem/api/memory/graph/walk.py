"""Graph recall's walk: the facts reached from recall's seeds, a whole hop at a time.

Owns: :func:`reach` — the walk :mod:`.reach` defines (its docstring has the
rules, the scoring and the bounds), computed over the projections' int columns with
numpy: one gather of every link touching the frontier (``Relations.touching_many``),
one pass over the frontier's entities, then the per-seed "first seen" rule, the cap
and the "largest bonus, first among equals" rule as array operations. Only the
entities of the frontier's facts are read from the facts' records (together, a
frontier at a time).
Imports the engine's view and :mod:`.reach`.

Order, written down because the answer depends on it: the walk is seed by seed (best
first), within a seed hop by hop, within a hop node by node in the order the nodes
were found, and a node's steps are its links (rows ascending: the order they were
made) then its entities (in their order on the fact, each entity's facts ascending).
Computing a batch of seeds' hop at once gives the same sequence, because the arrays
are kept in that order (seed, then position); batches follow one another in seed
order, and only each fact's winning sighting is carried from one to the next, so
memory is bounded by a batch (:data:`BATCH_STEPS` steps, about) and the cap.

Work, bounded by the facts walked from, not by the seeds times what they reach: the
first hop walks from every seed; the second walks on from each fact once per walk,
from its first sighting on the first hop (:func:`_walked_on` says why that changes
no answer), and not from the facts of seeds the cap stops before their second hop.
So a walk walks from at most ``2 k + MAX_REACHED`` facts (``k`` seeds; a seed may
also be another seed's first hop) and :attr:`.reach.Reach.steps` counts what it took.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np

from holomem.api.engine import View
from holomem.api.memory.graph import reach as graphrecall
from holomem.api.memory.graph.reach import ENTITY, LINK, Reach
from holomem.api.memory.graph.types import GraphRecall
from holomem.projections.text import TextRecord

_EMPTY = np.zeros(0, dtype=np.int64)


class Level(NamedTuple):
    """One hop of a batch of the walk: its sightings in the walk's order, each with the
    frontier position it came from."""

    pos: np.ndarray  # index in the previous level (hop 1: the seed's, in the batch)
    dst: np.ndarray
    via: np.ndarray  # LINK or ENTITY
    name: np.ndarray  # relation id (LINK) or index in the walk's entity names (ENTITY)
    seed: np.ndarray  # the seed's index


class _Steps(NamedTuple):
    pos: np.ndarray  # the frontier position each step leaves from
    dst: np.ndarray
    via: np.ndarray  # LINK or ENTITY
    name: np.ndarray  # relation id (LINK) or index in the walk's entity names (ENTITY)


class _Walk:
    def __init__(self, view: View, g: GraphRecall, at: int, known_at: int | None) -> None:
        self.view, self.g, self.at, self.known_at = view, g, at, known_at
        self.rid = -2 if g.relation is None else view.relations.relation_id(g.relation)
        self.entity_names: list[str] = []
        self._entity_ids: dict[str, int] = {}
        #: entities met on the walk and not walked (too common): name -> (facts holding
        #: it, the index of the first seed whose walk met it)
        self.too_common: dict[str, tuple[int, int]] = {}
        #: the facts a second hop has walked from so far (ascending)
        self.walked_on: np.ndarray = _EMPTY
        #: every step taken (the bound docs/contract.md §4f gives is on this)
        self.taken = 0

    def steps(self, frontier: np.ndarray, seeds: np.ndarray) -> _Steps:
        """Every step out of ``frontier`` (walked from the seeds of index ``seeds``), in
        the walk's order (module docstring)."""
        parts = []
        if self.g.links:
            parts.append(self._links(frontier))
        if self.g.entities:
            parts.append(self._entities(frontier, seeds))
        if not parts:
            return _Steps(_EMPTY, _EMPTY, _EMPTY, _EMPTY)
        if len(parts) == 1:
            self.taken += len(parts[0].dst)
            return parts[0]
        pos, dst, via, name = (np.concatenate(c) for c in zip(*parts, strict=True))
        self.taken += len(dst)
        order = np.argsort(pos, kind="stable")  # links before entities within a node
        return _Steps(pos[order], dst[order], via[order], name[order])

    def _links(self, frontier: np.ndarray) -> _Steps:
        rel, facts = self.view.relations, self.view.facts
        which, rows = rel.touching_many(frontier)
        if self.rid != -2:
            keep = rel.rel.view()[rows] == self.rid
            which, rows = which[keep], rows[keep]
        src, dst = rel.src.view()[rows], rel.dst.view()[rows]
        t = rel.time.view()[rows]
        ok = t <= self.at
        if self.known_at is not None:
            ingest = facts.ingest.view()
            ok &= (t <= self.known_at) & (ingest[src] <= self.known_at) \
                & (ingest[dst] <= self.known_at)
        which, rows, src, dst = which[ok], rows[ok], src[ok], dst[ok]
        other = np.where(src == frontier[which], dst, src).astype(np.int64)
        return _Steps(which, other, np.full(len(rows), LINK, dtype=np.int64),
                      rel.rel.view()[rows].astype(np.int64))

    def _entities(self, frontier: np.ndarray, seeds: np.ndarray) -> _Steps:
        view, facts = self.view, self.view.facts
        spaces = facts.namespaces
        pos: list[int] = []
        names: list[int] = []
        carried: list[str] = []
        for i, rec in enumerate(_records(view, frontier.tolist())):
            for entity in rec.entities:
                eid = self._entity_ids.get(entity)
                if eid is None:
                    eid = self._entity_ids[entity] = len(self.entity_names)
                    self.entity_names.append(entity)
                pos.append(i)
                names.append(eid)
                carried.append(entity)
        if not carried:
            return _Steps(_EMPTY, _EMPTY, _EMPTY, _EMPTY)
        # Every posting in one copy, then only the facts an entity can lead to from its
        # fact: live, of the same namespace (entities, like subjects, never cross one; no
        # namespace id: the root's) and known at known_at. The fan-out counts those
        # alone, so no other namespace's facts, and none written after known_at, change
        # the walk or show in its report.
        lens, held = view.entities.postings_of(carried)
        owner = np.repeat(np.arange(len(carried), dtype=np.int32), lens)
        ok = view.catalog.alive.view()[held] & facts.is_fact.view()[held]
        if self.known_at is not None:
            ok &= facts.ingest.view()[held] <= self.known_at
        held, owner = held[ok], owner[ok]  # (narrowed first: a batch's postings are many)
        at = np.asarray(pos, dtype=np.int64)[owner]
        nid = spaces.of_slot.view()
        root = spaces.intern_id(())
        home, theirs = nid[frontier[at]], nid[held]
        same = np.where(theirs < 0, root, theirs) == np.where(home < 0, root, home)
        held, owner, at = held[same].astype(np.int64), owner[same], at[same]
        counts = np.bincount(owner, minlength=len(carried))
        for j in np.flatnonzero(counts > graphrecall.MAX_ENTITY_FANOUT).tolist():
            have = self.too_common.get(carried[j])
            seed = int(seeds[pos[j]])
            if have is None or seed < have[1]:  # (a batch's hops do not go seed by seed)
                self.too_common[carried[j]] = (int(counts[j]), seed)
        keep = (counts[owner] <= graphrecall.MAX_ENTITY_FANOUT) & (held != frontier[at])
        return _Steps(at[keep], held[keep], np.full(int(keep.sum()), ENTITY, dtype=np.int64),
                      np.asarray(names, dtype=np.int64)[owner[keep]])


#: Records read together by the entity step (a large frontier's are read a piece at a
#: time, so no more of them are held at once).
RECORDS_AT_ONCE = 32


def _records(view: View, slots: list[int]) -> Iterator[TextRecord]:
    """The records of ``slots``, in order, read :data:`RECORDS_AT_ONCE` together (for
    hops 1 the seeds: recall's results then find them read already in this block)."""
    for i in range(0, len(slots), RECORDS_AT_ONCE):
        yield from view.records_of(slots[i:i + RECORDS_AT_ONCE])


#: Seeds walked together at first; then as many as keep a batch's sightings near
#: :data:`BATCH_STEPS` (a batch's arrays are what a walk holds in memory at once).
FIRST_BATCH = 16
BATCH_STEPS = 1 << 16


class _Sightings(NamedTuple):
    """Sightings of facts that are no seed, in the walk's order, with their path (at
    most two steps: ``mid`` is -1 and ``via2``/``name2`` unused after one hop)."""

    dst: np.ndarray
    seed: np.ndarray  # the seed's index
    hop: np.ndarray
    bonus: np.ndarray
    mid: np.ndarray
    via1: np.ndarray
    name1: np.ndarray
    via2: np.ndarray
    name2: np.ndarray

    def take(self, idx: np.ndarray | slice) -> _Sightings:
        return _Sightings(*(a[idx] for a in self))


def _batch(walk: _Walk, slots: np.ndarray, first: int, scores: np.ndarray,
           ordered_seeds: np.ndarray, reached: np.ndarray) -> tuple[_Sightings, int]:
    """The sightings of the walk from seeds ``first``.. (their ``slots``) that can change
    its answer, in the walk's order, and how many steps it took; ``reached``: the facts
    earlier batches reached (ascending)."""
    g = walk.g
    stride = max(walk.view.catalog.slots, int(slots.max()) + 1)
    frontier, owner = slots, np.arange(first, first + len(slots), dtype=np.int64)
    seen = (owner - first) * stride + slots  # (seed, fact) pairs: seed*stride+fact
    levels: list[Level] = []
    steps = 0
    for hop in range(1, g.hops + 1):
        if not len(frontier):
            break
        if hop == g.hops:
            if hop == 1:
                last, taken = _last(walk, frontier, owner)
            else:  # (frontier and owner are the first hop's dst and seed)
                on = _walked_on(walk, levels[-1], ordered_seeds, reached)
                last, taken = _last(walk, frontier[on], owner[on])
                last = last._replace(pos=on[last.pos])
            levels.append(last)
            steps += taken
            break
        step = walk.steps(frontier, owner)
        steps += len(step.dst)
        seed = owner[step.pos]
        key = (seed - first) * stride + step.dst
        # Each seed's first sight of each fact it had not seen (one sort for both).
        every = np.concatenate([seen, key])
        firsts = _firsts(every)
        keep = np.sort(firsts[firsts >= len(seen)]) - len(seen)
        levels.append(Level(step.pos[keep], step.dst[keep], step.via[keep],
                            step.name[keep], seed[keep]))
        seen = every[firsts]
        frontier, owner = step.dst[keep], seed[keep]
    parts = []
    assert graphrecall.MAX_GRAPH_HOPS == 2  # so a path is one step, or two through a mid
    for h, lvl in enumerate(levels, start=1):
        i = np.minimum(np.searchsorted(ordered_seeds, lvl.dst), len(ordered_seeds) - 1)
        out = np.flatnonzero(ordered_seeds[i] != lvl.dst)
        none = np.full(len(out), -1, dtype=np.int64)
        if h == 1:
            path = (none, lvl.via[out], lvl.name[out], none, none)
        else:
            up = levels[0]
            parent = lvl.pos[out]
            path = (up.dst[parent], up.via[parent], up.name[parent], lvl.via[out],
                    lvl.name[out])
        parts.append(_Sightings(lvl.dst[out], lvl.seed[out],
                                np.full(len(out), h, dtype=np.int64),
                                (g.weight ** h) * scores[lvl.seed[out]], *path))
    if not parts:
        return _Sightings(*([_EMPTY] * 9)), steps
    if len(parts) == 1:  # (one hop: the sightings are in the walk's order already)
        return parts[0], steps
    both = _Sightings(*(np.concatenate(c) for c in zip(*parts, strict=True)))
    where = np.concatenate([np.arange(len(p.dst)) for p in parts])
    return both.take(np.lexsort((where, both.hop, both.seed))), steps


def _walked_on(walk: _Walk, level: Level, ordered_seeds: np.ndarray,
               reached: np.ndarray) -> np.ndarray:
    """The positions in ``level`` (a batch's first hop) the second hop walks on from,
    ascending: of each fact its first sighting only, and only if no earlier batch
    walked on from it, nor the cap stops the walk before it.

    Where a fact is walked on from does not change where its steps lead, only the seed
    they count for: a fact's first sighting on the first hop is by the best seed that
    sees it there, so its steps, counted for that seed, are each fact's first sighting
    on the second hop; another seed walking them again would see only what was seen
    already, with no larger bonus, later. So the second hop walks on from each fact
    once per walk, whatever the number of seeds that reach it (§4f: the bound on steps).

    The cap: the walk stops where its next new fact would pass it. If the first hops
    alone bring that fact in seed ``s``'s first hop, seeds ``s``.. never take a second
    hop, and their facts are not walked on from (nor, then, their entities reported)."""
    first: np.ndarray = np.sort(_firsts(level.dst))
    dst = level.dst[first]
    new = first[~(_among(dst, ordered_seeds) | _among(dst, reached))]
    room = graphrecall.MAX_REACHED - len(reached)
    if len(new) > room:
        first = first[level.seed[first] < level.seed[new[room]]]
    first = first[~_among(level.dst[first], walk.walked_on)]
    walk.walked_on = np.union1d(walk.walked_on, level.dst[first])
    return first


def _among(values: np.ndarray, ascending: np.ndarray) -> np.ndarray:
    """Whether each of ``values`` is in ``ascending`` (sorted, distinct)."""
    if not len(ascending):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(ascending, values), len(ascending) - 1)
    found: np.ndarray = ascending[at] == values
    return found


def _last(walk: _Walk, frontier: np.ndarray, owner: np.ndarray) -> tuple[Level, int]:
    """The last hop's sightings (of a large frontier only the first of each fact), and
    the steps taken.

    The last hop is walked no further and its bonus never grows along it (seeds best
    first), so a fact's later sightings in it never win and add nothing to the count:
    they may be dropped. A large frontier is expanded a piece at a time (each piece as
    large as keeps its steps near BATCH_STEPS), keeping only first sightings, so
    memory stays bounded."""
    if not len(frontier):
        return Level(_EMPTY, _EMPTY, _EMPTY, _EMPTY, _EMPTY), 0
    if len(frontier) <= FIRST_BATCH:  # one piece: its sightings, as they are
        step = walk.steps(frontier, owner)
        return Level(step.pos, step.dst, step.via, step.name, owner[step.pos]), len(step.dst)
    levels: list[Level] = []
    steps = 0
    i, size = 0, FIRST_BATCH
    while i < len(frontier):
        step = walk.steps(frontier[i:i + size], owner[i:i + size])
        steps += len(step.dst)
        keep = np.sort(_firsts(step.dst))
        levels.append(Level(step.pos[keep] + i, step.dst[keep], step.via[keep],
                            step.name[keep], owner[step.pos[keep] + i]))
        i += size
        size = max(1, min(4 * size, BATCH_STEPS * size // max(1, len(step.dst))))
    if len(levels) == 1:
        return levels[0], steps
    joined = Level(*(np.concatenate(c) for c in zip(*levels, strict=True)))
    keep = np.sort(_firsts(joined.dst))
    return Level(*(a[keep] for a in joined)), steps


def reach(view: View, seeds: Sequence[tuple[int, float]], g: GraphRecall, at: int,
          known_at: int | None) -> Reach:
    """The facts reached from ``seeds`` (slot, score; best first, distinct). Seeds
    themselves are never in the answer; the caller checks what else a result must be.

    The seeds are walked in batches (memory stays bounded however many there are);
    between batches only each fact's winning sighting so far is kept: it precedes
    every later sighting, so the rule (largest bonus, first among equals) and the
    count against the cap come out as over the whole walk at once."""
    if not seeds:
        return Reach.empty()
    walk = _Walk(view, g, at, known_at)
    seed_slots = np.asarray([s for s, _ in seeds], dtype=np.int64)
    scores = np.asarray([float(x) for _, x in seeds], dtype=np.float64)
    if bool((scores[1:] > scores[:-1]).any()):
        raise ValueError("graph recall's seeds come best first")
    ordered = np.sort(seed_slots)
    cap = graphrecall.MAX_REACHED
    won: _Sightings | None = None
    capped = False
    last_seed = len(seed_slots) - 1  # the last seed whose walk began
    start, size = 0, FIRST_BATCH if g.hops == 1 else 1
    while start < len(seed_slots) and not capped:
        seen, steps = _batch(walk, seed_slots[start:start + size], start, scores, ordered,
                             _EMPTY if won is None else won.dst)
        start += size
        size = max(1, min(4 * size, BATCH_STEPS * size // max(1, steps)))
        if won is not None:
            seen = _Sightings(*(np.concatenate(c) for c in zip(won, seen, strict=True)))
        first = _firsts(seen.dst)
        if len(first) > cap:  # the walk stops where the next new fact would pass the cap
            cut = int(np.sort(first)[cap])
            last_seed = int(seen.seed[cut])
            seen = seen.take(slice(0, cut))
            first = _firsts(seen.dst)
            capped = True
        # Per fact, its largest bonus; among equals the first sighting. When the bonus
        # never grows along the walk (one hop from seeds best first), that is the first.
        if g.hops > 1 or bool((seen.bonus[1:] > seen.bonus[:-1]).any()):
            best = np.lexsort((np.arange(len(seen.dst)), -seen.bonus, seen.dst))
            d = seen.dst[best]
            first = best[np.flatnonzero(np.r_[True, d[1:] != d[:-1]])] if len(d) else _EMPTY
        # By fact, ascending (both rules answer in that order); the next batch's
        # sightings come after these whatever their order.
        won = seen.take(first)
    assert won is not None
    # Entities met by seeds the walk never began (a batch walks ahead of the cap) are
    # not reported: the report is of the walk, whatever the batch size.
    too_common = {name: count for name, (count, seed) in walk.too_common.items()
                  if seed <= last_seed}
    return Reach(won.dst, won.bonus, won.hop, won.seed, seed_slots, won.mid,
                 (won.via1, won.name1, won.via2, won.name2),
                 view.relations.names, walk.entity_names, too_common, capped, walk.taken)


def _firsts(values: np.ndarray) -> np.ndarray:
    """The index of each distinct value's first occurrence, by value ascending (what
    ``np.unique(values, return_index=True)[1]`` answers, in fewer steps)."""
    if not len(values):
        return _EMPTY
    order = np.argsort(values, kind="stable")
    v = values[order]
    new = np.empty(len(v), dtype=bool)
    new[0] = True
    np.not_equal(v[1:], v[:-1], out=new[1:])
    return order[new]
