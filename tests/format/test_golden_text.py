"""The text segment's two versions (FORMAT.md §9.1): this build reads the version 1
files earlier builds wrote (golden files packed from the document alone), keeps a
store's version 1 file working until a compaction replaces it, and writes version 2
files, whose records a compaction copies as they are.
"""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
import xxhash

from holomem import Store
from holomem.fsck import check
from holomem.log.envelope import Envelope
from holomem.log.format import TEXT_FILE
from holomem.log.recordfile import RecordFile
from holomem.projections.text import decode_body

from .make_golden import (
    HERE,
    KEY,
    SALT,
    STORE_ID,
    TEXT_RECORDS,
    TEXT_V1_NAMES,
    build_text_v1,
    text_body,
    text_file_v1,
)

KEYS = {"plain": None, "encrypted": os.urandom(32)}


def _golden(encrypted: bool) -> bytes:
    with open(os.path.join(HERE, TEXT_V1_NAMES[encrypted]), "rb") as f:
        return f.read()


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "sealed"])
def test_the_golden_version_1_files_are_the_layout_format_md_gives(encrypted: bool) -> None:
    assert _golden(encrypted) == build_text_v1(encrypted)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "sealed"])
def test_this_build_reads_a_version_1_file_bound_to_offset_and_sequence_number(
        tmp_path: Path, encrypted: bool) -> None:
    path = tmp_path / TEXT_FILE
    path.write_bytes(_golden(encrypted))
    f = RecordFile(str(path), store_id=STORE_ID, generation=1,
                   envelope=Envelope(KEY) if encrypted else None, read_only=True)
    try:
        assert f.available and f.version == 1 and f.salt == SALT
        assert f.synced_seq == len(TEXT_RECORDS)
        offset = f.first_offset
        for seq, doc_id, text, metadata, entities in TEXT_RECORDS:
            body = text_body(doc_id, text, metadata, entities)
            size = f.record_size(len(body))
            assert f.read(offset, size, seq) == body
            rec = decode_body(body)
            assert rec is not None and (rec.id, rec.text) == (doc_id, text)
            # version 1 binds the sequence number (and, sealed, the offset too)
            assert f.read(offset, size, seq + 1) is None
            offset += size
        assert offset == len(_golden(encrypted))
    finally:
        f.close()


def _fill(store: Store, n: int = 12) -> None:
    store.add_documents([{"id": f"d{i}", "text": f"river stone {i} " + "lamp " * (i % 4)}
                         for i in range(n)])
    store.delete_document("d3")


def _to_version_1(store_dir: Path, store: Store, key: bytes | None) -> None:
    """Rewrite the closed store's text segment as the version 1 file an earlier build
    would have left, from the placements a replay computes."""
    with store.reading() as view:
        state = view.state
        gen = store.generation
        text = state.text.store
        assert isinstance(text, RecordFile)
        store_id, salt = text.store_id, text.salt
        records = []
        for slot in state.catalog.alive.view().nonzero()[0].tolist():
            rec = view.record(slot)
            body = text_body(rec.id, rec.text, rec.metadata, list(rec.entities))
            records.append((state.text.offset.item(slot), state.catalog.seq.item(slot), body))
        last, end = store.revision, state.text.end
    store.close()
    data = text_file_v1(store_id, gen, salt, last, records, key)
    # Removed documents' records were zeroed: the same holes, then the same end.
    out = bytearray(end)
    cursor = 64
    out[:64] = data[:64]
    for offset, _seq, _body in records:
        size = 24 + len(_body) + (28 if key else 0)
        out[offset:offset + size] = data[cursor:cursor + size]
        cursor += size
    gen_dir = store_dir / f"gen-{gen:08d}"
    (gen_dir / TEXT_FILE).write_bytes(bytes(out))
    for ckpt in gen_dir.glob("checkpoint-*"):
        ckpt.unlink()


@pytest.mark.parametrize("kind", list(KEYS))
def test_a_store_with_a_version_1_text_segment_opens_trusting_it_and_compacts_to_version_2(
        tmp_path: Path, kind: str) -> None:
    key = KEYS[kind]
    path = tmp_path / "s"
    store = Store.open(path, key=key, sync="none", checkpoint_every=None)
    _fill(store)
    expected = {i: store.get_document(i) for i in store.ids()}
    _to_version_1(path, store, key)
    with Store.open(path, key=key, checkpoint_every=None) as store:
        assert store.stats().opened_by == "replay"  # trusted: not reconciled
        with store.reading() as view:
            text = view.state.text
            assert isinstance(text.store, RecordFile) and text.store.version == 1
            for i in expected:
                slot = view.slot(i)
                assert text.read(slot, view.state.catalog.seq.item(slot)) is not None
        store.add_document("new", "a version 1 record appended")  # still version 1
        assert check(str(path), key=key).clean
        store.compact()
        with store.reading() as view:
            assert isinstance(view.state.text.store, RecordFile)
            assert view.state.text.store.version == 2
        expected["new"] = store.get_document("new")
        assert {i: store.get_document(i) for i in store.ids()} == expected
    report = check(str(path), key=key)
    assert report.clean, report.findings


