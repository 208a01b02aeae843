"""The writer's lock: an exclusive ``flock`` the kernel releases when the process dies.

Owns: taking the lock (:func:`lock`) and giving it back (:func:`unlock`), who holds it
(:func:`lock_holder`, from the system's table of locks), and the refusal to import on
a system without ``fcntl``. Imports the standard library,
:mod:`holomem.errors` and :mod:`holomem.log.fs.base`.
"""

from __future__ import annotations

import errno
import os

try:
    import fcntl
except ModuleNotFoundError as exc:  # Windows: no flock, nor pread, pwrite, O_DIRECTORY
    raise ImportError("holomem needs a POSIX system (Linux; macOS is untested): this one "
                      "has no fcntl, which the writer's lock needs, nor os.pread and "
                      "os.pwrite. On Windows, run it under WSL.") from exc

from holomem.errors import StorageIOError, StoreLockedError
from holomem.log.fs.base import io_error, open_fd
from holomem.log.fs.files import close, file_id, open_ro, read_at


def lock(path: str, *, create: bool = True) -> int:
    """Take the exclusive writer lock at ``path``; raise StoreLockedError if held,
    naming the holder where the system says (:func:`lock_holder`). ``create=False``:
    only a lock file that exists (and is no symbolic link) is locked, ``io``
    otherwise -- nothing is made where holomem made no lock.

    The lock is an ``flock`` on an open file description, so it also excludes a
    second writer in the same process, and the kernel releases it when the
    process dies (no stale lock after a crash). Creating the lock file is not
    reported to the tap: its bytes and its entry mean nothing (FORMAT.md §1).
    """
    flags = (os.O_RDWR | os.O_CREAT) if create else (os.O_RDWR | os.O_NOFOLLOW)
    fd = open_fd(path, flags, "opening lock file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        try:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise io_error("locking", path, exc) from exc
            holder = _holder(fd, path)
            err = StoreLockedError(f"the store at {os.path.dirname(path)!r} is open for "
                                   f"writing by {holder or 'another process'}")
            err.holder = holder
            raise err from exc
        finally:
            os.close(fd)
    return fd


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        close(fd)


#: The most characters of a lock holder's command line :func:`lock_holder` quotes.
MAX_COMMAND_CHARS = 300


def lock_holder(path: str) -> str | None:
    """Who holds the writer lock at ``path``: ``process PID (its command line)``, where
    the system says (Linux: ``/proc/locks``); None when it does not, or nobody does."""
    try:
        fd = open_ro(path)
    except StorageIOError:
        return None
    try:
        return _holder(fd, path)
    finally:
        close(fd)


def _holder(fd: int, path: str) -> str | None:
    """The holder of the ``flock`` on ``path``, open as ``fd`` (see :func:`lock_holder`)."""
    try:
        inode = file_id(fd, path)
        table = _proc("/proc/locks")
    except StorageIOError:
        return None
    for line in table.decode("ascii", "replace").splitlines():
        # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2589612 0 EOF": pid, then major:minor:inode
        fields = line.split()
        if len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue
        pid, where = fields[4], fields[5].rsplit(":", 1)
        if len(where) == 2 and where[1].isdigit() and int(where[1]) == inode and pid.isdigit():
            return f"process {pid}{_command(pid)}"
    return None


def _proc(path: str, limit: int = 1 << 20) -> bytes:
    """A file of ``/proc`` (whose size says 0: read to its end, up to ``limit`` bytes).
    Errors: ``io`` (none such, e.g. not Linux)."""
    fd = open_ro(path)
    try:
        return read_at(fd, limit, 0, path)
    finally:
        close(fd)


def _command(pid: str) -> str:
    try:
        raw = _proc(f"/proc/{pid}/cmdline")
    except StorageIOError:
        return ""
    words = raw.rstrip(b"\0").split(b"\0")
    # One line: arguments holding line breaks or other control characters are flattened.
    line = " ".join(" ".join(w.decode("utf-8", "replace").split()) for w in words if w)
    if len(line) > MAX_COMMAND_CHARS:
        line = line[:MAX_COMMAND_CHARS] + "..."
    return f" ({line})" if line else ""
