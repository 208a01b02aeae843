"""The file layer: the only place that opens, reads, writes, syncs, renames or unlinks.

Owns: every file operation of holomem (positioned reads and writes, fsync, directory
sync, listing, atomic replace, secure erase, trees, the writer's lock and who holds
it, append-only logs, a local socket's file and the private directory it is in), their
crash points, and the hook that reports them. Imports the standard library,
:mod:`holomem.errors` and the log's ``crashpoints``, ``format`` and ``tap``.

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
in ``HOLOMEM_CRASH_TRACE`` are appended through a :class:`LogFile` set up here too.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import os
import socket
import stat
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

try:
    import fcntl
except ModuleNotFoundError as exc:  # Windows: no flock, nor pread, pwrite, O_DIRECTORY
    raise ImportError("holomem needs a POSIX system (Linux; macOS is untested): this one "
                      "has no fcntl, which the writer's lock needs, nor os.pread and "
                      "os.pwrite. On Windows, run it under WSL.") from exc

from holomem.errors import FsyncError, StorageIOError, StoreLockedError
from holomem.log import crashpoints as cp
from holomem.log.format import TMP_SUFFIX
from holomem.log.tap import Recorder, Tap

P_FSYNC_BEFORE = cp.point("fs.fsync.before", "a file's data is written, its fsync not started")
P_FSYNC_AFTER = cp.point("fs.fsync.after", "a file's fsync returned")
P_DIRSYNC_BEFORE = cp.point("fs.dirsync.before", "a directory entry changed, not yet synced")
P_DIRSYNC_AFTER = cp.point("fs.dirsync.after", "a directory's fsync returned")
P_RENAME_BEFORE = cp.point("fs.rename.before", "about to rename a file or directory")
P_RENAME_AFTER = cp.point("fs.rename.after", "renamed, the directory not yet synced")
P_ERASE_ZEROED = cp.point("fs.erase.zeroed", "a file was overwritten with zeros and synced")
P_ERASE_UNLINKED = cp.point("fs.erase.unlinked", "a zeroed file was unlinked")

T = TypeVar("T")
_ZERO_CHUNK = bytes(1 << 20)
#: The tap told of every operation that changes the disk (None: nobody listens).
_tap: Tap | None = None


def install_tap(tap: Tap | None) -> Tap | None:
    """Report every later operation that changes the disk to ``tap`` (None: to nobody);
    return the tap installed before. One tap at a time, for the whole process."""
    global _tap
    previous, _tap = _tap, tap
    return previous


def _io_error(what: str, path: str, exc: OSError) -> StorageIOError:
    return StorageIOError(f"{what} {path!r} failed: {exc.strerror or exc}")


def _call(what: str, path: str, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, an ``OSError`` turned into the file layer's error."""
    try:
        return fn(*args)
    except OSError as exc:
        raise _io_error(what, path, exc) from exc


def _open(path: str, flags: int, what: str = "opening", missing_ok: bool = False) -> int:
    """``os.open`` with the file layer's errors; -1 for a missing file if ``missing_ok``."""
    try:
        return os.open(path, flags | os.O_CLOEXEC, 0o600)
    except FileNotFoundError as exc:
        if missing_ok:
            return -1
        raise _io_error(what, path, exc) from exc
    except OSError as exc:
        raise _io_error(what, path, exc) from exc


def create(path: str) -> int:
    """Create ``path`` (it must not exist) for reading and writing; return the fd. The
    new name is not durable until the caller syncs the directory."""
    fd = _open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, "creating")
    if _tap is not None:
        _tap.created(path, fd)
    return fd


def open_rw(path: str) -> int:
    """Open the existing file ``path`` for reading and writing; return the fd."""
    return _open(path, os.O_RDWR)


def open_ro(path: str) -> int:
    """Open ``path`` for reading only; return the fd."""
    return _open(path, os.O_RDONLY)


def size(fd: int, path: str) -> int:
    """The size of the open file ``fd`` in bytes."""
    return _call("examining", path, os.fstat, fd).st_size


def path_size(path: str) -> int:
    """The size in bytes of the file at ``path`` (0 when it is gone)."""
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0
    except OSError as exc:
        raise _io_error("examining", path, exc) from exc


def file_id(fd: int, path: str) -> int:
    """What identifies the open file ``fd`` whatever its name: its inode number."""
    return _call("examining", path, os.fstat, fd).st_ino


def read_file(path: str) -> bytes:
    """The whole content of the file at ``path``."""
    return _read_file(path, missing_ok=False) or b""


