"""contradict answers from the candidates it keeps between calls exactly as comparing
every candidate pair does (issue 16): the same pairs, in the same order, with the same
scores, counts, bounds and cursors, on every page — after writes, forgets,
supersession, replaced documents, clock moves (expiry, not-yet-valid facts), a
checkpoint's restore, a replay and a compaction; and it keeps them up to date by
scoring only what changed.

The reference is the straightforward scan (``contradiction_pairs.scan``), which
tests/memory/test_contradict_bounded.py checks against a brute-force comparison of
every pair.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.holographic import contradiction
from holomem.api.memory.holographic import kept as contradiction_kept
from holomem.api.memory.types import ContradictResult
from holomem.errors import ConflictError, InvalidError, NotFoundError
from holomem.projections import candidates
from holomem.projections.catalog import Catalog
from holomem.projections.entities import Entities
from holomem.projections.facts import FactIndex

NAMES = ["Al", "Bo", "Cy"]
WORDS = "lives in paris berlin likes tea coffee".split()
START = 1_000_000

fact = st.fixed_dictionaries({
    "text": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    "entities": st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
    "subject": st.sampled_from([None, "s1", "s2"]),
    "namespace": st.sampled_from([[], ["x"]]),
    "metadata": st.fixed_dictionaries({"m": st.integers(0, 1)}),
}, optional={
    "ttl_ms": st.integers(1, 4000),
    "valid_from": st.integers(START - 2000, START + 4000),
    "supersedes": st.integers(0, 40),  # an index among the facts so far
})
query = st.fixed_dictionaries({
    "k": st.sampled_from([1, 2, 50]),
    "max_pairs": st.sampled_from([1, 3, 1000]),
}, optional={
    "namespace": st.sampled_from([[], ["x"]]),
    "subject": st.just("s1"),
    "entity": st.just("Al"),
    "filter": st.just({"metadata": {"m": 1}}),
})
op = st.one_of(
    st.tuples(st.just("remember"), st.lists(fact, min_size=1, max_size=6)),
    st.tuples(st.just("forget"), st.integers(0, 40), st.booleans()),
    st.tuples(st.just("replace"), st.integers(0, 40), fact),
    st.tuples(st.just("document"), fact),
    st.tuples(st.just("clock"), st.integers(-3000, 5000)),
    st.tuples(st.just("reopen"), st.booleans()),
    st.tuples(st.just("compact")),
    st.tuples(st.just("ask"), query),
)


def pages(m: Memory, **request: Any) -> Iterator[ContradictResult]:
    cursor = None
    while True:
        page = m.contradict(cursor=cursor, **request)
        yield page
        cursor = page.next_cursor
        if cursor is None:
            return


def scanned(m: Memory, request: dict[str, Any], monkeypatch: pytest.MonkeyPatch
            ) -> list[ContradictResult]:
    with monkeypatch.context() as mp:
        mp.setattr(contradiction_kept, "answer", lambda *a, **k: None)
        return list(pages(m, **request))


def check(m: Memory, request: dict[str, Any], mp: pytest.MonkeyPatch) -> None:
    want = scanned(m, request, mp)
    got = list(pages(m, **request))
    assert got == want


class World:
    """A store driven by the ops; ``ids`` are the facts remembered, in order."""

    def __init__(self, path: Path, supersession: bool) -> None:
        self.path = path
        self.clock = ManualClock(START)
        self.config = MemoryConfig(supersession="latest-by-subject" if supersession
                                   else "none")
        self.store = Store.open(path, sync="none")
        self.m = Memory(self.store, self.config, clock=self.clock)
        self.ids: list[str] = []
        self.versions: dict[str, list[str]] = {}  # subject -> its facts, in order

    def remember(self, items: list[dict[str, Any]]) -> None:
        batch = []
        for f in items:
            f = dict(f)
            fid = f"f{len(self.ids) + len(batch)}"
            if "supersedes" in f:
                earlier = self.ids[f["supersedes"] % len(self.ids)] if self.ids else None
                f["supersedes"] = [earlier] if earlier else []
            batch.append({**f, "id": fid, "text": f"{f['text']} {fid}"})
        try:
            self.m.remember_many(batch)
        except (InvalidError, NotFoundError, ConflictError):
            return  # a supersession the store refuses (a forgotten id, another namespace)
        self.ids += [b["id"] for b in batch]
        for b in batch:
            if b.get("subject") is not None:
                self.versions.setdefault(b["subject"], []).append(b["id"])

    def reopen(self, checkpoint: bool) -> None:
        if checkpoint:
            self.store.checkpoint()  # None when nothing is new since the last one
        self.store.close()
        self.store = Store.open(self.path, sync="none")
        self.m = Memory(self.store, self.config, clock=self.clock)

    def run(self, step: tuple[Any, ...], mp: pytest.MonkeyPatch) -> None:
        kind = step[0]
        if kind == "remember":
            self.remember(step[1])
        elif kind == "forget" and self.ids:
            self.m.forget({"ids": [self.ids[step[1] % len(self.ids)]]}, include_chain=step[2])
        elif kind == "replace" and self.ids:
            f = step[2]
            self.store.add_documents([{"id": self.ids[step[1] % len(self.ids)],
                                       "text": f["text"], "entities": f["entities"]}])
        elif kind == "document":
            self.store.add_documents([{"id": f"d{len(self.ids)}", "text": step[1]["text"],
                                       "entities": step[1]["entities"]}])
        elif kind == "clock":
            self.clock.advance(step[1])
        elif kind == "reopen":
            self.reopen(step[1])
        elif kind == "compact":
            self.store.compact()
        elif kind == "ask":
            check(self.m, step[1], mp)
        check(self.m, {"k": 50, "max_pairs": 1000}, mp)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(op, min_size=1, max_size=8), supersession=st.booleans(),
       capacity=st.sampled_from([2, 5, candidates.CAPACITY]),
       catch_up=st.sampled_from([1, 4, contradiction.CATCH_UP_BUDGET]),
       block=st.sampled_from([1, 3, contradiction.PAIR_BUDGET]))
def test_kept_candidates_answer_every_page_exactly_as_the_scan_does(
        tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[Any, ...]],
        supersession: bool, capacity: int, catch_up: int, block: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(candidates, "CAPACITY", capacity)
        mp.setattr(contradiction, "CATCH_UP_BUDGET", catch_up)
        mp.setattr(contradiction, "PAIR_BUDGET", block)
        world = World(tmp_path_factory.mktemp("k") / "s", supersession)
        try:
            for step in steps:
                world.run(step, mp)
        finally:
            world.store.close()


SUBJECTS = ["s1", "s2", "s3"]
version = st.fixed_dictionaries({
    "text": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
    "entities": st.lists(st.sampled_from(NAMES), max_size=2, unique=True),
    "subject": st.sampled_from(SUBJECTS),
}, optional={
    "ttl_ms": st.integers(1, 4000),
    "valid_from": st.integers(START - 2000, START + 6000),
})
history_op = st.one_of(
    st.tuples(st.just("remember"), st.lists(version, min_size=1, max_size=4)),
    st.tuples(st.just("newest"), st.sampled_from(SUBJECTS), st.booleans()),
    st.tuples(st.just("forget"), st.integers(0, 60), st.booleans()),
    st.tuples(st.just("clock"), st.integers(-4000, 5000)),
    st.tuples(st.just("ask"), query),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=st.integers(2, 8), steps=st.lists(history_op, min_size=1, max_size=8),
       capacity=st.sampled_from([3, candidates.CAPACITY]),
       catch_up=st.sampled_from([2, contradiction.CATCH_UP_BUDGET]))
def test_with_many_versions_per_subject_every_page_is_the_scans(
        tmp_path_factory: pytest.TempPathFactory, versions: int,
        steps: list[tuple[Any, ...]], capacity: int, catch_up: int) -> None:
    """Subjects with many versions under latest-by-subject (only the newest current,
    some beginning later or running out of time): facts stop being current and become
    current again as versions arrive, the newest is forgotten (alone or with its
    chain) and the clock moves both ways; every page is still the scan's."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(candidates, "CAPACITY", capacity)
        mp.setattr(contradiction, "CATCH_UP_BUDGET", catch_up)
        world = World(tmp_path_factory.mktemp("h") / "s", supersession=True)
        try:
            for v in range(versions):
                world.remember([{"text": f"{WORDS[(v + i) % len(WORDS)]} tea v{v}",
                                 "entities": NAMES[i : i + 2], "subject": subject}
                                for i, subject in enumerate(SUBJECTS)])
                world.remember([{"text": f"Al likes coffee {v}", "entities": ["Al", "Bo"]}])
            check(world.m, {"k": 50, "max_pairs": 1000}, mp)
            for step in steps:
                if step[0] == "newest":
                    chain = [i for i in world.versions.get(step[1], [])
                             if world.m.get(i) is not None]
                    if chain:
                        world.m.forget({"ids": [chain[-1]]}, include_chain=step[2])
                    check(world.m, {"k": 50, "max_pairs": 1000}, mp)
                else:
                    world.run(step, mp)
        finally:
            world.store.close()


