"""The file layer's recording hook: what a tap is told, and the one log a recorder keeps.

Owns: the :class:`Tap` protocol (one method per kind of operation that changes what is
on disk), the record format of the operations log (:class:`Record`, :func:`parse`), and
:class:`Recorder`, the tap that writes that log. Imports only the standard library and
performs no file operation itself: :mod:`holomem.log.fs` calls the installed tap
(:func:`holomem.log.fs.install_tap`) and hands a recorder the function that appends
its lines, so this module sits below it.

A tap is told of an operation once it has succeeded (a failed ``fsync`` is never
reported), with the path, the file descriptor of an open file, and the offset and
bytes of a write. The crash harness's power-loss model rebuilds the disk from the
log of a :class:`Recorder` (:mod:`holomem.crashtest.disk`); tests read it to see
the order of writes and syncs.

The log is text, one line per operation, fields separated by one tab::

    create    PATH FILE
    write     PATH OFFSET LENGTH FILE DATA
    truncate  PATH LENGTH FILE
    sync      PATH FILE
    dirsync   PATH
    mkdir     PATH
    rename    SRC DST
    unlink    PATH
    rmdir     PATH

``FILE`` identifies the open file (its inode number), so that writes through a
descriptor are attributed to the right file even after its name changed; ``DATA``
is the written bytes in hexadecimal. A tab, a newline or a backslash inside a path
is written ``\\t``, ``\\n``, ``\\\\``. Lines are appended one ``write`` each, in the
order the operations completed (with one thread doing file operations at a time, as
the crash harness's workload does, that is the order they happened in).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import NamedTuple, Protocol

#: Every record kind, in the order the grammar above lists them.
KINDS = ("create", "write", "truncate", "sync", "dirsync", "mkdir", "rename", "unlink",
         "rmdir")


class Tap(Protocol):
    """Told of every operation of :mod:`holomem.log.fs` that changes the disk, after it
    succeeded. A tap must not itself call an :mod:`~holomem.log.fs` function that
    reports to the tap (it would be told of its own records)."""

    def created(self, path: str, fd: int) -> None:
        """A new file ``path`` was created and opened as ``fd``."""

    def wrote(self, path: str, fd: int, offset: int, data: memoryview) -> None:
        """``data`` was written at ``offset`` of the file open as ``fd`` (not synced)."""

    def truncated(self, path: str, fd: int, length: int) -> None:
        """The file open as ``fd`` was cut (or zero-extended) to ``length`` bytes."""

    def synced(self, path: str, fd: int) -> None:
        """An ``fsync`` of the file open as ``fd`` returned."""

    def synced_dir(self, path: str) -> None:
        """An ``fsync`` of directory ``path`` returned: its entries are durable."""

    def made_dir(self, path: str) -> None:
        """Directory ``path`` was created."""

    def renamed(self, src: str, dst: str) -> None:
        """``src`` was renamed to ``dst``."""

    def unlinked(self, path: str) -> None:
        """File ``path`` was unlinked."""

    def removed_dir(self, path: str) -> None:
        """Empty directory ``path`` was removed."""


class Record(NamedTuple):
    """One line of the log. ``dst`` is a rename's target; ``length`` a write's length or
    a truncate's new size; ``file`` the inode of an fd-based operation (else 0)."""

    kind: str
    path: str
    dst: str = ""
    file: int = 0
    offset: int = 0
    length: int = 0
    data: bytes = b""


_ESCAPES = {"\\": "\\\\", "\t": "\\t", "\n": "\\n"}
_UNESCAPES = {v: k for k, v in _ESCAPES.items()}
_ESCAPED = re.compile(r"\\[\\tn]")


def _path(path: str) -> str:
    return "".join(_ESCAPES.get(c, c) for c in path) if any(c in path for c in _ESCAPES) \
        else path


def _unpath(field: str) -> str:
    return _ESCAPED.sub(lambda m: _UNESCAPES[m.group(0)], field)


