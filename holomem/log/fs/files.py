"""Files and directories: opening, reading, writing, listing, creating and removing.

Owns: the operations on one file or one name -- creating and opening a file,
positioned reads and writes, sizes, truncating, closing, listing and walking
directories, making and removing a directory, unlinking, a scratch directory, a copy
of a tree, pointing a descriptor at the null device -- and reading a key file, the one
read bounded whatever the file's size. None of them syncs: what makes a change durable
is :mod:`holomem.log.fs.durable`'s. Imports the standard library,
:mod:`holomem.errors`, the log's ``format`` (the key's size) and
:mod:`holomem.log.fs.base` (the tap and the errors).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import tempfile
from collections.abc import Iterator

from holomem.errors import InvalidError, StorageIOError
from holomem.log.format import KEY_SIZE
from holomem.log.fs import base
from holomem.log.fs.base import call, io_error, open_fd


def create(path: str) -> int:
    """Create ``path`` (it must not exist) for reading and writing; return the fd. The
    new name is not durable until the caller syncs the directory."""
    fd = open_fd(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, "creating")
    if base.current is not None:
        base.current.created(path, fd)
    return fd


def open_rw(path: str) -> int:
    """Open the existing file ``path`` for reading and writing; return the fd."""
    return open_fd(path, os.O_RDWR)


def open_ro(path: str) -> int:
    """Open ``path`` for reading only; return the fd."""
    return open_fd(path, os.O_RDONLY)


def size(fd: int, path: str) -> int:
    """The size of the open file ``fd`` in bytes."""
    return call("examining", path, os.fstat, fd).st_size


def path_size(path: str) -> int:
    """The size in bytes of the file at ``path`` (0 when it is gone)."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise io_error("examining", path, exc) from exc


def modified(path: str) -> float | None:
    """When the file at ``path`` was last written, in seconds since the epoch (None when
    it is gone)."""
    try:
        return os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise io_error("examining", path, exc) from exc


def file_id(fd: int, path: str) -> int:
    """What identifies the open file ``fd`` whatever its name: its inode number."""
    return call("examining", path, os.fstat, fd).st_ino


def read_file(path: str) -> bytes:
    """The whole content of the file at ``path``."""
    return _read_file(path, missing_ok=False) or b""


def read_file_or_none(path: str) -> bytes | None:
    """The whole content of the file at ``path``, or None if there is no such file."""
    return _read_file(path, missing_ok=True)


def _read_file(path: str, missing_ok: bool) -> bytes | None:
    fd = open_fd(path, os.O_RDONLY, missing_ok=missing_ok)
    if fd < 0:
        return None
    try:
        return read_at(fd, size(fd, path), 0, path)
    finally:
        close(fd)


def read_start(path: str, limit: int) -> bytes:
    """At most the first ``limit`` bytes of the file at ``path``, whatever its size,
    read in order from its start (so a pipe or FIFO works too, e.g. ``<(...)``)."""
    fd = open_fd(path, os.O_RDONLY)
    try:
        out = b""
        while len(out) < limit:
            chunk = call("reading", path, os.read, fd, limit - len(out))
            if not chunk:
                break
            out += chunk
        return out
    finally:
        close(fd)


def read_key_file(path: str) -> bytes:
    """The store key in the file at ``path``: its exactly ``KEY_SIZE`` (32) raw bytes.
    No more than one byte past the key is ever read, so a huge file costs nothing.

    A key is raw bytes: nothing is stripped. A file one byte too long that ends with a
    newline (``echo`` adds one) is refused like any other length, with a hint.

    Errors: ``io`` (it cannot be read), ``invalid_request`` (another length).
    """
    data = read_start(path, KEY_SIZE + 1)
    if len(data) == KEY_SIZE:
        return data
    rule = (f"a key file holds exactly {KEY_SIZE} raw bytes (the key itself, not hex or "
            "base64)")
    if len(data) < KEY_SIZE:
        raise InvalidError(f"{rule}; this one holds {len(data)}")
    hint = (f"; its byte {KEY_SIZE + 1} is a newline: write the key without one (printf "
            f"or head -c {KEY_SIZE}, not echo)" if data[KEY_SIZE:] == b"\n" else "")
    raise InvalidError(f"{rule}; this one holds more{hint}")


