"""The document engine, ``holomem.Store`` (docs/contract.md §2): the document calls on the engine.

Owns: the document API — add, replace, get, has, delete, search, similar, ids —
each validated before anything is written and built only on the engine's public
``commit`` and ``read`` (:class:`~holomem.api.engine.core.Engine`). Imports the
engine's other modules and :mod:`holomem.api.engine.validate`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from holomem.api.engine import validate
from holomem.api.engine.core import Engine
from holomem.api.engine.types import Document, DocumentInput, Hit
from holomem.api.engine.view import View
from holomem.errors import InvalidError, LimitError
from holomem.events import DocumentAdded, DocumentDeleted, DocumentReplaced, Event

_Item = tuple[object, object, object, object, object]


class Store(Engine):
    """An embedded document store over an event-sourced journal. A context manager.

    ``Store.open(path, key=None, create=True, sync="full", read_only=False)``.
    """

    # -- writing ----------------------------------------------------------------------
    def add_document(self, id: str, text: str, *, metadata: Mapping[str, Any] | None = None,
                     embedding: Sequence[float] | None = None,
                     entities: Iterable[str] | None = None) -> int:
        """Store a document, replacing any document with the same id.

        Returns the revision (sequence number) that holds it. Errors:
        ``invalid_request``, ``limit``, ``closed``, ``read_only``, ``io``.
        """
        return self._add([(id, text, metadata, embedding, entities)])

    def add_documents(self, docs: Iterable[DocumentInput | Mapping[str, Any]]) -> int:
        """Store several documents in one atomic transaction (all or none).

        Each item is a :class:`DocumentInput` or a dict with the same fields.
        Errors: as :meth:`add_document`; nothing is written if any item is invalid.
        """
        if isinstance(docs, (str, bytes, Mapping)) or not isinstance(docs, Iterable):
            raise InvalidError("add_documents takes a list of documents")
        items: list[_Item] = []
        for i, d in enumerate(docs):
            if len(items) >= validate.MAX_BATCH:
                raise LimitError(f"more than {validate.MAX_BATCH} documents in one call")
            x = d if isinstance(d, DocumentInput) else validate.to_struct(
                DocumentInput, d, {}, f"document {i}") if isinstance(d, Mapping) else None
            if x is None:
                raise InvalidError(f"document {i}: expected a DocumentInput or a dict")
            items.append((x.id, x.text, x.metadata, x.embedding, x.entities))
        if not items:
            raise InvalidError("add_documents needs at least one document")
        return self._add(items)

    def _add(self, items: Sequence[_Item]) -> int:
        checked = []
        dim = self.embedding_dim
        for doc_id, text, metadata, embedding, entities in items:
            emb = validate.embedding(embedding, dim)
            if emb and not dim:
                dim = len(emb) // 4
            checked.append((validate.doc_id(doc_id), validate.text(text),
                            validate.metadata(metadata), emb, validate.entities(entities)))

        def build(view: View) -> list[Event]:
            seen = set()
            out: list[Event] = []
            for doc_id, text, metadata, emb, ents in checked:
                exists = doc_id in seen or doc_id in view.catalog
                seen.add(doc_id)
                cls = DocumentReplaced if exists else DocumentAdded
                out.append(cls(id=doc_id, text=text, metadata=metadata, embedding=emb,
                               entities=ents))
                if view.embedding_dim and emb and len(emb) // 4 != view.embedding_dim:
                    raise InvalidError(f"embedding dimension differs from the store's "
                                       f"({view.embedding_dim})")
            return out

        seq, _ = self.commit(build)
        return seq

    def delete_document(self, id: str, *, purge: bool = False) -> bool:
        """Remove a document; its text record is zeroed and synced before this returns.

        Returns False (and writes nothing) if there was no such document.
        With ``purge`` the journal is then compacted so no file holds its text
        (see :meth:`compact`). Errors: ``invalid_request``, ``closed``, ``read_only``,
        ``io``.
        """
        doc_id = validate.doc_id(id)
        validate.flag(purge, "purge")

        def build(view: View) -> list[Event]:
            if doc_id not in view.catalog:
                return []
            return [DocumentDeleted(id=doc_id), *(view.purge_request() if purge else ())]

        seq, _ = self.commit(build)
        if seq:
            self.sync_text()
        if purge:
            self.compact(purge=True)
        return bool(seq)

    # -- reading ----------------------------------------------------------------------
    def has_document(self, id: str) -> bool:
        doc_id = validate.doc_id(id)
        return self.read(lambda view: doc_id in view.catalog)

    def get_document(self, id: str) -> Document | None:
        """The document stored under ``id``, or None.

        Errors: ``invalid_request``, ``closed``, ``corrupt``.
        """
        doc_id = validate.doc_id(id)

        def get(view: View) -> Document | None:
            slot = view.slot(doc_id)
            if slot < 0:
                return None
            vector = view.embeddings.vector(slot)
            rec = view.record(slot)
            return Document(id=doc_id, text=rec.text,
                            metadata=validate.load_metadata(rec.metadata),
                            embedding=vector.tolist() if vector is not None else None,
                            entities=rec.entities)

        return self.read(get)

    def similar_documents(self, text: str, k: int = 10, *,
                          ids: Iterable[str] | None = None) -> list[Hit]:
        """Documents whose HRR content vector is most similar to ``text``'s, best first.

        Word order counts (see :mod:`holomem.projections.hrr`). ``score`` is the cosine;
        ``lexical_score`` is 0. Errors: ``invalid_request``, ``limit``, ``closed``.
        """
        self.check()
        q = validate.query(text)
        k = validate.positive_int(k, "k", validate.MAX_K)
        wanted = validate.id_list(ids, "ids", validate.MAX_IDS) if ids is not None else None
        return self.read(lambda view: view.similar(q, k, view.allowed(wanted)))

    def search_documents(self, query: str, k: int = 10, *,
                         embedding: Sequence[float] | None = None,
                         ids: Iterable[str] | None = None) -> list[Hit]:
        """The ``k`` best documents for ``query``, best first (docs/contract.md §2).

        Lexical scoring is BM25 (k1 = 1.2, b = 0.4). With ``embedding``, cosine
        similarity is fused in (see :mod:`holomem.projections.fusion`). ``ids``
        restricts the search to those documents. Ties are broken by the order in
        which the documents were written. Errors: ``invalid_request``, ``limit``,
        ``closed``.
        """
        self.check()
        q = validate.query(query)
        k = validate.positive_int(k, "k", validate.MAX_K)
        emb = validate.embedding(embedding, self.embedding_dim) if embedding is not None else b""
        if emb and not self.embedding_dim:
            emb = b""  # no document has an embedding: cosine has nothing to compare
        wanted = validate.id_list(ids, "ids", validate.MAX_IDS) if ids is not None else None
        return self.read(lambda view: view.search(q, k, emb, view.allowed(wanted)))

    def ids_with_entity(self, entity: str) -> list[str]:
        """Ids of live documents that carry ``entity`` exactly, in write order."""
        name = validate.entity(entity)
        return self.read(lambda view: [view.id_of(int(s)) for s in view.entities.slots(name)])

    def ids(self) -> list[str]:
        """Ids of every live document, in write order."""
        return self.read(lambda view: view.catalog.live_ids())