def read_file_or_none(path: str) -> bytes | None:
    """The whole content of the file at ``path``, or None if there is no such file."""
    return _read_file(path, missing_ok=True)


def _read_file(path: str, missing_ok: bool) -> bytes | None:
    fd = _open(path, os.O_RDONLY, missing_ok=missing_ok)
    if fd < 0:
        return None
    try:
        return read_at(fd, size(fd, path), 0, path)
    finally:
        close(fd)


def listdir(path: str) -> list[str]:
    """The names in directory ``path``."""
    return _call("listing directory", path, os.listdir, path)


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    """``(directory, subdirectories, files)`` for ``top`` and every directory under it,
    parents first, names sorted; nothing if ``top`` is not a directory (nor for one
    that vanishes meanwhile)."""
    def failed(exc: OSError) -> None:
        if not isinstance(exc, FileNotFoundError):
            raise _io_error("listing directory", exc.filename or top, exc) from exc

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
        raise _io_error("writing", path, exc) from exc
    if _tap is not None:
        _tap.wrote(path, fd, offset, view)


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
        raise _io_error("reading", path, exc) from exc
    return out


def read_each(fd: int, offsets: list[int], lengths: list[int], path: str) -> list[bytes]:
    """:func:`read_at` of each of ``lengths`` bytes at ``offsets``: one read each, in
    one call (a few records scattered over a file, read for one answer)."""
    try:
        out = list(map(os.pread, itertools.repeat(fd, len(offsets)), lengths, offsets))
    except OSError as exc:
        raise _io_error("reading", path, exc) from exc
    for i, length in enumerate(lengths):
        if 0 < len(out[i]) < length:  # the kernel gave fewer: read the rest
            out[i] = read_at(fd, length, offsets[i], path)
    return out


def truncate(fd: int, length: int, path: str) -> None:
    """Cut (or zero-extend) the open file ``fd`` to ``length`` bytes (no sync)."""
    _call("truncating", path, os.ftruncate, fd, length)
    if _tap is not None:
        _tap.truncated(path, fd, length)


def sync(fd: int, path: str) -> None:
    """fsync ``fd``. A failure is fatal for the caller's journal: never retry it."""
    cp.hit(P_FSYNC_BEFORE)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsyncError(f"fsync of {path!r} failed: {exc.strerror or exc}") from exc
    if _tap is not None:
        _tap.synced(path, fd)
    cp.hit(P_FSYNC_AFTER)


def sync_dir(path: str) -> None:
    """fsync a directory so that names created, renamed or unlinked in it persist."""
    cp.hit(P_DIRSYNC_BEFORE)
    fd = _open(path, os.O_RDONLY | os.O_DIRECTORY, "opening directory")
    try:
        os.fsync(fd)
    except OSError as exc:
        raise FsyncError(f"fsync of directory {path!r} failed: {exc.strerror or exc}") from exc
    finally:
        os.close(fd)
    if _tap is not None:
        _tap.synced_dir(path)
    cp.hit(P_DIRSYNC_AFTER)


def close(fd: int) -> None:
    """Close ``fd``; a failure to close is ignored (nothing is lost by it: the data was
    synced, or was not promised)."""
    with contextlib.suppress(OSError):
        os.close(fd)


def mkdir(path: str) -> None:
    """Create directory ``path`` (its parent must exist). Durable after :func:`sync_dir`
    of the parent."""
    _call("creating directory", path, os.mkdir, path, 0o700)
    if _tap is not None:
        _tap.made_dir(path)


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
    _call("renaming", src, os.rename, src, dst)
    if _tap is not None:
        _tap.renamed(src, dst)
    cp.hit(P_RENAME_AFTER)


