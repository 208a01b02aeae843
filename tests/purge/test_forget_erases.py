"""Forgotten text is physically gone: a marker is searched for in every file
(docs/guarantees.md §6).

A marker string sits in the text, subject, entities and metadata of the facts a
forget removes (and in the text, metadata and entities of a deleted document).
Every byte of every file under the store directory is searched for it, raw, inside
every zstd frame, and, for encrypted stores, inside everything that opens under
the key (see ``markers.py``: a raw search alone would miss the journal's
compressed frames). The guarantees:

- without purge, the marker stays only in the journal segments and the
  checkpoint of the same generation, the documented exception; the text segment's
  records were zeroed and synced before the call returned;
- with purge, it is in no file, before and after a restart;
- unrelated facts and documents come back exactly as before;
- in an encrypted store the marker is never on disk in plaintext, at any time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from holomem import Store
from holomem.fsck import check
from tests.purge import markers
from tests.purge import workload as w

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["plain", "encrypted"])
def key(request: pytest.FixtureRequest) -> bytes | None:
    return os.urandom(32) if request.param == "encrypted" else None


def _assert_no_plaintext(path: str, key: bytes | None) -> None:
    if key is not None:
        assert markers.plaintext_files_with(path, w.MARKER_BYTES) == []


def _only_in_journal(hits: dict[str, list[str]]) -> None:
    outside = {f: how for f, how in hits.items()
               if not markers.is_journal_segment(f) and not markers.is_checkpoint(f)}
    assert outside == {}, f"the marker is outside the journal and its checkpoint: {outside}"
    assert hits, "the marker should still be in the journal (the documented exception); " \
                 "if it is not, the scan is not finding it"


def test_marker_is_found_by_the_scan_before_forget(tmp_path: Path, key: bytes | None) -> None:
    """The scan sees the marker where it is: the journal and the text segment."""
    path = str(tmp_path / "s")
    store, memory = w.open_memory(path, key)
    w.remember_all(memory)
    hits = markers.files_with(path, w.MARKER_BYTES, key)
    store.close()
    names = {os.path.basename(f) for f in hits}
    assert "text.seg" in names
    assert any(markers.is_journal_segment(f) for f in hits)
    # The checkpoint holds it too, and the scan sees inside it (sealed or compressed).
    (ckpt,) = [f for f in hits if markers.is_checkpoint(f)]
    assert hits[ckpt] == (["inside a checkpoint block opened with the key"] if key
                          else ["inside a zstd frame"])
    assert len(markers.all_files(path)) >= 4  # LOCK, text.seg and 2+ segments


def test_encrypted_store_never_holds_the_marker_in_plaintext(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = str(tmp_path / "s")
    store, memory = w.open_memory(path, key)
    w.remember_all(memory)
    _assert_no_plaintext(path, key)
    w.forget_marked(memory, purge=False)
    _assert_no_plaintext(path, key)
    store.close()
    _assert_no_plaintext(path, key)
    store, memory = w.open_memory(path, key)
    w.forget_marked(memory, purge=True)
    _assert_no_plaintext(path, key)
    store.close()
    _assert_no_plaintext(path, key)


def test_forget_without_purge_leaves_the_marker_only_in_journal_segments(
        tmp_path: Path, key: bytes | None) -> None:
    path = str(tmp_path / "s")
    store, memory = w.open_memory(path, key)
    w.remember_all(memory)
    assert w.forget_marked(memory, purge=False) == w.marked_ids()
    # Before close: forget returned, so the text records are already zeroed.
    _only_in_journal(markers.files_with(path, w.MARKER_BYTES, key))
    _assert_no_plaintext(path, key)
    assert all(memory.get(i) is None for i in w.marked_ids())
    store.close()
    _only_in_journal(markers.files_with(path, w.MARKER_BYTES, key))
    store, memory = w.open_memory(path, key)
    assert all(memory.get(i) is None for i in w.marked_ids())
    store.close()
    _only_in_journal(markers.files_with(path, w.MARKER_BYTES, key))


def test_forget_zeroes_and_syncs_the_text_records_before_it_returns(
        tmp_path: Path, key: bytes | None) -> None:
    """The file layer's log (HOLOMEM_FAULT_LOG) shows the zeroing writes to the text
    segment, and an fsync of it after the last of them, before forget returns."""
    fault_log = tmp_path / "fault.log"
    path = str(tmp_path / "s")
    code = (
        "import sys\n"
        "from tests.purge import workload as w\n"
        "key = bytes.fromhex(sys.argv[2]) if sys.argv[2] else None\n"
        "store, memory = w.open_memory(sys.argv[1], key)\n"
        "w.remember_all(memory)\n"
        "log = open(sys.argv[3], 'a'); log.write('--forget--\\n'); log.flush()\n"
        "w.forget_marked(memory, purge=False)\n"
        "log.write('--returned--\\n'); log.flush()\n"
        "store.close()\n"
    )
    env = dict(os.environ, HOLOMEM_FAULT_LOG=str(fault_log), PYTHONPATH=str(REPO))
    env.pop("HOLOMEM_CRASH_AT", None)
    subprocess.run([sys.executable, "-c", code, path, key.hex() if key else "",
                    str(fault_log)], cwd=REPO, env=env, check=True, timeout=60)
    lines = fault_log.read_text().splitlines()
    during = lines[lines.index("--forget--") + 1 : lines.index("--returned--")]
    ops = [line.split("\t") for line in during]
    text_ops = [(i, op) for i, op in enumerate(ops)
                if len(op) > 1 and os.path.basename(op[1]) == "text.seg"]
    writes = [i for i, op in text_ops if op[0] == "write"]
    syncs = [i for i, op in text_ops if op[0] == "sync"]
    assert writes, f"forget wrote nothing to the text segment: {during}"
    assert syncs and max(syncs) > max(writes), f"no fsync after the zeroing: {during}"
    _only_in_journal(markers.files_with(path, w.MARKER_BYTES, key))


def test_forget_with_purge_leaves_the_marker_in_no_file(tmp_path: Path,
                                                        key: bytes | None) -> None:
    """And unrelated facts read back exactly as in a twin store forgotten without purge."""
    twin_path, path = str(tmp_path / "twin"), str(tmp_path / "s")
    twin, twin_memory = w.open_memory(twin_path, key)
    w.remember_all(twin_memory)
    before = w.observe(twin_memory)
    w.forget_marked(twin_memory, purge=False)
    expected = w.observe(twin_memory)
    twin.close()
    assert expected["get"] == before["get"]

    store, memory = w.open_memory(path, key)
    w.remember_all(memory)
    assert w.observe(memory) == before
    report = memory.forget({"subject": w.MARKED_SUBJECT}, purge=True)
    assert report.purged and report.removed == w.marked_ids()
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}
    assert w.observe(memory) == expected
    # Idempotent: a second purge finds nothing to remove and changes nothing visible.
    assert memory.forget({"subject": w.MARKED_SUBJECT}, purge=True).removed == []
    assert w.observe(memory) == expected
    store.close()
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}

    store, memory = w.open_memory(path, key)
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}
    assert w.observe(memory) == expected
    assert all(memory.get(i) is None for i in w.marked_ids())
    assert memory.recall(w.MARKER, {"history": "all"}) == []
    store.close()
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}
    assert check(path, key=key).exit_code == 0


def _docs(marker: str) -> list[dict[str, Any]]:
    keep = [{"id": f"doc-{i}", "text": f"document {i} about the harbor and {i} lanterns",
             "metadata": {"i": i}, "entities": [f"Owner{i % 3}"]} for i in range(25)]
    secret = {"id": "secret", "text": f"the secret is {marker}, forget it",
              "metadata": {"why": marker}, "entities": [f"E-{marker}"]}
    return [*keep[:12], secret, *keep[12:]]


def _observe_docs(store: Store) -> dict[str, Any]:
    docs = {f"doc-{i}": msgspec.to_builtins(store.get_document(f"doc-{i}")) for i in range(25)}
    hits = {q: msgspec.to_builtins(store.search_documents(q, 50))
            for q in ("harbor", "lanterns 7", "document", w.MARKER)}
    return {"docs": docs, "search": hits}


@pytest.mark.parametrize("purge", [False, True], ids=["no-purge", "purge"])
def test_delete_document_erases_like_forget(tmp_path: Path, key: bytes | None,
                                            purge: bool) -> None:
    twin_path, path = str(tmp_path / "twin"), str(tmp_path / "s")
    with Store.open(twin_path, key=key, segment_size=w.SEGMENT_SIZE) as twin:
        twin.add_documents([d for d in _docs(w.MARKER) if d["id"] != "secret"])
        expected = _observe_docs(twin)

    store = Store.open(path, key=key, segment_size=w.SEGMENT_SIZE)
    for doc in _docs(w.MARKER):
        store.add_document(doc["id"], doc["text"], metadata=doc["metadata"],
                           entities=doc["entities"])
    assert "text.seg" in {os.path.basename(f)
                          for f in markers.files_with(path, w.MARKER_BYTES, key)}
    assert store.delete_document("secret", purge=purge)
    assert not store.has_document("secret")
    hits = markers.files_with(path, w.MARKER_BYTES, key)
    if purge:
        assert hits == {}
    else:
        _only_in_journal(hits)
    _assert_no_plaintext(path, key)
    assert _observe_docs(store) == expected
    store.close()

    with Store.open(path, key=key, segment_size=w.SEGMENT_SIZE) as store:
        assert store.get_document("secret") is None
        assert _observe_docs(store) == expected
    hits = markers.files_with(path, w.MARKER_BYTES, key)
    if purge:
        assert hits == {}
    else:
        _only_in_journal(hits)
    assert check(path, key=key).exit_code == 0


def test_every_compaction_zeroes_what_it_unlinks_so_a_later_purge_leaves_no_copy(
        tmp_path: Path, key: bytes | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 11, item 6: remember, ``compact()`` without purge, then
    ``forget(purge=True)``. Each file the store unlinks is read at the moment of its
    unlink: a file still holding the marker would leave it in freed disk blocks,
    where no later purge can reach it. Every one must already be zeros."""
    path = str(tmp_path / "s")
    unlinked: dict[str, list[str]] = {}
    real_unlink = os.unlink

    def unlink(target: str | os.PathLike[str], *args: Any, **kwargs: Any) -> None:
        name = os.fspath(target)
        if name.startswith(path) and os.path.isfile(name):
            unlinked[os.path.relpath(name, path)] = markers.found_in(name, w.MARKER_BYTES, key)
        real_unlink(target, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", unlink)
    store, memory = w.open_memory(path, key)
    w.remember_all(memory)
    store.compact()  # the marker is live: the old generation holds it, and so does the new
    w.forget_marked(memory, purge=True)
    store.close()
    assert any(n.startswith("gen-00000001") for n in unlinked), unlinked
    assert {n: how for n, how in unlinked.items() if how} == {}
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}


