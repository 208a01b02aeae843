"""A clock's reading is a time the store will hold: a clock that gives anything else
(a float, None, a time outside -2**62..2**62) is refused with ``invalid_request`` before
anything is written, and the store opens as before (docs/contract.md §5d)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import InvalidError, ManualClock, Memory, Store

LIMIT = 2**62


class Fixed:
    """A caller's own clock that always reads ``value``."""

    def __init__(self, value: object) -> None:
        self.value = value

    def now_ms(self) -> object:
        return self.value


ODD = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(), st.text(max_size=5), st.booleans(),
    st.integers(min_value=LIMIT), st.integers(max_value=-LIMIT),
    st.just(time.time() * 1000),  # the usual mistake: time.time() in milliseconds
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reading=ODD)
def test_a_clock_reading_that_is_no_time_is_refused_and_writes_nothing(
        tmp_path: Path, reading: object) -> None:
    path = tmp_path / "s"
    with Store.open(path, sync="none") as store:
        Memory(store, clock=ManualClock(1_000)).remember("kept", id="kept")
        before = store.revision
        memory = Memory(store).with_clock(Fixed(reading))  # type: ignore[arg-type]
        with pytest.raises(InvalidError, match="clock"):
            memory.remember("not written")
        with pytest.raises(InvalidError, match="clock"):
            memory.recall("kept")
        assert store.revision == before
    with Store.open(path, sync="none") as again:  # and the store still opens
        assert [r.id for r in Memory(again).recall("kept")] == ["kept"]


def test_a_manual_clock_takes_only_whole_milliseconds() -> None:
    for bad in (1.5e12, None, "1000", True):
        with pytest.raises(InvalidError):
            ManualClock(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidError):
            ManualClock().set(bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidError):
            ManualClock().advance(bad)  # type: ignore[arg-type]
