"""Migration from Chroma (issue 32, items 2 and 4; docs/migrate.md): ``from_chroma``
over a real Chroma persistent directory (chromadb, the peers extra), its collections
filled through Chroma's own client with vectors of the tests' tiny embedder, and the
result read back through ``Memory``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import InvalidError, Memory, NotFoundError, Store
from holomem.integrations.migrate import from_chroma, writer
from holomem.integrations.migrate.report import Tally
from tests.integrations.migrate_peers import DIM, Tiny, tiny_vectors

chromadb = pytest.importorskip("chromadb", reason="chromadb (the peers extra) is not "
                               "installed")

#: collection -> [(id, document, metadata)]
RECORDS: dict[str, list[tuple[str, str | None, dict[str, Any] | None]]] = {
    "recipes": [
        ("r1", "Slow-cooked lentils with smoked paprika and lemon", {"course": "main",
                                                                     "minutes": 90}),
        ("r2", "Rhubarb crumble with oat and hazelnut topping", {"course": "dessert"}),
        ("r3", "Chilled cucumber soup with dill and yoghurt", None),
    ],
    "travel": [
        ("t1", "The night train to Vienna leaves at nine from platform four",
         {"kind": "train"}),
        ("t2", "The ferry to the islands needs a booking two days ahead", {"kind": "boat"}),
        ("t3", None, {"kind": "orphan vector"}),
    ],
}


def fill(path: Path) -> None:
    client = chromadb.PersistentClient(path=str(path))
    for name, rows in RECORDS.items():
        col = client.get_or_create_collection(name, embedding_function=None)
        texts = [doc or "" for _, doc, _ in rows]
        col.add(ids=[rid for rid, _, _ in rows], documents=[doc for _, doc, _ in rows],
                metadatas=[meta for _, _, meta in rows],
                embeddings=[list(map(float, v)) for v in tiny_vectors(texts)])


@pytest.fixture
def chroma_dir(tmp_path: Path) -> Path:
    path = tmp_path / "chroma"
    fill(path)
    return path


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Store.open(tmp_path / "holomem", sync="none") as store:
        yield Memory(store)


def test_a_second_run_stores_nothing_and_reports_created_zero(chroma_dir: Path,
                                                              memory: Memory) -> None:
    first = from_chroma(chroma_dir, ["recipes", "travel"], memory)
    assert (first.read, first.created, first.skipped) == (6, 5, 1)
    revision = memory.store.stats().revision
    second = from_chroma(str(chroma_dir), ["recipes", "travel"], memory)
    assert (second.created, second.unchanged, second.batches) == (0, 5, 0)
    assert memory.store.stats().revision == revision


def test_collections_become_namespaces_ids_subjects_and_metadata_is_kept(
        chroma_dir: Path, memory: Memory) -> None:
    report = from_chroma(chroma_dir, ["recipes", "travel"], memory, namespace="imports")
    assert [(n.namespace, n.facts) for n in report.namespaces] == [
        (["imports", "recipes"], 3), (["imports", "travel"], 2)]
    for name, rows in RECORDS.items():
        for rid, doc, meta in rows:
            if doc is None:
                continue
            hit = memory.recall(doc, namespace=["imports", name], k=1)[0]
            assert (hit.text, hit.fact.subject, hit.fact.metadata) == (doc, rid, meta)
    assert report.skipped_examples[0].source_id == "travel:t3"
    assert "no document" in report.skipped_examples[0].reason


def test_every_sample_query_finds_in_its_collection_what_chroma_held(
        chroma_dir: Path, memory: Memory) -> None:
    from_chroma(chroma_dir, ["recipes", "travel"], memory)
    client = chromadb.PersistentClient(path=str(chroma_dir))
    for name, rows in RECORDS.items():
        held = client.get_collection(name).get(include=["documents"])
        assert sorted(i for i, d in zip(held["ids"], held["documents"], strict=True)
                      if d) == sorted(rid for rid, doc, _ in rows if doc)
        for rid, doc, _ in rows:
            if doc is None:
                continue
            query = " ".join(doc.split()[-2:])
            hits = memory.recall(query, namespace=[name], k=2)
            assert hits and hits[0].fact.subject == rid, (query, name)
            assert all(h.fact.namespace == [name] for h in hits)


def stored_vector(memory: Memory, fid: str) -> list[float] | None:
    record = next(r for r in memory.export() if r["id"] == fid)
    vector: list[float] | None = record["embedding"]
    return vector


def test_vectors_are_kept_only_when_asked_or_when_the_embedder_is_the_peers(
        chroma_dir: Path, tmp_path: Path) -> None:
    want = {doc: tiny_vectors([doc])[0] for rows in RECORDS.values()
            for _, doc, _ in rows if doc}
    # No model named by the collection: "auto" cannot tell, so the embedder embeds.
    with Store.open(tmp_path / "auto", sync="none") as store:
        memory = Memory(store, embedder=Tiny("another-model"))
        report = from_chroma(chroma_dir, "recipes", memory)
        assert (report.vectors, report.vectors_kept) == ("dropped", 0)
        assert "does not say which model" in report.vectors_note
    # "keep": the caller vouches for them; Chroma's vectors are stored as they were.
    with Store.open(tmp_path / "keep", sync="none") as store:
        memory = Memory(store, embedder=Tiny())
        report = from_chroma(chroma_dir, "recipes", memory, vectors="keep")
        assert (report.vectors, report.vectors_kept) == ("kept", 3)
        hit = memory.recall("lentils paprika", k=1)[0]
        vec = stored_vector(memory, hit.id)
        assert vec is not None and np.allclose(vec, want[hit.text], atol=1e-6)
    # "drop": none read; without an embedder the facts hold no vector at all.
    with Store.open(tmp_path / "drop", sync="none") as store:
        memory = Memory(store)
        report = from_chroma(chroma_dir, "recipes", memory, vectors="drop")
        assert report.vectors == "dropped"
        assert all(r["embedding"] is None for r in memory.export())
    # "keep" of vectors of another dimension than the embedder's: refused before writing.
    with Store.open(tmp_path / "wrong", sync="none") as store:
        memory = Memory(store, embedder=_Wide())
        with pytest.raises(InvalidError, match=f"{DIM} dimensions"):
            from_chroma(chroma_dir, "recipes", memory, vectors="keep")
        assert memory.list().facts == []


class _Wide(Tiny):
    def __init__(self) -> None:
        super().__init__()
        from holomem.embedders import EmbedderIdentity

        self.identity = EmbedderIdentity(name="wide", digest="1" * 64, dim=2 * DIM,
                                         normalized=True, pooling="mean", max_tokens=512)

    def embed(self, texts: Any) -> Any:
        return np.hstack([tiny_vectors(list(texts))] * 2) / np.sqrt(2)


@pytest.mark.parametrize("case", ["two collections", "the store's own", "the embedder's"])
@pytest.mark.parametrize("batch", [1, 500])
def test_keep_of_vectors_of_another_dimension_is_refused_before_anything_is_written(
        tmp_path: Path, case: str, batch: int) -> None:
    chroma = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    narrow = chroma.create_collection("aaa", embedding_function=None)
    narrow.add(ids=["x1", "x2"], documents=["alpha one", "alpha two"],
               embeddings=[[0.1, 0.2, 0.3]] * 2)
    wide = chroma.create_collection("bbb", embedding_function=None)
    wide.add(ids=["y1"], documents=["beta one"], embeddings=[[0.1, 0.2, 0.3, 0.4]])
    with Store.open(tmp_path / "holomem", sync="none") as store:
        memory = Memory(store, embedder=_Three() if case == "the embedder's" else None)
        if case == "the store's own":
            memory.remember("my own fact", embedding=[1.0, 0.0, 0.0])
        names = ["bbb"] if case == "the store's own" else ["aaa", "bbb"]
        before = [f.text for f in memory.list().facts]
        with pytest.raises(InvalidError, match=r"vectors='keep'.* dimensions"):
            from_chroma(chroma, names, memory, vectors="keep", batch_size=batch)
        assert [f.text for f in memory.list().facts] == before


class _Three(Tiny):
    """An embedder of the first collection's 3 dimensions (not the second's)."""

    def __init__(self) -> None:
        super().__init__()
        from holomem.embedders import EmbedderIdentity

        self.identity = EmbedderIdentity(name="three", digest="3" * 64, dim=3,
                                         normalized=True, pooling="mean", max_tokens=512)

    def embed(self, texts: Any) -> Any:
        return tiny_vectors(list(texts))[:, :3]


def test_a_record_whose_vector_the_store_cannot_take_is_skipped_and_named(
        memory: Memory) -> None:
    tally = Tally("chroma")
    out = writer.Writer(memory, tally, 10, None)
    for rid, vector in (("a", [1.0, 0.0, 0.0]), ("b", [1.0, 0.0, 0.0, 0.0]),
                        ("c", [0.0, 1.0, 0.0])):
        tally.read += 1
        out.add(writer.Entry(source_id=f"notes:{rid}", key=(rid,), namespace=("notes",),
                             text=f"record {rid}", ingest_time=1, subject=rid,
                             embedding=vector))
    out.flush()
    report = tally.report("kept", "")
    assert (report.created, report.skipped) == (2, 1)
    assert [(s.source_id, s.reason) for s in report.skipped_examples] == [
        ("notes:b", "its vector has 4 dimensions, the store's vectors 3")]


def test_a_document_changed_since_the_last_run_supersedes_the_one_it_stored(
        chroma_dir: Path, memory: Memory) -> None:
    from_chroma(chroma_dir, "recipes", memory)
    col = chromadb.PersistentClient(path=str(chroma_dir)).get_collection("recipes")
    text = "Rhubarb crumble with ginger and an almond topping"
    col.update(ids=["r2"], documents=[text], embeddings=[list(map(float,
                                                                  tiny_vectors([text])[0]))])
    report = from_chroma(chroma_dir, "recipes", memory)
    assert (report.created, report.unchanged, report.superseded) == (1, 2, 1)
    hit = memory.recall("rhubarb crumble", namespace=["recipes"], k=1)[0]
    assert hit.text == text
    assert [(r.text, r.status) for r in memory.history(hit.id)] == [
        ("Rhubarb crumble with oat and hazelnut topping", "superseded"), (text, "current")]


def _migrate_and_check(chroma: Any, memory: Memory, document: str,
                       metadata: dict[str, Any] | None) -> None:
    """One run over a collection whose one record "a" holds ``document`` and
    ``metadata``: afterwards the record's one current fact and recall hold the source's
    value, and a second run at once is ``unchanged`` and writes nothing."""
    from_chroma(chroma, "notes", memory)
    current = memory.list(namespace=["notes"], history="current").facts
    assert [(f.text, f.metadata) for f in current] == [(document, metadata)]
    assert [h.text for h in memory.recall(document, namespace=["notes"], k=1)] == [document]
    revision = memory.store.stats().revision
    again = from_chroma(chroma, "notes", memory)
    assert (again.created, again.unchanged, again.superseded) == (0, 1, 0)
    assert memory.store.stats().revision == revision


@pytest.mark.parametrize("values", [["paris", "rome", "paris"],
                                    ["paris", "rome", "paris", "rome"],
                                    ["paris", "rome", "oslo", "rome", "paris", "paris"]])
def test_a_record_changed_back_to_an_earlier_value_makes_that_value_current_again(
        tmp_path: Path, memory: Memory, values: list[str]) -> None:
    chroma = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    col = chroma.create_collection("notes", embedding_function=None)
    col.add(ids=["a"], documents=[f"alice lives in {values[0]}"], embeddings=[[1.0, 0, 0]])
    for n, city in enumerate(values):
        document = f"alice lives in {city}"
        col.update(ids=["a"], documents=[document], embeddings=[[1.0, 0, 0]])
        before = memory.list(namespace=["notes"], history="current").facts
        report = from_chroma(chroma, "notes", memory)
        changed = n > 0 and city != values[n - 1]
        assert (report.created, report.unchanged, report.superseded) == \
            ((1, 0, 1) if changed else (0, 1, 0) if n else (1, 0, 0))
        _migrate_and_check(chroma, memory, document, None)
        if changed:  # the new fact supersedes the one that was current
            (now,) = memory.list(namespace=["notes"], history="current").facts
            assert now.supersedes == [before[0].id]
    history = memory.history(memory.list(namespace=["notes"], history="current").facts[0].id)
    kept = [c for n, c in enumerate(values) if n == 0 or c != values[n - 1]]
    assert [r.text for r in history] == [f"alice lives in {c}" for c in kept]


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["paris", "rome", "oslo"]),
                          st.sampled_from([None, {"k": 1}, {"k": 2}])),
                min_size=1, max_size=6))
def test_after_every_run_the_records_current_fact_holds_the_sources_value(
        values: list[tuple[str, dict[str, Any] | None]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        chroma = chromadb.PersistentClient(path=str(Path(tmp) / "chroma"))
        col = chroma.create_collection("notes", embedding_function=None)
        with Store.open(Path(tmp) / "holomem", sync="none") as store:
            memory = Memory(store)
            for city, metadata in values:
                document = f"alice lives in {city}"
                col.upsert(ids=["a"], documents=[document], metadatas=[metadata],
                           embeddings=[[1.0, 0, 0]])
                # (Chroma keeps a record's metadata when an upsert gives it none.)
                held = col.get(ids=["a"], include=["documents", "metadatas"])
                _migrate_and_check(chroma, memory, held["documents"][0],
                                   held["metadatas"][0] or None)


def test_an_edit_made_in_holomem_stands_until_the_peers_record_changes(
        tmp_path: Path, memory: Memory) -> None:
    chroma = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    col = chroma.create_collection("notes", embedding_function=None)
    col.add(ids=["a"], documents=["alice lives in paris"], embeddings=[[1.0, 0, 0]])
    from_chroma(chroma, "notes", memory)
    (moved,) = memory.list(namespace=["notes"], history="current").facts
    memory.remember("alice lives in lisbon", namespace=["notes"], subject=moved.subject,
                    supersedes=[moved.id])
    report = from_chroma(chroma, "notes", memory)  # the peer did not change: the edit stands
    assert (report.created, report.unchanged) == (0, 1)
    assert [r.text for r in memory.recall("alice", namespace=["notes"])] == \
        ["alice lives in lisbon"]
    col.update(ids=["a"], documents=["alice lives in rome"], embeddings=[[1.0, 0, 0]])
    from_chroma(chroma, "notes", memory)  # the peer changed: its value is current
    assert [r.text for r in memory.recall("alice", namespace=["notes"])] == \
        ["alice lives in rome"]


def test_a_migration_supersedes_only_what_a_migration_stored_never_the_callers_own_facts(
        tmp_path: Path, memory: Memory) -> None:
    chroma = chromadb.PersistentClient(path=str(tmp_path / "chroma"))
    col = chroma.create_collection("profile", embedding_function=None)
    col.add(ids=["ann"], documents=["Ann is a chess player"], embeddings=[[1.0, 0, 0]])
    mine = memory.remember("Ann lives in Oslo", subject="ann", namespace=["profile"])
    report = from_chroma(chroma, "profile", memory)  # a subject shared by chance
    assert (report.created, report.superseded) == (1, 0)
    col.update(ids=["ann"], documents=["Ann is a go player"], embeddings=[[1.0, 0, 0]])
    report = from_chroma(chroma, "profile", memory)  # the record's own value only
    assert (report.created, report.superseded) == (1, 1)
    assert sorted(f.text for f in memory.list(namespace=["profile"],
                                              history="current").facts) == \
        ["Ann is a go player", "Ann lives in Oslo"]
    assert memory.get(mine.id).status == "current"


def test_a_missing_collection_or_a_wrong_path_is_a_clear_error_and_writes_nothing(
        chroma_dir: Path, memory: Memory, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"no collection 'pantry' \(it has: recipes, "
                       r"travel\)"):
        from_chroma(chroma_dir, ["recipes", "pantry"], memory)
    assert memory.list().facts == []  # recipes, found first, was not moved either
    with pytest.raises(InvalidError, match="no such directory"):
        from_chroma(tmp_path / "nowhere", "recipes", memory)
    assert not (tmp_path / "nowhere").exists()  # Chroma was not let to create it
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidError, match="not a Chroma database"):
        from_chroma(tmp_path / "empty", "recipes", memory)
    assert list((tmp_path / "empty").iterdir()) == []
    with pytest.raises(InvalidError, match="vectors must be"):
        from_chroma(chroma_dir, "recipes", memory, vectors="some")
    assert memory.list().facts == []


class _MiniLMNamed(Tiny):
    """An embedder that says it is holomem's built-in minilm (384 dimensions)."""

    def __init__(self) -> None:
        super().__init__()
        from holomem.embedders import EmbedderIdentity

        self.identity = EmbedderIdentity(name="minilm", digest="2" * 64, dim=384,
                                         normalized=True, pooling="mean", max_tokens=256)

    def embed(self, texts: Any) -> Any:
        return np.hstack([tiny_vectors(list(texts))] * 48) / np.sqrt(48)