def counting(mp: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts how many pages the kept candidates answered, and how many pairs were scored."""
    seen = {"answered": 0, "declined": 0, "scored": 0}
    real_answer = contradiction_kept.answer
    real_measure = contradiction.measure

    def answer(*args: Any, **kwargs: Any) -> Any:
        page = real_answer(*args, **kwargs)
        seen["answered" if page is not None else "declined"] += 1
        return page

    def measure(a: np.ndarray, *args: Any) -> Any:
        seen["scored"] += len(a)
        return real_measure(a, *args)

    mp.setattr(contradiction_kept, "answer", answer)
    mp.setattr(contradiction, "measure", measure)
    return seen


def counting_builds(mp: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts how many times the candidates are built (from nothing)."""
    builds = {"n": 0}
    real = candidates.Candidates._build  # counted, not changed

    def build(self: candidates.Candidates) -> None:
        builds["n"] += 1
        real(self)

    mp.setattr(candidates.Candidates, "_build", build)
    return builds


def test_after_the_first_call_only_the_new_facts_pairs_are_scored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, clock=ManualClock(START))
        m.remember_many([{"id": f"u{i}", "text": f"User note {i} w{i % 7}",
                          "entities": ["User"]} for i in range(300)] +
                        [{"text": f"Kim lives in town {i}", "subject": "kim/home",
                          "entities": ["Kim"]} for i in range(3)])
        seen = counting(monkeypatch)
        first = m.contradict(k=5)
        assert seen == {"answered": 1, "declined": 0, "scored": 300 * 299 // 2 + 3}
        assert first.compared_pairs == 300 * 299 // 2 + 3
        again = m.contradict(k=5)
        assert again == first and seen["scored"] == 300 * 299 // 2 + 3  # nothing new
        m.remember({"text": "User note new", "entities": ["User"]})
        after = m.contradict(k=5)
        assert seen["scored"] == 300 * 299 // 2 + 3 + 300  # the new fact's 300 pairs
        assert after.compared_pairs == first.compared_pairs + 300
        assert seen["answered"] == 3 and seen["declined"] == 0
        # A forget takes its pairs back without scoring anything.
        m.forget({"ids": ["u7"]})
        gone = m.contradict(k=5)
        assert gone.compared_pairs == after.compared_pairs - 300
        assert seen["scored"] == 300 * 299 // 2 + 3 + 300 and seen["answered"] == 4


def test_a_reopened_store_builds_them_again_and_pages_the_same(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [{"text": f"Ann {'likes' if i % 2 else 'paints'} item {i % 5}",
              "entities": ["Ann", f"E{i % 3}"]} for i in range(60)]
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, clock=ManualClock(START))
        m.remember_many(texts)
        before = list(pages(m, k=7, max_pairs=100))
        assert len(before) > 3
        assert store.checkpoint() is not None
    for _ in range(2):  # from the checkpoint, then again
        with Store.open(tmp_path / "s", sync="none") as store:
            m = Memory(store, clock=ManualClock(START))
            seen = counting(monkeypatch)
            assert list(pages(m, k=7, max_pairs=100)) == before
            assert seen["declined"] == 0 and seen["answered"] == len(before)
            monkeypatch.undo()


def test_the_kept_pairs_stay_bounded_by_their_capacity(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """600 facts of one entity pair up 179,700 ways; at most CAPACITY pairs are kept,
    and pages the kept pairs cannot answer for sure fall back to the scan."""
    monkeypatch.setattr(candidates, "CAPACITY", 64)
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, clock=ManualClock(START))
        m.remember_many([{"text": f"User note {i} w{i % 13}", "entities": ["User"]}
                         for i in range(600)])
        seen = counting(monkeypatch)
        got = list(pages(m, k=10, max_pairs=20_000))
        with store.reading() as view:
            assert len(view.candidates.keys) <= 64 and view.candidates.floor is not None
        assert seen["answered"] >= 1
        assert sum(p.compared_pairs for p in got) == 600 * 599 // 2
        assert got == scanned(m, {"k": 10, "max_pairs": 20_000}, monkeypatch)


@settings(max_examples=60, deadline=None)
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from([0.25, 0.5, 0.75, 1.0]),
                                           st.integers(0, 1 << 40)), max_size=40),
                        max_size=6),
       capacity=st.sampled_from([3, 50, 1000]))
