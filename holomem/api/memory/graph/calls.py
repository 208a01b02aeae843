"""The calls over typed links: relate, relate_many, unrelate, links and why
(docs/contract.md §4f).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Writes are planned by :mod:`.relations` under the write lock; ``why`` walks the
evidence subgraph (:mod:`.evidence`) from a fact or from recall's best match.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from holomem.api.engine import View, validate
from holomem.api.memory.embedding import embedder as embedding
from holomem.api.memory.graph import evidence, relations
from holomem.api.memory.graph.types import (
    LinkInput,
    LinkList,
    RelateManyResult,
    RelateResult,
    UnrelateResult,
    WhyResult,
)
from holomem.api.memory.recall import rank
from holomem.api.memory.session import Session
from holomem.errors import InvalidError
from holomem.events import Event


def relate(s: Session, /, from_id: str, to_id: str, relation: str,
           metadata: Mapping[str, Any] | None = None, *,
           namespace: Sequence[str] | None = None) -> RelateResult:
    """Link ``from_id -[relation]-> to_id``: two stored facts of one namespace.

    Idempotent: the same link with the same metadata again writes nothing
    (``created=False``); with other metadata it is a ``conflict``. ``namespace``:
    both facts must be at or under this prefix (else ``not_found``). Limits:
    ids and ``relation`` as ids (<= 512 characters), metadata <=
    ``relations.MAX_LINK_METADATA_BYTES`` of JSON, at most
    ``relations.MAX_LINKS_PER_FACT`` links leaving and entering each fact.
    Errors: ``invalid_request``, ``limit``, ``not_found``, ``conflict``.
    """
    req = relations.request(from_id, to_id, relation, metadata)
    prefix = validate.namespace(namespace)
    planned: builtins.list[relations.Planned] = []

    def build(view: View) -> builtins.list[Event]:
        planned[:] = [relations.plan_relate(view, req, s.now_ms(), prefix)]
        return planned[0].events

    seq, _ = s.store.commit(build)
    if planned[0].created:
        s.notify("relate", [req.from_id, req.to_id], seq)
    return RelateResult(created=planned[0].created, link=planned[0].link)


def relate_many(s: Session, /, links: Iterable[LinkInput | Mapping[str, Any]], *,
                namespace: Sequence[str] | None = None) -> RelateManyResult:
    """Make a batch of links in one transaction: all or nothing.

    ``links``: each a LinkInput or a dict of ``from_id``, ``to_id``, ``relation``
    and ``metadata`` (as :meth:`relate` takes them; camelCase keys too). The whole
    batch is checked before anything is written — every request, then every link
    against the store and the batch's earlier links, as if made one after another
    — and any error (naming ``links[i]``) writes nothing. A link that exists (or
    comes earlier in the batch) with the same metadata is not made again
    (``created=False``); with other metadata it is a ``conflict``. Limits: at most
    ``relations.MAX_RELATE_MANY`` links; each as :meth:`relate`. Errors:
    ``invalid_request``, ``limit``, ``not_found``, ``conflict``.
    """
    reqs = relations.requests(links)
    prefix = validate.namespace(namespace)
    planned: builtins.list[relations.Planned] = []

    def build(view: View) -> builtins.list[Event]:
        planned[:] = relations.plan_relate_many(view, reqs, s.now_ms(), prefix)
        return [e for p in planned for e in p.events]

    seq, written = s.store.commit(build)
    if written:
        ends = [i for r, p in zip(reqs, planned, strict=True) if p.created
                for i in (r.from_id, r.to_id)]
        s.notify("relate", builtins.list(dict.fromkeys(ends)), seq)
    return RelateManyResult(results=[RelateResult(created=p.created, link=p.link)
                                     for p in planned],
                            created=sum(p.created for p in planned))


def unrelate(s: Session, /, from_id: str, to_id: str, relation: str, *,
             namespace: Sequence[str] | None = None) -> UnrelateResult:
    """Remove the link ``from_id -[relation]-> to_id``; idempotent (``removed=False``
    when there is none). Errors: ``invalid_request``, ``limit``, ``not_found`` (an
    end is not a stored fact at or under ``namespace``)."""
    req = relations.request(from_id, to_id, relation)
    prefix = validate.namespace(namespace)

    def build(view: View) -> builtins.list[Event]:
        return relations.plan_unrelate(view, req, s.now_ms(), prefix)

    seq, written = s.store.commit(build)
    if written:
        s.notify("unrelate", [req.from_id, req.to_id], seq)
    return UnrelateResult(removed=bool(written))


def links(s: Session, /, id: str, relation: str | None = None, direction: str = "out", *,
          as_of: Any = None, known_at: Any = None,
          namespace: Sequence[str] | None = None) -> LinkList:
    """The links of fact ``id``: leaving it (``out``), entering it (``in``) or
    both, of one ``relation`` or all, in the order they were made; ``as_of`` /
    ``known_at`` as in recall (a link made after the time is not there). At most
    2 x ``relations.MAX_LINKS_PER_FACT`` links. Errors: ``invalid_request``,
    ``not_found``."""
    fid = validate.doc_id(id)
    name = None if relation is None else validate.doc_id(relation, "relation")
    way = relations.direction(direction)
    at, known = validate.to_ms(as_of, "as_of"), validate.to_ms(known_at, "known_at")
    prefix = validate.namespace(namespace)
    found = s.store.read(
        lambda view: relations.links(view, fid, name, way, at, known, prefix))
    return LinkList(id=fid, direction=way, links=found)


def why(s: Session, /, query_or_id: str, max_hops: int = 2,
        relation: str | Sequence[str] | None = None,
        filter: Mapping[str, Any] | None = None, *, as_of: Any = None,
        known_at: Any = None, namespace: Sequence[str] | None = None) -> WhyResult:
    """The evidence subgraph around a fact: ``query_or_id`` names a stored fact,
    or else is a query whose best match (recall's first result) is the start;
    then every visible link, both directions, up to ``max_hops`` away.

    ``relation``: walk only links of this relation (or these). ``filter``: the
    recall filter grammar; it chooses the start and every fact the walk enters.
    Limits: ``max_hops`` 0 to ``evidence.MAX_HOPS``; at most ``evidence.MAX_NODES`` nodes and
    ``evidence.MAX_EDGES`` edges — a walk cut by either says ``truncated`` and which
    ``bound``. Errors: ``invalid_request``, ``limit``.
    """
    text = validate.query(query_or_id)
    if not text.strip():
        raise InvalidError("why needs a fact id or a query")
    hops = evidence.hops(max_hops)
    names = evidence.relation_names(relation)
    at = validate.to_ms(as_of, "as_of")
    known = validate.to_ms(known_at, "known_at")
    prefix = validate.namespace(namespace)
    now = s.now_ms()
    start_id = text if s.store.read(
        lambda view: evidence.is_start(view, text, prefix, known)) else None
    o, where = rank.checked({"k": 1, "as_of": at, "known_at": known,
                               "namespace": list(prefix) or None, "filter": filter}, {})
    embedded = start_id is None and s.embedder is not None
    if embedded:
        assert s.embedder is not None
        o = msgspec.structs.replace(o, embedding=embedding.query_vector(s.embedder, text))

    def run(view: View) -> WhyResult:
        start, score = start_id, None
        if start is not None and not evidence.is_start(view, text, prefix, known):
            start = None  # (forgotten since it was looked up: the text is a query now)
        if start is None:
            if embedded:
                s.check_pinned(view)
            ranking = rank.Ranking(view, s.policies, text, o,
                                     at if at is not None else now, where)
            found = ranking.results()
            if not found:
                return WhyResult(start=None, query=text, max_hops=hops, nodes=[],
                                 edges=[], truncated=False)
            start, score = view.id_of(found[0][0]), found[0][1]
        walk = evidence.Walk(view, hops, names, where, at if at is not None else now,
                        at, known, prefix)
        return walk.result(start, None if score is None else text, score)

    return s.store.read(run)
