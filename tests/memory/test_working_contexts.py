"""Working contexts (issue 19): a session's JSON state saved as facts under a reserved
subject — every save a version (history shows them all, the latest is current), large
states split across parts and rebuilt exactly, empty states refused so a save never
erases one, a missing session's error lists the namespace's others, and the sessions
survive export/import, replay and forgetting like any fact.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holomem import InvalidError, LimitError, ManualClock, Memory, NotFoundError, Store
from holomem.api.memory.window import working

STATE = {"goal": "ship the release", "open": ["tests", "docs"], "files": {"a.py": 3}}


def test_a_save_loads_back_and_every_save_is_a_version(memory: Memory,
                                                      clock: ManualClock) -> None:
    first = memory.save_working_context(["agent"], "s1", STATE)
    assert (first.state, first.save, first.session, first.namespace) == (
        STATE, 1, "s1", ["agent"])
    clock.advance(10)
    second = memory.save_working_context(["agent"], "s1", {"goal": "next"})
    loaded = memory.load_working_context(["agent"], "s1")
    assert (loaded.state, loaded.save, loaded.saved_at) == ({"goal": "next"}, 2,
                                                            second.saved_at)
    assert memory.load_working_context(["agent"], "s1", save=1).state == STATE
    history = memory.history(loaded.head)
    assert [h.id for h in history] == [first.head, second.head]
    assert [h.status for h in history] == ["superseded", "current"]
    assert all(h.subject == working.SUBJECT_PREFIX + "s1" for h in history)


def test_a_large_state_is_split_and_rebuilt_exactly(memory: Memory) -> None:
    big = {"log": ["\u00e9\"\\\n" * 50 + str(i) for i in range(2000)], "n": 1}
    saved = memory.save_working_context(None, "big", big)
    assert saved.state == big and saved.bytes > 3 * working.PART_BYTES
    small = memory.save_working_context(None, "big", {"n": 2})
    assert memory.load_working_context(None, "big").state == {"n": 2}
    # Only the latest save's parts are current: the old parts are all superseded.
    current = memory.list(history="current",
                          filter={"subject": working.SUBJECT_PREFIX + "big"}).facts
    assert [f.id for f in current] == [small.head]
    assert memory.load_working_context(None, "big", save=1).state == big


@pytest.mark.parametrize("empty", [None, {}, [], ""])
def test_an_empty_state_is_refused_and_the_previous_save_stays(memory: Memory,
                                                               empty: object) -> None:
    memory.save_working_context(None, "s", STATE)
    with pytest.raises(InvalidError, match="must not be empty"):
        memory.save_working_context(None, "s", empty)
    assert memory.load_working_context(None, "s").state == STATE


def test_bad_states_and_sessions_are_clear_errors(memory: Memory, store: Store) -> None:
    revision = store.revision
    with pytest.raises(LimitError, match="limit is"):
        memory.save_working_context(None, "s", {"x": "y" * working.MAX_STATE_BYTES})
    with pytest.raises(InvalidError, match="JSON"):
        memory.save_working_context(None, "s", {"x": object()})
    with pytest.raises(InvalidError, match="JSON"):
        memory.save_working_context(None, "s", {"x": float("nan")})
    for bad in ("", "a\nb", 3):
        with pytest.raises(InvalidError, match="session"):
            memory.save_working_context(None, bad, STATE)  # type: ignore[arg-type]
    assert store.revision == revision


def test_loading_a_missing_session_lists_the_namespaces_other_sessions(
        memory: Memory) -> None:
    memory.save_working_context(["a"], "planning", STATE)
    memory.save_working_context(["a"], "review", STATE)
    memory.save_working_context(["b"], "elsewhere", STATE)
    with pytest.raises(NotFoundError, match="'planning', 'review'") as info:
        memory.load_working_context(["a"], "planing")
    assert "elsewhere" not in str(info.value)
    with pytest.raises(NotFoundError, match="save 7"):
        memory.load_working_context(["a"], "planning", save=7)
    listed = memory.list_working_contexts(["a"])
    assert [s.session for s in listed.sessions] == ["planning", "review"]
    assert memory.list_working_contexts(["c"]).sessions == []


def test_working_contexts_round_trip_through_export_import(tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    with Store.open(tmp_path / "a", sync="none") as a:
        m = Memory(a, clock=clock)
        m.save_working_context(["agent"], "s1", STATE)
        big = {"blob": "z" * 200_000}
        m.save_working_context(["agent"], "s1", big)
        lines = list(m.export())
        with Store.open(tmp_path / "b", sync="none") as b:
            copy = Memory(b, clock=clock)
            copy.import_(lines)
            got = copy.load_working_context(["agent"], "s1")
            assert (got.state, got.save) == (big, 2)
            assert copy.load_working_context(["agent"], "s1", save=1).state == STATE
            assert len(copy.history(got.head)) == 2
            assert copy.list_working_contexts(["agent"]) == m.list_working_contexts(["agent"])


def test_working_contexts_survive_replay_and_are_forgettable(tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    with Store.open(tmp_path / "s", sync="none") as s:
        Memory(s, clock=clock).save_working_context(None, "s1", STATE)
    with Store.open(tmp_path / "s", sync="none") as s:
        m = Memory(s, clock=clock)
        assert m.load_working_context(None, "s1").state == STATE
        report = m.forget({"subject": working.SUBJECT_PREFIX + "s1"})
        assert report.removed
        with pytest.raises(NotFoundError, match="sessions: none"):
            m.load_working_context(None, "s1")


def test_async_memory_saves_loads_and_compiles(tmp_path: Path) -> None:
    import asyncio

    from holomem import AsyncMemory

    async def main() -> None:
        with Store.open(tmp_path / "s", sync="none") as store:
            m = AsyncMemory(store)
            await m.save_working_context(["a"], "s", STATE)
            assert (await m.load_working_context(["a"], "s")).state == STATE
            assert [s.session for s in (await m.list_working_contexts(["a"])).sessions] == ["s"]
            await m.remember("alice drinks tea")
            out = await m.compile_context("tea", 300, k=3)
            assert out.tokens <= 300 and out.decisions[0].decision == "kept"
            d = await m.explain_context("tea", 300, out.decisions[0].id)
            assert d == out.decisions[0]
            hits = await m.recall("tea", rerank=lambda q, c: [x.id for x in c])
            assert [h.text for h in hits] == ["alice drinks tea"]

    asyncio.run(main())
