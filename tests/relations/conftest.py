"""Fixtures of the relations tests: the memory tests' fresh store and manual clock, and
a Memory over them with the default configuration."""

from __future__ import annotations

import pytest

from holomem import ManualClock, Memory, Store
from tests.memory.conftest import clock, store

__all__ = ["clock", "memory", "store"]


@pytest.fixture
def memory(store: Store, clock: ManualClock) -> Memory:
    return Memory(store, clock=clock)
