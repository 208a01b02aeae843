"""remember and remember_many (docs/contract.md §3, §4): idempotent retries, content-derived ids,
conflicts, atomic batches, batches that see their own earlier inputs, status at the
edges of a validity window, and explicit supersession.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from holomem import (
    ConflictError,
    InvalidError,
    ManualClock,
    Memory,
    MemoryConfig,
    RememberInput,
    Store,
)


def test_retry_with_same_payload_writes_nothing_and_keeps_first_ingest_time(
        memory: Memory, store: Store, clock: ManualClock) -> None:
    first = memory.remember(text="dana likes tea", subject="dana/drink", valid_from=5,
                            metadata={"src": "chat"}, entities=["Dana"])
    assert first.created
    revision = store.revision
    clock.advance(60_000)
    again = memory.remember(text="dana likes tea", subject="dana/drink", valid_from=5,
                            metadata={"src": "chat"}, entities=["Dana"])
    assert again.id == first.id
    assert not again.created
    assert again.ingest_time == first.ingest_time
    assert store.revision == revision
    rec = memory.get(first.id)
    assert rec is not None and rec.ingest_time == first.ingest_time
    # A retry of a whole batch is idempotent too.
    clock.advance(1)
    again_many = memory.remember_many([{"text": "dana likes tea", "subject": "dana/drink",
                                        "valid_from": 5, "metadata": {"src": "chat"},
                                        "entities": ["Dana"]}])
    assert [(r.id, r.created, r.ingest_time) for r in again_many] == [
        (first.id, False, first.ingest_time)]
    assert store.revision == revision


def test_retry_with_explicit_id_is_idempotent(memory: Memory, store: Store,
                                              clock: ManualClock) -> None:
    a = memory.remember(id="x1", text="the sky is blue")
    revision = store.revision
    clock.advance(5)
    b = memory.remember(RememberInput(id="x1", text="the sky is blue"))
    assert (b.id, b.created, b.ingest_time) == ("x1", False, a.ingest_time)
    assert store.revision == revision


def test_datetime_and_milliseconds_are_the_same_payload(memory: Memory, store: Store) -> None:
    when = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)
    ms = int(when.timestamp() * 1000)
    a = memory.remember(text="launch day", event_time=when)
    b = memory.remember(text="launch day", event_time=ms)
    assert a.id == b.id and not b.created
    rec = memory.get(a.id)
    assert rec is not None and rec.event_time == ms
    with pytest.raises(InvalidError):
        memory.remember(text="naive", event_time=dt.datetime(2024, 5, 1))


@pytest.mark.parametrize("when", [
    dt.datetime(2039, 7, 13, 7, 53, 57, 831000, tzinfo=dt.UTC),
    dt.datetime(2107, 5, 4, 4, 48, 16, 591000, tzinfo=dt.UTC),
    dt.datetime(2039, 7, 13, 9, 53, 57, 831000, tzinfo=dt.timezone(dt.timedelta(hours=2))),
    dt.datetime(1900, 1, 1, 0, 0, 0, 1000, tzinfo=dt.UTC),
])
def test_aware_datetimes_convert_to_the_exact_millisecond(memory: Memory,
                                                          when: dt.datetime) -> None:
    """Regression: float timestamp() * 1000 turned some whole milliseconds into the one
    before, so a datetime and its milliseconds were different payloads and a validity
    boundary moved by one millisecond."""
    ms = (when - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(milliseconds=1)
    a = memory.remember(text="deadline", valid_from=-10**13, valid_to=when)
    b = memory.remember(text="deadline", valid_from=-10**13, valid_to=ms)
    assert a.id == b.id and not b.created
    rec = memory.get(a.id)
    assert rec is not None and rec.valid_to == ms
    e = memory.explain("deadline", a.id, as_of=when)
    assert e.valid_at == ms and e.status == "expired"
    assert memory.explain("deadline", a.id, as_of=ms - 1).status == "current"


def test_content_derived_ids_are_stable_across_stores(tmp_path: Path) -> None:
    inputs: list[dict[str, Any]] = [
        {"text": "erin moved to lisbon", "subject": "erin/city", "valid_from": 1000},
        {"text": "erin moved to lisbon"},
        {"text": "erin moved to lisbon", "metadata": {"a": 1, "b": [1, 2]}},
        {"text": "erin moved to lisbon", "metadata": {"b": [1, 2], "a": 1}},
        {"text": "erin moved to lisbon", "entities": ["Erin"], "event_time": 7},
    ]
    ids = []
    for n in range(2):
        with Store.open(tmp_path / f"s{n}", sync="none") as store:
            memory = Memory(store, clock=ManualClock(1_000 * (n + 1)))
            ids.append([memory.remember(**x).id for x in inputs])
    assert ids[0] == ids[1]
    # Different content, different id; key order of metadata does not matter.
    assert len(set(ids[0])) == 4
    assert ids[0][2] == ids[0][3]
    assert all(i.startswith("f-") for i in ids[0])


def test_same_id_with_another_payload_is_a_conflict(memory: Memory, store: Store) -> None:
    memory.remember(id="c1", text="frank plays chess", subject="frank/game")
    revision = store.revision
    for other in ({"text": "frank plays go", "subject": "frank/game"},
                  {"text": "frank plays chess", "subject": "frank/sport"},
                  {"text": "frank plays chess", "subject": "frank/game", "valid_to": 10**12},
                  {"text": "frank plays chess"}):
        with pytest.raises(ConflictError):
            memory.remember(id="c1", **other)
    assert store.revision == revision
    rec = memory.get("c1")
    assert rec is not None and rec.text == "frank plays chess"


def test_fact_id_of_a_plain_document_is_a_conflict(memory: Memory, store: Store) -> None:
    store.add_document("doc-1", "a plain document")
    revision = store.revision
    with pytest.raises(ConflictError):
        memory.remember(id="doc-1", text="a fact")
    assert store.revision == revision


def test_batch_with_one_invalid_input_stores_nothing(memory: Memory, store: Store) -> None:
    revision = store.revision
    bad_inputs: list[dict[str, Any]] = [
        {"text": 42},
        {"text": "ok", "valid_from": 10, "valid_to": 10},
        {"text": "ok", "unknown_field": 1},
        {"text": "ok", "supersedes": ["no-such-fact"]},
        {"text": "ok", "id": ""},
    ]
    for bad in bad_inputs:
        with pytest.raises(InvalidError):
            memory.remember_many([{"id": "g1", "text": "grace swims"}, bad,
                                  {"id": "g2", "text": "grace runs"}])
        assert store.revision == revision
        assert memory.get("g1") is None and memory.get("g2") is None
        assert not store.has_document("g1")


def test_batch_with_one_conflicting_input_stores_nothing(memory: Memory, store: Store) -> None:
    memory.remember(id="h1", text="heidi reads novels")
    revision = store.revision
    with pytest.raises(ConflictError):
        memory.remember_many([{"id": "h2", "text": "heidi reads poems"},
                              {"id": "h1", "text": "heidi reads comics"}])
    # A conflict inside the batch itself, said so (h3 is stored nowhere).
    with pytest.raises(ConflictError, match="two items of this request have the id 'h3'"):
        memory.remember_many([{"id": "h3", "text": "one"}, {"id": "h3", "text": "two"}])
    assert store.revision == revision
    assert memory.get("h2") is None and memory.get("h3") is None
    assert memory.recall("heidi reads poems", history="all")[0].id == "h1"


def test_later_inputs_of_a_batch_see_earlier_ones(memory: Memory, store: Store,
                                                  clock: ManualClock) -> None:
    before = store.revision
    out = memory.remember_many([
        {"id": "i1", "text": "ivan lives in kyiv", "subject": "ivan/city", "valid_from": 100},
        {"id": "i2", "text": "ivan lives in lviv", "subject": "ivan/city", "valid_from": 200},
        # The same input twice in one batch: stored once.
        {"id": "i2", "text": "ivan lives in lviv", "subject": "ivan/city", "valid_from": 200},
        # Explicitly supersedes a fact of this batch.
        {"id": "i3", "text": "ivan's old note", "supersedes": ["i1"]},
    ])
    assert [(r.id, r.created, r.superseded) for r in out] == [
        ("i1", True, []), ("i2", True, ["i1"]), ("i2", False, []), ("i3", True, ["i1"])]
    assert store.revision == before + 1  # one transaction
    i1 = memory.get("i1")
    assert i1 is not None and sorted(i1.superseded_by) == ["i2", "i3"]
    assert [r.id for r in memory.recall("ivan lives", as_of=150)] == ["i1"]
    assert [r.id for r in memory.recall("ivan lives", as_of=250)] == ["i2"]
    # Out of order within a batch: the later-beginning fact comes first.
    out = memory.remember_many([
        {"id": "j2", "text": "judy works at globex", "subject": "judy/job", "valid_from": 200},
        {"id": "j1", "text": "judy works at acme", "subject": "judy/job", "valid_from": 100},
    ])
    assert [r.superseded for r in out] == [[], []]
    assert [r.id for r in memory.recall("judy works", as_of=150)] == ["j1"]
    assert [r.id for r in memory.recall("judy works", as_of=250)] == ["j2"]
    j1 = memory.get("j1")
    assert j1 is not None and j1.superseded_by == ["j2"]


def test_one_batch_is_one_transaction(memory: Memory, store: Store) -> None:
    before = store.revision
    memory.remember_many([{"text": f"fact number {n}"} for n in range(50)])
    assert store.revision == before + 1


@pytest.mark.parametrize("valid_to", [None, 2_000])
def test_status_at_the_edges_of_the_validity_window(memory: Memory, clock: ManualClock,
                                                    valid_to: int | None) -> None:
    clock.set(10_000)
    memory.remember(id="w", text="karl is on holiday", valid_from=1_000, valid_to=valid_to)

    def status(at: int) -> str | None:
        e = memory.explain("karl holiday", "w", as_of=at)
        got = memory.recall("karl holiday", as_of=at, history="all")
        assert [r.id for r in got] == ["w"]
        assert got[0].status == got[0].fact.status == e.status
        current = [r.id for r in memory.recall("karl holiday", as_of=at)]
        assert current == (["w"] if e.status == "current" else [])
        return e.status

    assert status(999) == "not-yet-valid"  # valid_from - 1
    assert status(1_000) == "current"  # valid_from is inclusive
    assert status(1_999) == "current"
    if valid_to is not None:
        assert status(2_000) == "expired"  # valid_to is exclusive
        assert status(2_001) == "expired"
    else:
        assert status(2_000) == "current"
    rec = memory.get("w")
    assert rec is not None
    assert rec.status == ("expired" if valid_to is not None else "current")


def test_superseded_wins_over_expired(memory: Memory) -> None:
    memory.remember(id="e1", text="lena's phone is 111", valid_from=0, valid_to=500)
    memory.remember(id="e2", text="lena's phone is 222", valid_from=300, supersedes=["e1"])
    e = memory.explain("lena phone", "e1", as_of=600)
    assert e.status == "superseded"
    assert memory.explain("lena phone", "e1", as_of=299).status == "current"


def test_explicit_supersedes(memory: Memory, clock: ManualClock) -> None:
    a = memory.remember(id="m1", text="mallory's password hint is blue")
    clock.advance(10)
    b = memory.remember(id="m2", text="mallory's password hint is green", supersedes=["m1"])
    assert b.superseded == ["m1"]
    # Without a subject or validity the link takes effect at m2's ingest time.
    assert [r.id for r in memory.recall("mallory password hint")] == ["m2"]
    assert [r.id for r in memory.recall("mallory password hint",
                                         as_of=a.ingest_time)] == ["m1"]
    m1 = memory.get("m1")
    m2 = memory.get("m2")
    assert m1 is not None and m2 is not None
    assert (m1.status, m1.superseded_by) == ("superseded", ["m2"])
    assert (m2.status, m2.supersedes) == ("current", ["m1"])
    # The old fact is never rewritten and stays stored.
    assert m1.text == "mallory's password hint is blue"
    assert [h.id for h in memory.history("m2")] == ["m1", "m2"]


def test_supersedes_naming_an_unknown_fact_is_invalid(memory: Memory, store: Store) -> None:
    memory.remember(id="n1", text="niaj owns a van")
    store.add_document("plain", "not a fact")
    revision = store.revision
    for target in (["nope"], ["n1", "nope"], ["plain"], ["n2"]):
        with pytest.raises(InvalidError):
            memory.remember(id="n2", text="niaj owns a truck", supersedes=target)
    assert store.revision == revision
    assert memory.get("n2") is None


def test_no_supersession_policy_means_no_links(store: Store, clock: ManualClock) -> None:
    memory = Memory(store, MemoryConfig(), clock=clock)  # supersession "none"
    memory.remember(id="o1", text="olivia lives in rome", subject="olivia/city", valid_from=1)
    r = memory.remember(id="o2", text="olivia lives in milan", subject="olivia/city",
                        valid_from=2)
    assert r.superseded == []
    assert {x.id for x in memory.recall("olivia lives")} == {"o1", "o2"}


def test_without_supersession_a_subject_s_other_facts_are_never_gathered(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under "none" a new fact's links do not depend on its subject's other facts, so
    they are not read: before, each fact of a batch gathered every stored and earlier
    fact of its subject (2,000 facts of one subject took 17 s, growing faster than
    the square of the count)."""
    from holomem.projections.facts import FactIndex

    memory = Memory(store, MemoryConfig())  # supersession "none"
    memory.remember_many([{"text": f"alice likes tea number {i}", "subject": "alice"}
                          for i in range(3)])

    def gathered(*args: Any) -> list[str]:
        raise AssertionError("a subject's facts were gathered under supersession 'none'")

    monkeypatch.setattr(FactIndex, "subject_members", gathered)
    done = memory.remember_many([{"text": f"alice likes coffee number {i}",
                                  "subject": "alice"} for i in range(50)])
    assert all(r.created and r.superseded == [] for r in done)
    monkeypatch.undo()
    assert len(memory.list(filter={"subject": "alice"}, limit=100).facts) == 53


