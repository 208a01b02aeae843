"""A checkpoint changes no answer (docs/guarantees.md §6a).

Open restores the newest valid checkpoint and replays only the journal's tail; a
checkpoint that is damaged, torn, of another store or generation, of another
schema or format version, ahead of the journal without proving its transactions
durable (written by a build before the journal-synced flag), or taken from a copy of
the store whose journal has since diverged is ignored with a warning saying why (and
in ``stats().checkpoints_ignored``), and erased by the writer (one that proves them
durable refuses the open: tests/store/test_lost_tail.py). Deleting every
checkpoint and reopening gives the same answers bit for bit: recall (with
explanations), explain, get, history and list are compared as msgspec builtins
after every step of the reopen test's sequence.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import struct
import time
from array import array
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest

from holomem import ManualClock, Memory, Store
from holomem.events import DocumentAdded, DocumentReplaced, VectorsSet
from holomem.fsck import check
from holomem.log.checksum import checksum
from holomem.projections import checkpoint as codec
from holomem.projections.base import GrowArray, Later
from holomem.projections.state import ProjectionState
from tests.memory import test_reopen as reopen

FILTERS: list[dict[str, Any]] = [{"metadata": {"source": "chat"}},
                                 {"metadata": {"n": {"$exists": True}}}]


def answers(memory: Memory) -> Any:
    out = reopen.snapshot(memory)
    for q in reopen.QUERIES:
        for f in FILTERS:
            out["recall"].append(msgspec.to_builtins(
                memory.recall(q, filter=f, history="all", explain=True)))
        out["recall"].append(msgspec.to_builtins(memory.store.similar_documents(q, 5)))
    out["list"] = msgspec.to_builtins(memory.list(limit=1000))
    out["namespaces"] = msgspec.to_builtins(memory.list_namespaces())
    return out


def checkpoints(path: Path) -> list[str]:
    return sorted(glob.glob(str(path / "gen-*" / "checkpoint-*.hck")))


def open_store(path: Path, **options: Any) -> Store:
    options.setdefault("checkpoint_every", None)
    options.setdefault("checkpoint_close_min", 1 << 40)
    return Store.open(path, sync="none", **options)


def test_answers_are_the_same_from_a_checkpoint_and_from_the_whole_journal(
        tmp_path: Path) -> None:
    path = tmp_path / "store"
    clock = ManualClock(1_000)
    store = open_store(path)
    memory = Memory(store, reopen.CONFIG, clock=clock)
    try:
        for i, (name, step) in enumerate(reopen.STEPS):
            clock.advance(7)
            step(memory)
            if i % 2 == 0:
                assert store.checkpoint() is not None, name
                # The newest checkpoint already holds this revision.
                assert store.checkpoint() is None
            before = answers(memory)
            revision = store.revision
            had = checkpoints(path)
            store.close()
            store = open_store(path)
            memory = Memory(store, reopen.CONFIG, clock=clock)
            assert store.revision == revision, name
            assert store.stats().opened_by.startswith("checkpoint" if had else "replay"), name
            assert answers(memory) == before, name
            store.close()
            for f in checkpoints(path):
                os.unlink(f)
            store = open_store(path)
            memory = Memory(store, reopen.CONFIG, clock=clock)
            assert store.stats().opened_by.startswith("replay"), name
            assert answers(memory) == before, name
    finally:
        store.close()


def _populated(path: Path, n: int = 300, **options: Any) -> Store:
    store = open_store(path, **options)
    memory = Memory(store, reopen.CONFIG, clock=ManualClock(1_000))
    memory.remember_many([{"id": f"f{i}", "text": f"fact {i} about rivers and stones {i % 13}",
                           "subject": f"s{i % 7}", "entities": [f"E{i % 5}"],
                           "metadata": {"n": i}} for i in range(n)])
    memory.forget({"ids": ["f3", "f4"]})
    return store


def test_close_writes_a_checkpoint_and_replaces_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "store"
    store = _populated(path, checkpoint_close_min=0)
    first = store.checkpoint()
    assert first is not None and checkpoints(path) == [str(path / "gen-00000001" / first.name)]
    store.add_document("extra", "one more document about stones")
    store.close()
    (only,) = checkpoints(path)
    assert only.endswith(f"{store.revision:016d}.hck") and first.name not in only
    with open_store(path) as again:
        assert again.stats().opened_by == "checkpoint"
        assert again.stats().checkpoint_seq == store.revision
        assert again.has_document("extra")


def test_a_checkpoint_is_written_in_the_background_past_the_configured_tail(
        tmp_path: Path) -> None:
    path = tmp_path / "store"
    with open_store(path, checkpoint_every=4096) as store:
        for i in range(60):
            store.add_document(f"d{i}", f"document {i} with enough words to fill the tail " * 3)
        # The writer returned long ago; the checkpoint lands in the background.
        deadline = time.monotonic() + 60
        while not store.stats().checkpoint_seq and time.monotonic() < deadline:
            time.sleep(0.01)
        assert store.stats().checkpoint_seq > 0
        store.add_document("last", "written after the background checkpoint " * 40)
        # Close joins the background writer, and covers a tail past the mark itself
        # (checkpoint_close_min is out of reach here).
    with open_store(path) as again:
        assert again.stats().opened_by == "checkpoint"
        assert again.stats().checkpoint_tail_bytes < 4096
        assert len(again.ids()) == 61


def _reference(path: Path) -> Any:
    with open_store(path, read_only=True) as store:
        return answers(Memory(store, reopen.CONFIG, clock=ManualClock(1_000)))


def _rewrite_header(raw: bytes, **fields: int) -> bytes:
    layout = struct.Struct("<8sBBHI16sQQQQ16sQ")
    names = ["magic", "wv", "rv", "flags", "schema", "store", "gen", "seq", "salt", "len",
             "digest", "sum"]
    values = dict(zip(names, layout.unpack_from(raw), strict=True))
    values.update(fields)
    head = layout.pack(*values.values())[:80]
    return head + checksum(head).to_bytes(8, "little") + raw[88:]


def _damage(kind: str, path: Path, other: Path) -> str:
    """Spoil the store's one checkpoint in the way ``kind`` says; return the reason
    the warning must give."""
    (ck,) = checkpoints(path)
    raw = Path(ck).read_bytes()
    if kind == "bit flip":
        Path(ck).write_bytes(raw[:200] + bytes([raw[200] ^ 0x10]) + raw[201:])
        return "checksum mismatch"
    if kind == "torn":
        Path(ck).write_bytes(raw[: len(raw) // 2])
        return "cut short"
    if kind == "zeroed":
        Path(ck).write_bytes(bytes(len(raw)))
        return "bad magic"
    if kind == "schema":
        Path(ck).write_bytes(_rewrite_header(raw, schema=99))
        return "projection schema version 99"
    if kind == "other store":
        (theirs,) = checkpoints(other)
        os.unlink(ck)
        shutil.copy(theirs, ck)
        return "another store"
    if kind == "other generation":
        Path(ck).write_bytes(_rewrite_header(raw, gen=7))
        return "generation 7"
    if kind == "format 1":
        shutil.copy(Path(__file__).parent.parent / "format" / "golden" / "checkpoint-v1.hck", ck)
        return "format read version 1, from an older holomem, is not bound to the journal"
    # "ahead": a checkpoint of a later state of the same store and generation, as a
    # build before the journal-synced flag wrote it (with sync="none" one could be
    # ahead of the journal after a power cut): it proves nothing, and is not used.
    (later,) = checkpoints(other)
    ahead = os.path.join(os.path.dirname(ck), os.path.basename(later))
    Path(ahead).write_bytes(_rewrite_header(Path(later).read_bytes(), flags=0))
    return "past the journal's last durable one"


@pytest.mark.parametrize("kind", ["bit flip", "torn", "zeroed", "schema", "other store",
                                  "other generation", "format 1", "ahead"])
def test_an_unusable_checkpoint_is_ignored_with_a_warning_and_changes_no_answer(
        tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture) -> None:
    path, other = tmp_path / "store", tmp_path / "other"
    with _populated(path, n=120) as store:
        assert store.checkpoint() is not None
    expected = _reference(path)
    original = checkpoints(path)
    if kind == "ahead":
        shutil.copytree(path, other)
        with open_store(other) as later:
            later.add_document("later", "written after the copy")
            later.checkpoint()
        for f in checkpoints(other)[:-1]:
            os.unlink(f)
    elif kind == "other store":
        with _populated(other, n=120) as theirs:
            theirs.checkpoint()
    reason = _damage(kind, path, other)
    spoiled = os.path.basename(checkpoints(path)[-1])
    with caplog.at_level(logging.INFO, logger="holomem"):
        with open_store(path, read_only=True) as follower:
            # A follower reads checkpoints too, and never erases one (one ahead of its
            # view of the journal is the writer's newer one: said at info level).
            assert answers(Memory(follower, reopen.CONFIG, clock=ManualClock(1_000))) == expected
        assert reason in caplog.text
        assert ("not used yet" if kind == "ahead" else "ignored") in caplog.text
        caplog.clear()
        caplog.set_level(logging.WARNING, logger="holomem")
        with open_store(path) as store:
            # (An older valid checkpoint is used: here only beside one ahead.)
            assert store.stats().opened_by == ("checkpoint" if kind == "ahead" else "replay")
            (ignored,) = store.stats().checkpoints_ignored
            assert ignored.startswith(f"{spoiled}: ") and reason in ignored
            assert answers(Memory(store, reopen.CONFIG, clock=ManualClock(1_000))) == expected
        assert reason in caplog.text
    # The writer erased it: the next open neither warns nor finds it.
    assert checkpoints(path) == (original if kind == "ahead" else [])


def _diverged(a: Path, b: Path, key: bytes | None) -> None:
    """A store ``a``, its copy ``b``, then different facts in each: the same number of
    transactions (so their checkpoints have the same store id, generation and sequence
    number), "apple" facts in ``a`` (f13 forgotten), "banana" facts in ``b`` (f14
    forgotten), each closed with a checkpoint."""
    def memory(path: Path) -> Memory:
        return Memory(open_store(path, key=key, checkpoint_close_min=0),
                      clock=ManualClock(1_000))

    shared = memory(a)
    for i in range(10):
        shared.remember(id=f"f{i}", text=f"shared fact {i}")
    shared.store.close()
    shutil.copytree(a, b)
    for path, word, gone in ((a, "apple", "f13"), (b, "banana", "f14")):
        own = memory(path)
        for i in range(10, 15):
            own.remember(id=f"f{i}", text=f"{word} fact {i}")
        own.forget({"ids": [gone]})
        own.store.close()


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_checkpoint_copied_from_a_diverged_copy_is_ignored_and_answers_come_from_the_journal(
        tmp_path: Path, encrypted: bool) -> None:
    """Issue 27: B's checkpoint put in A (same store id, generation and sequence number;
    in an encrypted store, sealed under the same key) was restored, and A answered from
    B's state. Its journal digest is not A's: open replays A's journal, says why, and
    fsck's advice says exactly that."""
    key = os.urandom(32) if encrypted else None
    a, b = tmp_path / "a", tmp_path / "b"
    _diverged(a, b, key)
    (ours,), (theirs,) = checkpoints(a), checkpoints(b)
    assert os.path.basename(ours) == os.path.basename(theirs)
    shutil.copy(theirs, ours)
    name = os.path.basename(ours)

    def from_its_own_journal(memory: Memory) -> None:
        stats = memory.store.stats()
        assert stats.opened_by.startswith("replay")
        (ignored,) = stats.checkpoints_ignored
        assert ignored.startswith(f"{name}: written for another journal")
        assert memory.recall("banana") == []
        assert sorted((r.id, r.text) for r in memory.recall("apple", k=20)) == [
            (f"f{i}", f"apple fact {i}") for i in (10, 11, 12, 14)]

    # A follower first: it never erases the file, so fsck then sees it too.
    with open_store(a, key=key, read_only=True) as follower:
        from_its_own_journal(Memory(follower, clock=ManualClock(1_000)))
    (finding,) = check(str(a), key=key).findings
    assert (finding.code, finding.path) == ("checkpoint.stale", ours)
    assert "written for another journal" in finding.message
    assert "open does not use it" in finding.message
    assert "open does not use this one" in finding.next_step
    assert "ignores this one already" not in finding.next_step
    memory = Memory(open_store(a, key=key), clock=ManualClock(1_000))
    try:
        from_its_own_journal(memory)
        assert memory.remember(id="f13", text="banana fact 13").created
        assert not memory.remember(id="f10", text="apple fact 10").created
    finally:
        memory.store.close()
    with open_store(a, key=key) as again:
        assert again.stats().checkpoints_ignored == ()
        assert again.get_document("f13").text == "banana fact 13"


