"""An entity profile: what the store knows about a name, read from one view
(docs/contract.md §4h).

Owns: the limits of ``entity_profile``, the check of its request, which facts are a
name's, their order, the cursor that pages them, and the summary of the first page.
Imports the engine's view, the fact records (:mod:`holomem.api.memory.facts.records`),
the facts in a namespace (:mod:`holomem.api.memory.forget.removal`), the links and
their visibility (:mod:`holomem.api.memory.graph.relations`), the subjects'
name rule (:func:`holomem.projections.subjects.name_key`) and the types.

Rules, written down once:

- the facts of a name are the stored facts that carry it as an entity, spelled
  exactly as given (as ``probe`` and the ``entity`` filters compare entities), and
  the facts of every subject under it: a subject whose first segment has the name's
  key (``alice/city``, ``Alice/job`` and ``alice`` are the name "Alice"'s; the key
  rule is :func:`~holomem.projections.subjects.name_key`). Only facts at or under
  ``namespace``, ingested by ``known_at`` when it is given, and not of a subject
  holomem reserves for itself;
- each has its status at ``as_of`` (else now), as recall computes it; the current
  ones come first, then every other, each group newest first (by effective time,
  then the later write first);
- the speakers and sessions are the conversation turns' (:mod:`holomem.projections.turns`):
  who said the turns that mention the name, and the sessions holding them or turns
  the name spoke (a speaker spelled as the name);
- a page's links are its facts' typed links, both directions, as ``links`` shows
  them at ``as_of`` and ``known_at``.

Paging. The cursor pins the first page's evaluation time, the store's slots and last
transaction at that moment and the generation. Facts written after the first page are
not in the walk, and each fact's group is its status as the store stood at the first
page (:meth:`~holomem.projections.facts.FactIndex.status_codes_then`: the successors
it had then, even those forgotten since, and not those written or re-pointed since),
so the order of the walk never changes between pages: every fact of the walk still
stored comes exactly once, in order, whatever is written or forgotten between pages.
A later page shows its facts' status as it is then (a fact keeps its place when its
status changed). A cursor from another name, namespace or time, or from before a
compaction, is refused.

Bounds: a page holds at most :data:`MAX_LIMIT` facts and :data:`MAX_FACT_LINKS`
links per fact; each list of the summary at most :data:`MAX_SUMMARY` entries. The
work is linear in the facts of the name (their statuses, in numpy, and one look-up
each in the turn table for the first page's summary).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from holomem.api.engine import View, validate
from holomem.api.memory import filters
from holomem.api.memory.entities.types import (
    CurrentValue,
    EntityProfile,
    ProfileSummary,
    SessionCount,
    SpeakerCount,
    SubjectValue,
)
from holomem.api.memory.facts.records import fact_records
from holomem.api.memory.forget.removal import live_facts
from holomem.api.memory.graph import relations
from holomem.api.memory.graph.types import Link
from holomem.errors import InvalidError
from holomem.projections.namespaces import Namespace
from holomem.projections.subjects import RESERVED_PREFIX, name_key
from holomem.projections.temporal import STATUSES

#: The most facts one page holds, and how many unless asked.
MAX_LIMIT = 100
DEFAULT_LIMIT = 20
#: The most typed links a page shows for one of its facts.
MAX_FACT_LINKS = 16
#: The most entries of each list of the summary (subjects, speakers, sessions).
MAX_SUMMARY = 100
#: The status code of a current fact (the index of its name in STATUSES).
_CURRENT = STATUSES.index("current")
_WHAT = "entity_profile()"


class ProfileRequest(NamedTuple):
    """A checked entity_profile request."""

    name: str
    key: str
    as_of: int | None
    known_at: int | None
    prefix: Namespace
    limit: int
    cursor: str | None


def request(name: object, as_of: object, known_at: object, namespace: object,
            limit: object, cursor: object) -> ProfileRequest:
    """Check an entity_profile request (before the store is read). Errors:
    ``invalid_request``, ``limit``."""
    checked = validate.entity(name, "name")
    key = name_key(checked)
    if not key:
        raise InvalidError("name must hold more than spaces, underscores and hyphens")
    return ProfileRequest(checked, key, validate.to_ms(as_of, "as_of"),
                          validate.to_ms(known_at, "known_at"),
                          validate.namespace(namespace),
                          validate.positive_int(limit, "limit", MAX_LIMIT),
                          validate.cursor(cursor, _WHAT))


class _Cursor(NamedTuple):
    generation: int
    bound: int  # the store's slots at the first page: later ones are not walked
    seq: int  # the store's last transaction at the first page: statuses as they were then
    at: int  # the first page's evaluation time
    group: int  # where the last fact given stands: its group, effective time, slot
    eff: int
    slot: int


def _asked(req: ProfileRequest) -> str:
    """What a cursor must have been asked for: the name, the namespace and the times."""
    raw = json.dumps([req.name, list(req.prefix), req.as_of, req.known_at])
    return hashlib.blake2b(raw.encode(), digest_size=8).hexdigest()


def _decode(req: ProfileRequest, text: str, view: View) -> _Cursor:
    data = validate.decode_cursor(text, _WHAT)
    cur = _Cursor(*validate.cursor_ints(data, ("g", "n", "r", "t", "c", "e", "s"), _WHAT))
    # Each where the first page put it: a group, a slot bound and a transaction within
    # the store, a time as a caller's (a client may have changed any of them).
    if (cur.group not in (0, 1) or not 0 <= cur.bound <= view.catalog.slots
            or not -1 <= cur.seq <= view.revision
            or not -validate.TIME_LIMIT < cur.at < validate.TIME_LIMIT):
        raise InvalidError(f"not a cursor {_WHAT} gave out")
    if data.get("q") != _asked(req):
        raise InvalidError("the cursor is another profile's (another name, namespace, "
                           "as_of or known_at); ask with the first page's arguments")
    if cur.generation != view.generation:
        raise InvalidError("the store was compacted since the first page; start the "
                           "profile again")
    return cur


def page(view: View, req: ProfileRequest, now: int) -> EntityProfile:
    """One page of ``req``'s profile, statuses at ``req.as_of`` (else ``now``)."""
    cur = _decode(req, req.cursor, view) if req.cursor is not None else None
    at = cur.at if cur is not None else (req.as_of if req.as_of is not None else now)
    bound = cur.bound if cur is not None else view.catalog.slots
    seq = cur.seq if cur is not None else view.revision
    facts, known = view.facts, req.known_at
    allowed = _allowed(view, req.prefix, known, bound)
    sids = [sid for sid in facts.subject_index.named(req.key)
            if not facts.subject_names[sid].startswith(RESERVED_PREFIX)]
    members = [facts.slot(fid) for sid in sids
               for fid in facts.subject_index.members_of(sid)]
    found = np.union1d(view.entities.slots(req.name),
                       np.asarray([s for s in members if s >= 0], dtype=np.int64))
    found = found[allowed[found]]
    codes = facts.status_codes_then(found, at, known, bound, seq)
    group = (codes != _CURRENT).astype(np.int64)
    eff = facts.eff.view()[found]
    order = np.lexsort((-found, -eff, group))
    slots, group, eff, codes = found[order], group[order], eff[order], codes[order]
    start = 0
    if cur is not None:  # the first fact after the cursor's, in the same order
        after = ((group > cur.group) | ((group == cur.group) & (
            (eff < cur.eff) | ((eff == cur.eff) & (slots < cur.slot)))))
        hits = np.flatnonzero(after)
        start = int(hits[0]) if len(hits) else len(slots)
    end = min(start + req.limit, len(slots))
    chosen = slots[start:end].tolist()
    # A later page shows each fact's status as it is now (its place in the walk is
    # the first page's: a write or forget since may have changed the status).
    records = fact_records(view, chosen, at, known,
                           None if cur is not None else
                           [STATUSES[c] for c in codes[start:end].tolist()])
    links, cut = _links(view, chosen, at, known)
    next_cursor = None
    if end < len(slots):
        last = end - 1
        next_cursor = validate.encode_cursor(
            q=_asked(req), g=view.generation, n=bound, r=seq, t=at, c=int(group[last]),
            e=int(eff[last]), s=int(slots[last]))
    summary = None
    if cur is None:
        summary = _summary(view, req, sids, allowed, found, codes, at)
    return EntityProfile(name=req.name, key=req.key, as_of=at, known_at=known,
                         total=len(slots), facts=records, links=links, links_cut=cut,
                         next_cursor=next_cursor, summary=summary)


