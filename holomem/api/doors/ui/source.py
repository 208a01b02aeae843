"""The stores the inspector's pages read: one store (``holomem ui``) or a server's tenants.

Owns: :class:`Source` — what a page may ask of a store: a contract call
(``Memory.call``), the store's statistics, and a check (``python -m holomem.fsck``, a
child process, as ``holomem fsck`` runs it: the checker reads the log beneath the memory
API, which no door imports; an encrypted store's key handed to it as a file, a temporary
copy erased after it unless the key file is a regular file to read again) with its last
result; :class:`OneStore`, a store opened as
its writer or, while another process writes it (or with ``--read-only``), as a follower
that catches up before every read (and once more when the writer replaced the generation
during one: :func:`~holomem.api.doors.follower.follow`); :class:`Tenants`, a ``holomem
serve`` tenant pool. Imports the engine's Store, the memory API, the follower doors' way
of reading, the HTTP door's tenant pool (its type only) and the file layer.
"""

from __future__ import annotations

import abc
import json
import os
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

from holomem.api.doors.follower import follow, writer_or_follower
from holomem.api.engine import Store, StoreStats, lock_holder
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.memory import Memory
from holomem.errors import InvalidError, ReadOnlyError
from holomem.log import fs

if TYPE_CHECKING:
    from holomem.api.doors.http.tenants import TenantPool

#: How long one check may run before it is stopped (seconds).
FSCK_TIMEOUT = 300.0
#: The most bytes of a check's report kept.
FSCK_OUTPUT = 1 << 20


class Source(abc.ABC):
    """What the pages read (see the module doc). ``tenant`` is None for one store."""

    #: whether a tenant names the store (``holomem serve``)
    tenants = False
    #: whether every write is refused (``--read-only``)
    read_only = False

    def __init__(self) -> None:
        self._checks: dict[str, dict[str, Any]] = {}
        self._checking = threading.Lock()

    @abc.abstractmethod
    def call(self, tenant: str | None, op: str, request: dict[str, Any], *,
             writes: bool = False) -> dict[str, Any]:
        """``Memory.call(op, request)`` on the tenant's store (``writes``: the op writes)."""

    @abc.abstractmethod
    def stats(self, tenant: str | None) -> StoreStats | None:
        """The store's statistics; None for a tenant that has no store yet."""

    @abc.abstractmethod
    def where(self, tenant: str | None) -> str | None:
        """The store's directory (None: it has none on this machine)."""

    @abc.abstractmethod
    def role(self, tenant: str | None) -> str:
        """``writer`` or ``follower`` (read-only; another process writes)."""

    def writes(self, tenant: str | None) -> bool:
        """Whether a forget could run here now: not ``--read-only``, and the writer."""
        return not self.read_only and self.role(tenant) == "writer"

    def key_file(self) -> tuple[str | None, bool]:
        """A file holding the store's key for the checker, and whether it is a temporary
        copy (:func:`_key_copy`) to erase afterwards."""
        return None, False

    def last_check(self, tenant: str | None) -> dict[str, Any] | None:
        """The result of the last check run from these pages, or None."""
        return self._checks.get(tenant or "")

    def check(self, tenant: str | None) -> dict[str, Any]:
        """Run ``python -m holomem.fsck STORE --json`` (read-only) and keep its result.
        One check at a time per process; at most :data:`FSCK_TIMEOUT` seconds.

        Errors: ``invalid_request`` (no store on disk, or a check already running)."""
        path = self.where(tenant)
        if path is None:
            raise InvalidError("this store has no directory on this machine to check")
        if not self._checking.acquire(blocking=False):
            raise InvalidError("a check is running already; reload the page in a while")
        try:
            key, temporary = self.key_file()
            argv = [sys.executable, "-m", "holomem.fsck", path, "--json"]
            if key is not None:
                argv += ["--key-file", key]
            begun = time.time()
            try:
                done = subprocess.run(argv, capture_output=True, timeout=FSCK_TIMEOUT,
                                      check=False)
                status, out = done.returncode, done.stdout[:FSCK_OUTPUT]
                err = done.stderr[:4096].decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                status, out, err = 8, b"", f"stopped after {FSCK_TIMEOUT:g} s"
            finally:
                if temporary and key is not None:
                    fs.erase_tree(os.path.dirname(key))  # the key's bytes zeroed, then gone
            try:
                report = json.loads(out) if out else None
            except ValueError:
                report = None
            result = {"time": int(begun * 1000), "seconds": round(time.time() - begun, 2),
                      "exit": status, "report": report, "stderr": err}
            self._checks[tenant or ""] = result
            return result
        finally:
            self._checking.release()

    def close(self) -> None:  # noqa: B027 (a hook: nothing by default)
        """Close what the source opened."""


