"""Namespaces (docs/contract.md §4a): one store, many users, and nothing of one reaches another.

Two users' facts live in ``["users", "alice"]`` and ``["users", "bob"]`` (and one in
``["users", "alice", "work"]``, under Alice's). Every op that takes a namespace
prefix is asked for one user and must answer from that user's facts only; the
root sees everything; prefixes match whole strings (``["users", "al"]`` is not
Alice's); subjects, supersession, contradiction and consolidation never cross a
namespace; content ids cover the namespace; forgetting a namespace removes
everything under it; and all of it survives a reopen and a compaction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import (
    InvalidError,
    LimitError,
    ManualClock,
    Memory,
    MemoryConfig,
    NotFoundError,
    Store,
)
from holomem.api.memory.config import ConsolidationConfig, Duplicates

ALICE = ["users", "alice"]
ALICE_WORK = ["users", "alice", "work"]
BOB = ["users", "bob"]
CONFIG = MemoryConfig(supersession="latest-by-subject", entity_extractor="regex",
                      consolidation=ConsolidationConfig(duplicates=Duplicates()))


def fill(memory: Memory, clock: ManualClock) -> None:
    for ns, who in ((ALICE, "alice"), (BOB, "bob")):
        memory.remember(id=f"{who}-city-1", text=f"{who} lives in Paris near Lisa",
                        subject="city", namespace=ns, valid_from=1000)
        clock.advance(1)
        memory.remember(id=f"{who}-city-2", text=f"{who} lives in Berlin near Lisa",
                        subject="city", namespace=ns, valid_from=2000)
        clock.advance(1)
        memory.remember(id=f"{who}-dup-1", text="the same sentence twice", namespace=ns)
        memory.remember(id=f"{who}-dup-2", text="the same sentence twice", namespace=ns)
    memory.remember(id="alice-job", text="alice works as a nurse with Lisa",
                    namespace=ALICE_WORK)


@pytest.fixture
def filled(store: Store, clock: ManualClock) -> Memory:
    memory = Memory(store, CONFIG, clock=clock)
    fill(memory, clock)
    return memory


def ids_of(results: list[object]) -> set[str]:
    return {r.id for r in results}  # type: ignore[attr-defined]


def test_recall_sees_only_facts_at_or_under_its_prefix(filled: Memory) -> None:
    everyone = ids_of(filled.recall("lives Lisa nurse", k=50, history="all"))
    alice = ids_of(filled.recall("lives Lisa nurse", k=50, history="all", namespace=ALICE))
    bob = ids_of(filled.recall("lives Lisa nurse", k=50, history="all", namespace=BOB))
    work = ids_of(filled.recall("lives Lisa nurse", k=50, history="all", namespace=ALICE_WORK))
    assert alice == {"alice-city-1", "alice-city-2", "alice-job"}
    assert bob == {"bob-city-1", "bob-city-2"}
    assert work == {"alice-job"}
    assert everyone == alice | bob
    # Whole strings, not string prefixes.
    assert filled.recall("lives", namespace=["users", "al"]) == []
    users = ids_of(filled.recall("lives Lisa nurse", k=50, history="all", namespace=["users"]))
    assert users == everyone


def test_every_record_says_its_namespace(filled: Memory) -> None:
    got = filled.get("alice-job")
    assert got is not None and got.namespace == ALICE_WORK
    root = filled.remember(text="a fact at the root")
    fact = filled.get(root.id)
    assert fact is not None and fact.namespace == []


def test_supersession_never_crosses_namespaces(filled: Memory) -> None:
    # Each user's city chain is their own: Berlin superseded Paris within each.
    for who in ("alice", "bob"):
        first = filled.get(f"{who}-city-1")
        assert first is not None and first.superseded_by == [f"{who}-city-2"]
        assert [f.id for f in filled.history(f"{who}-city-2")] == [f"{who}-city-1",
                                                                    f"{who}-city-2"]
    with pytest.raises(InvalidError, match="another namespace"):
        filled.remember(text="bob moved", namespace=BOB, supersedes=["alice-city-2"])


def test_the_same_text_for_two_users_is_two_facts(memory: Memory) -> None:
    a = memory.remember(text="likes green tea", namespace=ALICE)
    b = memory.remember(text="likes green tea", namespace=BOB)
    root = memory.remember(text="likes green tea")
    assert len({a.id, b.id, root.id}) == 3 and a.created and b.created
    assert not memory.remember(text="likes green tea", namespace=ALICE).created
    # The root namespace is no namespace: [] and None are the same fact.
    assert memory.remember(text="likes green tea", namespace=[]).id == root.id


def test_list_explain_and_the_holographic_ops_stay_in_their_prefix(filled: Memory) -> None:
    assert {f.id for f in filled.list(namespace=BOB).facts} == {
        "bob-city-1", "bob-city-2", "bob-dup-1", "bob-dup-2"}
    assert {h.id for h in filled.probe("Lisa", namespace=BOB).results} <= {
        "bob-city-1", "bob-city-2"}
    assert {h.id for h in filled.reason(["Lisa"], namespace=ALICE_WORK).results} == {
        "alice-job"}
    related = {h.entity for h in filled.related("Lisa", namespace=ALICE_WORK).results}
    assert "Paris" not in related and "Berlin" not in related
    # A fact outside the prefix is as unknown to explain as a missing id.
    with pytest.raises(NotFoundError, match="alice-city-1"):
        filled.explain("lives Paris", "alice-city-1", namespace=BOB)
    assert filled.explain("lives Paris", "alice-city-1", namespace=ALICE).rank == 1


def test_related_within_a_namespace_neither_compares_nor_counts_anothers_names(
        memory: Memory) -> None:
    """``compared`` counted every namespace's entity names (and the algebra scored
    them all, so a false positive could have named another tenant's entity)."""
    memory.remember(text="Alice met Bob", entities=["Alice", "Bob"], namespace=ALICE)
    alone = memory.related("Alice", namespace=ALICE)
    for i in range(5):
        memory.remember(text=f"other tenant {i}", entities=[f"Client{i}"], namespace=BOB)
    assert memory.related("Alice", namespace=ALICE) == alone
    assert alone.compared == 1 and [h.entity for h in alone.results] == ["Bob"]
    assert memory.related("Alice").compared == 6  # the root: every name in the store


