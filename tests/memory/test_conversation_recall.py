"""Conversation-aware recall (docs/contract.md §4g): each guarantee of the dialogue
signals a test — the reply shares, one way and the other, the speaker field, the date
prior, what explain shows, and that a store ranks as before without them.
"""

from __future__ import annotations

import datetime as dt
import random
import tempfile
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory import dates
from holomem.api.memory.config import (
    DialogueConfig,
    FusionConfig,
    Replies,
    config_from_json,
    config_to_json,
)
from holomem.api.memory.recall import dialogue
from holomem.errors import InvalidError


def ms(y: int, m: int, d: int) -> int:
    return int(dt.datetime(y, m, d, tzinfo=dt.UTC).timestamp() * 1000)


def day(w: tuple[int, int]) -> tuple[str, str]:
    return tuple(dt.datetime.fromtimestamp(x / 1000, dt.UTC).date().isoformat()  # type: ignore[return-value]
                 for x in w)


NOW = ms(2023, 11, 20)
WORKOUT = [
    {"speaker": "Joanna", "text": "How often do you work out together with Nate?"},
    {"speaker": "Nate", "text": "Three times a week."},
    {"speaker": "Joanna", "text": "I paint landscapes on weekends."},
    {"speaker": "Nate", "text": "My turtles sleep a lot."},
]


def memory_with(store: Store, dialogue: DialogueConfig | None, **config: Any) -> Memory:
    cfg = MemoryConfig(dialogue=dialogue if dialogue is not None else "none", **config)
    return Memory(store, cfg, clock=ManualClock(NOW), persist=True)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    with Store.open(tmp_path / "s", sync="none") as s:
        Memory(s, clock=ManualClock(NOW)).remember_conversation(WORKOUT, session="gym",
                                                                time=ms(2023, 5, 8))
        yield s


def ids(memory: Memory, query: str, **kw: Any) -> list[str]:
    return [r.text for r in memory.recall(query, **kw)]


def test_an_answer_borrows_from_the_turn_it_answers(store: Store) -> None:
    q = "how often do you work out together"
    assert "Three times a week." not in ids(memory_with(store, None), q)
    m = memory_with(store, DialogueConfig(replies=Replies(answer=0.5)))
    got = m.recall(q)
    assert [r.text for r in got[:2]] == [WORKOUT[0]["text"], "Three times a week."]
    asked, answer = got[0], got[1]
    assert answer.score == pytest.approx(0.5 * asked.score)
    why = m.explain(q, answer.id)
    assert why.dialogue is not None
    assert why.dialogue.reply_bonus == pytest.approx(0.5 * asked.score)
    assert why.score == pytest.approx(answer.score)


def test_a_turn_borrows_from_its_best_answer_with_its_own_weight(store: Store) -> None:
    q = "three times a week"
    plain = memory_with(store, DialogueConfig())
    answer = plain.recall(q)[0]
    assert answer.text == "Three times a week."
    assert [r.text for r in plain.recall(q)] == ["Three times a week."]
    m = memory_with(store, DialogueConfig(replies=Replies(question=0.25)))
    got = m.recall(q)
    assert [r.text for r in got] == ["Three times a week.", WORKOUT[0]["text"]]
    assert got[1].score == pytest.approx(0.25 * answer.score)
    # The answer itself borrows nothing the other way (answer weight 0).
    assert got[0].score == pytest.approx(answer.score)


def remember_unlinked(s: Store, turns: list[dict[str, str]], session: str, first: int = 0
                      ) -> list[str]:
    """``turns`` stored one fact each with speaker, session and position, no link."""
    got = Memory(s, clock=ManualClock(NOW)).remember_many(
        [{"text": t["text"], "speaker": t["speaker"], "session": session,
          "position": first + n} for n, t in enumerate(turns)])
    return [r.id for r in got]


