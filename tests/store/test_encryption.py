"""With a key, no plaintext of text, metadata or entities reaches any file.

docs/contract.md §2: "key: 32 raw bytes turn on encryption (AES-256-GCM); a wrong key is a clear
error, never garbage." docs/guarantees.md §6: "With a key, every byte of text, subject, entity and
metadata on disk is ciphertext (journal and text segment alike); tests scan for
plaintext."
"""

from __future__ import annotations

import glob
import os
import secrets
from pathlib import Path

import pytest

from holomem import Store
from holomem.errors import KeyRequiredError, UnexpectedKeyError, WrongKeyError
from holomem.log import checkpoint as ckfile
from holomem.projections import checkpoint as codec
from tests.store._util import all_files, text_segment


def _assert_nowhere(store_path: Path, markers: list[str], *, checkpoint: bool = True) -> None:
    files = all_files(store_path)
    assert any(p.endswith(".hlj") for p in files) and any(p.endswith("text.seg") for p in files)
    # A checkpoint holds every term, id, entity and metadata value (docs/guarantees.md §6a).
    assert any(p.endswith(".hck") for p in files) == checkpoint
    for p, data in files.items():
        for m in markers:
            for form in {m, m.lower(), m.upper()}:
                for raw in (form.encode("utf-8"), form.encode("utf-16-le")):
                    assert raw not in data, f"{m!r} in plaintext in {p}"


def _write(store: Store, marker: str, n: int) -> None:
    store.add_document(f"doc-{n}", f"{marker} in the text, twice: {marker}",
                       metadata={"note": marker, marker: [marker]},
                       entities=[marker, f"{marker} Inc"], embedding=[0.1, 0.2, 0.3])


def test_markers_in_text_metadata_and_entities_appear_in_no_file(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "store"
    # Hex is incompressible enough that a plaintext copy would survive as is.
    text_m = "QX" + secrets.token_hex(12)
    meta_m = "QM" + secrets.token_hex(12)
    ent_m = "QE" + secrets.token_hex(12)
    with Store.open(path, key=key, sync="full") as store:
        assert store.stats().encrypted
        _write(store, text_m, 1)
        store.add_documents([
            {"id": "batch", "text": f"batched {text_m}", "metadata": {"k": meta_m},
             "entities": [ent_m]},
        ])
        store.add_document("meta-only", "plain words", metadata={"m": meta_m},
                           entities=[ent_m])
        store.add_document("replaced", f"first {text_m}")
        store.add_document("replaced", f"second {text_m}")
        store.add_document("deleted", f"gone {text_m}", metadata={"x": meta_m})
        store.delete_document("deleted")
        # The store works: the markers are searchable and readable through the key.
        assert {h.id for h in store.search_documents(text_m, 10)} == {
            "doc-1", "batch", "replaced"}
        doc = store.get_document("meta-only")
        assert doc is not None and doc.metadata == {"m": meta_m} and doc.entities == (ent_m,)
        _assert_nowhere(path, [text_m, meta_m, ent_m], checkpoint=False)
        assert store.checkpoint() is not None
        _assert_nowhere(path, [text_m, meta_m, ent_m])  # before close
    _assert_nowhere(path, [text_m, meta_m, ent_m])  # after close
    with Store.open(path, key=key, sync="full") as store:
        assert store.stats().opened_by == "checkpoint"
        assert store.get_document("batch") is not None
        doc = store.get_document("doc-1")
        assert doc is not None and doc.text.startswith(text_m)
        assert doc.metadata == {"note": text_m, text_m: [text_m]}
        _write(store, text_m, 2)
        store.checkpoint()
        _assert_nowhere(path, [text_m, meta_m, ent_m])  # after reopen and more writes
    # A rebuilt text segment is encrypted as well.
    os.unlink(text_segment(path))
    with Store.open(path, key=key, sync="full") as store:
        assert store.stats().opened_by == "checkpoint+reconcile"
        doc = store.get_document("doc-2")
        assert doc is not None and text_m in doc.text
    _assert_nowhere(path, [text_m, meta_m, ent_m])
    # Control: without a key the same writes leave every marker in plaintext, so the
    # scan above is able to see them.
    plain = tmp_path / "plain"
    with Store.open(plain, sync="none") as store:
        _write(store, text_m, 1)
        store.add_document("meta-only", "plain words", metadata={"m": meta_m},
                           entities=[ent_m])
        store.checkpoint()
    for m in (text_m, meta_m, ent_m):
        with pytest.raises(AssertionError):
            _assert_nowhere(plain, [m])
    # The checkpoints hold the markers, plaintext or sealed (the text's as a BM25 term,
    # the entity's as an entity name; metadata values once a filter built their index):
    # the scans above looked where they are (the payload read back with the key).
    for where, k in ((plain, None), (path, key)):
        (ck,) = glob.glob(str(where / "gen-*" / "checkpoint-*.hck"))
        with Store.open(where, key=k, read_only=True) as store:
            journal = store._journal  # the store id, the key's envelope, the digest
            seq = ckfile.parse_header(Path(ck).read_bytes()).seq
            _, payload = ckfile.read(ck, store_id=journal.store_id,
                                     generation=journal.generation, digest=journal.digest(seq),
                                     schema=codec.SCHEMA, envelope=journal.envelope)
        assert text_m.lower().encode() in payload and ent_m.encode() in payload, where


def test_a_wrong_key_raises_wrong_key_error_and_never_garbage(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "store"
    with Store.open(path, key=key, sync="none") as store:
        store.add_document("a", "some text")
    before = all_files(path)
    wrong = bytes(b ^ 1 for b in key)
    for read_only in (False, True):
        with pytest.raises(WrongKeyError) as info:
            Store.open(path, key=wrong, read_only=read_only)
        assert info.value.code == "key.wrong"
    with pytest.raises(KeyRequiredError):
        Store.open(path)
    assert all_files(path) == before  # a refused open writes nothing
    # A key for a plaintext store is refused too.
    plain = tmp_path / "plain"
    Store.open(plain, sync="none").close()
    with pytest.raises(UnexpectedKeyError):
        Store.open(plain, key=key)
    # The right key still opens it, and the refused opens left no lock behind.
    with Store.open(path, key=key, sync="none") as store:
        doc = store.get_document("a")
        assert doc is not None and doc.text == "some text"
