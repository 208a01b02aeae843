"""What a power-loss child records beside ``HOLOMEM_FAULT_LOG``: the bytes of every write.

Owns: the shim's record format (:data:`_SHIM`), the shim that routes the file layer
through it in the child (:class:`_Shim`), and the marker that separates two processes
in both logs (:func:`_mark_epoch`). The parent reads what is written here in
:mod:`holomem.crashtest.disk`. Imports :mod:`holomem.log.fs` only.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from typing import Any

from holomem.log import fs

#: kind, inode, offset (or length for a truncate), data length; the data follows.
_SHIM = struct.Struct("<cQQQ")


class _Shim:
    """Records, beside ``HOLOMEM_FAULT_LOG``, what that log does not hold: the inode
    every fd-based operation touched and the bytes of every write.

    The fault log gives the order (and says when an fsync really returned); this
    gives the data. The k-th ``write`` line of the log is the k-th ``w`` record here,
    and so on per kind: the parent checks that they agree.
    """

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _put(self, kind: bytes, fd: int, offset: int, data: bytes = b"") -> None:
        ino = os.fstat(fd).st_ino
        os.write(self._fd, _SHIM.pack(kind, ino, offset, len(data)) + data)

    def install(self) -> None:
        """Route the file layer's creates, writes, truncates and syncs through the shim."""
        for name, fn in self.functions().items():
            setattr(fs, name, fn)

    def functions(self) -> dict[str, Callable[..., Any]]:
        """The replacements of :mod:`holomem.log.fs` functions, by name."""
        create, write_at, truncate, sync = fs.create, fs.write_at, fs.truncate, fs.sync

        def shim_create(path: str) -> int:
            fd = create(path)
            self._put(b"c", fd, 0)
            return fd

        def shim_write_at(fd: int, data: bytes | memoryview, offset: int, path: str) -> None:
            self._put(b"w", fd, offset, bytes(data))
            write_at(fd, data, offset, path)

        def shim_truncate(fd: int, length: int, path: str) -> None:
            self._put(b"t", fd, length)
            truncate(fd, length, path)

        def shim_sync(fd: int, path: str) -> None:
            self._put(b"s", fd, 0)  # an intent: the fault log says whether it returned
            sync(fd, path)

        return {"create": shim_create, "write_at": shim_write_at, "truncate": shim_truncate,
                "sync": shim_sync}


def _mark_epoch(fault_log: str, shim_log: str) -> None:
    """Mark, in both logs, that another process starts writing to the same files."""
    with open(fault_log, "a", encoding="utf-8") as f:
        f.write("epoch\n")
    with open(shim_log, "ab") as fb:
        fb.write(_SHIM.pack(b"e", 0, 0, 0))
