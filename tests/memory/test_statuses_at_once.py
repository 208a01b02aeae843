"""Recall decides its candidates' statuses all at once: the same answers, one by one.

``FactIndex.statuses`` (what recall's ranking uses) equals ``FactIndex.status``
of each slot for every evaluation time and ``known_at``, over facts with
subjects superseding one another in any arrival order, validity windows, time
to live, plain documents and forgotten facts.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store

fact = st.fixed_dictionaries({
    "subject": st.one_of(st.none(), st.sampled_from(["a", "b", "c"])),
    "valid_from": st.one_of(st.none(), st.integers(0, 40)),
    "valid_to": st.one_of(st.none(), st.integers(0, 60)),
    "ttl_ms": st.one_of(st.none(), st.integers(1, 30)),
    "event_time": st.one_of(st.none(), st.integers(0, 50)),
    "forget": st.booleans(),
})


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(facts=st.lists(fact, min_size=1, max_size=25), docs=st.integers(0, 3),
       times=st.lists(st.integers(-5, 80), min_size=1, max_size=5))
def test_statuses_at_once_equal_each_status(tmp_path_factory: Any, facts: list[dict[str, Any]],
                                            docs: int, times: list[int]) -> None:
    clock = ManualClock(10)
    with Store.open(tmp_path_factory.mktemp("s") / "store", sync="none") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        for i, f in enumerate(facts):
            clock.advance(2)
            fields = {k: v for k, v in f.items() if v is not None and k != "forget"}
            if "valid_to" in fields and fields.get("valid_from", -1) >= fields["valid_to"]:
                del fields["valid_to"]
            memory.remember(id=f"f{i}", text=f"fact number {i}", **fields)
        for i in range(docs):
            store.add_document(f"d{i}", f"plain document {i}")
        for i, f in enumerate(facts):
            if f["forget"] and i % 3 == 0:
                memory.forget({"ids": [f"f{i}"]})
        with store.reading() as view:
            facts_index = view.facts
            slots = np.flatnonzero(view.catalog.alive.view())
            for at in times:
                for known_at in (None, 12, 20, 40):
                    want = [facts_index.status(int(s), at, known_at) for s in slots]
                    assert facts_index.statuses(slots, at, known_at) == want


step = st.one_of(
    st.tuples(st.just("remember"), fact, st.lists(st.integers(0, 30), max_size=2)),
    st.tuples(st.just("forget"), st.integers(0, 30), st.booleans()),
    st.tuples(st.just("replace"), st.integers(0, 30)),  # its document: the fact moves slot
    st.tuples(st.just("ask"), st.integers(-5, 80)),
)


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=st.lists(step, min_size=1, max_size=30))
def test_current_mask_and_chains_at_once_equal_each_status_and_chain(
        tmp_path_factory: Any, steps: list[tuple[Any, ...]]) -> None:
    """``FactIndex.current_mask`` (contradict's current facts), ``components`` (its
    supersession chains) and ``statuses`` (recall's; after its first ask between two
    writes, from when each fact's first successor begins), computed over the links as
    slot arrays and kept between calls, equal ``status`` and ``chain`` of each fact,
    asked between writes that add links (explicit, by subject, on forget's
    relinking), forget facts and move a fact's document to a new slot."""
    clock = ManualClock(10)
    with Store.open(tmp_path_factory.mktemp("s") / "store", sync="none") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), clock=clock)
        ids: list[str] = []
        for i, s in enumerate(steps):
            clock.advance(2)
            if s[0] == "remember":
                fields = {k: v for k, v in s[1].items() if v is not None and k != "forget"}
                if "valid_to" in fields and fields.get("valid_from", -1) >= fields["valid_to"]:
                    del fields["valid_to"]
                live = [x for x in ids if memory.get(x) is not None]
                fields["supersedes"] = sorted({live[j % len(live)] for j in s[2]} if live
                                              else set())
                memory.remember(id=f"f{i}", text=f"fact number {i}", **fields)
                ids.append(f"f{i}")
            elif s[0] == "forget" and ids:
                memory.forget({"ids": [ids[s[1] % len(ids)]]}, include_chain=s[2])
            elif s[0] == "replace" and ids:
                target = ids[s[1] % len(ids)]
                if memory.get(target) is not None:
                    store.add_documents([{"id": target, "text": f"moved {i}"}])
            with store.reading() as view:
                facts_index = view.facts
                at = s[1] if s[0] == "ask" else clock.now_ms()
                stored = np.flatnonzero(view.catalog.alive.view() & facts_index.is_fact.view())
                alive = np.flatnonzero(view.catalog.alive.view())
                each = [facts_index.status(int(x), at) for x in alive]
                for _ in range(3):  # the first ask walks the links, the others use slots
                    assert facts_index.statuses(alive, at) == each
                mask = facts_index.current_mask(at)
                want = np.zeros(view.catalog.slots, dtype=bool)
                want[stored] = [facts_index.status(int(x), at) == "current" for x in stored]
                assert mask.tolist() == want.tolist()
                comp = facts_index.components()
                for x in stored.tolist():
                    chain = {facts_index.slot(c) for c in facts_index.chain(view.catalog.ids[x]
                                                                            or "")}
                    assert {int(y) for y in stored if comp[y] == comp[x]} == chain
                others = np.setdiff1d(np.arange(view.catalog.slots), stored)
                assert (comp[others] == others).all()
