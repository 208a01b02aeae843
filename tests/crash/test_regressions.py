"""Regressions found by the crash harness (issue 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holomem import Store
from holomem import crashtest as ct
from holomem.log import fs

from .recording import ops, recording


def test_issue_6_open_makes_what_a_crashed_writer_left_durable_before_any_write(
        tmp_path: Path) -> None:
    """A writer that crashed after creating a segment, renaming a generation into place
    or creating the store directory, but before syncing the directory, leaves a name
    only the page cache holds. The next writer used to append to it, fsync the file
    and acknowledge; a power cut then took the name, and every acknowledged write in
    it, away. The open now syncs the last segment and the three directories first."""
    store = tmp_path / "store"
    with Store.open(store, segment_size=4096) as s:
        s.add_document("a", "the first document")
    log = tmp_path / "fault.log"
    with recording(log), Store.open(store, segment_size=4096) as s:
        gen = os.path.join(str(store), f"gen-{s.generation:08d}")
        segment = sorted(n for n in os.listdir(gen) if n.startswith("seg-"))[-1]
        s.add_document("b", "the second document")
    done = ops(log)
    first_write = next(i for i, (op, path) in enumerate(done)
                       if op == "write" and path.endswith(".hlj"))
    before = done[:first_write]
    assert ("sync", os.path.join(gen, segment)) in before
    for directory in (gen, str(store), str(tmp_path)):
        assert ("dirsync", directory) in before, directory


def _make_dirs_before_issue_11(path: str) -> None:
    """What the journal's open did before issue 11 to create a store: the directories
    made behind the file layer's back, only the store's own parent synced."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    fs.sync_dir(os.path.dirname(path))


def _power_cuts_after_the_workload(run: Path, monkeypatch: pytest.MonkeyPatch,
                                   seeds: range) -> list[list[str]]:
    """The harness's workload, in this process, recorded as a power-loss child records
    it, its store in directories that do not exist yet; then a power cut for each seed,
    each checked like a harness case. The violations of each."""
    store = ct.store_path(str(run))
    assert not os.path.exists(os.path.dirname(os.path.dirname(store)))
    with recording(run / ct.FAULT_LOG):
        ct.run_workload(store, str(run / "acks.jsonl"), None)
    _, results, begun, done = ct.read_acks(str(run / "acks.jsonl"))
    assert done and begun == len(results)
    monkeypatch.undo()
    out = []
    for seed in seeds:
        target = str(run / f"cut-{seed}")
        ct.power_loss(str(run), store, target, seed)
        out.append(ct.verify(target, None, ct.plan(), results, begun, begun).violations)
    return out


def test_issue_11_every_directory_a_store_creates_is_durable_before_it_acknowledges(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating a store in a directory that does not exist yet: each new directory's
    entry is synced into its parent, up to the first that existed, so no power cut can
    take the store (and every acknowledged write in it) away."""
    verdicts = _power_cuts_after_the_workload(tmp_path, monkeypatch, range(4))
    assert verdicts == [[]] * 4


def test_issue_11_the_harness_catches_a_store_created_without_syncing_its_new_parents(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same harness run with the old way of creating the store restored: its
    grandparent is never synced, the power-loss model may drop the new directory, and
    the harness reports the acknowledged writes lost."""
    monkeypatch.setattr(fs, "make_dirs", _make_dirs_before_issue_11)
    verdicts = _power_cuts_after_the_workload(tmp_path, monkeypatch, range(4))
    caught = [v for v in verdicts if any("does not open" in x for x in v)]
    assert caught, verdicts


def test_issue_11_creating_directories_syncs_the_entry_of_one_a_crash_left_unsynced(
        tmp_path: Path) -> None:
    """Found by the harness (``--fault restart`` at ``fs.dirsync.before:1``): a process
    died right after making the first new directory of a store's path, before syncing
    its parent; the next process found it existing, created the rest under it and
    synced only from there down, and a power cut took the directory, with every write
    the second process acknowledged. The parent of the first existing directory is
    synced too now (only the last directory a crashed process made can be in doubt)."""
    first = tmp_path / "home"
    os.mkdir(first)  # what the crashed process left: made, its entry never synced
    log = tmp_path / "fault.log"
    with recording(log):
        fs.make_dirs(str(first / "tenant" / "store"))
    done = ops(log)
    assert ("dirsync", str(tmp_path)) in done, done
    assert done.index(("dirsync", str(tmp_path))) < done.index(("mkdir", str(first / "tenant")))
