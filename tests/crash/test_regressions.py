"""Regressions found by the crash harness (issue 6)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holomem import Store
from holomem.log import fs


def _ops(log: Path) -> list[tuple[str, str]]:
    return [(f[0], f[1]) for f in (line.split("\t") for line in log.read_text().splitlines())]


def test_issue_6_open_makes_what_a_crashed_writer_left_durable_before_any_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that crashed after creating a segment, renaming a generation into place
    or creating the store directory, but before syncing the directory, leaves a name
    only the page cache holds. The next writer used to append to it, fsync the file
    and acknowledge; a power cut then took the name, and every acknowledged write in
    it, away. The open now syncs the last segment and the three directories first."""
    store = tmp_path / "store"
    with Store.open(store, segment_size=4096) as s:
        s.add_document("a", "the first document")
    log = tmp_path / "fault.log"
    monkeypatch.setattr(fs, "_FAULT_LOG", str(log))
    with Store.open(store, segment_size=4096) as s:
        gen = os.path.join(str(store), f"gen-{s.generation:08d}")
        segment = sorted(n for n in os.listdir(gen) if n.startswith("seg-"))[-1]
        s.add_document("b", "the second document")
    ops = _ops(log)
    first_write = next(i for i, (op, path) in enumerate(ops)
                       if op == "write" and path.endswith(".hlj"))
    before = ops[:first_write]
    assert ("sync", os.path.join(gen, segment)) in before
    for directory in (gen, str(store), str(tmp_path)):
        assert ("dirsync", directory) in before, directory
