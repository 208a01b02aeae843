"""Short words to term ids a batch at a time: an open-addressing hash table in numpy.

Owns: the exact key of a word of at most :data:`KEY_BYTES` bytes found in a byte
string (its bytes read as two little-endian 64-bit integers, zero-padded — no letter or
digit is a zero byte, so a key stands for one word and one word only), and a table
from such keys to term ids (linear probing, at most half full), looked up and filled
a column at a time. Imports numpy and the standard library.

BM25's vocabulary (:mod:`holomem.projections.vocabulary`) keeps its word table, a
dict, as the truth; this table is a cache of it for the words a bulk load looks up,
so that a batch's hundreds of thousands of words are found without making a Python
string of each. A word missing here is looked up there (and then added here); nothing
is ever removed.

Each table hashes with its own random odd multipliers (multiply-shift), as Python
seeds its string hash: with multipliers known in advance, words can be picked offline
that all start their probe at one place, and a text of such words makes linear
probing's work grow with their square (8,000 of them: 0.3 s an insert and again a
lookup, against 1 ms for as many other words). Only where a key sits depends on them;
what the table answers does not.
"""

from __future__ import annotations

import secrets

import numpy as np

#: Words longer than this have no key (they are looked up one at a time).
KEY_BYTES = 16
_MIN_SIZE = 1 << 12
#: The low ``8 * n`` bits of a 64-bit integer, for n = 0..8.
_LOW = np.array([(1 << (8 * n)) - 1 for n in range(9)], dtype=np.uint64)


def word_keys(raw: bytes, starts: np.ndarray, lengths: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The keys (low and high halves) of the words of ``raw`` at ``starts`` with
    ``lengths``; a word longer than :data:`KEY_BYTES` gets the key of its first
    :data:`KEY_BYTES` bytes (the caller must not look it up)."""
    padded = raw + bytes(2 * 8)
    # Every byte offset read as the start of a little-endian 64-bit integer.
    at = np.ndarray(shape=(len(raw) + 9,), dtype="<u8", buffer=padded, strides=(1,))
    low = at[starts] & _LOW[np.minimum(lengths, 8)]
    high = at[starts + 8] & _LOW[np.clip(lengths - 8, 0, 8)]
    return low, high


class WordTable:
    """Keys (:func:`word_keys`) to term ids."""

    def __init__(self) -> None:
        self._low = np.zeros(_MIN_SIZE, dtype=np.uint64)
        self._high = np.zeros(_MIN_SIZE, dtype=np.uint64)
        self._tid = np.full(_MIN_SIZE, -1, dtype=np.int32)  # -1: an empty place
        self.count = 0
        # This table's own hash (see the module docstring).
        self._mix = (np.uint64(secrets.randbits(64) | 1), np.uint64(secrets.randbits(64) | 1))

    def _home(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        bits = len(self._tid).bit_length() - 1
        mix_low, mix_high = self._mix
        mixed = (low * mix_low) ^ (high * mix_high)
        return (mixed >> np.uint64(64 - bits)).astype(np.intp)

    def lookup(self, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """The term id of each key, -1 where the table does not hold it (int32)."""
        mask = len(self._tid) - 1
        at = self._home(low, high)
        out: np.ndarray = self._tid[at]
        # Places held by another key: probe on until the key or an empty place.
        on = np.flatnonzero((out >= 0) & ((self._low[at] != low) | (self._high[at] != high)))
        while len(on):
            at[on] = (at[on] + 1) & mask
            got = out[on] = self._tid[at[on]]
            on = on[(got >= 0) & ((self._low[at[on]] != low[on])
                                  | (self._high[at[on]] != high[on]))]
        return out

    def insert(self, low: np.ndarray, high: np.ndarray, tids: np.ndarray) -> None:
        """Add distinct keys the table does not hold, with their term ids."""
        if 2 * (self.count + len(tids)) > len(self._tid):
            self._grow(self.count + len(tids))
        self._place(low, high, tids.astype(np.int32))
        self.count += len(tids)

    def _place(self, low: np.ndarray, high: np.ndarray, tids: np.ndarray) -> None:
        mask = len(self._tid) - 1
        at = self._home(low, high)
        todo = np.arange(len(tids))
        while len(todo):
            here = at[todo]
            free = self._tid[here] < 0
            # One key per empty place: the first that asks for it; the rest probe on.
            places, first = np.unique(here[free], return_index=True)
            won = todo[free][first]
            self._low[places], self._high[places] = low[won], high[won]
            self._tid[places] = tids[won]
            placed = np.zeros(len(tids), dtype=bool)
            placed[won] = True
            todo = todo[~placed[todo]]
            at[todo] = (at[todo] + 1) & mask

    def _grow(self, need: int) -> None:
        held = np.flatnonzero(self._tid >= 0)
        low, high, tids = self._low[held], self._high[held], self._tid[held]
        size = len(self._tid)
        while 2 * need > size:
            size *= 4
        self._low = np.zeros(size, dtype=np.uint64)
        self._high = np.zeros(size, dtype=np.uint64)
        self._tid = np.full(size, -1, dtype=np.int32)
        self._place(low, high, tids)

    @property
    def nbytes(self) -> int:
        return int(self._low.nbytes + self._high.nbytes + self._tid.nbytes)
