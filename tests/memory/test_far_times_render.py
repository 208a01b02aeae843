"""Every time the store accepts (strictly between -2**62 and 2**62 ms, §5d) reads as text:
``format_time`` gives ISO 8601 for a year ``datetime`` holds and the number of
milliseconds otherwise, never an exception; so ``render_context`` and ``compile_context``
(a fact's times, a fragment's time) answer for a fact or fragment at the far ends of the
range. The CLI and HTTP doors over such a store: tests/cli/test_far_times.py,
tests/serve/test_http_times.py."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from holomem import ManualClock, Memory, Store
from holomem.api.doors.ui.html import when
from holomem.api.memory.window.render import format_time

FAR = 2**62 - 1  # the largest time the store accepts
T0 = 1_700_000_000_000
#: The first and last milliseconds datetime holds (years 1 and 9999).
FIRST_MS, LAST_MS = -62_135_596_800_000, 253_402_300_799_999

accepted = st.integers(-FAR, FAR)


@given(ms=st.one_of(accepted, st.integers(FIRST_MS - 5_000, FIRST_MS + 5_000),
                    st.integers(LAST_MS - 5_000, LAST_MS + 5_000)))
@example(ms=FAR)
@example(ms=-FAR)
@example(ms=FIRST_MS)
@example(ms=LAST_MS)
@example(ms=0)
def test_every_accepted_time_formats_as_a_date_or_its_milliseconds(ms: int) -> None:
    minute, day, page = format_time(ms), format_time(ms, day=True), when(ms)
    try:
        moment = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    except (OverflowError, OSError, ValueError):
        assert minute == day == f"{ms} ms since the epoch"
        assert page == str(ms)
        return
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\dZ", minute), minute
    assert day == minute[:10]
    assert dt.datetime.fromisoformat(minute.replace("Z", "+00:00")) == moment.replace(
        second=0, microsecond=0)
    assert page.startswith(f"{minute[:10]} {minute[11:16]}:")


def test_none_formats_as_a_dash() -> None:
    assert format_time(None) == format_time(None, day=True) == "-"


def test_a_fact_and_a_fragment_at_the_ends_of_the_range_render(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(T0))
        memory.remember(id="old", text="Alice visited Nice", event_time=-FAR,
                        valid_from=-FAR, valid_to=FAR)
        memory.remember(id="late", text="Alice visited Rome", event_time=FAR)
        results = memory.recall("Alice visited", history="all")
        assert {r.id for r in results} == {"old", "late"}
        block = Memory.render_context(results)
        assert f"event {-FAR} ms since the epoch" in block
        assert f"valid {-FAR} ms since the epoch..{FAR} ms since the epoch" in block
        fragments = [{"id": "far-note", "text": "a note", "time": FAR},
                     {"id": "early-note", "text": "a note", "time": -FAR}]
        compiled = memory.compile_context("Alice visited", 400, fragments=fragments,
                                          recall={"history": "all"})
        assert {d.decision for d in compiled.decisions} == {"kept"}
        assert f"- [far-note] (fragment; time {FAR} ms since the epoch) a note" \
            in compiled.text
        assert f"time {-FAR} ms since the epoch" in compiled.text
        assert f"event {FAR} ms since the epoch" in compiled.text
        called = memory.call("compileContext", {"query": "Alice visited", "budgetTokens": 400,
                                                "fragments": fragments})
        assert called["text"].count("ms since the epoch") >= 2
