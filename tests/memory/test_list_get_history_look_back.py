"""``list``, ``get`` and ``history`` answer at a moment, as recall does: ``asOf``
evaluates every status then, ``knownAt`` leaves out what was ingested later and shows the
feedback and confidence known then (docs/contract.md §4 "Looking back")."""

from __future__ import annotations

from pathlib import Path

import pytest

from holomem import ManualClock, Memory, Store
from holomem.errors import InvalidError, NotFoundError


@pytest.fixture
def memory(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Store.open(str(tmp_path / "s")) as store:
        clock = ManualClock(1_000)
        m = Memory(store, clock=clock)
        m.call("remember", {"text": "Ann lives in Paris", "id": "paris", "subject": "ann/city",
                            "validFrom": 0})
        clock.set(5_000)
        m.call("remember", {"text": "Ann lives in Rome", "id": "rome", "subject": "ann/city",
                            "validFrom": 4_000, "supersedes": ["paris"]})
        clock.set(10_000)
        yield m


def _statuses(page: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {f["id"]: f["status"] for f in page["facts"]}


def test_list_as_of_a_time_gives_each_status_then(memory: Memory) -> None:
    assert _statuses(memory.call("list", {})) == {"paris": "superseded", "rome": "current"}
    assert _statuses(memory.call("list", {"asOf": 2_000})) == {
        "paris": "current", "rome": "not-yet-valid"}
    then = memory.call("list", {"asOf": 2_000, "filter": {"status": "current"}})
    assert _statuses(then) == {"paris": "current"}


def test_list_known_at_leaves_out_what_was_ingested_later(memory: Memory) -> None:
    page = memory.call("list", {"knownAt": 2_000})
    assert _statuses(page) == {"paris": "current"}
    assert page["facts"][0]["supersededBy"] == []
    assert memory.call("list", {"knownAt": 999})["facts"] == []


def test_get_and_history_answer_at_a_moment(memory: Memory) -> None:
    assert memory.call("get", {"id": "paris", "asOf": 2_000})["fact"]["status"] == "current"
    assert memory.call("get", {"id": "rome", "knownAt": 2_000})["fact"] is None
    old = memory.call("history", {"id": "paris", "knownAt": 2_000})["history"]
    assert [(f["id"], f["status"]) for f in old] == [("paris", "current")]
    both = memory.call("history", {"id": "rome", "asOf": 2_000})["history"]
    assert [(f["id"], f["status"]) for f in both] == [("paris", "current"),
                                                     ("rome", "not-yet-valid")]
    with pytest.raises(NotFoundError):
        memory.call("history", {"id": "rome", "knownAt": 2_000})
    # ISO 8601 times, as everywhere in Python
    assert memory.get("paris", as_of="1970-01-01T00:00:02Z").status == "current"  # type: ignore[union-attr]


def test_a_bad_moment_is_refused(memory: Memory) -> None:
    with pytest.raises(InvalidError):
        memory.call("list", {"asOf": "yesterday"})
    with pytest.raises(InvalidError):
        memory.get("paris", known_at="not a time")


def _notes(m: Memory, op: str, known_at: int | None) -> dict[str, tuple[int, int, float]]:
    """(helpful, unhelpful, confidence) of each fact ``op`` answers with ``knownAt``."""
    req: dict[str, object] = {} if known_at is None else {"knownAt": known_at}
    if op == "get":
        facts = [m.call("get", {"id": "paris", **req})["fact"]]
    elif op == "history":
        facts = m.call("history", {"id": "paris", **req})["history"][:1]
    else:
        facts = [f for f in m.call("list", req)["facts"] if f["id"] == "paris"]
    return {f["id"]: (f["helpful"], f["unhelpful"], f["confidence"]) for f in facts}


@pytest.mark.parametrize("op", ["get", "history", "list"])
def test_known_at_shows_the_feedback_and_confidence_known_then(tmp_path: Path,
                                                               op: str) -> None:
    """Each feedback and each confidence set counts from its own time on, also after a
    compaction and a reopen (the store keeps every confidence set with its time)."""
    path = str(tmp_path / "s")
    clock = ManualClock(1_000)
    with Store.open(path) as store:
        m = Memory(store, clock=clock)
        m.remember("Ann lives in Paris", id="paris", confidence=0.8)
        clock.set(2_000)
        m.feedback("paris", True)
        clock.set(3_000)
        m.set_confidence("paris", 0.3)
        clock.set(4_000)
        m.feedback("paris", False)
        m.set_confidence("paris", 0.6)
        clock.set(9_000)
        expected = {1_500: (0, 0, 0.8), 2_500: (1, 0, 0.8), 3_500: (1, 0, 0.3),
                    4_000: (1, 1, 0.6), None: (1, 1, 0.6)}
        for known_at, notes in expected.items():
            assert _notes(m, op, known_at) == {"paris": notes}, known_at
        full = m.get("paris", known_at=2_500)
        assert full is not None and [(e.helpful, e.time) for e in full.feedback] == [
            (True, 2_000)]
        store.compact()
        for known_at, notes in expected.items():
            assert _notes(m, op, known_at) == {"paris": notes}, known_at
        store.checkpoint()
    with Store.open(path) as store:
        m = Memory(store, clock=clock)
        for known_at, notes in expected.items():
            assert _notes(m, op, known_at) == {"paris": notes}, known_at
