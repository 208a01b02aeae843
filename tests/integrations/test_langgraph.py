"""holomem as a LangGraph store (issue 15, item 7): every test drives
``HolomemStore`` through LangGraph's own ``BaseStore`` interface — ``put`` / ``get`` /
``delete`` / ``search`` / ``list_namespaces``, their async forms, ``batch`` /
``abatch`` — or through a compiled LangGraph graph that injects the store into its
nodes, and looks at the holomem side only afterwards, through ``Memory``.

LangGraph's ``InMemoryStore`` is the oracle where the two must agree (filters,
namespace listings); where holomem does more (supersession kept as history, a
delete that is a forget, purge), holomem's own calls check it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import math
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from holomem import (
    InvalidError,
    LimitError,
    ManualClock,
    Memory,
    MemoryConfig,
    NotFoundError,
    Store,
)
from holomem.embedders import EmbedderIdentity
from holomem.integrations.langgraph import MARK, HolomemStore
from tests.purge import markers

START_MS = 1_700_000_000_000
#: The errors bad input may raise: LangGraph's for a namespace, holomem's otherwise.
CLEAR = (InvalidNamespaceError, InvalidError)


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START_MS)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def hstore(store_dir: Path) -> Iterator[Store]:
    s = Store.open(store_dir, sync="none")
    yield s
    s.close()


@pytest.fixture
def memory(hstore: Store, clock: ManualClock) -> Memory:
    return Memory(hstore, clock=clock)


@pytest.fixture
def store(memory: Memory) -> HolomemStore:
    return HolomemStore(memory)


def fact_of(memory: Memory, namespace: Sequence[str], key: str) -> str:
    """The id of the current fact that holds the item (asked of holomem directly)."""
    page = memory.list(filter={"subject": key}, history="current", namespace=list(namespace))
    ids = [f.id for f in page.facts if f.namespace == list(namespace)]
    assert len(ids) == 1
    return ids[0]


# -- put, get, supersession -------------------------------------------------------------
def test_a_put_value_comes_back_from_get_with_its_times(store: HolomemStore) -> None:
    store.put(("users", "u1"), "prefs", {"food": "pizza", "n": 3, "tags": ["a", "b"]})
    item = store.get(("users", "u1"), "prefs")
    assert item is not None
    assert (item.namespace, item.key) == (("users", "u1"), "prefs")
    assert item.value == {"food": "pizza", "n": 3, "tags": ["a", "b"]}
    assert item.created_at == item.updated_at == at(START_MS)
    assert store.get(("users", "u1"), "other") is None
    assert store.get(("users",), "prefs") is None  # a namespace is exact for get
    assert store.get(("users", "u1", "deeper"), "prefs") is None


def test_an_ingest_time_past_year_9999_is_the_latest_datetime(hstore: Store) -> None:
    """A store may hold ingest times a datetime cannot (up to 2**62 ms, §5d; an import
    brings them): the item still comes back, its times the latest a datetime holds."""
    store = HolomemStore(Memory(hstore, clock=ManualClock(2**62 - 1)))
    store.put(("users", "u1"), "prefs", {"food": "pizza"})
    item = store.get(("users", "u1"), "prefs")
    assert item is not None and item.value == {"food": "pizza"}
    assert item.created_at == item.updated_at == dt.datetime.max.replace(tzinfo=dt.UTC)


@pytest.mark.parametrize("supersession", ["none", "latest-by-subject"])
def test_a_put_of_an_existing_key_is_a_supersession_that_history_and_as_of_see(
        hstore: Store, clock: ManualClock, supersession: str) -> None:
    memory = Memory(hstore, MemoryConfig(supersession=supersession), clock=clock)
    store = HolomemStore(memory)
    ns = ("users", "u1")
    times = []
    for n, city in enumerate(["Paris", "Berlin", "Oslo"]):
        times.append(clock.now_ms())
        store.put(ns, "home", {"city": city, "n": n})
        clock.advance(1000)
    item = store.get(ns, "home")
    assert item is not None and item.value == {"city": "Oslo", "n": 2}
    assert (item.created_at, item.updated_at) == (at(times[0]), at(times[2]))

    chain = memory.history(fact_of(memory, ns, "home"))
    assert [r.metadata for r in chain] == [{"city": c, "n": n, MARK: 1} for n, c in
                                           enumerate(["Paris", "Berlin", "Oslo"])]
    assert [r.status for r in chain] == ["superseded", "superseded", "current"]
    assert [r.supersedes for r in chain[1:]] == [[chain[0].id], [chain[1].id]]
    for t, city in zip(times, ["Paris", "Berlin", "Oslo"], strict=True):
        seen = memory.recall(city, namespace=list(ns), as_of=t + 1)
        assert [r.fact.metadata["city"] for r in seen] == [city]  # type: ignore[index]
    # holomem's recall of today finds only the current value, like the store's search
    assert memory.recall("Paris", namespace=list(ns)) == []
    assert [i.value["city"] for i in store.search(ns, query="Oslo")] == ["Oslo"]
    assert store.search(ns, query="Paris") == []


def test_putting_the_same_value_again_is_one_more_version(store: HolomemStore,
                                                          memory: Memory,
                                                          clock: ManualClock) -> None:
    store.put(("n",), "k", {"v": 1})
    clock.advance(5)
    store.put(("n",), "k", {"v": 1})
    item = store.get(("n",), "k")
    assert item is not None and item.updated_at == at(START_MS + 5)
    assert item.created_at == at(START_MS)
    assert len(memory.history(fact_of(memory, ["n"], "k"))) == 2


def test_one_key_in_two_namespaces_is_two_items(store: HolomemStore) -> None:
    store.put(("a",), "k", {"v": "first"})
    store.put(("a", "b"), "k", {"v": "second"})
    store.put(("a",), "k", {"v": "third"})
    a, ab = store.get(("a",), "k"), store.get(("a", "b"), "k")
    assert a is not None and ab is not None
    assert (a.value, ab.value) == ({"v": "third"}, {"v": "second"})


def test_concurrent_puts_of_one_key_make_one_chain_with_one_current_value(
        store: HolomemStore, memory: Memory) -> None:
    # two stores over the same Memory, two writer threads each
    stores = [store, HolomemStore(Memory(memory.store, clock=memory.clock))]

    def writer(w: int) -> None:
        for i in range(10):
            stores[w % 2].put(("race",), "k", {"w": w, "i": i})

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    chain = memory.history(fact_of(memory, ["race"], "k"))
    assert len(chain) == 40
    assert [r.status for r in chain].count("current") == 1
    item = store.get(("race",), "k")
    assert item is not None and item.value == {k: v for k, v in chain[-1].metadata.items()
                                               if k != MARK}  # type: ignore[union-attr]


def test_items_and_their_history_survive_a_reopen(store_dir: Path, clock: ManualClock) -> None:
    with Store.open(store_dir, sync="none") as s:
        store = HolomemStore(Memory(s, clock=clock))
        store.put(("docs",), "d", {"text": "one"})
        clock.advance(10)
        store.put(("docs",), "d", {"text": "two"})
    with Store.open(store_dir, sync="none") as s:
        memory = Memory(s, clock=clock)
        item = HolomemStore(memory).get(("docs",), "d")
        assert item is not None and item.value == {"text": "two"}
        assert (item.created_at, item.updated_at) == (at(START_MS), at(START_MS + 10))
        assert len(memory.history(fact_of(memory, ["docs"], "d"))) == 2


# -- delete -----------------------------------------------------------------------------
def test_delete_forgets_every_version_of_the_key(store: HolomemStore, memory: Memory,
                                                 clock: ManualClock) -> None:
    store.put(("n",), "k", {"v": 1})
    clock.advance(1)
    store.put(("n",), "k", {"v": 2})
    store.put(("n",), "other", {"v": 3})
    old = fact_of(memory, ["n"], "k")
    store.delete(("n",), "k")
    assert store.get(("n",), "k") is None
    with pytest.raises(NotFoundError):
        memory.history(old)
    assert [f.subject for f in memory.list(namespace=["n"]).facts] == ["other"]
    assert [i.key for i in store.search(("n",))] == ["other"]
    store.delete(("n",), "k")  # deleting what is not there is a no-op
    # a new put after a delete starts a new item
    clock.advance(1)
    store.put(("n",), "k", {"v": 1})
    item = store.get(("n",), "k")
    assert item is not None and item.created_at == at(START_MS + 2)


def test_a_put_of_none_in_a_batch_is_a_delete(store: HolomemStore) -> None:
    store.put(("n",), "k", {"v": 1})
    assert store.batch([PutOp(("n",), "k", None), GetOp(("n",), "k")]) == [None, None]


def test_delete_with_purge_leaves_no_file_holding_the_value(store_dir: Path,
                                                            clock: ManualClock) -> None:
    marker = "zq" + hashlib.sha256(b"langgraph purge").hexdigest()[:20]
    with Store.open(store_dir, sync="none") as s:
        store = HolomemStore(Memory(s, clock=clock), purge=True)
        store.put(("secrets",), "k", {"note": f"{marker} first"})
        store.put(("secrets",), "k", {"note": f"{marker} second"})
        store.put(("secrets",), "keep", {"note": "nothing to hide"})
        assert markers.plaintext_files_with(str(store_dir), marker.encode())  # it was there
        store.delete(("secrets",), "k")
        assert markers.plaintext_files_with(str(store_dir), marker.encode()) == []
        assert store.get(("secrets",), "keep") is not None


# -- search ------------------------------------------------------------------------------
def test_a_query_searches_only_under_the_namespace_prefix_best_first(
        store: HolomemStore) -> None:
    store.put(("users", "a"), "1", {"text": "alice likes green tea"})
    store.put(("users", "a"), "2", {"text": "alice owns a green bike and green shoes"})
    store.put(("users", "b"), "3", {"text": "bob likes green tea"})
    store.put(("other",), "4", {"text": "green tea everywhere"})
    found = store.search(("users",), query="green")
    assert {(i.namespace, i.key) for i in found} == {(("users", "a"), "1"),
                                                     (("users", "a"), "2"),
                                                     (("users", "b"), "3")}
    scores = [i.score for i in found]
    assert all(s is not None and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert [i.key for i in store.search(("users", "a"), query="tea")] == ["1"]
    assert store.search(("users",), query="nothing matches this") == []
    whole = store.search((), query="green", limit=2)
    assert len(whole) == 2
    assert store.search((), query="green", offset=2, limit=10) == \
        store.search((), query="green", limit=10)[2:]


def test_a_search_without_query_lists_in_write_order_with_offset_and_limit(
        store: HolomemStore, clock: ManualClock) -> None:
    for i in range(7):
        store.put(("list",), f"k{i}", {"i": i})
        clock.advance(1)
    store.put(("elsewhere",), "x", {"i": 99})
    found = store.search(("list",), limit=3, offset=2)
    assert [i.key for i in found] == ["k2", "k3", "k4"]
    assert all(i.score is None for i in found)
    assert [i.key for i in store.search(("list",), limit=100)] == [f"k{i}" for i in range(7)]
    assert store.search(("list",), limit=0) == []
    assert store.search(("list",), offset=7) == []
    item = found[0]
    assert item.created_at == item.updated_at == at(START_MS + 2)


def test_search_results_carry_the_first_puts_time_as_created_at(
        store: HolomemStore, clock: ManualClock) -> None:
    store.put(("n",), "k", {"text": "first draft"})
    clock.advance(50)
    store.put(("n",), "k", {"text": "final draft"})
    for item in (store.search(("n",), query="draft")[0], store.search(("n",))[0]):
        assert item.value == {"text": "final draft"}
        assert (item.created_at, item.updated_at) == (at(START_MS), at(START_MS + 50))


def test_index_fields_choose_what_a_query_finds(memory: Memory) -> None:
    store = HolomemStore(memory, index={"fields": ["title"]})
    store.put(("d",), "a", {"title": "quarterly report", "body": "revenue grew"})
    store.put(("d",), "b", {"title": "holiday plan", "body": "report to the beach"},
              index=["body"])
    store.put(("d",), "c", {"title": "report nothing", "body": "report"}, index=False)
    assert [i.key for i in store.search(("d",), query="quarterly")] == ["a"]
    assert store.search(("d",), query="revenue") == []  # body is not the store's field
    assert [i.key for i in store.search(("d",), query="beach")] == ["b"]  # this put's
    assert {i.key for i in store.search(("d",), query="report")} == {"a", "b"}
    # index=False: nothing of the value is searched, only the key itself
    assert [i.key for i in store.search(("d",), query="c")] == ["c"]
    assert {i.key for i in store.search(("d",))} == {"a", "b", "c"}  # listed all the same


def test_the_default_index_searches_the_whole_value(store: HolomemStore) -> None:
    store.put(("d",), "a", {"nested": {"deep": ["walrus"]}, "n": 1})
    assert [i.key for i in store.search(("d",), query="walrus")] == ["a"]


# -- filters: LangGraph's operators, with InMemoryStore as the oracle --------------------
ITEMS = [{"color": c, "size": s, "name": n}
         for c, s, n in [("red", 1, "ant"), ("blue", 5, "bee"), ("red", 9, "cat"),
                         ("green", 5, "dog"), ("blue", 12, "eel")]]


def _both(memory: Memory) -> tuple[HolomemStore, InMemoryStore]:
    ours, theirs = HolomemStore(memory), InMemoryStore()
    for i, value in enumerate(ITEMS):
        for s in (ours, theirs):
            s.put(("zoo",), f"k{i}", value)
    return ours, theirs


@pytest.mark.parametrize("flt", [
    {"color": "red"}, {"color": {"$eq": "blue"}}, {"color": {"$ne": "red"}},
    {"size": {"$gt": 5}}, {"size": {"$gte": 5}}, {"size": {"$lt": 5}},
    {"size": {"$lte": 5}}, {"size": {"$gt": 1, "$lt": 12}}, {"color": "red", "size": 9},
    {"color": "purple"}, {"size": {"$ne": 5}, "color": {"$ne": "blue"}},
    {},
])
def test_filters_select_what_langgraphs_own_store_selects(memory: Memory,
                                                          flt: dict[str, Any]) -> None:
    ours, theirs = _both(memory)
    mine = [(i.key, i.value) for i in ours.search(("zoo",), filter=flt)]
    expected = [(i.key, i.value) for i in theirs.search(("zoo",), filter=flt)]
    assert mine == expected
    # the same filter restricts a query's results to the same items
    mine_q = {i.key for i in ours.search(("zoo",), query="ant bee cat dog eel", filter=flt)}
    assert mine_q == {k for k, _ in expected}


def test_range_operators_also_compare_strings(memory: Memory) -> None:
    # InMemoryStore compares numbers only (float() of each side); holomem also orders
    # strings, and a value of another type than the operand's never matches (§4b).
    ours, _ = _both(memory)
    found = ours.search(("zoo",), filter={"name": {"$gte": "bee", "$lt": "dog"}})
    assert [i.value["name"] for i in found] == ["bee", "cat"]
    assert ours.search(("zoo",), filter={"name": {"$gt": 3}}) == []


CONDITION = st.one_of(
    st.sampled_from(["red", "blue", "green"]).map(lambda c: ("color", c)),
    st.builds(lambda op, v: ("color", {op: v}), st.sampled_from(["$eq", "$ne"]),
              st.sampled_from(["red", "blue", "pink"])),
    st.tuples(st.just("size"), st.dictionaries(
        st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]),
        st.integers(min_value=-1, max_value=13), min_size=1, max_size=3)),
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(conditions=st.lists(CONDITION, max_size=2, unique_by=lambda c: c[0]))
def test_every_combination_of_langgraph_operators_agrees_with_in_memory_store(
        memory: Memory, conditions: list[tuple[str, Any]]) -> None:
    # The stores are filled once (the first example); every example only reads.
    if not memory.list(limit=1).facts:
        _both(memory)
    ours, theirs = HolomemStore(memory), InMemoryStore()
    for i, value in enumerate(ITEMS):
        theirs.put(("zoo",), f"k{i}", value)
    flt = dict(conditions)
    assert [i.key for i in ours.search(("zoo",), filter=flt)] == \
        [i.key for i in theirs.search(("zoo",), filter=flt)], flt


# -- list_namespaces: InMemoryStore as the oracle -----------------------------------------
NAMESPACES = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"),
              ("a", "c", "f"), ("x",), ("x", "y", "v1"), ("users", "u1", "v1")]


@pytest.mark.parametrize("kwargs", [
    {}, {"prefix": ("a", "b")}, {"prefix": ("a", "b"), "max_depth": 3},
    {"max_depth": 1}, {"max_depth": 2, "limit": 2, "offset": 1},
    {"suffix": ("v1",)}, {"suffix": ("f",)}, {"prefix": ("a", "*", "f")},
    {"prefix": ("*", "b")}, {"suffix": ("*", "v1")}, {"prefix": ("a",), "suffix": ("f",)},
    {"prefix": ("nothing",)}, {"limit": 3}, {"offset": 6}, {"limit": 0},
])
def test_list_namespaces_lists_what_langgraphs_own_store_lists(
        store: HolomemStore, kwargs: dict[str, Any]) -> None:
    theirs = InMemoryStore()
    for ns in NAMESPACES:
        for s in (store, theirs):
            s.put(ns, "k", {"v": 1})
    assert store.list_namespaces(**kwargs) == theirs.list_namespaces(**kwargs)


def test_a_deleted_items_namespace_is_no_longer_listed(store: HolomemStore) -> None:
    store.put(("a",), "k", {"v": 1})
    store.put(("b",), "k", {"v": 1})
    store.delete(("a",), "k")
    assert store.list_namespaces() == [("b",)]


# -- the store's own namespace, other doors' facts -----------------------------------------
def test_the_stores_namespace_holds_every_item_and_answers_are_relative_to_it(
        memory: Memory) -> None:
    store = HolomemStore(memory, namespace=["apps", "agent-1"])
    other = HolomemStore(memory, namespace=["apps", "agent-2"])
    store.put(("users", "u1"), "k", {"text": "mine"})
    other.put(("users", "u1"), "k", {"text": "theirs"})
    item = store.get(("users", "u1"), "k")
    assert item is not None and item.value == {"text": "mine"}
    assert item.namespace == ("users", "u1")
    assert store.list_namespaces() == [("users", "u1")]
    assert [i.value for i in store.search((), query="theirs mine")] == [{"text": "mine"}]
    assert [f.namespace for f in memory.list(namespace=["apps"]).facts] == [
        ["apps", "agent-1", "users", "u1"], ["apps", "agent-2", "users", "u1"]]
    with pytest.raises(InvalidNamespaceError):  # 2 + 7 strings: more than holomem's 8
        store.put(tuple("abcdefg"), "k", {"v": 1})
    store.put(tuple("abcdef"), "k", {"v": 1})


def test_other_doors_facts_are_not_items(store: HolomemStore, memory: Memory) -> None:
    memory.remember("a plain fact about tea", subject="k", namespace=["docs"],
                    metadata={"v": 1})
    assert store.get(("docs",), "k") is None
    assert store.search(("docs",), query="tea") == []
    assert store.search(("docs",)) == []
    store.put(("docs",), "k", {"text": "tea, as an item"})
    item = store.get(("docs",), "k")
    assert item is not None and item.value == {"text": "tea, as an item"}
    store.delete(("docs",), "k")
    assert [f.text for f in memory.list(namespace=["docs"]).facts] == [
        "a plain fact about tea"]


# -- embedders: the Memory's, or index["embed"] --------------------------------------------
DIM = 8
SYNONYMS = [("job", "profession", "nurse", "works"), ("home", "lives", "city", "oslo"),
            ("drink", "tea", "coffee", "beverage")]


def meaning(texts: Sequence[str]) -> list[list[float]]:
    """A model small enough to reason about: one direction per group of synonyms, and
    a little of a hash of the text so that no two texts are the same vector."""
    out = []
    for text in texts:
        v = np.zeros(DIM)
        for word in text.lower().replace('"', " ").replace(",", " ").split():
            for g, group in enumerate(SYNONYMS):
                if word in group:
                    v[g] += 1.0
        v[3:] = np.frombuffer(hashlib.sha256(text.encode()).digest()[:5], np.uint8) / 2550
        out.append([float(x) for x in v / np.linalg.norm(v)])
    return out


class MeaningEmbedder:
    identity = EmbedderIdentity(name="meaning", digest="0" * 64, dim=DIM, normalized=True,
                                pooling="mean", max_tokens=64)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray(meaning(texts), dtype=np.float32)


def _semantic_items(store: HolomemStore) -> None:
    store.put(("u",), "job", {"text": "she is a nurse"})
    store.put(("u",), "city", {"text": "she lives in oslo"})
    store.put(("u",), "drink", {"text": "coffee every morning"})


def test_the_memorys_embedder_serves_semantic_search(hstore: Store,
                                                      clock: ManualClock) -> None:
    store = HolomemStore(Memory(hstore, clock=clock, embedder=MeaningEmbedder()),
                         index={"dims": DIM, "fields": ["text"]})
    _semantic_items(store)
    # no word of the query is in the item: only its meaning matches
    assert store.search(("u",), query="profession", limit=1)[0].key == "job"
    assert store.search(("u",), query="beverage", limit=1)[0].key == "drink"


def test_index_embed_serves_semantic_search_without_a_memory_embedder(
        memory: Memory) -> None:
    calls: list[int] = []

    def embed(texts: Sequence[str]) -> list[list[float]]:
        calls.append(len(texts))
        return meaning(texts)

    store = HolomemStore(memory, index={"dims": DIM, "embed": embed, "fields": ["text"]})
    store.batch([PutOp(("u",), "job", {"text": "she is a nurse"}),
                 PutOp(("u",), "city", {"text": "she lives in oslo"}),
                 PutOp(("u",), "drink", {"text": "coffee every morning"}),
                 PutOp(("u",), "quiet", {"text": "unembedded"}, index=False)])
    assert calls == [3]  # one call for the batch; index=False embeds nothing
    assert store.search(("u",), query="profession", limit=1)[0].key == "job"
    assert store.search(("u",), query="home", limit=1)[0].key == "city"
    plain = HolomemStore(memory)  # the same facts, searched without vectors: lexical
    assert plain.search(("u",), query="profession") == []


def test_an_index_config_that_cannot_hold_is_refused(hstore: Store,
                                                      clock: ManualClock) -> None:
    with_embedder = Memory(hstore, clock=clock, embedder=MeaningEmbedder())
    with pytest.raises(InvalidError, match="dims"):
        HolomemStore(with_embedder, index={"dims": 384})
    with pytest.raises(InvalidError, match="embedder of its own"):
        HolomemStore(with_embedder, index={"embed": meaning})
    with pytest.raises(InvalidError, match="unsupported keys"):
        HolomemStore(with_embedder, index={"fields": ["$"], "ann": {}})  # type: ignore[typeddict-unknown-key]
    with pytest.raises(InvalidError):
        HolomemStore(with_embedder, index={"fields": "text"})  # type: ignore[typeddict-item]
    store = HolomemStore(Memory(hstore, clock=clock), index={"dims": 3, "embed": meaning})
    with pytest.raises(InvalidError, match="dimensions"):
        store.put(("u",), "k", {"text": "a nurse"})
    assert store.get(("u",), "k") is None
    with pytest.raises(InvalidError):
        HolomemStore("not a memory")  # type: ignore[arg-type]


def test_an_embed_option_or_answer_holomem_cannot_use_is_refused_before_anything_runs(
        hstore: Store, clock: ManualClock) -> None:
    memory = Memory(hstore, clock=clock)

    async def later(texts: Sequence[str]) -> list[list[float]]:
        return meaning(texts)

    for embed in (later, 5, object()):
        with pytest.raises(InvalidError, match=r"index\.embed"):
            HolomemStore(memory, index={"embed": embed})  # type: ignore[typeddict-item]
    for purge in ("no", 1, None):
        with pytest.raises(InvalidError, match="purge"):
            HolomemStore(memory, purge=purge)  # type: ignore[arg-type]

    def uneven(texts: Sequence[str]) -> list[list[float]]:  # a length per text
        return [[1.0] * (2 + len(t) % 2) for t in texts]

    store = HolomemStore(memory, index={"embed": uneven})
    with pytest.raises(InvalidError, match="different lengths"):
        store.batch([PutOp(("u",), "a", {"text": "ab"}), PutOp(("u",), "b", {"text": "abc"})])
    assert store.get(("u",), "a") is None and store.get(("u",), "b") is None
    store.put(("u",), "a", {"text": "ab"})  # the store's vectors now have 2 dimensions
    with pytest.raises(InvalidError, match="dimensions"):
        store.batch([PutOp(("u",), "c", {"text": "cd"}, index=False),
                     PutOp(("u",), "d", {"text": "abc"})])
    assert store.get(("u",), "c") is None


def test_an_embedding_function_may_answer_a_numpy_matrix(memory: Memory) -> None:
    store = HolomemStore(memory, index={"embed": lambda texts: np.array(meaning(texts)),
                                        "fields": ["text"]})
    store.put(("u",), "job", {"text": "she is a nurse"})
    store.put(("u",), "city", {"text": "she lives in oslo"})
    assert store.search(("u",), query="profession", limit=1)[0].key == "job"


# -- async and batch forms -----------------------------------------------------------------
def test_the_async_forms_answer_as_the_sync_ones(store: HolomemStore, memory: Memory,
                                                 clock: ManualClock) -> None:
    async def run() -> None:
        await store.aput(("a", "b"), "k", {"text": "hello async world"})
        clock.advance(3)
        await store.aput(("a", "b"), "k", {"text": "hello again"})
        item = await store.aget(("a", "b"), "k")
        assert item == store.get(("a", "b"), "k")
        assert item is not None and item.value == {"text": "hello again"}
        found = await store.asearch(("a",), query="hello")
        assert [(i.key, i.value) for i in found] == [("k", {"text": "hello again"})]
        assert await store.alist_namespaces(prefix=("a",)) == [("a", "b")]
        assert len(memory.history(fact_of(memory, ["a", "b"], "k"))) == 2
        await store.adelete(("a", "b"), "k")
        assert await store.aget(("a", "b"), "k") is None
        with pytest.raises(InvalidError):
            await store.aput(("a",), "k", ["not", "a", "dict"])  # type: ignore[arg-type]

    asyncio.run(run())


def test_a_batch_runs_its_ops_in_order_with_one_result_each(store: HolomemStore) -> None:
    ops = [PutOp(("b",), "k", {"text": "batch one"}), GetOp(("b",), "k"),
           PutOp(("b",), "k", {"text": "batch two"}), SearchOp(("b",), query="batch"),
           ListNamespacesOp(), PutOp(("b",), "k", None), GetOp(("b",), "k")]
    for results in (store.batch(ops), asyncio.run(store.abatch(iter(ops)))):
        assert len(results) == len(ops)
        assert results[0] is None and results[2] is None and results[5] is None
        assert results[1] is not None and results[1].value == {"text": "batch one"}
        assert [i.value for i in results[3]] == [{"text": "batch two"}]
        assert results[4] == [("b",)]
        assert results[6] is None


# -- bad input ----------------------------------------------------------------------------
@pytest.mark.parametrize("value", [["a", "list"], "text", 5, ("t",), {1: "int key"},
                                   {"when": dt.datetime(2024, 1, 1)}, {"s": {1, 2}},
                                   {"x": math.nan}, {"big": "x" * 70_000},
                                   {MARK: "reserved"}, {"deep": json.loads("[" * 40 + "]" * 40)}])
def test_a_value_that_is_no_json_object_is_a_clear_error(store: HolomemStore,
                                                         value: Any) -> None:
    with pytest.raises(InvalidError):
        store.put(("n",), "k", value)
    with pytest.raises(InvalidError):
        store.batch([PutOp(("n",), "k", value)])
    assert store.get(("n",), "k") is None


@pytest.mark.parametrize("namespace", [(), ("",), ("a.b",), ("a", 1), ("langgraph", "x"),
                                       ("ctl\x01",), ("nul\x00",), tuple("abcdefghi"),
                                       ("x" * 600,), "string", None, ["a", None]])
def test_a_bad_namespace_is_a_clear_error_through_every_method(store: HolomemStore,
                                                               namespace: Any) -> None:
    with pytest.raises(CLEAR):
        store.put(namespace, "k", {"v": 1})
    with pytest.raises(CLEAR):
        store.batch([PutOp(namespace, "k", {"v": 1})])
    assert store.search(()) == []
    if namespace in ((), ("langgraph", "x")):
        return  # a valid place to read (only puts need a non-LangGraph root)
    for call in (lambda: store.get(namespace, "k"), lambda: store.search(namespace),
                 lambda: store.delete(namespace, "k"),
                 lambda: store.batch([GetOp(namespace, "k")]),
                 lambda: store.batch([SearchOp(namespace)]),
                 lambda: store.batch([ListNamespacesOp((MatchCondition("prefix", namespace),))])):
        with pytest.raises(CLEAR):
            call()


@pytest.mark.parametrize("op", [
    GetOp(("n",), ""), GetOp(("n",), 5), GetOp(("n",), "x" * 513),  # type: ignore[arg-type]
    PutOp(("n",), "k\n", {"v": 1}), PutOp(("n",), "k", {"v": 1}, ttl=5.0),
    PutOp(("n",), "holomem:", {"v": 1}), PutOp(("n",), "holomem:working/s", {"v": 1}),
    PutOp(("n",), "k", {"v": 1}, index=[""]), PutOp(("n",), "k", {"v": 1}, index="v"),  # type: ignore[arg-type]
    SearchOp(("n",), limit=-1), SearchOp(("n",), offset=-2), SearchOp(("n",), limit="5"),  # type: ignore[arg-type]
    SearchOp(("n",), query="q", limit=1001), SearchOp(("n",), query=5),  # type: ignore[arg-type]
    SearchOp(("n",), filter={"a": {"b": 1}}), SearchOp(("n",), filter={"a": {"$regex": "x"}}),
    SearchOp(("n",), filter={"a": {"$gt": [1]}}), SearchOp(("n",), filter=["a"]),  # type: ignore[arg-type]
    SearchOp(("n",), filter={MARK: 1}), SearchOp(("n",), filter={"a": {"$eq": 1, "b": 2}}),
    ListNamespacesOp(max_depth=0), ListNamespacesOp(limit=-1),
    ListNamespacesOp((MatchCondition("middle", ("a",)),)),  # type: ignore[arg-type]
    "not an op", None,
])
def test_a_bad_op_is_a_clear_error_and_its_batch_writes_nothing(store: HolomemStore,
                                                                op: Any) -> None:
    with pytest.raises(CLEAR):
        store.batch([PutOp(("n",), "first", {"v": 1}), op])
    assert store.get(("n",), "first") is None  # the batch was checked before it ran
    with pytest.raises(CLEAR):
        asyncio.run(store.abatch([op]))


def test_a_put_under_holomems_reserved_prefix_is_refused_so_every_item_can_be_found(
        store: HolomemStore) -> None:
    # A key is a subject, and the facts of a "holomem:" subject are left out of the
    # listing search runs: such an item could be read back but never found.
    with pytest.raises(InvalidError, match="reserves"):
        store.put(("n",), "holomem:x", {"v": 1})
    assert store.get(("n",), "holomem:x") is None
    assert store.search(("n",)) == []
    store.delete(("n",), "holomem:x")  # get and delete take such a key (nothing there)
    store.put(("n",), "holomem-x", {"v": 2})  # only the prefix is refused
    assert [i.key for i in store.search(("n",))] == ["holomem-x"]


def test_a_search_reaching_past_a_thousand_results_is_a_limit(store: HolomemStore) -> None:
    with pytest.raises(LimitError):
        store.search(("n",), query="q", offset=990, limit=11)
    assert store.search(("n",), offset=990, limit=11) == []  # a listing has no such bound


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=8)
ANYTHING = JSONISH | st.builds(object) | st.sets(st.integers(), max_size=2) | st.binary(
    max_size=4) | st.dictionaries(st.integers(), st.integers(), min_size=1, max_size=2)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(namespace=st.lists(st.sampled_from(["users", "u-1", "x"]), min_size=1, max_size=3)
       .map(tuple) | st.lists(st.text(max_size=6), max_size=9).map(tuple),
       key=st.sampled_from(["k", "prefs"]) | st.text(max_size=8),
       value=st.dictionaries(st.text(max_size=6), JSONISH, max_size=3)
       | st.dictionaries(st.text(max_size=6), ANYTHING, max_size=3) | ANYTHING)
def test_any_input_is_stored_as_given_or_refused_clearly(store: HolomemStore,
                                                         namespace: tuple[str, ...],
                                                         key: str, value: Any) -> None:
    try:
        store.put(namespace, key, value)
    except CLEAR as exc:
        event(f"refused: {type(exc).__name__}")
        return
    item = store.get(namespace, key)
    if value is None:  # a put of None is a delete
        assert item is None
        return
    event("stored")
    assert item is not None
    assert item.value == json.loads(json.dumps(value))
    store.delete(namespace, key)
    assert store.get(namespace, key) is None


FINITE_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63) + 1, max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=12)


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(namespace=st.lists(st.text(st.characters(codec="utf-8", min_codepoint=0x20,
                                                exclude_characters=".\x7f"),
                                  min_size=1, max_size=6), min_size=1, max_size=8)
       .filter(lambda ns: ns[0] != "langgraph").map(tuple),
       key=st.text(st.characters(codec="utf-8", min_codepoint=0x20, exclude_characters="\x7f"),
                   min_size=1, max_size=8).filter(lambda k: not k.startswith("holomem:")),
       value=st.dictionaries(st.text(max_size=6).filter(lambda k: k != MARK), FINITE_JSON,
                             max_size=4))
def test_every_json_object_comes_back_as_it_was_put(store: HolomemStore,
                                                    namespace: tuple[str, ...], key: str,
                                                    value: dict[str, Any]) -> None:
    store.put(namespace, key, value)
    item = store.get(namespace, key)
    assert item is not None and (item.namespace, item.key) == (namespace, key)
    assert item.value == value
    assert (namespace, key) in {(i.namespace, i.key) for i in store.search(namespace)}
    store.delete(namespace, key)
    assert store.get(namespace, key) is None


# -- a LangGraph graph ----------------------------------------------------------------------
class State(TypedDict):
    user: str
    message: str
    known: list[str]


def remember_node(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Writes what the user said as a memory (under a key of its own, so a later
    mention of the same thing updates it)."""
    topic = state["message"].split()[-1].lower()
    store.put(("memories", state["user"]), topic, {"text": state["message"]})
    return {}