def _live_records(store: Store) -> tuple[int, list[bytes]]:
    with store.reading() as view:
        state = view.state
        text = state.text.store
        assert isinstance(text, RecordFile) and text.version == 2
        raw = text.read_all()
        out = [raw[state.text.offset.item(s):state.text.offset.item(s) + state.text.size.item(s)]
               for s in state.catalog.alive.view().nonzero()[0].tolist()]
        return text.salt, out


@pytest.mark.parametrize("kind", list(KEYS))
def test_a_compaction_copies_version_2_records_byte_for_byte(tmp_path: Path, kind: str) -> None:
    """Same salt, same header, same checksum, for a sealed record the same nonce and
    ciphertext: nothing encoded or sealed again, and the removed record not copied."""
    key = KEYS[kind]
    with Store.open(tmp_path / "s", key=key, sync="none", checkpoint_every=None) as store:
        _fill(store)
        salt, before = _live_records(store)
        store.delete_document("d5")
        del before[4]  # d5, the fifth live record (d3 is gone)
        store.compact(purge=True)
        salt_after, after = _live_records(store)
        assert salt_after == salt and after == before
        with store.reading() as view:  # and every way of reading serves them from the file
            slots = view.state.catalog.alive.view().nonzero()[0].tolist()
            seqs = view.state.catalog.seq.view()[slots].tolist()
            text = view.state.text
            assert None not in text.read_each(slots, seqs)
            assert None not in text.read_many(slots, seqs)
            assert all(text.read(s, q) is not None for s, q in zip(slots, seqs, strict=True))
        assert store.get_document("d7") is not None and store.get_document("d5") is None


@pytest.mark.parametrize("kind", list(KEYS))
def test_a_version_2_record_holding_another_document_is_not_intact(tmp_path: Path,
                                                                   kind: str) -> None:
    """A record carries no sequence number or offset any more: one moved to another
    slot of the same size still verifies, so the body's id is checked: fsck reports
    it, and a reader takes the text from the journal (the writer writes it again)."""
    key = KEYS[kind]
    path = tmp_path / "s"
    with Store.open(path, key=key, sync="none", checkpoint_every=None) as store:
        store.add_documents([{"id": "x1", "text": "same size one"},
                             {"id": "x2", "text": "same size two"}])
        with store.reading() as view:
            t = view.state.text
            a, b = view.slot("x1"), view.slot("x2")
            spans = [(t.offset.item(s), t.size.item(s)) for s in (a, b)]
        gen_dir = path / f"gen-{store.generation:08d}"
    assert spans[0][1] == spans[1][1]
    seg = gen_dir / TEXT_FILE
    data = bytearray(seg.read_bytes())
    (oa, size), (ob, _) = spans
    data[oa:oa + size], data[ob:ob + size] = data[ob:ob + size], data[oa:oa + size]
    seg.write_bytes(bytes(data))
    for ckpt in gen_dir.glob("checkpoint-*"):
        ckpt.unlink()
    report = check(str(path), key=key)
    assert sorted(f.code for f in report.findings) == ["text.record", "text.record"]
    with Store.open(path, key=key, checkpoint_every=None) as store:
        assert store.get_document("x1").text == "same size one"  # type: ignore[union-attr]
        assert store.get_document("x2").text == "same size two"  # type: ignore[union-attr]
    assert check(str(path), key=key).clean
    shutil.rmtree(path)


def _bodies() -> list[bytes]:
    return [text_body(doc_id, text, metadata, entities)
            for _, doc_id, text, metadata, entities in TEXT_RECORDS] + [b"", b"\x00" * 300]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "sealed"])
def test_records_encoded_as_a_run_are_each_record_at_its_place(
        tmp_path: Path, encrypted: bool) -> None:
    """A bulk load encodes its records together (RecordFile.encode_run): each reads
    back at its own place, and a plaintext run is byte for byte FORMAT.md §9.1's
    version 2 layout (length, no flag, no sequence number, checksum, body)."""
    f = RecordFile(str(tmp_path / TEXT_FILE), store_id=STORE_ID, generation=1,
                   envelope=Envelope(KEY) if encrypted else None, read_only=False)
    try:
        assert f.version == 2
        first, bodies = f.first_offset, _bodies()
        run = f.encode_run(first, 7, bodies)
        offset = first
        for body in bodies:
            size = f.record_size(len(body))
            assert f.decode(run[offset - first : offset - first + size], offset, 7) == body
            offset += size
        assert offset - first == len(run)
        if not encrypted:
            laid_out = b""
            for body in bodies:
                head = struct.pack("<IHHQ", len(body), 0, 0, 0)
                laid_out += (head + xxhash.xxh3_64_intdigest(head + body, f.salt)
                             .to_bytes(8, "little") + body)
            assert run == laid_out
    finally:
        f.close()


def test_records_encoded_as_a_run_in_a_version_1_file_are_bound_to_their_places(
        tmp_path: Path) -> None:
    path = tmp_path / TEXT_FILE
    path.write_bytes(_golden(False))
    f = RecordFile(str(path), store_id=STORE_ID, generation=1, envelope=None,
                   read_only=False)
    try:
        assert f.version == 1
        start, bodies = len(_golden(False)), _bodies()
        one_by_one, offset = b"", start
        for body in bodies:
            one_by_one += f.encode(offset, 9, body)
            offset = start + len(one_by_one)
        assert f.encode_run(start, 9, bodies) == one_by_one
    finally:
        f.close()
