"""A local socket's file, and the private directory it is in.

Owns: making sure a directory is private to this user (:func:`private_dir`), listening
on a Unix socket at mode 0600 (:func:`listen_unix`) and removing its file
(:func:`remove_socket`). Not a store's files: nothing here is synced or reported to the
tap. Imports the standard library, :mod:`holomem.errors` and
:mod:`holomem.log.fs.base`.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat

from holomem.errors import StorageIOError
from holomem.log.fs.base import call, io_error


def private_dir(path: str) -> None:
    """Make sure ``path`` is a directory only this user can reach: created with mode 0700
    if missing; an existing one must be a directory itself (no symbolic link), owned by
    this user, with no access for group or others. Errors: ``io``."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise io_error("creating directory", path, exc) from exc
    st = call("examining", path, os.lstat, path)
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
        raise io_error("examining", path, exc) from exc
    else:
        if not stat.S_ISSOCK(st.st_mode):
            raise StorageIOError(f"{path!r} is in the way of a socket: it is no socket")
        call("unlinking", path, os.unlink, path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        call("binding", path, sock.bind, path)
        call("changing the mode of", path, os.chmod, path, 0o600)
        call("listening at", path, sock.listen, backlog)
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
