"""A replaced or deleted document's record in the text segment is overwritten with zeros.

docs/guarantees.md §6: "Before forget returns, the removed facts' records in the text segment are
overwritten with zeros and synced." The document engine does the same for
delete_document (zeroed and synced before it returns) and for a replacement (the old
record is zeroed at once). Without purge the old text stays in the journal: the one
bounded, documented exception, asserted here too so that the scan is known to see text.
"""

from __future__ import annotations

import glob
import os
import secrets
from pathlib import Path

import pytest

from holomem import Store
from holomem.log import fs
from holomem.log.recordfile import HEADER_SIZE
from tests.store._util import text_segment


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _journal(store_path: Path) -> bytes:
    return b"".join(_read(p) for p in sorted(glob.glob(str(store_path / "gen-*" / "seg-*.hlj"))))


def _record_region(store: Store, doc_id: str) -> tuple[int, int]:
    """(offset, size) of the live record of ``doc_id`` in the text segment.

    White-box: the placement lives only in memory (FORMAT.md §9: replay knows every
    offset, nothing on disk indexes them).
    """
    with store.reading() as view:
        slot = view.slot(doc_id)
        assert slot >= 0
        text = view.state.text
        return int(text.offset.view()[slot]), int(text.size.view()[slot])


@pytest.mark.parametrize("how", ["delete", "replace", "replace-in-batch"])
@pytest.mark.parametrize("sync", ["full", "none"])
def test_removed_text_is_zeroed_in_the_text_segment_before_the_call_returns(
        tmp_path: Path, how: str, sync: str) -> None:
    marker = "zq" + secrets.token_hex(16)  # one term, in no other text
    path = tmp_path / "store"
    with Store.open(path, sync=sync) as store:
        store.add_document("before", "a neighbour written first")
        store.add_document("victim", f"the {marker} lives here", metadata={"m": marker})
        store.add_document("after", "a neighbour written last")
        seg = text_segment(path)
        off, size = _record_region(store, "victim")
        data = _read(seg)
        assert marker.encode() in data[off : off + size]  # the record really holds it
        neighbours = data[HEADER_SIZE:off], data[off + size :]

        if how == "delete":
            assert store.delete_document("victim") is True
        elif how == "replace":
            store.add_document("victim", "new text, nothing secret")
        else:
            store.add_documents([{"id": "other", "text": "unrelated"},
                                 {"id": "victim", "text": "new text, nothing secret"}])

        data = _read(seg)  # as soon as the call returned, before any close
        assert marker.encode() not in data
        assert data[off : off + size] == bytes(size)
        # Only that record was touched.
        assert data[HEADER_SIZE:off] == neighbours[0]
        assert data[off + size : off + size + len(neighbours[1])] == neighbours[1]
        # The documented exception: the journal still holds the old event until a
        # compaction (docs/guarantees.md §6); the text segment is the file that must not.
        assert marker.encode() in _journal(path)
        doc = store.get_document("victim")
        assert (doc is None) if how == "delete" else (doc is not None and marker not in doc.text)
        assert store.search_documents(marker) == []

    # Still zero after a clean close and a reopen.
    assert marker.encode() not in _read(seg)
    with Store.open(path, sync=sync) as store:
        assert store.search_documents(marker) == []
        assert marker.encode() not in _read(seg)


def test_records_of_a_rebuilt_text_segment_hold_only_live_documents(tmp_path: Path) -> None:
    marker = "zq" + secrets.token_hex(16)
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        store.add_document("x", f"old {marker}")
        store.add_document("x", "replaced")
        store.add_document("y", f"also {marker}")
        store.delete_document("y")
    os.unlink(text_segment(path))
    with Store.open(path, sync="none") as store:
        assert store.get_document("x") is not None
        data = _read(text_segment(path))
        assert marker.encode() not in data
        # Every byte outside the one live record is zero (the header aside).
        off, size = _record_region(store, "x")
        assert not any(data[HEADER_SIZE:off]) and not any(data[off + size :])


def test_delete_document_syncs_the_zeroed_record_before_it_returns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zeros reach the disk: the file layer's trace (HOLOMEM_FAULT_LOG) shows the
    zeroing write of the record followed by an fsync of the text segment."""
    path = tmp_path / "store"
    trace = tmp_path / "fs.log"
    with Store.open(path, sync="none") as store:  # even when the journal is not synced
        store.add_document("victim", "text to erase")
        store.add_document("keep", "text to keep")
        seg = text_segment(path)
        off, size = _record_region(store, "victim")
        fs.install_tap(recorder := fs.recorder(str(trace)))
        store.delete_document("victim")
        fs.install_tap(None)
        recorder.close()
        lines = [tuple(line.split("\t")) for line in trace.read_text().splitlines()]
    zeroing = ("write", seg, str(off), str(size))
    writes = [line[:4] for line in lines]
    assert zeroing in writes
    assert ("sync", seg) in [line[:2] for line in lines[writes.index(zeroing) + 1 :]]
