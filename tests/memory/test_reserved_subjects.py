"""Reserved subjects (docs/contract.md §4 "Reserved subjects"): holomem's own facts — a
working context's saves, subject ``holomem:working/SESSION`` — stay out of recall,
list, contradict, consolidation and why's start unless the caller names their subject,
and stay reachable by get, history, export and forget."""

from __future__ import annotations

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.config import ConsolidationConfig, Duplicates
from holomem.api.memory.window import working

SUBJECT = working.SUBJECT_PREFIX + "plan"
# Several parts per save, each "working context plan: save N, part I of P": texts that
# share their words with each other and with a query naming the session.
BIG = {"notes": ["x" * 1000] * 200}
QUERY = "working context plan save part"


def saved(memory: Memory) -> str:
    memory.remember("the plan is to ship on friday; save the draft", namespace=["a"],
                    entities=["plan"])
    memory.remember("a working context is where the part list lives", namespace=["a"],
                    entities=["plan"])
    memory.save_working_context(["a"], "plan", BIG)
    return memory.save_working_context(["a"], "plan", BIG | {"goal": "ship"}).head


def is_ours(fid: str) -> bool:
    return fid.startswith("wc-")


def test_recall_list_and_why_leave_working_contexts_out_unless_their_subject_is_named(
        store: Store, clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    head = saved(memory)
    for history in ("current", "all"):
        found = memory.recall(QUERY, k=50, history=history, namespace=["a"])
        assert found and not any(is_ours(r.id) for r in found)
    listed = memory.list(history="all", limit=1000).facts
    assert len(listed) == 2 and not any(is_ours(f.id) for f in listed)
    assert memory.why(QUERY, namespace=["a"]).start not in (None, head)
    # Named: the subject filter reaches them, at recall and at list.
    named = memory.recall(QUERY, k=50, subject=SUBJECT, namespace=["a"])
    assert named and all(r.fact.subject == SUBJECT for r in named)
    assert head in {r.id for r in named}
    current = memory.list(filter={"subject": SUBJECT}, history="current", limit=1000).facts
    assert current and all(is_ours(f.id) for f in current)
    assert len(memory.list(filter={"subject": SUBJECT}, history="all",
                           limit=1000).facts) > len(current)


def test_contradict_and_consolidation_never_touch_working_contexts(
        store: Store, clock: ManualClock) -> None:
    config = MemoryConfig(consolidation=ConsolidationConfig(
        duplicates=Duplicates(near_threshold=0.3)))
    memory = Memory(store, config, clock=clock)
    saved(memory)
    parts = memory.list(filter={"subject": SUBJECT}, history="current", limit=1000).facts
    assert len(parts) >= 3  # the latest save's parts: current, of one subject
    plain = memory.contradict(k=50)
    assert plain.compared_facts == 2
    assert not any(is_ours(p.a) or is_ours(p.b) for p in plain.pairs)
    named = memory.contradict(subject=SUBJECT, namespace=["a"], k=50)
    assert named.compared_facts == len(parts)
    assert any(is_ours(p.a) for p in named.pairs)  # what they would look like unasked
    report = memory.consolidate(dry_run=True)
    assert not any(is_ours(s) for g in report.groups for s in g.sources)


def test_get_history_export_and_forget_still_reach_them(store: Store, clock: ManualClock
                                                        ) -> None:
    memory = Memory(store, clock=clock)
    head = saved(memory)
    fact = memory.get(head)
    assert fact is not None and fact.subject == SUBJECT
    assert len(memory.history(head)) == 2  # both saves
    exported = [r["id"] for r in memory.export()]
    assert head in exported and sum(map(is_ours, exported)) > 2
    gone = memory.forget({"subject": SUBJECT}, within=["a"])
    assert head in gone.removed
    assert memory.get(head) is None and len(memory.list(limit=1000).facts) == 2


def test_a_store_without_reserved_facts_answers_as_before(store: Store,
                                                         clock: ManualClock) -> None:
    memory = Memory(store, clock=clock)
    memory.remember("the plan is to ship on friday", namespace=["a"])
    assert store.read(lambda view: view.facts.reserved_mask()) is None
    assert [r.text for r in memory.recall("plan ship")] == \
        ["the plan is to ship on friday"]
