"""The rule-based extractor (holomem.extractors.rules; docs/contract.md §4g,
"Extractors"): its guarantees, each a test.

First person is resolved to the speaker and each fact carries a subject, so
latest-by-subject supersession replaces a changed city or preference and keeps the old
one as history; questions, hypotheticals, quotes and hedges give nothing; every fact
names its source turn and is linked ``derived_from`` to it; the work per turn and per
call is bounded; any text gives facts or nothing, never an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.conversation.types import ConversationTurn
from holomem.errors import InvalidError
from holomem.extractors import NAMES, RuleExtractor, by_name
from holomem.extractors import rules as rules_module


def turn(text: str, speaker: str = "alice", position: int = 0,
         time: int | None = None) -> ConversationTurn:
    return ConversationTurn(id=f"t{position}", speaker=speaker, text=text, session="s",
                            position=position, time=time)


def said(text: str, speaker: str = "alice") -> list[tuple[str, str]]:
    return [(f["text"], f["subject"]) for f in RuleExtractor()([turn(text, speaker)])]


@pytest.mark.parametrize("text, facts", [
    ("I live in Paris.", [("alice lives in Paris", "alice/city")]),
    ("Actually I moved to Berlin last year!", [("alice lives in Berlin", "alice/city")]),
    ("I've just relocated to Rio de Janeiro", [("alice lives in Rio de Janeiro",
                                                 "alice/city")]),
    ("I'm from the Netherlands", [("alice is from the Netherlands", "alice/origin")]),
    ("I work as a nurse at St Mary's", [("alice works as a nurse", "alice/job")]),
    ("I work at Google, and I love it.", [("alice works at Google", "alice/employer")]),
    ("My name is Alice Smith", [("alice's name is Alice Smith", "alice/name")]),
    ("I love sushi so much", [("alice loves sushi", "alice/preference/sushi")]),
    ("I really enjoy hiking in the Alps", [("alice enjoys hiking in the Alps",
                                            "alice/preference/hiking-in-alps")]),
    ("I can't stand sushi.", [("alice cannot stand sushi", "alice/preference/sushi")]),
    ("I don't like crowds", [("alice does not like crowds", "alice/preference/crowds")]),
    ("I prefer tea over coffee", [("alice prefers tea over coffee",
                                   "alice/preference/coffee-vs-tea")]),
    ("My favourite food is pizza.", [("alice's favourite food is pizza",
                                      "alice/favourite/food")]),
    ("Jazz is my favorite music", [("alice's favourite music is Jazz",
                                    "alice/favourite/music")]),
    ("I decided to learn Spanish", [("alice decided to learn Spanish",
                                     "alice/decision/learn-spanish")]),
    ("I'm going to sell my car", [("alice plans to sell alice's car",
                                   "alice/decision/sell-car")]),
    ("We will adopt a dog", [("alice (with others) plans to adopt a dog",
                              "alice/decision/adopt-dog")]),
    ("I love hiking and I hate running", [("alice loves hiking", "alice/preference/hiking"),
                                          ("alice hates running",
                                           "alice/preference/running")]),
    ("Hi! I love painting, but I don't like crowds.", [
        ("alice loves painting", "alice/preference/painting"),
        ("alice does not like crowds", "alice/preference/crowds")]),
])
def test_first_person_statements_become_facts_about_the_speaker(
        text: str, facts: list[tuple[str, str]]) -> None:
    assert said(text) == facts


@pytest.mark.parametrize("text, facts", [
    ("Yesterday Bob moved to Rome.", [("Bob lives in Rome", "bob/city")]),
    ("My sister lives in New York", [("caroline's sister lives in New York",
                                      "caroline/sister/city")]),
    ("Zoë lives in São Paulo", [("Zoë lives in São Paulo", "zoë/city")]),
    ("Carol works at Acme Corp", [("Carol works at Acme Corp", "carol/employer")]),
    ("Dan works as an engineer", [("Dan works as an engineer", "dan/job")]),
    ("Alice's favourite colour is green", [("Alice's favourite colour is green",
                                            "alice/favourite/colour")]),
])
def test_statements_about_a_named_person_get_that_persons_subject(
        text: str, facts: list[tuple[str, str]]) -> None:
    assert said(text, "caroline") == facts


@pytest.mark.parametrize("text", [
    "If I lived in Rome I'd be happy.", "Do you like sushi?", "do you like sushi",
    "Where do you live", "I'd like a coffee", "I would love to live in Paris",
    "Maybe I'll move to Berlin", "I think I'm going to quit", "I wish I lived in Rome",
    "Imagine I worked at Google", 'She said "I love sushi"', "Would I like jazz",
    "Suppose we will sell the house", "I heard Bob moved to Rome", "I love sushi, don't you?",
])
def test_questions_hypotheticals_quotes_and_hedges_give_nothing(text: str) -> None:
    assert said(text) == []


@pytest.mark.parametrize("text", [
    "I love you", "I like that", "I love it when it rains", "I like how you think",
    "I hate them", "I live in fear", "I work at home", "I'm from the future",
    "I used to live in Paris", "I'm going to bed", "I'll be fine", "I'm going to Paris",
    "I'll let you know", "Call me tomorrow", "He lives in Paris", "This is my favourite song",
    "I'm not going to quit", "I love 🍣", "My favourite thing is sleeping",
    "I like to chat with her",
])
def test_what_leans_on_an_unknown_referent_or_is_no_statement_gives_nothing(
        text: str) -> None:
    assert said(text) == []


def test_turns_said_by_an_assistant_system_or_tool_are_not_read_unless_asked() -> None:
    for speaker in ("assistant", "system", "tool", "Assistant"):
        assert said("I love helping people", speaker) == []
    both = RuleExtractor(skip_speakers=["system"])([turn("I love helping people",
                                                          "assistant")])
    assert [f["subject"] for f in both] == ["assistant/preference/helping-people"]


def test_each_fact_names_its_source_turn_its_time_entities_and_rule() -> None:
    (fact,) = RuleExtractor()([turn("Hello there.", position=0),
                               turn("I live in Paris", position=1, time=5_000)])
    assert fact == {"text": "alice lives in Paris", "subject": "alice/city",
                    "entities": ["alice", "Paris"], "sources": ["t1"], "event_time": 5_000,
                    "metadata": {"extractor": "rules", "rule": "city"}}


def test_the_same_fact_said_again_is_one_fact_with_both_sources_until_it_changes() -> None:
    facts = RuleExtractor()([turn("I live in Paris", position=0, time=1),
                             turn("Yes, I live in Paris.", position=1, time=2),
                             turn("I moved to Berlin", position=2, time=3),
                             turn("I moved to Paris", position=3, time=4)])
    assert [(f["text"], f["sources"]) for f in facts] == [
        ("alice lives in Paris", ["t0", "t1"]), ("alice lives in Berlin", ["t2"]),
        ("alice lives in Paris", ["t3"])]  # back in Paris: a new fact, a later time


def test_the_rule_extractor_is_deterministic() -> None:
    turns = [turn("I love jazz. I moved to Lisbon; my favourite food is bacalhau.", "bo",
                  i, 10 * i) for i in range(3)]
    assert RuleExtractor()(turns) == RuleExtractor()(turns) == by_name("rules")(turns)


def test_the_work_per_turn_and_per_call_is_bounded() -> None:
    late = "x" * rules_module.MAX_CHARS + " I live in Paris."
    assert said(late) == []  # past the characters read
    many = ". ".join(f"I love thing{chr(97 + i)}" for i in range(20))
    assert len(said(many)) == rules_module.MAX_FACTS_PER_TURN
    capped = RuleExtractor(max_facts=3, max_facts_per_turn=2)
    turns = [turn(many.replace("thing", f"thing{i}"), position=i) for i in range(5)]
    assert len(capped(turns)) == 3
    hostile = "I love " + "a " * 100_000  # a huge object: nothing, quickly
    assert said(hostile) == []


def test_text_in_any_script_is_read_without_error() -> None:
    assert said("I live in Москва") == [("alice lives in Москва", "alice/city")]
    assert said("I live in 東京") == []  # a script without capitals names no proper noun
    assert said("Zoë: I love crème brûlée", "Zoë") == [
        ("Zoë loves crème brûlée", "zoë/preference/crème-brûlée")]
    assert said("I love \udcff") == []  # a lone surrogate: nothing a store would refuse


@pytest.mark.parametrize("kwargs", [{"max_facts": 0}, {"max_facts": True},
                                    {"max_facts_per_turn": 65}, {"skip_speakers": "system"},
                                    {"skip_speakers": [3]}])
def test_bad_arguments_are_refused_at_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidError):
        RuleExtractor(**kwargs)


def test_only_built_in_names_resolve() -> None:
    assert NAMES == ("rules",)
    assert isinstance(by_name("rules"), RuleExtractor)
    for name in ("chat", "os.system", "", 3):
        with pytest.raises(InvalidError, match="built-in extractors are 'rules'"):
            by_name(name)


# -- through remember_conversation --------------------------------------------------
@pytest.fixture
def memory(tmp_path: Path) -> Any:
    store = Store.open(tmp_path / "store", sync="none")
    yield Memory(store, MemoryConfig(supersession="latest-by-subject"),
                 clock=ManualClock(1_000_000))
    store.close()


def derived(memory: Memory, done: Any) -> list[Any]:
    return [memory.get(d.id) for d in done.derived]


def test_a_move_supersedes_the_old_city_which_history_keeps(memory: Memory) -> None:
    first = memory.remember_conversation(
        [{"speaker": "alice", "text": "I live in Paris."},
         {"speaker": "bob", "text": "Lovely city."}], session="s1", time=1_000,
        extractor=RuleExtractor())
    later = memory.remember_conversation(
        [{"speaker": "alice", "text": "Big news: I moved to Berlin!"}], session="s2",
        time=2_000, extractor=RuleExtractor())
    (paris,), (berlin,) = derived(memory, first), derived(memory, later)
    assert (paris.subject, berlin.subject) == ("alice/city", "alice/city")
    assert later.derived[0].superseded == [paris.id]
    assert memory.get(paris.id).status == "superseded"  # type: ignore[union-attr]
    assert berlin.status == "current"
    assert [f.text for f in memory.history(berlin.id)] == ["alice lives in Paris",
                                                          "alice lives in Berlin"]
    now = [r.text for r in memory.recall("where does alice live", {"subject": "alice/city"})]
    assert now == ["alice lives in Berlin"]
    before = memory.recall("alice lives", {"subject": "alice/city", "asOf": 1_500})
    assert [r.text for r in before] == ["alice lives in Paris"]


def test_a_changed_preference_in_one_call_supersedes_the_earlier_one(memory: Memory) -> None:
    done = memory.remember_conversation(
        [{"role": "user", "content": "I love sushi."},
         {"role": "assistant", "content": "Noted!"},
         {"role": "user", "content": "I love jazz."},
         {"role": "user", "content": "Honestly, I can't stand sushi anymore."}],
        session="s", extractor=RuleExtractor())
    sushi, jazz, hate = derived(memory, done)
    assert (sushi.status, jazz.status, hate.status) == ("superseded", "current", "current")
    assert hate.supersedes == [sushi.id] and hate.text == "user cannot stand sushi"


def test_each_extracted_fact_is_linked_derived_from_its_turn(memory: Memory) -> None:
    done = memory.remember_conversation(
        [{"speaker": "alice", "text": "Hi Bob."},
         {"speaker": "bob", "text": "Hi! I work at Acme and I love climbing."}],
        session="s", extractor=RuleExtractor())
    assert [f.text for f in derived(memory, done)] == ["bob works at Acme",
                                                       "bob loves climbing"]
    for fact in done.derived:
        links = memory.links(fact.id, relation="derived_from").links
        assert [x.to_id for x in links] == [done.turns[1].id]
    why = memory.why(done.derived[0].id)
    assert done.turns[1].id in str(why)


def test_a_retried_call_with_the_rules_stores_nothing_twice(memory: Memory) -> None:
    messages = [{"speaker": "alice", "text": "I live in Oslo", "time": 10},
                {"speaker": "alice", "text": "I decided to learn Norwegian", "time": 20}]
    first = memory.remember_conversation(messages, session="s", extractor=RuleExtractor())
    revision = memory.store.revision
    again = memory.remember_conversation(messages, session="s", extractor=RuleExtractor())
    assert [d.created for d in first.derived] == [True, True]
    assert [d.created for d in again.derived] == [False, False]
    assert memory.store.revision == revision


def test_the_json_op_names_the_rules_and_refuses_other_names(memory: Memory) -> None:
    request = {"messages": [{"role": "user", "content": "I live in Lyon"}], "session": "s",
               "extractor": "rules"}
    done = memory.call("rememberConversation", request)
    (fact,) = done["derived"]
    assert memory.get(fact["id"]).subject == "user/city"  # type: ignore[union-attr]
    revision = memory.store.revision
    for name in ("chat", "holomem.extractors.rules.RuleExtractor", 3):
        with pytest.raises(InvalidError):
            memory.call("rememberConversation", {**request, "session": "t",
                                                 "extractor": name})
    assert memory.store.revision == revision


# -- any text ------------------------------------------------------------------------
_VOCABULARY = ["I", "i", "we", "my", "love", "like", "hate", "don't", "can't", "stand",
               "live", "in", "moved", "to", "work", "as", "at", "a", "favourite", "is",
               "decided", "not", "going", "will", "'ll", "'m", "Paris", "New", "York",
               "Zoë", "sushi", "it", "you", "if", "?", ".", ",", "!", "\n", "and", "but",
               "name", "Bob", "sister", "lives", "from", "the", "São", "東京", "🍣", "\u0301"]
_TEXT = st.one_of(st.text(max_size=300),
                  st.lists(st.sampled_from(_VOCABULARY), max_size=40).map(" ".join))
_TURN = st.builds(turn, _TEXT, st.sampled_from(["alice", "Zoë", "user", "assistant", "-"]),
                  st.integers(0, 10), st.one_of(st.none(), st.integers(0, 2**40)))


@settings(max_examples=400, deadline=None)
@given(turns=st.lists(_TURN, max_size=8), per_turn=st.integers(1, 5),
       most=st.integers(1, 20))
def test_any_text_gives_facts_or_nothing_never_an_error_and_a_bounded_count(
        turns: list[ConversationTurn], per_turn: int, most: int) -> None:
    facts = RuleExtractor(max_facts=most, max_facts_per_turn=per_turn)(turns)
    assert len(facts) <= min(most, per_turn * len(turns))
    ids = {t.id for t in turns}
    for f in facts:
        assert f["text"] and f["subject"] and set(f["sources"]) <= ids
        f["text"].encode("utf-8")


@settings(max_examples=60, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(texts=st.lists(_TEXT.filter(str.strip), min_size=1, max_size=5))
def test_any_conversation_with_the_rules_is_stored_whole(
        tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> None:
    store = Store.open(tmp_path_factory.mktemp("h") / "store", sync="none")
    try:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"),
                        clock=ManualClock(1_000))
        messages = [{"speaker": ("alice", "bob")[i % 2], "text": t, "time": i}
                    for i, t in enumerate(texts)]
        done = memory.remember_conversation(messages, session="s", extractor=RuleExtractor())
        assert len(done.turns) == len(texts)
        for d in done.derived:
            assert memory.links(d.id, relation="derived_from").links
    finally:
        store.close()


# -- whitespace ------------------------------------------------------------------------
_SPACED_WORDS = [w for w in _VOCABULARY if w != "\n"] + [
    "ice", "cream", "food", "pizza", "jazz", "music", "tea", "over", "coffee", "Rome",
    "Rio", "de", "Janeiro", "Acme", "learn", "Spanish", "-", "(", ")", ";", "call", "me"]
#: Runs of whitespace a sentence may hold between two words (a line break ends the
#: sentence, so it is not among them).
_RUNS = st.sampled_from(["  ", "\t", " \t ", "\u2003", "\u3000", "\r", " " * 30,
                         "\t" * 7 + " " * 5])


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.sampled_from(_SPACED_WORDS), min_size=1, max_size=40),
       gaps=st.lists(st.one_of(st.just(" "), _RUNS), min_size=39, max_size=39))
@example(words=["My", "favourite", "ice", "cream", "is", "vanilla"],
         gaps=[" ", " ", "  ", " ", " "])  # a double space inside a favourite's kind
def test_a_run_of_whitespace_reads_as_one_space(words: list[str], gaps: list[str]) -> None:
    """Whatever whitespace separates the words of a sentence, the facts are those of
    the words separated by single spaces ("ice  cream" is "ice cream")."""
    spaced = words[0] + "".join(gap + w for gap, w in zip(gaps, words[1:], strict=False))
    assert len(spaced) <= rules_module.MAX_CHARS
    assert RuleExtractor().read("alice", spaced) == RuleExtractor().read("alice",
                                                                         " ".join(words))


def test_turns_of_long_whitespace_runs_give_the_facts_of_single_spaces() -> None:
    """A turn of 2,000 characters that is mostly one run of spaces reads as its words
    alone. Before runs were read as one space, the clause cuts tried the run from each
    of its positions: about 0.6 s of CPU per such turn, so these 200 turns took about
    two minutes (one rememberConversation request held the write lock that long)."""
    width = rules_module.MAX_CHARS
    texts = ["I" + " " * (width - 2) + "x", "I love" + " " * (width - 10) + "jazz",
             "My favourite" + "\t" * (width - 30) + "food is pizza"]
    turns = [turn(texts[i % 3], position=i) for i in range(200)]
    plain = [turn(" ".join(texts[i % 3].split()), position=i) for i in range(200)]
    facts = RuleExtractor()(turns)
    assert facts == RuleExtractor()(plain)
    assert [f["text"] for f in facts] == ["alice loves jazz", "alice's favourite food is pizza"]


# -- what the store takes ------------------------------------------------------------
#: Words past any name, and speakers up to the longest a message may name.
_LONG = st.sampled_from(["Paris" * 60, "A" * 300, "Rio " + "de" * 200, "São" * 100])
_LONG_TEXT = st.builds(lambda a, b, c: f"{a} {b} {c}",
                       st.sampled_from(["I live in", "My name is", "I work at", "I love",
                                        "My sister", "I moved to", "Bob lives in"]),
                       _LONG, st.sampled_from([".", " and I love tea.", " lives in Rome."]))
_SPEAKER = st.sampled_from(["alice", "x" * 300, "Zoë " * 100, "y" * 512])


def test_rules_limits_are_holomems() -> None:
    from holomem.api.engine import validate

    assert rules_module.MAX_ENTITY_CHARS == validate.MAX_ENTITY_CHARS
    assert rules_module.MAX_SUBJECT_CHARS == validate.MAX_ID_CHARS


@settings(max_examples=200, deadline=None)
@given(text=_LONG_TEXT | _TEXT, speaker=_SPEAKER)
def test_every_fact_is_within_the_limits_of_a_fact(text: str, speaker: str) -> None:
    for f in RuleExtractor()([turn(text, speaker)]):
        assert len(f["subject"]) <= rules_module.MAX_SUBJECT_CHARS
        assert all(0 < len(e) <= rules_module.MAX_ENTITY_CHARS for e in f["entities"])


@pytest.mark.parametrize("speaker, text", [
    ("x" * 300, "I live in Paris. I love tea."),
    ("alice", "I live in " + "Paris" * 60 + "."),
    ("alice", "My name is " + "A" * 600 + "."),
])
def test_a_conversation_with_a_name_past_the_entity_limit_is_stored_with_the_rules(
        memory: Memory, speaker: str, text: str) -> None:
    done = memory.call("rememberConversation", {
        "messages": [{"speaker": speaker, "text": text}], "session": "s",
        "extractor": "rules"})
    assert len(done["turns"]) == 1