def test_an_interrupted_checkpoint_leaves_a_temporary_file_the_writer_erases(
        tmp_path: Path) -> None:
    path = tmp_path / "store"
    with _populated(path, n=50) as store:
        done = store.checkpoint()
    assert done is not None
    (ck,) = checkpoints(path)
    shutil.copy(ck, ck.replace(done.name, "checkpoint-0000000000000099.hck") + ".tmp")
    with open_store(path) as store:
        assert store.stats().opened_by == "checkpoint"
    assert not glob.glob(str(path / "gen-*" / "*.tmp"))


#: Attributes that are caches of a query (rebuilt on demand) or that mean something
#: only inside a bulk mode (compaction's buffered writing), not state. ``_heads``: a
#: subject's heads, worked out on the writer's first use and kept while they hold
#: (holomem/projections/subjects.py; tests/memory/test_latest_by_subject_in_order.py
#: checks what they plan against walking every member). ``_word_keys``: BM25's table of
#: the short words bulk loads looked up, a cache of its word dict
#: (tests/store/test_word_keys.py). ``_memo`` and its key ``_version``: BM25's query
#: terms of the current revision (holomem/projections/exhaustive.py;
#: tests/store/test_search_exhaustive.py checks them against the formula); ``_d_slots``:
#: the slot of each token of BM25's delta, for queries. ``link_slots``: the fact index's
#: supersession links as slot arrays, built on first use (contradict, or recall's
#: statuses on its second ask between writes) and never persisted
#: (holomem/projections/chains.py; tests/memory/test_statuses_at_once.py).
CACHES = {"_norm_key", "_norm_cache", "_arrays", "_mu", "_buffer_start", "_df_key", "_df",
          "_heads", "_word_keys", "_memo", "_version", "_d_slots", "link_slots",
          "_atoms", "_probe_keys"}
