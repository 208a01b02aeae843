"""Why: the evidence subgraph around a fact, walked over typed links (docs/contract.md §4f).

Owns: the limits of a walk (:data:`MAX_HOPS`, :data:`MAX_NODES`, :data:`MAX_EDGES`),
the check of its arguments, and :class:`Walk` — a breadth-first walk from the
start over every visible link, both directions, that stops at a bound and says
so. Imports the engine's view, filters, relations, records and the types.

Order, written down once (it is the answer's order, so it is deterministic and
survives replay and compaction): nodes by hop, and within a hop in the order the
walk found them; a node's links in the order they were made (``links``'
order); edges in the order walked. Edges: every visible link from a node at hop
< ``max_hops`` to a node of the answer (so a link between two nodes of the last
hop is not walked, and not listed).

Truncation is honest: the walk stops at the first node that would be one more
than :data:`MAX_NODES` (bound ``"max_nodes"``) or the first edge that would be one
more than :data:`MAX_EDGES` (``"max_edges"``) — only when something really was
left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.graph import relations
from holomem.api.memory.graph.types import WhyEdge, WhyNode, WhyResult
from holomem.errors import InvalidError, LimitError
from holomem.projections.namespaces import Namespace

MAX_HOPS = 4
MAX_NODES = 200
MAX_EDGES = 1000
#: Relation names one walk may be restricted to.
MAX_RELATIONS = 64


def hops(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidError(f"max_hops must be an integer, got {type(value).__name__}")
    if value < 0:
        raise InvalidError("max_hops must be at least 0")
    if value > MAX_HOPS:
        raise LimitError(f"max_hops is at most {MAX_HOPS}; got {value}")
    return value


def relation_names(value: object) -> tuple[str, ...] | None:
    """None (any relation) or the checked names."""
    if value is None:
        return None
    if isinstance(value, str):
        return (validate.doc_id(value, "relation"),)
    if not isinstance(value, Sequence) or isinstance(value, bytes):
        raise InvalidError("relation must be a string or a list of strings")
    if len(value) > MAX_RELATIONS:
        raise LimitError(f"at most {MAX_RELATIONS} relations; got {len(value)}")
    if not value:
        raise InvalidError("relation must name at least one relation")
    return tuple(validate.doc_id(v, "relation") for v in value)


def is_start(view: View, text: str, prefix: Namespace, known_at: int | None) -> bool:
    """Whether ``text`` names a stored fact the walk may start from (an id wins over a
    query that happens to read the same)."""
    slot = view.facts.slot(text)
    return (slot >= 0 and view.facts.namespace(slot)[:len(prefix)] == prefix
            and view.facts.known(slot, known_at))


class Walk:
    """One breadth-first walk over one view (see the module docstring)."""

    def __init__(self, view: View, max_hops: int, names: tuple[str, ...] | None,
                 where: filters.Filter | None, at: int, as_of: int | None,
                 known_at: int | None, prefix: Namespace) -> None:
        self.view = view
        self.max_hops = max_hops
        rel = view.relations
        self.rids = None if names is None else {rel.relation_id(n) for n in names} - {-1}
        self.allowed = filters.evaluate(view, where) if where is not None else None
        self.at, self.as_of, self.known_at, self.prefix = at, as_of, known_at, prefix

    def _enters(self, slot: int) -> bool:
        """Whether the walk may enter the fact in ``slot``."""
        facts = self.view.facts
        if not facts.known(slot, self.known_at):
            return False
        if self.prefix and facts.namespace(slot)[:len(self.prefix)] != self.prefix:
            return False
        return self.allowed is None or bool(self.allowed[slot])

    def result(self, start: str, query: str | None, score: float | None) -> WhyResult:
        view, rel = self.view, self.view.relations
        first = view.facts.slot(start)
        hop_of: dict[int, int] = {first: 0}
        order = [first]
        edges: list[int] = []
        seen_rows: set[int] = set()
        bound: str | None = None
        frontier = [first]
        for hop in range(1, self.max_hops + 1):
            if bound or not frontier:
                break
            reached: list[int] = []
            for slot in frontier:
                for row in rel.rows(slot, "both"):
                    if row in seen_rows or not self._walks(row):
                        continue
                    a, b = rel.src.item(row), rel.dst.item(row)
                    other = b if a == slot else a
                    new = other not in hop_of
                    if new and not self._enters(other):
                        continue
                    if len(edges) >= MAX_EDGES:
                        bound = "max_edges"
                        break
                    if new:
                        if len(order) >= MAX_NODES:
                            bound = "max_nodes"
                            break
                        hop_of[other] = hop
                        order.append(other)
                        reached.append(other)
                    seen_rows.add(row)
                    edges.append(row)
                if bound:
                    break
            frontier = reached
        nodes = [self._node(s, hop_of[s]) for s in order]
        return WhyResult(
            start=start, query=query, max_hops=self.max_hops, nodes=nodes,
            edges=[WhyEdge(from_id=view.id_of(rel.src.item(r)), to_id=view.id_of(rel.dst.item(r)),
                           relation=rel.relation(r), time=rel.time.item(r)) for r in edges],
            truncated=bound is not None, bound=bound, score=score)

    def _walks(self, row: int) -> bool:
        if self.rids is not None and self.view.relations.rel.item(row) not in self.rids:
            return False
        return relations.visible(self.view, row, self.as_of, self.known_at)

    def _node(self, slot: int, hop: int) -> WhyNode:
        view = self.view
        return WhyNode(id=view.id_of(slot), hop=hop, text=view.record(slot).text,
                       status=view.facts.status(slot, self.at, self.known_at))
