"""entity_profile (docs/contract.md §4h): what is known about a name, by guarantee.

What the tests prove: a name's facts are those carrying it as an entity and those of a
subject under it (the key rule: case, spaces, underscores and hyphens aside), each once;
current facts come first, then history, each newest first; a superseded value shows as
history with its successor, and its subject's current value is the successor, since its
effective time; ``as_of`` answers as of that moment and ``known_at`` ignores what came
later; a namespace confines it; paging walks every fact exactly once, each page within
its limit, and a write between pages does not enter the walk; whatever is written,
superseded, forgotten or reopened between pages, each fact of the first page's walk
still stored comes exactly once, in that walk's order; an unknown name is an
empty profile; the speakers and sessions are the conversation turns'; links are shown
at most MAX_FACT_LINKS per fact; hostile input is a clear InvalidError; the JSON
contract answers camelCase.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import InvalidError, LimitError, ManualClock, Memory, Store
from holomem.api.memory.entities import profile
from holomem.projections.subjects import name_key


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Store.open(tmp_path / "s", sync="none") as store:
        yield Memory(store, {"supersession": "latest-by-subject"}, clock=ManualClock(10_000))


def alice(m: Memory) -> None:
    m.remember(id="paris", text="Alice lives in Paris", subject="alice/city",
               entities=["Alice", "Paris"], valid_from=1_000)
    m.remember(id="berlin", text="Alice moved to Berlin", subject="alice/city",
               entities=["Alice", "Berlin"], valid_from=5_000)
    m.remember(id="job", text="Works at Acme", subject="Alice/job", valid_from=3_000)
    m.remember(id="met", text="Bob met Alice", entities=["Bob", "Alice"], event_time=4_000)
    m.remember(id="bob", text="Bob lives in Rome", subject="bob/city", entities=["Bob"])


def ids(p: profile.EntityProfile) -> list[str]:
    return [f.id for f in p.facts]


def test_current_values_come_first_and_history_after(memory: Memory) -> None:
    alice(memory)
    p = memory.entity_profile("Alice")
    assert ids(p) == ["berlin", "met", "job", "paris"]
    assert [f.status for f in p.facts] == ["current"] * 3 + ["superseded"]
    assert p.total == 4 and p.key == "alice" and p.as_of == 10_000
    assert p.summary is not None and p.summary.current == 3


def test_a_superseded_value_shows_as_history_with_its_successor(memory: Memory) -> None:
    alice(memory)
    p = memory.entity_profile("Alice")
    old = p.facts[-1]
    assert (old.id, old.status, old.superseded_by) == ("paris", "superseded", ["berlin"])
    assert p.summary is not None
    city = next(s for s in p.summary.subjects if s.subject == "alice/city")
    assert [(v.id, v.text, v.since) for v in city.current] == [
        ("berlin", "Alice moved to Berlin", 5_000)]
    assert city.versions == 2


def test_subjects_under_the_name_match_by_key_whatever_the_case_and_separators(
        memory: Memory) -> None:
    alice(memory)
    memory.remember(id="ma", text="Mary Ann paints", subject="mary_ann/hobby")
    memory.remember(id="mb", text="Mary-Ann sings", subject="MARY ANN")
    assert [s.subject for s in memory.entity_profile("alice").summary.subjects] == [  # type: ignore[union-attr]
        "Alice/job", "alice/city"]
    assert set(ids(memory.entity_profile("Mary  Ann"))) == {"ma", "mb"}
    assert name_key(" Mary -_ Ann ") == "mary_ann"
    # Entities compare as spelled: "alice" reaches the subjects, not the entity "Alice".
    assert "met" not in ids(memory.entity_profile("alice"))
    assert "bob" not in ids(memory.entity_profile("Alice"))


def test_as_of_answers_as_of_that_moment(memory: Memory) -> None:
    alice(memory)
    p = memory.entity_profile("Alice", as_of=2_000)
    assert p.as_of == 2_000
    assert [(f.id, f.status) for f in p.facts] == [
        ("paris", "current"), ("berlin", "not-yet-valid"), ("met", "not-yet-valid"),
        ("job", "not-yet-valid")]
    assert p.summary is not None
    city = next(s for s in p.summary.subjects if s.subject == "alice/city")
    assert [v.id for v in city.current] == ["paris"]
    job = next(s for s in p.summary.subjects if s.subject == "Alice/job")
    assert job.current == []
    assert memory.entity_profile("Alice", as_of="1970-01-01T00:00:04.500Z").summary \
        .current == 3  # type: ignore[union-attr]


def test_known_at_ignores_what_was_ingested_later(memory: Memory) -> None:
    alice(memory)
    memory.clock.advance(1_000)  # type: ignore[attr-defined]
    memory.remember(id="oslo", text="Alice moved to Oslo", subject="alice/city",
                    valid_from=6_000)
    assert ids(memory.entity_profile("Alice"))[0] == "oslo"
    before = memory.entity_profile("Alice", known_at=10_000)
    assert "oslo" not in ids(before) and before.facts[0].id == "berlin"
    assert before.facts[0].status == "current" and before.known_at == 10_000


def test_a_namespace_confines_the_profile(memory: Memory) -> None:
    memory.remember(id="u1", text="Alice likes tea", subject="alice/drink",
                    namespace="users/u1", entities=["Alice"])
    memory.remember(id="u2", text="Alice likes coffee", subject="alice/drink",
                    namespace="users/u2", entities=["Alice"])
    memory.remember(id="top", text="Alice is a name", entities=["Alice"])
    assert set(ids(memory.entity_profile("Alice"))) == {"u1", "u2", "top"}
    p = memory.entity_profile("Alice", namespace="users/u1")
    assert ids(p) == ["u1"] and p.total == 1
    assert p.summary is not None
    assert [(s.subject, s.namespace) for s in p.summary.subjects] == [
        ("alice/drink", ["users", "u1"])]
    assert ids(memory.entity_profile("Alice", namespace=["users"])) != []
    assert memory.entity_profile("Alice", namespace="users/u3").total == 0


def test_paging_walks_every_fact_exactly_once_within_the_limit(memory: Memory) -> None:
    rnd = random.Random(30)
    print("seed 30")
    batch = []
    for i in range(57):
        batch.append({"id": f"f{i}", "text": f"Alice fact {i}", "entities": ["Alice"],
                      "subject": f"alice/s{i % 7}" if i % 2 else None,
                      "valid_from": rnd.randrange(0, 9_000)})
    memory.remember_many(batch)
    whole = memory.entity_profile("Alice", limit=profile.MAX_LIMIT)
    assert whole.next_cursor is None and whole.total == 57
    seen, cursor, pages = [], None, 0
    while True:
        p = memory.entity_profile("Alice", limit=8, cursor=cursor)
        assert len(p.facts) <= 8 and p.total == 57
        assert (p.summary is not None) == (cursor is None)
        seen += ids(p)
        pages += 1
        if pages == 2:  # a write between pages does not enter the walk
            memory.remember(id="late", text="Alice again", entities=["Alice"])
        cursor = p.next_cursor
        if cursor is None:
            break
    assert seen == ids(whole) and len(set(seen)) == 57 and pages == 8
    statuses = [f.status for f in whole.facts]
    assert statuses == sorted(statuses, key=lambda s: s != "current")
    assert "late" in ids(memory.entity_profile("Alice", limit=100))


def test_an_unknown_name_is_an_empty_profile(memory: Memory) -> None:
    alice(memory)
    p = memory.entity_profile("Zed")
    assert (p.total, p.facts, p.links, p.next_cursor) == (0, [], [], None)
    assert p.summary is not None
    assert (p.summary.subjects, p.summary.speakers, p.summary.sessions) == ([], [], [])


def test_speakers_and_sessions_are_the_conversation_turns(tmp_path: Path) -> None:
    with Store.open(tmp_path / "c", sync="none") as store:
        m = Memory(store, {"entityExtractor": "regex"}, clock=ManualClock(10_000))
        m.remember_conversation([
            {"speaker": "Bob", "text": "Have you seen Alice lately?"},
            {"speaker": "Alice", "text": "I moved to Berlin"},
            {"speaker": "Carol", "text": "Alice told me so"}], session="s1")
        m.remember_conversation([{"speaker": "Alice", "text": "Hello"}], session="s2")
        p = m.entity_profile("Alice")
        assert p.summary is not None
        assert {f.text for f in p.facts} == {"Have you seen Alice lately?",
                                             "Alice told me so"}
        assert [(s.speaker, s.facts) for s in p.summary.speakers] == [("Bob", 1), ("Carol", 1)]
        assert [(s.session, s.mentions, s.said, s.first, s.last)
                for s in p.summary.sessions] == [("s1", 2, 1, 0, 2), ("s2", 0, 1, 0, 0)]
        # The turns' reply links, both ways: the answer to the first mention, and the
        # second mention's to the turn it answers.
        on_page = {f.id for f in p.facts}
        assert len(p.links) == 2 and {k.relation for k in p.links} == {"replies_to"}
        assert all(k.from_id in on_page or k.to_id in on_page for k in p.links)


def test_one_session_name_in_two_namespaces_is_two_sessions(tmp_path: Path) -> None:
    with Store.open(tmp_path / "c", sync="none") as store:
        m = Memory(store, {"entityExtractor": "regex"}, clock=ManualClock(10_000))
        m.remember_conversation([{"speaker": "Bob", "text": "Alice called"},
                                 {"speaker": "Alice", "text": "Yes I did"}],
                                session="monday", namespace="users/bob")
        m.remember_conversation([{"speaker": "Carol", "text": "Nothing new"},
                                 {"speaker": "Dan", "text": "Nor here"},
                                 {"speaker": "Carol", "text": "Alice wrote to me"}],
                                session="monday", namespace="users/carol")
        sessions = m.entity_profile("Alice").summary.sessions  # type: ignore[union-attr]
        assert [(s.session, s.namespace, s.mentions, s.said, s.first, s.last)
                for s in sessions] == [("monday", ["users", "bob"], 1, 1, 0, 1),
                                       ("monday", ["users", "carol"], 1, 0, 2, 2)]
        only = m.entity_profile("Alice", namespace="users/carol").summary
        assert only is not None and [(s.namespace, s.first) for s in only.sessions] == [
            (["users", "carol"], 2)]


def test_a_page_shows_at_most_max_fact_links_per_fact(memory: Memory) -> None:
    memory.remember(id="hub", text="Alice hub", entities=["Alice"])
    memory.remember_many([{"id": f"n{i}", "text": f"note {i}"} for i in range(20)])
    memory.relate_many([{"from_id": "hub", "to_id": f"n{i}", "relation": "has"}
                        for i in range(20)])
    p = memory.entity_profile("Alice")
    assert len(p.links) == profile.MAX_FACT_LINKS and p.links_cut
    assert [k.to_id for k in p.links] == [f"n{i}" for i in range(profile.MAX_FACT_LINKS)]
    assert memory.entity_profile("Alice", as_of=9_999).links == []  # made after as_of


def test_hostile_input_is_a_clear_invalid_error(memory: Memory) -> None:
    alice(memory)
    with pytest.raises(LimitError):
        memory.entity_profile("A" * 10_000)
    for bad in ("", None, 3, ["Alice"], " - _ "):
        with pytest.raises(InvalidError):
            memory.entity_profile(bad)  # type: ignore[arg-type]
    for limit in (0, profile.MAX_LIMIT + 1, True, "5"):
        with pytest.raises(InvalidError, match="limit"):
            memory.entity_profile("Alice", limit=limit)  # type: ignore[arg-type]
    for cursor in ("garbage", "e30=", "x" * 2_000, 7):
        with pytest.raises(InvalidError):
            memory.entity_profile("Alice", cursor=cursor)  # type: ignore[arg-type]
    first = memory.entity_profile("Alice", limit=1)
    assert first.next_cursor is not None
    for other in ({"name": "Bob"}, {"name": "Alice", "as_of": 2_000},
                  {"name": "Alice", "namespace": "users"}):
        with pytest.raises(InvalidError, match="another profile"):
            memory.entity_profile(**other, limit=1, cursor=first.next_cursor)  # type: ignore[arg-type]
    with pytest.raises(InvalidError, match="as_of"):
        memory.entity_profile("Alice", as_of="yesterday-ish")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(request=st.dictionaries(
    st.sampled_from(["name", "asOf", "knownAt", "namespace", "limit", "cursor", "other"]),
    st.none() | st.booleans() | st.integers() | st.text(max_size=40)
    | st.lists(st.text(max_size=5), max_size=3), max_size=6))
def test_any_request_gives_a_profile_or_a_contract_error(memory: Memory,
                                                         request: dict[str, object]) -> None:
    try:
        answer = memory.call("entityProfile", request)
    except InvalidError:
        return
    assert set(answer) >= {"name", "key", "facts", "links", "nextCursor", "summary"}


def test_the_contract_answers_camel_case(memory: Memory) -> None:
    alice(memory)
    answer = memory.call("entityProfile", {"name": "Alice", "asOf": 2_000, "limit": 1})
    assert answer["asOf"] == 2_000 and answer["nextCursor"] and answer["linksCut"] is False
    assert answer["facts"][0]["id"] == "paris"
    assert set(answer["summary"]) == {"current", "subjects", "speakers", "sessions",
                                      "subjectsTotal", "speakersTotal", "sessionsTotal"}
    more = memory.call("entityProfile", {"name": "Alice", "asOf": 2_000, "limit": 1,
                                         "cursor": answer["nextCursor"]})
    assert more["summary"] is None and more["facts"][0]["id"] == "berlin"


def _walk(m: Memory, first: profile.EntityProfile, limit: int) -> list[str]:
    seen, cursor = ids(first), first.next_cursor
    while cursor is not None:
        p = m.entity_profile(first.name, limit=limit, cursor=cursor)
        seen += ids(p)
        cursor = p.next_cursor
    return seen


def test_a_fact_superseded_between_pages_comes_once(memory: Memory) -> None:
    clock = memory.clock
    assert isinstance(clock, ManualClock)
    clock.set(20_001)
    memory.remember("alice city paris", id="A", subject="alice/city")
    clock.set(20_002)
    memory.remember("alice job nurse", id="B", subject="alice/job")
    clock.set(20_003)
    memory.remember("alice pet cat", id="C", subject="alice/pet")
    first = memory.entity_profile("alice", limit=2)
    assert ids(first) == ["C", "B"]
    clock.set(20_004)  # supersedes B from before the first page's evaluation time
    memory.remember("alice job doctor", id="B2", subject="alice/job", valid_from=20_002)
    assert _walk(memory, first, 2) == ["C", "B", "A"]


def test_a_fact_current_again_after_a_forget_between_pages_comes_once(
        memory: Memory) -> None:
    memory.remember("alice pet cat", id="X", subject="alice/pet", valid_from=100)
    memory.remember("alice city rome", id="P", subject="alice/city", valid_from=200)
    memory.remember("alice city paris", id="S", subject="alice/city", valid_from=300)
    first = memory.entity_profile("alice", limit=2)
    assert ids(first) == ["S", "X"]
    memory.forget({"ids": ["S"]})  # P is current again
    rest = _walk(memory, first, 2)[2:]
    assert rest == ["P"]
    assert memory.entity_profile("alice", limit=2, cursor=first.next_cursor
                                 ).facts[0].status == "current"  # its status now


_STEP = st.one_of(
    st.tuples(st.just("remember"), st.integers(0, 3), st.integers(0, 9_000)),
    st.tuples(st.just("forget"), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("reopen"), st.just(0), st.just(0)))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(first=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 9_000)), min_size=1,
                      max_size=12),
       limit=st.integers(1, 4),
       between=st.lists(st.lists(_STEP, max_size=3), max_size=6))
def test_paging_returns_each_fact_of_the_first_page_still_stored_exactly_once(
        tmp_path_factory: pytest.TempPathFactory, first: list[tuple[int, int]], limit: int,
        between: list[list[tuple[str, int, int]]]) -> None:
    """Whatever is remembered (superseding, with a time before the walk's), forgotten
    (with or without its chain) or reopened from a checkpoint between pages, the pages
    give the first page's walk, in its order, less the facts forgotten before their
    page."""
    path = tmp_path_factory.mktemp("walk") / "s"
    clock = ManualClock(10_000)
    store = Store.open(path, sync="none")
    m = Memory(store, {"supersession": "latest-by-subject"}, clock=clock)
    made = 0

    def write(subject: int, valid_from: int) -> None:
        nonlocal made
        clock.set(clock.now_ms() + 1)
        m.remember(f"Alice fact {made}", id=f"f{made}", valid_from=valid_from,
                   subject=f"alice/s{subject}" if subject < 3 else None,
                   entities=["Alice"] if subject == 3 else [])
        made += 1

    try:
        for subject, valid_from in first:
            write(subject, valid_from)
        whole = m.entity_profile("Alice", limit=profile.MAX_LIMIT)
        page = m.entity_profile("Alice", limit=limit)
        seen, cursor, gone = ids(page), page.next_cursor, set()
        steps = iter(between)
        while cursor is not None:
            for op, a, b in next(steps, []):
                if op == "remember":
                    write(a, b)
                elif op == "forget" and made:
                    victim = f"f{a % made}"
                    report = m.forget({"ids": [victim]}, include_chain=b)
                    gone.update(report.removed)
                else:
                    store.checkpoint()
                    store.close()
                    store = Store.open(path, sync="none")
                    m = Memory(store, {"supersession": "latest-by-subject"}, clock=clock)
            page = m.entity_profile("Alice", limit=limit, cursor=cursor)
            seen += ids(page)
            cursor = page.next_cursor
        # In the first page's order, each once; every one never forgotten among them
        # (one forgotten after its page was given is too).
        assert seen == [i for i in ids(whole) if i in set(seen)]
        assert [i for i in ids(whole) if i not in gone] == [i for i in seen if i not in gone]
    finally:
        store.close()
