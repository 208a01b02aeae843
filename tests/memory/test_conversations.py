"""Conversations (docs/contract.md §4g): remember_conversation's guarantees, each a test.

A conversation goes in as its turns — the words alone, speaker, session and position
as fields of the fact — in one transaction with the links from each turn to the turn
it answers; a retried call stores nothing twice; a bad message anywhere writes
nothing; the turn fields are filterable and shown wherever a fact is; and they
survive a reopen, a checkpoint and a compaction.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import AsyncMemory, ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.conversation import calls as conversation
from holomem.api.memory.conversation.links import REPLY_WINDOW
from holomem.errors import ConflictError, HolomemError, InvalidError, LimitError

CHAT = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "How often do you work out together?"},
    {"role": "assistant", "content": "Three times a week."},
    {"role": "assistant", "content": "Mostly running, sometimes swimming."},
    {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
    {"role": "tool", "tool_call_id": "c1", "content": "calendar: gym on Monday"},
    {"role": "user", "name": "joanna", "content": [
        {"type": "text", "text": "Nice!"}, {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "See you Monday."}]},
]


def texts(memory: Memory, ids: list[str]) -> list[str]:
    return [memory.get(i).text for i in ids]  # type: ignore[union-attr]


def reply_of(memory: Memory, fid: str) -> str | None:
    out = [x.to_id for x in memory.links(fid, relation="replies_to", direction="out").links]
    assert len(out) <= 1
    return out[0] if out else None


def test_openai_style_messages_work_unchanged(memory: Memory) -> None:
    done = memory.remember_conversation(CHAT, session="s1")
    assert done.skipped == [4]  # the tool call holds no words: its position is kept
    ids = [t.id for t in done.turns]
    assert texts(memory, ids) == [
        "You are a helpful assistant.", "How often do you work out together?",
        "Three times a week.", "Mostly running, sometimes swimming.",
        "calendar: gym on Monday", "Nice!\nSee you Monday."]  # the words alone
    facts = [memory.get(i) for i in ids]
    assert [(f.speaker, f.session, f.position) for f in facts] == [  # type: ignore[union-attr]
        ("system", "s1", 0), ("user", "s1", 1), ("assistant", "s1", 2),
        ("assistant", "s1", 3), ("tool", "s1", 5), ("joanna", "s1", 6)]


def test_the_speaker_is_speaker_then_name_then_role(memory: Memory) -> None:
    done = memory.remember_conversation([
        {"speaker": "Caroline", "name": "c", "role": "user", "text": "one"},
        {"name": "nate", "role": "user", "text": "two"},
        {"role": "assistant", "text": "three"}], session="s")
    assert [memory.get(t.id).speaker for t in done.turns] == [  # type: ignore[union-attr]
        "Caroline", "nate", "assistant"]


def test_a_retried_call_stores_nothing_twice(memory: Memory) -> None:
    first = memory.remember_conversation(CHAT, session="s1", time=5_000)
    revision = memory.store.revision
    again = memory.remember_conversation(CHAT, session="s1", time=5_000)
    assert [t.created for t in first.turns] == [True] * 6
    assert [t.created for t in again.turns] == [False] * 6
    assert [t.id for t in again.turns] == [t.id for t in first.turns]
    assert again.linked == 0 and first.linked > 0
    assert memory.store.revision == revision  # not even an empty transaction


def test_one_call_is_one_transaction_a_bad_message_in_the_middle_writes_nothing(
        memory: Memory) -> None:
    revision = memory.store.revision
    bad = [*CHAT[:3], {"role": "user"}, *CHAT[3:]]  # no words at all is a skip, but:
    bad[3] = {"role": "user", "content": 42}
    with pytest.raises(InvalidError, match="message 3"):
        memory.remember_conversation(bad, session="s1")
    with pytest.raises(InvalidError, match="message 2"):
        memory.remember_conversation([*CHAT[:2], {"text": "nobody said this"}], session="s")
    with pytest.raises(LimitError, match="message 1: text"):
        memory.remember_conversation([CHAT[1], {"role": "user", "text": "x" * 70_000}],
                                     session="s")
    assert memory.store.revision == revision
    assert memory.list().facts == []


def test_a_stored_position_with_other_words_is_a_conflict_and_writes_nothing(
        memory: Memory) -> None:
    memory.remember_conversation(CHAT[:3], session="s1")
    revision = memory.store.revision
    changed = [*CHAT[:2], {"role": "assistant", "content": "Every day."}, CHAT[6]]
    with pytest.raises(ConflictError):
        memory.remember_conversation(changed, session="s1")
    assert memory.store.revision == revision


def test_a_turn_id_given_by_the_caller_wins(memory: Memory) -> None:
    done = memory.remember_conversation([{"id": "q", "role": "user", "text": "why?"},
                                         {"role": "assistant", "text": "because"}],
                                        session="s")
    assert done.turns[0].id == "q" and done.turns[1].id.startswith("t-")
    assert reply_of(memory, done.turns[1].id) == "q"


def test_each_turn_links_to_the_last_turn_by_another_speaker(memory: Memory) -> None:
    done = memory.remember_conversation(CHAT, session="s1")
    ids = [t.id for t in done.turns]
    system, question, answer, more, tool, thanks = ids
    assert reply_of(memory, system) is None  # the first turn answers nothing
    assert reply_of(memory, question) == system
    assert reply_of(memory, answer) == question
    assert reply_of(memory, more) == question  # a second message by the same speaker
    assert reply_of(memory, tool) == more
    assert reply_of(memory, thanks) == tool
    assert done.linked == 5


def test_a_long_run_by_one_speaker_answers_nothing_past_the_window(memory: Memory) -> None:
    run = [{"role": "user", "text": "q"}] + [
        {"role": "assistant", "text": f"part {i}"} for i in range(REPLY_WINDOW + 2)]
    ids = [t.id for t in memory.remember_conversation(run, session="s").turns]
    assert [reply_of(memory, i) for i in ids[1:REPLY_WINDOW + 1]] == [ids[0]] * REPLY_WINDOW
    assert reply_of(memory, ids[REPLY_WINDOW + 1]) is None


def test_later_messages_sent_with_start_answer_the_stored_turns(memory: Memory) -> None:
    first = memory.remember_conversation(CHAT[1:3], session="s")
    later = memory.remember_conversation([{"role": "assistant", "text": "And you?"},
                                          {"role": "user", "text": "Twice."}],
                                         session="s", start=2)
    assert reply_of(memory, later.turns[0].id) == first.turns[0].id  # across calls
    assert reply_of(memory, later.turns[1].id) == later.turns[0].id
    # The whole conversation sent again: the four stored turns, nothing new.
    whole = memory.remember_conversation([*CHAT[1:3], {"role": "assistant", "text": "And you?"},
                                          {"role": "user", "text": "Twice."}], session="s")
    assert [t.created for t in whole.turns] == [False] * 4 and whole.linked == 0


def test_sessions_and_namespaces_keep_their_turns_apart(memory: Memory) -> None:
    a = memory.remember_conversation(CHAT[1:3], session="s")
    b = memory.remember_conversation(CHAT[1:3], session="s", namespace="users/u1")
    c = memory.remember_conversation(CHAT[1:3], session="t")
    assert len({t.id for r in (a, b, c) for t in r.turns}) == 6
    later = memory.remember_conversation([{"role": "user", "text": "ok"}], session="s",
                                         namespace="users/u1", start=2)
    assert reply_of(memory, later.turns[0].id) == b.turns[1].id


def test_a_session_name_shared_by_many_namespaces_still_links_each_answer_to_its_question(
        memory: Memory) -> None:
    # One namespace per user, each with a session "s1": the commonest layout. The turn a
    # later call answers is found in its own namespace however many others share the
    # session's name (the stored turns once looked at were the 32 nearest of them all).
    from holomem.api.memory.conversation import links

    asked = [memory.remember_conversation([{"role": "user", "text": f"question {i}"}],
                                          session="s1", namespace=["users", f"u{i}"])
             for i in range(60)]
    for i, question in enumerate(asked):
        answer = memory.remember_conversation([{"role": "assistant", "text": f"answer {i}"}],
                                              session="s1", namespace=["users", f"u{i}"],
                                              start=1)
        assert reply_of(memory, answer.turns[0].id) == question.turns[0].id, i
        # The rule read back over stored turns (recall's inferred replies) agrees.
        fid = answer.turns[0].id
        assert memory.store.read(partial(links.answered, fid=fid)) == question.turns[0].id


def test_a_sessions_turns_are_filed_under_its_namespace_through_checkpoints_and_compaction(
        tmp_path: Path) -> None:
    # Finding the turn an answer replies to reads its own session's turns only, however
    # many namespaces use the same session name: a session is filed under (name,
    # namespace), and stays so after a checkpoint is restored and after a compaction.
    def filed(store: Store, user: int) -> list[str]:
        return store.read(lambda view: view.facts.turns.between(
            "s1", ("users", f"u{user}"), 0, REPLY_WINDOW))

    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(10_000))
        made = [memory.remember_conversation(
            [{"role": "user", "text": f"question {i}"},
             {"role": "assistant", "text": f"answer {i}"}],
            session="s1", namespace=["users", f"u{i}"]) for i in range(40)]
        own = {i: [t.id for t in reversed(m.turns)] for i, m in enumerate(made)}
        assert all(filed(store, i) == own[i] for i in range(40))
        memory.forget({"ids": [own[3][0]]})  # a removed turn leaves its session
        own[3] = own[3][1:]
        assert filed(store, 3) == own[3]
        store.checkpoint()
    with Store.open(tmp_path / "s", sync="none") as store:
        assert all(filed(store, i) == own[i] for i in range(40))
        store.compact()
        assert all(filed(store, i) == own[i] for i in range(40))
        memory = Memory(store, clock=ManualClock(20_000))
        later = memory.remember_conversation([{"role": "user", "text": "and then?"}],
                                             session="s1", namespace="users/u5", start=2)
        assert reply_of(memory, later.turns[0].id) == own[5][0]  # u5's answer
        # The session filter still finds the name in every namespace.
        assert {r.id for r in memory.list(filter={"session": "s1"}, limit=200).facts} == {
            i for k in range(40) for i in own[k]} | {later.turns[0].id}


def test_a_speaker_is_filed_under_its_namespaces_through_forget_checkpoints_and_compaction(
        tmp_path: Path) -> None:
    # What recall's dialogue signals ask (§4g: a question names only the speakers of
    # turns it can see): the namespaces a speaker spoke in, kept as turns are removed,
    # and after a checkpoint is restored and after a compaction.
    def under(store: Store, speaker: str, prefix: tuple[str, ...]) -> tuple[bool, list[str]]:
        return store.read(lambda view: (
            view.facts.turns.speaks_under(speaker, prefix),
            list(view.facts.turns.speaker_facts_under(speaker, prefix))))

    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(10_000))
        a = [t.id for t in memory.remember_conversation(
            [{"speaker": "zoe", "text": "one"}, {"speaker": "zoe", "text": "two"}],
            session="s", namespace=["a"]).turns]
        b = memory.remember_conversation([{"speaker": "zoe", "text": "three"}],
                                         session="s", namespace=["b", "c"]).turns[0].id
        assert under(store, "zoe", ()) == (True, [*a, b])
        assert under(store, "zoe", ("b",)) == (True, [b])
        assert under(store, "zoe", ("a", "x")) == (False, [])
        assert under(store, "ann", ()) == (False, [])
        memory.forget({"ids": [a[0]]})
        assert under(store, "zoe", ("a",)) == (True, [a[1]])
        memory.forget({"ids": [a[1]]})
        assert under(store, "zoe", ("a",)) == (False, [])
        store.checkpoint()
    with Store.open(tmp_path / "s", sync="none") as store:
        assert under(store, "zoe", ("a",)) == (False, [])
        assert under(store, "zoe", ("b",)) == (True, [b])
        store.compact()
        assert under(store, "zoe", ()) == (True, [b])
        assert under(store, "zoe", ("a",)) == (False, [])


def test_the_event_time_is_the_messages_else_the_calls_else_none(memory: Memory) -> None:
    done = memory.remember_conversation([
        {"role": "user", "text": "a", "time": 1_000},
        {"role": "assistant", "text": "b", "time": "1970-01-01T00:00:02Z"},
        {"role": "user", "text": "c"}], session="s", time=3_000)
    assert [memory.get(t.id).event_time for t in done.turns] == [  # type: ignore[union-attr]
        1_000, 2_000, 3_000]
    none = memory.remember_conversation([{"role": "user", "text": "d"}], session="u")
    assert memory.get(none.turns[0].id).event_time is None  # type: ignore[union-attr]


def test_speaker_session_and_position_are_filterable(memory: Memory) -> None:
    memory.remember_conversation(CHAT, session="s1")
    memory.remember_conversation([{"role": "user", "text": "running shoes"}], session="s2")
    memory.remember(text="running is good for you")  # not a turn

    def found(flt: dict[str, Any]) -> list[str]:
        return sorted(r.text for r in memory.recall("running", {"filter": flt}))

    assert found({"speaker": "assistant"}) == ["Mostly running, sometimes swimming."]
    assert found({"session": "s2"}) == ["running shoes"]
    assert found({"session": {"$in": ["s1", "s2"]}, "position": {"$gte": 1}}) == [
        "Mostly running, sometimes swimming."]  # "running shoes" is at position 0
    assert found({"speaker": {"$exists": False}}) == ["running is good for you"]
    assert found({"speaker": {"$ne": "assistant"}}) == ["running is good for you",
                                                        "running shoes"]
    assert found({"$not": {"position": {"$lt": 3}}}) == [
        "Mostly running, sometimes swimming.", "running is good for you"]
    listed = memory.list(None, 100, {"session": "s1", "speaker": "user"}).facts
    assert [f.text for f in listed] == ["How often do you work out together?"]


@pytest.mark.parametrize("flt", [{"speaker": 3}, {"session": {"$gt": "a"}},
                                 {"position": "3"}, {"position": {"$in": [1, True]}},
                                 {"speaker": {"name": "x"}}])
def test_a_bad_turn_clause_is_refused(memory: Memory, flt: dict[str, Any]) -> None:
    with pytest.raises(InvalidError):
        memory.recall("x", {"filter": flt})


def test_explain_get_history_list_and_export_show_the_turn(memory: Memory) -> None:
    done = memory.remember_conversation(CHAT[1:3], session="s1", namespace="agents/a")
    fid = done.turns[1].id
    e = memory.explain("three times", fid, {"namespace": "agents/a"})
    assert (e.speaker, e.session, e.position) == ("assistant", "s1", 1)
    record = memory.get(fid)
    assert record is not None and (record.speaker, record.session, record.position) == (
        "assistant", "s1", 1)
    assert memory.history(fid) == [record]
    (line,) = [x for x in memory.export() if x["id"] == fid]
    assert (line["speaker"], line["session"], line["position"]) == ("assistant", "s1", 1)
    response = memory.call("get", {"id": fid})["fact"]
    assert (response["speaker"], response["session"], response["position"]) == (
        "assistant", "s1", 1)


def test_an_export_brings_the_turns_back_exactly(memory: Memory, tmp_path: Path) -> None:
    done = memory.remember_conversation(CHAT, session="s1")
    other = Store.open(tmp_path / "copy", sync="none")
    try:
        copy = Memory(other)
        copy.import_(memory.export())
        for t in done.turns:
            assert copy.get(t.id) == memory.get(t.id)
        again = copy.remember_conversation(CHAT, session="s1")  # the same ids, digests
        assert [t.created for t in again.turns] == [False] * 6
    finally:
        other.close()


def test_the_turns_survive_a_reopen_a_checkpoint_and_a_compaction(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = Store.open(path, sync="none")
    memory = Memory(store, clock=ManualClock(1_000))
    done = memory.remember_conversation(CHAT, session="s1")
    memory.forget({"ids": [done.turns[0].id]})
    expected = [memory.get(t.id) for t in done.turns[1:]]
    store.close()
    for step in ("replay", "checkpoint", "compaction"):
        store = Store.open(path, sync="none")
        memory = Memory(store, clock=ManualClock(1_000))
        assert [memory.get(t.id) for t in done.turns[1:]] == expected, step
        assert [r.text for r in memory.recall("week", {"filter": {"speaker": "assistant"}})] \
            == ["Three times a week."], step
        if step == "replay":
            assert store.checkpoint() is not None
        elif step == "checkpoint":
            store.compact()
        store.close()


def test_the_extractor_adds_facts_linked_to_their_turns_in_the_same_transaction(
        memory: Memory) -> None:
    seen: list[Any] = []

    def extractor(turns: list[Any]) -> list[Any]:
        seen.extend(turns)
        return [{"text": "They work out three times a week", "subject": "workout/how-often",
                 "sources": [turns[1].id, turns[2].id]},
                {"text": "A conversation about working out"}]

    revision = memory.store.revision
    done = memory.remember_conversation(CHAT[1:4], session="s", extractor=extractor)
    assert memory.store.revision == revision + 1  # one transaction
    assert [(t.speaker, t.position) for t in seen] == [
        ("user", 0), ("assistant", 1), ("assistant", 2)]
    fact, summary = (d.id for d in done.derived)
    derived = {(x.from_id, x.to_id) for x in memory.links(fact, relation="derived_from").links}
    assert derived == {(fact, done.turns[1].id), (fact, done.turns[2].id)}
    assert len(memory.links(summary, relation="derived_from").links) == 3  # all of them
    assert memory.get(fact).subject == "workout/how-often"  # type: ignore[union-attr]
    again = memory.remember_conversation(CHAT[1:4], session="s", extractor=extractor)
    assert [d.created for d in again.derived] == [False, False] and again.linked == 0


@pytest.mark.parametrize("extractor, error", [
    (lambda turns: [{"text": "x", "sources": ["nope"]}], InvalidError),
    (lambda turns: [{"text": "x", "namespace": "elsewhere"}], InvalidError),
    (lambda turns: [{"text": "x", "session": "s", "position": 9}], InvalidError),
    (lambda turns: [{"txt": "x"}], InvalidError),
    (lambda turns: 1 / 0, InvalidError),
    (lambda turns: ({"text": f"f{i}"} for i in range(conversation.MAX_FACTS)), LimitError),
])
def test_a_bad_extractor_answer_writes_nothing(memory: Memory, extractor: Any,
                                               error: type[Exception]) -> None:
    revision = memory.store.revision
    with pytest.raises(error):
        memory.remember_conversation(CHAT[1:3], session="s", extractor=extractor)
    assert memory.store.revision == revision


def test_async_memory_remembers_a_conversation(store: Store) -> None:
    async def run() -> list[bool]:
        memory = AsyncMemory(store)
        done = await memory.remember_conversation(CHAT[1:3], session="s")
        return [t.created for t in done.turns]

    assert asyncio.run(run()) == [True, True]


@pytest.mark.parametrize("call, error", [
    (dict(messages="hello", session="s"), InvalidError),
    (dict(messages={"role": "user"}, session="s"), InvalidError),
    (dict(messages=[], session="s"), InvalidError),
    (dict(messages=[{"role": "user", "text": "a"}], session=""), InvalidError),
    (dict(messages=[{"role": "user", "text": "a"}], session="s" * 600), LimitError),
    (dict(messages=[{"role": "user", "text": "a"}], session="s", start=-1), InvalidError),
    (dict(messages=[{"role": "user", "text": "a", "colour": 1}], session="s"), InvalidError),
    (dict(messages=[{"role": "user", "text": "a", "content": "b"}], session="s"),
     InvalidError),
    (dict(messages=[{"role": "user", "content": [{"type": "text"}]}], session="s"),
     InvalidError),
    (dict(messages=[{"role": "user", "content": ["a"]}], session="s"), InvalidError),
    (dict(messages=[{"role": "user", "content": [{"type": "text", "text": "a"}] * 2000}],
          session="s"), LimitError),
    (dict(messages=[{"role": "user", "text": "a"}] * (conversation.MAX_MESSAGES + 1),
          session="s"), LimitError),
    (dict(messages=[{"role": "user", "text": "a"}], session="s", extractor=3), InvalidError),
])
def test_hostile_calls_are_refused_clearly(memory: Memory, call: dict[str, Any],
                                           error: type[Exception]) -> None:
    revision = memory.store.revision
    with pytest.raises(error):
        memory.remember_conversation(**call)
    assert memory.store.revision == revision


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)
_MESSAGE = st.dictionaries(
    st.sampled_from(["speaker", "role", "name", "text", "content", "time", "id", "x"]),
    _JSON, max_size=5)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                    HealthCheck.function_scoped_fixture])
@given(messages=st.lists(_MESSAGE, min_size=1, max_size=6), session=_JSON)
def test_any_input_is_stored_whole_or_refused_with_a_caller_error(
        tmp_path_factory: pytest.TempPathFactory, messages: list[Any], session: Any) -> None:
    path = tmp_path_factory.mktemp("h") / "store"
    store = Store.open(path, sync="none")
    try:
        memory = Memory(store, MemoryConfig(), clock=ManualClock(1_000))
        revision = store.revision
        try:
            done = memory.remember_conversation(messages, session=session)
        except HolomemError as exc:
            assert exc.code in ("invalid_request", "limit", "conflict")
            assert store.revision == revision  # nothing written
            return
        stored = [t.id for t in done.turns]
        assert len(stored) + len(done.skipped) == len(messages)
        assert all(memory.get(i) is not None for i in stored)
    finally:
        store.close()
