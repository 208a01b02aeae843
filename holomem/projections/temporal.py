"""The temporal model of facts (docs/contract.md §3): when a fact begins and ends, and
its status at a time.

Owns: the definitions below, the status names and the columns' unset time.
Imports numpy. The fact index applies them to stored facts
(:mod:`holomem.projections.statuses`), remember's planner to facts earlier in the
same batch.

Definitions (written down once, here):

- a fact *begins* at its effective time ``eff = valid_from ?? event_time ?? ingest_time``;
- a link "s supersedes p" is written once, on the event of whichever of the two
  arrived later, and becomes *known* at that fact's ingest time; it *takes effect*
  at ``eff(s)``;
- ``status(f, t, T)`` at evaluation time ``t``, ignoring everything ingested after
  ``T`` (``known_at``; None means nothing is ignored):
    1. ``not-yet-valid`` if ``t < eff(f)`` (it has not begun);
    2. ``superseded`` if some known, still stored fact s with a known link s -> f
       has begun (``eff(s) <= t``);
    3. ``expired`` if ``t >= end(f)``, where ``end(f)`` is the earlier of
       ``valid_to`` and, for a fact remembered with a time to live, ``ingest_time +
       ttl_ms`` (unset when neither is);
    4. ``current`` otherwise.
  (Superseded is checked before expired: the more specific reason wins.)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

import numpy as np

UNSET = np.iinfo(np.int64).min
CURRENT, SUPERSEDED, EXPIRED, NOT_YET_VALID = "current", "superseded", "expired", "not-yet-valid"
STATUSES = (CURRENT, SUPERSEDED, EXPIRED, NOT_YET_VALID)


class Link(NamedTuple):
    other: str  # the fact at the other end
    known_at: int  # ingest time of the fact whose event wrote the link


def unset_if_none(value: int | None) -> int:
    """A time for a column: :data:`UNSET` for None."""
    return UNSET if value is None else value


def opt(value: int) -> int | None:
    """A time from a column: None for :data:`UNSET`."""
    return None if value == UNSET else int(value)


class FactTimes(NamedTuple):
    ingest_time: int
    event_time: int | None
    valid_from: int | None
    valid_to: int | None
    effective: int
    subject: str | None
    digest: bytes
    ttl_ms: int | None = None


def end_time(valid_to: int | None, ingest_time: int, ttl_ms: int | None) -> int | None:
    """When a fact stops being valid: the earlier of ``valid_to`` and its time to
    live's end (``ingest_time + ttl_ms``); None when it has neither."""
    if ttl_ms is None:
        return valid_to
    expires = ingest_time + ttl_ms
    return expires if valid_to is None else min(valid_to, expires)


def effective_time(valid_from: int | None, event_time: int | None, ingest_time: int) -> int:
    """When a fact begins: ``valid_from ?? event_time ?? ingest_time``."""
    if valid_from is not None:
        return valid_from
    return event_time if event_time is not None else ingest_time


def status_at(at: int, effective: int, end: int | None,
              successor_starts: Iterable[int]) -> str:
    """The status of a fact at ``at``, given when it begins, when it ends
    (:func:`end_time`), and when
    each of its (known, stored) successors begins — rules 1 to 4 of the module
    docstring. The fact index and remember's planner (for facts earlier in the same
    batch, not yet in the index) both decide a status here."""
    if at < effective:
        return NOT_YET_VALID
    if any(start <= at for start in successor_starts):
        return SUPERSEDED
    if end is not None and at >= end:
        return EXPIRED
    return CURRENT