def recall_node(state: State, *, store: BaseStore) -> dict[str, Any]:
    """Reads back every memory of the user that the message relates to."""
    found = store.search(("memories", state["user"]), query=state["message"], limit=5)
    return {"known": [i.value["text"] for i in found]}


def build_graph(store: BaseStore) -> Any:
    graph = StateGraph(State)
    graph.add_node("remember", remember_node)
    graph.add_node("recall", recall_node)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


def test_a_langgraph_graph_reads_and_writes_memories_through_its_store(
        store: HolomemStore, memory: Memory, clock: ManualClock) -> None:
    app = build_graph(store)
    out = app.invoke({"user": "u1", "message": "I drink tea", "known": []})
    assert out["known"] == ["I drink tea"]
    clock.advance(1000)
    out = app.invoke({"user": "u1", "message": "Now I prefer green tea", "known": []})
    assert out["known"] == ["Now I prefer green tea"]  # the same key: superseded
    out = app.invoke({"user": "u2", "message": "I like coffee", "known": []})
    assert out["known"] == ["I like coffee"]  # nothing of u1's
    item = store.get(("memories", "u1"), "tea")
    assert item is not None and item.created_at == at(START_MS)
    chain = memory.history(fact_of(memory, ["memories", "u1"], "tea"))
    assert [r.metadata["text"] for r in chain] == [  # type: ignore[index]
        "I drink tea", "Now I prefer green tea"]
    out = asyncio.run(app.ainvoke({"user": "u1", "message": "about tea", "known": []}))
    assert out["known"] == ["about tea"]
    assert len(memory.history(fact_of(memory, ["memories", "u1"], "tea"))) == 3
