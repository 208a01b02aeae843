"""fsck verifies every checkpoint against a replay of the journal up to its sequence
number (a digest of the projections' state), reports a damaged, stale, mismatching,
replaced or half-written one, and ``--repair`` erases it and writes a fresh one
(docs/guarantees.md §6a, §7).
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path

import pytest

from holomem import Store
from holomem.fsck import check


def _checkpoints(path: Path) -> list[str]:
    return sorted(glob.glob(str(path / "gen-*" / "checkpoint-*.hck")))


def _store(path: Path, key: bytes | None = None, n: int = 80) -> Store:
    store = Store.open(path, key=key, sync="none", checkpoint_every=None)
    store.add_documents([{"id": f"d{i}", "text": f"document {i} about rivers {i % 7}",
                          "metadata": {"i": i}, "entities": [f"E{i % 3}"]} for i in range(n)])
    store.delete_document("d5")
    return store


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_good_checkpoint_is_verified_against_the_journal_and_passes(
        tmp_path: Path, encrypted: bool) -> None:
    key = os.urandom(32) if encrypted else None
    path = tmp_path / "s"
    with _store(path, key) as store:
        store.checkpoint()
        store.add_document("tail", "written after the checkpoint")  # a tail to replay past
    report = check(str(path), key=key)
    assert report.clean, report.findings
    assert len(_checkpoints(path)) == 1


def test_a_checkpoint_that_reads_back_but_differs_from_the_journal_is_a_mismatch(
        tmp_path: Path) -> None:
    path, twin = tmp_path / "s", tmp_path / "twin"
    with _store(path):
        pass
    shutil.copytree(path, twin)
    # The same store, generation and sequence number, a different document.
    with Store.open(path, sync="none") as store:
        store.add_document("x", "alpha words")
        store.checkpoint()
    with Store.open(twin, sync="none") as other:
        other.add_document("x", "beta words")
        other.checkpoint()
    (ours,), (theirs,) = _checkpoints(path), _checkpoints(twin)
    shutil.copy(theirs, ours)
    report = check(str(path))
    assert [f.code for f in report.findings] == ["checkpoint.mismatch"]
    assert report.exit_code == 4 and "--repair" in report.findings[0].next_step
    repaired = check(str(path), repair=True)
    assert repaired.exit_code == 1 and repaired.findings[0].repaired
    assert check(str(path)).clean
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "checkpoint"
        assert store.search_documents("alpha", 1)[0].id == "x"


@pytest.mark.parametrize("kind, code", [("bit flip", "checkpoint.damaged"),
                                        ("torn", "checkpoint.damaged"),
                                        ("replaced", "checkpoint.replaced"),
                                        ("leftover", "checkpoint.leftover")])
def test_a_damaged_replaced_or_half_written_checkpoint_is_reported_and_repaired(
        tmp_path: Path, kind: str, code: str) -> None:
    path = tmp_path / "s"
    with _store(path) as store:
        store.checkpoint()
        if kind == "replaced":
            old = Path(_checkpoints(path)[0]).read_bytes()
            store.add_document("more", "one more document")
            store.checkpoint()
    (ck,) = _checkpoints(path)
    raw = Path(ck).read_bytes()
    if kind == "bit flip":
        Path(ck).write_bytes(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    elif kind == "torn":
        Path(ck).write_bytes(raw[:-10])
    elif kind == "replaced":
        Path(ck.replace(f"{int(ck[-20:-4]):016d}", f"{int(ck[-20:-4]) - 1:016d}")
             ).write_bytes(old)
    else:
        Path(ck + ".tmp").write_bytes(raw[:50])
    report = check(str(path))
    assert [f.code for f in report.findings] == [code], report.findings
    repaired = check(str(path), repair=True)
    assert repaired.exit_code == 1 and all(f.repaired for f in repaired.findings)
    assert check(str(path)).clean
    (fresh,) = _checkpoints(path)
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "checkpoint"
        assert fresh.endswith(f"{store.revision:016d}.hck")