class OneStore(Source):
    """One store: its writer when the lock is free (and not ``read_only``), else a
    follower of the process that writes it."""

    def __init__(self, path: str, *, key: bytes | None = None, key_path: str | None = None,
                 config: MemoryConfig | None = None, read_only: bool = False) -> None:
        super().__init__()
        self.path = os.path.abspath(path)
        self.read_only = read_only
        self._key = key
        self._key_path = key_path
        # An inspector never creates a store (docs/cli.md Conventions): a path with
        # none is not_found, and nothing is made there.
        store = (Store.open(path, key=key, read_only=True) if read_only
                 else writer_or_follower(path, key, create=False))
        try:
            self.memory = Memory(store, initial=config)
        except BaseException:
            store.close()
            raise

    def describe(self) -> str:
        """One line for the operator: which store, and as what."""
        if not self.memory.store.read_only:
            return f"serving {self.path} as its writer"
        if self.read_only:
            return f"serving {self.path} read-only (--read-only)"
        return (f"following {self.path} read-only: {lock_holder(self.path)} writes it; "
                "forgetting is refused until it lets go")

    def call(self, tenant: str | None, op: str, request: dict[str, Any], *,
             writes: bool = False) -> dict[str, Any]:
        store = self.memory.store
        if store.read_only:
            if writes:
                raise ReadOnlyError(
                    "this inspector only reads the store: "
                    + ("it was started with --read-only" if self.read_only else
                       f"{lock_holder(self.path)} is its writer; stop that process (or "
                       "send the change to it) and try again"))
            return follow(store, lambda: self.memory.call(op, request))
        return self.memory.call(op, request)

    def stats(self, tenant: str | None) -> StoreStats | None:
        return self.memory.store.stats()

    def where(self, tenant: str | None) -> str | None:
        return self.path

    def role(self, tenant: str | None) -> str:
        return "follower" if self.memory.store.read_only else "writer"

    def key_file(self) -> tuple[str | None, bool]:
        """The key file the store was opened with when it is a regular file; else (a
        pipe, ``--key-file <(cmd)``, read once and drained at the open) a temporary
        copy of the key."""
        if self._key is None:
            return None, False
        if self._key_path is not None and os.path.isfile(self._key_path):
            return self._key_path, False
        return _key_copy(self._key), True

    def close(self) -> None:
        self.memory.store.close()


class Tenants(Source):
    """The tenants of a ``holomem serve``: each call runs on the tenant's store in the
    server's pool (a read of a tenant with no store answers as an empty store)."""

    tenants = True

    def __init__(self, pool: TenantPool) -> None:
        super().__init__()
        self.pool = pool

    def call(self, tenant: str | None, op: str, request: dict[str, Any], *,
             writes: bool = False) -> dict[str, Any]:
        name = tenant or "default"
        result: dict[str, Any] = self.pool.call(
            name, lambda t: t.memory.memory.call(op, request), writes=writes)
        return result

    def stats(self, tenant: str | None) -> StoreStats | None:
        name = tenant or "default"
        if not self.pool.has_store(name):
            return None
        stats: StoreStats = self.pool.call(name, lambda t: t.store.stats(), writes=False)
        return stats

    def where(self, tenant: str | None) -> str | None:
        name = tenant or "default"
        if self.pool.journal is not None or not self.pool.has_store(name):
            return None
        return os.path.join(self.pool.root, name)

    def role(self, tenant: str | None) -> str:
        name = tenant or "default"
        following: bool = self.pool.call(name, lambda t: t.following, writes=False)
        return "follower" if following else "writer"

    def key_file(self) -> tuple[str | None, bool]:
        if self.pool.key is None:
            return None, False
        return _key_copy(self.pool.key), True


def _key_copy(key: bytes) -> str:
    """A temporary copy of ``key`` for the checker's child process: a file only this
    user may read or write (0600) in a new directory only this user may enter (0700).
    :meth:`Source.check` erases the directory (the key's bytes zeroed first)."""
    scratch = fs.make_temp_dir("holomem-ui-key-")
    path = os.path.join(scratch, "key")
    try:
        fs.write_file_atomic(path, key)
    except BaseException:
        fs.erase_tree(scratch)
        raise
    return path
