"""The typed links a conversation call writes: which turn answers which, and which
turns an extracted fact came from (docs/contract.md §4g).

Owns: the reply rule and its window (:data:`REPLY_WINDOW`), the relation names
(:data:`REPLIES_TO`, :data:`DERIVED_FROM`), the plan of the links, run under the
write lock with the view and the results of the facts planned in the same
transaction, and the rule read back over stored turns (:func:`answered`,
:func:`answering`: what recall's dialogue signals infer for turns stored without a
link). Imports the
engine's view, the graph's limits, the types and the events.

The reply rule, written down once: a turn answers the nearest earlier turn of its
session (same namespace) said by *another* speaker, looking back at most
:data:`REPLY_WINDOW` positions — so two messages in a row by one speaker both answer
the question before them, and a turn gets at most that many replies. A turn with no
such turn in the window (the first one, or a long run by one speaker) answers none.
The turns before the call's first position are the stored ones; from it on, the
call's own. ``from_id -[replies_to]-> to_id`` goes from the answer to what it answers;
``fact -[derived_from]-> turn`` from an extracted fact to each of its source turns.

A link already stored is not written again, so a retried call writes no event.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from holomem.api.engine import View
from holomem.api.memory.graph.relations import MAX_LINKS_PER_FACT
from holomem.api.memory.types import Remembered
from holomem.errors import LimitError
from holomem.events import Event, RelationAdded

REPLIES_TO = "replies_to"
DERIVED_FROM = "derived_from"
#: How many positions back a turn looks for the turn it answers.
REPLY_WINDOW = 8


class PlannedTurn(NamedTuple):
    """A turn of the call: its position and speaker (its id comes with the results)."""

    position: int
    speaker: str


def plan(view: View, results: list[Remembered], turns: Sequence[PlannedTurn],
         sources: Sequence[Sequence[int]], namespace: tuple[str, ...], session: str,
         now: int) -> list[Event]:
    """The links of one call. ``results``: the turns' then the extracted facts'
    (in that order); ``sources[k]``: the indexes in ``turns`` extracted fact k came
    from. Errors: ``limit`` (a fact would pass ``MAX_LINKS_PER_FACT`` links one way)."""
    ids = [r.id for r in results[:len(turns)]]
    wanted: list[tuple[str, str, str]] = []
    said = {t.position: (t.speaker, fid) for t, fid in zip(turns, ids, strict=True)}
    first = min(said) if said else 0
    stored = _stored_before(view, namespace, session, first)
    for t, fid in zip(turns, ids, strict=True):
        for q in range(t.position - 1, max(-1, t.position - 1 - REPLY_WINDOW), -1):
            earlier = said.get(q) if q >= first else stored.get(q)
            if earlier is not None and earlier[0] != t.speaker:
                wanted.append((fid, earlier[1], REPLIES_TO))
                break
    for r, of in zip(results[len(turns):], sources, strict=True):
        wanted.extend((r.id, ids[k], DERIVED_FROM) for k in of)
    return _new_links(view, wanted, now)


def answered(view: View, fid: str, known_at: int | None = None) -> str | None:
    """The stored turn that the stored turn ``fid`` answers by the reply rule (the
    nearest earlier turn of its session and namespace said by another speaker, at most
    :data:`REPLY_WINDOW` positions back), whatever links are stored; None when it is
    no turn with a speaker, session and position, or no such turn is there. With
    ``known_at``, the turns ingested after it are not there."""
    facts, turns = view.facts, view.facts.turns
    turn = turns.get(fid)
    slot = facts.slot(fid)
    if (turn is None or turn.session is None or turn.position is None
            or turn.speaker is None or slot < 0):
        return None
    earlier = _stored_before(view, facts.namespace(slot), turn.session, turn.position,
                             known_at)
    for q in range(turn.position - 1, max(-1, turn.position - 1 - REPLY_WINDOW), -1):
        said = earlier.get(q)
        if said is not None and said[0] != turn.speaker:
            return said[1]
    return None


def answering(view: View, fid: str, known_at: int | None = None) -> list[str]:
    """The stored turns that answer the stored turn ``fid`` by the reply rule: the run
    of turns by one other speaker right after it in its session and namespace (each
    at most :data:`REPLY_WINDOW` positions on; another turn of its own speaker ends
    the run), whatever links are stored; nearest first. With ``known_at``, the turns
    ingested after it are not there."""
    facts, turns = view.facts, view.facts.turns
    turn = turns.get(fid)
    slot = facts.slot(fid)
    if (turn is None or turn.session is None or turn.position is None
            or turn.speaker is None or slot < 0):
        return []
    namespace = facts.namespace(slot)
    out: list[str] = []
    by: str | None = None  # the speaker of the run
    for other in turns.after(turn.session, namespace, turn.position):
        t = turns.get(other)
        if t is None or t.position is None or t.position - turn.position > REPLY_WINDOW:
            break
        if t.speaker is None or not facts.known(facts.slot(other), known_at):
            continue
        if t.speaker == turn.speaker or (by is not None and t.speaker != by):
            break
        by = t.speaker
        out.append(other)
    return out


def _stored_before(view: View, namespace: tuple[str, ...], session: str, first: int,
                   known_at: int | None = None) -> dict[int, tuple[str, str]]:
    """The stored turns of ``session`` in ``namespace`` in the window before
    ``first`` (with ``known_at``, those ingested by then): position -> (speaker, id).
    The work is that session's turns in those
    :data:`REPLY_WINDOW` positions, however many namespaces have a session of that
    name (one namespace per user, each with a session "s1", is common)."""
    facts, turns = view.facts, view.facts.turns
    out: dict[int, tuple[str, str]] = {}
    for fid in turns.between(session, namespace, first - REPLY_WINDOW, first):
        turn = turns.get(fid)
        if (turn is None or turn.position is None or turn.speaker is None
                or turn.position in out or not facts.known(facts.slot(fid), known_at)):
            continue
        out[turn.position] = (turn.speaker, fid)
    return out


def _new_links(view: View, wanted: list[tuple[str, str, str]], now: int) -> list[Event]:
    """The events of the links in ``wanted`` that are not stored (nor asked twice)."""
    rel, catalog = view.relations, view.catalog
    seen: set[tuple[str, str, str]] = set()
    extra_out: dict[str, int] = {}
    extra_in: dict[str, int] = {}
    out: list[Event] = []
    for a, b, name in wanted:
        if a == b or (a, b, name) in seen:
            continue
        seen.add((a, b, name))
        s, d = catalog.slot(a), catalog.slot(b)
        if s >= 0 and d >= 0 and rel.find(s, d, name) >= 0:
            continue  # (stored already: a retry)
        extra_out[a] = extra_out.get(a, 0) + 1
        extra_in[b] = extra_in.get(b, 0) + 1
        if ((rel.degree(s, "out") if s >= 0 else 0) + extra_out[a] > MAX_LINKS_PER_FACT
                or (rel.degree(d, "in") if d >= 0 else 0) + extra_in[b] > MAX_LINKS_PER_FACT):
            raise LimitError(f"the call gives a fact more than {MAX_LINKS_PER_FACT} links "
                             "one way (the limit)")
        out.append(RelationAdded(from_id=a, to_id=b, relation=name, time=now))
    return out
