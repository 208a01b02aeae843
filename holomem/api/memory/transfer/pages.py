"""An export a page at a time, for a client over the wire (the ``export`` op): which
facts a page holds and the cursor of the next one (docs/contract.md §4d, §5a).

Owns: :class:`ExportPage`, :data:`MAX_EXPORT_PAGE` and :func:`export_page`: a walk of
pages sees every fact stored when it began and still stored, exactly once, however
writes and compactions interleave. The records are :mod:`.exchange`'s. Imports the
engine, the walk over live facts of forgetting and the records of export.
"""

from __future__ import annotations

import msgspec

from holomem.api.engine import Store, View, validate
from holomem.api.memory.forget.removal import live_facts
from holomem.api.memory.transfer import exchange
from holomem.api.memory.transfer import links as transferlinks
from holomem.api.memory.transfer.records import FactExport
from holomem.errors import InvalidError

#: The most records one export page holds (its ``limit``; the default).
MAX_EXPORT_PAGE = 1000


class ExportPage(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One page of an export: its records, and the cursor of the next page (None: the
    last)."""

    records: list[FactExport]
    next_cursor: str | None


def _export_bounds(view: View, cursor: str | None, prefix: tuple[str, ...]
                   ) -> tuple[int, int]:
    """The slots ``[start, end)`` an export page continues with.

    A cursor names the generation, the next slot, the end (the slot count when the
    export began: slots are given out in write order, so every fact written since lies
    at or past it) and the last fact exported. After a compaction (a purge) renumbered
    the slots, the walk resumes after that fact; the end is then the whole store.
    """
    slots = view.catalog.slots
    if cursor is None:
        return 0, slots
    data = validate.decode_cursor(cursor, "export")
    fields = (data.get("g"), data.get("s"), data.get("e"))
    fid = data.get("id")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in fields) \
            or not isinstance(fid, str) or set(data) != {"g", "s", "e", "id", "ns"}:
        raise InvalidError("not a cursor export gave out")
    if data["ns"] != validate.scope_tag(prefix):
        raise InvalidError("the cursor is another namespace's export; ask with the first "
                           "page's namespace")
    gen, start, end = (int(v) for v in fields)  # type: ignore[arg-type]
    if gen == view.generation:
        if not 1 <= start <= end <= slots:
            raise InvalidError("not a cursor export gave out")
        if view.catalog.ids[start - 1] not in (fid, None):
            # (None: forgotten since.) Another fact there: another store's cursor.
            raise InvalidError("not a cursor export gave out for this store")
        return start, end
    moved = view.slot(fid)
    if moved < 0:
        raise InvalidError("the store was compacted and the fact the export cursor names "
                           "is gone; start the export again")
    return moved + 1, slots


def export_page(store: Store, prefix: tuple[str, ...], cursor: str | None,
                limit: int) -> ExportPage:
    """One page of an export (JSON: ``{"records": [...], "nextCursor"}``).

    The records are those :meth:`holomem.Memory.export` gives (write order, the
    :class:`~holomem.api.memory.types.FactExport` form), ``limit`` at most, read under one
    read block. A walk of pages sees every fact at or under ``prefix`` that was stored
    when its first page was read and still is, exactly once, however writes interleave;
    facts written after the first page are not in it (unless a purge compacted the
    store during the walk: then the rest of the store is). Errors: ``invalid_request``
    (a cursor export did not give out, or one whose fact a compaction removed).
    """
    def read(view: View) -> ExportPage:
        start, end = _export_bounds(view, cursor, prefix)
        live = live_facts(view, prefix)
        live = live[(live >= start) & (live < end)]
        page = [int(s) for s in live[:limit]]
        more = len(live) > limit
        next_cursor = (validate.encode_cursor(g=view.generation, s=page[-1] + 1, e=end,
                                              id=view.id_of(page[-1]),
                                              ns=validate.scope_tag(prefix))
                       if more else None)
        ranks = transferlinks.Ranks(view)
        return ExportPage(records=[exchange.export_record(view, s, ranks=ranks) for s in page],
                          next_cursor=next_cursor)

    return store.read(read)
