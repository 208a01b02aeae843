"""A time in a JSON request may be milliseconds or an ISO 8601 string, wherever a time is
taken (issue 15, item 4): both give the same answer, and a string that is no time is
``invalid_request`` naming the field. Through a real ``holomem serve``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import headers, start

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: 1900-01-01 to 2200-01-01: the seeded facts' times spread over it, so every bound bites.
LOW, HIGH = -2_208_988_800_000, 7_258_118_400_000
SEEDED = 24

Build = Callable[[Any], tuple[str, dict[str, Any]]]

#: Every place a request takes a time: (the field as an error names it, op and body).
PLACES: list[tuple[str, Build]] = [
    ("asOf", lambda t: ("recall", {"query": "fact", "asOf": t, "k": 50})),
    ("knownAt", lambda t: ("recall", {"query": "fact", "knownAt": t, "k": 50})),
    ("asOf", lambda t: ("explain", {"query": "fact", "id": "s-3", "asOf": t})),
    ("filter.eventAfter", lambda t: ("recall", {"query": "fact", "k": 50,
                                                "filter": {"eventAfter": t}})),
    ("filter.$and[0].eventBefore", lambda t: (
        "recall", {"query": "fact", "k": 50, "filter": {"$and": [{"eventBefore": t}]}})),
    ("filter.ingestedBefore", lambda t: (
        "explain", {"query": "fact", "id": "s-5", "asOf": HIGH,
                    "filter": {"ingestedBefore": t}})),
    ("filter.eventBefore", lambda t: ("list", {"filter": {"eventBefore": t}})),
    ("filter.ingestedAfter", lambda t: ("list", {"filter": {"ingestedAfter": t}})),
    ("filter.$or[1].eventAfter", lambda t: (
        "list", {"filter": {"$or": [{"metadata": {"i": 3}}, {"eventAfter": t}]}})),
    ("filter.eventAfter", lambda t: ("contradict", {"filter": {"eventAfter": t}})),
    ("scope.eventBefore", lambda t: ("forget", {"scope": {"eventBefore": t},
                                                "dryRun": True})),
    ("scope.ingestedBefore", lambda t: ("forget", {"scope": {"ingestedBefore": t},
                                                   "dryRun": True})),
]
#: Places that write: the same fact either way (one id, created once, one record).
WRITES: list[tuple[str, Build]] = [
    ("eventTime", lambda t: ("remember", {"text": "happened", "eventTime": t})),
    ("validFrom", lambda t: ("remember", {"text": "begins", "subject": "w/from",
                                          "validFrom": t})),
    ("validTo", lambda t: ("remember", {"text": "ends", "validTo": t})),
    ("facts[0].eventTime", lambda t: ("remember", {"facts": [{"text": "batch",
                                                              "eventTime": t}]})),
]


def iso(ms: int, form: str, offset_minutes: int) -> str:
    """``ms`` written as ISO 8601: with an offset, with Z, or without one (UTC)."""
    utc = EPOCH + dt.timedelta(milliseconds=ms)
    if form == "Z":
        return utc.replace(tzinfo=None).isoformat(timespec="milliseconds") + "Z"
    if form == "naive":
        return utc.replace(tzinfo=None).isoformat(timespec="milliseconds")
    local = utc.astimezone(dt.timezone(dt.timedelta(minutes=offset_minutes)))
    return local.isoformat(timespec="milliseconds" if form == "ms" else "auto")


def seed(http: httpx.Client) -> None:
    step = (HIGH - LOW) // SEEDED
    facts = [{"id": f"s-{i}", "text": f"fact number {i} about the topic",
              "subject": f"topic/{i % 4}", "eventTime": LOW + i * step,
              "validFrom": LOW + i * step, "metadata": {"i": i}} for i in range(SEEDED)]
    r = http.post("/api/v1/memory/remember", json={"facts": facts})
    assert r.status_code == 200, r.text


def answer(http: httpx.Client, op: str, body: dict[str, Any]) -> httpx.Response:
    return http.post(f"/api/v1/memory/{op}", json=body)


def test_milliseconds_and_the_same_time_in_iso_8601_answer_identically(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")
    try:
        with httpx.Client(base_url=srv.url, headers=headers(), timeout=30) as http:
            seed(http)

            @settings(max_examples=60, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])
            @given(ms=st.integers(LOW, HIGH),
                   form=st.sampled_from(["ms", "auto", "Z", "naive"]),
                   offset=st.integers(-14 * 60, 14 * 60))
            def check(ms: int, form: str, offset: int) -> None:
                text = iso(ms, form, offset)
                for _, build in PLACES:
                    op, by_ms = build(ms)
                    _, by_iso = build(text)
                    a, b = answer(http, op, by_ms), answer(http, op, by_iso)
                    assert a.status_code == 200, (op, a.text)
                    assert b.json() == a.json(), (op, text)
                for _, build in WRITES:
                    op, by_ms = build(ms)
                    _, by_iso = build(text)
                    first = answer(http, op, by_ms).json()["remembered"][0]
                    again = answer(http, op, by_iso).json()["remembered"][0]
                    assert (again["id"], again["created"]) == (first["id"], False), text
                    assert again["ingestTime"] == first["ingestTime"]

            check()
    finally:
        srv.stop()


def not_a_time(text: str) -> bool:
    try:
        dt.datetime.fromisoformat(text)
    except ValueError:
        return True
    return False


def test_a_string_that_is_no_time_is_invalid_request_naming_the_field(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")
    try:
        with httpx.Client(base_url=srv.url, headers=headers(), timeout=30) as http:
            seed(http)

            @settings(max_examples=25, deadline=None,
                      suppress_health_check=[HealthCheck.too_slow])
            @given(bad=st.one_of(st.text(st.characters(exclude_categories=["Cs"]), max_size=40),
                                st.sampled_from(
                ["yesterday", "2024-13-01", "2024-05-01T25:00", "1714564800000",
                 "2024-05-01T12:00:00+25:00", " ", "2024-05-01" + "0" * 100])).filter(not_a_time))
            def check(bad: str) -> None:
                for field, build in PLACES + WRITES:
                    op, body = build(bad)
                    r = answer(http, op, body)
                    assert r.status_code == 422, (field, bad, r.text)
                    error = r.json()["error"]
                    assert error["code"] == "invalid_request"
                    assert error["message"].startswith(f"{field}: "), (field, error)
                    assert "is not a time" in error["message"]

            check()
            # Nothing was written by any refused request.
            listed = http.post("/api/v1/memory/list", json={"limit": 1000}).json()["facts"]
            assert len(listed) == SEEDED
    finally:
        srv.stop()


def test_times_at_the_ends_of_the_range_compile_into_a_context(tmp_path: Path) -> None:
    """A fact's times and a fragment's time anywhere the contract accepts (±(2**62 - 1)
    ms, years datetime cannot hold) render: compileContext answers 200 with the number
    of milliseconds in the block (tests/memory/test_far_times_render.py)."""
    far = 2**62 - 1
    srv = start(tmp_path / "data")
    try:
        with httpx.Client(base_url=srv.url, headers=headers(), timeout=30) as http:
            stored = answer(http, "remember", {"text": "Alice visited Nice", "eventTime": -far,
                                               "validFrom": -far, "validTo": far})
            assert stored.status_code == 200, stored.text
            r = answer(http, "compileContext", {
                "query": "Alice visited", "budgetTokens": 300,
                "fragments": [{"id": "fr1", "text": "some note", "time": far}]})
            assert r.status_code == 200, r.text
            text = r.json()["text"]
            assert f"(fragment; time {far} ms since the epoch) some note" in text
            assert f"event {-far} ms since the epoch" in text
    finally:
        srv.stop()
