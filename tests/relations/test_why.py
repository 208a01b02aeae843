"""Guarantee: why walks the evidence subgraph deterministically (nodes by hop then
discovery, edges as walked, the same after a restart), within its hops, relations,
filter and times, and says ``truncated`` with the bound exactly when a bound left
something out."""

from __future__ import annotations

from pathlib import Path

import pytest

from holomem import InvalidError, LimitError, ManualClock, Memory, Store
from holomem.api.memory.graph import evidence


def _graph(memory: Memory) -> None:
    texts = {"q": "the launch was delayed by the storm", "r1": "storm warning issued monday",
             "r2": "the rocket needs calm wind", "s1": "monday was cold",
             "s2": "wind limit is 30 knots", "far": "knots are nautical miles per hour"}
    for fid, text in texts.items():
        memory.remember(text, id=fid, metadata={"kind": "far" if fid == "far" else "near"})
    memory.relate("q", "r1", "caused_by")
    memory.relate("r2", "q", "explains")
    memory.relate("r1", "s1", "when")
    memory.relate("r2", "s2", "detail")
    memory.relate("s2", "far", "detail")
    memory.relate("s1", "s2", "unrelated_detail")  # between two nodes of hop 2


def test_why_returns_nodes_by_hop_and_edges_as_walked(memory: Memory) -> None:
    _graph(memory)
    found = memory.why("launch delayed")
    assert found.start == "q" and found.query == "launch delayed" and found.score
    assert [(n.id, n.hop) for n in found.nodes] == [
        ("q", 0), ("r1", 1), ("r2", 1), ("s1", 2), ("s2", 2)]
    assert [(e.from_id, e.relation, e.to_id) for e in found.edges] == [
        ("q", "caused_by", "r1"), ("r2", "explains", "q"), ("r1", "when", "s1"),
        ("r2", "detail", "s2")]
    assert not found.truncated and found.bound is None
    assert [n.hop for n in memory.why("q", max_hops=3).nodes] == [0, 1, 1, 2, 2, 3]
    assert [n.id for n in memory.why("q", max_hops=0).nodes] == ["q"]


def test_why_is_the_same_after_a_restart_and_a_compaction(tmp_path: Path) -> None:
    clock = ManualClock(5_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        _graph(memory)
        first = memory.why("q", max_hops=4)
        assert memory.why("q", max_hops=4) == first
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        assert memory.why("q", max_hops=4) == first
        store.compact()
        assert memory.why("q", max_hops=4) == first


def test_why_keeps_to_its_relations_filter_and_times(memory: Memory,
                                                     clock: ManualClock) -> None:
    _graph(memory)
    assert [n.id for n in memory.why("q", relation="caused_by").nodes] == ["q", "r1"]
    assert [n.id for n in memory.why("q", relation=["caused_by", "when"]).nodes] \
        == ["q", "r1", "s1"]
    near = memory.why("q", max_hops=4, filter={"metadata": {"kind": "near"}})
    assert "far" not in [n.id for n in near.nodes]
    t = clock.now_ms()
    clock.advance(10)
    memory.remember("a later fact", id="late")
    memory.relate("q", "late", "caused_by")
    assert "late" in [n.id for n in memory.why("q").nodes]
    assert "late" not in [n.id for n in memory.why("q", known_at=t).nodes]
    assert "late" not in [n.id for n in memory.why("q", as_of=t).nodes]


def test_why_without_a_match_has_no_start(memory: Memory) -> None:
    _graph(memory)
    found = memory.why("zebra")
    assert found.start is None and found.nodes == [] and not found.truncated


@pytest.mark.parametrize("extra", [0, 1, 5])
def test_truncation_says_which_bound_cut_the_walk(memory: Memory,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  extra: int) -> None:
    monkeypatch.setattr(evidence, "MAX_NODES", 6)
    memory.remember("the hub", id="hub")
    for i in range(5 + extra):  # the hub and 5 neighbours fill MAX_NODES exactly
        memory.remember(f"spoke {i}", id=f"s{i}")
        memory.relate("hub", f"s{i}", "spoke")
    found = memory.why("hub", max_hops=1)
    assert len(found.nodes) == 6
    assert found.truncated == (extra > 0)
    assert found.bound == ("max_nodes" if extra else None)
    monkeypatch.setattr(evidence, "MAX_NODES", 100)
    monkeypatch.setattr(evidence, "MAX_EDGES", 5)
    found = memory.why("hub", max_hops=1)
    assert len(found.edges) == 5 and found.truncated == (extra > 0)
    assert found.bound == ("max_edges" if extra else None)


def test_why_checks_its_arguments(memory: Memory) -> None:
    _graph(memory)
    with pytest.raises(LimitError):
        memory.why("q", max_hops=evidence.MAX_HOPS + 1)
    with pytest.raises(InvalidError):
        memory.why("q", max_hops=-1)
    with pytest.raises(InvalidError):
        memory.why("   ")
    with pytest.raises(InvalidError):
        memory.why("q", relation=[])
