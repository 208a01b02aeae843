"""The approximate nearest-neighbour index over the embeddings (docs/contract.md §4e
"Vector search at scale").

Owns: :class:`VectorIndex` — an HNSW graph (the ``usearch`` library) keyed by slot,
held in memory only — and :class:`Build`, which fills one on a background thread.
Nothing of it is ever written to a file: it is built from the embedding matrix (which
replay builds) after a query first asks for it, then kept in step with every write, so
a forgotten fact's vector leaves it with the fact and a purge has no file to chase.
Imports numpy and :mod:`holomem.errors`; ``usearch`` when an index is made.

The graph stores each unit vector quantised to 8 bits (``i8``): it only proposes
candidates, whose cosine the caller then computes exactly from the float32 matrix, so
the quantisation moves no score, only (rarely) which neighbours are found.

A build never holds a lock that writers need. It starts from the rows live when it was
asked for (the caller holds writers off for that moment only); every change a writer
makes meanwhile is queued with :meth:`Build.note` (the slot, and its new row or None
for a removal) instead of touching the graph; when the rows are in, the queue is
applied, the last of it under the build's own small lock together with the hand-over,
so a change is either in the queue the build applies or made to the installed graph,
never lost and never applied twice out of order.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from holomem.errors import UnavailableError, install_extra

log = logging.getLogger("holomem")

INSTALL = install_extra("ann")
#: HNSW's links per node ("M"), and its search breadth at insertion and at query time
#: (the query breadth grows to the number of neighbours asked for when that is more).
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 64
#: A shallow search's breadth (:meth:`VectorIndex.nearest`'s ``shallow``): for a hybrid
#: query whose lexical candidates are all scored, the graph only has to find the few
#: vectors near enough to pass them; a quarter of the usual breadth reads a quarter of
#: the graph (the search's cost, which is memory reads).
EXPANSION_SHALLOW = 16
#: Vectors added per call while building: a build that is stopped (the store closes,
#: a compaction replaces the projections) ends within one call.
BUILD_CHUNK = 2_048
#: Threads a build adds with: one, so that on a small machine the application keeps
#: the other cores (the library releases the GIL while it adds).
BUILD_THREADS = 1
#: Queued changes applied outside the build's lock before the last round; the last
#: round (under it: writers noting a change wait for it) holds at most about this many.
CATCH_UP_ROUNDS = 8
FINAL_ROUND = 4_096
#: Bytes of queued rows after which a build gives up (writers outpace it); the next
#: query that wants the graph starts again from the rows then live.
QUEUE_MAX_BYTES = 256 * 1024 * 1024


def _usearch_index() -> Any:
    # onnxruntime (the built-in embedder's runtime) first: both are pybind11 modules,
    # and with usearch loaded first, importing onnxruntime crashes the process (a
    # segmentation fault, seen with usearch 2.26.6 and onnxruntime 1.32.0); loaded in
    # this order, both work. tests/memory/test_vector_index_build.py starts a process
    # that builds an index and then embeds.
    with contextlib.suppress(ImportError):
        import onnxruntime  # noqa: F401
    try:
        from usearch.index import Index
    except ImportError as exc:
        raise UnavailableError("approximate vector search (vectorSearch \"approximate\") needs "
                               f"the usearch library: {INSTALL}") from exc
    return Index


def available() -> bool:
    """Whether the usearch library can be imported."""
    try:
        _usearch_index()
    except UnavailableError:
        return False
    return True


class VectorIndex:
    """An in-memory HNSW index of unit vectors of dimension ``dim``, keyed by slot.

    Not itself thread-safe for writes: one thread adds or removes at a time (the build's
    thread before it is installed, the writer holding the store's locks after)."""

    def __init__(self, dim: int) -> None:
        index_type = _usearch_index()
        self.dim = dim
        self._index = index_type(ndim=dim, metric="ip", dtype="i8",
                                 connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD,
                                 expansion_search=EXPANSION_SEARCH)
        #: held around a search: the breadth is the index's setting, which a shallow
        #: search changes for its own call only
        self._breadth = threading.Lock()

    def __len__(self) -> int:
        return int(self._index.size)

    def __contains__(self, slot: int) -> bool:
        return bool(self._index.contains(slot))

    def add(self, slots: np.ndarray, vectors: np.ndarray) -> None:
        """Index ``vectors`` (unit rows) under ``slots`` (none of them indexed yet)."""
        if len(slots):
            self._index.add(np.asarray(slots, dtype=np.uint64),
                            np.ascontiguousarray(vectors, dtype=np.float32),
                            threads=BUILD_THREADS)

    def put(self, slot: int, row: np.ndarray | None) -> None:
        """Make ``slot`` hold ``row`` (None: hold nothing)."""
        self.remove(slot)
        if row is not None:
            self.add(np.array([slot]), row[None, :])

    def remove(self, slot: int) -> None:
        """Drop ``slot``'s vector (nothing if it has none)."""
        if self._index.contains(slot):
            self._index.remove(slot)

    def nearest(self, query: np.ndarray, count: int, shallow: bool = False) -> np.ndarray:
        """Slots of (about) the ``count`` vectors nearest ``query``, nearest first.
        ``shallow``: explore :data:`EXPANSION_SHALLOW` candidates (or ``count``, when
        more) instead of :data:`EXPANSION_SEARCH`: the nearest few are found nearly
        as reliably, the last of the ``count`` less so."""
        size = len(self)
        if count <= 0 or not size:
            return np.zeros(0, dtype=np.int64)
        query = np.asarray(query, dtype=np.float32)
        with self._breadth:
            if not shallow:
                found = self._index.search(query, min(count, size), threads=1)
            else:
                self._index.expansion_search = EXPANSION_SHALLOW
                try:
                    found = self._index.search(query, min(count, size), threads=1)
                finally:
                    self._index.expansion_search = EXPANSION_SEARCH
        return np.asarray(found.keys, dtype=np.int64)

    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)


