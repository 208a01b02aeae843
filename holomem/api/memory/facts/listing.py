"""The audit listing: every stored fact, in write order, a page at a time.

Owns: ``Memory.list`` — an exhaustive, stable, paginated walk — and
``Memory.list_namespaces``. Its cursor names the
generation and the last slot visited, so a walk interleaved with writes visits
every fact exactly once: new facts are written after every slot already visited.
Compaction renumbers slots; a cursor from before a compaction resumes after the
same fact if it still exists, and is refused (``invalid_request``) if it does not.
Imports the engine's view, the fact records, the types and validate.

A page's work is bounded: at most :data:`MAX_LIMIT` facts returned and
:data:`MAX_SCAN` examined (a subject or entity filter is applied through its index
first, so only matching facts count).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.facts.records import fact_record, wanted
from holomem.api.memory.forget.removal import live_facts
from holomem.api.memory.types import FactRecord, ListFilter, ListPage, NamespaceCount, NamespacePage
from holomem.errors import InvalidError

#: The most facts one list page returns.
MAX_LIMIT = 1000
#: The most facts one list page examines: with a status or history filter that few
#: facts pass, a page may come back with fewer than ``limit`` facts (even none) and a
#: cursor to continue; ``scanned`` says how many were examined.
MAX_SCAN = 10_000


def _decode(cursor: str, prefix: tuple[str, ...]) -> tuple[int, int, str]:
    data = validate.decode_cursor(cursor, "list()")
    gen, slot = validate.cursor_ints(data, ("g", "s"), "list()")
    if data.get("ns") != validate.scope_tag(prefix):
        raise InvalidError("the cursor is another namespace's listing (or not one list() "
                           "gave out); ask with the first page's namespace")
    fid = data.get("id")
    if not isinstance(fid, str):
        raise InvalidError("not a cursor list() gave out")
    return gen, slot, fid


class Listing(NamedTuple):
    """A checked list request."""

    cursor: str | None
    limit: int
    filter: ListFilter
    history: str
    namespace: tuple[str, ...]
    where: filters.Filter | None


def request(cursor: object, limit: object, filter: ListFilter | Mapping[str, Any] | None,
            history: object, namespace: object = None) -> Listing:
    """Check a list request (before the store is read)."""
    limit = validate.positive_int(limit, "limit", MAX_LIMIT)
    if history not in ("all", "current", "historical"):
        raise InvalidError("history must be all, current or historical")
    flt = validate.to_struct(ListFilter, filter, {}, "list filter",
                             ("ingested_after", "ingested_before", "event_after",
                              "event_before"))
    if flt.subject is not None:
        validate.doc_id(flt.subject, "filter.subject")
    if flt.entity is not None:
        validate.entities([flt.entity], "filter.entity")
    return Listing(validate.cursor(cursor, "list()"), limit, flt, str(history),
                   validate.namespace(namespace), filters.compile_filter(flt.conditions()))


def page(view: View, req: Listing, now: int, known_at: int | None = None) -> ListPage:
    """One page of the walk, statuses at ``now`` as known at ``known_at`` (the facts
    ingested after it left out)."""
    cursor, limit, flt, history, prefix, where = req
    start = 0
    if cursor is not None:
        gen, slot, fid = _decode(cursor, prefix)
        if gen == view.generation:
            # The last slot a page of this generation examined: below the store's end.
            if not -1 <= slot < view.catalog.slots:
                raise InvalidError("not a cursor list() gave out")
            if slot >= 0 and view.catalog.ids[slot] not in (fid, None):
                # (None: forgotten since.) Another fact there: another store's cursor.
                raise InvalidError("not a cursor list() gave out for this store")
            start = slot + 1
        else:
            moved = view.catalog.slot(fid)
            if moved < 0:
                raise InvalidError("the store was compacted and the cursor's fact is gone; "
                                   "start the listing again")
            start = moved + 1
    facts = view.facts
    live = live_facts(view, prefix)
    live = live[live >= start]
    if flt.subject is not None:
        members = np.array([facts.slot(i) for i in facts.subjects(flt.subject, prefix)],
                           dtype=np.int64)
        live = live[np.isin(live, members)]
    else:  # holomem's own facts only when their subject is asked for
        shown = filters.unreserved(view)
        if shown is not None:
            live = live[shown[live]]
    if flt.entity is not None:
        live = live[np.isin(live, view.entities.slots(flt.entity))]
    if where is not None:
        live = live[filters.evaluate(view, where)[live]]
    if known_at is not None:  # a plain document has no ingest time: always known
        live = live[~facts.is_fact.view()[live] | (facts.ingest.view()[live] <= known_at)]
    out: list[FactRecord] = []
    last = start - 1
    scanned = 0
    for s in live[:MAX_SCAN].tolist():
        scanned += 1
        last = s
        status = facts.status(s, now, known_at)
        if flt.status is not None and status != flt.status:
            continue
        if not wanted(history, status):
            continue
        out.append(fact_record(view, s, now, known_at))
        if len(out) >= limit:
            break
    more = bool(len(live)) and last < int(live[-1])
    last_id = view.catalog.ids[last] if last >= 0 else None
    next_cursor = (validate.encode_cursor(g=view.generation, s=last, id=last_id or "",
                                          ns=validate.scope_tag(prefix))
                   if more else None)
    return ListPage(facts=out, next_cursor=next_cursor, scanned=scanned)


def namespace_page(view: View, prefix: object, max_depth: object, limit: object,
                   cursor: object) -> NamespacePage:
    """The namespaces at or under ``prefix`` that hold facts, with how many, sorted; a
    page at a time. ``max_depth`` cuts each namespace to its first ``max_depth``
    strings, adding up the facts of those it merges (as LangGraph's stores do).

    Limits: ``limit`` <= :data:`MAX_LIMIT`; a cursor <= ``validate.MAX_CURSOR_CHARS``.
    Errors: ``invalid_request``, ``limit``.
    """
    start = validate.namespace(prefix, "prefix")
    depth = (None if max_depth is None
             else validate.positive_int(max_depth, "max_depth", validate.MAX_NAMESPACE_DEPTH))
    n = validate.positive_int(limit, "limit", MAX_LIMIT)
    after: tuple[str, ...] | None = None
    text = validate.cursor(cursor, "list_namespaces()")
    if text is not None:
        data = validate.decode_cursor(text, "list_namespaces()")
        after = validate.namespace(data.get("after"), "cursor")
    merged: dict[tuple[str, ...], int] = {}
    for name, facts in view.facts.namespaces.counts(start):
        key = name[:depth] if depth is not None else name
        merged[key] = merged.get(key, 0) + facts
    names = sorted(merged)
    if after is not None:
        names = [x for x in names if x > after]
    page = names[:n]
    more = len(names) > n
    return NamespacePage(
        namespaces=[NamespaceCount(namespace=list(x), facts=merged[x]) for x in page],
        next_cursor=validate.encode_cursor(after=list(page[-1])) if more else None)
