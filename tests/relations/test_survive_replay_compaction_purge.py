"""Guarantee: relations are journal events and a projection — every link (ends,
relation, time, metadata, order) is the same after a reopen (replay), from a
checkpoint, after a compaction and after a purge; a purge leaves no file holding a
removed fact's link."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from holomem import ManualClock, Memory, Store
from holomem.projections import checkpoint as codec
from holomem.projections import relations as projection
from holomem.projections.base import GrowArray
from tests.purge import markers
from tests.relations.helpers import snapshot, workload


@pytest.mark.parametrize(("seed", "min_delta"), [(1, 4096), (2, 3), (3, 1)])
def test_links_are_the_same_after_replay_compaction_and_purge(
        tmp_path: Path, seed: int, min_delta: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # A small min_delta rebuilds the adjacency index every few links, live and in replay.
    monkeypatch.setattr(projection, "MIN_DELTA", min_delta)
    clock = ManualClock(1_000_000)
    path = tmp_path / "s"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=clock)
        workload(memory, clock, seed)
        before = snapshot(memory)
        why_before = memory.why("f2", max_hops=3)
        assert sum(len(v) for v in before.values()) > 10  # the workload made links
    with Store.open(path, sync="none") as store:  # replay
        memory = Memory(store, clock=clock)
        assert snapshot(memory) == before
        store.compact()
        assert snapshot(memory) == before
        assert memory.why("f2", max_hops=3) == why_before
    with Store.open(path, sync="none") as store:  # replay of the compacted generation
        memory = Memory(store, clock=clock)
        assert snapshot(memory) == before
        memory.forget({"ids": ["f0"]}, purge=True)
        expected = {fid: [x for x in links if "f0" not in (x[0], x[1])]
                    for fid, links in before.items() if fid != "f0"}
        assert snapshot(memory) == expected
    with Store.open(path, sync="none") as store:
        assert snapshot(Memory(store, clock=clock)) == expected


def test_a_purge_leaves_no_link_to_the_removed_fact_in_any_file(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    path = tmp_path / "s"
    gone, kept = "zqxgone-7f3a", "zqxkept-1b2c"
    relation = "zqxrelation"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=clock)
        for fid in (gone, kept, "other"):
            memory.remember(f"text of {fid[:3]}", id=fid)
        memory.relate(gone, kept, relation, {"note": "zqxnote"})
        memory.relate("other", gone, "cites")
        memory.relate("other", kept, "cites")
        memory.unrelate("other", gone, "cites")
        memory.relate("other", gone, "cites")
        assert markers.files_with(str(path), gone.encode())  # the scan sees it before
        report = memory.forget({"ids": [gone]}, purge=True)
        assert report.unlinked == 2
    for marker in (gone, relation, "zqxnote"):
        assert markers.files_with(str(path), marker.encode()) == {}, marker
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=clock)
        assert [(x.from_id, x.to_id) for x in memory.links(kept, direction="both").links] \
            == [("other", kept)]


@pytest.mark.parametrize("min_delta", [4096, 2])
def test_links_come_back_from_a_checkpoint_exactly(tmp_path: Path, min_delta: int,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(projection, "MIN_DELTA", min_delta)
    clock = ManualClock(1_000_000)
    path = tmp_path / "s"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=clock)
        workload(memory, clock, seed=7, steps=120)
        before = snapshot(memory)
        assert store.checkpoint() is not None
        with store.reading() as view:  # the projection itself, attribute for attribute
            live = view.state.relations
            restored = codec.restore(None, codec.encode(view.state.snapshot()).join()).relations
            for name in sorted(set(vars(live)) - {"catalog"}):
                a, b = getattr(live, name), getattr(restored, name)
                if isinstance(a, GrowArray):
                    a, b = a.view(), b.view()
                if isinstance(a, np.ndarray):
                    assert a.dtype == b.dtype and np.array_equal(a, b), name
                else:
                    assert a == b, name
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by.startswith("checkpoint")
        memory = Memory(store, clock=clock)
        assert snapshot(memory) == before
        memory.relate("f1", "f3", "after_checkpoint")  # the restored index takes new links
        assert ("f1", "f3", "after_checkpoint") in [
            (x.from_id, x.to_id, x.relation) for x in memory.links("f1").links]


def test_a_checkpoint_digest_equals_a_replays_with_links_made_and_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The digest fsck checks a checkpoint by is the same for the live state (links in
    its delta, removed rows not yet dropped) and for a replay of the same journal."""
    monkeypatch.setattr(projection, "MIN_DELTA", 10_000)  # keep the live delta
    clock = ManualClock(1_000_000)
    path = tmp_path / "s"
    with Store.open(path, sync="none") as store:
        memory = Memory(store, clock=clock)
        workload(memory, clock, seed=11, steps=150)
        with store.reading() as view:
            live = codec.digest(view.state)
    with Store.open(path, sync="none") as store, store.reading() as view:
        assert codec.digest(view.state) == live
