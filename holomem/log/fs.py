"""The file layer: the only place that writes, syncs, renames or unlinks.

Owns: durable file operations (positioned writes, fsync, directory sync, atomic
replace, secure erase) and their crash points. Imports the standard library,
:mod:`holomem.errors` and :mod:`holomem.log.crashpoints`.

Rules kept here so callers cannot get them wrong:

- an fsync failure raises :class:`~holomem.errors.FsyncError` and is never retried
  (after a failed fsync the kernel may have dropped the dirty pages; a second
  fsync can succeed without the data being on disk);
- a created, renamed or unlinked name is durable only after :func:`sync_dir`;
- :func:`erase` overwrites a file with zeros and syncs it before unlinking it.

When ``HOLOMEM_FAULT_LOG`` names a file, every write, sync, create, rename and
unlink is also recorded there, one line each, so the crash harness can rebuild the
state a power loss would leave (what was synced and what was not).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os

from holomem.errors import FsyncError, StorageIOError, StoreLockedError
from holomem.log import crashpoints as cp

P_FSYNC_BEFORE = cp.point("fs.fsync.before", "a file's data is written, its fsync not started")
P_FSYNC_AFTER = cp.point("fs.fsync.after", "a file's fsync returned")
P_DIRSYNC_BEFORE = cp.point("fs.dirsync.before", "a directory entry changed, not yet synced")
P_DIRSYNC_AFTER = cp.point("fs.dirsync.after", "a directory's fsync returned")
P_RENAME_BEFORE = cp.point("fs.rename.before", "about to rename a file or directory")
P_RENAME_AFTER = cp.point("fs.rename.after", "renamed, the directory not yet synced")
P_ERASE_ZEROED = cp.point("fs.erase.zeroed", "a file was overwritten with zeros and synced")
P_ERASE_UNLINKED = cp.point("fs.erase.unlinked", "a zeroed file was unlinked")

_ZERO_CHUNK = bytes(1 << 20)
_FAULT_LOG = os.environ.get("HOLOMEM_FAULT_LOG", "")


def _record(*fields: object) -> None:
    if not _FAULT_LOG:
        return
    line = "\t".join(str(f) for f in fields) + "\n"
    fd = os.open(_FAULT_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _io_error(what: str, path: str, exc: OSError) -> StorageIOError:
    return StorageIOError(f"{what} {path!r} failed: {exc.strerror or exc}")


def create(path: str) -> int:
    """Create ``path`` (it must not exist) for reading and writing; return the fd.

    The new name is not durable until the caller syncs the directory.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise _io_error("creating", path, exc) from exc
    _record("create", path)
    return fd


def open_rw(path: str) -> int:
    try:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        raise _io_error("opening", path, exc) from exc


def open_ro(path: str) -> int:
    """Open ``path`` for reading only; return the fd."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise _io_error("opening", path, exc) from exc


def size(fd: int, path: str) -> int:
    """The size of the open file ``fd`` in bytes."""
    try:
        return os.fstat(fd).st_size
    except OSError as exc:
        raise _io_error("examining", path, exc) from exc


def read_file(path: str) -> bytes:
    """The whole content of the file at ``path``."""
    fd = open_ro(path)
    try:
        return read_at(fd, size(fd, path), 0, path)
    finally:
        close(fd)


def read_file_or_none(path: str) -> bytes | None:
    """The whole content of the file at ``path``, or None if there is no such file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _io_error("opening", path, exc) from exc
    try:
        return read_at(fd, size(fd, path), 0, path)
    finally:
        close(fd)


def listdir(path: str) -> list[str]:
    """The names in directory ``path``."""
    try:
        return os.listdir(path)
    except OSError as exc:
        raise _io_error("listing directory", path, exc) from exc


def write_at(fd: int, data: bytes | memoryview, offset: int, path: str) -> None:
    """Write all of ``data`` at ``offset`` (no sync)."""
    view = memoryview(data)
    _record("write", path, offset, len(view))
    done = 0
    try:
        while done < len(view):
            done += os.pwrite(fd, view[done:], offset + done)
    except OSError as exc:
        raise _io_error("writing", path, exc) from exc


