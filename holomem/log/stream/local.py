"""This node's own files for a stream journal: the text segment of each generation.

Owns: the per-process scratch directory under ``LOCAL/STORE/`` that holds a stream
store's text segments (derived from the stream, rebuilt at every open), the lock that
marks it in use, and erasing it -- on close, and at the next open for a directory whose
process died. Every file goes through :mod:`holomem.log.fs`; erasing overwrites with
zeros and syncs before unlinking, so a forgotten text never outlives the process that
held it on this node. Imports the standard library and the log.

What marks a directory as holomem's: its name ``node-*`` *and* the lock file
:data:`LOCK` in it, made right after the directory and before anything else is
written there. A ``node-*`` directory without it was never holomem's (or died before
holding anything): it is left alone, and no lock file is made in it.
"""

from __future__ import annotations

import os

from holomem.errors import StoreLockedError
from holomem.log import fs
from holomem.log.format import generation_name

LOCK = "in-use.lock"
PREFIX = "node-"


class LocalDir:
    """A locked scratch directory of one open stream journal. Use :meth:`create`."""

    def __init__(self, path: str, lock_fd: int) -> None:
        self.path = path
        self._lock_fd: int | None = lock_fd
        #: bytes zeroed erasing the directories of processes that died
        self.erased = 0

    @classmethod
    def create(cls, base: str, store: str) -> LocalDir:
        """A new directory under ``base/store``, after erasing the ones left by dead
        processes: holomem's (holding :data:`LOCK`) whose lock is free. Errors: ``io``."""
        parent = os.path.join(base, store)
        fs.make_dirs(parent)
        erased = 0
        for name in fs.listdir(parent):
            other = os.path.join(parent, name)
            if not name.startswith(PREFIX) or os.path.islink(other):
                continue
            try:
                fd = fs.lock(os.path.join(other, LOCK), create=False)
            except StoreLockedError:
                continue  # alive
            except Exception:
                continue  # no lock file: not holomem's; or vanished meanwhile
            try:
                erased += fs.erase_tree(other)
            finally:
                fs.unlock(fd)
        path = fs.make_temp_dir(PREFIX, parent)
        fs.sync_dir(parent)
        local = cls(path, fs.lock(os.path.join(path, LOCK)))
        local.erased = erased
        return local

    def generation_dir(self, generation: int) -> str:
        """The directory of generation ``generation``'s text segment, made durable."""
        path = os.path.join(self.path, generation_name(generation))
        if not os.path.isdir(path):
            fs.mkdir(path)
            fs.sync_dir(self.path)
        return path

    def erase_generation(self, generation: int) -> int:
        return fs.erase_tree(os.path.join(self.path, generation_name(generation)))

    def close(self) -> None:
        """Erase everything (zeros, synced, unlinked), then release the lock."""
        if self._lock_fd is None:
            return
        try:
            fs.erase_tree(self.path)
        finally:
            fs.unlock(self._lock_fd)
            self._lock_fd = None
