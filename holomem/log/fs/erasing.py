"""Secure erase, and removing whole trees.

Owns: overwriting a range or a whole file with zeros (:func:`zero_range`,
:func:`erase`: zeros, synced, then unlinked), erasing or merely removing a directory
tree, and the crash points between zeroing and unlinking. Imports the standard
library, the log's ``crashpoints``, :mod:`holomem.log.fs.files` and
:mod:`holomem.log.fs.durable`.

The rule kept here so callers cannot get it wrong: :func:`erase` overwrites a file with
zeros and syncs it before unlinking it.
"""

from __future__ import annotations

import os

from holomem.log import crashpoints as cp
from holomem.log.fs.base import open_fd
from holomem.log.fs.durable import sync, sync_dir
from holomem.log.fs.files import close, rmdir, size, unlink, walk, write_at

P_ERASE_ZEROED = cp.point("fs.erase.zeroed", "a file was overwritten with zeros and synced")
P_ERASE_UNLINKED = cp.point("fs.erase.unlinked", "a zeroed file was unlinked")

_ZERO_CHUNK = bytes(1 << 20)


def zero_range(fd: int, offset: int, length: int, path: str) -> None:
    """Overwrite ``length`` bytes at ``offset`` with zeros (no sync)."""
    end = offset + length
    while offset < end:
        n = min(len(_ZERO_CHUNK), end - offset)
        write_at(fd, memoryview(_ZERO_CHUNK)[:n], offset, path)
        offset += n


def erase(path: str) -> int:
    """Overwrite the file at ``path`` with zeros, sync it, then unlink it.

    Returns the number of bytes overwritten. The unlink is durable only after the
    caller syncs the directory. A missing file is not an error (erase is repeated
    after a crash).
    """
    fd = open_fd(path, os.O_RDWR, missing_ok=True)
    if fd < 0:
        return 0
    try:
        length = size(fd, path)
        zero_range(fd, 0, length, path)
        sync(fd, path)
    finally:
        close(fd)
    cp.hit(P_ERASE_ZEROED)
    unlink(path)
    cp.hit(P_ERASE_UNLINKED)
    return length


def erase_tree(path: str) -> int:
    """Erase every file under directory ``path`` (see :func:`erase`), then remove it;
    return the bytes overwritten. The parent directory is synced at the end."""
    return _remove_tree(path, zero=True)


def remove_tree(path: str) -> None:
    """Unlink every file under directory ``path`` and remove it (no zeroing); the parent
    directory is synced at the end."""
    _remove_tree(path, zero=False)


def _remove_tree(path: str, zero: bool) -> int:
    total = 0
    if not os.path.isdir(path):
        return 0
    for root, dirs, files in reversed(list(walk(path))):  # children before parents
        for name in files:
            if zero:
                total += erase(os.path.join(root, name))
            else:
                unlink(os.path.join(root, name))
        if zero:
            sync_dir(root)  # the unlinks of zeroed files, before their directory goes
        for name in dirs:
            rmdir(os.path.join(root, name))
    rmdir(path)
    sync_dir(os.path.dirname(os.path.abspath(path)))
    return total