def _allowed(view: View, prefix: Namespace, known: int | None, bound: int) -> np.ndarray:
    """The slot mask of the facts a profile may show: stored, at or under ``prefix``,
    below ``bound``, ingested by ``known`` and of no reserved subject."""
    n = view.catalog.slots
    mask = np.zeros(n, dtype=bool)
    mask[live_facts(view, prefix)] = True
    mask[bound:] = False
    shown = filters.unreserved(view)
    if shown is not None:
        mask &= shown[:n]
    if known is not None:
        mask &= view.facts.ingest.view()[:n] <= known
    return mask


def _links(view: View, slots: Sequence[int], at: int, known: int | None
           ) -> tuple[list[Link], bool]:
    """The visible links of ``slots``, each once, in the page's order (a fact's in the
    order they were made), at most :data:`MAX_FACT_LINKS` per fact; and whether a
    fact had more."""
    rel = view.relations
    seen: dict[int, None] = {}
    cut = False
    for slot in slots:
        shown = [r for r in rel.rows(slot, "both") if relations.visible(view, r, at, known)]
        cut = cut or len(shown) > MAX_FACT_LINKS
        for r in shown[:MAX_FACT_LINKS]:
            seen.setdefault(r, None)
    return [relations.link(view, r) for r in seen], cut


