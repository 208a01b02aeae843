"""Durability: fsync, directory sync, rename, and what is built of them.

Owns: syncing a file (:func:`sync`) and a directory (:func:`sync_dir`), renaming,
creating a path whose every new directory is durable (:func:`make_dirs`), atomic
replacement (:func:`write_file_atomic`), and their crash points. Imports the standard
library, :mod:`holomem.errors`, the log's ``crashpoints`` and ``format``, and
:mod:`holomem.log.fs.files`.

Rules kept here so callers cannot get them wrong:

- an fsync failure raises :class:`~holomem.errors.FsyncError` and is never retried
  (after a failed fsync the kernel may have dropped the dirty pages; a second
  fsync can succeed without the data being on disk);
- a created, renamed or unlinked name is durable only after :func:`sync_dir`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from holomem.errors import FsyncError, StorageIOError
from holomem.log import crashpoints as cp
from holomem.log.format import TMP_SUFFIX
from holomem.log.fs import base
from holomem.log.fs.base import call, open_fd
from holomem.log.fs.files import close, create, mkdir, unlink, write_at

P_FSYNC_BEFORE = cp.point("fs.fsync.before", "a file's data is written, its fsync not started")
P_FSYNC_AFTER = cp.point("fs.fsync.after", "a file's fsync returned")
P_DIRSYNC_BEFORE = cp.point("fs.dirsync.before", "a directory entry changed, not yet synced")
P_DIRSYNC_AFTER = cp.point("fs.dirsync.after", "a directory's fsync returned")
P_RENAME_BEFORE = cp.point("fs.rename.before", "about to rename a file or directory")
P_RENAME_AFTER = cp.point("fs.rename.after", "renamed, the directory not yet synced")


def sync(fd: int, path: str) -> None:
    """fsync ``fd``. A failure is fatal for the caller's journal: never retry it."""
    cp.hit(P_FSYNC_BEFORE)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsyncError(f"fsync of {path!r} failed: {exc.strerror or exc}") from exc
    if base.current is not None:
        base.current.synced(path, fd)
    cp.hit(P_FSYNC_AFTER)


def sync_dir(path: str) -> None:
    """fsync a directory so that names created, renamed or unlinked in it persist."""
    cp.hit(P_DIRSYNC_BEFORE)
    fd = open_fd(path, os.O_RDONLY | os.O_DIRECTORY, "opening directory")
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsyncError(f"fsync of directory {path!r} failed: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if base.current is not None:
        base.current.synced_dir(path)
    cp.hit(P_DIRSYNC_AFTER)


def make_dirs(path: str) -> None:
    """Create ``path`` and every missing parent, each durable before this returns.

    Each new directory is synced into its parent as soon as it is made, and the first
    one that already existed is synced into its own parent too: it may be the last one
    a crashed process made here, its entry never synced (only that one can be in doubt).
    """
    path = os.path.abspath(path)
    missing: list[str] = []
    while not os.path.isdir(path):
        if os.path.lexists(path):
            raise StorageIOError(f"creating directory {path!r} failed: a file is in the way")
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    if missing:
        sync_dir(os.path.dirname(path))  # the existing ancestor's own entry
    for new in reversed(missing):
        try:
            mkdir(new)
        except StorageIOError:
            if not os.path.isdir(new):  # another process may have made it meanwhile
                raise
        sync_dir(os.path.dirname(new))


def rename(src: str, dst: str) -> None:
    """Rename ``src`` to ``dst`` (atomic on POSIX). Durable after :func:`sync_dir`."""
    cp.hit(P_RENAME_BEFORE)
    call("renaming", src, os.rename, src, dst)
    if base.current is not None:
        base.current.renamed(src, dst)
    cp.hit(P_RENAME_AFTER)


def atomic_temp(path: str) -> str:
    """Where :func:`write_file_atomic` writes ``path``'s new bytes before the rename."""
    return path + TMP_SUFFIX


def write_file_atomic(path: str, data: bytes | Iterable[bytes]) -> int:
    """Replace ``path`` with ``data`` (bytes, or chunks written as they come): temp
    file, fsync, rename, fsync the directory. Returns the bytes written. A failure
    part-way leaves ``path`` as it was (and the temp file removed; a file already at the
    temp file's name is the caller's own, from an earlier attempt, and is replaced)."""
    tmp = atomic_temp(path)
    unlink(tmp)
    fd = create(tmp)
    offset = 0
    try:
        for chunk in [data] if isinstance(data, bytes) else data:
            write_at(fd, chunk, offset, tmp)
            offset += len(chunk)
        sync(fd, tmp)
    except BaseException:
        close(fd)
        unlink(tmp)
        raise
    close(fd)
    try:
        rename(tmp, path)
    except BaseException:  # (e.g. ``path`` is a directory): no copy left beside it
        unlink(tmp)
        raise
    sync_dir(os.path.dirname(path) or ".")
    return offset
