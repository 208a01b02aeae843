"""Migration from Mem0 (issue 32, items 2 and 4; docs/migrate.md): ``from_mem0`` over
a real open-source Mem0 memory (mem0ai, the peers extra) running offline on Chroma
(see :mod:`tests.integrations.migrate_peers`), filled and updated through Mem0's own
``add`` and ``update``, and the result read back through ``Memory``.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from holomem import InvalidError, Memory, Store
from holomem.integrations.migrate import from_mem0, open_mem0
from tests.integrations.migrate_peers import Tiny, mem0_config, new_mem0, tiny_vectors

#: (text, user, agent, metadata)
MEMORIES = [
    ("Ann is allergic to walnuts", "ann", None, {"source": "intake form"}),
    ("Ann prefers trains to planes", "ann", None, None),
    ("Ann's sister is called Maud", "ann", "planner", {"source": "chat"}),
    ("Bo plays the bassoon on Sundays", "bo", None, {"confidence": 0.8}),
    ("Bo is learning Icelandic", "bo", "tutor", None),
]


def ms(text: str) -> int:
    when = dt.datetime.fromisoformat(text)
    return int((when if when.tzinfo else when.replace(tzinfo=dt.UTC)).timestamp() * 1000)


@pytest.fixture
def peer(offline_mem0: Any, tmp_path: Path) -> Any:
    m0 = new_mem0(offline_mem0, tmp_path / "mem0")
    for text, user, agent, meta in MEMORIES:
        m0.add(text, user_id=user, agent_id=agent, metadata=meta, infer=False)
    return m0


def find(m0: Any, user: str, text: str) -> dict[str, Any]:
    found = m0.get_all(filters={"user_id": user}, top_k=100)["results"]
    return next(m for m in found if m["memory"] == text)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Store.open(tmp_path / "holomem", sync="none") as store:
        yield Memory(store, embedder=Tiny())


def test_a_second_run_stores_nothing_and_reports_created_zero(peer: Any,
                                                              memory: Memory) -> None:
    first = from_mem0(peer, memory, user_ids=["ann", "bo"])
    assert (first.read, first.created, first.skipped) == (5, 5, 0)
    revision = memory.store.stats().revision
    second = from_mem0(peer, memory, user_ids=["ann", "bo"])
    assert (second.created, second.unchanged, second.batches) == (0, 5, 0)
    assert memory.store.stats().revision == revision


def test_history_becomes_supersession_with_the_times_mem0_recorded(peer: Any,
                                                                  memory: Memory) -> None:
    mid = find(peer, "bo", "Bo is learning Icelandic")["id"]
    peer.update(mid, "Bo is learning Faroese")
    peer.update(mid, "Bo speaks Faroese fluently")
    report = from_mem0(peer, memory, user_ids="bo")
    assert (report.read, report.created, report.superseded) == (4, 4, 2)
    hit = memory.recall("Faroese", namespace=["users", "bo"], k=1)[0]
    assert hit.text == "Bo speaks Faroese fluently"
    chain = memory.history(hit.id)
    assert [(r.text, r.status) for r in chain] == [
        ("Bo is learning Icelandic", "superseded"), ("Bo is learning Faroese", "superseded"),
        ("Bo speaks Faroese fluently", "current")]
    rows = peer.history(mid)
    assert [r.ingest_time for r in chain] == [ms(rows[0]["created_at"]),
                                              ms(rows[1]["updated_at"]),
                                              ms(rows[2]["updated_at"])]
    assert {r.subject for r in chain} == {mid}
    # recall as of the time between the two updates sees the value of that time
    between = memory.recall("Faroese Icelandic", namespace=["users", "bo"],
                            as_of=chain[1].ingest_time)
    assert [h.text for h in between][:1] == ["Bo is learning Faroese"]
    # an update made after the migration adds its version to the chain on the next run
    peer.update(mid, "Bo teaches Faroese at night school")
    again = from_mem0(peer, memory, user_ids="bo")
    assert (again.created, again.superseded) == (1, 1)
    latest = memory.recall("night school", namespace=["users", "bo"], k=1)[0]
    assert [r.text for r in memory.history(latest.id)][-2:] == [
        "Bo speaks Faroese fluently", "Bo teaches Faroese at night school"]


def test_users_agents_and_runs_become_namespaces_and_metadata_is_kept(
        peer: Any, memory: Memory) -> None:
    report = from_mem0(peer, memory, user_ids=["ann", "bo"], namespace=["mem0"])
    assert [(n.namespace, n.facts) for n in report.namespaces] == [
        (["mem0", "users", "ann"], 2), (["mem0", "users", "ann", "agents", "planner"], 1),
        (["mem0", "users", "bo"], 1), (["mem0", "users", "bo", "agents", "tutor"], 1)]
    hit = memory.recall("walnuts allergic", namespace=["mem0", "users", "ann"], k=1)[0]
    meta = hit.fact.metadata or {}
    assert meta["source"] == "intake form" and meta["user_id"] == "ann"
    item = find(peer, "ann", "Ann is allergic to walnuts")
    assert meta["mem0_id"] == item["id"] and hit.fact.subject == item["id"]
    assert hit.fact.ingest_time == ms(item["created_at"])
    sister = memory.recall("sister Maud", namespace=["mem0", "users", "ann"], k=1)[0]
    assert (sister.fact.metadata or {})["agent_id"] == "planner"


def test_every_sample_query_finds_in_its_namespace_what_mem0_held(
        peer: Any, memory: Memory) -> None:
    from_mem0(peer, memory, user_ids=["ann", "bo"])
    for text, user, agent, _ in MEMORIES:
        assert find(peer, user, text)  # Mem0 holds it
        ns = ["users", user] + (["agents", agent] if agent else [])
        query = " ".join(text.split()[-2:])
        hits = memory.recall(query, namespace=ns, k=2)
        assert hits and hits[0].text == text, (query, ns)
        assert all(h.fact.namespace[:len(ns)] == ns for h in hits)
        other = ["users", "bo" if user == "ann" else "ann"]
        assert text not in [h.text for h in memory.recall(query, namespace=other)]


def test_vectors_are_kept_iff_the_embedder_is_mem0s_model(peer: Any, tmp_path: Path) -> None:
    with Store.open(tmp_path / "same", sync="none") as store:
        kept = from_mem0(peer, Memory(store, embedder=Tiny()), user_ids="ann")
        assert (kept.vectors, kept.vectors_kept) == ("kept", 3)
    with Store.open(tmp_path / "other", sync="none") as store:
        memory = Memory(store, embedder=Tiny("some-other-model"))
        report = from_mem0(peer, memory, user_ids="ann")
        assert (report.vectors, report.vectors_kept) == ("dropped", 0)
        assert "'tiny-hash' is not the memory's embedder 'some-other-model'" \
            in report.vectors_note
        assert report.created == 3  # the facts moved all the same, embedded by holomem
    with Store.open(tmp_path / "same2", sync="none") as store:
        # Same model name, other vectors: what is stored is Mem0's, not an embedding.
        memory = Memory(store, embedder=_Negated())
        from_mem0(peer, memory, user_ids="ann")
        for record in memory.export():
            assert np.allclose(record["embedding"], tiny_vectors([record["text"]])[0],
                               atol=1e-6)


class _Negated(Tiny):
    def embed(self, texts: Any) -> Any:
        return -tiny_vectors(list(texts))


def test_bad_input_is_a_clear_error_and_writes_nothing(peer: Any, memory: Memory) -> None:
    with pytest.raises(InvalidError, match="user_ids, agent_ids or run_ids"):
        from_mem0(peer, memory)
    with pytest.raises(InvalidError, match="mem0 Memory"):
        from_mem0(object(), memory, user_ids="ann")
    with pytest.raises(InvalidError, match="vectors must be"):
        from_mem0(peer, memory, user_ids="ann", vectors="maybe")
    with pytest.raises(InvalidError, match="at most 2 strings"):
        from_mem0(peer, memory, user_ids="ann", namespace=["a", "b", "c"])
    assert memory.list().facts == []
    assert from_mem0(peer, memory, user_ids="nobody").created == 0


class _HistoryByCall:
    """A Mem0 memory seen only through its public calls (no SQLite history to read in
    one query): the migration falls back to one ``history`` call per memory."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.config = inner.config
        self.vector_store = inner.vector_store
        self.calls = 0

    def get_all(self, **kwargs: Any) -> Any:
        return self.inner.get_all(**kwargs)

    def history(self, memory_id: str) -> Any:
        self.calls += 1
        return self.inner.history(memory_id)


