"""A read-only follower sees the writer's changes after refresh(); one writer per store.

docs/contract.md §2: "One writer process per store: a second process that opens it for writing
gets a clear StoreLockedError. Store.open(path, read_only=True) opens a follower that
never writes and can refresh() to see the writer's new events."
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from holomem import Store, StoreLockedError
from holomem.errors import ReadOnlyError, StorageIOError
from tests.store._util import all_files, text_segment

ROOT = Path(__file__).resolve().parents[2]


def _view(store: Store) -> tuple[object, ...]:
    ids = store.ids()
    return (ids, {i: store.get_document(i) for i in ids},
            store.search_documents("river apple moon", 20), store.revision)


@pytest.mark.parametrize("sync", ["none", "full"])
def test_a_follower_sees_adds_replacements_and_deletes_after_refresh(
        tmp_path: Path, sync: str) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync=sync) as writer:
        writer.add_document("a", "apple by the river", metadata={"v": 1},
                            embedding=[1.0, 0.0], entities=["Alice"])
        writer.add_document("b", "moon over the river")
        with Store.open(path, read_only=True) as follower:
            assert follower.read_only and follower.stats().read_only
            assert _view(follower) == _view(writer)
            old_a = follower.get_document("a")

            writer.add_document("a", "apple replaced", metadata={"v": 2},
                                embedding=[0.0, 1.0])
            writer.delete_document("b")
            writer.add_documents([{"id": "c", "text": "river moon apple"},
                                  {"id": "d", "text": "a quiet moon"}])
            # Until it refreshes, the follower answers as of its revision: the old
            # version of "a" (its record was zeroed: read back from the journal), "b".
            assert follower.revision == 2
            assert follower.get_document("a") == old_a
            assert follower.has_document("b") and not follower.has_document("c")
            assert {h.id for h in follower.search_documents("moon")} == {"b"}

            assert follower.refresh() == writer.revision == 5
            assert _view(follower) == _view(writer)
            assert follower.get_document("b") is None and not follower.has_document("b")
            doc = follower.get_document("a")
            assert doc is not None and doc.text == "apple replaced" and doc.metadata == {"v": 2}
            assert [h.id for h in follower.search_documents("moon", 10)] == ["c", "d"]
            assert follower.search_documents("moon", 10, embedding=[0.0, 1.0]) == \
                writer.search_documents("moon", 10, embedding=[0.0, 1.0])
            assert follower.refresh() == 5  # nothing new

            # Many more writes (the journal rotates segments with sync="full" or not).
            for i in range(50):
                writer.add_document(f"bulk-{i}", f"bulk river {i}")
            writer.delete_document("c")
            assert follower.refresh() == writer.revision
            assert _view(follower) == _view(writer)


def test_a_follower_never_writes(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as writer:
        writer.add_document("a", "apple")
        writer.delete_document("a")
        writer.add_document("b", "banana")
    before = all_files(path)
    seg = text_segment(path)
    os.unlink(seg)
    before.pop(seg)
    with Store.open(path, read_only=True) as follower:
        assert follower.get_document("b") is not None  # without the derived file
        for call in (lambda: follower.add_document("c", "x"),
                     lambda: follower.add_documents([{"id": "c", "text": "x"}]),
                     lambda: follower.delete_document("b")):
            with pytest.raises(ReadOnlyError) as info:
                call()
            assert info.value.code == "read_only"
        follower.sync()
        follower.refresh()
    assert all_files(path) == before  # not rebuilt, not touched


def test_a_second_writer_gets_store_locked_error(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as writer:
        writer.add_document("a", "apple")
        with pytest.raises(StoreLockedError) as info:
            Store.open(path, sync="none")  # in the same process
        assert info.value.code == "locked"
        code = (
            "import sys\n"
            "from holomem import Store, StoreLockedError\n"
            "try:\n"
            "    Store.open(sys.argv[1], sync='none')\n"
            "except StoreLockedError as e:\n"
            "    print(e.code)\n"
            "    sys.exit(3)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        child = subprocess.run([sys.executable, "-c", code, str(path)], env=env,
                               capture_output=True, text=True, timeout=60)
        assert (child.returncode, child.stdout.strip()) == (3, "locked"), child.stderr
        # The refused opens changed nothing: the writer carries on, followers may open.
        writer.add_document("b", "banana")
        with Store.open(path, read_only=True) as follower:
            assert follower.ids() == ["a", "b"]
    # Once the writer closed, another may open.
    with Store.open(path, sync="none") as second:
        assert second.ids() == ["a", "b"]


def test_a_follower_whose_refresh_fails_midway_applies_the_rest_at_the_next_refresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh that fails partway through the new transactions (here: reading the
    journal fails after two) leaves the follower at the last one it applied; the next
    refresh goes on from there, even though the journal already read past it."""
    path = tmp_path / "store"
    with Store.open(path) as writer:
        writer.add_document("a", "apple by the river")
        with Store.open(path, read_only=True) as follower:
            for i in range(5):
                writer.add_document(f"d{i}", f"document {i} on the bank")
            replay = follower._journal.replay

            def failing(from_seq: int = 0) -> Iterator[tuple[int, list[bytes]]]:
                for n, item in enumerate(replay(from_seq)):
                    if n == 2:
                        raise StorageIOError("reading the journal failed (test)")
                    yield item

            monkeypatch.setattr(follower._journal, "replay", failing)
            with pytest.raises(StorageIOError):
                follower.refresh()
            assert follower.revision == 3
            monkeypatch.undo()
            assert follower.refresh() == writer.revision
            assert _view(follower) == _view(writer)
