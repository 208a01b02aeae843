"""The writer's lease: one key in a key-value bucket whose entries expire.

Owns: taking the lease (only when no live entry exists), renewing it in the
background, giving it back on close, and the local rule for whether it is still
held. Imports the standard library, ``nats`` and :mod:`holomem.errors`.

The bucket's entries live ``ttl`` seconds after the server stored them. A renewal
is a compare-and-set on the entry's revision, so it fails once anyone else has taken
the key; an attempt waits at most a quarter of the lease for its answer, and a failed
one is made again for as long as the lease lasts (so a request that is never
answered, sent while a node was lost, does not use the lease up).
The holder counts its lease from the moment it *sent* the renewal's first attempt
(never later than when the server stored the one that succeeded) and gives up a
margin before ``ttl`` runs out, so it stops acknowledging before any successor can
hold the key.
Once it has counted the lease as lost it never holds it again: the writer must be
reopened.

The entry's value is the holder's name, then, when the writer serves HTTP, one space
and its advertised base URL (``host:pid:tag http://10.0.0.1:8080``): the ``locked``
error a second opener gets carries both (:attr:`StoreLockedError.holder` and
:attr:`StoreLockedError.writer`), so a server can send a write on to the writer.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from holomem.errors import StoreLockedError

KEY = "writer"
#: The share of the lease the holder allows itself (the rest covers clock rate
#: differences and the renewal's own travel).
SAFE_SHARE = 0.8
#: Renewals per lease period.
RENEWALS = 4
#: Seconds between the attempts of one renewal.
RETRY_PAUSE = 0.1


def holder_name() -> str:
    """Who holds a lease (for the ``locked`` message): host, pid and a random tag."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"


async def bucket(js: JetStreamContext, name: str, ttl: float, replicas: int) -> KeyValue:
    """The lease bucket, created on first use with entries living ``ttl`` seconds."""
    try:
        return await js.key_value(name)
    except nats.js.errors.BucketNotFoundError:
        pass
    try:
        return await js.create_key_value(KeyValueConfig(
            bucket=name, ttl=ttl, history=1, replicas=replicas, storage=StorageType.FILE))
    except nats.js.errors.BadRequestError:
        return await js.key_value(name)  # created meanwhile by another opener


class Lease:
    """A held lease. Build with :meth:`take` (on the event loop)."""

    def __init__(self, kv: KeyValue, ttl: float, holder: str, revision: int, sent: float
                 ) -> None:
        self.kv = kv
        self.ttl = ttl
        self.holder = holder
        self._revision = revision
        self._until = sent + ttl * SAFE_SHARE
        self._lost: str | None = None
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def take(cls, kv: KeyValue, ttl: float, wait: float, what: str,
                   advertise: str = "") -> Lease:
        """Take the lease, waiting up to ``wait`` seconds for a live holder's lease to
        expire; ``advertise`` (a URL, or "") is recorded beside the holder's name.
        Errors: ``locked`` (naming the holder, with ``holder`` and ``writer`` set)."""
        holder = holder_name() + (f" {advertise}" if advertise else "")
        deadline = time.monotonic() + wait
        while True:
            sent = time.monotonic()
            try:
                rev = await kv.create(KEY, holder.encode())
                return cls(kv, ttl, holder, rev, sent)
            except nats.js.errors.KeyWrongLastSequenceError:
                pass
            if time.monotonic() >= deadline:
                try:
                    other = (await kv.get(KEY)).value or b""
                except nats.js.errors.KeyNotFoundError:
                    other = b"?"
                name, _, url = other.decode(errors="replace").partition(" ")
                err = StoreLockedError(
                    f"{what} is being written by {name}"
                    + (f", serving at {url}" if url else "")
                    + f" (its lease lasts {ttl:g} s after its last renewal)")
                err.holder = name
                err.writer = url if url.startswith(("http://", "https://")) else None
                raise err
            await asyncio.sleep(min(0.1, ttl / 10))

    def start(self) -> None:
        """Renew in the background (call on the loop)."""
        self._task = asyncio.get_running_loop().create_task(self._renew_forever())

    async def _renew_forever(self) -> None:
        period = self.ttl / RENEWALS
        while self._lost is None:
            await asyncio.sleep(period)
            await self._renew(period)

    async def _renew(self, period: float) -> None:
        """One renewal: attempts of at most ``period`` seconds each, :data:`RETRY_PAUSE`
        apart, while the lease lasts. A request sent while the bucket elects a leader
        (a node was lost) may never be answered: the next attempt reaches the new one.

        An attempt given up may still have been stored: the next one then finds the
        revision moved, and the entry, if it holds this holder's name, is its own
        renewal (nobody else writes an entry that is not theirs). The lease is counted
        from the first attempt's sending, the earliest the stored one can have left."""
        first = time.monotonic()
        while self._lost is None:
            sent = time.monotonic()
            if sent >= self._until:
                self._lose("the lease ran out before a renewal reached the server")
                return
            timeout = max(0.05, min(period, self._until - sent))
            revision: int | None
            try:
                revision = await asyncio.wait_for(
                    self.kv.update(KEY, self.holder.encode(), last=self._revision), timeout)
            except nats.js.errors.KeyWrongLastSequenceError:
                try:
                    revision = await asyncio.wait_for(self._own_revision(), timeout)
                except (TimeoutError, nats.errors.Error):
                    await self._pause()
                    continue  # not known yet: ask again while the lease lasts
                if revision is None:
                    self._lose("another writer took the lease")
                    return
            except (TimeoutError, nats.errors.Error):
                await self._pause()
                continue  # try again while the lease lasts
            self._revision = revision
            if self._lost is None:
                self._until = first + self.ttl * SAFE_SHARE
            return

    async def _own_revision(self) -> int | None:
        """The entry's revision when it holds this holder's name, else None."""
        try:
            entry = await self.kv.get(KEY)
        except nats.js.errors.KeyNotFoundError:
            return None
        return entry.revision if entry.value == self.holder.encode() else None

    async def _pause(self) -> None:
        await asyncio.sleep(max(0.0, min(RETRY_PAUSE, self._until - time.monotonic())))

    def _lose(self, why: str) -> None:
        if self._lost is None:
            self._lost = why

    def held(self) -> bool:
        """Whether this writer may still acknowledge (thread safe: two reads)."""
        if self._lost is not None:
            return False
        if time.monotonic() >= self._until:
            self._lose("the lease ran out (no renewal reached the server in time)")
            return False
        return True

    @property
    def lost(self) -> str | None:
        """Why the lease was lost, or None."""
        self.held()
        return self._lost

    async def release(self) -> None:
        """Stop renewing and give the lease back (a successor need not wait)."""
        if self._task is not None:
            self._task.cancel()
        if self._lost is None and self.held():
            self._lose("released")
            with contextlib.suppress(TimeoutError, nats.errors.Error):  # else it expires
                await asyncio.wait_for(self.kv.delete(KEY, last=self._revision), 2.0)
        self._lose("released")