def test_issue4_an_expired_fact_reads_the_same_whatever_the_arrival_order(tmp_path: Path) -> None:
    """An older fact that ended before its successor began is 'expired', not 'superseded',
    whether it arrives before or after that successor."""
    from holomem import ManualClock, Memory, MemoryConfig, Store

    old = {"id": "old", "text": "Ann works at Acme", "subject": "ann/job", "valid_from": 10,
           "valid_to": 20}
    new = {"id": "new", "text": "Ann works at Initech", "subject": "ann/job", "valid_from": 30}
    statuses = []
    for order in ((old, new), (new, old)):
        store = Store.open(tmp_path / f"s{len(statuses)}", sync="none")
        m = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=ManualClock(100))
        for fact in order:
            m.remember(**fact)
        statuses.append([(r.id, r.status) for r in m.recall("Ann works", history="all")])
        store.close()
    assert sorted(statuses[0]) == sorted(statuses[1]) == [("new", "current"), ("old", "expired")]


def test_issue4_entities_given_as_a_set_give_the_same_content_id_everywhere(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    code = ("from holomem import Memory, Store; import sys;"
            "m = Memory(Store.open(sys.argv[1], sync='none'));"
            "print(m.remember(text='x', entities={'Zed', 'Amy', 'Bob', 'Kim'}).id)")
    ids = {subprocess.run([sys.executable, "-c", code, str(tmp_path / f"p{i}")],
                          capture_output=True, text=True, check=True,
                          env={**__import__("os").environ, "PYTHONHASHSEED": str(i)}
                          ).stdout.strip() for i in range(3)}
    assert len(ids) == 1
