"""A purge carries whole the transactions it need not change (issue 33).

A transaction that only added documents (each with or without its fact, no link), all
still live and named by no other transaction, holds exactly the events a compaction
would write for them: the purge takes its frame over as bytes instead of making,
encoding and compressing those events again. Every other document is written again as
before -- one touched by a feedback, a confidence, a link, or sharing its transaction
with a removed document -- and nothing removed is carried (tests/purge/markers.py).
The state is checked against a replay in tests/purge/test_purged_state.py; here, which
transactions go over whole, and that the store answers the same before and after.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holomem import Memory, Store
from holomem.events import DocumentAdded, Event, FactAdded
from tests.purge import markers

KEY = bytes(range(32))
QUERIES = ("fact 3", "marker-e5", "c fact", "e fact")


def _batch(memory: Memory, name: str, n: int = 6) -> None:
    memory.remember_many([{"id": f"{name}{i}", "text": f"{name} fact {i} marker-{name}{i}"}
                          for i in range(n)])


def _adds(store: Store) -> dict[tuple[str, ...], tuple[int, list[Event]]]:
    """The transactions that add documents, by the ids they add."""
    out = {}
    for seq, events in store.events():
        ids = tuple(e.id for e in events if isinstance(e, DocumentAdded))
        if ids:
            out[ids] = (seq, events)
    return out


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_a_purge_carries_untouched_transactions_whole_and_writes_the_rest_again(
        tmp_path: Path, key: bytes | None) -> None:
    path = str(tmp_path / "store")
    with Store.open(path, key=key) as store:
        memory = Memory(store)
        for name in ("a", "b", "c", "d", "e"):
            _batch(memory, name)
        memory.feedback("b3", helpful=True, note="about b3")
        memory.relate("c1", "c2", "knows")
        memory.set_confidence("d4", 0.25)
        before = _adds(store)
        answers = {q: {r.id for r in memory.recall(q, k=50)} for q in QUERIES}
        memory.forget({"ids": ["a2"]}, purge=True)
        after = _adds(store)
        # e's transaction went over whole: the same events, under a new number.
        e_ids = tuple(f"e{i}" for i in range(6))
        assert e_ids in after and after[e_ids][1] == before[e_ids][1]
        assert after[e_ids][0] > max(seq for seq, _ in before.values())
        # a (a removed fact), b (a feedback), c (a link), d (a confidence): written again.
        for name in "abcd":
            assert tuple(f"{name}{i}" for i in range(6)) not in after
        facts = [e.id for _, es in after.values() for e in es if isinstance(e, FactAdded)]
        assert sorted(facts) == sorted(f"{n}{i}" for n in "abcde" for i in range(6)
                                       if f"{n}{i}" != "a2")
        purged = {q: [(r.id, r.text, r.score) for r in memory.recall(q, k=50)]
                  for q in QUERIES}
        assert memory.get("d4").confidence == 0.25
    assert {q: {i for i, _, _ in r} for q, r in purged.items()} == {
        q: ids - {"a2"} for q, ids in answers.items()}
    assert markers.files_with(path, b"marker-a2", key) == {}
    assert markers.files_with(path, b"marker-e5", key)
    with Store.open(path, key=key) as store:  # reopens to the same answers
        memory = Memory(store)
        assert {q: [(r.id, r.text, r.score) for r in memory.recall(q, k=50)]
                for q in QUERIES} == purged


def test_a_second_purge_carries_what_the_first_carried(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    with Store.open(path) as store:
        memory = Memory(store)
        for name in "abcdefghij":  # (enough that most of them can be carried)
            _batch(memory, name)
        memory.forget({"ids": ["a0"]}, purge=True)
        first = _adds(store)
        memory.forget({"ids": ["b0"]}, purge=True)
        second = _adds(store)
    c_ids = tuple(f"c{i}" for i in range(6))
    assert second[c_ids][1] == first[c_ids][1]
    # a's survivors were written again by the first purge, in a transaction of their
    # own kind (documents and their facts only): the second carries it whole too.
    a_ids = tuple(f"a{i}" for i in range(1, 6))
    assert a_ids in second and second[a_ids][1] == first[a_ids][1]


def test_a_purge_that_could_carry_little_writes_everything_again(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    with Store.open(path) as store:
        memory = Memory(store)
        for name in ("a", "b"):
            _batch(memory, name)
        before = _adds(store)
        memory.forget({"ids": ["a0"]}, purge=True)
        after = _adds(store)
    # Half the documents at most could be carried: below WHOLE_SHARE, none is.
    assert tuple(f"b{i}" for i in range(6)) not in after
    assert {e.id for _, es in after.values() for e in es if isinstance(e, FactAdded)} == {
        e.id for _, es in before.values() for e in es if isinstance(e, FactAdded)} - {"a0"}
