"""Migration from a LangGraph store (issue 32, items 2 and 4; docs/migrate.md):
``from_langgraph_store`` over LangGraph's own ``InMemoryStore`` and ``SqliteStore``
(langgraph-checkpoint-sqlite, the peers extra), each store filled through LangGraph's
``BaseStore`` interface and the result read back both through ``Memory`` and through
a ``HolomemStore`` over the migrated memory — the LangGraph face a graph would use.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from holomem import InvalidError, Memory, Store
from holomem.integrations.langgraph import MARK, HolomemStore
from holomem.integrations.migrate import from_langgraph_store, open_langgraph_sqlite

sqlite = pytest.importorskip("langgraph.store.sqlite",
                             reason="langgraph-checkpoint-sqlite (the peers extra) is not "
                             "installed")

#: (namespace, key, value): what the peer holds, in four namespaces of two users.
ITEMS: list[tuple[tuple[str, ...], str, dict[str, Any]]] = [
    (("users", "ann", "memories"), "home", {"text": "Ann lives in a lighthouse at Brest",
                                            "kind": "fact"}),
    (("users", "ann", "memories"), "pet", {"text": "Ann keeps a tortoise named Pebble",
                                           "kind": "fact", "age": 41}),
    (("users", "ann", "prefs"), "drink", {"text": "Ann drinks rooibos without sugar"}),
    (("users", "bo", "memories"), "job", {"text": "Bo repairs harpsichords for a living",
                                          "tags": ["work", "music"]}),
    (("users", "bo", "memories"), "home", {"text": "Bo rents a houseboat on the Thames"}),
    (("users", "bo", "prefs"), "drink", {"text": "Bo likes espresso with cardamom"}),
]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Store.open(tmp_path / "holomem", sync="none") as store:
        yield Memory(store)


def fill(store: BaseStore) -> None:
    for ns, key, value in ITEMS:
        store.put(ns, key, value)


@pytest.fixture(params=["memory", "sqlite"])
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    """A LangGraph store holding :data:`ITEMS`: in memory, or in an SQLite file that
    the migration reads through :func:`open_langgraph_sqlite` (read-only)."""
    if request.param == "memory":
        store = InMemoryStore()
        fill(store)
        yield store
        return
    path = tmp_path / "langgraph.sqlite"
    with sqlite.SqliteStore.from_conn_string(str(path)) as writer:
        writer.setup()
        fill(writer)
    with open_langgraph_sqlite(path) as reader:
        yield reader


def ms(value: dt.datetime) -> int:
    when = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def test_a_second_run_stores_nothing_and_reports_created_zero(peer: BaseStore,
                                                              memory: Memory) -> None:
    first = from_langgraph_store(peer, memory)
    assert (first.read, first.created, first.unchanged, first.skipped) == (6, 6, 0, 0)
    revision = memory.store.stats().revision
    second = from_langgraph_store(peer, memory)
    assert (second.read, second.created, second.unchanged, second.batches) == (6, 0, 6, 0)
    assert memory.store.stats().revision == revision  # not one event written


def test_namespaces_keys_values_and_times_are_kept(peer: BaseStore, memory: Memory) -> None:
    report = from_langgraph_store(peer, memory)
    assert sorted(tuple(n.namespace) for n in report.namespaces) == sorted(
        {ns for ns, _, _ in ITEMS})
    served = HolomemStore(memory)
    for ns, key, value in ITEMS:
        before = peer.get(ns, key)
        after = served.get(ns, key)
        assert before is not None and after is not None
        assert after.value == value  # the value whole, as LangGraph holds it
        assert after.updated_at == dt.datetime.fromtimestamp(
            ms(before.updated_at) / 1000, tz=dt.UTC)
        fact = memory.get(memory.recall(value["text"], namespace=list(ns), k=1)[0].id)
        assert fact is not None
        assert fact.subject == key and fact.namespace == list(ns)
        assert fact.metadata == {**value, MARK: 1}
        assert fact.ingest_time == ms(before.updated_at)
        assert fact.event_time == ms(before.created_at)
    assert sorted(served.list_namespaces()) == sorted(peer.list_namespaces())


def test_every_sample_query_finds_in_its_namespace_what_the_peer_held(
        peer: BaseStore, memory: Memory) -> None:
    from_langgraph_store(peer, memory)
    served = HolomemStore(memory)
    for ns, key, value in ITEMS:
        words = value["text"].split()
        query = " ".join(words[-3:])  # a few of its words, not the whole text
        hits = memory.recall(query, namespace=list(ns), k=3)
        assert hits and hits[0].fact.subject == key, (query, ns)
        assert all(h.fact.namespace == list(ns) for h in hits)
        found = served.search(ns, query=query, limit=1)
        assert [(i.key, i.value) for i in found] == [(key, value)]
        # and the other user's namespace does not answer with it
        other = ("users", "bo" if ns[1] == "ann" else "ann", ns[2])
        assert all(h.fact.subject != key or h.fact.namespace != list(ns)
                   for h in memory.recall(query, namespace=list(other)))


def test_a_value_changed_since_the_last_run_supersedes_the_one_it_stored(
        memory: Memory) -> None:
    peer = InMemoryStore()
    fill(peer)
    from_langgraph_store(peer, memory)
    peer.put(("users", "ann", "memories"), "home", {"text": "Ann moved to a mill in Quimper"})
    report = from_langgraph_store(peer, memory)
    assert (report.created, report.unchanged, report.superseded) == (1, 5, 1)
    hit = memory.recall("Ann mill Quimper", namespace=["users", "ann"], k=1)[0]
    assert [(r.metadata or {})["text"] for r in memory.history(hit.id)] == [
        "Ann lives in a lighthouse at Brest", "Ann moved to a mill in Quimper"]
    assert [r.status for r in memory.history(hit.id)] == ["superseded", "current"]
    item = HolomemStore(memory).get(("users", "ann", "memories"), "home")
    assert item is not None and item.value == {"text": "Ann moved to a mill in Quimper"}
    assert from_langgraph_store(peer, memory).created == 0


def test_a_peer_back_at_an_earlier_version_makes_that_version_current_again(
        memory: Memory) -> None:
    # A store restored from a copy taken before the change: its item's version was
    # moved by an earlier run and superseded since.
    ns, key = ("users", "ann", "memories"), "home"
    brest, quimper = "Ann lives in a lighthouse at Brest", "Ann moved to a mill in Quimper"
    before, after = InMemoryStore(), InMemoryStore()
    before.put(ns, key, {"text": brest})
    after.put(ns, key, {"text": quimper})
    for n, (peer, text) in enumerate([(before, brest), (after, quimper), (before, brest),
                                      (after, quimper)]):
        report = from_langgraph_store(peer, memory)
        assert (report.created, report.superseded) == (1, 1 if n else 0)
        item = HolomemStore(memory).get(ns, key)
        assert item is not None and item.value == {"text": text}
        assert [(h.fact.metadata or {}).get("text")
                for h in memory.recall(text, namespace=list(ns), k=1)] == [text]
        revision = memory.store.stats().revision
        again = from_langgraph_store(peer, memory)
        assert (again.created, again.unchanged) == (0, 1)
        assert memory.store.stats().revision == revision


@pytest.mark.parametrize("edited", [False, True])
def test_an_item_put_again_with_the_same_value_is_unchanged_and_an_edit_in_holomem_stands(
        memory: Memory, edited: bool) -> None:
    ns, key = ("users", "ann"), "home"
    peer = InMemoryStore()
    peer.put(ns, key, {"text": "Ann lives on a canal barge"})
    from_langgraph_store(peer, memory, fields=["text"])
    if edited:
        HolomemStore(memory, index={"fields": ["text"]}).put(ns, key,
                                                             {"text": "Ann moved to a flat"})
    (current,) = memory.list(namespace=list(ns), history="current").facts
    peer.put(ns, key, {"text": "Ann lives on a canal barge"})  # only updated_at moves
    report = from_langgraph_store(peer, memory, fields=["text"])
    assert (report.created, report.unchanged, report.superseded) == (0, 1, 0)
    assert [f.id for f in memory.list(namespace=list(ns), history="current").facts] == \
        [current.id]


def test_prefix_and_namespace_choose_what_is_read_and_where_it_goes(memory: Memory) -> None:
    peer = InMemoryStore()
    fill(peer)
    report = from_langgraph_store(peer, memory, ("users", "bo"), namespace=["from-lg"],
                                  fields=["text"])
    assert report.read == 3 and report.created == 3
    assert all(n.namespace[:3] == ["from-lg", "users", "bo"] for n in report.namespaces)
    hit = memory.recall("harpsichords", k=1)[0]
    assert hit.text == "Bo repairs harpsichords for a living"  # only the text field
    item = HolomemStore(memory, namespace=["from-lg"], index={"fields": ["text"]}).get(
        ("users", "bo", "memories"), "job")
    assert item is not None and item.value["tags"] == ["work", "music"]


def test_items_a_holomem_store_refuses_are_skipped_with_their_reason(memory: Memory) -> None:
    peer = InMemoryStore()
    peer.put(("notes",), "holomem:secret", {"text": "a reserved subject"})
    peer.put(("notes",), "ok", {"text": "kept"})
    peer.put(("notes",), "marked", {MARK: 2, "text": "uses the marker key"})
    report = from_langgraph_store(peer, memory)
    assert (report.read, report.created, report.skipped) == (3, 1, 2)
    assert sorted(s.source_id for s in report.skipped_examples) == [
        "notes:holomem:secret", "notes:marked"]
    assert any("reserves" in reason for reason in report.skipped_reasons)


def test_what_is_not_a_langgraph_store_is_refused_and_nothing_is_written(
        memory: Memory, tmp_path: Path) -> None:
    with pytest.raises(InvalidError, match="BaseStore"):
        from_langgraph_store({"users": {}}, memory)
    with pytest.raises(InvalidError, match="batch_size"):
        from_langgraph_store(InMemoryStore(), memory, batch_size=0)
    with pytest.raises(InvalidError, match="no such file"), \
            open_langgraph_sqlite(tmp_path / "missing.sqlite"):
        pass
    assert not (tmp_path / "missing.sqlite").exists()
    (tmp_path / "other.sqlite").write_bytes(b"not a database at all, just some bytes" * 40)
    with pytest.raises(InvalidError, match="not an SQLite database"), \
            open_langgraph_sqlite(tmp_path / "other.sqlite"):
        pass
    assert memory.list().facts == []


@pytest.mark.parametrize("name", ["notes%20v2.db", "a%3fb.db", "what?#.db", "50% off.db",
                                  "%zz.db"])
def test_open_langgraph_sqlite_opens_the_very_file_named_whatever_its_name_holds(
        tmp_path: Path, name: str) -> None:
    # The file's name goes into an SQLite URI: every character that means something
    # there must be escaped, or another file (one whose name is the decoded one) opens.
    def make(path: Path, text: str) -> None:
        with sqlite.SqliteStore.from_conn_string(str(path)) as writer:
            writer.setup()
            writer.put(("notes",), "k", {"text": text})

    make(tmp_path / name, "the file named")
    make(tmp_path / "notes v2.db", "another file")
    with open_langgraph_sqlite(tmp_path / name) as reader:
        assert [i.value["text"] for i in reader.search(("notes",))] == ["the file named"]


def test_the_example_of_docs_migrate_prints_what_its_comments_say(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "migrate.md").read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/migrate.md", "exec"), {"__name__": "docs_migrate"})
    said = [line.split("# ", 1)[1] for line in code.splitlines() if "print(" in line
            and "# " in line]
    assert len(said) == 3
    assert capsys.readouterr().out.splitlines() == said


def test_every_item_of_several_pages_is_read_once_even_when_their_times_tie(
        tmp_path: Path, memory: Memory) -> None:
    """SqliteStore lists items newest first with a time to the second, so most of
    these tie: paging by offset must still hand out each one once."""
    from langgraph.store.base import PutOp

    from holomem.integrations.migrate import langgraph as peer_module

    n = 2 * peer_module.PAGE + 500
    path = tmp_path / "many.sqlite"
    with sqlite.SqliteStore.from_conn_string(str(path)) as writer:
        writer.setup()
        writer.batch([PutOp(("bulk", f"n{i % 7}"), f"k{i}", {"text": f"entry number {i}"})
                      for i in range(n)])
    with open_langgraph_sqlite(path) as reader:
        report = from_langgraph_store(reader, memory, batch_size=700)
    assert (report.read, report.created, report.skipped) == (n, n, 0)
    assert sum(ns.facts for ns in report.namespaces) == n


def _holds_itself() -> dict[str, Any]:
    value: dict[str, Any] = {"text": "a value that holds itself"}
    value["self"] = value
    return value


@pytest.mark.parametrize("namespace, key, value", [
    (("notes",), "mixed", {"text": "keys of two types", 1: "one"}),
    (("notes",), "lone", {"text": "a lone surrogate \ud800 in the text"}),
    (("notes",), "deep", {"text": "a lone surrogate deeper", "tags": ["\udfff"]}),
    (("notes",), "\ud800", {"text": "a lone surrogate in the key"}),
    (("\ud800",), "k", {"text": "a lone surrogate in the namespace"}),
    (("notes",), "cycle", _holds_itself()),
])
def test_an_item_holomem_cannot_take_is_skipped_and_the_others_are_moved(
        memory: Memory, namespace: tuple[str, ...], key: str, value: dict[Any, Any]) -> None:
    peer = InMemoryStore()
    peer.put(("notes",), "ok", {"text": "kept"})
    peer.put(namespace, key, value)
    report = from_langgraph_store(peer, memory)
    assert report.read == 2 and report.created + report.skipped == 2
    assert report.created >= 1
    again = from_langgraph_store(peer, memory)
    assert again.created == 0 and again.unchanged == report.created
    assert "ok" in [f.subject for f in memory.list().facts]