def test_histories_read_in_one_query_or_one_call_each_give_the_same_facts(
        peer: Any, tmp_path: Path) -> None:
    mid = find(peer, "ann", "Ann prefers trains to planes")["id"]
    peer.update(mid, "Ann prefers night trains to planes")
    exports = []
    for name, source in (("query", peer), ("calls", _HistoryByCall(peer))):
        with Store.open(tmp_path / name, sync="none") as store:
            memory = Memory(store, embedder=Tiny())
            report = from_mem0(source, memory, user_ids="ann")
            assert (report.created, report.superseded) == (4, 1)
            exports.append(sorted((r["id"], r["text"], r["ingestTime"],
                                   [link["supersedes"] for link in r["links"]])
                                  for r in memory.export()))
            if isinstance(source, _HistoryByCall):
                assert source.calls == 3  # one per memory of ann's
    assert exports[0] == exports[1]


def test_a_mem0_on_qdrant_hands_over_its_vectors_too(offline_mem0: Any,
                                                     tmp_path: Path) -> None:
    pytest.importorskip("qdrant_client", reason="qdrant-client (which mem0ai brings) is "
                        "not installed")
    peer = new_mem0(offline_mem0, tmp_path / "mem0", provider="qdrant")
    mid = peer.add("Ann flies a box kite", user_id="ann", infer=False)["results"][0]["id"]
    peer.update(mid, "Ann flies a delta kite")
    with Store.open(tmp_path / "holomem", sync="none") as store:
        memory = Memory(store, embedder=_Negated())
        report = from_mem0(peer, memory, user_ids="ann")
        assert (report.created, report.superseded) == (2, 1)
        assert (report.vectors, report.vectors_kept) == ("kept", 1)
        current = memory.recall("delta kite", namespace=["users", "ann"], k=1)[0]
        record = next(r for r in memory.export() if r["id"] == current.id)
        assert np.allclose(record["embedding"], tiny_vectors([current.text])[0], atol=1e-6)


