"""Opening a store for a CLI command, and the exit statuses (docs/cli.md "Exit status").

Owns: the statuses, the ``Failure`` that ends a command with one, the files options name
(an encryption key, an API key, a MemoryConfig) for every command and server, and
``memory_of``: a Memory over the command's store, a follower for reads.
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


def key_file(path: str, option: str = "--key-file") -> bytes:
    """The store key in the file an option names: exactly 32 raw bytes, read without
    reading more whatever the file's size (a file that cannot be read, or holds another
    length, is bad usage; the message says so when a newline follows the key)."""
    try:
        return fs.read_key_file(path)
    except HolomemError as exc:
        raise Failure(EXIT_USAGE, f"{option} {path}: {exc.message}") from exc


#: The most bytes an API key file may hold (a key is one line of text; more is a mistake).
MAX_API_KEY_BYTES = 4096


def api_key_file(path: str, option: str = "--api-key-file") -> str:
    """The API key in the file an option names: its UTF-8 text, without the whitespace
    around it (a trailing newline is no part of it), reading no more than
    :data:`MAX_API_KEY_BYTES` + 1 bytes. One that cannot be read, is longer, is not
    UTF-8 or is empty is bad usage: an empty key must never mean "no key"."""
    try:
        raw = fs.read_start(path, MAX_API_KEY_BYTES + 1)
    except HolomemError as exc:
        raise Failure(EXIT_USAGE, f"{option} {path}: {exc.message}") from exc
    if len(raw) > MAX_API_KEY_BYTES:
        raise Failure(EXIT_USAGE, f"{option} {path} holds more than {MAX_API_KEY_BYTES} "
                      "bytes: an API key file holds one key")
    try:
        key = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise Failure(EXIT_USAGE, f"{option} {path} is not UTF-8 text") from exc
    if not key:
        raise Failure(EXIT_USAGE, f"{option} {path} is empty")
    return key


def store_key(args: argparse.Namespace) -> bytes | None:
    path = getattr(args, "key_file", None)
    return key_file(path) if path else None


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
        except ConflictError as exc:
            # A configuration other than the store's.
            raise Failure(EXIT_USAGE, f"{exc.code}: {exc.message} (holomem config "
                           f"{args.store} shows the recorded one, --set records another)"
                           ) from exc
        except InvalidError as exc:
            # A configuration the store refuses or cannot apply (custom policies); a
            # recorded one it refuses is shown in the message (holomem config would
            # refuse it too).
            raise Failure(EXIT_USAGE, f"{exc.code}: {exc.message}") from exc
        except HolomemError as exc:
            raise Failure(EXIT_STORE, f"{exc.code}: {exc.message}") from exc
        yield memory
    finally:
        store.close()