def test_chromas_default_embedding_function_is_the_minilm_model(tmp_path: Path) -> None:
    """Chroma's default function runs all-MiniLM-L6-v2, holomem's "minilm": with that
    embedder, "auto" keeps the collection's vectors (given here, so that Chroma never
    loads its model)."""
    path = tmp_path / "chroma"
    col = chromadb.PersistentClient(path=str(path)).get_or_create_collection("defaults")
    docs = ["Moths gather at the porch light", "The hedgehog sleeps under the shed"]
    vectors = _MiniLMNamed().embed(docs)
    col.add(ids=["a", "b"], documents=docs, embeddings=[list(map(float, v))
                                                       for v in vectors])
    with Store.open(tmp_path / "holomem", sync="none") as store:
        memory = Memory(store, embedder=_MiniLMNamed())
        report = from_chroma(path, "defaults", memory)
        assert (report.vectors, report.vectors_kept) == ("kept", 2), report.vectors_note
        assert "'default' is the memory's embedder 'minilm'" in report.vectors_note
    with Store.open(tmp_path / "other", sync="none") as store:
        memory = Memory(store, embedder=Tiny())
        report = from_chroma(path, "defaults", memory)
        assert report.vectors == "dropped"
        assert "'default' is not the memory's embedder 'tiny-hash'" in report.vectors_note


