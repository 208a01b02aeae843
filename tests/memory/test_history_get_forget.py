"""history, get and forget (docs/contract.md §4): history lists a chain in effect order with each
version's status now; forget removes exactly what its one scope selects, re-links
around removed middle versions without resurrecting older ones, is idempotent, and
"gone" means gone from every read at once and after a reopen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from holomem import InvalidError, ManualClock, Memory, MemoryConfig, NotFoundError, Store

CONFIG = MemoryConfig(supersession="latest-by-subject")


def chain3(memory: Memory, clock: ManualClock) -> None:
    """a (begins 10) <- b (20) <- c (30), one subject; arrival order b, c, a."""
    for fid, city, start in (("b", "berlin", 20), ("c", "cairo", 30), ("a", "athens", 10)):
        memory.remember(id=fid, text=f"xavier lives in {city}", subject="xavier/city",
                        valid_from=start, entities=["Xavier"], metadata={"k": fid})
        clock.advance(100)


def statuses(memory: Memory, fid: str) -> list[tuple[str, str]]:
    return [(r.id, r.status) for r in memory.history(fid)]


def test_history_in_effect_order_with_status_now(memory: Memory, clock: ManualClock) -> None:
    chain3(memory, clock)
    want = [("a", "superseded"), ("b", "superseded"), ("c", "current")]
    for fid in "abc":
        assert statuses(memory, fid) == want
    memory.remember(id="lone", text="a fact alone")
    assert statuses(memory, "lone") == [("lone", "current")]
    # A fact that has not begun yet is listed with that status.
    memory.remember(id="d", text="xavier lives in dublin", subject="xavier/city",
                    valid_from=clock.now_ms() + 10_000)
    assert statuses(memory, "a")[-2:] == [("c", "current"), ("d", "not-yet-valid")]
    with pytest.raises(NotFoundError):
        memory.history("nope")


def test_get_returns_the_fact_or_none(memory: Memory, clock: ManualClock) -> None:
    assert memory.get("nope") is None
    chain3(memory, clock)
    rec = memory.get("b")
    assert rec is not None
    assert (rec.id, rec.text, rec.subject, rec.valid_from, rec.status) == (
        "b", "xavier lives in berlin", "xavier/city", 20, "superseded")
    assert rec.supersedes == ["a"] and rec.superseded_by == ["c"]
    assert rec.entities == ["Xavier"] and rec.metadata == {"k": "b"}
    with pytest.raises(InvalidError):
        memory.get("")


def test_forgetting_the_newest_version_makes_its_predecessor_current(
        memory: Memory, clock: ManualClock) -> None:
    chain3(memory, clock)
    report = memory.forget({"ids": ["c"]})
    assert report.removed == ["c"] and report.relinked == [] and not report.dry_run
    assert statuses(memory, "a") == [("a", "superseded"), ("b", "current")]
    assert [r.id for r in memory.recall("xavier lives")] == ["b"]


def test_forgetting_a_middle_version_relinks_without_resurrection(
        memory: Memory, clock: ManualClock) -> None:
    chain3(memory, clock)
    report = memory.forget({"ids": ["b"]})
    assert report.removed == ["b"]
    assert [(x.successor, x.predecessor) for x in report.relinked] == [("c", "a")]
    assert statuses(memory, "a") == [("a", "superseded"), ("c", "current")]
    a = memory.get("a")
    c = memory.get("c")
    assert a is not None and c is not None
    assert a.superseded_by == ["c"] and c.supersedes == ["a"]
    assert [r.id for r in memory.recall("xavier lives")] == ["c"]
    # As if b never was: a holds until c begins.
    assert [r.id for r in memory.recall("xavier lives", as_of=25)] == ["a"]
    assert [r.id for r in memory.recall("xavier lives", as_of=30)] == ["c"]


def test_forgetting_the_oldest_version_leaves_the_rest(memory: Memory,
                                                      clock: ManualClock) -> None:
    chain3(memory, clock)
    memory.forget({"ids": ["a"]})
    assert statuses(memory, "b") == [("b", "superseded"), ("c", "current")]
    assert memory.recall("xavier lives", as_of=15) == []


def test_include_chain_removes_the_whole_chain(memory: Memory, clock: ManualClock) -> None:
    chain3(memory, clock)
    memory.remember(id="other", text="xavier likes jazz", subject="xavier/music")
    report = memory.forget({"ids": ["b"]}, include_chain=True)
    assert sorted(report.removed) == ["a", "b", "c"]
    assert [r.id for r in memory.recall("xavier", history="all")] == ["other"]


def test_dry_run_writes_nothing_and_reports(memory: Memory, store: Store,
                                            clock: ManualClock) -> None:
    chain3(memory, clock)
    revision = store.revision
    report = memory.forget({"ids": ["b"]}, dry_run=True)
    assert report.dry_run and report.removed == ["b"] and not report.purged
    assert [(x.successor, x.predecessor) for x in report.relinked] == [("c", "a")]
    assert store.revision == revision
    assert memory.get("b") is not None
    report = memory.forget({"subject": "xavier/city"}, {"dry_run": True, "include_chain": True})
    assert sorted(report.removed) == ["a", "b", "c"]
    assert store.revision == revision
    # The real run does what the dry run said.
    real = memory.forget({"ids": ["b"]})
    assert real.removed == ["b"] and [(x.successor, x.predecessor) for x in real.relinked] == [
        ("c", "a")]


def test_forget_is_idempotent(memory: Memory, store: Store, clock: ManualClock) -> None:
    chain3(memory, clock)
    assert memory.forget({"ids": ["b", "c"]}).removed == ["b", "c"]
    revision = store.revision
    again = memory.forget({"ids": ["b", "c"]})
    assert again.removed == [] and again.relinked == []
    assert store.revision == revision
    assert memory.forget({"ids": ["never-was"]}).removed == []
    assert statuses(memory, "a") == [("a", "current")]


def test_each_scope_selects_what_it_says(tmp_path: Path) -> None:
    def fresh(name: str) -> tuple[Store, Memory]:
        store = Store.open(tmp_path / name, sync="none")
        clock = ManualClock(1_000)
        memory = Memory(store, CONFIG, clock=clock)
        rows = [
            ("f1", "yara plays piano", "yara/instrument", ["Yara"], {"src": "a", "n": 1}, 500),
            ("f2", "yara plays violin", "yara/instrument", ["Yara", "Zed"], {"src": "b"}, 700),
            ("f3", "zed plays drums", "zed/instrument", ["Zed"], {"src": "a", "n": 2}, None),
            ("f4", "zed likes soup", None, [], {"src": "a", "n": 1}, 900),
            ("f5", "yara likes bread", None, ["Yara"], {"n": True, "src": "c"}, None),
        ]
        for fid, text, subject, ents, meta, event in rows:
            memory.remember(id=fid, text=text, subject=subject, entities=ents, metadata=meta,
                            event_time=event)
            clock.advance(10)  # ingest times 1000, 1010, ..., 1040
        return store, memory

    cases: list[tuple[dict[str, Any], list[str]]] = [
        ({"ids": ["f1", "f4", "missing"]}, ["f1", "f4"]),
        ({"subject": "yara/instrument"}, ["f1", "f2"]),
        ({"subject": "nobody/none"}, []),
        ({"entity": "Zed"}, ["f2", "f3"]),
        ({"entity": "zed"}, []),  # entities match exactly
        ({"ingested_before": 1020}, ["f1", "f2"]),  # strictly before
        ({"ingested_before": 1021}, ["f1", "f2", "f3"]),
        ({"event_before": 700}, ["f1"]),  # facts with an event time before it
        ({"event_before": 10_000}, ["f1", "f2", "f4"]),
        ({"metadata": {"src": "a"}}, ["f1", "f3", "f4"]),
        ({"metadata": {"src": "a", "n": 1}}, ["f1", "f4"]),
        # JSON equality: true is not 1 (as it is in Python), 1.0 is 1.
        ({"metadata": {"n": 1}}, ["f1", "f4"]),
        ({"metadata": {"n": True}}, ["f5"]),
        ({"metadata": {"n": 1.0}}, ["f1", "f4"]),
        ({"metadata": {"n": "1"}}, []),
    ]
    for n, (scope, want) in enumerate(cases):
        store, memory = fresh(f"s{n}")
        try:
            dry = memory.forget(scope, dry_run=True)
            assert sorted(dry.removed) == want, scope
            report = memory.forget(scope)
            assert sorted(report.removed) == want, scope
            left = {r.id for r in memory.recall("yara zed plays likes", k=50, history="all")}
            assert left == {"f1", "f2", "f3", "f4", "f5"} - set(want), scope
        finally:
            store.close()


@pytest.mark.parametrize("scope", [
    {},
    {"ids": ["a"], "subject": "s"},
    {"entity": "E", "metadata": {"a": 1}},
    {"ingested_before": 1, "event_before": 2},
    {"ids": None},
])
def test_exactly_one_scope_is_required(memory: Memory, store: Store, scope: dict[str, Any]) -> None:
    memory.remember(id="a", text="some fact", subject="s", entities=["E"])
    revision = store.revision
    with pytest.raises(InvalidError):
        memory.forget(scope)
    with pytest.raises(InvalidError):
        memory.forget(scope, dry_run=True)
    assert store.revision == revision and memory.get("a") is not None


def test_bad_scope_values_are_invalid(memory: Memory) -> None:
    scopes: list[dict[str, Any]] = [{"metadata": {}}, {"ids": "abc"}, {"subject": ""},
                                     {"bogus": 1}, {"ingested_before": "yesterday"}]
    for scope in scopes:
        with pytest.raises(InvalidError):
            memory.forget(scope)


def assert_gone(store: Store, memory: Memory, ids: list[str], query: str) -> None:
    for fid in ids:
        assert not store.has_document(fid)
        assert store.get_document(fid) is None
        assert memory.get(fid) is None
        with pytest.raises(NotFoundError):
            memory.history(fid)
        with pytest.raises(NotFoundError):
            memory.explain(query, fid)
    found = {h.id for h in store.search_documents(query, k=100)}
    found |= {r.id for r in memory.recall(query, k=100, history="all")}
    for r in memory.recall(query, k=100, history="all"):
        found |= set(r.fact.supersedes) | set(r.fact.superseded_by)
        for e in memory.explain(query, r.id).chain:
            found.add(e.id)
    for fid in store.ids():
        found |= {x.id for x in memory.history(fid)}
    assert not found & set(ids)


def test_gone_means_gone_everywhere_at_once_and_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "store"
    clock = ManualClock(5_000)
    with Store.open(path, sync="none") as store:
        memory = Memory(store, CONFIG, clock=clock)
        chain3(memory, clock)
        memory.remember(id="k", text="xavier keeps bees", entities=["Xavier"])
        memory.forget({"ids": ["b"]})
        memory.forget({"entity": "Xavier"}, dry_run=True)
        memory.forget({"ids": ["k"]})
        assert_gone(store, memory, ["b", "k"], "xavier lives keeps bees")
        assert statuses(memory, "a") == [("a", "superseded"), ("c", "current")]
    with Store.open(path, sync="none") as store:
        memory = Memory(store, CONFIG, clock=clock)
        assert_gone(store, memory, ["b", "k"], "xavier lives keeps bees")
        assert statuses(memory, "a") == [("a", "superseded"), ("c", "current")]
        assert [r.id for r in memory.recall("xavier lives", as_of=25)] == ["a"]
        # And after a compaction rewrote the journal without them.
        store.compact()
        assert_gone(store, memory, ["b", "k"], "xavier lives keeps bees")
        assert statuses(memory, "a") == [("a", "superseded"), ("c", "current")]
    with Store.open(path, sync="none") as store:
        memory = Memory(store, CONFIG, clock=clock)
        assert_gone(store, memory, ["b", "k"], "xavier lives keeps bees")
        assert statuses(memory, "a") == [("a", "superseded"), ("c", "current")]
        assert [r.id for r in memory.recall("xavier lives", as_of=25)] == ["a"]


def test_forget_with_purge_reports_it(memory: Memory, store: Store, clock: ManualClock) -> None:
    chain3(memory, clock)
    generation = store.generation
    report = memory.forget({"ids": ["c"]}, purge=True)
    assert report.purged and report.removed == ["c"]
    assert store.generation > generation
    assert_gone(store, memory, ["c"], "xavier lives")
    assert statuses(memory, "a") == [("a", "superseded"), ("b", "current")]


@pytest.mark.parametrize("batch", [1, 2, 4096])
def test_removal_is_one_transaction_per_batch_and_relinks_across_batches(
        memory: Memory, store: Store, clock: ManualClock, monkeypatch: pytest.MonkeyPatch,
        batch: int) -> None:
    from holomem.api.memory.forget import removal

    monkeypatch.setattr(removal, "BATCH", batch)
    for n in range(6):  # v0 <- v1 <- ... <- v5
        memory.remember(id=f"v{n}", text=f"yoko version {n}", subject="yoko/v",
                        valid_from=10 * (n + 1))
        clock.advance(1)
    revision = store.revision
    report = memory.forget({"ids": ["v1", "v2", "v3", "v4"]})
    assert report.removed == ["v1", "v2", "v3", "v4"]
    assert store.revision == revision + -(-4 // batch)
    assert statuses(memory, "v0") == [("v0", "superseded"), ("v5", "current")]
    v5 = memory.get("v5")
    assert v5 is not None and v5.supersedes == ["v0"]
    assert [r.id for r in memory.recall("yoko version", as_of=55)] == ["v0"]
    assert [r.id for r in memory.recall("yoko version", as_of=60)] == ["v5"]
