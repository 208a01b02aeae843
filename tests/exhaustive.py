"""The suite's two forms: a deterministic sample in CI, every case behind one flag.

Owns: whether this run is the exhaustive one (``pytest --exhaustive``, which sets
``HOLOMEM_EXHAUSTIVE=1``; the variable alone does the same), and the small rules the
matrices sample by. Imports: the standard library only.

The matrices that try every bit of every byte, every crash point at every hit count,
every property with many examples, run in CI as a fixed sample that still reaches every
region of what they test (every field of every structure, every crash point, every
fault, every mode), and whole with the flag. The sample is a function of positions, not
of a random draw: a failure in CI names a case that fails again on the next run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

#: Set by ``pytest --exhaustive`` (tests/conftest.py), or by hand.
ENV = "HOLOMEM_EXHAUSTIVE"


def on(*aliases: str) -> bool:
    """Whether this run is exhaustive: the flag, or one of the older variables that
    asked for one matrix whole (``aliases``, e.g. ``HOLOMEM_CRASH_SOAK``)."""
    return any(os.environ.get(name, "") not in ("", "0") for name in (ENV, *aliases))


def examples(ci: int, full: int) -> int:
    """A Hypothesis ``max_examples``: ``ci`` in CI, ``full`` in the exhaustive run."""
    return full if on() else ci


def bits(offset: int, phase: int = 0) -> Iterable[int]:
    """The bits of the byte at ``offset`` to flip: all eight in the exhaustive run; in CI
    one, chosen by position, so that every eight consecutive bytes flip all eight bit
    positions between them (callers add a ``phase`` that moves from one structure to the
    next, so that the same byte of eight structures flips eight different bits)."""
    return range(8) if on() else ((offset + phase) % 8,)


def strided(offsets: Iterable[int], stride: int, phase: int = 0) -> list[int]:
    """Every offset in the exhaustive run; in CI every ``stride``-th one, starting at
    ``phase`` (callers shift the phase from one structure to the next, so that across
    structures every position modulo ``stride`` is reached)."""
    items = list(offsets)
    if on() or stride <= 1:
        return items
    return items[phase % stride::stride]
