"""What every operation of the file layer shares: the tap it reports to, and its errors.

Owns: the tap installed for the whole process (:func:`install_tap`; every operation
that changes the disk tells :data:`current` once it succeeded) and the one way an
``OSError`` becomes the file layer's :class:`~holomem.errors.StorageIOError`
(:func:`io_error`, :func:`call`, :func:`open_fd`). Imports the standard library,
:mod:`holomem.errors` and the :class:`~holomem.log.tap.Tap` protocol.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from holomem.errors import StorageIOError
from holomem.log.tap import Tap

T = TypeVar("T")
#: The tap told of every operation that changes the disk (None: nobody listens).
current: Tap | None = None


def install_tap(tap: Tap | None) -> Tap | None:
    """Report every later operation that changes the disk to ``tap`` (None: to nobody);
    return the tap installed before. One tap at a time, for the whole process."""
    global current
    previous, current = current, tap
    return previous


def io_error(what: str, path: str, exc: OSError) -> StorageIOError:
    return StorageIOError(f"{what} {path!r} failed: {exc.strerror or exc}")


def call(what: str, path: str, fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, an ``OSError`` turned into the file layer's error."""
    try:
        return fn(*args)
    except OSError as exc:
        raise io_error(what, path, exc) from exc


def open_fd(path: str, flags: int, what: str = "opening", missing_ok: bool = False) -> int:
    """``os.open`` with the file layer's errors; -1 for a missing file if ``missing_ok``."""
    try:
        return os.open(path, flags | os.O_CLOEXEC, 0o600)
    except FileNotFoundError as exc:
        if missing_ok:
            return -1
        raise io_error(what, path, exc) from exc
    except OSError as exc:
        raise io_error(what, path, exc) from exc