def encode(record: Record) -> bytes:
    """The line of ``record`` (ending in a newline)."""
    r = record
    fields: tuple[object, ...]
    if r.kind == "create" or r.kind == "sync":
        fields = (_path(r.path), r.file)
    elif r.kind == "write":
        fields = (_path(r.path), r.offset, len(r.data), r.file, r.data.hex())
    elif r.kind == "truncate":
        fields = (_path(r.path), r.length, r.file)
    elif r.kind == "rename":
        fields = (_path(r.path), _path(r.dst))
    elif r.kind in KINDS:
        fields = (_path(r.path),)
    else:
        raise ValueError(f"unknown operation {r.kind!r}")
    line = "\t".join((r.kind, *(str(f) for f in fields))) + "\n"
    return line.encode("utf-8", "surrogateescape")


def parse(data: bytes) -> list[Record]:
    """The records of a log. Raises ValueError, naming the line, for anything else."""
    out = []
    lines = data.decode("utf-8", "surrogateescape").split("\n")
    if lines[-1] == "":
        lines.pop()  # what follows the last newline
    for n, line in enumerate(lines, 1):
        f = line.split("\t")
        try:
            kind, path = f[0], _unpath(f[1])
            if kind == "create" or kind == "sync":
                rec = Record(kind, path, file=int(f[2]))
            elif kind == "write":
                rec = Record(kind, path, file=int(f[4]), offset=int(f[2]), length=int(f[3]),
                             data=bytes.fromhex(f[5]))
                if len(rec.data) != rec.length:
                    raise ValueError("the data's length is not the one recorded")
            elif kind == "truncate":
                rec = Record(kind, path, file=int(f[3]), length=int(f[2]))
            elif kind == "rename":
                rec = Record(kind, path, dst=_unpath(f[2]))
            elif kind in KINDS:
                rec = Record(kind, path)
            else:
                raise ValueError(f"unknown operation {kind!r}")
        except (IndexError, ValueError) as exc:
            raise ValueError(f"operations log line {n} ({line[:80]!r}): {exc}") from exc
        out.append(rec)
    return out


class Recorder:
    """A tap that appends each operation to one log, in the format above.

    ``append`` writes one line to the log (a single ``write``: lines of several
    threads or processes never interleave); ``file_id`` names the file open as an
    fd; ``close`` closes the log. :func:`holomem.log.fs.recorder` provides them, and
    the file layer installs a recorder at import when ``HOLOMEM_FAULT_LOG`` names a
    file.
    """

    def __init__(self, append: Callable[[bytes], None], file_id: Callable[[int, str], int],
                 close: Callable[[], None] | None = None) -> None:
        self._append = append
        self._file_id = file_id
        self._close = close

    def close(self) -> None:
        """Stop recording: close the log (uninstall the tap first)."""
        if self._close is not None:
            self._close()

    def _put(self, record: Record) -> None:
        self._append(encode(record))

    def created(self, path: str, fd: int) -> None:
        self._put(Record("create", path, file=self._file_id(fd, path)))

    def wrote(self, path: str, fd: int, offset: int, data: memoryview) -> None:
        self._put(Record("write", path, file=self._file_id(fd, path), offset=offset,
                         length=len(data), data=bytes(data)))

    def truncated(self, path: str, fd: int, length: int) -> None:
        self._put(Record("truncate", path, file=self._file_id(fd, path), length=length))

    def synced(self, path: str, fd: int) -> None:
        self._put(Record("sync", path, file=self._file_id(fd, path)))

    def synced_dir(self, path: str) -> None:
        self._put(Record("dirsync", path))

    def made_dir(self, path: str) -> None:
        self._put(Record("mkdir", path))

    def renamed(self, src: str, dst: str) -> None:
        self._put(Record("rename", src, dst=dst))

    def unlinked(self, path: str) -> None:
        self._put(Record("unlink", path))

    def removed_dir(self, path: str) -> None:
        self._put(Record("rmdir", path))