#: How the catalog finds an id's slot: a dict after a replay, a frozen hash table
#: (and the dict of what was looked up or added since) after a restore; compared by
#: the lookups themselves instead (and whether a snapshot holds the ids list).
LOOKUP = {"_slot", "_table", "_ids_lent", "_built"}


def assert_same(a: object, b: object, where: str) -> None:
    if isinstance(a, GrowArray):
        assert isinstance(b, GrowArray), where
        assert_same(a.view(), b.view(), where)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        assert a.shape == b.shape and np.array_equal(a, b), where
    elif isinstance(a, array):
        assert isinstance(b, array) and a.typecode == b.typecode, where
        assert a.tobytes() == b.tobytes(), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for k in a:
            assert_same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif hasattr(a, "__dict__") or hasattr(a, "__slots__"):
        assert type(a) is type(b), where
        names = set(getattr(a, "__dict__", {})) | set(getattr(a, "__slots__", ()))
        for name in sorted(names - CACHES - LOOKUP - {"catalog", "store"}):
            assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    else:
        assert a == b and type(a) is type(b), f"{where}: {a!r} != {b!r}"


def test_a_restored_state_equals_the_state_it_was_taken_from_attribute_for_attribute(
        tmp_path: Path) -> None:
    """Every attribute of every projection (a column or table added later included)
    comes back from a checkpoint exactly: the restore is not a replay that happens
    to answer the same."""
    clock = ManualClock(1_000)
    with open_store(tmp_path / "store") as store:
        memory = Memory(store, reopen.CONFIG, clock=clock)
        for _, step in reopen.STEPS:
            clock.advance(7)
            step(memory)
        memory.remember(id="t1", text="a fact that lives a while", ttl_ms=500,
                        metadata={"n": 3, "k": "v", "b": True, "z": None, "o": [1, {"a": 2}]})
        memory.set_confidence("t1", 0.25)
        memory.feedback("t1", True, "useful")
        # Subjects of one member (kept as its id alone), of several, and left with one
        # or none by a forget, in two namespaces.
        for i, (subject, ns) in enumerate([("solo", []), ("pair", []), ("pair", []),
                                           ("gone", ["x"]), ("left", ["x"]), ("left", ["x"]),
                                           ("solo", ["x"])]):
            memory.remember(id=f"s{i}", text=f"subject fact {i}", subject=subject,
                            namespace=ns)
        memory.forget({"ids": ["s3", "s4"]})
        answers(memory)  # the lazily built indexes (HRR, metadata) are built now
        with store.reading() as view:
            live = view.state
            payload = codec.encode(live.snapshot()).join()
            restored = codec.restore(None, payload)
            for part in (*ProjectionState.PARTS, "purge_pending", "memory_config", "embedder",
                         "reembed_target", "reembed_cursor"):
                assert_same(getattr(live, part), getattr(restored, part), part)
            ever = {e.id for _, events in store.events() for e in events
                    if isinstance(e, (DocumentAdded, DocumentReplaced))}
            assert len(ever) > live.catalog.live  # some ids were vacated
            for doc_id in [*sorted(ever), "never-written"]:
                assert restored.catalog.slot(doc_id) == live.catalog.slot(doc_id), doc_id
                assert (doc_id in restored.catalog) == (doc_id in live.catalog), doc_id
            assert restored.catalog.none_live(["never-written", "x"])
            assert not restored.catalog.none_live(["x", live.catalog.live_ids()[-1]])


