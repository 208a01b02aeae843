"""The types of an entity profile (docs/contract.md §4h).

Owns: :class:`EntityProfile` (what ``entity_profile`` answers, a page at a time) and
the parts of its summary: :class:`SubjectValue` (a subject under the name with its
current value), :class:`CurrentValue`, :class:`SpeakerCount` and
:class:`SessionCount`. Same conventions as :mod:`holomem.api.memory.types`
(snake_case in Python, camelCase in JSON); kept apart so that module stays the size
of its own concern. Imports the shapes, the fact record and the link.
"""

from __future__ import annotations

from holomem.api.memory.graph.types import Link
from holomem.api.memory.shapes import Response
from holomem.api.memory.types import FactRecord


class CurrentValue(Response, frozen=True):
    """A fact that holds a subject's value at the profile's time: its id, its text and
    when it began (``since``: its effective time, ``validFrom ?? eventTime ??
    ingestTime``)."""

    id: str
    text: str
    since: int


class SubjectValue(Response, frozen=True):
    """A subject under the name (its first segment is the name: ``alice/city``), in one
    namespace: the facts current at the profile's time (usually one; none when every
    version is superseded, expired or not yet valid) and how many versions it has."""

    subject: str
    namespace: list[str]
    current: list[CurrentValue]
    versions: int


class SpeakerCount(Response, frozen=True):
    """A speaker of turns that mention the name, and how many of them."""

    speaker: str
    facts: int


class SessionCount(Response, frozen=True):
    """A session the name appears in, in one ``namespace`` (a session name used in two
    namespaces is two sessions): ``mentions`` — its turns that mention the name;
    ``said`` — its turns the name spoke (a speaker of that name); the first and last
    position of either."""

    session: str
    namespace: list[str]
    mentions: int
    said: int
    first: int | None = None
    last: int | None = None


class ProfileSummary(Response, frozen=True):
    """What the first page adds: the subjects under the name with their current values
    (by subject, then namespace), the speakers that mention it and the sessions it
    appears in (most facts first), each list at most ``entities.profile.MAX_SUMMARY``
    long, with the ``*_total`` counts of all; and how many of the facts are current."""

    current: int
    subjects: list[SubjectValue]
    speakers: list[SpeakerCount]
    sessions: list[SessionCount]
    subjects_total: int
    speakers_total: int
    sessions_total: int


class EntityProfile(Response, frozen=True):
    """``entity_profile``: a page of the facts that mention ``name`` — those that carry
    it as an entity (exactly as spelled) and those of a subject under it (``key``, the
    name's subject key) — current ones first, then the rest (superseded, expired, not
    yet valid, with ``supersededBy`` naming what replaced them), each group newest
    first; the typed links of this page's facts (each once, at most
    ``entities.profile.MAX_FACT_LINKS`` per fact: ``linksCut`` says some were left
    out); the times it answers at (``asOf``: given or the first page's now;
    ``knownAt``); ``total``, every fact that mentions the name; ``nextCursor`` for the
    next page (None: this is the last); ``summary`` on the first page only."""

    name: str
    key: str
    as_of: int
    known_at: int | None
    total: int
    facts: list[FactRecord]
    links: list[Link]
    links_cut: bool
    next_cursor: str | None
    summary: ProfileSummary | None = None
