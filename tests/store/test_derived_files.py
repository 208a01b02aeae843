"""The text segment is derived: deleting or damaging it loses nothing.

docs/contract.md §1: "Deleting every projection file and reopening must give the same answers."
FORMAT.md §1: files named in §9 are derived, deletable, rebuilt from the journal.
A damaged record is never served: it is detected by its checksum and rebuilt from
the journal, on open after a crash (stats().opened_by == "replay+reconcile") or on
read when the file was sealed by a clean close.
"""

from __future__ import annotations

import glob
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from holomem import Store
from holomem.log.recordfile import HEADER_SIZE, RECORD_SIZE
from holomem.projections import text as text_mod
from tests.store._util import check_documents, populate, snapshot, text_segment

ROOT = Path(__file__).resolve().parents[2]


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0x5A]))


def _offset_of(path: str, needle: bytes) -> int:
    with open(path, "rb") as f:
        data = f.read()
    at = data.find(needle)
    assert at >= HEADER_SIZE + RECORD_SIZE, "the text is where a record body should be"
    return at


def test_deleting_the_text_segment_and_reopening_gives_identical_answers(
        tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        docs = populate(store)
        before = snapshot(store)
    seg = text_segment(path)
    # Every file but the journal segments (the only source of truth, FORMAT.md §1).
    derived = [p for p in glob.glob(str(path / "gen-*" / "*")) if not p.endswith(".hlj")]
    assert seg in derived
    for p in derived:
        os.unlink(p)
    # A follower can answer without the derived files (it reads the journal).
    with Store.open(path, read_only=True) as follower:
        assert snapshot(follower) == before
        check_documents(follower, docs)
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "replay+reconcile"
        assert os.path.exists(seg)  # rebuilt
        assert snapshot(store) == before
        check_documents(store, docs)
    # The rebuilt file was sealed: the next open trusts it, and answers the same.
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "replay"
        assert snapshot(store) == before


def test_a_clean_reopen_trusts_the_sealed_text_segment(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        populate(store)
        before = snapshot(store)
    with open(text_segment(path), "rb") as f:
        sealed = f.read()
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "replay"
        assert snapshot(store) == before
    with open(text_segment(path), "rb") as f:
        assert f.read()[HEADER_SIZE:] == sealed[HEADER_SIZE:]  # records untouched


def test_a_corrupt_record_in_a_sealed_text_segment_is_rebuilt_on_read(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        docs = populate(store)
        before = snapshot(store)
    seg = text_segment(path)
    _flip(seg, _offset_of(seg, b"quiet moon over the stones") + 3)
    with Store.open(path, sync="none") as store:
        # Sealed by the clean close: trusted at open; the damage is found on read.
        assert store.stats().opened_by == "replay"
        doc = store.get_document("b")
        assert doc is not None and doc.text == "quiet moon over the stones"
        check_documents(store, docs)
        assert snapshot(store) == before
    # The read repaired the record in place.
    with open(seg, "rb") as f:
        assert b"quiet moon over the stones" in f.read()


def _damage_header(seg: str) -> None:
    _flip(seg, 20)  # inside the store id: the header checksum fails


def _damage_record(seg: str) -> None:
    _flip(seg, _offset_of(seg, b"an apple by the river"))


def _truncate_mid_record(seg: str) -> None:
    os.truncate(seg, os.path.getsize(seg) - 7)


def _append_garbage(seg: str) -> None:
    with open(seg, "ab") as f:
        f.write(b"\xff" * 100 + b"stale text that is no document")


def _zero_the_file(seg: str) -> None:
    with open(seg, "r+b") as f:
        f.write(bytes(os.path.getsize(seg)))


DAMAGE: dict[str, Callable[[str], None]] = {
    "header": _damage_header,
    "record": _damage_record,
    "truncated": _truncate_mid_record,
    "garbage-appended": _append_garbage,
    "zeroed": _zero_the_file,
}


def _crash_after_writes(path: Path) -> None:
    """Write ``populate``'s documents in a child process that dies without closing."""
    code = (
        "import os, sys\n"
        "from holomem import Store\n"
        "from tests.store._util import populate\n"
        "store = Store.open(sys.argv[1], sync='full')\n"
        "populate(store)\n"
        "os._exit(0)  # no close(): the text segment is never sealed\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, env=env, cwd=ROOT,
                   capture_output=True, timeout=60)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_crash_like_reopen_reconciles_a_damaged_text_segment_from_the_journal(
        tmp_path: Path, damage: str) -> None:
    reference = tmp_path / "reference"
    with Store.open(reference, sync="none") as store:
        docs = populate(store)
        before = snapshot(store)
    path = tmp_path / "store"
    _crash_after_writes(path)
    seg = text_segment(path)
    DAMAGE[damage](seg)
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "replay+reconcile"
        check_documents(store, docs)
        assert snapshot(store) == before
    with open(seg, "rb") as f:
        repaired = f.read()
    assert b"an apple by the river" in repaired
    assert b"stale text" not in repaired
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "replay"
        check_documents(store, docs)


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_text_segment_after_a_clean_close_still_serves_the_right_text(
        tmp_path: Path, damage: str) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        docs = populate(store)
        before = snapshot(store)
    DAMAGE[damage](text_segment(path))
    with Store.open(path, read_only=True) as follower:  # reads, never repairs
        check_documents(follower, docs)
    with Store.open(path, sync="none") as store:
        check_documents(store, docs)
        assert snapshot(store) == before


@pytest.mark.parametrize("span", [text_mod.SPAN, 1])
def test_a_compaction_carries_the_right_text_over_a_damaged_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, span: int) -> None:
    """Compaction reads live records in large spans (or, with a span of one byte, one
    by one); a record that does not read back is taken from the journal, never copied."""
    monkeypatch.setattr(text_mod, "SPAN", span)
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        docs = populate(store)
        before = snapshot(store)
    seg = text_segment(path)
    _flip(seg, _offset_of(seg, b"quiet moon over the stones") + 3)
    with Store.open(path, sync="none") as store:
        store.compact()
        check_documents(store, docs)
        assert snapshot(store)[:-1] == before[:-1]  # the revision moved on
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "replay"  # the new text segment was sealed
        check_documents(store, docs)
