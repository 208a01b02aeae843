"""Opening a store for a CLI command, and the exit statuses (docs/cli.md "Exit status").

Owns: the statuses, the ``Failure`` that ends a command with one, the files options name
(an encryption key, a MemoryConfig), and ``memory_of``: a Memory over the command's
store, a follower for reads.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

from holomem.api.engine import Store
from holomem.api.memory import checks
from holomem.api.memory.config import MemoryConfig, config_from_json
from holomem.api.memory.memory import Memory
from holomem.errors import (
    ConflictError,
    HolomemError,
    InvalidError,
    NotFoundError,
    StoreLockedError,
)
from holomem.log import fs

#: The exit statuses (docs/cli.md "Exit status"); argparse's own usage errors exit 2 too.
EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3


class Failure(Exception):
    """Ends a command: the message goes to stderr, ``status`` is the exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def exit_status(exc: HolomemError) -> int:
    """The exit status of an error a memory call raised on an open store."""
    if isinstance(exc, InvalidError):  # invalid_request and limit
        return EXIT_USAGE
    if isinstance(exc, (NotFoundError, ConflictError)):
        return EXIT_NOT_FOUND
    return EXIT_STORE  # damage, I/O, a closed store: the store cannot be used


# -- opening a store -------------------------------------------------------------------------
def option_file(path: str, option: str) -> bytes:
    """The bytes of a file named by an option: one that cannot be read is bad usage."""
    try:
        return fs.read_file(path)
    except HolomemError as exc:
        raise Failure(EXIT_USAGE, f"{option} {path}: {exc.message}") from exc


def store_key(args: argparse.Namespace) -> bytes | None:
    path = getattr(args, "key_file", None)
    return option_file(path, "--key-file") if path else None


def config_file(path: str | None, option: str = "--config") -> MemoryConfig | None:
    if not path:
        return None
    try:
        return checks.memory_config(config_from_json(option_file(path, option)))
    except InvalidError as exc:
        raise Failure(EXIT_USAGE, f"{option} {path}: {exc.message}") from exc


@contextlib.contextmanager
def memory_of(args: argparse.Namespace, *, write: bool = False, create: bool = False,
            config: MemoryConfig | None = None, persist: bool = False) -> Iterator[Memory]:
    """A Memory over ``args.store``, closed afterwards. Reads open a follower, so they
    work while a server, an MCP client or an agent holds the store's writer lock.

    The store's own configuration applies (docs/contract.md §4c); ``config`` (from
    ``--config``) must be the store's, or seeds a store that has none.
    """
    key = store_key(args)
    try:
        store = Store.open(args.store, key=key, create=create, read_only=not write)
    except StoreLockedError as exc:  # the message names the writer, where the system says
        raise Failure(EXIT_STORE, f"{exc.code}: {exc.message}. Reads work meanwhile (they "
                      "follow it); send the write to that process (holomem serve takes "
                      "it over HTTP), or stop it and run this again") from exc
    except HolomemError as exc:
        raise Failure(EXIT_STORE, f"{exc.code}: {exc.message}") from exc
    except OSError as exc:
        raise Failure(EXIT_STORE, f"{args.store}: {exc}") from exc
    try:
        try:
            memory = Memory(store, config, persist=persist)
        except (InvalidError, ConflictError) as exc:
            # A configuration the store refuses (or cannot apply: custom policies).
            raise Failure(EXIT_USAGE, f"{exc.code}: {exc.message} (holomem config "
                           f"{args.store} shows the recorded one, --set records another)"
                           ) from exc
        except HolomemError as exc:
            raise Failure(EXIT_STORE, f"{exc.code}: {exc.message}") from exc
        yield memory
    finally:
        store.close()