def listdir(path: str) -> list[str]:
    """The names in directory ``path``."""
    return call("listing directory", path, os.listdir, path)


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(directory, subdirectories, files)`` for ``top`` and every directory under it,
    parents first, names sorted; nothing if ``top`` is not a directory (nor for one
    that vanishes meanwhile)."""
    def failed(exc: OSError) -> None:
        if not isinstance(exc, FileNotFoundError):
            raise io_error("listing directory", exc.filename or top, exc) from exc

    for root, dirs, files in os.walk(top, onerror=failed):
        dirs.sort()
        yield root, dirs, sorted(files)


def write_at(fd: int, data: bytes | memoryview, offset: int, path: str) -> None:
    """Write all of ``data`` at ``offset`` (no sync)."""
    view = memoryview(data)
    done = 0
    try:
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)
    except OSError as exc:
        raise io_error("writing", path, exc) from exc
    if base.current is not None:
        base.current.wrote(path, fd, offset, view)


def read_at(fd: int, length: int, offset: int, path: str) -> bytes:
    """Read up to ``length`` bytes at ``offset`` (fewer at the end of the file)."""
    try:
        out = os.pread(fd, length, offset)  # (one call, unless the kernel gives fewer)
        if len(out) == length or not out:
            return out
        while len(out) < length:
            chunk = os.pread(fd, length - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
    except OSError as exc:
        raise io_error("reading", path, exc) from exc
    return out


def read_each(fd: int, offsets: list[int], lengths: list[int], path: str) -> list[bytes]:
    """:func:`read_at` of each of ``lengths`` bytes at ``offsets``: one read each, in
    one call (a few records scattered over a file, read for one answer)."""
    try:
        out = list(map(os.pread, itertools.repeat(fd, len(offsets)), lengths, offsets))
    except OSError as exc:
        raise io_error("reading", path, exc) from exc
    for i, length in enumerate(lengths):
        if 0 < len(out[i]) < length:  # the kernel gave fewer: read the rest
            out[i] = read_at(fd, length, offsets[i], path)
    return out


def truncate(fd: int, length: int, path: str) -> None:
    """Cut (or zero-extend) the open file ``fd`` to ``length`` bytes (no sync)."""
    call("truncating", path, os.ftruncate, fd, length)
    if base.current is not None:
        base.current.truncated(path, fd, length)


def close(fd: int) -> None:
    """Close ``fd``; a failure to close is ignored (nothing is lost by it: the data was
    synced, or was not promised)."""
    with contextlib.suppress(OSError):
        os.close(fd)


def mkdir(path: str) -> None:
    """Create directory ``path`` (its parent must exist). Durable after
    :func:`~holomem.log.fs.durable.sync_dir` of the parent."""
    call("creating directory", path, os.mkdir, path, 0o700)
    if base.current is not None:
        base.current.made_dir(path)


def _remove(path: str, directory: bool) -> None:
    try:
        if directory:
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise io_error("removing directory" if directory else "unlinking", path, exc) from exc
    if base.current is not None and directory:
        base.current.removed_dir(path)
    elif base.current is not None:
        base.current.unlinked(path)


def unlink(path: str) -> None:
    """Unlink file ``path`` (a missing one is not an error). Durable after
    :func:`~holomem.log.fs.durable.sync_dir`."""
    _remove(path, directory=False)


def rmdir(path: str) -> None:
    """Remove the empty directory ``path`` (a missing one is not an error)."""
    _remove(path, directory=True)


def make_temp_dir(prefix: str, parent: str | None = None) -> str:
    """Create a new directory with a unique name in ``parent`` (the system's temporary
    directory by default); return its path. Not synced: scratch space, never a store."""
    path = call("creating a directory in", parent or tempfile.gettempdir(), tempfile.mkdtemp,
                "", prefix, parent)
    if base.current is not None:
        base.current.made_dir(path)
    return path


def copy_tree(src: str, dst: str) -> None:
    """Copy directory ``src`` to the new directory ``dst``: every file's bytes, nothing
    synced. For copies that are looked at or crashed again (the crash harness, tools),
    never for a store's own data."""
    if not os.path.isdir(src):
        raise StorageIOError(f"copying {src!r} failed: not a directory")
    for root, _dirs, files in walk(src):
        target = os.path.normpath(os.path.join(dst, os.path.relpath(root, src)))
        mkdir(target)
        for name in files:
            data = read_file(os.path.join(root, name))
            out = os.path.join(target, name)
            fd = create(out)
            try:
                write_at(fd, data, 0, out)
            finally:
                close(fd)


def discard_output(fd: int) -> None:
    """Point the file descriptor ``fd`` at the null device, so later writes to it vanish
    (a command whose reader closed the pipe, e.g. ``holomem list S | head -1``, then
    exits quietly instead of failing again on the interpreter's final flush)."""
    null = open_fd(os.devnull, os.O_WRONLY)
    try:
        call("redirecting to", os.devnull, os.dup2, null, fd)
    finally:
        close(null)