def test_a_record_over_holomems_limits_is_skipped_and_the_rest_of_its_batch_moved(
        tmp_path: Path, memory: Memory) -> None:
    path = tmp_path / "chroma"
    col = chromadb.PersistentClient(path=str(path)).get_or_create_collection(
        "long", embedding_function=None)
    docs = ["a short note about kites", "word " * 5000, "another short note, on tides"]
    col.add(ids=["s1", "huge", "s2"], documents=docs,
            embeddings=[list(map(float, v)) for v in tiny_vectors(docs)])
    report = from_chroma(path, "long", memory, batch_size=10)
    assert (report.created, report.skipped, report.batches) == (2, 1, 1)
    assert report.skipped_examples[0].source_id == "long:huge"
    assert report.skipped_examples[0].reason == "text has 5000 words; the limit is 4096"
    assert report.namespaces[0].facts == 2
    assert sorted(r.subject or "" for r in memory.list().facts) == ["s1", "s2"]


def test_a_record_whose_id_is_too_long_for_a_subject_is_skipped_on_every_run(
        tmp_path: Path, memory: Memory) -> None:
    path = tmp_path / "chroma"
    col = chromadb.PersistentClient(path=str(path)).get_or_create_collection(
        "ids", embedding_function=None)
    docs = ["a short note about kites", "a note under a very long id"]
    col.add(ids=["s1", "x" * 600], documents=docs,
            embeddings=[list(map(float, v)) for v in tiny_vectors(docs)])
    first = from_chroma(path, "ids", memory)
    assert (first.created, first.skipped) == (1, 1)
    revision = memory.store.stats().revision
    for _ in range(2):  # the namespace now holds a fact: the record is looked up
        again = from_chroma(path, "ids", memory)
        assert (again.created, again.unchanged, again.skipped) == (0, 1, 1)
    assert memory.store.stats().revision == revision


def test_a_value_already_current_under_another_key_is_unchanged_and_written_once(
        memory: Memory) -> None:
    # A record moved by a holomem whose keys were made otherwise (LangGraph's held the
    # item's updated_at): the same value under its new key is not moved again.
    def run(key: tuple[str, ...]) -> Any:
        tally = Tally("chroma")
        out = writer.Writer(memory, tally, 10, None)
        tally.read += 1
        out.add(writer.Entry(source_id="notes:a", key=key, namespace=("notes",),
                             text="alice likes tea", ingest_time=1, subject="a",
                             replaces={"subject": "a"}))
        out.flush()
        return tally.report("none", "")

    assert run(("a", "old-style")).created == 1
    again = run(("a", "new-style"))
    assert (again.created, again.unchanged, again.superseded) == (0, 1, 0)
    assert len(memory.list(namespace=["notes"]).facts) == 1
    assert run(("a", "new-style")).unchanged == 1
