"""The writer's lease survives renewals that go unanswered or fail while the lease
lasts, and is given up only when another holder's entry is found (no server: a
bucket stand-in whose answers the tests choose)."""

from __future__ import annotations

import asyncio
import time

import nats.errors
import nats.js.errors

from holomem.log.stream.lease import KEY, Lease

TTL = 2.0  # renewals every 0.5 s; the lease counted for 1.6 s after each


class Entry:
    def __init__(self, value: bytes, revision: int) -> None:
        self.value = value
        self.revision = revision


class Bucket:
    """A key-value bucket of one entry. ``plan``: what each update does in turn —
    "ok", "hang" (never answered, not stored), "lost" (stored, never answered),
    "fail" (no responders) or "taken" (another writer's entry replaces it)."""

    def __init__(self, holder: str, plan: list[str]) -> None:
        self.entry = Entry(holder.encode(), 1)
        self.plan = plan
        self.updates = 0

    async def update(self, key: str, value: bytes, last: int | None = None) -> int:
        assert key == KEY
        step = self.plan[self.updates] if self.updates < len(self.plan) else "ok"
        self.updates += 1
        if step == "fail":
            raise nats.errors.NoRespondersError
        if step == "taken":
            self.entry = Entry(b"someone else", self.entry.revision + 1)
        if last != self.entry.revision:
            raise nats.js.errors.KeyWrongLastSequenceError
        if step == "hang":
            await asyncio.sleep(3600)
        self.entry = Entry(value, self.entry.revision + 1)
        if step == "lost":
            await asyncio.sleep(3600)
        return self.entry.revision

    async def get(self, key: str) -> Entry:
        return self.entry

    async def delete(self, key: str, last: int | None = None) -> None:
        self.entry = Entry(b"", self.entry.revision + 1)


def _held_after(plan: list[str], seconds: float) -> tuple[bool, str | None, int]:
    """Whether the lease is held ``seconds`` after it was taken, why not, and how many
    updates the bucket saw."""
    async def go() -> tuple[bool, str | None, int]:
        holder = "host:1:tag"
        bucket = Bucket(holder, plan)
        lease = Lease(bucket, TTL, holder, 1, time.monotonic())  # type: ignore[arg-type]
        lease.start()
        await asyncio.sleep(seconds)
        held, why = lease.held(), lease.lost
        await lease.release()
        return held, why, bucket.updates

    return asyncio.run(go())


def test_a_renewal_that_is_never_answered_is_made_again_while_the_lease_lasts() -> None:
    # The first attempt (at 0.5 s) hangs; the second (after 1.0 s) is stored.
    held, why, updates = _held_after(["hang"], 2.4)
    assert held, why
    assert updates >= 2


def test_failed_renewals_are_retried_within_the_lease() -> None:
    held, why, _ = _held_after(["fail", "fail", "fail"], 2.4)
    assert held, why


def test_an_unanswered_renewal_that_was_stored_is_recognised_as_the_holders_own() -> None:
    # Stored but not answered: the retry finds the revision moved to an entry that
    # holds this holder's name, and goes on from it.
    held, why, updates = _held_after(["lost"], 2.4)
    assert held, why
    assert updates >= 3  # (and the renewals after it succeed on the adopted revision)


def test_another_writers_entry_ends_the_lease() -> None:
    held, why, _ = _held_after(["taken"], 1.0)
    assert not held and why == "another writer took the lease"
