"""What every projection shares: slots, changes, growable arrays, the record store.

Owns: the slot model and the small interfaces between projections and the layers
around them. Imports numpy and :mod:`holomem.errors`.

Every live document occupies one *slot*, an integer handed out in the order
documents are written (a replaced document gets a new slot). Slots index the
per-document numpy arrays of every projection, and their order is the store's
tie-break order.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")


class Change(NamedTuple):
    """What an event did to the slots: ``new`` was filled, ``old`` was vacated (-1: none)."""

    new: int
    old: int


NO_CHANGE = Change(-1, -1)


#: Values a GrowArray queues before it copies them into its array.
TAIL = 4096


class GrowArray:
    """A numpy array that grows by doubling; ``view()`` is the filled prefix.

    ``append`` only queues the value in a list (cheap, which matters during
    replay); the queue is copied into the array, all at once, by the next call
    that reads or writes the array, or when it reaches ``TAIL`` values (a queue
    of Python objects costs several times the array's bytes per value, so it
    never grows with the store: a replay that reads nothing would otherwise
    leave every value of a column queued).

    Appends come from one writer at a time, but reads — and so the copy of the queue
    — come from any thread (a reader holding the store's state lock, a writer's
    ``commit`` build holding only the write lock), so the copy runs under a lock of
    its own: two copies racing through a growth would keep one's array without the
    other's values.
    """

    __slots__ = ("_data", "_filled", "_lent", "_mu", "_tail", "n")

    def __init__(self, dtype: npt.DTypeLike, capacity: int = 1024, width: int = 0) -> None:
        shape = (capacity, width) if width else (capacity,)
        self._data: np.ndarray = np.zeros(shape, dtype=dtype)
        self._filled = 0
        self._tail: list[object] = []
        self._mu = threading.Lock()
        #: :meth:`lend` gave out the filled prefix: the next change of it copies first.
        self._lent = False
        self.n = 0

    @classmethod
    def of(cls, values: np.ndarray, dtype: npt.DTypeLike) -> GrowArray:
        """A growable array holding a copy of ``values`` (a checkpoint's restore)."""
        values = np.asarray(values, dtype=dtype)
        width = values.shape[1] if values.ndim == 2 else 0
        out = cls(dtype, max(16, len(values)), width)
        out.extend(values)
        return out

    def reserve(self, n: int, spare: int = 0) -> None:
        """Room for ``n`` values; when the array must grow for them, room for ``spare``
        more as well (a bulk load: the next run of the same size then lands without a
        copy of the whole array into fresh memory)."""
        if n > len(self._data):
            self._reserve(n + spare)

    def _reserve(self, n: int) -> None:
        if n > len(self._data):
            cap = max(n, len(self._data) * 2)
            shape = (cap, *self._data.shape[1:])
            grown = np.zeros(shape, dtype=self._data.dtype)
            grown[: self._filled] = self._data[: self._filled]
            self._data = grown

    def _flush(self) -> None:
        if self._tail:
            with self._mu:
                if self._tail:
                    self._reserve(self.n)
                    self._data[self._filled : self.n] = self._tail
                    self._tail = []
                    self._filled = self.n

    def append(self, value: object) -> int:
        self._tail.append(value)
        self.n += 1
        if len(self._tail) >= TAIL:
            self._flush()
        return self.n - 1

    def extend(self, values: np.ndarray) -> None:
        self._flush()
        self._reserve(self.n + len(values))
        self._data[self.n : self.n + len(values)] = values
        self.n += len(values)
        self._filled = self.n

    def grow(self, count: int) -> np.ndarray:
        """``count`` values added at the end, as a writable view of them for the caller
        to fill before anything reads them (:meth:`extend` without a source array: a
        copy fewer)."""
        self._flush()
        self._reserve(self.n + count)
        out = self._data[self.n : self.n + count]
        self.n += count
        self._filled = self.n
        return out

    def view(self) -> np.ndarray:
        self._flush()
        return self._data[: self.n]

    def lend(self) -> np.ndarray | Later:
        """The values without a copy, for a reader that keeps them (a checkpoint's
        snapshot): the array's filled prefix, which never changes afterwards because
        the next in-place change copies the array first (appends go past its end).
        Values still queued are copied instead of flushed (a flush may grow the
        array, a copy of all of it, and this runs under the state lock): then the
        answer is a :class:`Later` that joins the two."""
        with self._mu:
            prefix = self._data[: self._filled]
            tail = list(self._tail)
            self._lent = True
        if not tail:
            return prefix
        dtype, row = self._data.dtype, self._data.shape[1:]

        def joined() -> np.ndarray:
            rest = np.array(tail, dtype=dtype).reshape(-1, *row)
            return np.concatenate([prefix, rest])
        return Later(joined)

    def __getitem__(self, i: int) -> Any:
        if self._tail:
            self._flush()
        return self._data[i]

    def item(self, i: int) -> Any:
        """Element ``i`` as a Python scalar (the fast way to read one value)."""
        if self._tail:
            self._flush()
        return self._data.item(i)

    def __setitem__(self, i: int, value: object) -> None:
        if i < 0:
            i += self.n
        if i >= self._filled:  # still queued: change it in the queue
            self._tail[i - self._filled] = value
            return
        if self._lent:
            self._data = self._data.copy()
            self._lent = False
        self._data[i] = value

    def __len__(self) -> int:
        return self.n

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._data.dtype

    @property
    def nbytes(self) -> int:
        return int(self._data.nbytes)


class Kept(NamedTuple):
    """The documents a compaction keeps of a generation, and where each goes.

    ``slots``: the old generation's live slots, ascending — the new generation's slot
    ``i`` holds the document of old slot ``slots[i]`` (a compaction writes the live
    documents again in slot order); ``new``: for each old slot, its new slot (-1: not
    kept). A projection's ``compacted`` fills a fresh projection from the old one with
    exactly what a replay of the compacted journal would build.
    """

    slots: np.ndarray
    new: np.ndarray

    @classmethod
    def live(cls, alive: np.ndarray) -> Kept:
        """The live slots of a catalog whose liveness is ``alive``."""
        slots = np.flatnonzero(alive)
        new = np.full(len(alive), -1, dtype=np.int64)
        new[slots] = np.arange(len(slots), dtype=np.int64)
        return cls(slots, new)


def compaction_check(holds: bool, what: str) -> None:
    """Raise unless ``holds``: one of a compaction's checks that the projections it
    renumbered are whole. Unlike ``assert`` it runs under ``python -O`` too: a
    compaction that fails one is abandoned before its generation is switched in (the
    old generation stays, answering as before), rather than serving a state that a
    replay of its journal would not build."""
    if not holds:
        raise AssertionError(f"compaction: {what}")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection inside the block: a snapshot or a restore makes
    many small containers, and each time they pass the collector's threshold it would
    walk the whole heap (a second at a million facts, all of it under the lock)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


#: A projection's state as plain values, for a checkpoint: each value a numpy array,
#: something msgpack encodes (None, bool, int, float, str, bytes, lists and maps of
#: these) or a :class:`Later` that gives one. Taken under the store's state lock, so
#: it must be cheap: arrays whose filled rows never change may be shared, the ones
#: changed in place are lent (:meth:`GrowArray.lend`) or copied, and whatever takes
#: time to build is a :class:`Later` (each ``snapshot`` says which).
#: ``restore`` fills a fresh projection from one, with every Later resolved.
Snapshot = dict[str, Any]


class Later:
    """A snapshot value computed when the snapshot is encoded, outside the lock:
    ``fn`` may read only what no writer changes afterwards (state the snapshot
    lent, shared or copied)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def __call__(self) -> Any:
        return self.fn()

    @staticmethod
    def once(fn: Callable[[], T]) -> Callable[[], T]:
        """``fn``, computed on the first call only (for two values built together)."""
        done: list[T] = []

        def first() -> T:
            if not done:
                done.append(fn())
            return done[0]
        return first


class RecordStore(Protocol):
    """The file a projection may write records to (implemented in ``holomem.log``).

    Offsets and bodies are the projection's; the path, the key and the syscalls are
    not. A record read back that is not exactly what was written reads as None.
    """

    first_offset: int

    def record_size(self, body_length: int) -> int:
        """Bytes a record of a body of ``body_length`` takes: the length plus a constant."""
        ...

    def encode(self, offset: int, seq: int, body: bytes) -> bytes: ...

    def encode_run(self, offset: int, seq: int, bodies: list[bytes]) -> bytes:
        """:meth:`encode` of each of ``bodies`` placed back to back from ``offset``, joined."""
        ...

    def write(self, offset: int, data: bytes) -> None: ...

    def decode(self, raw: bytes | memoryview, offset: int, seq: int) -> bytes | None: ...

    def read(self, offset: int, size: int, seq: int) -> bytes | None: ...

    @property
    def binds_seq(self) -> bool:
        """Whether a record is bound to the transaction that wrote it (its ``seq``
        checked on reading); if not, the reads need no ``seqs``."""
        ...

    def read_each(self, offsets: list[int], sizes: list[int], seqs: list[int] | None
                  ) -> list[bytes | None]: ...

    def read_span(self, offset: int, size: int) -> bytes: ...

    def decode_many(self, bufs: Sequence[bytes], starts: list[int], sizes: list[int],
                    offsets: list[int], seqs: list[int]) -> list[bytes | None]: ...

    def zero(self, offset: int, size: int) -> None: ...
