"""latest-by-subject links facts exactly as the policy asked with every fact of the
subject would — also when remember takes its in-order path (a fact that comes after
every fact of its subject looks only at the facts still current, so a subject with
many facts stays cheap to write to).

The same inputs go to two stores: one under the built-in ``latest-by-subject``, one
under a custom policy that calls the very same function (so remember cannot
recognise it and always walks every fact of the subject). Every link, status and
supersession list must come out equal, in order and out of order, across batches,
with windows, times to live, explicit ``supersedes`` and facts in several namespaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.policies import Links, NewFact, SubjectMember, latest_by_subject

T0 = 1_000_000


def walked(fact: NewFact, members: Sequence[SubjectMember]) -> Links:
    return latest_by_subject(fact, members)


fact = st.fixed_dictionaries({
    "subject": st.sampled_from(["a", "b", None]),
    "shift": st.sampled_from([None, None, -500, 300]),  # valid_from relative to now
    "valid_to": st.sampled_from([None, None, 50, 1000]),  # relative to the start
    "namespace": st.sampled_from([None, ["x"]]),
    "supersedes_previous": st.booleans(),
    "ttl_ms": st.sampled_from([None, None, 150]),
})
batches = st.lists(st.lists(fact, min_size=1, max_size=12), min_size=1, max_size=4)


def _inputs(batch: list[dict[str, Any]], start: int, now: int) -> list[dict[str, Any]]:
    out = []
    for i, f in enumerate(batch):
        x: dict[str, Any] = {"id": f"f{start + i}", "text": f"fact {start + i}"}
        if f["subject"] is not None:
            x["subject"] = f["subject"]
        begins = now
        if f["shift"] is not None:
            begins = x["valid_from"] = now + f["shift"]
        if f["valid_to"] is not None:
            x["valid_to"] = begins + f["valid_to"]
        if f["namespace"] is not None:
            x["namespace"] = f["namespace"]
        if f["ttl_ms"] is not None:
            x["ttl_ms"] = f["ttl_ms"]
        out.append(x)
    return out


def _picture(m: Memory, clock: ManualClock, ids: list[str], now: int
             ) -> list[tuple[Any, ...]]:
    clock.set(now)
    out = []
    for fid in ids:
        r = m.get(fid)
        assert r is not None
        out.append((fid, r.status, tuple(r.supersedes), tuple(r.superseded_by)))
    return out


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=batches)
def test_in_order_path_links_as_walking_every_fact_does(tmp_path_factory: pytest.TempPathFactory,
                                                      data: list[list[dict[str, Any]]]) -> None:
    d = tmp_path_factory.mktemp("l")
    with Store.open(d / "fast", sync="none") as s1, Store.open(d / "walk", sync="none") as s2:
        clock1, clock2 = ManualClock(T0), ManualClock(T0)
        fast = Memory(s1, MemoryConfig(supersession="latest-by-subject"), clock=clock1)
        walk = Memory(s2, MemoryConfig(supersession="custom:walked"), clock=clock2,
                      policies={"walked": walked})
        ids: list[str] = []
        for batch in data:
            inputs = _inputs(batch, len(ids), clock1.now_ms())
            for x, f in zip(inputs, batch, strict=True):
                if f["supersedes_previous"] and ids and f["namespace"] is None:
                    prev = ids[-1]
                    if s1.read(lambda v, p=prev: v.facts.namespace(v.facts.slot(p))) == ():
                        x["supersedes"] = [prev]
            got1 = fast.remember_many(inputs)
            got2 = walk.remember_many(inputs)
            assert [(r.id, r.superseded) for r in got1] == [(r.id, r.superseded) for r in got2]
            ids += [x["id"] for x in inputs]
            clock1.advance(100)
            clock2.advance(100)
        for at in (T0, clock1.now_ms(), clock1.now_ms() + 10_000):
            assert _picture(fast, clock1, ids, at) == _picture(walk, clock2, ids, at)


def test_a_subject_with_thousands_of_facts_in_one_batch_is_a_chain(tmp_path: Path) -> None:
    """3,000 facts of one subject in one call (each walked against the others, this was
    4.5 million comparisons): each supersedes exactly the one before it."""
    with Store.open(tmp_path / "s", sync="none") as store:
        clock = ManualClock(T0)
        m = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        got = m.remember_many([{"id": f"f{i}", "text": f"v {i}", "subject": "one",
                                "valid_from": T0 - 10_000 + i} for i in range(3000)])
        assert [r.superseded for r in got] == [[]] + [[f"f{i}"] for i in range(2999)]
        current = [r.id for r in m.list(limit=1000, history="current").facts]
        assert current == ["f2999"]


between = st.lists(st.sampled_from(["forget", "forget-chain", "replace", "delete", "reopen"]),
                   max_size=2)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.lists(st.tuples(st.lists(fact, min_size=1, max_size=10), between,
                               st.integers(0, 10_000)), min_size=2, max_size=4))
def test_stored_subject_heads_follow_forgets_replacements_and_reopens(
        tmp_path_factory: pytest.TempPathFactory,
        data: list[tuple[list[dict[str, Any]], list[str], int]]) -> None:
    """The fact index keeps each subject's heads (the facts that may still be current)
    between calls: a forget (which may make a superseded fact current again), a
    document replaced through the document API (its place in effect order moves), a
    deleted document and a reopen must each leave the in-order path linking exactly
    as walking every fact does."""
    d = tmp_path_factory.mktemp("h")
    clock1, clock2 = ManualClock(T0), ManualClock(T0)
    config = MemoryConfig(supersession="latest-by-subject")
    s1, s2 = Store.open(d / "fast", sync="none"), Store.open(d / "walk", sync="none")
    try:
        fast = Memory(s1, config, clock=clock1)
        walk = Memory(s2, MemoryConfig(supersession="custom:walked"), clock=clock2,
                      policies={"walked": walked})
        ids: list[str] = []
        for batch, ops, pick in data:
            inputs = _inputs(batch, len(ids), clock1.now_ms())
            got1 = fast.remember_many(inputs)
            got2 = walk.remember_many(inputs)
            assert [(r.id, r.superseded) for r in got1] == [(r.id, r.superseded) for r in got2]
            ids += [x["id"] for x in inputs]
            for op in ops:
                live = [i for i in ids if s1.has_document(i)]
                if op == "reopen":
                    s1.close()
                    s2.close()
                    s1, s2 = Store.open(d / "fast", sync="none"), Store.open(d / "walk",
                                                                             sync="none")
                    fast = Memory(s1, config, clock=clock1)
                    walk = Memory(s2, MemoryConfig(supersession="custom:walked"),
                                  clock=clock2, policies={"walked": walked})
                elif live:
                    target = live[pick % len(live)]
                    for m, s in ((fast, s1), (walk, s2)):
                        if op == "replace":
                            s.add_document(target, f"replaced {target}")
                        elif op == "delete":
                            s.delete_document(target)
                        else:
                            m.forget({"ids": [target]}, include_chain=op == "forget-chain")
            clock1.advance(100)
            clock2.advance(100)
        live = [i for i in ids if s1.has_document(i)]
        assert live == [i for i in ids if s2.has_document(i)]
        for at in (T0, clock1.now_ms(), clock1.now_ms() + 10_000):
            assert _picture(fast, clock1, live, at) == _picture(walk, clock2, live, at)
    finally:
        s1.close()
        s2.close()
