"""Followers keep answering while the writer compacts and purges (issue 11, item 8).

A follower (``Store.open(path, read_only=True)``) reads the files of one generation;
a compaction replaces them (renames the new one in, then zeroes and unlinks the old
one). The follower must move to the new generation by itself, never report
corruption on a healthy store, never let a builtin exception out, and answer only
with what the writer wrote.

Before the fix, followers raised builtin ``FileNotFoundError``, a false
``CorruptError: frame checksum mismatch on re-read`` (the zeroed files of the old
generation), and after a purge every ``get``/``recall`` failed with
``StorageIOError`` until ``refresh()``.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from holomem import HolomemError, ManualClock, Memory, Store
from holomem.api.engine import following
from holomem.api.engine.replay import Built
from holomem.errors import UnavailableError
from holomem.log.backend import JournalBackend

SEED = 20261111
CLOCK = 1_700_000_000_000
ROUNDS = 36
FOLLOWERS = 3


def _text(i: int) -> str:
    return f"fact {i}: the ferry left pier {i % 7} at dawn carrying {i * 3} crates"


class _Writer:
    """The writer's side: remembers, forgets, compactions with and without purge. Every
    text it ever wrote is kept (by id), and what it holds at the end."""

    def __init__(self, path: Path, rng: random.Random) -> None:
        self.store = Store.open(path, segment_size=8192)
        self.memory = Memory(self.store, clock=ManualClock(CLOCK))
        self.rng = rng
        self.texts: dict[str, str] = {}
        self.live: set[str] = set()
        self.next = 0
        self.compactions = 0
        self.purges = 0

    def remember(self, n: int) -> None:
        batch = []
        for _ in range(n):
            fid = f"f{self.next:04d}"
            self.texts[fid] = _text(self.next)  # known before it may become visible
            batch.append({"id": fid, "text": _text(self.next)})
            self.next += 1
        self.memory.remember_many(batch)
        self.live.update(b["id"] for b in batch)

    def round(self, i: int) -> None:
        self.remember(4)
        gone = self.rng.sample(sorted(self.live), 1)
        purge = i % 6 == 5
        self.memory.forget({"ids": gone}, purge=purge)
        self.live.difference_update(gone)
        self.purges += purge
        if i % 3 == 1:
            self.store.compact()
            self.compactions += 1


def _follow(path: Path, writer: _Writer, done: threading.Event, seed: int,
            errors: list[BaseException], unavailable: list[str], answers: list[int]) -> None:
    """A follower's loop: get, recall, search and (now and then) refresh, each answer
    checked against what the writer wrote."""
    rng = random.Random(seed)
    try:
        store = Store.open(path, read_only=True)
    except BaseException as exc:
        errors.append(exc)
        return
    memory = Memory(store, clock=ManualClock(CLOCK))
    try:
        while not done.is_set():
            op = rng.choice(("get", "get", "recall", "search", "refresh"))
            known = list(writer.texts)
            try:
                if op == "get" and known:
                    fid = rng.choice(known)
                    rec = memory.get(fid)
                    assert rec is None or rec.text == writer.texts[fid], (fid, rec)
                elif op == "recall" and known:
                    fid = rng.choice(known)
                    for hit in memory.recall(writer.texts[fid], k=5):
                        assert hit.text == writer.texts[hit.id], hit
                elif op == "search":
                    for h in store.search_documents("ferry crates dawn", 5):
                        assert h.id in writer.texts, h
                else:
                    store.refresh()
                answers.append(1)
            except UnavailableError as exc:
                # Documented: a read that was answering from a generation the writer
                # replaced (and zeroed) under it; the next read moves on.
                unavailable.append(f"{op}: {exc}")
    except BaseException as exc:
        errors.append(exc)
    finally:
        store.close()


@pytest.mark.parametrize("run", range(2))
def test_followers_move_to_each_new_generation_and_raise_nothing_but_holomem_errors(
        tmp_path: Path, run: int) -> None:
    seed = SEED + run
    print(f"seed {seed}")
    path = tmp_path / "store"
    writer = _Writer(path, random.Random(seed))
    writer.remember(8)
    done = threading.Event()
    errors: list[BaseException] = []
    unavailable: list[str] = []
    answers: list[int] = []
    threads = [threading.Thread(target=_follow, args=(path, writer, done, seed * 10 + n,
                                                      errors, unavailable, answers))
               for n in range(FOLLOWERS)]
    for t in threads:
        t.start()
    try:
        for i in range(ROUNDS):
            writer.round(i)
    finally:
        done.set()
        for t in threads:
            t.join(timeout=120)
    assert writer.compactions >= 10 and writer.purges >= 5
    assert not any(t.is_alive() for t in threads)
    assert errors == [], [f"{type(e).__name__}: {e}" for e in errors]
    # Reads really ran during the compactions, and mostly answered.
    assert len(answers) > 10 * len(unavailable), unavailable
    # Once the writer stops, a follower's view is exactly the writer's.
    with Store.open(path, read_only=True) as follower:
        memory = Memory(follower, clock=ManualClock(CLOCK))
        assert {fid for fid in writer.texts if memory.get(fid) is not None} == writer.live
        for fid in writer.live:
            rec = memory.get(fid)
            assert rec is not None and rec.text == writer.texts[fid]
    writer.store.close()


def test_after_a_purge_a_follower_answers_from_the_new_generation_without_refresh(
        tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path) as store:
        memory = Memory(store, clock=ManualClock(CLOCK))
        memory.remember_many([{"id": f"f{i}", "text": _text(i)} for i in range(5)])
        with Store.open(path, read_only=True) as follower:
            fm = Memory(follower, clock=ManualClock(CLOCK))
            before = follower.generation
            assert fm.get("f1") is not None
            memory.forget({"ids": ["f1"]}, purge=True)  # a new generation; the old one zeroed
            assert store.generation > before
            # No refresh(): the next reads see that the generation was replaced and
            # answer from the new one.
            rec = fm.get("f2")
            assert rec is not None and rec.text == _text(2)
            assert fm.get("f1") is None
            assert {h.id for h in fm.recall(_text(3), k=10)} == {"f0", "f2", "f3", "f4"}
            assert follower.generation == store.generation
            assert follower.get_document("f4") is not None


def test_a_follower_s_reads_raise_only_holomem_errors_when_its_files_vanish(
        tmp_path: Path) -> None:
    """Reads of an old generation's files, unlinked (a compaction) while the follower
    still held its state: they answer, since the follower keeps those files open."""
    path = tmp_path / "store"
    with Store.open(path) as store:
        memory = Memory(store, clock=ManualClock(CLOCK))
        memory.remember_many([{"id": f"f{i}", "text": _text(i)} for i in range(5)])
        with Store.open(path, read_only=True) as follower:
            fm = Memory(follower, clock=ManualClock(CLOCK))
            with follower.reading() as st:
                store.compact()  # unlinks (and zeroes) what this state was built from
                try:
                    rec = st.record(st.slot("f3"))
                except HolomemError as exc:
                    assert exc.code == "unavailable", exc
                else:
                    assert rec.text == _text(3)
            rec = fm.get("f3")
            assert rec is not None and rec.text == _text(3)


def _rebuilds_failing(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """A follower's next ``times`` rebuilds from a new generation fail (``unavailable``);
    answers the list that counts the rebuilds tried."""
    build = following.build
    tried: list[int] = []

    def flaky(journal: JournalBackend, *, read_only: bool) -> Built:
        tried.append(1)
        if len(tried) <= times:
            raise UnavailableError("the rebuild failed (test)")
        return build(journal, read_only=read_only)

    monkeypatch.setattr(following, "build", flaky)
    return tried


@pytest.mark.parametrize("failures", [1, 2])
def test_a_follower_whose_rebuild_after_a_purge_failed_never_answers_from_the_old_generation(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int) -> None:
    """The journal moved to the purged generation, the rebuild from it failed: every
    read after that rebuilds first, and fails while the rebuild does, instead of
    answering (the purged document included) from the state of the generation left."""
    path = tmp_path / "store"
    with Store.open(path) as store, Store.open(path, read_only=True) as follower:
        store.add_document("seed", "the grebe-marker dives for its supper")
        store.add_document("other", "a coot on the pond")
        assert follower.refresh() == store.revision and follower.has_document("seed")
        store.delete_document("seed", purge=True)
        tried = _rebuilds_failing(monkeypatch, failures)
        with pytest.raises(UnavailableError):
            follower.refresh()
        assert follower._journal.generation == store.generation  # moved; the state did not
        for _ in range(failures - 1):  # the read's rebuild fails too: the read does
            with pytest.raises(UnavailableError):
                follower.has_document("seed")
        assert not follower.has_document("seed")
        assert follower.get_document("seed") is None
        assert follower.search_documents("grebe") == []
        assert follower.ids() == ["other"] and len(follower) == 1
        assert len(tried) == failures + 1
        store.add_document("after", "written after the purge")
        assert follower.refresh() == store.revision  # applied onto the rebuilt state
        assert sorted(follower.ids()) == ["after", "other"]


def test_a_follower_whose_rebuild_after_a_compaction_failed_catches_up_on_refresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a failed rebuild, refresh() rebuilds from the generation the journal is on,
    instead of applying that generation's new transactions onto the state of the old
    one (whose documents point into the old generation's files)."""
    path = tmp_path / "store"
    with Store.open(path) as store, Store.open(path, read_only=True) as follower:
        for i in range(4):
            store.add_document(f"d{i}", _text(i))
        store.delete_document("d1")
        follower.refresh()
        store.compact()
        tried = _rebuilds_failing(monkeypatch, 1)
        with pytest.raises(UnavailableError):
            follower.refresh()
        store.add_document("d9", _text(9))
        store.delete_document("d2")
        assert follower.refresh() == store.revision
        assert sorted(follower.ids()) == sorted(store.ids()) == ["d0", "d3", "d9"]
        # (Applied onto the old state, the documents kept by the compaction were read
        # from the old generation's zeroed files: unavailable, refresh after refresh.)
        for doc_id in store.ids():
            assert follower.get_document(doc_id) == store.get_document(doc_id)
        assert len(tried) == 2
