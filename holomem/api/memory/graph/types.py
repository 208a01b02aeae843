"""The types of relations, why-walks and graph recall (docs/contract.md §4f).

Owns: the Structs ``relate``, ``unrelate``, ``links`` and ``why`` return, and the
``graph`` option of recall with the path explain reports. Same conventions as
:mod:`holomem.api.memory.types` (snake_case in Python, camelCase in JSON, requests refuse
unknown fields); kept apart so that module stays the size of its own concern.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from holomem.api.memory.shapes import Response

#: How a graph step went: along a typed link, or through an entity both facts carry.
Via = Literal["link", "entity"]


class Link(Response, frozen=True):
    """One typed link ``from_id -[relation]-> to_id``; ``time``: when the store learned it."""

    from_id: str
    to_id: str
    relation: str
    time: int
    metadata: dict[str, Any] | None = None


class RelateResult(Response, frozen=True):
    """``relate``: the link, and whether this call made it (False: it was there)."""

    created: bool
    link: Link


class LinkInput(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
                forbid_unknown_fields=True):
    """One link of ``relate_many``: ``from_id -[relation]-> to_id``, with its metadata."""

    from_id: str
    to_id: str
    relation: str
    metadata: dict[str, Any] | None = None


class RelateManyResult(Response, frozen=True):
    """``relate_many``: each link's RelateResult, in the order given, and how many of
    them this call made."""

    results: list[RelateResult]
    created: int


class UnrelateResult(Response, frozen=True):
    """``unrelate``: whether a link was removed (False: there was none)."""

    removed: bool


class LinkList(Response, frozen=True):
    """``links``: the links of ``id`` in ``direction``, in the order they were made."""

    id: str
    direction: str
    links: list[Link]


class WhyNode(Response, frozen=True):
    """A fact of the evidence subgraph, ``hop`` links away from the start (0)."""

    id: str
    hop: int
    text: str
    status: str


class WhyEdge(Response, frozen=True):
    from_id: str
    to_id: str
    relation: str
    time: int


class WhyResult(Response, frozen=True):
    """``why``: the start (the fact named, or the query's best match; None: nothing
    matched), the nodes by hop then discovery order, the edges in the order walked,
    and whether a bound (``max_nodes`` / ``max_edges``) cut the walk short."""

    start: str | None
    query: str | None
    max_hops: int
    nodes: list[WhyNode]
    edges: list[WhyEdge]
    truncated: bool
    bound: str | None = None
    score: float | None = None


class GraphRecall(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
                  forbid_unknown_fields=True):
    """Recall's ``graph`` option: fold in facts reached from the top hits (``weight``
    0.2 unless given).

    ``hops`` (1 or 2) links or shared entities away; a reached fact scores its own
    score plus ``weight`` ** hop times the score of the hit that reached it.
    ``links`` / ``entities``: which edges to walk; ``relation``: only links of that
    relation (None: any).
    """

    hops: int = 1
    #: Chosen on LoCoMo (benchmarks/graph_bench.py; docs/contract.md §4f).
    weight: float = 0.2
    links: bool = True
    entities: bool = True
    relation: str | None = None


class GraphStep(Response, frozen=True):
    """One step of the path that brought a fact: ``from_id`` to ``to_id`` along a link
    of ``relation`` (in either direction) or through the entity ``entity``."""

    from_id: str
    to_id: str
    via: Via
    relation: str | None = None
    entity: str | None = None


class GraphReach(Response, frozen=True):
    """In explain: the hit a fact was reached from, the path, and the bonus it added."""

    seed: str
    hops: int
    bonus: float
    path: list[GraphStep]


class GraphBounds(Response, frozen=True):
    """In explain: what a bound of graph recall left out of its walk (docs/contract.md
    §4f). ``entities_not_walked``: entities a walked fact carries that more than
    ``max_entity_fanout`` facts hold, each with how many (at most 20 named, the first
    met; ``entities_not_walked_count`` counts them all); ``reached_cap``: the walk
    stopped on reaching ``max_reached`` facts, so seeds or steps after that point were
    not walked."""

    entities_not_walked: dict[str, int]
    entities_not_walked_count: int
    max_entity_fanout: int
    reached_cap: bool
    max_reached: int
