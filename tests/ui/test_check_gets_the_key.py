"""The inspector's check (``python -m holomem.fsck``, a child process) of an encrypted
store is handed the key as a file it can read: the key file the store was opened with
when it is a regular file, else (a pipe: ``holomem ui --key-file <(cmd)``, drained by
the open) a temporary copy, readable by this user only and zeroed when it is removed
once the check ends. A ``holomem serve``'s tenants are checked the same way."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holomem import Store
from holomem.api.doors.http.tenants import TenantPool
from holomem.api.doors.ui import source
from holomem.api.doors.ui.source import OneStore, Tenants
from holomem.api.memory.config import MemoryConfig
from holomem.log import fs

KEY = bytes(range(1, 33))


class _Erased:
    """What :func:`fs.erase_tree` was asked to erase: each directory, the mode of it and
    of its key file, and the bytes that file held just before."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, int, bytes]] = []


@pytest.fixture()
def erased(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Erased]:
    """Record every erasure of a key copy, and bound a check that would wait on a pipe
    nobody writes any more."""
    monkeypatch.setattr(source, "FSCK_TIMEOUT", 60.0)
    record = _Erased()
    erase_tree = fs.erase_tree

    def spy(path: str) -> int:
        key = os.path.join(path, "key")
        record.seen.append((path, stat.S_IMODE(os.stat(path).st_mode),
                            stat.S_IMODE(os.stat(key).st_mode), Path(key).read_bytes()))
        return erase_tree(path)

    monkeypatch.setattr(fs, "erase_tree", spy)
    yield record


def _clean(result: dict[str, Any]) -> bool:
    report = result["report"]
    return result["exit"] == 0 and report is not None and report["findings"] == []


def _pipe(path: Path) -> str:
    """A named pipe that gives the key to one reader (as ``<(cmd)`` does)."""
    os.mkfifo(path)

    def feed() -> None:
        with open(path, "wb") as pipe:
            pipe.write(KEY)

    threading.Thread(target=feed, daemon=True).start()
    return str(path)


def test_the_check_of_a_store_opened_with_a_piped_key_gets_a_copy_it_then_erases(
        tmp_path: Path, erased: _Erased) -> None:
    store = tmp_path / "store"
    Store.open(store, key=KEY).close()
    pipe = _pipe(tmp_path / "key-pipe")
    inspector = OneStore(str(store), key=fs.read_key_file(pipe), key_path=pipe)
    try:
        assert _clean(inspector.check(None))
    finally:
        inspector.close()
    ((copy_dir, dir_mode, file_mode, held),) = erased.seen
    assert (dir_mode, file_mode, held) == (0o700, 0o600, KEY)
    assert not os.path.exists(copy_dir)


def test_the_check_of_a_store_opened_with_a_key_file_reads_that_file(
        tmp_path: Path, erased: _Erased) -> None:
    store, key_path = tmp_path / "store", tmp_path / "key"
    Store.open(store, key=KEY).close()
    key_path.write_bytes(KEY)
    inspector = OneStore(str(store), key=KEY, key_path=str(key_path))
    try:
        assert inspector.key_file() == (str(key_path), False)
        assert _clean(inspector.check(None))
    finally:
        inspector.close()
    assert erased.seen == [] and key_path.read_bytes() == KEY


def test_the_check_of_a_tenant_gets_a_copy_of_the_servers_key_it_then_erases(
        tmp_path: Path, erased: _Erased) -> None:
    Store.open(tmp_path / "data" / "tenants" / "alice", key=KEY).close()
    pool = TenantPool(str(tmp_path / "data"), key=KEY, config=MemoryConfig(), max_open=2)
    try:
        assert _clean(Tenants(pool).check("alice"))
    finally:
        pool.close()
    ((copy_dir, dir_mode, file_mode, held),) = erased.seen
    assert (dir_mode, file_mode, held) == (0o700, 0o600, KEY)
    assert not os.path.exists(copy_dir)