def read_at(fd: int, length: int, offset: int, path: str) -> bytes:
    """Read up to ``length`` bytes at ``offset`` (fewer at the end of the file)."""
    out = b""
    try:
        while len(out) < length:
            chunk = os.pread(fd, length - len(out), offset + len(out))
            if not chunk:
                break
            out += chunk
    except OSError as exc:
        raise _io_error("reading", path, exc) from exc
    return out


def truncate(fd: int, length: int, path: str) -> None:
    _record("truncate", path, length)
    try:
        os.ftruncate(fd, length)
    except OSError as exc:
        raise _io_error("truncating", path, exc) from exc


def sync(fd: int, path: str) -> None:
    """fsync ``fd``. A failure is fatal for the caller's journal: never retry it."""
    cp.hit(P_FSYNC_BEFORE)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsyncError(f"fsync of {path!r} failed: {exc.strerror or exc}") from exc
    _record("sync", path)
    cp.hit(P_FSYNC_AFTER)


def sync_dir(path: str) -> None:
    """fsync a directory so that names created, renamed or unlinked in it persist."""
    cp.hit(P_DIRSYNC_BEFORE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _io_error("opening directory", path, exc) from exc
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsyncError(f"fsync of directory {path!r} failed: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    _record("dirsync", path)
    cp.hit(P_DIRSYNC_AFTER)


def close(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


def mkdir(path: str) -> None:
    try:
        os.mkdir(path, 0o700)
    except OSError as exc:
        raise _io_error("creating directory", path, exc) from exc
    _record("mkdir", path)


def make_dirs(path: str) -> None:
    """Create ``path`` and every missing parent, each durable before this returns.

    Every new directory's entry lives in its parent, so each parent of a created
    directory is synced, up to and including the first one that already existed --
    and that one's parent too: the directory that exists may be the last one a
    process created here before it crashed, its own entry never synced. (Each
    directory is synced into its parent right after it is made, so only that last
    one can be in doubt.)
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
    try:
        os.rename(src, dst)
    except OSError as exc:
        raise _io_error("renaming", src, exc) from exc
    _record("rename", src, dst)
    cp.hit(P_RENAME_AFTER)


def unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _io_error("unlinking", path, exc) from exc
    _record("unlink", path)


def rmdir(path: str) -> None:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _io_error("removing directory", path, exc) from exc
    _record("rmdir", path)


def write_file_atomic(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync the directory."""
    tmp = path + ".tmp"
    unlink(tmp)
    fd = create(tmp)
    try:
        write_at(fd, data, 0, tmp)
        sync(fd, tmp)
    finally:
        close(fd)
    rename(tmp, path)
    sync_dir(os.path.dirname(path) or ".")


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
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise _io_error("opening", path, exc) from exc
    try:
        size = os.fstat(fd).st_size
        zero_range(fd, 0, size, path)
        sync(fd, path)
    finally:
        close(fd)
    cp.hit(P_ERASE_ZEROED)
    unlink(path)
    cp.hit(P_ERASE_UNLINKED)
    return size


def erase_tree(path: str) -> int:
    """Erase every file under directory ``path`` (see :func:`erase`), then remove it.

    Returns the bytes overwritten. The parent directory is synced at the end.
    """
    total = 0
    if not os.path.isdir(path):
        return 0
    for root, dirs, files in os.walk(path, topdown=False):
        for name in sorted(files):
            total += erase(os.path.join(root, name))
        sync_dir(root)
        for name in dirs:
            rmdir(os.path.join(root, name))
    rmdir(path)
    sync_dir(os.path.dirname(os.path.abspath(path)))
    return total


def remove_tree(path: str) -> None:
    """Unlink every file under directory ``path`` and remove it (no zeroing)."""
    if not os.path.isdir(path):
        return
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            unlink(os.path.join(root, name))
        for name in dirs:
            rmdir(os.path.join(root, name))
    rmdir(path)
    sync_dir(os.path.dirname(os.path.abspath(path)))


def lock(path: str) -> int:
    """Take the exclusive writer lock at ``path``; raise StoreLockedError if held.

    The lock is an ``flock`` on an open file description, so it also excludes a
    second writer in the same process, and the kernel releases it when the
    process dies (no stale lock after a crash).
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise _io_error("opening lock file", path, exc) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise StoreLockedError(
                f"the store at {os.path.dirname(path)!r} is open for writing elsewhere"
            ) from exc
        raise _io_error("locking", path, exc) from exc
    return fd


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        close(fd)
