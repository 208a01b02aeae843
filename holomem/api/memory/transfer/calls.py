"""The calls that move facts between stores: export and import (docs/contract.md §4d).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Export reads blocks of facts (:mod:`.exchange`); import writes atomic batches planned
by :mod:`.exchange` and, after every fact, the typed relations (:mod:`.links`).
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from holomem.api.engine import View, validate
from holomem.api.memory.embedding import embedder
from holomem.api.memory.progress import Progress, callback, offset
from holomem.api.memory.session import Session
from holomem.api.memory.transfer import exchange, links, pages
from holomem.api.memory.transfer.records import ImportReport
from holomem.events import Event, RelationAdded


def export(s: Session, /, namespace: Sequence[str] | None = None
           ) -> Iterator[dict[str, Any]]:
    """Every fact at or under ``namespace`` (default: all), one JSON-ready dict each
    (camelCase; the :class:`~holomem.api.memory.types.FactExport` form), in write order,
    with all it takes to rebuild it exactly: id, namespace, text, subject,
    entities, metadata, the caller's embedding, every time including
    ``ingestTime``, links with their known-at times, confidence and feedback, and
    the typed relations (``relations``) whose later-written end it is.

    Facts are read ``transfer.EXPORT_BLOCK`` at a time, so writers are never held
    up for long; facts written after the export began are not in it. Plain
    documents (``Store.add_documents``) are not facts and are not exported.
    Errors: ``invalid_request`` (a bad namespace).
    """
    ns = validate.namespace(namespace)
    for block in exchange.export_blocks(s.store, ns):
        yield from (exchange.as_dict(r) for r in block)


def import_(s: Session, /, records: Iterable[Any], *, batch_size: int = exchange.IMPORT_BATCH,
            progress: Progress | None = None,
            drop_embeddings: bool = False,
            relations: Iterable[Any] = ()) -> ImportReport:
    """Restore exported facts: JSON lines (str or bytes), dicts or FactExport records.

    Written ``batch_size`` records per transaction (each all or nothing), keeping
    ids, ingest times, digests, confidence, feedback and links exactly; no policy
    runs. Into an empty store, every recall answers as it did on the source. A
    fact already stored with the same payload is left alone (``unchanged``); one
    with another payload is a ``conflict`` naming its line, and a malformed record
    (or links that would close a supersession cycle) ``invalid_request`` naming its
    line: that batch writes nothing and the import stops (earlier batches stay).
    ``progress(n)`` is called with the records done after each batch is written
    and, with an embedder, as its records are embedded (docs/contract.md §4,
    "Progress"). With an embedder, a record without an embedding is embedded;
    ``drop_embeddings`` ignores every record's embedding (to move facts to a store
    of another embedder).

    Typed relations (each record's ``relations``, and ``relations``: more
    RelationRecords or dicts, which a client sends once every fact is sent) are
    made after every fact of the call, in the source's order (``order``),
    ``batch_size`` per transaction, with their own times: ``links`` and ``why``
    then answer as on the source. One whose end is not a stored fact is not made
    and is counted in ``unresolved_relations``; one that exists already with the
    same metadata is left alone, with other metadata it is a ``conflict``. Every
    relation is checked before the first is made, so an import stopped by one of
    them makes none.
    Limits: ``batch_size`` <= ``transfer.MAX_IMPORT_BATCH``; each record as
    :meth:`remember`; relations as :meth:`relate`.
    Errors: ``invalid_request``, ``limit``, ``conflict``.
    """
    size = exchange.batch_size(batch_size)
    progress = callback(progress)
    extra = exchange.relation_list(relations)
    importer = exchange.Importer()
    importer.relations.add(extra)
    done = 0
    for batch in exchange.batches(records, size):
        if drop_embeddings or s.embedder is not None:
            embed = functools.partial(_embed_all, s, progress=offset(progress, done))
            batch = exchange.revectored(batch, embed, drop_embeddings)

        def build(view: View, batch: builtins.list[exchange.Incoming] = batch
                  ) -> builtins.list[Event]:
            return importer.plan(view, batch)

        seq, _ = s.store.commit(build)
        done += len(batch)
        if seq and importer.written:
            s.notify("import", importer.written, seq)
        if progress is not None:
            progress(done)
    pending = importer.relations
    chunks = pending.chunks(size)
    for n, chunk in enumerate(chunks):
        def build_links(view: View, chunk: builtins.list[links.Incoming] = chunk,
                        first: bool = n == 0) -> builtins.list[Event]:
            if first:  # every relation is checked before the first is made
                pending.check(view, chunks)
            return pending.plan(view, chunk)

        seq, written = s.store.commit(build_links)
        pending.done()
        if written:
            importer.batches += 1
            ends = [e.from_id for e in written if isinstance(e, RelationAdded)]
            s.notify("import", builtins.list(dict.fromkeys(ends)), seq)
    return ImportReport(imported=importer.imported, unchanged=importer.unchanged,
                        batches=importer.batches,
                        unresolved_links=importer.unresolved_links,
                        relations=pending.written,
                        unresolved_relations=pending.unresolved)


def _embed_all(s: Session, /, texts: builtins.list[str], progress: Progress | None = None
               ) -> builtins.list[builtins.list[float]] | None:
    if s.embedder is None:
        return None
    return embedder.vectors(s.embedder, texts,  # type: ignore[no-any-return]
                             progress).tolist()


def export_page(s: Session, /, namespace: Sequence[str] | None = None,
                cursor: str | None = None,
                limit: int = pages.MAX_EXPORT_PAGE) -> pages.ExportPage:
    """One page of :func:`export`, at most ``limit`` records, and the cursor of the next
    page (None: that was the last). A walk of pages sees every fact at or under
    ``namespace`` that was stored when its first page was read and still is, exactly
    once, however writes interleave. Limits: ``limit`` <= ``pages.MAX_EXPORT_PAGE``.
    Errors: ``invalid_request`` (a bad namespace; a cursor export did not give out, or
    one whose fact a compaction removed), ``limit``."""
    prefix = validate.namespace(namespace)
    size = validate.positive_int(limit, "limit", pages.MAX_EXPORT_PAGE)
    after = validate.cursor(cursor, "export")
    return pages.export_page(s.store, prefix, after, size)