def test_a_snapshot_never_holds_a_vector_written_after_it_was_taken(tmp_path: Path) -> None:
    """The matrix is shared with the snapshot until a re-embed would overwrite a row: a
    checkpoint encoded while a later VectorsSet commits (perhaps never made durable)
    still holds the vectors of the sequence number it claims."""
    with Store.open(tmp_path / "s", checkpoint_every=None) as store:
        store.add_document("a", "alpha text", embedding=[1.0, 0.0, 0.0, 0.0])
        state = ProjectionState(None)
        state.apply(1, next(e for _, events in store.events() for e in events))
        snap = state.embeddings.snapshot()
        state.apply(2, VectorsSet(ids=("a",),
                                  vectors=np.array([0, 1, 0, 0], "<f4").tobytes()))
        held = snap["matrix"]() if isinstance(snap["matrix"], Later) else snap["matrix"]
        assert np.array_equal(held, np.array([[1, 0, 0, 0]], "f4"))
        assert state.embeddings.vector(0) is not None
        assert np.array_equal(state.embeddings.vector(0), np.array([0, 1, 0, 0], "f4"))


def test_a_lent_column_keeps_the_values_it_had_through_changes_appends_and_growth() -> None:
    """What a snapshot holds of a growable column (flushed prefix and queued values)
    is what the column held when it was lent, whatever writers do to it afterwards."""
    col = GrowArray(np.int64, capacity=4)
    col.extend(np.arange(4, dtype=np.int64))
    for v in (10, 11, 12):
        col.append(v)  # queued, past the array's capacity
    held = col.lend()
    assert isinstance(held, Later)  # the queue is copied, not flushed (no growth here)
    col[1] = -1  # the flushed prefix: copied first
    col[5] = -5  # a queued value
    for v in range(100):
        col.append(v)  # flushes and grows
    col[0] = -7
    assert held().tolist() == [0, 1, 2, 3, 10, 11, 12]
    assert col.view()[:7].tolist() == [-7, -1, 2, 3, 10, -5, 12]
    prefix = col.lend()
    assert isinstance(prefix, np.ndarray)
    col[2] = 99
    assert prefix[:4].tolist() == [-7, -1, 2, 3]
