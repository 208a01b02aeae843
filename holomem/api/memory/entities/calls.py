"""The call that says what is known about a name: entity_profile (docs/contract.md §4h).

Owns: the call, a function of the :class:`~holomem.api.memory.session.Session` that
``Memory`` offers as a method. The request is checked before the store is read; the
page is read from one view by :mod:`.profile`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from holomem.api.memory.entities import profile
from holomem.api.memory.entities.types import EntityProfile
from holomem.api.memory.session import Session


def entity_profile(s: Session, /, name: str, *, as_of: Any = None, known_at: Any = None,
                   namespace: Sequence[str] | str | None = None,
                   limit: int = profile.DEFAULT_LIMIT, cursor: str | None = None
                   ) -> EntityProfile:
    """What the store knows about ``name``, a page at a time (§4h).

    The facts that mention it — carrying it as an entity (spelled exactly so), or of a
    subject whose first segment is the name (``alice/city`` for "Alice": case, spaces,
    underscores and hyphens aside) — current ones first, then the rest, each group
    newest first, with their typed links; the first page adds a summary: each subject
    under the name with its current value and since when, the speakers that mention
    it and the sessions it appears in. ``as_of``: statuses at that time (default: now;
    the cursor keeps the first page's); ``known_at``: ignore what was ingested after
    it; ``namespace``: only facts at or under that prefix. A name nothing mentions has
    an empty profile. Pass ``next_cursor`` back as ``cursor`` with the same arguments
    for the next page.

    Limits: ``name`` as an entity (<= 256 characters); ``limit`` 1 to
    ``profile.MAX_LIMIT`` (default ``profile.DEFAULT_LIMIT``); a cursor <= 1024
    characters. Errors: ``invalid_request`` (a bad or another profile's cursor, among
    others), ``limit``.
    """
    req = profile.request(name, as_of, known_at, namespace, limit, cursor)
    now = s.now_ms()
    return s.store.read(lambda view: profile.page(view, req, now))
