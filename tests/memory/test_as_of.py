"""As-of consistency (docs/contract.md §3): for one subject slot, the current fact at time t is
the latest one that had begun by t, for every arrival order of the facts; and
``known_at=T`` ignores the facts and supersession links ingested after T.

Each of the 24 arrival orders of four facts is replayed into its own store, and at
many evaluation times (before the first, at each start, between starts, after the
last) and at every knowledge time (before any arrival, after each arrival, never
ignoring) recall, explain and the statuses they report are compared with a direct
reading of §3.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from holomem import ManualClock, Memory, MemoryConfig, Store

STARTS = (100, 200, 300, 400)  # t1 < t2 < t3 < t4
EVAL_TIMES = (0, 99, 100, 101, 150, 199, 200, 250, 300, 350, 399, 400, 401, 10_000)
#: Evaluation times under known_at (one in each interval and at each start).
KNOWN_EVAL_TIMES = (99, 100, 150, 200, 250, 300, 350, 400, 401)
#: Evaluation times at which explain() is also called per fact under known_at.
EACH_TIMES = (150, 401)
QUERY = "alice lives"
SUBJECT = "alice/city"
ORDERS = list(itertools.permutations(range(4)))
INGEST_STEP = 1_000


def fid(i: int) -> str:
    return f"fact-{i + 1}"


def expected_statuses(t: int, known: set[int]) -> dict[int, str]:
    """docs/contract.md §3 read directly: the status of each known fact of the slot at ``t``."""
    out = {}
    for i in known:
        if t < STARTS[i]:
            out[i] = "not-yet-valid"
        elif any(STARTS[i] < STARTS[j] <= t for j in known):
            out[i] = "superseded"
        else:
            out[i] = "current"
    return out


def expected_current(t: int, known: set[int]) -> int | None:
    """The latest known fact that had begun by ``t``."""
    begun = [i for i in known if STARTS[i] <= t]
    return max(begun, key=lambda i: STARTS[i]) if begun else None


def load(tmp_path: Path, order: tuple[int, ...], time_field: str
         ) -> tuple[Store, Memory, list[int]]:
    """A store holding the four facts, arrived in ``order``; returns their ingest times."""
    store = Store.open(tmp_path / "store", sync="none")
    clock = ManualClock(1_000_000)
    memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
    ingests = []
    for i in order:
        clock.advance(INGEST_STEP)
        r = memory.remember(id=fid(i), text=f"alice lives in city{i + 1}", subject=SUBJECT,
                            **{time_field: STARTS[i]})
        assert r.created
        ingests.append(r.ingest_time)
    clock.advance(INGEST_STEP)
    return store, memory, ingests


def check_at(memory: Memory, t: int, known_at: int | None, known: set[int], *,
             each: bool) -> None:
    """Recall (three history modes) and explain agree with §3 at ``t``, ``known_at``.

    ``each``: also call ``explain`` for each of the four facts on its own.
    """
    where = f"as_of={t} known_at={known_at} known={sorted(known)}"
    statuses = expected_statuses(t, known)
    current = expected_current(t, known)
    known_ids = {fid(i) for i in known}

    got = memory.recall(QUERY, as_of=t, known_at=known_at)
    assert [r.id for r in got] == ([fid(current)] if current is not None else []), where
    for r in got:
        assert r.status == "current" and r.fact.status == "current", where

    every = memory.recall(QUERY, as_of=t, known_at=known_at, history="all", explain=True)
    assert {r.id: r.status for r in every} == {fid(i): s for i, s in statuses.items()}, where
    for r in every:
        assert r.fact.status == r.status, where
        assert r.explanation is not None and r.explanation.status == r.status, where
        # Only links known at known_at are reported, and only to known facts.
        assert set(r.fact.superseded_by) <= known_ids, where
        assert set(r.fact.supersedes) <= known_ids, where
        chain = {c.id: c.status for c in r.explanation.chain}
        assert set(chain) == known_ids, where
        assert chain == {fid(i): s for i, s in statuses.items()}, where

    historical = memory.recall(QUERY, as_of=t, known_at=known_at, history="historical")
    not_current = known_ids - ({fid(current)} if current is not None else set())
    assert {r.id for r in historical} == not_current, where

    if not each:
        return
    for i in range(4):
        e = memory.explain(QUERY, fid(i), as_of=t, known_at=known_at)
        assert e.valid_at == t
        if i in known:
            assert e.status == statuses[i], where
            assert e.retrieved == (i == current), where
        else:
            assert e.status is None, where
            assert not e.retrieved, where
            assert e.reason == "ingested after known_at", where


@pytest.mark.parametrize("time_field", ["valid_from", "event_time"])
@pytest.mark.parametrize("order", ORDERS, ids=lambda o: "".join(str(i + 1) for i in o))
def test_current_fact_is_latest_begun_for_every_arrival_order(
        tmp_path: Path, order: tuple[int, ...], time_field: str) -> None:
    store, memory, ingests = load(tmp_path, order, time_field)
    try:
        everything = set(range(4))
        for t in EVAL_TIMES:
            check_at(memory, t, None, everything, each=True)
        # At each knowledge time only a prefix of the arrivals is known, and the
        # answers are those of a store that only ever saw that prefix.
        knowledge: list[tuple[int, set[int]]] = [(ingests[0] - 1, set())] + [
            (ingests[n], set(order[: n + 1])) for n in range(4)]
        for known_at, known in knowledge:
            for t in KNOWN_EVAL_TIMES:
                check_at(memory, t, known_at, known, each=t in EACH_TIMES)

        # Now (the clock is past every start): the fact that begins last is current,
        # in get, history and recall without as_of.
        assert [r.id for r in memory.recall(QUERY)] == [fid(3)]
        for i in range(4):
            rec = memory.get(fid(i))
            assert rec is not None
            assert rec.status == ("current" if i == 3 else "superseded")
        assert [h.id for h in memory.history(fid(0))] == [fid(i) for i in range(4)]
        # The chain is the whole slot, in effect order, from any member.
        for i in range(4):
            e = memory.explain(QUERY, fid(i), as_of=250)
            assert [c.id for c in e.chain] == [fid(j) for j in range(4)]
            assert [c.effective_time for c in e.chain] == list(STARTS)
    finally:
        store.close()


def test_known_at_ignores_facts_ingested_later(memory: Memory, clock: ManualClock) -> None:
    clock.set(10_000)
    memory.remember(id="old", text="bob works at acme", subject="bob/job", valid_from=100)
    clock.set(20_000)
    memory.remember(id="new", text="bob works at initech", subject="bob/job", valid_from=200)
    clock.set(30_000)
    for known_at in (10_000, 15_000, 19_999):
        got = memory.recall("bob works", as_of=500, known_at=known_at, history="all")
        assert [r.id for r in got] == ["old"]
        assert got[0].status == "current"
        # The later fact's link is not known either.
        assert got[0].fact.superseded_by == []
        assert memory.explain("bob works", "new", as_of=500, known_at=known_at).status is None
    for known_at in (9_999, 0):
        assert memory.recall("bob works", as_of=500, known_at=known_at, history="all") == []
    got = memory.recall("bob works", as_of=500, known_at=20_000, history="all")
    assert {r.id: r.status for r in got} == {"old": "superseded", "new": "current"}


def test_link_written_after_known_at_does_not_supersede(memory: Memory,
                                                        clock: ManualClock) -> None:
    """An explicit link (no subject, so no policy) written by a later fact."""
    clock.set(10_000)
    memory.remember(id="a", text="the meeting is on monday", valid_from=100)
    clock.set(20_000)
    memory.remember(id="b", text="the meeting moved to tuesday", valid_from=150,
                    supersedes=["a"])
    clock.set(30_000)
    # The link is known from b's ingest time on: before it, a is current at every time.
    for t in (100, 150, 1_000):
        assert [r.id for r in memory.recall("meeting", as_of=t, known_at=15_000)] == ["a"]
        e = memory.explain("meeting", "a", as_of=t, known_at=15_000)
        assert e.status == "current" and e.retrieved
        # b is not known at 15_000: it is not in the chain either.
        assert [(c.id, c.status) for c in e.chain] == [("a", "current")]
    assert [r.id for r in memory.recall("meeting", as_of=1_000, known_at=20_000)] == ["b"]
    assert memory.explain("meeting", "a", as_of=1_000, known_at=20_000).status == "superseded"
    # Before b begins, a is still current even with the link known.
    assert [r.id for r in memory.recall("meeting", as_of=120, known_at=20_000)] == ["a"]


def test_late_arriving_older_fact_links_are_known_from_its_ingest(
        memory: Memory, clock: ManualClock) -> None:
    """The newer-valid fact arrives first; the older one, arriving later, writes the
    link that supersedes itself. Before its ingest the newer one stands alone."""
    clock.set(10_000)
    memory.remember(id="v2", text="carol lives in oslo", subject="carol/city", valid_from=200)
    clock.set(20_000)
    memory.remember(id="v1", text="carol lives in bergen", subject="carol/city",
                    valid_from=100)
    clock.set(30_000)
    assert [r.id for r in memory.recall("carol lives", as_of=150)] == ["v1"]
    assert [r.id for r in memory.recall("carol lives", as_of=250)] == ["v2"]
    assert [r.id for r in memory.recall("carol lives", as_of=150, known_at=15_000)] == []
    got = memory.recall("carol lives", as_of=150, known_at=15_000, history="all")
    assert {r.id: r.status for r in got} == {"v2": "not-yet-valid"}
    got = memory.recall("carol lives", as_of=250, known_at=15_000, history="all")
    assert {r.id: r.status for r in got} == {"v2": "current"}
    assert got[0].fact.supersedes == []
    got = memory.recall("carol lives", as_of=250, known_at=20_000, history="all")
    assert {r.id: r.status for r in got} == {"v2": "current", "v1": "superseded"}


def test_known_at_ranks_by_the_feedback_known_then(tmp_path: Path) -> None:
    """Recall's usefulness multiplier under known_at counts only the feedback given by
    then: feedback given later changes no score of a look back before it."""
    clock = ManualClock(1_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, {"feedback": {"weight": 0.5}}, clock=clock)
        m.remember("useful fact here", id="a")
        m.remember("useful fact there", id="b")
        before = [(r.id, r.score) for r in m.recall("useful", known_at=1_500)]
        explained = m.explain("useful", "a", as_of=1_500, known_at=1_500)
        clock.set(2_000)
        m.feedback("a", True)
        assert [(r.id, r.score) for r in m.recall("useful", known_at=1_500)] == before
        assert m.explain("useful", "a", as_of=1_500, known_at=1_500) == explained
        now = {r.id: r.score for r in m.recall("useful", known_at=2_000)}
        assert now["a"] > now["b"]