#: A queued change: the slot, and the row it now holds (None: it holds none).
Change = tuple[int, "np.ndarray | None"]


class Build:
    """A :class:`VectorIndex` being filled on a thread of its own.

    ``rows`` are the slots to index and ``matrix`` the rows as they were when the build
    was asked for (a row a writer changes meanwhile is queued too, so a torn read of it
    is corrected). ``ready(index, why)`` is called once, under the build's lock, with
    the finished index and "", or None and why not ("stopped", "failed: ...").
    """

    def __init__(self, dim: int, matrix: np.ndarray, rows: np.ndarray,
                 ready: Callable[[VectorIndex | None, str], None]) -> None:
        self.index = VectorIndex(dim)
        self._matrix = matrix
        self._rows = rows
        self._ready = ready
        self._mu = threading.Lock()
        self._queue: list[Change] = []
        self._queued_bytes = 0
        self._max_queued = max(1, QUEUE_MAX_BYTES)
        self._done = False
        self._stop = threading.Event()
        #: set when the build has ended (installed, stopped or failed)
        self.finished = threading.Event()
        #: why the build ended without an index ("" while running or when installed)
        self.failure = ""
        self._thread = threading.Thread(target=self._run, name="holomem-vector-index",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def note(self, slot: int, row: np.ndarray | None) -> bool:
        """Queue a writer's change of ``slot`` (``row``: its new unit vector, copied;
        None: it has none now). False: the build has ended — the caller changes the
        installed index itself (or there is none)."""
        if row is None:
            return self._noted([(slot, None)], 0)
        kept = np.array(row, np.float32)
        return self._noted([(slot, kept)], kept.nbytes)

    def note_many(self, slots: np.ndarray, rows: np.ndarray) -> bool:
        """:meth:`note` of each of ``slots`` and its new row (``rows``: unit vectors,
        copied once), under one hold of the lock."""
        block = np.array(rows, dtype=np.float32)  # (a copy: the caller's may move)
        return self._noted(list(zip(np.asarray(slots).tolist(), block, strict=True)),
                           block.nbytes)

    def _noted(self, changes: list[Change], size: int) -> bool:
        with self._mu:
            if self._done:
                return False
            self._queue.extend(changes)
            self._queued_bytes += size
            if self._queued_bytes > self._max_queued:
                self._stop.set()  # writers outpace the build: start again later
            return True

    def stop(self) -> None:
        """Ask the build to end without installing anything (within one chunk)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        try:
            self._fill()
            self._catch_up()
        except Exception as exc:  # (a library failure: recall stays exact)
            log.warning("the approximate vector index could not be built: %s", exc)
            self._end(None, f"failed: {exc}")
        finally:
            self._matrix = self._rows = np.zeros(0)  # (do not hold the matrix alive)

    def _fill(self) -> None:
        for start in range(0, len(self._rows), BUILD_CHUNK):
            if self._stop.is_set():
                return
            part = self._rows[start:start + BUILD_CHUNK]
            self.index.add(part, self._matrix[part])

    def _apply(self, changes: list[Change]) -> None:
        for slot, row in changes:
            self.index.put(slot, row)

    def _take(self) -> list[Change]:
        changes, self._queue, self._queued_bytes = self._queue, [], 0
        return changes

    def _catch_up(self) -> None:
        for _ in range(CATCH_UP_ROUNDS):
            if self._stop.is_set():
                break
            with self._mu:
                if len(self._queue) <= FINAL_ROUND:
                    break
                changes = self._take()
            self._apply(changes)  # outside the lock: writers keep queueing
        if self._stop.is_set():
            self._end(None, "stopped")
            return
        with self._mu:  # the last round and the hand-over, as one step
            self._apply(self._take())
            self._done = True
            self._ready(self.index, "")
        self.finished.set()

    def _end(self, index: VectorIndex | None, why: str) -> None:
        with self._mu:
            if not self._done:
                self._done = True
                self._queue = []
                self.failure = why
                self._ready(index, why)
        self.finished.set()
