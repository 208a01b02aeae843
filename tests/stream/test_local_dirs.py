"""A stream store's node directory (``LOCAL/STORE/node-*``, docs/scale-out.md §8.1): an open
erases only the directories holomem made whose process died, never one it did not make.

No NATS server is needed: this is :class:`~holomem.log.stream.local.LocalDir` alone.
"""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.log import fs
from holomem.log.stream.local import LOCK, LocalDir

NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12
               ).filter(lambda n: n not in (".", ".."))


def _tree(root: str) -> dict[str, bytes]:
    """Every file under ``root`` by its path relative to it, with its bytes."""
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def _write(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


@settings(max_examples=40, deadline=None)
@given(dirs=st.dictionaries(
    NAME, st.dictionaries(st.lists(NAME, min_size=1, max_size=3).map("/".join),
                          st.binary(max_size=64), max_size=4),
    min_size=1, max_size=3))
def test_an_open_never_touches_a_node_directory_holomem_did_not_make(
        dirs: dict[str, dict[str, bytes]]) -> None:
    with tempfile.TemporaryDirectory() as base:
        parent = os.path.join(base, "store")
        for name, files in dirs.items():
            os.makedirs(os.path.join(parent, f"node-{name}"))
            for rel, data in files.items():
                if rel.split("/")[0] == LOCK:
                    continue  # holomem's mark: that one is tested below
                path = os.path.join(parent, f"node-{name}", rel)
                if any(os.path.isfile(os.path.join(parent, f"node-{name}", *rel.split("/")[:i]))
                       for i in range(1, rel.count("/") + 1)):
                    continue  # a file where this path needs a directory
                if os.path.isdir(path):
                    continue
                _write(path, data)
        before = _tree(parent)
        local = LocalDir.create(base, "store")
        assert local.erased == 0
        local.close()
        assert _tree(parent) == before  # nothing erased, and no lock file made in them
        assert sorted(os.listdir(parent)) == sorted(f"node-{n}" for n in dirs)


def test_an_open_erases_a_node_directory_whose_process_died_and_keeps_a_live_one() -> None:
    with tempfile.TemporaryDirectory() as base:
        parent = os.path.join(base, "store")
        dead = os.path.join(parent, "node-dead1234")  # as a killed process leaves it
        _write(os.path.join(dead, LOCK), b"")
        _write(os.path.join(dead, "gen-00000001", "text.seg"), b"the grey plover " * 64)
        live = os.path.join(parent, "node-live5678")
        _write(os.path.join(live, "gen-00000001", "text.seg"), b"the knot " * 64)
        held = fs.lock(os.path.join(live, LOCK))  # another open, still running
        outside = os.path.join(base, "elsewhere")  # a link to a directory with a lock file
        _write(os.path.join(outside, LOCK), b"")
        _write(os.path.join(outside, "keep.txt"), b"keep me")
        os.symlink(outside, os.path.join(parent, "node-link"))
        try:
            local = LocalDir.create(base, "store")
            try:
                assert not os.path.exists(dead)
                assert local.erased == len(b"the grey plover " * 64)
                assert _tree(live) == {os.path.join("gen-00000001", "text.seg"):
                                       b"the knot " * 64, LOCK: b""}
                assert _tree(outside) == {LOCK: b"", "keep.txt": b"keep me"}
                assert os.path.isfile(os.path.join(local.path, LOCK))
            finally:
                local.close()
            assert not os.path.exists(local.path)
        finally:
            fs.unlock(held)