class _NoHistory(_HistoryByCall):
    """A Mem0 memory whose history was not kept (``history_db_path`` ``:memory:`` in
    another process): only the current text of each memory is known."""

    def history(self, memory_id: str) -> Any:
        return []


@pytest.mark.parametrize("kept", ["history", "no history", "holomem edit"])
def test_a_memory_updated_since_the_last_run_has_one_current_value(
        peer: Any, memory: Memory, kept: str) -> None:
    mid = find(peer, "ann", "Ann prefers trains to planes")["id"]
    source = _NoHistory(peer) if kept == "no history" else peer
    from_mem0(source, memory, user_ids="ann")
    if kept == "holomem edit":  # superseded in holomem since: the peer's update wins
        (old,) = [f for f in memory.list(namespace=["users", "ann"]).facts
                  if f.subject == mid]
        memory.remember("Ann prefers buses", subject=mid, supersedes=[old.id],
                        namespace=["users", "ann"])
    peer.update(mid, "Ann prefers night trains to planes")
    report = from_mem0(source, memory, user_ids="ann")
    assert report.created == 1
    current = [f.text for f in memory.list(namespace=["users", "ann"],
                                           history="current").facts if f.subject == mid]
    assert current == ["Ann prefers night trains to planes"]


def test_a_link_to_a_skipped_version_is_neither_written_nor_counted(
        offline_mem0: Any, tmp_path: Path, memory: Memory) -> None:
    peer = new_mem0(offline_mem0, tmp_path / "mem0")
    mid = peer.add("word " * 14_000, user_id="ann", infer=False)["results"][0]["id"]
    peer.update(mid, "Ann lives in Rome")
    report = from_mem0(peer, memory, user_ids="ann")
    assert (report.read, report.created, report.skipped, report.superseded) == (2, 1, 1, 0)
    assert [r["links"] for r in memory.export()] == [[]]


