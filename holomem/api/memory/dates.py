"""Dates in a question: the time windows a text names (docs/contract.md §4g); and the
moment a stored time stands for.

Owns: :func:`moment` — a time in milliseconds as a UTC ``datetime``, or ``None`` when
its year is outside 1..9999 (the store accepts times far beyond that, §5d): the one
guard every reading of a stored time as a calendar date goes through. And
:func:`windows` — reading absolute dates ("16 November 2023", "May 8, 2023",
"2023-11-16"), months ("in May 2023", "in June", a month without a year being the
latest one that has begun at the reference time), years ("in 2022") and relative
expressions ("today", "yesterday", "last night", "this week", "last week", "last
weekend", "last month", "last year", "last Friday", "three days ago", "2 weeks
ago") as half-open windows ``[start, end)`` of milliseconds since the epoch, in UTC,
relative ones resolved against a reference time (recall's ``as_of``, else now).
Imports nothing of holomem: stdlib only.

Bounds: only the first :data:`MAX_CHARS` characters are read and at most
:data:`MAX_WINDOWS` windows come back, so the work is bounded whatever the text.
Reading is deliberately narrow: English, no times of day, no ranges; what it cannot
read it leaves out (a question without a date it reads gets no window).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re

#: The characters of a text that are read, and the most windows returned.
MAX_CHARS = 2048
MAX_WINDOWS = 8

_MONTHS = {name: n for n, names in enumerate(
    (("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
     ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
     ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
     ("december", "dec")), start=1) for name in names}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5,
            "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11,
            "twelve": 12, "couple of": 2, "few": 3}
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(_NUMBERS) + r")"
#: Patterns, most specific first; a later one never reads text an earlier one read.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(p, re.IGNORECASE)) for kind, p in (
        ("day", r"\b(?P<year>(?:19|20)\d\d)-(?P<month>\d\d)-(?P<day>\d\d)\b"),
        ("day", rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b"),
        ("day", rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b"),
        ("month", rf"\b{_MONTH},?\s+{_YEAR}\b"),
        ("year", rf"\b(?:in|during|of|since|by|throughout)\s+{_YEAR}\b"),
        ("ago", rf"\b{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
        ("relative", r"\b(?P<which>today|tonight|yesterday|last\s+night|"
                     r"(?:this|last|past)\s+(?:week(?:end)?|month|year))\b"),
        ("weekday", r"\blast\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b"),
        # A month without a year only after a word that makes it a date ("may" is
        # also a verb).
        ("bare_month", rf"\b(?:in|during|early|late|mid|since|until|last|this|of)[-\s]+"
                       rf"{_MONTH}\b"),
    ))

_DAY_MS = 86_400_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: The letters other than ASCII ones that an ignore-case pattern takes for an ASCII
#: letter ("August" with a long s, U+017F), as that letter: what a pattern read is then
#: always one of the names above.
_ASCII_LETTERS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s",
                                "\u212a": "k"})


def _fold(text: str) -> str:
    """``text`` in lower case, each letter a pattern took for an ASCII one as that
    letter, its runs of white space one space."""
    return " ".join(text.translate(_ASCII_LETTERS).lower().split())


def _ms(d: dt.date) -> int:
    return int(dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp() * 1000)


def _month_start(year: int, month: int) -> dt.date:
    while month < 1:
        year, month = year - 1, month + 12
    while month > 12:
        year, month = year + 1, month - 12
    return dt.date(year, month, 1)


def _month(year: int, month: int) -> tuple[int, int]:
    # (the end counted in days from the start: December 9999 ends in a year no
    # ``date`` holds)
    start = _month_start(year, month)
    return _ms(start), _ms(start) + calendar.monthrange(start.year, start.month)[1] * _DAY_MS


def _year(year: int) -> tuple[int, int]:
    start = _ms(dt.date(year, 1, 1))
    return start, start + (366 if calendar.isleap(year) else 365) * _DAY_MS


def _day(d: dt.date) -> tuple[int, int]:
    return _ms(d), _ms(d) + _DAY_MS


def _month_number(text: str) -> int:
    return int(text) if text.isdigit() else _MONTHS[_fold(text).rstrip(".")]


def _count(text: str) -> int:
    text = _fold(text)
    return int(text) if text.isdigit() else _NUMBERS[text]


def _relative(which: str, today: dt.date) -> tuple[int, int]:
    which = _fold(which).replace("past ", "last ")
    monday = today - dt.timedelta(days=today.weekday())
    if which in ("today", "tonight"):
        return _day(today)
    if which in ("yesterday", "last night"):
        return _day(today - dt.timedelta(days=1))
    if which == "this week":
        return _ms(monday), _ms(monday) + 7 * _DAY_MS
    if which == "last week":
        return _ms(monday) - 7 * _DAY_MS, _ms(monday)
    if which in ("this weekend", "last weekend"):
        saturday = monday + dt.timedelta(days=5)
        if which == "last weekend" or saturday > today:
            saturday -= dt.timedelta(days=7)
        return _ms(saturday), _ms(saturday) + 2 * _DAY_MS
    if which == "this month":
        return _month(today.year, today.month)
    if which == "last month":
        return _month(today.year, today.month - 1)
    if which == "this year":
        return _year(today.year)
    assert which == "last year", which
    return _year(today.year - 1)


def _ago(count: int, unit: str, today: dt.date) -> tuple[int, int] | None:
    if unit == "day":
        return _day(today - dt.timedelta(days=count))
    if unit == "week":  # the week around that day
        centre = today - dt.timedelta(days=7 * count)
        return _ms(centre) - 3 * _DAY_MS, _ms(centre) + 4 * _DAY_MS
    if unit == "month":
        return _month(today.year, today.month - count)
    year = today.year - count
    return _year(year) if year >= 1 else None


def _read(kind: str, m: re.Match[str], today: dt.date | None) -> tuple[int, int] | None:
    """The window ``m`` names, or None; ``today`` None: only an absolute date's."""
    g = m.groupdict()
    if kind == "day":
        return _day(dt.date(int(g["year"]), _month_number(g["month"]), int(g["day"])))
    if kind == "month":
        return _month(int(g["year"]), _month_number(g["month"]))
    if kind == "year":
        return _year(int(g["year"]))
    if today is None:
        return None
    if kind == "ago":
        return _ago(_count(g["count"]), _fold(g["unit"]), today)
    if kind == "relative":
        return _relative(g["which"], today)
    if kind == "weekday":
        back = (today.weekday() - _WEEKDAYS.index(_fold(g["weekday"]))) % 7 or 7
        return _day(today - dt.timedelta(days=back))
    month = _month_number(g["month"])  # bare_month: the latest such month begun by today
    year = today.year if month <= today.month else today.year - 1
    return _month(year, month)


def moment(ms: int) -> dt.datetime | None:
    """``ms`` (milliseconds since the epoch) as a moment in UTC, or ``None`` if it falls
    outside the years ``datetime`` can hold (1 to 9999)."""
    try:  # (exact: ``fromtimestamp(ms / 1000)`` goes through a float)
        return _EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return None


def windows(text: str, at_ms: int) -> list[tuple[int, int]]:
    """The windows ``[start, end)`` (ms since the epoch, UTC) of the dates ``text``
    names, in the order they appear; relative ones read against ``at_ms`` (and left
    out when its year is outside 1 to 9999). A date that does not exist ("31 February
    2023") is left out."""
    text = text[:MAX_CHARS]
    at = moment(at_ms)
    today = None if at is None else at.date()  # (None: only absolute dates are read)
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, tuple[int, int]]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(s < m.end() and m.start() < e for s, e in taken):
                continue
            taken.append(m.span())  # (read or not: no later pattern reads a part)
            try:
                window = _read(kind, m, today)
            except (ValueError, OverflowError):
                continue
            if window is not None and window not in (w for _, w in found):
                found.append((m.start(), window))
    found.sort()
    return [w for _, w in found][:MAX_WINDOWS]