def test_the_kept_pairs_are_the_best_offered_in_rank_order(
        batches: list[list[tuple[float, int]]], capacity: int) -> None:
    """Offered in batches (a few into many kept, or many at once), the kept pairs are the
    ``capacity`` best by score, then pair order, and the floor is the best one dropped."""
    catalog = Catalog()
    facts = FactIndex(catalog)
    kept = candidates.Candidates(catalog, facts, Entities(catalog), capacity=capacity)
    seen: dict[int, float] = {}
    for batch in [[(0.5, k) for k in range(0, 2000, 3)], *batches]:
        fresh = {k: s for s, k in batch if k not in seen}
        seen.update(fresh)
        keys = np.array(list(fresh), dtype=np.int64)
        score = np.array(list(fresh.values()))
        kept.offer(keys, score, score / 2, score / 3)
    ranked = sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))
    assert list(zip(kept.keys.tolist(), kept.score.tolist(), strict=True)) == ranked[:capacity]
    assert kept.overlap.tolist() == [s / 2 for _, s in ranked[:capacity]]
    assert kept.floor == ((ranked[capacity][1], ranked[capacity][0])
                          if len(ranked) > capacity else None)


def test_forgetting_most_kept_pairs_builds_them_again(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """With pairs dropped for room, losing half the kept ones means the pairs below them
    are unknown: the candidates are built again, and every answer stays the scan's."""
    monkeypatch.setattr(candidates, "CAPACITY", 6)
    builds = counting_builds(monkeypatch)
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, clock=ManualClock(START))
        m.remember_many([{"id": f"n{i}", "text": f"Ann likes item {i % 4} and {i % 3}",
                          "entities": ["Ann"]} for i in range(16)])
        request = {"k": 3, "max_pairs": 1000}
        check(m, request, monkeypatch)
        assert builds["n"] == 1
        while builds["n"] == 1:
            top = m.contradict(k=1).pairs
            assert top
            m.forget({"ids": [top[0].a, top[0].b]})
            check(m, request, monkeypatch)
        assert builds["n"] == 2


