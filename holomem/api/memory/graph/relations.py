"""Relations between facts: checks, the events of relate / unrelate, and what a link
looks like at a time (docs/contract.md §4f).

Owns: the limits of relations (:data:`MAX_LINKS_PER_FACT`, :data:`MAX_LINK_METADATA_BYTES`),
the check of a relate / unrelate request, the plan of each (a ``commit`` build),
the visibility of a link ``as_of`` / ``known_at``, the ``links`` answer and the
count of links a forget removes. Imports the engine's view, the relations
projection, the types and validate.

Rules, written down once:

- a link joins two distinct stored facts of the **same namespace**; with a
  ``namespace`` prefix (a scoped door), both must be at or under it, and a fact
  outside it is as unknown as a missing id;
- ``relate`` of a link that exists with the same metadata is a no-op
  (``created=False``); with other metadata it is a ``conflict`` (unrelate first);
- a link has no valid time of its own: it holds from the moment the store learned
  it (its ``time``). ``as_of=t`` and ``known_at=T`` show it only when its time is
  at or before ``t`` and ``T``, and ``known_at`` also needs both ends ingested by
  ``T``;
- forgetting either end removes the link; supersession carries none over: links
  stay on the fact they were made on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple

from holomem.api.engine import View, validate
from holomem.api.memory.graph.types import Link, LinkInput
from holomem.errors import ConflictError, InvalidError, LimitError, NotFoundError
from holomem.events import Event, RelationAdded, RelationRemoved
from holomem.projections.namespaces import Namespace
from holomem.projections.relations import DIRECTIONS

#: Links leaving one fact, and links entering one fact (each direction on its own).
MAX_LINKS_PER_FACT = 1024
#: Canonical JSON bytes of one link's metadata.
MAX_LINK_METADATA_BYTES = 4096
#: Links one ``relate_many`` call makes (one transaction).
MAX_RELATE_MANY = 1000


class LinkRequest(NamedTuple):
    from_id: str
    to_id: str
    relation: str
    metadata: bytes


def request(from_id: object, to_id: object, relation: object,
            metadata: object = None) -> LinkRequest:
    """A checked relate / unrelate request. Errors: ``invalid_request``, ``limit``."""
    a, b = validate.doc_id(from_id, "from_id"), validate.doc_id(to_id, "to_id")
    name = validate.doc_id(relation, "relation")
    if a == b:
        raise InvalidError("a fact cannot be linked to itself")
    meta = validate.metadata(metadata)
    if len(meta) > MAX_LINK_METADATA_BYTES:
        raise LimitError(f"link metadata is {len(meta)} bytes of JSON; the limit is "
                         f"{MAX_LINK_METADATA_BYTES}")
    return LinkRequest(a, b, name, meta)


def requests(links: object) -> list[LinkRequest]:
    """The checked requests of a ``relate_many`` (LinkInputs or dicts, snake_case or
    camelCase keys). Errors: ``invalid_request``, ``limit``, naming ``links[i]``."""
    if isinstance(links, (str, bytes, Mapping)) or not isinstance(links, Iterable):
        raise InvalidError("links must be a list of {from_id, to_id, relation, metadata}")
    out: list[LinkRequest] = []
    for i, item in enumerate(links):
        if i >= MAX_RELATE_MANY:
            raise LimitError(f"relate_many makes at most {MAX_RELATE_MANY} links a call")
        try:
            x = validate.to_struct(LinkInput, item, {}, f"links[{i}]")
            out.append(request(x.from_id, x.to_id, x.relation, x.metadata))
        except (InvalidError, LimitError) as exc:
            message = exc.message if exc.message.startswith(f"links[{i}]") \
                else f"links[{i}]: {exc.message}"
            raise type(exc)(message) from None
    if not out:
        raise InvalidError("relate_many needs at least one link")
    return out


def direction(value: object) -> str:
    if value not in DIRECTIONS:
        raise InvalidError(f"direction must be one of {', '.join(DIRECTIONS)}; got {value!r}")
    assert isinstance(value, str)
    return value


def fact_slot(view: View, fid: str, prefix: Namespace) -> int:
    """The slot of stored fact ``fid`` at or under ``prefix``. Errors: ``not_found``."""
    slot = view.facts.slot(fid)
    if slot < 0 or view.facts.namespace(slot)[:len(prefix)] != prefix:
        raise NotFoundError(f"no fact {fid!r}")
    return slot


class Planned(NamedTuple):
    events: list[Event]
    link: Link
    created: bool


def plan_relate(view: View, req: LinkRequest, now: int, prefix: Namespace) -> Planned:
    """The events of one relate (none if the link is there). Errors: ``not_found``,
    ``invalid_request`` (ends in two namespaces), ``conflict``, ``limit``."""
    s, d = fact_slot(view, req.from_id, prefix), fact_slot(view, req.to_id, prefix)
    facts, rel = view.facts, view.relations
    if facts.namespace(s) != facts.namespace(d):
        raise InvalidError(f"facts {req.from_id!r} and {req.to_id!r} are in different "
                           "namespaces; a link joins facts of one namespace")
    row = rel.find(s, d, req.relation)
    if row >= 0:
        if rel.metadata(row) != req.metadata:
            raise ConflictError(f"{req.from_id!r} -[{req.relation}]-> {req.to_id!r} exists "
                                "with other metadata; unrelate it first")
        return Planned([], link(view, row), False)
    if rel.degree(s, "out") >= MAX_LINKS_PER_FACT:
        raise LimitError(f"fact {req.from_id!r} already has {MAX_LINKS_PER_FACT} outgoing "
                         "links (the limit)")
    if rel.degree(d, "in") >= MAX_LINKS_PER_FACT:
        raise LimitError(f"fact {req.to_id!r} already has {MAX_LINKS_PER_FACT} incoming "
                         "links (the limit)")
    event = RelationAdded(from_id=req.from_id, to_id=req.to_id, relation=req.relation,
                          time=now, metadata=req.metadata)
    made = Link(from_id=req.from_id, to_id=req.to_id, relation=req.relation, time=now,
                metadata=validate.load_metadata(req.metadata))
    return Planned([event], made, True)


def plan_relate_many(view: View, reqs: list[LinkRequest], now: int, prefix: Namespace
                     ) -> list[Planned]:
    """The plans of a batch of relates, each checked against the store and the batch's
    earlier links (as if they were made one after another); any error refuses the
    whole batch. Errors: as :func:`plan_relate`."""
    out: list[Planned] = []
    made: dict[tuple[str, str, str], Planned] = {}
    extra_out: dict[int, int] = {}
    extra_in: dict[int, int] = {}
    for i, req in enumerate(reqs):
        key = (req.from_id, req.to_id, req.relation)
        try:
            earlier = made.get(key)
            if earlier is not None:
                if validate.metadata(earlier.link.metadata) != req.metadata:
                    raise ConflictError(f"{req.from_id!r} -[{req.relation}]-> {req.to_id!r} "
                                        "is given twice with other metadata")
                out.append(Planned([], earlier.link, False))
                continue
            planned = plan_relate(view, req, now, prefix)
            if planned.created:
                s, d = view.facts.slot(req.from_id), view.facts.slot(req.to_id)
                extra_out[s] = extra_out.get(s, 0) + 1
                extra_in[d] = extra_in.get(d, 0) + 1
                if view.relations.degree(s, "out") + extra_out[s] > MAX_LINKS_PER_FACT \
                        or view.relations.degree(d, "in") + extra_in[d] > MAX_LINKS_PER_FACT:
                    raise LimitError(f"the batch gives a fact more than {MAX_LINKS_PER_FACT} "
                                     "links one way (the limit)")
                made[key] = planned
        except (ConflictError, InvalidError, LimitError, NotFoundError) as exc:
            raise type(exc)(f"links[{i}]: {exc.message}") from None
        out.append(planned)
    return out


def plan_unrelate(view: View, req: LinkRequest, now: int, prefix: Namespace
                  ) -> list[Event]:
    """The event of one unrelate, or none (no such link). Errors: ``not_found``."""
    s, d = fact_slot(view, req.from_id, prefix), fact_slot(view, req.to_id, prefix)
    if view.relations.find(s, d, req.relation) < 0:
        return []
    return [RelationRemoved(from_id=req.from_id, to_id=req.to_id, relation=req.relation,
                            time=now)]


def visible(view: View, row: int, at: int | None, known_at: int | None) -> bool:
    """Whether the link in ``row`` is there at ``as_of=at`` and ``known_at`` (module doc)."""
    t = view.relations.time.item(row)
    if at is not None and t > at:
        return False
    if known_at is None:
        return True
    if t > known_at:
        return False
    rel, facts = view.relations, view.facts
    return (facts.known(rel.src.item(row), known_at)
            and facts.known(rel.dst.item(row), known_at))


def link(view: View, row: int) -> Link:
    rel = view.relations
    return Link(from_id=view.id_of(rel.src.item(row)), to_id=view.id_of(rel.dst.item(row)),
                relation=rel.relation(row), time=rel.time.item(row),
                metadata=validate.load_metadata(rel.metadata(row)))


def links(view: View, fid: str, relation: str | None, way: str, at: int | None,
          known_at: int | None, prefix: Namespace) -> list[Link]:
    """The links of ``fid`` (see ``Memory.links``). Errors: ``not_found``."""
    slot = fact_slot(view, fid, prefix)
    if known_at is not None and not view.facts.known(slot, known_at):
        raise NotFoundError(f"no fact {fid!r} (ingested after known_at)")
    rel = view.relations
    rid = -2 if relation is None else rel.relation_id(relation)
    return [link(view, r) for r in rel.rows(slot, way)
            if (rid == -2 or rel.rel.item(r) == rid) and visible(view, r, at, known_at)]


def touching(view: View, ids: list[str]) -> int:
    """How many live links have an end among ``ids`` (each counted once)."""
    rel = view.relations
    rows: set[int] = set()
    for fid in ids:
        rows.update(rel.rows(view.catalog.slot(fid), "both"))
    return len(rows)
