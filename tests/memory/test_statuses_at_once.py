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