def chain_pairs(view: Any) -> int:
    """How many kept pairs join two facts of one supersession chain."""
    comp = view.facts.components()
    keys = view.candidates.keys
    return int((comp[keys >> 32] == comp[keys & ((1 << 32) - 1)]).sum())


def test_versions_of_one_subject_are_never_scored_against_each_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 versions of one subject form one chain: none of its 44,850 pairs can be an
    answer, so none is scored or kept; every answer is still the scan's, also once the
    newest version is forgotten and the one before it is current again (then only the
    current facts' pair with the new one is scored, not the 298 superseded ones')."""
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, MemoryConfig(supersession="latest-by-subject"),
                   clock=ManualClock(START))
        m.remember_many([{"id": f"v{v}", "text": f"Ann lives in city number {v}",
                          "subject": "ann/home", "entities": ["Ann"]} for v in range(300)])
        seen = counting(monkeypatch)
        check(m, {"k": 5, "max_pairs": 1000}, monkeypatch)
        assert seen["scored"] == 0
        with store.reading() as view:
            assert len(view.candidates.keys) == 0 and view.candidates.floor is None
        m.forget({"ids": ["v299"]})
        m.remember({"text": "Ann likes tea", "entities": ["Ann"]})
        check(m, {"k": 5, "max_pairs": 1000}, monkeypatch)
        check(m, {"k": 2, "max_pairs": 7}, monkeypatch)
        assert seen["scored"] == 1  # only the new fact's pair with the current version


def test_many_short_chains_leave_the_kept_pairs_to_the_answerable_ones(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """300 subjects of 6 versions each make 4,500 pairs within chains, more than the
    64 kept: none of them is kept, so the pairs of other facts are kept whole (nothing
    dropped for room) and every page is the scan's."""
    monkeypatch.setattr(candidates, "CAPACITY", 64)
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, MemoryConfig(supersession="latest-by-subject"),
                   clock=ManualClock(START))
        for v in range(6):
            m.remember_many([{"text": f"user {s} lives in city {v}", "subject": f"u{s}/home"}
                             for s in range(300)])
        m.remember_many([{"text": f"Kim likes tea {i}", "entities": ["Kim", "tea"]}
                         for i in range(3)])
        check(m, {"k": 5, "max_pairs": 1000}, monkeypatch)
        with store.reading() as view:
            assert chain_pairs(view) == 0 and view.candidates.floor is None
            assert 0 < len(view.candidates.keys) <= 3
        check(m, {"k": 2, "max_pairs": 5}, monkeypatch)


