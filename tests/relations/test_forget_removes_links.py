"""Guarantee: forgetting a fact removes every link it is an end of, at once and
everywhere (links of either end, why, after a restart), and the ForgetReport counts
them (a dry run counts what would go)."""

from __future__ import annotations

from pathlib import Path

from holomem import ManualClock, Memory, Store


def _chain(memory: Memory) -> None:
    for fid in ("a", "b", "c", "d"):
        memory.remember(f"fact {fid}", id=fid)
    memory.relate("a", "b", "next")
    memory.relate("b", "c", "next")
    memory.relate("c", "b", "answers")
    memory.relate("c", "d", "next")


def test_forget_removes_the_links_of_the_fact_both_ways(memory: Memory) -> None:
    _chain(memory)
    dry = memory.forget({"ids": ["b"]}, dry_run=True)
    assert dry.unlinked == 3 and memory.links("a").links  # nothing went
    report = memory.forget({"ids": ["b"]})
    assert report.unlinked == 3
    assert memory.links("a", direction="both").links == []
    assert [(x.from_id, x.to_id) for x in memory.links("c", direction="both").links] \
        == [("c", "d")]
    assert [n.id for n in memory.why("a").nodes] == ["a"]


def test_a_link_between_two_forgotten_facts_is_counted_once(memory: Memory) -> None:
    _chain(memory)
    assert memory.forget({"ids": ["b", "c"]}).unlinked == 4


def test_forgotten_links_stay_gone_after_a_restart(tmp_path: Path) -> None:
    clock = ManualClock(1_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        _chain(memory)
        memory.forget({"ids": ["c"]})
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        assert [(x.from_id, x.to_id) for x in memory.links("b", direction="both").links] \
            == [("a", "b")]
        assert memory.links("d", direction="both").links == []


def test_a_fact_remembered_again_under_a_forgotten_id_has_no_links(memory: Memory) -> None:
    _chain(memory)
    memory.forget({"ids": ["b"]})
    memory.remember("fact b", id="b")
    assert memory.links("b", direction="both").links == []
