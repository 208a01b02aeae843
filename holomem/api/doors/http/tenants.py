"""The HTTP server's tenants: one isolated store per tenant id, opened on demand.

Owns: tenant ids (what a ``X-Tenant-ID`` may be, so no path can escape), and
:class:`TenantPool` — open stores, least recently used first, idle ones closed
beyond a bound; the bound on the stores that exist; the empty tenant that answers
reads of a tenant with no store, so that only a write creates one; the
followers that answer reads of a store another process writes (a write there is
``locked``, naming that process), as ``holomem mcp`` and the CLI do; and what the
tenants' stores did, for the metrics (:meth:`TenantPool.counted`: the open ones'
counters, and the totals of those it closed). Imports the engine, the memory API
and the file layer.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from holomem.api.engine import Store, StoreCounters
from holomem.api.memory.aio import AsyncMemory
from holomem.api.memory.aiowait import DurableWaits
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.memory import Memory
from holomem.errors import (
    InvalidError,
    LimitError,
    NotFoundError,
    StoreLockedError,
    UnavailableError,
)
from holomem.log import fs

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
T = TypeVar("T")

DEFAULT_TENANT = "default"
#: The request header that names a tenant (docs/http.md "Tenants").
TENANT_HEADER = b"x-tenant-id"
#: Tenant stores a server lets exist (``--max-tenant-stores``), by default.
MAX_TENANT_STORES = 1000
#: The HTTP status of a new tenant past that bound: the server has no room to store it.
NO_ROOM_STATUS = 507


def requested_tenant(headers: Iterable[tuple[bytes, bytes]]) -> str:
    """The tenant a request names: the first ``X-Tenant-ID`` of its raw (ASGI) headers,
    else :data:`DEFAULT_TENANT` — the one place any route, the access log or ``/mcp``
    reads it. A name is checked where it is used (:func:`valid_tenant`)."""
    for name, value in headers:
        if name == TENANT_HEADER:
            return value.decode("latin-1")
    return DEFAULT_TENANT


def valid_tenant(tenant: str) -> bool:
    """Whether ``tenant`` may name a tenant (and so a directory under ``DATA/tenants``)."""
    return bool(TENANT_RE.fullmatch(tenant)) and ".." not in tenant  # ($ takes a "\n")


class Tenant:
    """An open tenant: its store, its memory, and how many requests use it."""

    def __init__(self, store: Store, memory: AsyncMemory) -> None:
        self.store = store
        self.memory = memory
        self.users = 0
        #: the event loop's waits for this store's writes to be durable (made by the
        #: first request that needs them; see :mod:`holomem.api.memory.aiowait`)
        self.durable: DurableWaits | None = None

    @property
    def following(self) -> bool:
        """A tenant whose store another process writes: this one serves its reads."""
        return self.store.read_only


def stream_address(journal: str, tenant: str) -> str:
    """The ``nats://`` store of ``tenant`` under the server's ``--journal`` address: the
    address's store name, ``-``, and the tenant id (``_`` written ``__``, ``.`` written
    ``_d``, so that no two tenants share a stream)."""
    base, _, query = journal.partition("?")
    name = tenant.replace("_", "__").replace(".", "_d")
    return f"{base.rstrip('/')}-{name}" + (f"?{query}" if query else "")


class Counted(NamedTuple):
    """What the pool's tenant stores did and hold (:meth:`TenantPool.counted`)."""

    #: the counters of each open tenant store
    open: tuple[StoreCounters, ...]
    #: the acknowledged writes and journal fsyncs of the tenant stores closed since
    #: the pool started (added to the open ones', they give totals that only grow)
    closed_writes: int
    closed_fsyncs: int
    #: the tenant stores that exist, and the pool's two bounds
    stores: int
    max_open: int
    max_stores: int


