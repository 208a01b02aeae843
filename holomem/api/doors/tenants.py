"""The HTTP server's tenants: one isolated store per tenant id, opened on demand.

Owns: tenant ids (what a ``X-Tenant-ID`` may be, so no path can escape), and
:class:`TenantPool` — open stores, least recently used first, idle ones closed
beyond a bound. Imports the engine, the memory API and the file layer.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import threading
from collections import OrderedDict

from holomem.api.aio import AsyncMemory
from holomem.api.engine import Store
from holomem.api.memory import Memory
from holomem.api.types import MemoryConfig
from holomem.errors import InvalidError, UnavailableError
from holomem.log import fs

TENANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DEFAULT_TENANT = "default"


class Tenant:
    """An open tenant: its store, its memory, and how many requests use it."""

    def __init__(self, store: Store, memory: AsyncMemory) -> None:
        self.store = store
        self.memory = memory
        self.users = 0


class TenantPool:
    """Open tenant stores, least recently used first; closes idle ones beyond the bound."""

    def __init__(self, data_dir: str, *, key: bytes | None, config: MemoryConfig,
                 max_open: int, executor: concurrent.futures.Executor | None = None) -> None:
        self.root = os.path.join(os.path.abspath(data_dir), "tenants")
        self.key = key
        self.config = config
        self.max_open = max_open
        self.executor = executor  # where the tenants' AsyncMemory calls run
        self._open: OrderedDict[str, Tenant] = OrderedDict()
        self._mu = threading.Lock()
        self._closed = False

    def acquire(self, tenant: str) -> Tenant:
        """The tenant's open store, opened (and created) if need be; ``release`` it.

        Errors: ``invalid_request`` (a bad tenant id), ``locked`` (another process is
        the store's writer), ``unavailable`` (shutting down), and what opening raises.
        """
        if not TENANT_RE.match(tenant) or ".." in tenant:
            raise InvalidError("X-Tenant-ID must be 1-64 letters, digits, '.', '_' or '-', "
                               "starting with a letter or digit")
        with self._mu:
            if self._closed:
                raise UnavailableError("the server is shutting down")
            t = self._open.get(tenant)
            if t is None:
                self._evict(room=1)
                t = self._open[tenant] = self._open_tenant(tenant)
            self._open.move_to_end(tenant)
            t.users += 1
            return t

    def _open_tenant(self, tenant: str) -> Tenant:
        fs.make_dirs(self.root)  # DATA/tenants and any new parent, synced
        store = Store.open(os.path.join(self.root, tenant), key=self.key, sync="batch")
        try:
            # The tenant store's own configuration; the server's for a new tenant.
            memory = Memory(store, initial=self.config)
            return Tenant(store, AsyncMemory(memory, executor=self.executor))
        except BaseException:
            store.close()  # or the store stays locked by a handle nobody holds
            raise

    def release(self, t: Tenant, *, evict: bool = True) -> None:
        """Done with ``t``. ``evict=False`` (on the event loop): close nothing now; the
        next ``acquire`` closes what is over the bound."""
        with self._mu:
            t.users -= 1
            if evict:
                self._evict()

    def _evict(self, room: int = 0) -> None:
        """Close idle stores until ``room`` more fit under the bound."""
        while len(self._open) + room > self.max_open:
            idle = next((name for name, t in self._open.items() if t.users == 0), None)
            if idle is None:
                return  # every open store is busy: go over the bound for now
            self._open.pop(idle).store.close()

    def close(self) -> None:
        with self._mu:
            self._closed = True
            for t in self._open.values():
                t.store.close()
            self._open.clear()

    def __len__(self) -> int:
        return len(self._open)
