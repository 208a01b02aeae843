"""Time to live (issue 19): a fact remembered with ``ttl_ms`` expires at its ingest time
+ ttl — its status at every evaluation time and known-at time follows from that one
rule; the journal carries the TTL, so replay, compaction and export/import rebuild it;
only ``apply_forgetting`` removes expired facts: under the ``expired-ttl`` policy at once,
and under ``expiredForLongerThanMs`` once the TTL's end is longer ago than the duration,
as a ``valid_to``'s would be.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import InvalidError, ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.config import ForgettingConfig

T0 = 1_000_000


def _memory(tmp_path: Path, config: MemoryConfig | None = None,
            clock: ManualClock | None = None) -> tuple[Store, Memory, ManualClock]:
    clock = clock or ManualClock(T0)
    store = Store.open(tmp_path / "s", sync="none")
    return store, Memory(store, config or MemoryConfig(), clock=clock), clock


def test_status_is_current_until_ingest_plus_ttl_then_expired(
        memory: Memory, clock: ManualClock) -> None:
    r = memory.remember("the parking code is 4411", ttl_ms=1000)
    rec = memory.get(r.id)
    assert rec is not None
    assert (rec.status, rec.ttl_ms, rec.expires_at) == ("current", 1000, T0 + 1000)
    clock.advance(999)
    assert memory.get(r.id).status == "current"  # type: ignore[union-attr]
    assert [x.id for x in memory.recall("parking code")] == [r.id]
    clock.advance(1)
    assert memory.get(r.id).status == "expired"  # type: ignore[union-attr]
    assert memory.recall("parking code") == []
    assert [x.id for x in memory.recall("parking code", history="all")] == [r.id]


@settings(max_examples=60, deadline=None)
@given(ttl=st.integers(1, 10_000), valid_to=st.none() | st.integers(-5_000, 15_000),
       valid_from=st.none() | st.integers(-5_000, 15_000),
       at=st.integers(-10_000, 20_000), known=st.none() | st.integers(-1, 1))
def test_status_at_every_as_of_and_known_at_follows_the_one_rule(
        tmp_path_factory: pytest.TempPathFactory, ttl: int, valid_to: int | None,
        valid_from: int | None, at: int, known: int | None) -> None:
    if valid_from is not None and valid_to is not None and valid_from >= valid_to:
        valid_to = None
    store, memory, _ = _memory(tmp_path_factory.mktemp("ttl"))
    try:
        fields = {"valid_to": None if valid_to is None else T0 + valid_to,
                  "valid_from": None if valid_from is None else T0 + valid_from}
        r = memory.remember("a fact with a time to live", ttl_ms=ttl, **fields)
        begins = fields["valid_from"] if fields["valid_from"] is not None else T0
        ends = min(T0 + ttl, fields["valid_to"]) if fields["valid_to"] is not None else T0 + ttl
        when = T0 + at
        known_at = None if known is None else T0 + known
        if known_at is not None and known_at < T0:
            expected = None  # ingested after known_at: unknown then
        elif when < begins:
            expected = "not-yet-valid"
        elif when >= ends:
            expected = "expired"
        else:
            expected = "current"
        e = memory.explain("time to live", r.id, as_of=when, known_at=known_at)
        assert e.status == expected
        assert (e.ttl_ms, e.expires_at) == (ttl, T0 + ttl)
        got = memory.recall("time to live", as_of=when, known_at=known_at, history="all")
        assert [x.status for x in got] == ([] if expected is None else [expected])
    finally:
        store.close()


def test_ttl_survives_replay_compaction_and_export_import(tmp_path: Path) -> None:
    store, memory, clock = _memory(tmp_path)
    r = memory.remember("temporary token abc", ttl_ms=5000)
    memory.remember("permanent fact")
    store.close()
    store = Store.open(tmp_path / "s", sync="none")  # replay
    memory = Memory(store, clock=clock)
    assert memory.get(r.id).ttl_ms == 5000  # type: ignore[union-attr]
    store.compact()
    store.close()
    store = Store.open(tmp_path / "s", sync="none")
    memory = Memory(store, clock=clock)
    rec = memory.get(r.id)
    assert rec is not None and (rec.ttl_ms, rec.expires_at) == (5000, T0 + 5000)
    lines = list(memory.export())
    other = Store.open(tmp_path / "other", sync="none")
    copy = Memory(other, clock=clock)
    copy.import_(lines)
    clock.advance(5000)
    got = copy.get(r.id)
    assert got is not None and (got.ttl_ms, got.status) == (5000, "expired")
    other.close()
    store.close()


def test_expired_ttl_policy_removes_only_expired_ttl_facts_and_only_when_applied(
        tmp_path: Path) -> None:
    store, memory, clock = _memory(tmp_path, MemoryConfig(forgetting="expired-ttl"))
    short = memory.remember("short lived note", ttl_ms=100).id
    long = memory.remember("long lived note", ttl_ms=10_000).id
    window = memory.remember("a window that ended", valid_to=T0 + 50).id
    plain = memory.remember("a plain note").id
    clock.advance(200)
    # Nothing happens by itself: the expired fact is still stored.
    assert memory.get(short) is not None
    dry = memory.apply_forgetting()
    assert dry.dry_run and dry.removed == [short]
    assert memory.get(short) is not None
    done = memory.apply_forgetting(dry_run=False)
    assert done.removed == [short]
    assert memory.get(short) is None
    assert all(memory.get(i) is not None for i in (long, window, plain))
    store.close()


def test_expired_ttl_combines_with_the_other_built_in_rules(tmp_path: Path) -> None:
    store, memory, clock = _memory(tmp_path, MemoryConfig(
        forgetting=ForgettingConfig(expired_ttl=True, expired_for_longer_than_ms=0)))
    a = memory.remember("ttl fact", ttl_ms=10).id
    b = memory.remember("window fact", valid_to=T0 + 10).id
    clock.advance(20)
    assert sorted(memory.apply_forgetting(dry_run=False).removed) == sorted([a, b])
    store.close()


@pytest.mark.parametrize("bad", [0, -1, 2**62 + 1, True, 1.5, "10"])
def test_a_bad_ttl_is_refused_and_nothing_is_written(memory: Memory, store: Store,
                                                      bad: object) -> None:
    revision = store.revision
    with pytest.raises(InvalidError, match="ttl"):
        memory.remember("x", ttl_ms=bad)
    with pytest.raises(InvalidError, match="ttl"):
        memory.remember_many([{"text": "ok"}, {"text": "y", "ttl_ms": bad}])
    assert store.revision == revision


def test_ttl_is_part_of_the_payload(memory: Memory) -> None:
    a = memory.remember("same words", ttl_ms=10)
    b = memory.remember("same words", ttl_ms=20)
    c = memory.remember("same words")
    assert len({a.id, b.id, c.id}) == 3
    assert memory.remember("same words", ttl_ms=10).created is False


def test_a_batch_sees_the_ttl_of_its_earlier_facts(tmp_path: Path) -> None:
    # latest-by-subject: a fact whose TTL ran out before the next one began is not
    # superseded by it (it expired first), in a batch as across calls.
    store, memory, _ = _memory(tmp_path, MemoryConfig(supersession="latest-by-subject"))
    first, second = memory.remember_many([
        {"text": "lock code 1", "subject": "lock", "ttl_ms": 10, "event_time": T0},
        {"text": "lock code 2", "subject": "lock", "event_time": T0 + 100}])
    assert first.superseded == [] and second.superseded == []
    store.close()


def test_expired_for_longer_than_counts_the_end_a_ttl_gives_as_a_valid_to(
        tmp_path: Path) -> None:
    store, memory, clock = _memory(tmp_path, MemoryConfig(
        forgetting=ForgettingConfig(expired_for_longer_than_ms=10)))
    by_valid_to = memory.remember("ends by valid_to", valid_to=T0 + 10).id
    by_ttl = memory.remember("ends by ttl", ttl_ms=10).id  # expires at T0 + 10 too
    earlier = memory.remember("ttl before valid_to", ttl_ms=10, valid_to=T0 + 500).id
    clock.set(T0 + 20)  # expired for exactly 10 ms: not longer
    assert memory.apply_forgetting().removed == []
    clock.set(T0 + 21)
    assert memory.apply_forgetting().removed == [by_valid_to, by_ttl, earlier]
    store.close()


@settings(max_examples=60, deadline=None)
@given(ttl=st.none() | st.integers(1, 1_000), valid_to=st.none() | st.integers(1, 1_000),
       d=st.integers(0, 1_000), after=st.integers(0, 3_000))
def test_expired_for_longer_than_selects_by_the_earlier_of_valid_to_and_ttl(
        tmp_path_factory: pytest.TempPathFactory, ttl: int | None, valid_to: int | None,
        d: int, after: int) -> None:
    store, memory, clock = _memory(tmp_path_factory.mktemp("forget"), MemoryConfig(
        forgetting=ForgettingConfig(expired_for_longer_than_ms=d)))
    try:
        fid = memory.remember("a fact that may end", ttl_ms=ttl,
                              valid_to=None if valid_to is None else T0 + valid_to).id
        clock.set(T0 + after)
        ends = [T0 + n for n in (ttl, valid_to) if n is not None]
        selected = bool(ends) and T0 + after - min(ends) > d
        assert memory.apply_forgetting().removed == ([fid] if selected else [])
    finally:
        store.close()