class TenantPool:
    """Open tenant stores, least recently used first; closes idle ones beyond the bound.

    ``max_open`` bounds the stores open at once, ``max_stores`` the stores that exist
    (counted when the pool starts, from the directories under ``DATA/tenants``): a new
    tenant past it is ``limit`` (HTTP :data:`NO_ROOM_STATUS`), and every existing one
    keeps working.
    """

    def __init__(self, data_dir: str, *, key: bytes | None, config: MemoryConfig,
                 max_open: int, executor: concurrent.futures.Executor | None = None,
                 max_stores: int = MAX_TENANT_STORES, journal: str | None = None) -> None:
        self.root = os.path.join(os.path.abspath(data_dir), "tenants")
        #: ``nats://HOST:PORT/PREFIX``: every tenant's journal is a stream (docs/scale-out.md)
        self.journal = journal
        self.key = key
        self.config = config
        self.max_open = max_open
        self.max_stores = max_stores
        self.executor = executor  # where the tenants' AsyncMemory calls run
        self._open: OrderedDict[str, Tenant] = OrderedDict()
        self._mu = threading.Lock()
        self._closed = False
        #: The tenants known to have a store: those found at start, and those opened since.
        self._stores = set() if journal else {
            name for _, dirs, _ in self._listing() for name in dirs if valid_tenant(name)}
        self._empty: Tenant | None = None
        self._scratch: str | None = None
        #: the acknowledged writes and fsyncs of the tenant stores closed so far
        self._closed_writes = 0
        self._closed_fsyncs = 0

    def _listing(self) -> list[tuple[str, list[str], list[str]]]:
        walk = fs.walk(self.root)
        top = next(walk, None)  # nothing when DATA/tenants does not exist yet
        return [top] if top is not None else []

    def acquire(self, tenant: str, *, create: bool = True) -> Tenant:
        """The tenant's open store, opened if need be; ``release`` it.

        A tenant with no store yet gets one when ``create`` (a write); otherwise (a
        read) the empty tenant answers, exactly as a new store would, and nothing is
        created. A read of a store another process writes is answered by a follower of
        it, caught up first (:meth:`_follow_up`). Errors: ``invalid_request`` (a bad
        tenant id), ``limit`` (a new store past ``max_stores``; status
        :data:`NO_ROOM_STATUS`), ``locked`` (a write while another process is the
        store's writer, naming it), ``unavailable`` (shutting down), and what opening
        raises.
        """
        if not valid_tenant(tenant):
            raise InvalidError("X-Tenant-ID must be 1-64 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
        with self._mu:
            if self._closed:
                raise UnavailableError("the server is shutting down")
            t = self._open.get(tenant)
            if t is not None and t.following:
                t = self._follow_up(tenant, t, create)
            if t is None:
                t = self._open_or_create(tenant, create)
                if t is None:
                    t = self._empty_tenant()
                    t.users += 1
                    return t
            self._open.move_to_end(tenant)
            t.users += 1
            # (stores opened while every open one was busy went over the bound: the
            # idle ones beyond it are closed here, as releases on the loop do not)
            self._evict()
            return t

    def try_acquire(self, tenant: str) -> Tenant | None:
        """The tenant's store if it is open and this server writes it locally, without
        ever waiting (for the event loop); ``release`` it. None when it is not open, is
        a stream's (``--journal``) or followed, or another thread holds the pool at the
        moment (it may be opening a store): then :meth:`acquire` it in a worker."""
        if self.journal is not None or not self._mu.acquire(blocking=False):
            return None
        try:
            t = self._open.get(tenant)
            if self._closed or t is None or t.following:
                return None
            self._open.move_to_end(tenant)
            t.users += 1
            return t
        finally:
            self._mu.release()

    def _follow_up(self, tenant: str, t: Tenant, write: bool) -> Tenant | None:
        """A followed tenant before a request: caught up for a read. For a write, its
        writer may have let go (the process ended, or a stream writer's lease ran out):
        then this server becomes the writer (None: the caller opens it); else
        ``locked``, naming the holder (HTTP 423)."""
        t.store.refresh()
        if not write:
            return t
        where = (os.path.join(self.root, tenant) if self.journal is None
                 else stream_address(self.journal, tenant))
        probe = Store.open(where, key=self.key, sync="batch")  # locked while held elsewhere
        probe.close()  # it is free: give it back and open the tenant as its writer
        if t.users == 0:
            self._close_tenant(self._open.pop(tenant))
            return None
        raise StoreLockedError(f"tenant {tenant!r} is changing writers; try again")

    def _open_stream(self, tenant: str, create: bool) -> Tenant | None:
        """Open a stream tenant (:meth:`_open_writer_or_follower`); None: no such store."""
        assert self.journal is not None
        url = stream_address(self.journal, tenant)
        self._evict(room=1)
        t = self._open_writer_or_follower(url, create)
        if t is None:
            return None
        self._stores.add(tenant)
        self._open[tenant] = t
        return t

    def _open_or_create(self, tenant: str, create: bool) -> Tenant | None:
        """Open ``tenant``'s store (creating it when ``create``); None: it has none."""
        if self.journal is not None:
            return self._open_stream(tenant, create)
        path = os.path.join(self.root, tenant)
        # Known, or made meanwhile by another process (or by hand: a restored store).
        if tenant in self._stores or next(fs.walk(path), None) is not None:
            self._evict(room=1)
            t = self._open_writer_or_follower(path, create)
            if t is None:
                return None  # a directory that holds no store (yet)
        else:
            if not create:
                return None
            self._check_room(tenant)
            self._evict(room=1)
            fs.make_dirs(self.root)  # DATA/tenants and any new parent, synced
            t = self._open_tenant(path, create=True)
        self._stores.add(tenant)
        self._open[tenant] = t
        return t

    def _open_writer_or_follower(self, where: str, create: bool) -> Tenant | None:
        """The store at ``where`` (a directory, or a stream's address) as its writer;
        for a read (not ``create``) while another process is its writer, as a follower
        of it (reads only: :meth:`_follow_up`). None: a read of a store that does not
        exist. Errors: ``locked`` (a write, naming the writer), and what opening
        raises."""
        try:
            return self._open_tenant(where, create=create)
        except StoreLockedError:
            if create:
                raise
            try:
                return self._tenant(Store.open(where, key=self.key, read_only=True))
            except NotFoundError:
                return None
        except NotFoundError:
            if create:
                raise
            return None

    def _open_tenant(self, path: str, *, create: bool) -> Tenant:
        return self._tenant(Store.open(path, key=self.key, sync="batch", create=create))

    def _tenant(self, store: Store) -> Tenant:
        """The tenant served by ``store``, under the store's own configuration (the
        server's for a new tenant); ``store`` is closed if that fails."""
        try:
            memory = Memory(store, initial=self.config)
            return Tenant(store, AsyncMemory(memory, executor=self.executor))
        except BaseException:
            store.close()  # or the store stays locked by a handle nobody holds
            raise

    def _empty_tenant(self) -> Tenant:
        """The tenant that answers reads of tenants with no store: a read-only store that
        holds nothing, under the configuration a new tenant would record. It lives in a
        scratch directory outside ``DATA`` (removed on close), made on first need."""
        if self._empty is None:
            scratch = fs.make_temp_dir("holomem-empty-tenant-")
            try:
                path = os.path.join(scratch, "store")
                Store.open(path).close()  # an empty store: its first generation
                store = Store.open(path, read_only=True)
                try:
                    memory = Memory(store, initial=self.config)
                except BaseException:
                    store.close()
                    raise
            except BaseException:
                fs.remove_tree(scratch)
                raise
            self._scratch = scratch
            self._empty = Tenant(store, AsyncMemory(memory, executor=self.executor))
        return self._empty

    def release(self, t: Tenant, *, evict: bool = True) -> None:
        """Done with ``t``. ``evict=False`` (on the event loop): close nothing now; the
        next ``acquire`` closes what is over the bound."""
        with self._mu:
            t.users -= 1
            if evict:
                self._evict()

    def release_nowait(self, t: Tenant) -> None:
        """``release(t, evict=False)`` that never waits for the pool (for the event
        loop): while another thread holds it, a worker releases ``t``."""
        if self._mu.acquire(blocking=False):
            try:
                t.users -= 1
            finally:
                self._mu.release()
        elif self.executor is not None:
            self.executor.submit(self.release, t, evict=False)
        else:
            self.release(t, evict=False)

    def _evict(self, room: int = 0) -> None:
        """Close idle stores until ``room`` more fit under the bound. When every open
        store is in use the pool goes over it for now; the next :meth:`acquire` or
        :meth:`release` that may close stores brings it back under."""
        while len(self._open) + room > self.max_open:
            idle = next((name for name, t in self._open.items() if t.users == 0), None)
            if idle is None:
                return  # every open store is busy: go over the bound for now
            self._close_tenant(self._open.pop(idle))

    def _close_tenant(self, t: Tenant) -> None:
        """Close an open tenant's store (under the lock), keeping what it counted."""
        try:
            t.store.close()
        finally:
            last = t.store.counters()
            self._closed_writes += last.acknowledged_writes
            self._closed_fsyncs += last.fsyncs

    def close(self) -> None:
        with self._mu:
            self._closed = True
            for t in self._open.values():
                self._close_tenant(t)
            self._open.clear()
            if self._empty is not None:
                self._empty.store.close()
                self._empty = None
            if self._scratch is not None:
                fs.remove_tree(self._scratch)
                self._scratch = None

    def _check_room(self, tenant: str) -> None:
        """``limit`` (status :data:`NO_ROOM_STATUS`) when a new store for ``tenant`` would
        pass ``max_stores`` (under the lock)."""
        if len(self._stores) >= self.max_stores:
            err = LimitError(
                f"this server holds {len(self._stores)} tenant stores, its bound "
                f"(--max-tenant-stores {self.max_stores}): no store is created for "
                f"tenant {tenant!r}; the existing tenants are served as before")
            err.status = NO_ROOM_STATUS
            raise err

    def call(self, tenant: str, work: Callable[[Tenant], T], *, writes: bool,
             evict: bool = True) -> T:
        """``work`` on ``tenant``, acquired for it and released after. A write
        (``writes``) runs first on a throwaway empty store when the tenant has none yet
        (:meth:`rehearse`), so that a write refused creates no tenant; only a write
        creates one. Raises what ``work`` and :meth:`acquire` raise."""
        if writes:
            self.rehearse(tenant, lambda store, memory: work(Tenant(store, AsyncMemory(memory))))
        t = self.acquire(tenant, create=writes)
        try:
            return work(t)
        finally:
            self.release(t, evict=evict)

    def rehearse(self, tenant: str, work: Callable[[Store, Memory], object]) -> None:
        """Before a write creates ``tenant``'s store: run ``work`` on a throwaway empty
        store under the configuration a new tenant records (in a scratch directory
        outside ``DATA``, removed at once), so that a write the memory or the store
        refuses is refused before anything exists on disk — only a write that succeeds
        creates a tenant. Nothing for a tenant that has a store. Raises what ``work``
        raises."""
        if not valid_tenant(tenant):
            return  # acquire refuses it
        with self._mu:
            if tenant in self._stores:
                return
            if self.journal is None:  # no room: that answer first, as the write would get
                self._check_room(tenant)
        scratch = fs.make_temp_dir("holomem-new-tenant-")
        try:
            with Store.open(os.path.join(scratch, "store"), key=self.key) as store:
                work(store, Memory(store, initial=self.config))
        finally:
            fs.remove_tree(scratch)

    def has_store(self, tenant: str) -> bool:
        """Whether ``tenant`` is known to have a store (opened or found at start)."""
        with self._mu:
            return tenant in self._stores

    def counted(self) -> Counted:
        """What the tenant stores did and hold, as one consistent look: the open ones'
        counters (no store lock is waited for), the totals of those closed, the
        number of stores and the bounds. Work: one look per open store."""
        with self._mu:
            return Counted(tuple(t.store.counters() for t in self._open.values()),
                           self._closed_writes, self._closed_fsyncs, len(self._stores),
                           self.max_open, self.max_stores)

    @property
    def stores(self) -> int:
        """How many tenant stores exist (as far as this server knows)."""
        with self._mu:
            return len(self._stores)

    def __len__(self) -> int:
        return len(self._open)
