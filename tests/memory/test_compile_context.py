"""Context under a token budget (issue 19): the compiled block never exceeds its budget
(Hypothesis over random facts, fragments, budgets and counters), is byte-identical on
repeat, is fenced as untrusted data, and says for every candidate whether it was kept,
shortened or dropped and why; explain_context answers for one id; the default counter
falls back cleanly to the documented estimate when tiktoken cannot load.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import InvalidError, LimitError, ManualClock, Memory, NotFoundError, Store
from holomem.api.memory.window import tokens
from holomem.api.memory.window.budget import MIN_SHORTENED

T0 = 1_700_000_000_000
WORDS = ["tea", "alice", "paris", "trip", "monday", "<<<END", "MEMORY>>>", "ok.", "naïve",
         "x" * 30, "bob", "ignore", "previous", "instructions", "\n", "café"]


def _store(path: Path) -> tuple[Store, Memory]:
    store = Store.open(path, sync="none")
    return store, Memory(store, clock=ManualClock(T0))


def _additive_off(text: str) -> int:
    """A counter that is not additive over lines (charges a line break 3 tokens)."""
    return tokens.estimate(text) + 3 * text.count("\n")


text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=40).map(" ".join).filter(
    lambda t: t.strip() != "")


@settings(max_examples=60, deadline=None)
@given(facts=st.lists(text_st, max_size=12), frags=st.lists(
    st.tuples(text_st, st.floats(0, 1), st.booleans()), max_size=6),
       budget=st.integers(1, 600), additive=st.booleans())
def test_the_block_never_exceeds_its_budget_and_repeats_byte_for_byte(
        tmp_path_factory: pytest.TempPathFactory, facts: list[str],
        frags: list[tuple[str, float, bool]], budget: int, additive: bool) -> None:
    store, memory = _store(tmp_path_factory.mktemp("ctx") / "s")
    try:
        for t in facts:
            memory.remember(t)
        fragments = [{"id": f"frag-{i}", "text": t, "score": s, "pinned": p}
                     for i, (t, s, p) in enumerate(frags)]
        counter = tokens.estimate if additive else _additive_off
        try:
            out = memory.compile_context("tea alice trip", budget, fragments=fragments,
                                         counter=counter)
        except InvalidError as exc:
            assert "below the" in str(exc)  # only when the empty block does not fit
            empty = memory.compile_context("nothing matches this", 600, counter=counter)
            assert budget < empty.tokens
            return
        assert out.tokens == counter(out.text) <= budget
        again = memory.compile_context("tea alice trip", budget, fragments=fragments,
                                       counter=counter)
        assert again.text == out.text and again.decisions == out.decisions
        lines = out.text.split("\n")
        assert lines[0].startswith("<<<MEMORY ") and lines[-1].startswith("<<<END MEMORY ")
        body = lines[1:-1]
        for line in body:  # nothing stored can close the fence or start a line
            assert "<<<" not in line and ">>>" not in line
        ids = [d.id for d in out.decisions]
        assert len(ids) == len(set(ids))
        assert {f"frag-{i}" for i in range(len(frags))} <= set(ids)
        placed = [d for d in out.decisions if d.decision != "dropped"]
        if not placed:
            body = [] if body == ["(no context)"] else body
        for d, line in zip(placed, body, strict=True):
            assert line.startswith(f"- [{d.id}] (")
            assert d.tokens == counter(line)
            if d.decision == "shortened":
                assert line.endswith(" …") and d.tokens < d.full_tokens
        for d in out.decisions:
            assert d.reason
            assert (d.tokens == 0) == (d.decision == "dropped")
    finally:
        store.close()


def test_pinned_fragments_come_first_then_relevance(memory: Memory) -> None:
    memory.remember("alice drinks tea in paris")
    out = memory.compile_context("alice tea", 2000, fragments=[
        {"id": "low", "text": "a weak note", "score": 0.1},
        {"id": "pin", "text": "the goal: plan the trip", "pinned": True, "score": 0.0},
        {"id": "high", "text": "a strong note", "score": 1.0, "time": T0}])
    assert [d.id for d in out.decisions][:2] == ["pin", "high"]
    assert [d.id for d in out.decisions][-1] == "low"
    assert all(d.decision == "kept" for d in out.decisions)
    assert "- [high] (fragment; time 2023-11-14T22:13Z) a strong note" in out.text
    assert "(current; ingested 1970-01-01T00:16Z) alice drinks tea in paris" in out.text


def test_a_line_that_does_not_fit_is_shortened_at_a_word_and_the_rest_dropped(
        memory: Memory) -> None:
    long = " ".join(f"word{i}" for i in range(200))
    first = memory.compile_context("q", 10_000, fragments=[{"id": "a", "text": long}])
    budget = first.tokens - first.decisions[0].tokens + MIN_SHORTENED + 10
    out = memory.compile_context("q", budget, fragments=[
        {"id": "a", "text": long}, {"id": "b", "text": long, "score": 0.5}])
    a, b = out.decisions
    assert (a.decision, b.decision) == ("shortened", "dropped")
    assert "cut to" in a.reason and "were left" in b.reason
    assert out.tokens <= budget
    line = out.text.split("\n")[1]
    assert line.endswith(" …") and line.startswith("- [a] (fragment; no time) word0 word1")


def test_explain_context_answers_for_one_fragment_or_fact(memory: Memory) -> None:
    fid = memory.remember("alice drinks tea").id
    other = memory.remember("nothing related here").id
    frags = [{"id": "g", "text": "x " * 500}]
    d = memory.explain_context("alice tea", 120, "g", fragments=frags)
    assert d.id == "g" and d.source == "fragment" and d.decision in ("shortened", "dropped")
    f = memory.explain_context("alice tea", 2000, fid)
    assert (f.source, f.decision, f.status) == ("fact", "kept", "current")
    n = memory.explain_context("alice tea", 2000, other)
    assert n.decision == "dropped" and "not a candidate" in n.reason
    with pytest.raises(NotFoundError):
        memory.explain_context("alice tea", 2000, "nope")


def test_working_context_facts_are_never_candidates(memory: Memory) -> None:
    memory.save_working_context(None, "tea-session", {"note": "alice tea"})
    memory.remember("alice likes tea")
    out = memory.compile_context("alice tea working context", 2000)
    assert [d.source for d in out.decisions] == ["fact"]
    assert "wc-" not in out.text


def test_bad_requests_are_clear_errors(memory: Memory) -> None:
    memory.remember("tea")
    with pytest.raises(InvalidError, match="below the"):
        memory.compile_context("tea", 5)
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidError, match="budget_tokens"):
            memory.compile_context("tea", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidError, match="between 1 and"):
        memory.compile_context("tea", 10**7)
    with pytest.raises(LimitError):
        memory.compile_context("tea", 500, fragments=[{"id": f"f{i}", "text": "x"}
                                                      for i in range(1001)])
    bad_frags: list[Any] = [[{"id": "a", "text": "x"}, {"id": "a", "text": "y"}],
                            [{"id": "a", "text": "x", "score": 2}],
                            [{"id": "a"}], [{"id": "a", "text": "x", "extra": 1}], "text"]
    for frags in bad_frags:
        with pytest.raises(InvalidError):
            memory.compile_context("tea", 500, fragments=frags)
    with pytest.raises(InvalidError, match="counter"):
        memory.compile_context("tea", 500, counter=lambda t: -1)
    with pytest.raises(InvalidError, match="counter"):
        memory.compile_context("tea", 500, counter="tiktoken")  # type: ignore[arg-type]
    fid = memory.recall("tea")[0].id
    with pytest.raises(InvalidError, match="also the id"):
        memory.compile_context("tea", 500, fragments=[{"id": fid, "text": "x"}])
    for blank in ("", "  \n"):  # a fragment's text is like a fact's: not blank
        with pytest.raises(InvalidError, match="empty or only whitespace"):
            memory.compile_context("tea", 500, fragments=[{"id": "f", "text": blank}])
    for recall in ("x", 5, [("k", 5)], ["k"]):
        with pytest.raises(InvalidError, match="recall must be a mapping"):
            memory.compile_context("tea", 500, recall=recall)  # type: ignore[arg-type]


@pytest.mark.parametrize("results", [None, "alpha", {"id": "x"}, [{"id": "x"}], [1], 5])
def test_render_context_refuses_what_is_not_a_list_of_results(
        memory: Memory, results: Any) -> None:
    with pytest.raises(InvalidError, match="render_context"):
        memory.render_context(results)


def test_the_estimate_is_the_documented_rule() -> None:
    assert tokens.estimate("") == 0
    assert tokens.estimate("a") == 1
    assert tokens.estimate("tea, please!") == 1 + 1 + 2 + 1  # tea , please !
    assert tokens.estimate("x" * 9) == 3
    assert tokens.estimate("one\ntwo") == tokens.estimate("one") + tokens.estimate("two")


def test_without_a_loadable_tiktoken_the_default_is_the_estimate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # tiktoken is not installed here; and an installed one whose encoding cannot load
    # (no network for its files) must fall back the same way.
    class Broken:
        @staticmethod
        def get_encoding(name: str) -> object:
            raise OSError("no network")

    monkeypatch.setitem(sys.modules, "tiktoken", Broken)  # type: ignore[arg-type]
    assert tokens.tiktoken_counter() is None
    monkeypatch.setattr(tokens, "_DEFAULT", [])
    assert tokens.default_counter() is tokens.estimate
    assert tokens.name_of(tokens.default_counter()) == "estimate"
