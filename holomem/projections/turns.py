"""Conversation turns: who said a fact, in which session, at which position.

Owns: :class:`Turns` — per fact id, the speaker, session and position it was
remembered with (docs/contract.md §4g; any of the three may be absent), and the
look-ups a filter, ``remember_conversation`` and recall's dialogue signals need: the
facts of a speaker (in all or under a namespace prefix), the facts of a session name,
and a session's facts in position order. A session is a
session name in one namespace: each namespace's session "s1" is its own, filed apart,
so that the look-ups of one cost the same however many namespaces use that name. Part
of the fact index (:mod:`holomem.projections.facts`), which tells it of every fact
added and removed and carries it through checkpoints and compactions. Imports
:mod:`holomem.events`, the catalog and the namespace index.

Only facts that carry a turn field occupy a row, so a store without conversations
pays nothing. The tables are keyed by fact id (the catalog's own string), never by
slot: a fact whose document is replaced moves to another slot and keeps its turn.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import ClassVar, NamedTuple

from holomem.events import FactAdded
from holomem.projections.base import Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.namespaces import ROOT, Namespace, NamespaceIndex


class Turn(NamedTuple):
    """A fact's turn fields (None: not given), and the fact's namespace."""

    speaker: str | None
    session: str | None
    position: int | None
    namespace: Namespace = ROOT


class Turns:
    #: The table's shape, for a typed decode (msgspec builds the tuples).
    SNAPSHOT_TYPES: ClassVar[dict[str, object]] = {
        "turns": list[tuple[str, str | None, str | None, int | None]],
    }

    def __init__(self, catalog: Catalog, namespaces: NamespaceIndex) -> None:
        self.catalog = catalog
        self.namespaces = namespaces
        #: fact id -> its turn fields (only facts that have one)
        self.of: dict[str, Turn] = {}
        #: speaker -> the facts it said (an ordered set: dict keys)
        self.by_speaker: dict[str, dict[str, None]] = {}
        #: speaker -> the namespaces it spoke in -> how many of its facts each holds
        self.spaces: dict[str, dict[Namespace, int]] = {}
        #: (session name, namespace) -> (position, fact id) of its facts, sorted; a fact
        #: of the session without a position sorts first, as position -1
        self.by_session: dict[tuple[str, Namespace], list[tuple[int, str]]] = {}
        #: session name -> the namespaces that have a session of that name (an ordered
        #: set)
        self.named: dict[str, dict[Namespace, None]] = {}

    # -- changes ------------------------------------------------------------------------
    def added(self, fid: str, e: FactAdded, namespace: Namespace) -> None:
        """The turn of the new fact ``fid`` (the catalog's string) in ``namespace``,
        remembered by ``e``."""
        if e.turn is not None and e.turn != (None, None, None):
            self._add(fid, Turn(*e.turn, namespace))

    def _namespace(self, fid: str) -> Namespace:
        return self.namespaces.namespace(self.catalog.slot(fid))

    def _add(self, fid: str, turn: Turn) -> None:
        self.of[fid] = turn
        if turn.speaker is not None:
            self.by_speaker.setdefault(turn.speaker, {})[fid] = None
            spaces = self.spaces.setdefault(turn.speaker, {})
            spaces[turn.namespace] = spaces.get(turn.namespace, 0) + 1
        if turn.session is not None:
            self.named.setdefault(turn.session, {})[turn.namespace] = None
            row = self.by_session.setdefault((turn.session, turn.namespace), [])
            entry = (-1 if turn.position is None else turn.position, fid)
            if not row or row[-1] <= entry:
                row.append(entry)  # (turns mostly arrive in order)
            else:
                bisect.insort(row, entry)

    def remove(self, fid: str) -> None:
        turn = self.of.pop(fid, None)
        if turn is None:
            return
        if turn.speaker is not None:
            said = self.by_speaker[turn.speaker]
            del said[fid]
            if not said:
                del self.by_speaker[turn.speaker]
            counts = self.spaces[turn.speaker]
            counts[turn.namespace] -= 1
            if not counts[turn.namespace]:
                del counts[turn.namespace]
                if not counts:
                    del self.spaces[turn.speaker]
        if turn.session is not None:
            key = (turn.session, turn.namespace)
            row = self.by_session[key]
            row.remove((-1 if turn.position is None else turn.position, fid))
            if not row:
                del self.by_session[key]
                spaces = self.named[turn.session]
                del spaces[turn.namespace]
                if not spaces:
                    del self.named[turn.session]

    # -- queries ------------------------------------------------------------------------
    def get(self, fid: str) -> Turn | None:
        return self.of.get(fid)

    def speaker_facts(self, speaker: str) -> list[str]:
        """The facts ``speaker`` said, in the order they were stored."""
        return list(self.by_speaker.get(speaker, ()))

    def speaks_under(self, speaker: str, prefix: Namespace) -> bool:
        """Whether ``speaker`` said a stored fact at or under the namespace ``prefix``
        (looked up among the namespaces it spoke in, not its facts)."""
        n = len(prefix)
        return any(ns[:n] == prefix for ns in self.spaces.get(speaker, ()))

    def speaker_facts_under(self, speaker: str, prefix: Namespace) -> Iterator[str]:
        """The facts ``speaker`` said at or under the namespace ``prefix``, in the
        order they were stored (lazily: the caller stops when it has seen enough)."""
        n = len(prefix)
        for fid in self.by_speaker.get(speaker, ()):
            if self.of[fid].namespace[:n] == prefix:
                yield fid

    def session_facts(self, session: str) -> list[str]:
        """The facts of every session named ``session`` (of any namespace), each
        namespace's by position."""
        return [fid for ns in self.named.get(session, ())
                for _, fid in self.by_session[session, ns]]

    def between(self, session: str, namespace: Namespace, low: int, high: int
                ) -> list[str]:
        """The facts of ``session`` in ``namespace`` with a position from ``low`` up to
        ``high`` (excluded), the nearest to ``high`` first."""
        row = self.by_session.get((session, namespace))
        if not row:
            return []
        start = bisect.bisect_left(row, (max(low, 0), ""))
        end = bisect.bisect_left(row, (high, ""))
        return [fid for _, fid in reversed(row[start:end])]

    def after(self, session: str, namespace: Namespace, position: int) -> Iterator[str]:
        """The facts of ``session`` in ``namespace`` with a position above ``position``,
        the nearest first (lazily: the caller stops when it has seen enough)."""
        row = self.by_session.get((session, namespace))
        if not row:
            return
        for i in range(bisect.bisect_left(row, (position + 1, "")), len(row)):
            yield row[i][1]

    # -- checkpoints and compaction -----------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The table, copied at the top (its entries are tuples)."""
        return {"turns": [(f, t.speaker, t.session, t.position) for f, t in self.of.items()]}

    def restore(self, snap: Snapshot) -> None:
        """Fill this fresh table from :meth:`snapshot`, once the namespace index holds
        the facts' namespaces."""
        for fid, speaker, session, position in snap["turns"]:
            own = self._own(fid)
            self._add(own, Turn(speaker, session, position, self._namespace(own)))

    def compacted(self, old: Turns, fact_ids: list[str]) -> None:
        """Fill this fresh table with the turns of ``fact_ids`` in ``old``, in that
        order (a compaction writes the kept facts again in slot order; a fact keeps its
        namespace)."""
        for fid in fact_ids:
            turn = old.of.get(fid)
            if turn is not None:
                self._add(fid, turn)

    def _own(self, fid: str) -> str:
        """The catalog's own string for ``fid`` (so the tables do not copy ids)."""
        slot = self.catalog.slot(fid)
        own = self.catalog.ids[slot] if slot >= 0 else None
        return own if own is not None else fid
