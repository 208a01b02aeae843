"""Keeping what a repair cuts: the bytes of a torn tail are saved before they are cut.

Owns: choosing a backup file that does not exist yet (its name and directory are
:mod:`holomem.log.format`'s, FORMAT.md §7), and the cut itself: save the bytes
durably, then truncate or remove the file. Imports the standard library,
:mod:`holomem.errors` and the other ``holomem.log`` modules. The writer's open (a
torn tail) and ``fsck --repair`` both cut through here, so both keep what they cut the
same way.
"""

from __future__ import annotations

import os
import time

from holomem.log import fs
from holomem.log.format import BACKUP_SUFFIX, backup_name


def backup_dir(store: str) -> str:
    """Where the bytes cut from the store at ``store`` are kept: ``STORE.fsck-backup``."""
    return os.path.abspath(store).rstrip("/") + BACKUP_SUFFIX


def save(path: str, offset: int, target: str) -> str | None:
    """Copy the bytes of ``path`` from ``offset`` to its end into a new file in directory
    ``target`` (created if needed), durably; return the new file's path, or None if
    there is nothing after ``offset``.

    The name is ``<file>.<offset>.<unix time>.bin``, with a counter added if that name
    is taken: an earlier backup is never overwritten.
    """
    fd = fs.open_ro(path)
    try:
        cut = fs.read_at(fd, max(0, fs.size(fd, path) - offset), offset, path)
    finally:
        fs.close(fd)
    if not cut:
        return None
    fs.make_dirs(target)  # every new directory's entry is synced, up to an existing one
    name, when = os.path.basename(path), int(time.time())
    out, n = os.path.join(target, backup_name(name, offset, when)), 0
    while os.path.lexists(out):
        n += 1
        out = os.path.join(target, backup_name(name, offset, when, n))
    fd = fs.create(out)
    try:
        fs.write_at(fd, cut, 0, out)
        fs.sync(fd, out)
    finally:
        fs.close(fd)
    fs.sync_dir(target)
    return out


def cut_tail(path: str, offset: int, target: str) -> str | None:
    """Save the bytes of ``path`` from ``offset`` on (see :func:`save`), then cut them:
    truncate the file there and sync it, or, at offset 0, remove the file (zeroed
    first) and sync its directory. Returns the backup's path (None: nothing to keep).
    """
    saved = save(path, offset, target)
    if offset == 0:
        fs.erase(path)
        fs.sync_dir(os.path.dirname(path))
    else:
        fd = fs.open_rw(path)
        try:
            fs.truncate(fd, offset, path)
            fs.sync(fd, path)
        finally:
            fs.close(fd)
    return saved
