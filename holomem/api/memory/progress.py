"""Progress of a long call, for whoever asked for it (docs/contract.md §4, "Progress").

Owns: the ``progress`` argument of ``remember_many``, ``import_`` and ``reembed`` —
:func:`callback` checks it, :func:`offset` counts a step's records after those done
before it — and :class:`ProgressLines`, the one reporter that turns those calls into
lines on a stream, at a bounded rate: the CLI's ``export`` and ``import`` use it, and a
caller may pass it. The library writes no progress anywhere unless a caller passes a
callback. Imports the errors only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from holomem.errors import InvalidError

#: Seconds between two lines on a stream that is not a terminal (a log stays short).
EVERY = 2.0
#: Seconds between two redraws of the line a terminal shows in place.
REDRAW = 0.2

Progress = Callable[[int], None]


def callback(value: object) -> Progress | None:
    """A call's ``progress`` argument: None, or a callable given the count done.
    Errors: ``invalid_request`` (anything else), before the call does any work."""
    if value is None or callable(value):
        return value
    raise InvalidError("progress must be a callable taking the number done, or None")


def offset(progress: Progress | None, base: int) -> Progress | None:
    """``progress`` of a step's own count, after the ``base`` done before the step."""
    if progress is None:
        return None
    return lambda n: progress(base + n)


class ProgressLines:
    """A long call's progress as lines on ``stream`` (default: stderr): pass it as the
    call's ``progress``, and :meth:`close` it (or use it in a ``with``) when the call ends.

    Off a terminal, a line ``WHAT: N facts (R/s)`` at most every ``every`` seconds
    (default :data:`EVERY`; 0: at every call), so a log shows a long call as it goes; on
    a terminal, one line rewritten in place at most every :data:`REDRAW` seconds unless
    ``every`` is given. Once a line was shown, :meth:`close` adds the last one,
    ``WHAT: N facts in S s``; a call that ends before the first line is due shows
    nothing. ``clock`` gives the seconds (``time.monotonic``; tests inject their own).
    Errors: ``invalid_request`` (``every`` not a number of seconds, 0 or more).
    """

    def __init__(self, what: str, stream: TextIO | None = None, *,
                 every: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if every is not None and (isinstance(every, bool) or not isinstance(every, int | float)
                                  or not 0 <= every < float("inf")):
            raise InvalidError("every must be a number of seconds, 0 or more")
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.every = every if every is not None else REDRAW if self.tty else EVERY
        self.clock = clock
        self.start = self.last = clock()
        self.done = 0
        self.shown = False

    def __call__(self, done: int) -> None:
        self.done = done
        now = self.clock()
        if now - self.last < self.every:
            return
        self.last = now
        elapsed = now - self.start
        rate = f" ({done / elapsed:,.0f}/s)" if elapsed > 0 else ""
        self._line(f"{self.what}: {done:,} facts{rate}", last=False)

    def close(self) -> None:
        """The last line, if any was shown."""
        if self.shown:
            self._line(f"{self.what}: {self.done:,} facts in {self.clock() - self.start:.1f} s",
                       last=True)
            self.shown = False

    def _line(self, text: str, last: bool) -> None:
        if self.tty:
            print(f"\r{text}\x1b[K", end="\n" if last else "", file=self.stream, flush=True)
        else:
            print(text, file=self.stream, flush=True)
        self.shown = True

    def __enter__(self) -> ProgressLines:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
