"""Group commit's groups, and the parking of the appenders that wait on them.

Owns: :class:`Group` (the frames one leader writes with one ``write`` and makes
durable with one sync) and :class:`Waiters` (threads parked until a group is durable
or one of them is asked to lead). Imports only the standard library; the writer
(:mod:`holomem.log.writer`) decides when to park and when to wake.

A :class:`threading.Condition` does the same job, but a thread woken from it takes
the appender's lock again before it can look at anything, and in batch mode every
appender of a group is woken at once, by the thread still holding that lock: each
wake then costs a second sleep and a second hand-over of the interpreter's lock.
:meth:`Waiters.park` returns without the lock, so an appender whose group is durable
reads that (one attribute, written before the wake) and returns without taking it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_new_lock: Callable[[], threading.Lock] = threading.Lock


class Waiters:
    """Threads parked until woken, each on a lock of its own.

    Every method is called holding the appender's lock (``outer``); :meth:`park`
    releases it and returns without it, :meth:`wait` takes it back before returning.
    """

    __slots__ = ("_parked",)

    def __init__(self) -> None:
        self._parked: list[threading.Lock] = []

    def park(self, outer: threading.Lock) -> None:
        """Release ``outer`` and sleep until woken; return *without* ``outer``."""
        mine = _new_lock()
        mine.acquire()
        self._parked.append(mine)
        outer.release()
        mine.acquire()

    def wait(self, outer: threading.Lock, timeout: float = -1) -> None:
        """Release ``outer``, sleep until woken (or ``timeout`` seconds passed, if
        given), take ``outer`` again."""
        mine = _new_lock()
        mine.acquire()
        self._parked.append(mine)
        outer.release()
        try:
            woken = mine.acquire(True, timeout)
        finally:
            outer.acquire()
        if not woken and mine in self._parked:  # (not woken between the two)
            self._parked.remove(mine)

    def notify(self) -> None:
        """Wake the thread parked longest, if any."""
        if self._parked:
            self._parked.pop(0).release()

    def notify_all(self) -> None:
        parked, self._parked = self._parked, []
        for lock in parked:
            lock.release()


class Group:
    """The frames one leader writes with one ``write`` and makes durable with one sync.

    Its appenders park on ``waiters``. ``first`` and ``last`` are the lowest and
    highest sequence numbers in it so far (``last < first`` while empty); the group is
    open (still taking frames) until a leader takes it, then in flight until a sync
    covering ``last`` returned.
    """

    __slots__ = ("first", "last", "waiters")

    def __init__(self, last: int) -> None:
        self.first = last + 1
        self.last = last
        self.waiters = Waiters()

    def __len__(self) -> int:
        return self.last - self.first + 1