def _tables(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {n for (n,) in conn.execute("SELECT name FROM sqlite_master "
                                           "WHERE type = 'table'")}
    finally:
        conn.close()


def _collections(path: Path) -> list[str]:
    conn = sqlite3.connect(path / "chroma.sqlite3")
    try:
        return sorted(n for (n,) in conn.execute("SELECT name FROM collections"))
    finally:
        conn.close()


@pytest.mark.parametrize("wrong", [
    "no vector_store", "a misspelt vector_store", "no path", "a misspelt collection",
    "no history_db_path", "another SQLite file as history", "not SQLite as history"])
def test_open_mem0_refuses_a_config_that_would_have_mem0_create_or_change_a_database(
        offline_mem0: Any, tmp_path: Path, wrong: str) -> None:
    # docs/migrate.md: the openers never let a peer create an empty database where a
    # wrong path pointed (nor change the peer's files).
    base = tmp_path / "mem0"
    new_mem0(offline_mem0, base).add("Ann waters the orchids", user_id="ann", infer=False)
    other = tmp_path / "app.db"
    sqlite3.connect(other).execute("CREATE TABLE notes (x)").connection.commit()
    config = mem0_config(base)
    if wrong == "no vector_store":
        del config["vector_store"]
    elif wrong == "a misspelt vector_store":
        config["vectorstore"] = config.pop("vector_store")
    elif wrong == "no path":
        del config["vector_store"]["config"]["path"]
    elif wrong == "a misspelt collection":
        config["vector_store"]["config"]["collection_name"] = "mem0_typo"
    elif wrong == "no history_db_path":
        del config["history_db_path"]
    elif wrong == "another SQLite file as history":
        config["history_db_path"] = str(other)
    else:
        config["history_db_path"] = str(tmp_path / "notes.txt")
        (tmp_path / "notes.txt").write_text("not a database")
    files = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(InvalidError):
        open_mem0(config)
    assert sorted(p.name for p in tmp_path.rglob("*")) == files
    assert _collections(base / "vectors") == ["mem0"]
    assert _tables(other) == {"notes"}
    assert open_mem0(mem0_config(base)).get_all(filters={"user_id": "ann"})["results"]


class _OddMetadata(_HistoryByCall):
    """A Mem0 memory one of whose memories holds metadata that is not an object."""

    def get_all(self, **kwargs: Any) -> Any:
        found = self.inner.get_all(**kwargs)
        for item in found["results"]:
            if item["memory"] == "Ann prefers trains to planes":
                item["metadata"] = ["tag"]
        return found


def test_a_memory_whose_metadata_is_not_an_object_is_skipped_and_named(
        peer: Any, memory: Memory) -> None:
    mid = find(peer, "ann", "Ann prefers trains to planes")["id"]
    report = from_mem0(_OddMetadata(peer), memory, user_ids="ann")
    assert (report.read, report.created, report.skipped) == (3, 2, 1)
    assert [(s.source_id, s.reason) for s in report.skipped_examples] == [
        (mid, "its metadata is a list, not an object")]
