"""Reopening changes no answer (docs/contract.md §1: the log is the only source of truth): after
every step of a remember / supersede / forget / consolidate / compact sequence the
store is closed and reopened, and recall, explain, get and history answer exactly
as before (compared as msgspec builtins, so every float must match to the bit).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from holomem import ManualClock, Memory, MemoryConfig, NotFoundError, Store
from holomem.api.memory.config import ConsolidationConfig, Duplicates

CONFIG = MemoryConfig(supersession="latest-by-subject",
                      consolidation=ConsolidationConfig(duplicates=Duplicates()))
QUERIES = ["yusuf lives", "yusuf", "zoe works bakery", "tea", "lives in"]
AS_OF = [None, 7, 15, 25, 35, 45]
IDS = ["a0", "a1", "a15", "a2", "a3", "b1", "b2", "b3", "d1", "d2", "e1", "p1"]


def snapshot(memory: Memory) -> Any:
    out: dict[str, Any] = {"ids": memory.store.ids(), "recall": [], "get": {}, "history": {}}
    for q in QUERIES:
        for as_of in AS_OF:
            for history in ("current", "all", "historical"):
                out["recall"].append(memory.recall(q, as_of=as_of, history=history,
                                                   explain=True, k=20))
        out["recall"].append(memory.recall(q, embedding=[1.0, 0.0, 0.5], explain=True))
        out["recall"].append(memory.recall(q, subject="yusuf/city", history="all"))
        out["recall"].append(memory.recall(q, entities=["Yusuf"], history="all"))
    for fid in sorted(set(IDS) | set(memory.store.ids())):
        out["get"][fid] = memory.get(fid)
        try:
            out["history"][fid] = memory.history(fid)
        except NotFoundError:
            out["history"][fid] = None
        try:
            out["explain:" + fid] = memory.explain("yusuf lives", fid, as_of=25)
        except NotFoundError:
            out["explain:" + fid] = None
    return msgspec.to_builtins(out)


Step = Callable[[Memory], object]

STEPS: list[tuple[str, Step]] = [
    ("remember a1", lambda m: m.remember(id="a1", text="yusuf lives in izmir",
                                         subject="yusuf/city", valid_from=10,
                                         entities=["Yusuf"])),
    ("remember a2", lambda m: m.remember(id="a2", text="yusuf lives in ankara",
                                         subject="yusuf/city", valid_from=30,
                                         metadata={"source": "chat", "n": [1, 2.5]})),
    ("late a0", lambda m: m.remember(id="a0", text="yusuf lives in bursa",
                                     subject="yusuf/city", valid_from=5)),
    ("batch b", lambda m: m.remember_many([
        {"id": "b1", "text": "zoe works at the bakery", "event_time": 12},
        {"id": "b2", "text": "zoe works at the bank", "event_time": 22,
         "supersedes": ["b1"]}])),
    ("middle a15", lambda m: m.remember(id="a15", text="yusuf lives in antalya",
                                        subject="yusuf/city", valid_from=20,
                                        embedding=[1.0, 0.0, 0.0])),
    ("forget middle a15", lambda m: m.forget({"ids": ["a15"]})),
    ("remember a3", lambda m: m.remember(id="a3", text="yusuf lives in konya",
                                         subject="yusuf/city", valid_from=40, valid_to=50,
                                         embedding=[0.0, 1.0, 0.0])),
    ("forget newest a3", lambda m: m.forget({"ids": ["a3"]})),
    ("explicit b3", lambda m: m.remember(id="b3", text="zoe works from home",
                                         supersedes=["b2"], event_time=32)),
    ("duplicates", lambda m: m.remember_many([
        {"id": "d1", "text": "Yusuf drinks tea", "entities": ["Yusuf"]},
        {"id": "d2", "text": "yusuf drinks tea."}])),
    ("consolidate", lambda m: m.consolidate(dry_run=False)),
    ("forget chain b", lambda m: m.forget({"ids": ["b2"]}, include_chain=True)),
    ("compact", lambda m: m.store.compact()),
    ("remember e1", lambda m: m.remember(id="e1", text="yusuf lives near the sea",
                                         entities=["Yusuf"], valid_from=1, valid_to=100)),
    ("forget purge a0", lambda m: m.forget({"ids": ["a0"]}, purge=True)),
    ("remember p1", lambda m: m.remember(id="p1", text="yusuf lives in izmir again",
                                         subject="yusuf/city", valid_from=45)),
    ("forget metadata", lambda m: m.forget({"metadata": {"source": "chat"}})),
]


def test_every_answer_survives_close_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "store"
    clock = ManualClock(1_000)
    store = Store.open(path, sync="none")
    memory = Memory(store, CONFIG, clock=clock)
    try:
        for name, step in STEPS:
            clock.advance(7)
            step(memory)
            before = snapshot(memory)
            revision = store.revision
            store.close()
            store = Store.open(path, sync="none")
            memory = Memory(store, CONFIG, clock=clock)
            assert store.revision == revision, name
            after = snapshot(memory)
            assert after == before, name
            # And reopening twice changes nothing either.
            store.close()
            store = Store.open(path, sync="none")
            memory = Memory(store, CONFIG, clock=clock)
            assert snapshot(memory) == before, name
    finally:
        store.close()


def test_reopen_with_full_sync_and_no_explicit_close_ordering(tmp_path: Path) -> None:
    """The same with sync="full" and a reader Memory built before the writes."""
    path = tmp_path / "store"
    clock = ManualClock(1_000)
    with Store.open(path) as store:
        reader = Memory(store, CONFIG, clock=clock)
        writer = Memory(store, CONFIG, clock=clock)
        for _, step in STEPS[:6]:
            clock.advance(3)
            step(writer)
        before = snapshot(reader)
        assert snapshot(writer) == before
    with Store.open(path) as store:
        assert snapshot(Memory(store, CONFIG, clock=clock)) == before
