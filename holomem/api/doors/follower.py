"""The store a stdio door serves: as its writer, or as a follower when another process is.

Owns: :class:`Served` — the contract calls of ``holomem mcp`` on its one store. When the
store's writer lock is free the door is the writer. When another process holds it (a
``holomem serve``, another ``holomem mcp``, an agent), the door follows the store
read-only instead of exiting: every read first catches up with the writer's new
transactions (:func:`follow`, which every door that follows a store reads through: once
more when the writer replaced the generation during the read), and a write

- goes to the writer's server when one is configured (``--server URL``): it is sent as
  a contract call through :class:`holomem.client.Client`, then the follower checks that
  the store it reads shows it (so a ``--server`` that serves another store cannot go
  unnoticed);
- or, with no server, goes to the writer through the store's local socket when the
  writer is another ``holomem mcp`` of this user (:mod:`holomem.api.doors.mcp.share`:
  the writer's answer comes back once this follower shows the write);
- or, when no writer answers there, takes the writer lock if it has come free meanwhile
  (the door is the writer from then on), else is refused with ``read_only``, naming the
  process that holds the lock (:func:`holomem.api.engine.lock_holder`) and how to reach it.

The door that is the writer (from the start or by taking over) and has no server opens
the store's socket to the other ``holomem mcp`` processes of its user, and closes it
before the store.

With ``--server`` the door never takes the lock itself: the server is the writer, and a
door holding the lock would lock the server out of its own tenant's store. So the
store must be one of that server's tenant stores, ``DATA/tenants/<tenant>``; the
tenant the writes name is the directory's name (:func:`served_tenant`).

Imports the memory API, the engine's Store, the scope, the store's socket and the file
layer; the client (httpx, the serve extra) only when a server is configured.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from holomem.api.doors.mcp.share import Forwarder, Listener, NotListening, socket_path
from holomem.api.doors.scoping import Scope
from holomem.api.engine import Store, lock_holder
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.memory import Memory
from holomem.errors import (
    ConflictError,
    HolomemError,
    InvalidError,
    ReadOnlyError,
    StoreLockedError,
    UnavailableError,
)

if TYPE_CHECKING:
    from holomem.client import Client

#: Where ``holomem serve`` keeps the tenant stores under its ``--data``.
TENANTS_DIR = "tenants"

T = TypeVar("T")


def writer_or_follower(path: str, key: bytes | None, *, create: bool = True) -> Store:
    """The store at ``path`` opened as its writer (sync="batch": a door's writes are
    many callers'), or read-only, following it, when another process holds the lock.
    ``create``: make the store when ``path`` holds none (else ``not_found``)."""
    try:
        return Store.open(path, key=key, sync="batch", create=create)
    except StoreLockedError:
        return Store.open(path, key=key, read_only=True)


def follow(store: Store, read: Callable[[], T]) -> T:
    """``read()`` on a follower, once ``store`` has caught up with its writer. When the
    read fails ``unavailable`` because the writer replaced the generation meanwhile (a
    compaction or a purge zeroed the files it was reading, and another thread was still
    moving to the new one), the follower catches up again and reads once more: a read
    fails only if the generation is replaced twice in a row under it. An
    ``unavailable`` with no new generation (a model that cannot load) is raised at once.
    Errors: those of ``read()`` and of ``Store.refresh``."""
    store.refresh()  # the writer's transactions since the last read
    generation = store.generation
    try:
        return read()
    except UnavailableError:
        store.refresh()  # waits for a move to a new generation under way
        if store.generation == generation:
            raise
    return read()


def served_tenant(store: str) -> str:
    """The tenant whose store ``store`` is, for a door that forwards writes to a server:
    ``DATA/tenants/<tenant>`` is where ``holomem serve`` keeps it.

    Errors: ``invalid_request`` (a store that is no server's tenant store).
    """
    path = os.path.abspath(store)
    parent, tenant = os.path.split(path)
    if os.path.basename(parent) != TENANTS_DIR or not tenant:
        raise InvalidError(
            f"--server: --data must be a tenant's store of that server, "
            f"SERVER_DATA/{TENANTS_DIR}/<tenant> (holomem serve keeps tenant T's store in "
            f"its --data directory under {TENANTS_DIR}/T), not {store!r}: the writes would "
            f"land in another store than the one this door reads")
    return tenant


class Served:
    """The store a stdio door serves, as its writer or as a follower (see the module doc).

    ``call(op, request, writes)`` is ``Memory.call`` confined to ``scope``; ``writes``:
    whether the call may change the store (reads never go anywhere but the store).
    Calls may run in several threads at once. ``share``: where the store's socket is
    (:func:`~.mcpshare.socket_path`), None when the door shares nothing (``--server``,
    or no sharing here).
    """

    def __init__(self, path: str, memory: Memory, *, key: bytes | None,
                 config: MemoryConfig | None, scope: Scope,
                 client: Client | None = None, server: str | None = None) -> None:
        self.path = path
        self.scope = scope
        self.memory = memory
        self.client = client
        self.server = server  # the URL client talks to
        self._key = key
        self._config = config
        self._mu = threading.Lock()
        self._stores = [memory.store]  # every store opened; closed together at the end
        self.share: str | None = None
        self.forwarder: Forwarder | None = None  # a follower's way to the writer
        self._listener: Listener | None = None  # the writer's socket
        if client is None:
            try:
                self.share = socket_path(path)
            except HolomemError as exc:
                print(f"holomem mcp: {path} is not shared with other holomem mcp "
                      f"processes: {exc.message}", file=sys.stderr)
        if self.share is not None and memory.store.read_only:
            self.forwarder = Forwarder(self.share, memory.store)
        elif self.share is not None:
            self._listen(memory)

    @classmethod
    def open(cls, path: str, *, key: bytes | None = None, config: MemoryConfig | None = None,
             scope: Scope | None = None, client: Client | None = None,
             server: str | None = None) -> Served:
        """The writer of the store at ``path`` (created if missing), or its follower when
        another process is the writer; with ``client`` (of the server at ``server``, whose
        tenant store ``path`` is: :func:`served_tenant`), always a follower that forwards writes
        there (the store must exist: the server creates it with its first write).
        The Served owns ``client`` from then on (and closes it).

        Errors: what opening the store raises (``not_found``, ``key.*``, ``corrupt`` ...).
        """
        try:
            if client is not None:
                store = Store.open(path, key=key, read_only=True)
            else:
                store = writer_or_follower(path, key)
        except BaseException:
            if client is not None:
                client.close()
            raise
        try:
            memory = Memory(store, initial=config)  # the store's configuration, if it has one
        except BaseException:
            store.close()
            if client is not None:
                client.close()
            raise
        return cls(path, memory, key=key, config=config, scope=scope or Scope(),
                   client=client, server=server)

    @property
    def following(self) -> bool:
        return self.memory.store.read_only

    def describe(self) -> str:
        """One line for the operator: whose store this is, and where writes go."""
        if not self.following:
            return f"holomem mcp: serving {self.path} as its writer"
        if self.server is not None:
            return (f"holomem mcp: following {self.path} read-only; writes go to the "
                    f"server at {self.server}")
        writer = None if self.forwarder is None else self.forwarder.writer()
        if writer is not None:
            return (f"holomem mcp: {self.path} is written by holomem mcp process {writer}; "
                    "following it read-only: reads are answered here, writes go to that "
                    f"process through {self.share}")
        return (f"holomem mcp: {self.path} is open for writing by {lock_holder(self.path)}; "
                "following it read-only: reads are answered, writes are refused until the "
                "writer lets go (or give --server URL to send them to a holomem serve)")

    def call(self, op: str, request: Any, writes: bool) -> dict[str, Any]:
        """``Memory.call(op, request)`` confined to the scope. Errors: those of
        ``Memory.call``; ``read_only`` (a write while another process is the writer and
        no server is configured); ``unavailable`` (the server cannot be reached);
        ``conflict`` (the server took a write that this store does not show)."""
        memory = self.memory
        if not memory.store.read_only:
            return self.scope.call(memory, op, request)
        if not writes:
            return follow(memory.store, lambda: self.scope.call(memory, op, request))
        if self.client is not None:
            return self._forward(op, request)
        shared = self._through_writer(op, request)
        if shared is not None:
            return shared
        writer = self._take_over()
        if writer is None:
            # Another follower may have taken over (and shared the store) meanwhile.
            shared = self._through_writer(op, request)
            if shared is not None:
                return shared
            raise ReadOnlyError(
                f"this MCP server only reads {self.path}: {lock_holder(self.path)} is its "
                "writer, so writes go there. If that is holomem serve, start holomem mcp "
                "with --server URL of it (and --api-key-file F) to forward them; or stop "
                "that process and write again")
        return self.scope.call(writer, op, request)

    def _through_writer(self, op: str, request: Any) -> dict[str, Any] | None:
        """The call, run by the writer through its socket; None if no writer answers
        there (nothing was sent)."""
        if self.forwarder is None:
            return None
        try:
            # As with the client: the tools' writes are confined by rewriting the
            # request, so the scope only uses `call`.
            return self.scope.call(cast(Memory, self.forwarder), op, request)
        except NotListening:
            return None

    def _listen(self, memory: Memory) -> None:
        """Open the store's socket to this user's other holomem mcp processes."""
        assert self.share is not None
        try:
            self._listener = Listener(self.share, memory)
        except HolomemError as exc:
            print(f"holomem mcp: {self.path} is not shared with other holomem mcp "
                  f"processes: {exc.message}", file=sys.stderr)

    def _take_over(self) -> Memory | None:
        """Become the writer if the lock has come free; the writer's Memory, or None."""
        with self._mu:
            if not self.memory.store.read_only:
                return self.memory
            try:
                store = Store.open(self.path, key=self._key, sync="batch")
            except StoreLockedError:
                return None
            try:
                memory = Memory(store, initial=self._config)
            except BaseException:
                store.close()
                raise
            # The follower stays open (a call in another thread may still read it).
            self._stores.append(store)
            self.memory = memory
            print(f"holomem mcp: the writer of {self.path} let go; writing it from now on",
                  file=sys.stderr)
            if self.share is not None:
                self._listen(memory)
            return memory

    def _forward(self, op: str, request: Any) -> dict[str, Any]:
        assert self.client is not None
        # The scope uses only `call` here (remember and forget are confined by rewriting
        # the request), which the client has with Memory's meaning.
        response = self.scope.call(cast(Memory, self.client), op, request)
        self._confirm(op, response)
        return response

    def _confirm(self, op: str, response: Mapping[str, Any]) -> None:
        """Check that the store this door reads shows the write the server took."""
        memory = self.memory
        memory.store.refresh()
        if op == "remember":
            wrote = [r["id"] for r in response.get("remembered", [])]
            missing = [i for i in wrote if memory.get(i) is None]
        elif op == "forget" and not response.get("dryRun"):
            missing = [i for i in response.get("removed", []) if memory.get(i) is not None]
        else:
            return
        if missing:
            raise ConflictError(
                f"the server at {self.server} took the {op} (ids {missing[:5]}), but the "
                f"store this MCP server reads, {self.path}, does not show it: that server "
                "keeps this tenant's store elsewhere. Give --data the tenant's store of "
                "that server (its --data directory, tenants/<tenant>), or another --server")

    def close(self) -> None:
        if self._listener is not None:  # before the store: no call reaches a closed one
            self._listener.close()
        for store in self._stores:
            store.close()
        if self.client is not None:
            self.client.close()