def test_forgetting_a_users_namespace_with_purge_leaves_no_trace_of_it(
        tmp_path: Path, key: bytes | None) -> None:
    """One store, two users. The marker names one user's namespace (it is ciphertext
    in an encrypted store, like every string of a fact); forgetting that namespace
    with purge leaves the marker in no file, and the other user's facts as they were."""
    path = str(tmp_path / "s")
    user = ["users", w.MARKER]
    store, memory = w.open_memory(path, key)
    memory.remember_many([{"id": f"mine-{i}", "text": f"private note {i}", "namespace": user}
                          for i in range(5)])
    memory.remember_many([{"id": f"other-{i}", "text": f"shared note {i}",
                           "namespace": ["users", "other"]} for i in range(5)])
    others = [msgspec.to_builtins(memory.get(f"other-{i}")) for i in range(5)]
    _assert_no_plaintext(path, key)
    assert markers.files_with(path, w.MARKER_BYTES, key), "the scan sees the namespace"
    report = memory.forget({"namespace": user}, purge=True)
    assert sorted(report.removed) == [f"mine-{i}" for i in range(5)]
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}
    assert [msgspec.to_builtins(memory.get(f"other-{i}")) for i in range(5)] == others
    assert [n.namespace for n in memory.list_namespaces().namespaces] == [["users", "other"]]
    store.close()
    assert markers.files_with(path, w.MARKER_BYTES, key) == {}
