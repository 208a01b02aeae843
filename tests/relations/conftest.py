"""Fixtures of the relations tests: a fresh store per test, a manual clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from holomem import ManualClock, Memory, Store


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "store", sync="none")
    yield s
    s.close()


@pytest.fixture
def memory(store: Store, clock: ManualClock) -> Memory:
    return Memory(store, clock=clock)