def test_facts_a_forget_makes_current_again_or_parts_are_scored_then(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forgetting the fact that superseded two others makes both current again: their
    pairs are scored then (they were never kept while superseded). Forgetting the fact
    two current successors both superseded parts their chain: their pair, never
    scored, is scored then. Neither builds the candidates again, and every answer
    stays the scan's."""
    builds = counting_builds(monkeypatch)
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, clock=ManualClock(START))
        m.remember({"id": "a", "text": "Ann lives in Paris", "entities": ["Ann"]})
        m.remember({"id": "b", "text": "Ann lives in Rome", "entities": ["Ann"]})
        m.remember({"id": "x", "text": "Ann lives in Oslo", "entities": ["Ann"],
                    "supersedes": ["a", "b"]})
        m.remember({"id": "d", "text": "Ann lives in Lima", "entities": ["Ann"]})
        request = {"k": 5, "max_pairs": 1000}
        check(m, request, monkeypatch)
        assert [(p.a, p.b) for p in m.contradict(k=5).pairs] == [("x", "d")]
        seen = counting(monkeypatch)
        m.forget({"ids": ["x"]})
        check(m, request, monkeypatch)
        assert ("a", "b") in [(p.a, p.b) for p in m.contradict(k=5).pairs]
        assert seen["scored"] == 3  # a-b, a-d, b-d
        # Two successors of one fact: one chain, both current.
        m.remember({"id": "s1", "text": "Ann works in Bonn", "entities": ["Ann"],
                    "supersedes": ["d"]})
        m.remember({"id": "s2", "text": "Ann works in Graz", "entities": ["Ann"],
                    "supersedes": ["d"]})
        check(m, request, monkeypatch)
        assert ("s1", "s2") not in [(p.a, p.b) for p in m.contradict(k=5).pairs]
        m.forget({"ids": ["d"]})
        check(m, request, monkeypatch)
        assert ("s1", "s2") in [(p.a, p.b) for p in m.contradict(k=5).pairs]
        assert builds["n"] == 1
        with store.reading() as view:
            assert chain_pairs(view) == 0