def _summary(view: View, req: ProfileRequest, sids: list[int], allowed: np.ndarray,
             found: np.ndarray, codes: np.ndarray, at: int) -> ProfileSummary:
    subjects, total = _subjects(view, sids, allowed, at, req.known_at)
    speakers, sessions = _appearances(view, req.name, found, allowed)
    return ProfileSummary(
        current=int((codes == _CURRENT).sum()), subjects=subjects,
        speakers=speakers[:MAX_SUMMARY], sessions=sessions[:MAX_SUMMARY],
        subjects_total=total, speakers_total=len(speakers), sessions_total=len(sessions))


def _subjects(view: View, sids: list[int], allowed: np.ndarray, at: int,
              known: int | None) -> tuple[list[SubjectValue], int]:
    """The first :data:`MAX_SUMMARY` subjects (by name, then namespace) with a fact the
    profile may show, each with its current facts; and how many there are."""
    facts = view.facts
    held: list[tuple[str, tuple[str, ...], list[int], int]] = []
    for sid in sids:
        slots = np.asarray([s for s in (facts.slot(f) for f in
                                         facts.subject_index.members_of(sid)) if s >= 0],
                           dtype=np.int64)
        slots = slots[allowed[slots]]
        if not len(slots):
            continue
        now_current = slots[facts.status_codes(slots, at, known) == _CURRENT]
        held.append((facts.subject_names[sid], facts.namespace(int(slots[0])),
                     now_current.tolist(), len(slots)))
    held.sort(key=lambda h: (h[0], h[1]))
    kept = held[:MAX_SUMMARY]
    texts = iter(view.records_of([s for h in kept for s in h[2]]))
    eff = facts.eff.view()
    out = [SubjectValue(subject=name, namespace=list(ns), versions=versions,
                        current=[CurrentValue(id=view.id_of(s), text=next(texts).text,
                                              since=int(eff[s])) for s in current])
           for name, ns, current, versions in kept]
    return out, len(held)


def _appearances(view: View, name: str, found: np.ndarray, allowed: np.ndarray
                 ) -> tuple[list[SpeakerCount], list[SessionCount]]:
    """Who said the turns among ``found``, and the sessions of those turns and of the
    turns ``name`` spoke (every one, most facts first)."""
    turns, ids = view.facts.turns, view.catalog.ids
    if not turns.of:
        return [], []
    speakers: dict[str, int] = {}
    #: (session, namespace) -> [mentions, said, first, last]: a session name is a
    #: different session in each namespace
    sessions: dict[tuple[str, tuple[str, ...]], list[int]] = {}

    def seen(slot: int, session: str, position: int | None, said: bool) -> None:
        row = sessions.setdefault((session, view.facts.namespace(slot)), [0, 0, -1, -1])
        row[1 if said else 0] += 1
        if position is not None:
            row[2] = position if row[2] < 0 else min(row[2], position)
            row[3] = max(row[3], position)

    for slot in found.tolist():
        turn = turns.get(ids[slot] or "")
        if turn is None:
            continue
        if turn.speaker is not None:
            speakers[turn.speaker] = speakers.get(turn.speaker, 0) + 1
        if turn.session is not None:
            seen(slot, turn.session, turn.position, False)
    for fid in turns.speaker_facts(name):
        slot = view.facts.slot(fid)
        turn = turns.get(fid)
        if slot >= 0 and allowed[slot] and turn is not None and turn.session is not None:
            seen(slot, turn.session, turn.position, True)
    by_count = sorted(speakers.items(), key=lambda kv: (-kv[1], kv[0]))
    in_sessions = sorted(sessions.items(), key=lambda kv: (-(kv[1][0] + kv[1][1]), kv[0]))
    return ([SpeakerCount(speaker=s, facts=n) for s, n in by_count],
            [SessionCount(session=s, namespace=list(ns), mentions=m, said=d,
                          first=None if f < 0 else f, last=None if last < 0 else last)
             for (s, ns), (m, d, f, last) in in_sessions])