_NAMESPACES = [ALICE, ALICE_WORK, BOB]
_PEOPLE = ["Alice", "Bob", "Carol", "Dan", "Eve"]


@settings(max_examples=40, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(facts=st.lists(st.tuples(
    st.sampled_from(range(len(_NAMESPACES))),
    st.lists(st.sampled_from([*_PEOPLE, "Zed", "Yann"]), min_size=1, max_size=3,
             unique=True)), min_size=1, max_size=12),
       entity=st.sampled_from(_PEOPLE), k=st.integers(1, 4))
def test_related_within_a_namespace_answers_as_a_store_of_its_facts_alone(
        tmp_path_factory: pytest.TempPathFactory, facts: list[tuple[int, list[str]]],
        entity: str, k: int) -> None:
    def related(only_alice: bool) -> object:
        with Store.open(tmp_path_factory.mktemp("ns") / "s", sync="none") as store:
            memory = Memory(store, clock=ManualClock(1_000))
            for i, (ns, names) in enumerate(facts):
                if not only_alice or _NAMESPACES[ns][:2] == ALICE:
                    memory.remember(id=f"f{i}", text=" and ".join(names) + " met",
                                    entities=names, namespace=_NAMESPACES[ns])
            return memory.related(entity, k=k, namespace=ALICE)

    assert related(only_alice=False) == related(only_alice=True)


def test_contradiction_pairs_never_cross_namespaces(store: Store, clock: ManualClock) -> None:
    memory = Memory(store, MemoryConfig(entity_extractor="regex"), clock=clock)
    for ns in (ALICE, BOB):  # no supersession policy: both stay current
        memory.remember(text="Lisa lives in Paris", subject="lisa/city", namespace=ns)
        memory.remember(text="Lisa lives in Rome", subject="lisa/city", namespace=ns)
    every = memory.contradict(k=50).pairs
    assert len(every) == 2, "one clash of the subject slot in each namespace, no other"
    for pair in every:
        a, b = memory.get(pair.a), memory.get(pair.b)
        assert a is not None and b is not None and a.namespace == b.namespace
    only_bob = memory.contradict(k=50, namespace=BOB).pairs
    assert only_bob and all(memory.get(p.a).namespace == BOB for p in only_bob)  # type: ignore[union-attr]


def test_consolidation_groups_only_within_a_namespace(filled: Memory) -> None:
    report = filled.consolidate(dry_run=True)
    assert sorted(g.sources for g in report.groups) == [["alice-dup-1", "alice-dup-2"],
                                                       ["bob-dup-1", "bob-dup-2"]]
    done = filled.consolidate(dry_run=False, namespace=BOB)
    assert [g.sources for g in done.groups] == [["bob-dup-1", "bob-dup-2"]]
    summary = filled.get(done.added[0])
    assert summary is not None and summary.namespace == BOB


def test_the_context_policy_borrows_only_from_neighbours_in_the_same_namespace(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, MemoryConfig(context={"neighbors": {"weight": 0.3, "window": 1}}),
                    clock=clock)
    # Written in turn: Alice's two facts have Bob's between them in write order.
    memory.remember(id="a1", text="my diagnosis is diabetes", namespace=ALICE)
    memory.remember(id="b1", text="I like hiking", namespace=BOB)
    memory.remember(id="a2", text="I see the doctor on Fridays", namespace=ALICE)
    # Bob's fact matches nothing of the query: no share of Alice's reaches it, asked
    # for Bob or for everyone.
    assert memory.recall("diabetes", namespace=BOB) == []
    everyone = memory.recall("diabetes", explain=True)
    assert [r.id for r in everyone] == ["a1", "a2"]
    # Alice's next fact is her previous one's neighbour, Bob's between them or not: it
    # scores nothing itself, and borrows 0.3 of it.
    assert everyone[1].explanation is not None
    assert everyone[1].score == everyone[1].explanation.context_bonus
    assert everyone[1].score == pytest.approx(0.3 * everyone[0].score)
    assert [r.id for r in memory.recall("diabetes", namespace=ALICE)] == ["a1", "a2"]


def test_forgetting_a_namespace_removes_everything_under_it(filled: Memory) -> None:
    report = filled.forget({"namespace": ALICE}, dry_run=True)
    assert set(report.removed) == {"alice-city-1", "alice-city-2", "alice-dup-1",
                                   "alice-dup-2", "alice-job"}
    filled.forget({"namespace": ALICE})
    assert filled.recall("lives Lisa nurse", k=50, history="all", namespace=ALICE) == []
    assert {f.id for f in filled.list().facts} == {"bob-city-1", "bob-city-2", "bob-dup-1",
                                                   "bob-dup-2"}
    # Another scope, restricted to one user with `within`.
    filled.forget({"subject": "city"}, within=BOB)
    assert {f.id for f in filled.list().facts} == {"bob-dup-1", "bob-dup-2"}


def test_list_namespaces_counts_pages_and_cuts_at_a_depth(filled: Memory) -> None:
    page = filled.list_namespaces()
    assert [(n.namespace, n.facts) for n in page.namespaces] == [
        (ALICE, 4), (ALICE_WORK, 1), (BOB, 4)]
    cut = filled.list_namespaces(prefix=["users"], max_depth=2)
    assert [(n.namespace, n.facts) for n in cut.namespaces] == [(ALICE, 5), (BOB, 4)]
    first = filled.list_namespaces(limit=2)
    assert len(first.namespaces) == 2 and first.next_cursor is not None
    rest = filled.list_namespaces(limit=2, cursor=first.next_cursor)
    assert [n.namespace for n in rest.namespaces] == [BOB] and rest.next_cursor is None
    filled.forget({"namespace": BOB})
    assert [n.namespace for n in filled.list_namespaces().namespaces] == [ALICE, ALICE_WORK]


def test_namespaces_are_checked_like_ids(memory: Memory) -> None:
    with pytest.raises(LimitError):
        memory.remember(text="too deep", namespace=[f"n{i}" for i in range(9)])
    memory.remember(text="deep enough", namespace=[f"n{i}" for i in range(8)])
    for bad in ([""], ["a\nb"], "users//a", [1], ["x" * 513]):
        with pytest.raises(InvalidError):
            memory.remember(text="bad", namespace=bad)
    with pytest.raises(InvalidError):
        memory.recall("x", namespace=[""])
    with pytest.raises(InvalidError):
        memory.call("recall", {"query": "x", "namespace": "users/"})


def test_namespaces_survive_reopen_and_compaction(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    path = tmp_path / "store"
    with Store.open(path) as store:
        fill(Memory(store, CONFIG, clock=clock), clock)
        before = Memory(store, CONFIG, clock=clock).list_namespaces()
        store.compact()
        assert Memory(store, CONFIG, clock=clock).list_namespaces() == before
    with Store.open(path) as store:
        memory = Memory(store, CONFIG, clock=clock)
        assert memory.list_namespaces() == before
        assert ids_of(memory.recall("lives", k=50, history="all", namespace=BOB)) == {
            "bob-city-1", "bob-city-2"}
        first = memory.get("bob-city-1")
        assert first is not None and first.superseded_by == ["bob-city-2"]
