"""Supersession links as slot arrays: what makes a fact superseded at a time, and the
chains (connected parts of the supersession graph) — over arrays, not one Python step
per link.

Owns: :class:`LinkSlots` — one (successor slot, predecessor slot) entry per link the
fact index holds, appended as the index adds links, and the chains computed from them
(kept until a link, a slot or a removal changes them). Part of the fact index's
supersession graph (:mod:`holomem.projections.supersession`), which feeds it;
:mod:`holomem.projections.statuses` answers with it. Imports numpy.

A link is only ever taken away with a fact, and a slot is never used again, so an
entry is live exactly when both of its slots still hold a stored fact: a removal
changes nothing here (its entries die with the slot). A fact whose document moves to
a new slot (the document API's replace) makes the arrays be read again from the
index's tables. Built on first use, so a replay, a restore and a store that never
asks pay nothing; never persisted.

Memory: 16 bytes per link written in this generation; dead entries are dropped once
they are as many as the live ones.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from holomem.projections.base import GrowArray

#: No successor (:meth:`LinkSlots.first_starts`).
NEVER = np.iinfo(np.int64).max
#: Reads every link from the fact index's tables: an (n, 2) array of (successor slot,
#: predecessor slot), -1 for an end that is not a stored fact.
Source = Callable[[], np.ndarray]


class LinkSlots:
    def __init__(self) -> None:
        self.built = False
        self.succ = GrowArray(np.int64)
        self.pred = GrowArray(np.int64)
        #: bumped by every change of the entries (a new link, a rebuild)
        self.version = 0
        self._chains: tuple[tuple[int, int, int], np.ndarray] | None = None
        self._starts: tuple[tuple[int, int, int], np.ndarray] | None = None
        self._starts_asked: tuple[int, int, int] | None = None

    def add(self, succ: int, pred: int) -> None:
        """A link just added between the stored facts in these slots."""
        if self.built:
            self.succ.append(succ)
            self.pred.append(pred)
            self.version += 1

    def reset(self) -> None:
        """Read the links from the tables again on next use (a fact changed slot)."""
        self.built = False
        self.version += 1

    def live(self, stored: np.ndarray, source: Source) -> tuple[np.ndarray, np.ndarray]:
        """(successor slots, predecessor slots) of every link between stored facts
        (``stored``: the slots holding one); ``source`` is read when not built."""
        if not self.built:
            both = source().reshape(-1, 2)
            both = both[(both >= 0).all(axis=1)]
            self.succ, self.pred = GrowArray(np.int64), GrowArray(np.int64)
            self.succ.extend(both[:, 0])
            self.pred.extend(both[:, 1])
            self.built = True
            self.version += 1
        succ, pred = self.succ.view(), self.pred.view()
        n = len(stored)
        ok = (succ < n) & (pred < n)
        ok[ok] = stored[succ[ok]] & stored[pred[ok]]
        s, p = succ[ok], pred[ok]
        if 2 * len(s) < len(succ):  # as many dead entries as live ones: drop them
            self.succ, self.pred = GrowArray(np.int64), GrowArray(np.int64)
            self.succ.extend(s)
            self.pred.extend(p)
            s, p = self.succ.view(), self.pred.view()
        return s, p

    def chains(self, stored: np.ndarray, facts: int, source: Source) -> np.ndarray:
        """A chain id per slot (``len(stored)`` of them): slots joined by supersession
        links share one, the smallest slot among them; any other slot is its own.
        ``facts``: how many facts are stored (a removal lowers it). Kept until a
        link is added, a slot is made or a fact is removed."""
        key = (self.version, len(stored), facts)
        if self._chains is not None and self._chains[0] == key and self.built:
            return self._chains[1]
        s, p = self.live(stored, source)
        key = (self.version, len(stored), facts)
        comp = np.arange(len(stored), dtype=np.int64)
        while len(s):
            cs, cp = comp[s], comp[p]
            apart = cs != cp
            if not apart.any():
                break
            lo, hi = np.minimum(cs, cp)[apart], np.maximum(cs, cp)[apart]
            # Every label is a root here: hang each larger root under the smallest
            # it meets, then point every slot at its root again.
            np.minimum.at(comp, hi, lo)
            while True:
                up = comp[comp]
                if np.array_equal(up, comp):
                    break
                comp = up
        self._chains = (key, comp)
        return comp

    def first_starts(self, slots: int, facts: int, stored: Callable[[], np.ndarray],
                     eff: np.ndarray, source: Source) -> np.ndarray | None:
        """When each slot's earliest stored successor begins (``NEVER`` for none): a
        stored fact is superseded at ``at`` exactly when that is at most ``at``.

        Kept until a link is added, a slot is made or a fact is removed (``slots``
        slots, ``facts`` stored facts); worked out on the second ask of one such
        state, so that a store written between every read never pays the pass over
        every link. None until then (the caller walks its links as before).
        ``stored()``: the slots holding a stored fact; ``eff``: each slot's effective
        time."""
        key = (self.version, slots, facts)
        if self._starts is not None and self._starts[0] == key and self.built:
            return self._starts[1]
        if self._starts_asked != key:
            self._starts_asked = key
            return None
        s, p = self.live(stored(), source)
        key = (self.version, slots, facts)
        out = np.full(slots, NEVER, dtype=np.int64)
        np.minimum.at(out, p, eff[s])
        self._starts = (key, out)
        return out
