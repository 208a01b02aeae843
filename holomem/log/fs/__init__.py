"""The file layer: the only place that opens, reads, writes, syncs, renames or unlinks.

Owns: every file operation of holomem (positioned reads and writes, fsync, directory
sync, listing, atomic replace, secure erase, trees, the writer's lock and who holds
it, append-only logs, a local socket's file and the private directory it is in), their
crash points, and the hook that reports them. This package is the file layer's one import point:
callers write ``from holomem.log import fs`` and call ``fs.<name>``, and never import
its modules, which are

- :mod:`~holomem.log.fs.base`: the installed tap and the file layer's errors;
- :mod:`~holomem.log.fs.files`: files and directories (open, read, write, list, make,
  remove; nothing synced);
- :mod:`~holomem.log.fs.durable`: fsync, directory sync, rename, durable directories,
  atomic replacement;
- :mod:`~holomem.log.fs.erasing`: secure erase and removing trees;
- :mod:`~holomem.log.fs.locks`: the writer's lock and who holds it;
- :mod:`~holomem.log.fs.sockets`: a local socket's file and its private directory;
- :mod:`~holomem.log.fs.logfile`: append-only logs and the recorder tap.

Imports the standard library, :mod:`holomem.errors` and the log's ``crashpoints``,
``format`` and ``tap``.

Rules kept here so callers cannot get them wrong:

- an fsync failure raises :class:`~holomem.errors.FsyncError` and is never retried
  (after a failed fsync the kernel may have dropped the dirty pages; a second
  fsync can succeed without the data being on disk);
- a created, renamed or unlinked name is durable only after :func:`sync_dir`;
- :func:`erase` overwrites a file with zeros and syncs it before unlinking it.

Every operation that changes the disk is reported, once it succeeded, to the tap
installed with :func:`install_tap` (:class:`holomem.log.tap.Tap`). When
``HOLOMEM_FAULT_LOG`` names a file, a recorder appending to it (:func:`recorder`) is
installed at import: the crash harness's child records there what its power-loss model
replays, and tests read the order of writes and syncs from it. The crash points named
in ``HOLOMEM_CRASH_TRACE`` are appended through a :class:`LogFile` set up here too
(:func:`arm_from_environment`).
"""

from __future__ import annotations

import os

from holomem.log import crashpoints as cp
from holomem.log.fs.base import install_tap
from holomem.log.fs.durable import (
    atomic_temp,
    make_dirs,
    rename,
    sync,
    sync_dir,
    write_file_atomic,
)
from holomem.log.fs.erasing import erase, erase_tree, remove_tree, zero_range
from holomem.log.fs.files import (
    close,
    copy_tree,
    create,
    discard_output,
    file_id,
    listdir,
    make_temp_dir,
    mkdir,
    modified,
    open_ro,
    open_rw,
    path_size,
    read_at,
    read_each,
    read_file,
    read_file_or_none,
    read_key_file,
    read_start,
    rmdir,
    size,
    truncate,
    unlink,
    walk,
    write_at,
)
from holomem.log.fs.locks import lock, lock_holder, unlock
from holomem.log.fs.logfile import LogFile, recorder
from holomem.log.fs.sockets import listen_unix, private_dir, remove_socket

__all__ = [
    "LogFile", "arm_from_environment", "atomic_temp", "close", "copy_tree", "create",
    "discard_output", "erase", "erase_tree",
    "file_id", "install_tap", "listdir", "listen_unix", "lock", "lock_holder", "make_dirs",
    "make_temp_dir", "mkdir", "modified", "open_ro", "open_rw", "path_size", "private_dir",
    "read_at", "read_each", "read_file", "read_file_or_none", "read_key_file", "read_start",
    "recorder", "remove_socket",
    "remove_tree", "rename", "rmdir", "size", "sync", "sync_dir", "truncate", "unlink",
    "unlock", "walk", "write_at", "write_file_atomic", "zero_range",
]


def arm_from_environment() -> None:
    """Set this process up as the environment asks: the crash points
    (``HOLOMEM_CRASH_AT``, ``HOLOMEM_CRASH_TRACE``, with the trace appended through a
    :class:`LogFile`) and the recorder (``HOLOMEM_FAULT_LOG``; no tap when unset). Done
    once at import; a crash-harness child forked from a process that imported holomem
    already does it again with its own environment (:mod:`holomem.crashtest.forkserver`).
    """
    cp.configure(os.environ.get("HOLOMEM_CRASH_AT", ""),
                 os.environ.get("HOLOMEM_CRASH_TRACE", ""))
    log = os.environ.get("HOLOMEM_FAULT_LOG", "")
    install_tap(recorder(log) if log else None)
    if cp.TRACE:
        cp.trace_to(LogFile(cp.TRACE).append)


# Set up once, at import, for a process the crash harness or a test started.
arm_from_environment()