def _remove(path: str, directory: bool) -> None:
    try:
        if directory:
            os.rmdir(path)
        else:
            os.unlink(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _io_error("removing directory" if directory else "unlinking", path, exc) from exc
    if _tap is not None and directory:
        _tap.removed_dir(path)
    elif _tap is not None:
        _tap.unlinked(path)


def unlink(path: str) -> None:
    """Unlink file ``path`` (a missing one is not an error). Durable after :func:`sync_dir`."""
    _remove(path, directory=False)


def rmdir(path: str) -> None:
    """Remove the empty directory ``path`` (a missing one is not an error)."""
    _remove(path, directory=True)


def write_file_atomic(path: str, data: bytes | Iterable[bytes]) -> int:
    """Replace ``path`` with ``data`` (bytes, or chunks written as they come): temp
    file, fsync, rename, fsync the directory. Returns the bytes written. A failure
    part-way leaves ``path`` as it was (and the temp file removed)."""
    tmp = path + TMP_SUFFIX
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
    rename(tmp, path)
    sync_dir(os.path.dirname(path) or ".")
    return offset


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
    fd = _open(path, os.O_RDWR, missing_ok=True)
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


def make_temp_dir(prefix: str, parent: str | None = None) -> str:
    """Create a new directory with a unique name in ``parent`` (the system's temporary
    directory by default); return its path. Not synced: scratch space, never a store."""
    path = _call("creating a directory in", parent or tempfile.gettempdir(), tempfile.mkdtemp,
                 "", prefix, parent)
    if _tap is not None:
        _tap.made_dir(path)
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
    null = _open(os.devnull, os.O_WRONLY)
    try:
        _call("redirecting to", os.devnull, os.dup2, null, fd)
    finally:
        close(null)


def lock(path: str) -> int:
    """Take the exclusive writer lock at ``path``; raise StoreLockedError if held,
    naming the holder where the system says (:func:`lock_holder`).

    The lock is an ``flock`` on an open file description, so it also excludes a
    second writer in the same process, and the kernel releases it when the
    process dies (no stale lock after a crash). Creating the lock file is not
    reported to the tap: its bytes and its entry mean nothing (FORMAT.md §1).
    """
    fd = _open(path, os.O_RDWR | os.O_CREAT, "opening lock file")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        try:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise _io_error("locking", path, exc) from exc
            holder = _holder(fd, path)
            err = StoreLockedError(f"the store at {os.path.dirname(path)!r} is open for "
                                   f"writing by {holder or 'another process'}")
            err.holder = holder
            raise err from exc
        finally:
            os.close(fd)
    return fd


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


def unlock(fd: int) -> None:
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        close(fd)


# -- local sockets (not a store's files: nothing here is synced or reported to the tap) ----
def private_dir(path: str) -> None:
    """Make sure ``path`` is a directory only this user can reach: created with mode 0700
    if missing; an existing one must be a directory itself (no symbolic link), owned by
    this user, with no access for group or others. Errors: ``io``."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise _io_error("creating directory", path, exc) from exc
    st = _call("examining", path, os.lstat, path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise StorageIOError(
            f"{path!r} is not a directory private to this user (it must be a directory, "
            f"not a link, owned by uid {os.getuid()}, mode 0700; it is uid {st.st_uid}, "
            f"mode {stat.filemode(st.st_mode)})")


def listen_unix(path: str, backlog: int) -> socket.socket:
    """A Unix stream socket listening at ``path``, mode 0600. A socket file already at
    ``path`` is replaced: the caller has made sure nobody listens there any more;
    anything else there is refused. Errors: ``io``."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise _io_error("examining", path, exc) from exc
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise StorageIOError(f"{path!r} is in the way of a socket: it is no socket")
        _call("unlinking", path, os.unlink, path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _call("binding", path, sock.bind, path)
        _call("changing the mode of", path, os.chmod, path, 0o600)
        _call("listening at", path, sock.listen, backlog)
        return sock
    except BaseException:
        sock.close()
        raise


def remove_socket(path: str) -> None:
    """Unlink the socket file at ``path``, if there is one (a failure is ignored: the
    next listener replaces what is left)."""
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(path).st_mode):
            os.unlink(path)


class LogFile:
    """A file appended to one record per ``write`` (``O_APPEND``: records of several
    threads or processes never interleave, and each outlives the process once written),
    opened (created if missing) at the first append. Not a store's file: nothing is
    synced or reported to the tap. The operations log, the crash-point trace and the
    crash harness's acknowledgements are kept this way."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self._opening = threading.Lock()

    def append(self, record: bytes) -> None:
        """Append ``record`` (one ``write``)."""
        if self._fd < 0:
            with self._opening:
                if self._fd < 0:
                    self._fd = _open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        _call("appending to", self.path, os.write, self._fd, record)

    def close(self) -> None:
        if self._fd >= 0:
            close(self._fd)
            self._fd = -1


def recorder(path: str) -> Recorder:
    """A tap that records every operation in the operations log at ``path`` (its format:
    :mod:`holomem.log.tap`); install it with :func:`install_tap`."""
    log = LogFile(path)
    return Recorder(log.append, file_id, log.close)


# Set up once, at import, for a process the crash harness or a test started.
if os.environ.get("HOLOMEM_FAULT_LOG", ""):
    install_tap(recorder(os.environ["HOLOMEM_FAULT_LOG"]))
if cp.TRACE:
    cp.trace_to(LogFile(cp.TRACE).append)
