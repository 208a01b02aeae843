"""Helpers shared by the tests of the document engine (not tests themselves)."""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from holomem import Store

QUERIES = ["apple", "river stones", "quiet moon lamp", "cats and boxes", "nothing-matches"]
PROBE_EMBEDDING = [0.3, -0.2, 0.9, 0.1]


def text_segment(store_path: str | os.PathLike[str]) -> str:
    """The path of the store's text segment (the one derived file)."""
    found = glob.glob(os.path.join(os.fspath(store_path), "gen-*", "text.seg"))
    assert len(found) == 1, found
    return found[0]


def all_files(store_path: str | os.PathLike[str]) -> dict[str, bytes]:
    """Every file under the store directory with its bytes."""
    out: dict[str, bytes] = {}
    for root, _dirs, files in os.walk(os.fspath(store_path)):
        for name in files:
            p = os.path.join(root, name)
            with open(p, "rb") as f:
                out[p] = f.read()
    return out


def populate(store: Store) -> dict[str, dict[str, Any]]:
    """Adds, a batch, replacements and deletes; returns the live documents expected."""
    docs: dict[str, dict[str, Any]] = {}

    def put(doc_id: str, text: str, **fields: Any) -> None:
        docs.pop(doc_id, None)
        docs[doc_id] = {"text": text, **fields}

    store.add_document("a", "an apple by the river", metadata={"n": 1},
                       embedding=[1.0, 0.0, 0.0, 0.0], entities=["Alice"])
    put("a", "an apple by the river", metadata={"n": 1}, embedding=[1.0, 0.0, 0.0, 0.0],
        entities=("Alice",))
    batch = [
        {"id": "b", "text": "quiet moon over the stones", "embedding": [0.0, 1.0, 0.0, 0.0]},
        {"id": "c", "text": "cats sleep in boxes", "metadata": {"tags": ["x", "y"]}},
        {"id": "d", "text": "a lamp, a moon, a quiet river", "entities": ["Paris", "Bob"]},
        {"id": "e", "text": "apples and more apples"},
    ]
    store.add_documents(batch)
    for item in batch:
        put(item["id"], item["text"], metadata=item.get("metadata"),
            embedding=item.get("embedding"), entities=tuple(item.get("entities", ())))
    store.add_document("c", "cats and their boxes, replaced", metadata={"v": 2},
                       embedding=[0.5, 0.5, 0.5, 0.5])
    put("c", "cats and their boxes, replaced", metadata={"v": 2},
        embedding=[0.5, 0.5, 0.5, 0.5], entities=())
    store.delete_document("e")
    docs.pop("e")
    store.add_document("f", "river stones and river apples", metadata={"deep": {"k": [1]}})
    put("f", "river stones and river apples", metadata={"deep": {"k": [1]}}, embedding=None,
        entities=())
    store.add_document("g", "to be deleted")
    store.delete_document("g")
    for fields in docs.values():
        fields.setdefault("metadata", None)
        fields.setdefault("embedding", None)
        fields.setdefault("entities", ())
    return docs


def snapshot(store: Store) -> tuple[object, ...]:
    """Everything a reader can observe: ids, documents, and search answers."""
    ids = store.ids()
    documents = {i: store.get_document(i) for i in [*ids, "e", "g", "missing"]}
    searches = [store.search_documents(q, 10) for q in QUERIES]
    fused = [store.search_documents(q, 10, embedding=PROBE_EMBEDDING) for q in QUERIES]
    filtered = [store.search_documents(q, 10, ids=["a", "f", "e"]) for q in QUERIES]
    return ids, documents, searches, fused, filtered, len(store), store.revision


def check_documents(store: Store, docs: dict[str, dict[str, Any]]) -> None:
    """The store holds exactly ``docs`` (embeddings compared as float32)."""
    assert store.ids() == list(docs)
    for doc_id, want in docs.items():
        got = store.get_document(doc_id)
        assert got is not None, doc_id
        assert (got.text, got.metadata, got.entities) == (
            want["text"], want["metadata"], want["entities"])
        if want["embedding"] is None:
            assert got.embedding is None
        else:
            # Stored as a float32 unit vector: same direction as given.
            w = np.asarray(want["embedding"], dtype=np.float64)
            assert got.embedding is not None
            assert np.allclose(got.embedding, w / np.linalg.norm(w), rtol=0, atol=1e-6)
