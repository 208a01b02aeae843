"""The calls of ``Memory`` that move facts: export, import and re-embedding
(docs/contract.md §4d, §4e).

Owns: :class:`Moving` — export in blocks, import in atomic batches
(:mod:`.transfer` plans them), and ``reembed`` (:mod:`.embedding` runs it). Imports the
memory API's modules and the engine; ``Memory`` (:mod:`.memory`) composes it.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from holomem.api import (
    embedding,
    transfer,
    transferlinks,
    validate,
)
from holomem.api.configuration import Configured
from holomem.api.engine import View
from holomem.api.progress import Progress, callback, offset
from holomem.api.types import (
    ImportReport,
)
from holomem.errors import InvalidError
from holomem.events import Event, RelationAdded


class Moving(Configured):
    """Export, import and re-embed.

    (Annotations here say ``builtins.list``: in Memory, ``list`` is a method.)
    """

    # -- export and import ----------------------------------------------------------------
    def export(self, namespace: Sequence[str] | None = None
               ) -> Iterator[dict[str, Any]]:
        """Every fact at or under ``namespace`` (default: all), one JSON-ready dict each
        (camelCase; the :class:`~holomem.api.types.FactExport` form), in write order,
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
        for block in transfer.export_blocks(self.store, ns):
            yield from (transfer.as_dict(r) for r in block)

    def import_(self, records: Iterable[Any], *, batch_size: int = transfer.IMPORT_BATCH,
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
        same metadata is left alone, with other metadata it is a ``conflict``.
        Limits: ``batch_size`` <= ``transfer.MAX_IMPORT_BATCH``; each record as
        :meth:`remember`; relations as :meth:`relate`.
        Errors: ``invalid_request``, ``limit``, ``conflict``.
        """
        size = transfer.batch_size(batch_size)
        progress = callback(progress)
        extra = transfer.relation_list(relations)
        importer = transfer.Importer()
        importer.relations.add(extra)
        done = 0
        for batch in transfer.batches(records, size):
            if drop_embeddings or self.embedder is not None:
                embed = functools.partial(self._embed_all, progress=offset(progress, done))
                batch = transfer.revectored(batch, embed, drop_embeddings)

            def build(view: View, batch: builtins.list[transfer.Incoming] = batch
                      ) -> builtins.list[Event]:
                return importer.plan(view, batch)

            seq, _ = self.store.commit(build)
            done += len(batch)
            if seq and importer.written:
                self.notify("import", importer.written, seq)
            if progress is not None:
                progress(done)
        pending = importer.relations
        for chunk in pending.chunks(size):
            def build_links(view: View, chunk: builtins.list[transferlinks.Incoming] = chunk
                            ) -> builtins.list[Event]:
                return pending.plan(view, chunk)

            seq, written = self.store.commit(build_links)
            pending.done()
            if written:
                importer.batches += 1
                ends = [e.from_id for e in written if isinstance(e, RelationAdded)]
                self.notify("import", builtins.list(dict.fromkeys(ends)), seq)
        return ImportReport(imported=importer.imported, unchanged=importer.unchanged,
                            batches=importer.batches,
                            unresolved_links=importer.unresolved_links,
                            relations=pending.written,
                            unresolved_relations=pending.unresolved)

    def _embed_all(self, texts: builtins.list[str], progress: Progress | None = None
                   ) -> builtins.list[builtins.list[float]] | None:
        if self.embedder is None:
            return None
        return embedding.vectors(self.embedder, texts,  # type: ignore[no-any-return]
                                 progress).tolist()

    def reembed(self, *, batch_size: int = embedding.REEMBED_BATCH,
                progress: Progress | None = None) -> int:
        """Rewrite every stored document's vector with this Memory's embedder, in place
        (order, text and ids unchanged), ``batch_size`` per transaction; the store
        records the new identity with the last batch. Resumable: after a crash, open
        again with ``reembed=True`` and call this again; it goes on where it stopped.
        Meanwhile semantic scores mix both models. Returns the documents rewritten.
        ``progress(n)``: the documents done so far, as they are embedded and after each
        batch is written.
        Limits: ``batch_size`` <= ``embedding.MAX_REEMBED_BATCH``.
        Errors: ``invalid_request`` (no embedder), ``conflict`` (another re-embed, to
        another embedder, began meanwhile), ``read_only``.
        """
        if self.embedder is None or self._pinned is None:
            raise InvalidError("reembed() needs a Memory with an embedder")
        done = embedding.reembed(self.store, self.embedder, self._pinned,
                                 embedding.batch_size(batch_size), self.clock.now_ms,
                                 callback(progress))
        self._pinned = embedding.Pinned(self._pinned.mine, True)
        return done

