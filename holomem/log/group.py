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
reads that (one attribute, written before the wake) and returns without taking it;
and a group's parked appenders are woken one after another, each by the one before
it, so that they come to the interpreter's lock one at a time (see :class:`Waiters`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

_new_lock: Callable[[], threading.Lock] = threading.Lock


class Waiters:
    """Threads parked until woken, each on a lock of its own.

    Two kinds of waits. :meth:`wait` (an appender that may be asked to lead the group:
    its gatherer, or one that came while a write or sync ran) is woken by
    :meth:`notify` (one) or :meth:`wake_all`, and takes the appender's lock again.
    :meth:`park` (an appender waiting for its group to be durable: taken by a leader,
    or gathered by another appender who will lead it) is woken once, by
    :meth:`wake_all`, and returns without the lock.

    Parked threads are woken one after another, not all at once: :meth:`wake_all`
    wakes the first, and each parked thread, once woken, wakes the next. Woken
    together, they would all run at once to queue for the interpreter's lock (one more
    sleep and wake-up each, while the thread that woke them still holds it), and only
    one of them can run Python at a time anyway. Woken in turn, each is woken while its
    predecessor runs and takes the interpreter's lock when that one blocks.

    Every method but :meth:`park`'s passing on is called holding the appender's lock
    (``outer``).
    """

    __slots__ = ("_parked", "_waiting", "_woken")

    def __init__(self) -> None:
        self._waiting: list[threading.Lock] = []
        #: parked threads' locks in the order they came; an entry is None once its
        #: thread left without being woken. Fixed once :meth:`wake_all` ran.
        self._parked: list[threading.Lock | None] = []
        self._woken = False

    def __len__(self) -> int:
        """Threads waiting or parked here and not yet woken."""
        if self._woken:
            return len(self._waiting)
        return len(self._waiting) + sum(lock is not None for lock in self._parked)

    def park(self, outer: threading.Lock) -> None:
        """Release ``outer`` and sleep until :meth:`wake_all`; return *without*
        ``outer``, having woken the thread parked after this one."""
        # Nobody parks after the wake: a thread parked then would never be woken.
        assert not self._woken
        mine = _new_lock()
        mine.acquire()
        place = len(self._parked)
        self._parked.append(mine)
        outer.release()
        try:
            mine.acquire()
            self._wake_after(place)
        except BaseException:
            # Left early (an exception from a signal handler, while parked or once woken
            # but before the next one was): the chain must not stop here. Before the
            # wake, this place is skipped; after it (the wake may not have reached this
            # thread yet), the next one is woken now -- perhaps again, which is harmless.
            with outer:
                before_the_wake = not self._woken
                if before_the_wake:
                    self._parked[place] = None
            if not before_the_wake:
                self._wake_after(place)
            raise

    def _wake_after(self, place: int) -> None:
        """Wake the first thread still parked after ``place`` (called once per place,
        after :meth:`wake_all`, when ``_parked`` no longer changes)."""
        parked = self._parked
        for i in range(place + 1, len(parked)):
            lock = parked[i]
            if lock is not None:
                # A thread interrupted once woken passes the wake on again: its
                # successor's lock may be released already (and is never used again).
                with contextlib.suppress(RuntimeError):
                    lock.release()
                return

    def wait(self, outer: threading.Lock, timeout: float = -1) -> None:
        """Release ``outer``, sleep until woken (or ``timeout`` seconds passed, if
        given), take ``outer`` again."""
        mine = _new_lock()
        mine.acquire()
        self._waiting.append(mine)
        outer.release()
        try:
            woken = mine.acquire(True, timeout)
        finally:
            outer.acquire()
        if not woken and mine in self._waiting:  # (not woken between the two)
            self._waiting.remove(mine)

    def notify(self) -> None:
        """Wake the thread waiting longest (:meth:`wait`), if any."""
        if self._waiting:
            self._waiting.pop(0).release()

    def wake_all(self) -> None:
        """Wake every waiting thread, and the parked ones in turn. Once only for the
        parked: no thread may park after it."""
        waiting, self._waiting = self._waiting, []
        for lock in waiting:
            lock.release()
        if not self._woken:
            self._woken = True
            self._wake_after(-1)


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