def test_a_reply_stored_without_replies_to_still_lends_its_score_to_its_answer(
        tmp_path: Path) -> None:
    q = "how often do you work out together"
    with Store.open(tmp_path / "s", sync="none") as s:
        asked, answer, *_ = remember_unlinked(s, WORKOUT, "gym")
        assert Memory(s, clock=ManualClock(NOW)).links(answer).links == []
        stored = memory_with(s, DialogueConfig(replies=Replies(answer=0.5)))
        assert answer not in [r.id for r in stored.recall(q)]  # no link, no share
        m = memory_with(s, DialogueConfig(replies=Replies(answer=0.5, infer=True)))
        got = m.recall(q)
        assert [r.id for r in got[:2]] == [asked, answer]
        assert got[1].score == pytest.approx(0.5 * got[0].score)
        why = m.explain(q, answer)
        assert why.dialogue is not None
        assert why.dialogue.reply_inferred == why.dialogue.reply_bonus == pytest.approx(
            0.5 * got[0].score)
    # The same turns stored by remember_conversation (links written): the same ranking,
    # and nothing of it inferred.
    with Store.open(tmp_path / "linked", sync="none") as s:
        Memory(s, clock=ManualClock(NOW)).remember_conversation(WORKOUT, session="gym")
        linked = memory_with(s, DialogueConfig(replies=Replies(answer=0.5, infer=True)))
        assert [(r.text, r.score) for r in linked.recall(q)] == [
            (r.text, r.score) for r in got]
        why = linked.explain(q, linked.recall(q)[1].id)
        assert why.dialogue is not None and why.dialogue.reply_inferred == 0.0
        assert why.dialogue.reply_bonus > 0


