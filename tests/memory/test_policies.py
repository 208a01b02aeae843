"""Policies (docs/contract.md §4): recency, the regex entity extractor, the built-in forgetting
and consolidation policies (maintenance never runs by itself: dry run by default),
observers, the ``with_*`` copies, and MemoryConfig's camelCase JSON form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from holomem import (
    ConsolidateOptions,
    InvalidError,
    MaintenanceOptions,
    ManualClock,
    Memory,
    MemoryConfig,
    Observation,
    Store,
)
from holomem.api.engine import validate
from holomem.api.memory.config import (
    ConsolidationConfig,
    Duplicates,
    Exponential,
    ForgettingConfig,
    RecencyConfig,
    config_from_json,
    config_to_json,
)
from holomem.api.memory.forget.consolidation import KEPT_NOT_ALLOWED, summary_id
from holomem.api.memory.policies import EXTRACTORS, SUPERSESSION, Links, regex_entities

HOUR = 3_600_000
DAY = 24 * HOUR


# -- recency ------------------------------------------------------------------------------
def test_exponential_recency_halves_the_score_at_one_half_life(store: Store,
                                                               clock: ManualClock) -> None:
    config = MemoryConfig(recency=RecencyConfig(exponential=Exponential(half_life_ms=DAY)))
    memory = Memory(store, config, clock=clock)
    clock.set(10 * DAY)
    memory.remember(id="now", text="olga bakes bread", event_time=10 * DAY)
    memory.remember(id="day", text="olga bakes bread daily", event_time=9 * DAY)
    memory.remember(id="two", text="olga bakes bread weekly", event_time=8 * DAY)
    base = {h.id: h.score for h in store.search_documents("olga bakes bread")}
    results = {r.id: r for r in memory.recall("olga bakes bread", explain=True)}
    for fid, factor in (("now", 1.0), ("day", 0.5), ("two", 0.25)):
        r = results[fid]
        assert r.explanation is not None
        assert r.explanation.recency_multiplier == factor
        assert r.score == base[fid] * factor
    # Evaluated as of one half-life later, every factor halves again.
    later = {r.id: r for r in memory.recall("olga bakes bread", explain=True, as_of=11 * DAY)}
    assert later["now"].explanation is not None
    assert later["now"].explanation.recency_multiplier == 0.5
    # The recency knob changes the ranking: the newest fact now comes first.
    assert memory.recall("olga bakes bread")[0].id == "now"


def test_recency_policy_through_with_recency(store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    clock.set(100 * HOUR)
    memory.remember(id="a", text="pablo sails", event_time=99 * HOUR)
    plain = memory.recall("pablo sails")[0].score
    halved = memory.with_recency(lambda age: 0.5 ** (age / HOUR)).recall("pablo sails")[0]
    assert halved.score == plain * 0.5
    assert memory.recall("pablo sails")[0].score == plain  # the original is unchanged


def test_recency_half_life_must_be_positive(store: Store) -> None:
    with pytest.raises(InvalidError):
        Memory(store, MemoryConfig(recency=RecencyConfig(exponential=Exponential(
            half_life_ms=0))))


# -- entity extraction ----------------------------------------------------------------------
@pytest.mark.parametrize(("text", "want"), [
    ("Alice Smith met Bob in New York", ["Alice Smith", "Bob", "New York"]),
    ("Alice and Bob", ["Alice", "Bob"]),
    ("Alice, Bob", ["Alice", "Bob"]),
    ("The Eiffel Tower is in Paris.", ["Eiffel Tower", "Paris"]),
    ("When Carol called, I answered", ["Carol"]),
    ("Dave's dog met Dave", ["Dave"]),
    ("no names here at all", []),
    ("Erin\nFrank", ["Erin", "Frank"]),
])
def test_regex_extractor(text: str, want: list[str]) -> None:
    assert regex_entities(text) == want


def test_alice_and_bob_are_never_merged() -> None:
    for text in ("Alice and Bob", "Alice  Bob", "Alice. Bob", "Alice\tBob", "Alice - Bob",
                 "alice Alice and Bob went"):
        got = regex_entities(text)
        assert "Alice" in got and "Bob" in got, text
        assert not any("Alice" in e and "Bob" in e for e in got), text


FIRST = ("Alice Bob Carol Dave Erin Frank Grace Heidi Ivan Judy Karl Liam Mona Nina Oscar "
         "Paul Quinn Rita Sam Tina").split()
LAST = ("Smith Jones Brown Taylor Wilson Davies Evans Thomas Johnson Roberts Walker Wright "
        "Robinson Thompson White").split()


def test_the_regex_extractor_never_finds_more_than_a_fact_may_hold(
        store: Store, clock: ManualClock) -> None:
    """A text within every limit is taken whatever names it holds: of 300 names the
    first 256 (text order) are its entities; a Title Case run past 256 characters is no
    name; a name of exactly 256 characters is one."""
    names = [f"{f} {last}" for f in FIRST for last in LAST]
    assert len(names) == 300 > validate.MAX_ENTITIES
    memory = Memory(store, MemoryConfig(entity_extractor="regex"), clock=clock)
    memory.remember(id="party", text="Invited to the launch party: " + ", ".join(names) + ".")
    title = " ".join(["Annual General Meeting Of The International Society For Very Long "
                      "Title Case Names"] * 4)
    assert len(title) > validate.MAX_ENTITY_CHARS
    memory.remember(id="agm", text=title + " was held in Oslo")
    exact = " ".join(["Abcdefg"] * 32) + "X"  # 32 words: 255 characters, and one
    assert len(exact) == validate.MAX_ENTITY_CHARS
    memory.remember(id="exact", text=f"{exact} met Bob")
    party, agm, met = memory.get("party"), memory.get("agm"), memory.get("exact")
    assert party is not None and party.entities == ["Invited", *names][:validate.MAX_ENTITIES]
    assert agm is not None and agm.entities == ["Oslo"]
    assert met is not None and met.entities == [exact, "Bob"]


@settings(max_examples=100, deadline=None)
@given(count=st.integers(0, 600), width=st.integers(0, 300), every=st.integers(1, 50),
       sep=st.sampled_from([", ", " and ", ". ", " ", "\n", "'s "]),
       noise=st.lists(st.text(st.characters(categories=["Lu", "Ll", "Nd", "Zs", "Po"]),
                              max_size=12), max_size=20))
def test_what_the_regex_extractor_finds_a_fact_may_hold(
        count: int, width: int, every: int, sep: str, noise: list[str]) -> None:
    """Many names, long ones (a capitalised word of up to 300 letters, or a run of words
    joined by spaces), and noise between them: what is found is always takeable."""
    names = [f"P{i}" + "x" * (width if i % every == 0 else 0) for i in range(count)]
    found = regex_entities(sep.join(names) + " ".join(noise))
    assert validate.entities(found) == tuple(found)
    assert len(found) <= validate.MAX_ENTITIES


def test_extractor_fills_entities_when_none_are_given(store: Store, clock: ManualClock) -> None:
    memory = Memory(store, MemoryConfig(entity_extractor="regex"), clock=clock)
    memory.remember(id="e1", text="Alice Smith met Bob in New York")
    memory.remember(id="e2", text="Alice Smith likes tea", entities=["tea"])
    rec = memory.get("e1")
    assert rec is not None and rec.entities == ["Alice Smith", "Bob", "New York"]
    rec = memory.get("e2")
    assert rec is not None and rec.entities == ["tea"]  # the caller's own win
    assert [r.id for r in memory.recall("met", entities=["New York"])] == ["e1"]
    # The default extractor extracts nothing.
    plain = Memory(store, MemoryConfig(), clock=clock, persist=True)
    plain.remember(id="e3", text="Carol met Dave")
    rec = plain.get("e3")
    assert rec is not None and rec.entities == []
    assert memory.with_entity_extractor("none").remember(id="e4", text="Erin").created
    rec = memory.get("e4")
    assert rec is not None and rec.entities == []


# -- forgetting -------------------------------------------------------------------------------
def test_apply_forgetting_expired_for_longer_than(store: Store, clock: ManualClock) -> None:
    config = MemoryConfig(forgetting=ForgettingConfig(expired_for_longer_than_ms=DAY))
    memory = Memory(store, config, clock=clock)
    clock.set(10 * DAY)
    memory.remember(id="long", text="old promo", valid_from=0, valid_to=8 * DAY)
    memory.remember(id="edge", text="edge promo", valid_from=0, valid_to=9 * DAY)
    memory.remember(id="short", text="recent promo", valid_from=0, valid_to=9 * DAY + 1)
    memory.remember(id="live", text="running promo", valid_from=0, valid_to=20 * DAY)
    memory.remember(id="open", text="open promo")
    revision = store.revision
    report = memory.apply_forgetting()  # dry run by default
    assert report.dry_run and report.removed == ["long"]
    assert store.revision == revision and memory.get("long") is not None
    assert memory.apply_forgetting(MaintenanceOptions()).removed == ["long"]
    assert store.revision == revision
    report = memory.apply_forgetting(dry_run=False)
    assert not report.dry_run and report.removed == ["long"]
    assert memory.get("long") is None and memory.get("edge") is not None
    clock.advance(2)
    assert memory.apply_forgetting(dry_run=False).removed == ["edge", "short"]


def test_apply_forgetting_superseded_for_longer_than(store: Store, clock: ManualClock) -> None:
    config = MemoryConfig(supersession="latest-by-subject",
                          forgetting=ForgettingConfig(superseded_for_longer_than_ms=DAY))
    memory = Memory(store, config, clock=clock)
    clock.set(10 * DAY)
    memory.remember(id="v1", text="quinn lives in york", subject="quinn/city", valid_from=0)
    memory.remember(id="v2", text="quinn lives in leeds", subject="quinn/city",
                    valid_from=5 * DAY)
    memory.remember(id="v3", text="quinn lives in hull", subject="quinn/city",
                    valid_from=9 * DAY + HOUR)
    memory.remember(id="v4", text="quinn lives in bath", subject="quinn/city",
                    valid_from=30 * DAY)  # not begun: v3 is not superseded yet
    # v1 superseded since 5 days, v2 since 23 hours: only v1 goes.
    assert memory.apply_forgetting().removed == ["v1"]
    clock.advance(2 * HOUR)
    assert memory.apply_forgetting().removed == ["v1", "v2"]
    report = memory.apply_forgetting(dry_run=False)
    assert report.removed == ["v1", "v2"] and not report.dry_run
    assert [h.id for h in memory.history("v3")] == ["v3", "v4"]
    assert memory.apply_forgetting().removed == []


def test_default_forgetting_and_consolidation_select_nothing(memory: Memory,
                                                             store: Store) -> None:
    memory.remember(id="d1", text="same words", valid_to=1)
    memory.remember(id="d2", text="same words")
    revision = store.revision
    assert memory.apply_forgetting(dry_run=False).removed == []
    report = memory.consolidate(dry_run=False)
    assert report.groups == [] and report.added == []
    assert store.revision == revision


def test_custom_forgetting_policy(memory: Memory) -> None:
    memory.remember(id="c1", text="x")
    memory.remember(id="c2", text="y")
    seen: list[int] = []

    def policy(m: Memory, now: int) -> list[str]:
        seen.append(now)
        return ["c2"]

    custom = memory.with_forgetting(policy)
    assert custom.apply_forgetting().removed == ["c2"]
    assert memory.apply_forgetting().removed == []  # the original is unchanged
    assert custom.apply_forgetting(dry_run=False).removed == ["c2"]
    assert memory.get("c2") is None and seen == [memory.clock.now_ms()] * 2


# -- consolidation ------------------------------------------------------------------------------
def test_consolidate_duplicates(store: Store, clock: ManualClock) -> None:
    config = MemoryConfig(consolidation=ConsolidationConfig(duplicates=Duplicates()))
    memory = Memory(store, config, clock=clock)
    memory.remember(id="u1", text="Rita likes green tea", subject="rita/drink")
    clock.advance(10)
    memory.remember(id="u2", text="rita likes green tea!", subject="rita/drink")
    clock.advance(10)
    memory.remember(id="u3", text="Rita likes green tea", subject="rita/drink")
    memory.remember(id="u4", text="Rita likes green tea", subject="other/subject")
    memory.remember(id="u5", text="Rita likes black tea", subject="rita/drink")
    revision = store.revision

    report = memory.consolidate()  # dry run by default
    assert report.dry_run and report.added == [] and report.removed == []
    assert len(report.groups) == 1
    group = report.groups[0]
    assert group.sources == ["u1", "u2", "u3"]
    assert store.revision == revision
    assert memory.consolidate(ConsolidateOptions()).groups == report.groups

    report = memory.consolidate(dry_run=False)
    assert not report.dry_run
    assert report.added == [group.summary_id] and report.removed == []
    summary = memory.get(group.summary_id)
    assert summary is not None
    assert summary.status == "current" and summary.subject == "rita/drink"
    assert sorted(summary.supersedes) == ["u1", "u2", "u3"]
    for fid in ("u1", "u2", "u3"):  # the sources stay, as history
        rec = memory.get(fid)
        assert rec is not None and rec.status == "superseded"
        assert rec.superseded_by == [group.summary_id]
    assert {r.id for r in memory.recall("rita green tea")} == {group.summary_id, "u4", "u5"}

    revision = store.revision
    again = memory.consolidate(dry_run=False)
    assert again.added == [] and again.groups == []
    assert store.revision == revision


def test_consolidation_summary_ids_derive_from_sources(tmp_path: Path) -> None:
    ids: list[list[str]] = []
    for n in range(2):
        with Store.open(tmp_path / f"s{n}", sync="none") as store:
            config = MemoryConfig(consolidation=ConsolidationConfig(duplicates=Duplicates()))
            memory = Memory(store, config, clock=ManualClock(1_000 + n * 777))
            memory.remember(id="a", text="sam rows")
            memory.remember(id="b", text="Sam rows.")
            ids.append(memory.consolidate(dry_run=False).added)
    assert ids[0] == ids[1] and len(ids[0]) == 1



_ENDS = st.one_of(st.none(), st.tuples(st.sampled_from(["ttl", "valid_to"]),
                                        st.integers(1, 5_000)))
_META = st.dictionaries(st.sampled_from(["user", "topic", "origin"]),
                        st.sampled_from(["a", "b", 1]), max_size=3)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sources=st.lists(st.tuples(_ENDS, _META), min_size=2, max_size=4),
       later=st.integers(0, 6_000))
def test_a_summary_ends_with_its_sources_and_keeps_their_shared_metadata(
        tmp_path_factory: pytest.TempPathFactory,
        sources: list[tuple[tuple[str, int] | None, dict[str, object]]], later: int) -> None:
    # Found by a repro: two duplicates with a one-second TTL were consolidated, and
    # their summary (no TTL, no metadata) was recalled forever after, and survived a
    # purging forget by the metadata both sources carried.
    clock = ManualClock(1_000_000)
    config = MemoryConfig(consolidation=ConsolidationConfig(duplicates=Duplicates()),
                          forgetting="expired-ttl")
    with Store.open(tmp_path_factory.mktemp("s") / "s", sync="none") as store:
        memory = Memory(store, config, clock=clock)
        for n, (end, meta) in enumerate(sources):
            timing = ({} if end is None else {"ttl_ms": end[1]} if end[0] == "ttl"
                      else {"valid_to": clock.now_ms() + end[1]})
            memory.remember(id=f"s{n}", text="the door code is 4711" + "!" * n,
                            subject="door", metadata=meta or None, **timing)
        records = [memory.get(f"s{n}") for n in range(len(sources))]
        ends = [r.expires_at if r.ttl_ms is not None else r.valid_to
                for r in records if r is not None]
        last = None if None in ends else max(e for e in ends if e is not None)
        shared = {k: v for k, v in sources[0][1].items()
                  if all(k in m and m[k] == v for _, m in sources)}
        (summary_id,) = memory.consolidate(dry_run=False).added
        summary = memory.get(summary_id)
        assert summary is not None
        assert (summary.metadata or {}) == shared
        assert summary.valid_to == last
        clock.advance(later)
        alive = last is None or clock.now_ms() < last
        summary = memory.get(summary_id)
        assert summary is not None and summary.status == ("current" if alive else "expired")
        assert ({r.id for r in memory.recall("door code 4711")} == {summary_id}) == alive
        by_ttl = any(end is not None and end[0] == "ttl" and records[n] is not None
                     and records[n].expires_at == last for n, (end, _) in enumerate(sources))
        forgotten = memory.apply_forgetting(dry_run=True).removed
        assert (summary_id in forgotten) == (by_ttl and not alive)
        if shared:
            memory.forget({"metadata": shared}, purge=True)
            assert memory.get(summary_id) is None



def test_texts_without_words_are_duplicates_only_when_equal(store: Store,
                                                            clock: ManualClock) -> None:
    # Found by a repro: "👍" and "👎" (no word each) were merged as exact duplicates, so
    # the thumbs-up stopped being current.
    config = MemoryConfig(consolidation=ConsolidationConfig(duplicates=Duplicates()))
    memory = Memory(store, config, clock=clock)
    for n, text in enumerate(["\N{THUMBS UP SIGN}", "\N{THUMBS DOWN SIGN}", "?!",
                              "\N{THUMBS UP SIGN}"]):
        memory.remember(id=f"r{n}", text=text, subject="reaction")
    report = memory.consolidate()
    assert [g.sources for g in report.groups] == [["r0", "r3"]]


_REMOVING = MemoryConfig(consolidation=ConsolidationConfig(
    duplicates=Duplicates(near_threshold=1.0), remove_sources=True))


def test_a_rerun_with_allow_destructive_removes_the_sources_an_earlier_run_kept(
        store: Store, clock: ManualClock) -> None:
    # Found by a repro: the first run lacked the flag, and once the sources were
    # superseded by their summary no later run found them again, flag or not.
    memory = Memory(store, _REMOVING, clock=clock)
    memory.remember(id="a", text="same")
    memory.remember(id="b", text="same.")
    first = memory.consolidate(dry_run=False)
    assert first.removed == [] and first.sources_kept == KEPT_NOT_ALLOWED
    (group,) = first.groups
    revision = store.revision
    for flag in (False, True):  # dry runs: the same groups, nothing changed
        planned = memory.consolidate(dry_run=True, allow_destructive=flag)
        assert planned.groups == [group] and planned.added == planned.removed == []
        assert planned.sources_kept == (None if flag else KEPT_NOT_ALLOWED)
    kept = memory.consolidate(dry_run=False)  # still without the flag: nothing changes
    assert kept.groups == [group] and kept.removed == [] and kept.sources_kept
    assert store.revision == revision
    assert memory.get("a") is not None and memory.get("b") is not None
    done = memory.consolidate(dry_run=False, allow_destructive=True)
    assert done.groups == [group] and done.added == [] and done.removed == ["a", "b"]
    assert done.sources_kept is None
    assert memory.get("a") is None and memory.get("b") is None
    summary = memory.get(group.summary_id)
    assert summary is not None and summary.status == "current"
    assert [r.id for r in memory.recall("same")] == [group.summary_id]
    revision = store.revision
    again = memory.consolidate(dry_run=False, allow_destructive=True)
    assert again.groups == [] and again.removed == [] and store.revision == revision


@pytest.mark.parametrize("own_id", ["mine", "c-0123456789abcdef0123456789abcdef",
                                    "summary-of-x1", "summary-of-x1-x2-x3"])
def test_a_callers_fact_that_supersedes_others_is_never_taken_for_a_summary(
        store: Store, clock: ManualClock, own_id: str) -> None:
    memory = Memory(store, _REMOVING, clock=clock)
    memory.remember(id="x1", text="olga skis", subject="olga")
    memory.remember(id="x2", text="olga snowboards", subject="olga")
    # "summary-of-...": the id of a summary, but of other facts than it supersedes.
    fid = (summary_id(own_id.split("-")[2:]) if own_id.startswith("summary-of-")
           else own_id)
    memory.remember(id=fid, text="olga does winter sports", subject="olga",
                    supersedes=["x1", "x2"])
    for dry_run in (True, False):
        report = memory.consolidate(dry_run=dry_run, allow_destructive=True)
        assert report.groups == [] and report.removed == []
    assert memory.get("x1") is not None and memory.get("x2") is not None


_SPACES = [(), ("n1",), ("n1", "deep"), ("n10",), ("n2",)]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spaces=st.lists(st.sampled_from(_SPACES), min_size=1, max_size=4, unique=True),
       scope=st.sampled_from(_SPACES))
def test_a_scoped_rerun_removes_only_the_kept_sources_at_or_under_its_namespace(
        tmp_path_factory: pytest.TempPathFactory, spaces: list[tuple[str, ...]],
        scope: tuple[str, ...]) -> None:
    with Store.open(tmp_path_factory.mktemp("s") / "s", sync="none") as store:
        memory = Memory(store, _REMOVING, clock=ManualClock(1_000_000))
        for n, ns in enumerate(spaces):
            for k in range(2):
                memory.remember(id=f"f{n}-{k}", text="tea time" + "!" * k,
                                namespace=list(ns) or None)
        assert len(memory.consolidate(dry_run=False).added) == len(spaces)
        inside = [f"f{n}-{k}" for n, ns in enumerate(spaces) if ns[: len(scope)] == scope
                  for k in range(2)]
        revision = store.revision
        planned = memory.consolidate(dry_run=True, allow_destructive=True,
                                     namespace=list(scope) or None)
        assert sorted(s for g in planned.groups for s in g.sources) == sorted(inside)
        assert planned.removed == [] and store.revision == revision
        done = memory.consolidate(dry_run=False, allow_destructive=True,
                                  namespace=list(scope) or None)
        assert done.groups == planned.groups and sorted(done.removed) == sorted(inside)
        for n in range(len(spaces)):
            for k in range(2):
                assert (memory.get(f"f{n}-{k}") is None) == (f"f{n}-{k}" in inside)

# -- observers ------------------------------------------------------------------------------
def test_observers_are_called_after_each_committed_change(memory: Memory, store: Store,
                                                          clock: ManualClock) -> None:
    seen: list[tuple[Observation, int, bool]] = []

    def observer(o: Observation) -> None:
        # Called after the commit: the change is visible, the revision is the store's.
        seen.append((o, store.revision, all(store.has_document(i) for i in o.ids)))

    watched = memory.with_observer(observer)
    r = watched.remember(id="o1", text="trudy hikes")
    assert seen == [(Observation("remember", ["o1"], store.revision), store.revision, True)]
    watched.remember(id="o1", text="trudy hikes")  # a retry: nothing committed
    watched.remember_many([{"id": "o2", "text": "a"}, {"id": "o1", "text": "trudy hikes"},
                           {"id": "o3", "text": "b"}])
    assert [s[0].ids for s in seen] == [["o1"], ["o2", "o3"]]
    assert seen[-1][0].revision == store.revision
    watched.forget({"ids": ["o2"]}, dry_run=True)  # nothing committed
    assert len(seen) == 2
    watched.forget({"ids": ["o2", "nope"]})
    assert seen[-1][0] == Observation("forget", ["o2"], store.revision)
    assert seen[-1][2] is False  # visible: already gone
    memory.remember(id="o4", text="unwatched")  # the original has no observer
    assert len(seen) == 3
    assert r.created


# -- with_* --------------------------------------------------------------------------------
def test_with_methods_return_new_memories_and_leave_the_original_unchanged(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    calls: list[Observation] = []
    other_clock = ManualClock(5)
    variants = [
        memory.with_supersession("latest-by-subject"),
        memory.with_supersession(lambda fact, members: Links([], [])),
        memory.with_recency(lambda age: 1.0),
        memory.with_forgetting(lambda m, now: []),
        memory.with_consolidation(lambda m, now: []),
        memory.with_entity_extractor("regex"),
        memory.with_observer(calls.append),
        memory.with_clock(other_clock),
    ]
    for v in variants:
        assert isinstance(v, Memory) and v is not memory and v.store is store
    assert variants[-1].clock is other_clock and memory.clock is clock
    # The original: no supersession, no extractor, no observer.
    memory.remember(id="w1", text="Uma lives in Oslo", subject="uma/city", valid_from=1)
    memory.remember(id="w2", text="Uma lives in Rome", subject="uma/city", valid_from=2)
    w1 = memory.get("w1")
    assert w1 is not None and w1.status == "current" and w1.entities == []
    assert calls == []
    # The copies do what they say.
    variants[5].remember(id="w3", text="Victor met Wendy")
    w3 = memory.get("w3")
    assert w3 is not None and w3.entities == ["Victor", "Wendy"]
    r = variants[0].remember(id="w4", text="Uma lives in Lima", subject="uma/city",
                             valid_from=3)
    assert sorted(r.superseded) == ["w1", "w2"]
    variants[6].remember(id="w5", text="x")
    assert [c.ids for c in calls] == [["w5"]]
    assert variants[7].remember(id="w6", text="y").ingest_time == 5
    # Observers added to a copy do not leak into a further copy of the original.
    assert memory.with_observer(lambda o: None).session.observers != \
        variants[6].session.observers


def test_with_methods_reject_bad_policies(memory: Memory) -> None:
    calls: list[Callable[[], object]] = [
        lambda: memory.with_supersession("newest"),
                 lambda: memory.with_supersession(3),  # type: ignore[arg-type]
                 lambda: memory.with_entity_extractor("spacy"),
                 lambda: memory.with_recency(2.0),  # type: ignore[arg-type]
                 lambda: memory.with_forgetting({"expiredTtl": True}),  # type: ignore[arg-type]
                 lambda: memory.with_consolidation("duplicates"),  # type: ignore[arg-type]
                 lambda: memory.with_observer(None),  # type: ignore[arg-type]
                 lambda: memory.with_clock(object())]  # type: ignore[arg-type]
    for call in calls:
        with pytest.raises(InvalidError):
            call()


#: Every with_* call: (takes None, takes a built-in's name).
WITH = {"with_supersession": (False, True), "with_recency": (True, False),
        "with_entity_extractor": (False, True), "with_forgetting": (True, False),
        "with_consolidation": (True, False), "with_observer": (False, False),
        "with_clock": (False, False)}


class _NowMsNotCallable:
    now_ms = 5


#: Values that are no callable (nor a clock): what a caller may pass by mistake.
ODD = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
       | st.binary() | st.lists(st.integers(), max_size=3)
       | st.dictionaries(st.text(max_size=5), st.integers(), max_size=3)
       | st.just(_NowMsNotCallable()) | st.just(object()))


def test_the_table_of_with_calls_names_every_one() -> None:
    assert {n for n in dir(Memory) if n.startswith("with_")} == set(WITH)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(sorted(WITH)), value=ODD)
def test_every_with_call_refuses_a_value_that_is_no_callable_at_once(
        memory: Memory, name: str, value: object) -> None:
    takes_none, names = WITH[name]
    builtin = {"with_supersession": SUPERSESSION, "with_entity_extractor": EXTRACTORS}
    assume(not (takes_none and value is None))
    assume(not (names and isinstance(value, str) and value in builtin[name]))
    with pytest.raises(InvalidError):
        getattr(memory, name)(value)


# -- MemoryConfig JSON -----------------------------------------------------------------------
CONFIGS = [
    MemoryConfig(),
    MemoryConfig(supersession="latest-by-subject", entity_extractor="regex",
                 historical_weight=0.5),
    MemoryConfig(recency=RecencyConfig(exponential=Exponential(half_life_ms=86_400_000)),
                 forgetting=ForgettingConfig(expired_for_longer_than_ms=1,
                                             superseded_for_longer_than_ms=2),
                 consolidation=ConsolidationConfig(duplicates=Duplicates(near_threshold=0.8),
                                                   remove_sources=True)),
]


@pytest.mark.parametrize("config", CONFIGS)
def test_memory_config_round_trips_through_camel_case_json(config: MemoryConfig) -> None:
    raw = config_to_json(config)
    assert config_from_json(raw) == config
    assert config_from_json(raw.decode()) == config
    data = json.loads(raw)
    keys: set[str] = set()

    def walk(v: object) -> None:
        if isinstance(v, dict):
            keys.update(v)
            for x in v.values():
                walk(x)

    walk(data)
    assert all("_" not in k for k in keys), keys


def test_memory_config_json_names_are_camel_case() -> None:
    config = config_from_json(json.dumps({
        "supersession": "latest-by-subject",
        "recency": {"exponential": {"halfLifeMs": 1000}},
        "forgetting": {"expiredForLongerThanMs": 5, "supersededForLongerThanMs": 6},
        "consolidation": {"duplicates": {"nearThreshold": 0.9}, "removeSources": False},
        "entityExtractor": "regex",
        "historicalWeight": 0.5,
    }))
    assert config.supersession == "latest-by-subject"
    assert isinstance(config.recency, RecencyConfig)
    assert config.recency.exponential.half_life_ms == 1000
    assert isinstance(config.forgetting, ForgettingConfig)
    assert config.forgetting.superseded_for_longer_than_ms == 6
    assert config.entity_extractor == "regex" and config.historical_weight == 0.5
    assert config_from_json("{}") == MemoryConfig()


@pytest.mark.parametrize("raw", [
    '{"supersesion": "none"}',
    '{"entity_extractor": "regex"}',  # snake_case is not the JSON form
    '{"recency": {"exponential": {"halfLifeMs": 1, "extra": 2}}}',
    '{"forgetting": {"expiredForLongerThan": 5}}',
    '{"supersession": "newest"}',
    '{"recency": "exponential"}',
    '[]',
    'not json',
    '{"recency": {"exponential": {"halfLifeMs": 1.5}}}',
])
def test_memory_config_rejects_unknown_fields_and_values(raw: str) -> None:
    with pytest.raises(InvalidError):
        config_from_json(raw)


@pytest.mark.parametrize("config", [
    MemoryConfig(supersession="newest"),  # type: ignore[arg-type]
    MemoryConfig(entity_extractor="spacy"),  # type: ignore[arg-type]
    MemoryConfig(recency=RecencyConfig(exponential=Exponential(
        half_life_ms="1h"))),  # type: ignore[arg-type]
    MemoryConfig(historical_weight="half"),  # type: ignore[arg-type]
    MemoryConfig(recency="exponential"),  # type: ignore[arg-type]
])
def test_memory_rejects_an_ill_typed_config(store: Store, config: MemoryConfig) -> None:
    """Regression: a MemoryConfig built in Python is not type-checked by its
    constructor; Memory used to raise KeyError or TypeError, or accept it and fail
    later inside recall."""
    with pytest.raises(InvalidError):
        Memory(store, config)


@pytest.mark.parametrize(("make", "call"), [
    (lambda m: m.with_forgetting(lambda mem, now: None), lambda m: m.apply_forgetting()),
    (lambda m: m.with_forgetting(lambda mem, now: 5), lambda m: m.apply_forgetting()),
    (lambda m: m.with_forgetting(lambda mem, now: [b"id"]), lambda m: m.apply_forgetting()),
    (lambda m: m.with_consolidation(lambda mem, now: None), lambda m: m.consolidate()),
    (lambda m: m.with_consolidation(lambda mem, now: [5]), lambda m: m.consolidate()),
    (lambda m: m.with_consolidation(lambda mem, now: [(["x"], 5)]), lambda m: m.consolidate()),
    (lambda m: m.with_recency(lambda age: float("nan")), lambda m: m.recall("cats")),
    (lambda m: m.with_recency(lambda age: None), lambda m: m.recall("cats")),
    (lambda m: m.with_recency(lambda age: -1.0), lambda m: m.recall("cats")),
    (lambda m: m.with_recency(lambda age: "x"), lambda m: m.recall("cats")),
], ids=["forget-none", "forget-int", "forget-bytes", "consolidate-none", "consolidate-int",
        "consolidate-text", "recency-nan", "recency-none", "recency-negative", "recency-str"])
def test_a_custom_policys_answer_of_the_wrong_kind_is_invalid_and_changes_nothing(
        memory: Memory, make: Callable[[Memory], Memory],
        call: Callable[[Memory], object]) -> None:
    memory.remember("alpha fact about cats", id="cats")
    revision = memory.store.revision
    with pytest.raises(InvalidError, match="policy returned"):
        call(make(memory))
    assert memory.store.revision == revision


def test_a_recency_policy_may_answer_any_real_number(memory: Memory) -> None:
    memory.remember("alpha fact about cats", id="cats")
    for answer in (1, 0.5, np.float32(0.5), np.float64(0.0)):
        assert [r.id for r in memory.with_recency(lambda age, a=answer: a).recall("cats")] \
            == ["cats"]


def _superseded_in_a_cycle(memory: Memory, ids: list[str]) -> list[str]:
    """The facts of ``ids`` from which their supersession links lead back to them."""
    preds = {fid: memory.get(fid).supersedes for fid in ids}  # type: ignore[union-attr]
    looped = []
    for start in ids:
        seen, todo = set(), list(preds[start])
        while todo:
            fid = todo.pop()
            if fid == start:
                looped.append(start)
                break
            if fid not in seen:
                seen.add(fid)
                todo.extend(preds.get(fid, ()))
    return looped


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.tuples(st.none() | st.integers(0, 50), st.none() | st.integers(0, 20),
                                st.booleans()), min_size=1, max_size=10))
def test_latest_by_subject_never_closes_a_supersession_cycle(
        tmp_path_factory: pytest.TempPathFactory,
        steps: list[tuple[int | None, int | None, bool]]) -> None:
    """A supersedes list may run against time order (a fact that begins earlier
    superseding a later one); the policy's own links never close a ring with it, in
    which every fact would be superseded and none current (and which import refuses).
    Found by an export/import round trip: such a store's export could not be
    imported."""
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path_factory.mktemp("s") / "s", sync="none") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        ids: list[str] = []
        for valid_from, target, batch in steps:
            fields: dict[str, object] = {"text": f"fact {len(ids)}", "subject": "job"}
            if valid_from is not None:
                fields["valid_from"] = valid_from
            if target is not None and ids:
                fields["supersedes"] = [ids[target % len(ids)]]
            made = memory.remember_many([fields]) if batch else [memory.remember(**fields)]
            ids.extend(r.id for r in made)
        assert _superseded_in_a_cycle(memory, ids) == []
        assert any(memory.get(fid).status == "current" for fid in ids)  # type: ignore[union-attr]