def test_a_turn_borrows_from_an_inferred_answer_with_the_question_weight(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        asked, answer, *_ = remember_unlinked(s, WORKOUT, "gym")
        m = memory_with(s, DialogueConfig(replies=Replies(question=0.25, infer=True)))
        got = m.recall("three times a week")
        assert [r.id for r in got] == [answer, asked]
        assert got[1].score == pytest.approx(0.25 * got[0].score)


def test_an_inferred_reply_follows_the_reply_rule_and_never_a_stored_link(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        ids = remember_unlinked(s, [
            {"speaker": "Ann", "text": "Where did you hike in June?"},
            {"speaker": "Ann", "text": "Somewhere with lakes I guess."},
            {"speaker": "Bob", "text": "Up on the ridge."},
            {"speaker": "Bob", "text": "Then down to the valley."},
        ], "walks")
        # Another session: never a partner.
        other = remember_unlinked(s, [{"speaker": "Bob", "text": "No idea."}], "other", 1)
        m = memory_with(s, DialogueConfig(replies=Replies(answer=1.0, infer=True)))
        q = "where did you hike in June"
        # Both of Bob's turns answer Ann's nearest turn (the second, which matches
        # nothing), not her first.
        assert [r.id for r in m.recall(q)] == [ids[0]]
        got = {r.id: r.score for r in m.recall(q + ", lakes?")}
        assert set(got) == set(ids) and other[0] not in got
        assert got[ids[2]] == pytest.approx(got[ids[1]]) == pytest.approx(got[ids[3]])
        # A turn with a stored replies_to link of its own keeps only that one.
        Memory(s, clock=ManualClock(NOW)).relate(ids[3], ids[0], "replies_to")
        got = {r.id: r.score for r in m.recall(q)}
        assert set(got) == {ids[0], ids[3]}
        assert got[ids[3]] == pytest.approx(got[ids[0]])
        why = m.explain(q, ids[3])
        assert why.dialogue is not None and why.dialogue.reply_inferred == 0.0


def test_inferred_replies_rank_turns_stored_without_links_as_the_stored_links_do(
        tmp_path: Path) -> None:
    rng = random.Random(30)
    words = "tea hike dog paint lake movie dance beagle studio pottery".split()
    config = DialogueConfig(replies=Replies(answer=0.3, question=0.2, infer=True))
    for seed in range(3):
        sessions = []
        for n in range(3):
            # Runs by one speaker (longer than the reply window too) and three speakers.
            said = [rng.choice("AAB" if seed == 0 else "ABC") for _ in range(30)]
            if seed == 2:
                said[5:16] = ["C"] * 11
            sessions.append([{"speaker": who, "id": f"s{n}-{i}",
                              "text": " ".join(rng.sample(words, 2))}
                             for i, who in enumerate(said)])
        linked, unlinked = tmp_path / f"linked{seed}", tmp_path / f"unlinked{seed}"
        with Store.open(linked, sync="none") as a, Store.open(unlinked, sync="none") as b:
            for n, turns in enumerate(sessions):
                Memory(a, clock=ManualClock(NOW)).remember_conversation(turns, session=f"{n}")
                Memory(b, clock=ManualClock(NOW)).remember_many(
                    [{**t, "session": f"{n}", "position": i} for i, t in enumerate(turns)])
            ma, mb = memory_with(a, config), memory_with(b, config)
            for q in words:
                got = [(r.id, r.score) for r in mb.recall(q, k=20)]
                assert got == [(r.id, r.score) for r in ma.recall(q, k=20)], (seed, q)


def test_the_session_prior_brings_the_best_matching_session_forward(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        m0 = Memory(s, clock=ManualClock(NOW))
        m0.remember_conversation([
            {"speaker": "Tim", "text": "We adopted a puppy, a tiny beagle puppy."},
            {"speaker": "Ann", "text": "So what did you end up calling the beagle?"},
        ], session="dogs")
        m0.remember_conversation([{"speaker": "Ann", "text": "A beagle barks next door."}],
                                 session="noise")
        q = "what is the name of Tim's beagle puppy"
        plain = {r.text: r.score for r in memory_with(s, DialogueConfig()).recall(q)}
        name, noise = "So what did you end up calling the beagle?", "A beagle barks next door."
        assert plain[noise] > plain[name]
        m = memory_with(s, DialogueConfig(session=1.0))
        got = {r.text: (r.id, r.score) for r in m.recall(q)}
        assert got[name][1] > got[noise][1]
        top = max(plain.values())
        assert got[name][1] == pytest.approx(2.0 * plain[name])
        assert got[noise][1] == pytest.approx((1 + plain[noise] / top) * plain[noise])
        why = m.explain(q, got[name][0])
        assert why.dialogue is not None and why.dialogue.session_multiplier == 2.0
        assert why.score == pytest.approx(got[name][1])


def test_the_session_prior_leaves_facts_outside_sessions_alone(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        m0 = Memory(s, clock=ManualClock(NOW))
        m0.remember_conversation([{"speaker": "Tim", "text": "Beagles bark."}], session="a")
        m0.remember_many([{"text": "Beagles are hounds."}])
        remember_unlinked(s, [{"speaker": "Tim", "text": "Beagles howl."}], "a", 1)
        q = "beagles"
        plain = {r.text: r.score for r in memory_with(s, DialogueConfig()).recall(q)}
        got = {r.text: r.score for r in memory_with(s, DialogueConfig(session=1.0)).recall(q)}
        assert got["Beagles are hounds."] == plain["Beagles are hounds."]
        # Both turns are in session "a" of the root namespace: one session, one best.
        assert {got["Beagles bark."] / plain["Beagles bark."],
                got["Beagles howl."] / plain["Beagles howl."]} == {2.0}


def test_a_session_of_the_session_prior_is_one_within_its_namespace(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        m0 = Memory(s, clock=ManualClock(NOW))
        m0.remember_conversation([{"speaker": "Tim", "text": "Beagle puppies howl."}],
                                 session="s", namespace=["a"])
        m0.remember_conversation([{"speaker": "Tim", "text": "A beagle, somewhere far away."}],
                                 session="s", namespace=["b"])
        q = "beagle puppies"
        plain = {r.text: r.score for r in memory_with(s, DialogueConfig()).recall(q)}
        got = {r.text: r.score for r in memory_with(s, DialogueConfig(session=1.0)).recall(q)}
        strong, weak = "Beagle puppies howl.", "A beagle, somewhere far away."
        assert got[strong] == 2 * plain[strong]
        assert got[weak] == pytest.approx((1 + plain[weak] / plain[strong]) * plain[weak])
        assert got[weak] < 2 * plain[weak]


def test_a_named_speaker_is_matched_against_the_speaker_field(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        Memory(s, clock=ManualClock(NOW)).remember_conversation([
            {"speaker": "Melanie", "text": "I love camping by the lake."},
            {"speaker": "Caroline", "text": "I love camping in the mountains."},
            {"speaker": "Melanie", "text": "Caroline, the lake is closer to home."},
        ], session="s")
        q = "Where does Caroline love camping?"
        m = memory_with(s, DialogueConfig(speaker=1.0))
        got = m.recall(q)
        assert got[0].text == "I love camping in the mountains."
        why = m.explain(q, got[0].id)
        assert why.dialogue is not None
        assert (why.dialogue.speaker_multiplier, why.dialogue.speakers_named) == (
            2.0, ["Caroline"])
        # Muted, the name is no word BM25 matches: the turn naming her gains nothing.
        muted = memory_with(s, DialogueConfig(mute_speakers=True))
        said = {r.text: r.score for r in muted.recall(q)}
        plain = {r.text: r.score for r in memory_with(s, None).recall("Where does love camping?")}
        assert said == plain
        assert muted.explain(q, got[0].id).matched_terms == m.explain(
            "Where does love camping?", got[0].id).matched_terms


def test_a_question_names_only_the_speakers_of_turns_it_can_see(tmp_path: Path) -> None:
    """§4a, §4g: a speaker counts as named only when it said a turn at or under the
    question's namespace and, under ``known_at``, ingested by then — another
    namespace's speakers, or later ones, change neither what the question is read as
    nor (names muted) the ranking."""
    config = DialogueConfig(speaker=1.0, mute_speakers=True)
    q = "what does zelda like to drink, tea"

    def seen(other: str) -> list[tuple[Any, ...]]:
        clock = ManualClock(NOW)
        with Store.open(tmp_path / other, sync="none") as s:
            m = Memory(s, MemoryConfig(dialogue=config), clock=clock)
            m.remember(id="a1", text="zelda likes green tea", namespace=["a"])
            m.remember(id="a2", text="tea is liked by many, green tea especially",
                       namespace=["a"])
            m.remember(id="x1", text="zelda drinks tea", namespace=["a", "x"])
            m.remember(id="b1", text="tea for zelda", namespace=["b"])
            then = clock.now_ms()
            clock.advance(60_000)
            m.remember_conversation([{"speaker": other, "text": "hello there"},
                                     {"speaker": "bob", "text": "hi"}],
                                    session="s", namespace=["b"])
            m.remember_conversation([{"speaker": other, "text": "hello again"}],
                                    session="s", namespace=["a", "later"])
            out: list[tuple[Any, ...]] = []
            for space, known_at in ((["a"], then), (["a", "x"], None), (["b"], then),
                                    (["a"], None), (["b"], None), ([], None)):
                why = m.explain(q, {("a", "x"): "x1", ("b",): "b1"}.get(tuple(space), "a1"),
                                namespace=space, known_at=known_at)
                named = why.dialogue.speakers_named if why.dialogue is not None else None
                got = [(r.id, r.score) for r in m.recall(q, namespace=space,
                                                        known_at=known_at)]
                out.append((named, got))
            return out

    control, other = seen("yolanda"), seen("zelda")
    # Not seen: in "a" before the turn of "a/later" was ingested, under "a/x", in "b"
    # before its turns were.
    assert other[:3] == control[:3]
    assert [named for named, _ in other[:3]] == [[], [], []]
    # Seen: in "a" (its turn under "a/later" now known), in "b", at the root.
    assert [named for named, _ in other[3:]] == [["zelda"], ["zelda"], ["zelda"]]
    assert other[3][1] != control[3][1]  # (muted: the name is no word BM25 matches)


_NAME_PART = st.text("abcdefghijklmnopqrstuvwxyzéø", min_size=1, max_size=6)


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(_NAME_PART, min_size=1, max_size=3),
       joins=st.lists(st.sampled_from(["_", "-", ".", " "]), min_size=2, max_size=2),
       dot=st.booleans(), title=st.booleans(), possessive=st.booleans())
@example(parts=["joanna", "smith"], joins=["_", "_"], dot=False, title=False,
         possessive=False)
@example(parts=["jean", "luc"], joins=["-", "-"], dot=False, title=True, possessive=True)
@example(parts=["j", "r"], joins=[".", "."], dot=True, title=True, possessive=False)
def test_a_speaker_is_named_as_written_whatever_joins_its_words(
        parts: list[str], joins: list[str], dot: bool, title: bool,
        possessive: bool) -> None:
    """§4g: a name is matched as it is written — "joanna_smith", "jean-luc", "J.R." —
    in the question as stored, or in title case in the store."""
    name = "".join(p + j for p, j in zip(parts, joins, strict=False)) + parts[-1] \
        if len(parts) > 1 else parts[0]
    name += "." if dot else ""
    stored = name.title() if title else name
    asked = name + ("'s" if possessive and not dot else "")
    with tempfile.TemporaryDirectory() as d, Store.open(Path(d) / "s", sync="none") as s:
        m = Memory(s, MemoryConfig(dialogue=DialogueConfig(speaker=1.0, mute_speakers=True)),
                   clock=ManualClock(NOW))
        turns = m.remember_conversation([{"speaker": stored, "text": "I adopted a puppy"},
                                         {"speaker": "0", "text": "a puppy, nice"}],
                                        session="chat").turns
        why = m.explain(f"what did {asked} say about the puppy", turns[0].id)
        assert why.dialogue is not None
        assert (why.dialogue.speakers_named, why.dialogue.speaker_multiplier) == (
            [stored], 2.0)
        # (muted: what BM25 matches holds nothing of the name)
        assert {t.term for t in why.matched_terms} == {"puppi"}


def test_a_date_in_the_question_favours_facts_of_that_window(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        m0 = Memory(s, clock=ManualClock(NOW))
        for n, when in enumerate((ms(2023, 5, 8), ms(2023, 6, 20), ms(2023, 10, 25))):
            m0.remember_conversation([{"speaker": "Tim", "text": "I went to the museum."}],
                                     session=f"s{n}", time=when)
        m = memory_with(s, DialogueConfig(dates=1.0))
        for q, expected in (("Which museum did Tim visit on 20 June 2023?", "s1"),
                            ("Did Tim go to the museum in May 2023?", "s0"),
                            ("Did Tim go to a museum last month?", "s2")):
            got = m.recall(q)
            assert got[0].fact.session == expected, q
            assert got[0].score == pytest.approx(2 * got[1].score)  # a multiplier
            assert len(got) == 3  # not a filter
            why = m.explain(q, got[0].id)
            assert why.dialogue is not None and why.dialogue.date_multiplier == 2.0
        # Relative dates are read against as_of when it is given.
        got = m.recall("Did Tim go to a museum last month?", as_of=ms(2023, 7, 3))
        assert got[0].fact.session == "s1"


def test_a_turn_stored_without_a_time_is_dated_by_its_ingest_time(tmp_path: Path) -> None:
    """§4g: a turn without a time has no event time and its ingest time stands for it,
    so the date signal favours the turns ingested on the day a question names."""
    with Store.open(tmp_path / "s", sync="none") as s:
        clock = ManualClock(ms(2025, 6, 10) + 12 * 3_600_000)
        m = Memory(s, MemoryConfig(dialogue=DialogueConfig(dates=1.0)), clock=clock)
        m.remember_conversation([{"speaker": "Ann", "text": "We talked about bread."}],
                                session="mon")
        clock.advance(24 * 3_600_000)
        m.remember_conversation([{"speaker": "Ann", "text": "We talked about cake."}],
                                session="tue")
        for q, expected in (("What did we talk about today?", "tue"),
                            ("What did we talk about yesterday?", "mon"),
                            ("What did we talk about on 2025-06-10?", "mon")):
            got = m.recall(q)
            assert [r.fact.event_time for r in got] == [None, None]
            assert got[0].fact.session == expected, q
            assert got[0].score == pytest.approx(2 * got[1].score), q
            why = m.explain(q, got[0].id)
            assert why.dialogue is not None and why.dialogue.date_multiplier == 2.0
        # A turn with a time is still dated by it, not by when it was stored.
        m.remember_conversation([{"speaker": "Ann", "text": "We talked about pie."}],
                                session="old", time=ms(2025, 6, 1))
        got = m.recall("What did we talk about on 1 June 2025?")
        assert got[0].fact.session == "old"
        why = m.explain("What did we talk about today?", got[0].id)
        assert why.dialogue is not None and why.dialogue.date_multiplier == 1.0


def test_dates_are_read_as_windows() -> None:
    cases = {
        "on 16 November 2023": ("2023-11-16", "2023-11-17"),
        "on November 16th, 2023": ("2023-11-16", "2023-11-17"),
        "on 2023-11-16": ("2023-11-16", "2023-11-17"),
        "in May 2023": ("2023-05-01", "2023-06-01"),
        "in June": ("2023-06-01", "2023-07-01"),
        "in December": ("2022-12-01", "2023-01-01"),  # the latest December begun
        "in 2022": ("2022-01-01", "2023-01-01"),
        "yesterday": ("2023-11-19", "2023-11-20"),
        "last week": ("2023-11-13", "2023-11-20"),  # (20 November 2023 is a Monday)
        "last month": ("2023-10-01", "2023-11-01"),
        "last year": ("2022-01-01", "2023-01-01"),
        "three days ago": ("2023-11-17", "2023-11-18"),
        "last Friday": ("2023-11-17", "2023-11-18"),
    }
    for text, want in cases.items():
        assert [day(w) for w in dates.windows(f"What happened {text}?", NOW)] == [want], text
    assert dates.windows("You may go now.", NOW) == []  # "may" the verb
    assert dates.windows("on 31 February 2023", NOW) == []  # no such day
    assert len(dates.windows("in May 2023 " * 10_000, NOW)) == 1  # bounded, no repeats


_PHRASES = ["today", "yesterday", "last night", "this week", "last weekend", "this weekend",
            "last month", "this year", "last year", "last Sunday", "999 years ago",
            "999 months ago", "a couple of weeks ago", "29 February 2023", "Feb. 29, 2024",
            "2024-02-29", "31 April 2023", "in 1900", "during 2099", "2099-12-31",
            "early Jan", "mid-December", "since Sept", "in May"]
#: Moments up to the edges of what a datetime holds (years 1 and 9999) and past them.
_MOMENTS = st.one_of(st.integers(-2**62 + 1, 2**62 - 1), st.sampled_from([
    -62_135_596_800_000, -62_135_596_800_001, -62_135_596_800_000 + 6 * 86_400_000,
    253_402_300_799_999, 253_402_300_800_000, 253_402_300_799_999 - 3 * 86_400_000, 0, -1]))


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(max_size=80),
                      st.lists(st.sampled_from([*_PHRASES, "and", ","]), max_size=12)
                      .map(" ".join)), at=_MOMENTS)
def test_any_question_at_any_moment_gives_bounded_windows_never_an_error(text: str,
                                                                         at: int) -> None:
    found = dates.windows(text, at)
    assert len(found) <= dates.MAX_WINDOWS
    assert all(start < end for start, end in found)


def test_a_store_without_conversations_ranks_as_before_but_for_the_dates(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as s:
        m = Memory(s, clock=ManualClock(NOW))
        made = m.remember_many([{"text": t} for t in (
            "Caroline went camping in May 2023", "Melanie paints", "camping gear list",
            "Caroline likes tea")])
        hits = [(h.id, h.score) for h in s.search_documents("Caroline camping in May 2023")]
        assert [(r.id, r.score) for r in m.recall("Caroline camping in May 2023")] == hits
        # The dialogue signals find no turn, no speaker, and no fact stored in the
        # window the question names: the same.
        d = memory_with(s, MemoryConfig.conversation().dialogue)  # type: ignore[arg-type]
        assert [(r.id, r.score) for r in d.recall("Caroline camping in May 2023")] == hits
        # A fact without an event time is dated by its ingest time: named, that day
        # counts.
        q = "Caroline camping today"
        plain = {h.id: h.score for h in s.search_documents(q)}
        got = {r.id: r.score for r in d.recall(q)}
        assert got == {i: 2 * score for i, score in plain.items()}
        why = d.explain(q, made[0].id)
        assert why.dialogue is not None and why.dialogue.date_multiplier == 2.0


def test_a_store_of_conversations_with_the_default_configuration_is_document_search(
        store: Store) -> None:
    m = Memory(store, clock=ManualClock(NOW))
    for q in ("how often do you work out", "Nate turtles", "Joanna paint in May 2023"):
        assert [(r.id, r.score) for r in m.recall(q)] == [
            (h.id, h.score) for h in store.search_documents(q)]
        assert m.explain(q, m.recall(q)[0].id).dialogue is None


@pytest.mark.parametrize("config", ["conversation", "replies", "context"])
def test_a_turn_ingested_after_known_at_lends_nothing_to_the_turns_known_then(
        tmp_path: Path, config: str) -> None:
    """``known_at`` ignores the facts ingested after it: not only as results, but as
    reply partners and neighbours lending their scores too."""
    cfg = {"conversation": MemoryConfig.conversation(),
           "replies": MemoryConfig(dialogue=DialogueConfig()),
           "context": MemoryConfig(context={"neighbors": {"weight": 0.3, "window": 1}})}[config]
    clock = ManualClock(NOW)
    with Store.open(tmp_path / "s", sync="none") as s:
        memory = Memory(s, cfg, clock=clock)
        memory.remember_conversation([
            {"speaker": "Alice", "text": "Where should we go hiking this weekend?"},
            {"speaker": "Bob", "text": "I am not sure yet."}], session="walks")
        then = clock.now_ms()
        before = [(r.id, r.score) for r in memory.recall("mountain trail", k=5)]
        clock.advance(3_600_000)
        memory.remember_conversation([
            {"speaker": "Carol", "text": "The mountain trail by the lake is the best."}],
            session="walks", start=2)
        clock.advance(1_000)
        assert [(r.id, r.score) for r in memory.recall("mountain trail", k=5,
                                                       known_at=then)] == before


@pytest.mark.parametrize("later", ["Carl", "Amy"])
def test_under_known_at_a_reply_is_inferred_from_the_turns_known_then(
        tmp_path: Path, later: str) -> None:
    """§4 Recall's ``known_at``: a turn ingested after it is no reply partner — nor does
    it stand between a turn and the one the reply rule made it answer then. A later
    turn of another speaker between them would be read as what the answer answers; one
    of the question's own speaker would end the run of its answers."""
    config = DialogueConfig(replies=Replies(answer=0.5, question=0.5, infer=True))
    q = "favourite fruit mango"

    def run(session: str) -> list[list[tuple[str, float]]]:
        clock = ManualClock(NOW)
        with Store.open(tmp_path / f"{later}-{session}", sync="none") as s:
            m = Memory(s, MemoryConfig(dialogue=config), clock=clock)
            m.remember(id="q", text="what is your favourite fruit", speaker="Amy",
                       session="s", position=0)
            m.remember(id="a", text="mango obviously", speaker="Bo", session="s",
                       position=2)
            then = clock.now_ms()
            before = [(r.id, r.score) for r in m.recall(q)]
            clock.advance(60_000)
            # (the same words in both stores: BM25's statistics are the same)
            m.remember(id="x", text="hold on, a phone call", speaker=later,
                       session=session, position=1)
            return [before, [(r.id, r.score) for r in m.recall(q, known_at=then)],
                    [(r.id, r.score) for r in m.recall(q)]]

    between, elsewhere = run("s"), run("other")
    assert between[0] == elsewhere[0]
    assert {i for i, _ in between[0]} == {"q", "a"}
    # Known then: the same partners as if the later turn were in another session.
    assert between[1] == elsewhere[1]
    # Now the later turn stands between them.
    assert between[2] != elsewhere[2]


@pytest.mark.parametrize("infer", [False, True])
def test_under_known_at_a_reply_link_made_later_lends_nothing(tmp_path: Path,
                                                              infer: bool) -> None:
    """§4 Recall's ``known_at``: a ``replies_to`` link made after it is no link then —
    it lends no score, and a turn it gave a link counts as one stored without (the
    reply rule's partner lends, when inferred)."""
    q = "favourite fruit mango"
    config = DialogueConfig(replies=Replies(answer=0.5, infer=infer))
    clock = ManualClock(NOW)
    with Store.open(tmp_path / "s", sync="none") as s:
        m = Memory(s, MemoryConfig(dialogue=config), clock=clock)
        m.remember(id="q", text="what is your favourite fruit", speaker="Amy",
                   session="s", position=0)
        m.remember(id="z", text="a word on fruit", speaker="Zed", session="t", position=0)
        m.remember(id="a", text="mango obviously", speaker="Bo", session="s", position=1)
        then = clock.now_ms()
        before = [(r.id, r.score) for r in m.recall(q)]
        clock.advance(60_000)
        # With inference the answer borrowed from q; linked later to q (infer off) or
        # to z (infer on) it borrows otherwise now, and as before under known_at.
        m.relate("a", "z" if infer else "q", "replies_to")
        assert [(r.id, r.score) for r in m.recall(q)] != before
        assert [(r.id, r.score) for r in m.recall(q, known_at=then)] == before
        why = m.explain(q, "a", known_at=then)
        assert why.dialogue is not None
        assert (why.dialogue.reply_bonus > 0) == infer
        assert why.dialogue.reply_inferred == why.dialogue.reply_bonus


def test_the_filter_and_namespace_still_hold_under_the_dialogue_signals(
        store: Store) -> None:
    m = memory_with(store, DialogueConfig(replies=Replies(answer=1.0), speaker=1.0))
    q = "how often do you work out together"
    got = m.recall(q, filter={"speaker": "Joanna"})
    assert {r.fact.speaker for r in got} == {"Joanna"}
    assert m.recall(q, namespace=["elsewhere"]) == []


def test_the_signals_look_at_the_best_candidates_the_restriction_allows(
        tmp_path: Path) -> None:
    """§4g: the signals' candidates are the best the namespace (and filters) let
    through — another namespace's better matches take none of their places."""
    with Store.open(tmp_path / "s", sync="none") as s:
        m = Memory(s, MemoryConfig.conversation(), clock=ManualClock(NOW))
        dated = m.remember_conversation([{"speaker": "amy", "text": "a picnic"}],
                                        session="s1", namespace=["a"],
                                        time=ms(2023, 5, 7)).turns[0].id
        undated = m.remember_conversation([{"speaker": "amy", "text": "picnic picnic basket"}],
                                          session="s2", namespace=["a"]).turns[0].id
        q = "which picnic was on 7 May 2023"
        assert [r.id for r in m.recall(q, namespace=["a"])] == [dated, undated]
        m.remember_conversation([{"speaker": "zed", "text": f"picnic picnic picnic {i}"}
                                 for i in range(2 * dialogue.MIN_POOL)],
                                session="big", namespace=["b"])
        for restriction in ({"namespace": ["a"]}, {"filter": {"speaker": "amy"}}):
            assert [r.id for r in m.recall(q, **restriction)] == [dated, undated]
            why = m.explain(q, dated, **restriction)
            assert why.dialogue is not None and why.dialogue.date_multiplier == 2.0


def test_the_conversation_configuration_is_plain_data() -> None:
    for embedder in (None, "minilm"):
        c = MemoryConfig.conversation(embedder)
        assert c.embedder == embedder and isinstance(c.dialogue, DialogueConfig)
        assert config_from_json(config_to_json(c)) == c
    lexical = msgspec.json.decode(config_to_json(MemoryConfig.conversation()))["dialogue"]
    assert (lexical["speaker"], lexical["session"], lexical["replies"]["infer"]) == (
        1.0, 1.0, True)
    embedded = MemoryConfig.conversation("minilm")
    assert embedded.dialogue == DialogueConfig(speaker=1.0, mute_speakers=True, dates=1.0,
                                               session=1.0)
    assert embedded.fusion == FusionConfig(method="bounded")
    assert MemoryConfig.conversation().fusion == MemoryConfig().fusion
    with pytest.raises(InvalidError):
        config_from_json('{"dialogue": {"speaker": -1}}')
    with pytest.raises(InvalidError):
        config_from_json('{"dialogue": {"replies": {"answer": 2}}}')
    with pytest.raises(InvalidError):
        config_from_json('{"dialogue": {"session": 11}}')


#: Letters outside ASCII that an ignore-case pattern takes for an ASCII one.
_LOOKALIKES = {"i": "\u0130\u0131", "s": "\u017f", "k": "\u212a"}


@settings(max_examples=200, deadline=None)
@given(phrases=st.lists(st.sampled_from(_PHRASES), min_size=1, max_size=4),
       swaps=st.lists(st.integers(0, 1), min_size=200, max_size=200), at=_MOMENTS)
@example(phrases=["August 5, 2023"], swaps=[1] * 200, at=NOW)
@example(phrases=["six days ago", "yesterday"], swaps=[1] * 200, at=NOW)
def test_a_date_spelled_with_look_alike_letters_reads_as_its_ascii_spelling(
        phrases: list[str], swaps: list[int], at: int) -> None:
    """§4g: "August 5, 2023" spelled with a long s (U+017F) reads as "August 5, 2023",
    never an error, and "yesterday" so spelled as yesterday, not some other window."""
    text = " and ".join(phrases)
    spelled = "".join(
        _LOOKALIKES[c.lower()][swaps[n] % len(_LOOKALIKES[c.lower()])]
        if c.lower() in _LOOKALIKES and swaps[n] else c
        for n, c in enumerate(text[:200])) + text[200:]
    assert dates.windows(spelled, at) == dates.windows(text, at)


#: The first and the last moment a calendar date is read for (years 1 and 9999).
_FIRST, _LAST = -62_135_596_800_000, 253_402_300_799_999


@settings(max_examples=200, deadline=None)
@given(at=st.one_of(st.integers(_FIRST, _LAST), st.integers(_LAST - 40 * 86_400_000, _LAST)))
@example(at=_LAST)
@example(at=_FIRST)
def test_this_week_month_and_year_hold_the_moment_they_are_read_at(at: int) -> None:
    """§4g: "today", "this week", "this month" and "this year" are each a window around
    ``as_of``, up to the last moment of year 9999 (whose month and year end in a year
    no calendar date is read for)."""
    for text in ("today", "this week", "this month", "this year"):
        found = dates.windows(f"what happened {text}", at)
        assert len(found) == 1 and found[0][0] <= at < found[0][1], text
    year = dt.datetime.fromtimestamp(at // 1000, dt.UTC).year
    assert dates.windows("what happened this year", at) == [(ms(year, 1, 1), ms(year, 12, 31)
                                                              + 86_400_000)]


@settings(max_examples=200, deadline=None)
@given(phrases=st.lists(st.sampled_from(_PHRASES), min_size=1, max_size=6),
       at=st.one_of(st.integers(-2**62 + 1, _FIRST - 1), st.integers(_LAST + 1, 2**62 - 1)))
@example(phrases=["2023-11-16", "today"], at=2**62 - 1)
def test_absolute_dates_are_read_at_any_as_of(phrases: list[str], at: int) -> None:
    """§4g: an ``as_of`` outside years 1 to 9999 leaves out the relative dates only: the
    days, months and years a question names with their year are read as at any other
    moment."""
    text = " and ".join(phrases)
    absolute = " and ".join(p for p in phrases if any(c.isdigit() for c in p)
                            and "ago" not in p)
    assert dates.windows(text, at) == dates.windows(absolute, NOW)


@settings(max_examples=300, deadline=None)
@given(ms=st.one_of(st.integers(_FIRST, _LAST), st.sampled_from([_FIRST, _LAST, 0, -1])))
@example(ms=253_402_300_799_999)
def test_a_stored_time_is_the_moment_of_its_exact_millisecond(ms: int) -> None:
    """A time in years 1 to 9999 reads as the very moment it stands for, to the
    microsecond (23:59:59.999 of 31 December 9999, not some microseconds before)."""
    at = dates.moment(ms)
    assert at is not None
    assert at == dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
    assert at.microsecond == ms % 1000 * 1000


@given(ms=st.one_of(st.integers(-2**62, _FIRST - 1), st.integers(_LAST + 1, 2**62)))
def test_a_stored_time_outside_the_calendar_has_no_moment(ms: int) -> None:
    assert dates.moment(ms) is None
