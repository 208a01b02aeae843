"""Caller embeddings: one unit vector per document that has one, and cosine search.

Owns: the embedding matrix and its dimension, exact cosine search, the choice of the
candidates a query's vector proposes (every vector, the best ``depth`` of them, or those
the approximate index of :mod:`holomem.projections.vectorindex` finds), and when that
index is built (in the background, never while a writer waits) and kept in step.
Imports numpy, :mod:`holomem.events` and the other projections.

The dimension is fixed by the first embedding the generation holds; a document
with another dimension is refused before it is written (``invalid``). Vectors are
stored as float32, normalised to unit length, so cosine is one matrix product.
"""

from __future__ import annotations

import math
import threading
from typing import Literal

import numpy as np

from holomem.errors import CorruptError, UnavailableError
from holomem.events import DocumentAdded, DocumentReplaced, Event, StoreSettings, VectorsSet
from holomem.projections.base import Change, GrowArray, Kept, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.fusion import threshold
from holomem.projections.vectorindex import Build, VectorIndex

#: How a query's vector finds its candidates (MemoryConfig.vector_search).
VectorSearch = Literal["exact", "approximate", "auto"]
#: With "auto", the approximate index is used from this many live documents: below
#: it the exact product is about as fast (benchmarks/vector_scale.py measures both;
#: docs/contract.md §4e). "approximate" uses it at any size.
AUTO_MIN = 10_000
#: An approximate search asks the index for this many times the candidates wanted
#: (the index may miss a few; the exact cosine then ranks them).
OVERSAMPLE = 2
#: A restriction (namespace, subject, entities, filter) allowing at most this many
#: documents is searched exactly over those rows instead (a gather and a small product).
EXACT_RESTRICTED = 20_000
#: Rows of a gathered product multiplied at once (see :func:`gathered_cosine`).
GATHER_BLOCK = 1_024


def gathered_cosine(matrix: np.ndarray, slots: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``matrix[slots] @ q`` (float64), a block of rows at a time: a product of a few
    thousand gathered rows is where BLAS starts its threads, which on a busy machine
    wait on each other (12 ms instead of 0.3 ms for 2,000 rows on two loaded cores)."""
    if len(slots) <= GATHER_BLOCK:
        out: np.ndarray = (matrix[slots] @ q).astype(np.float64)
        return out
    return np.concatenate([(matrix[slots[i:i + GATHER_BLOCK]] @ q).astype(np.float64)
                           for i in range(0, len(slots), GATHER_BLOCK)])


def unit(vector: np.ndarray) -> np.ndarray:
    """``vector`` as float32 divided by its length: the unit vector of its direction.

    The length is taken in float64 (where the squares of float32 numbers, however large
    or small, neither overflow nor vanish) and rounded to float32, and the vector is
    divided by that: the formula every store so far was built with, kept bit for bit.
    It fails only when the length does not round to a normal float32: past float32's
    range (finite numbers such as [3e38, 3e38, 0]) it rounds to infinity, which would
    give zeros, and below the normal numbers (a vector of subnormal numbers) to a coarse
    subnormal step, which would give a vector longer or shorter than 1. Such a vector is
    divided by its float64 length instead, and rounded once to float32."""
    v = np.asarray(vector, dtype=np.float32)
    wide = v.astype(np.float64)
    norm = math.sqrt(wide.dot(wide))  # (numpy.linalg.norm's steps, without its checks)
    if norm < _ROUNDS_TO_INF:
        n32 = np.float32(norm)
        if n32 >= _SMALLEST_NORMAL:
            return v / n32
    out: np.ndarray = (v.astype(np.float64) / norm).astype(np.float32)
    return out


#: A float64 from this one up rounds to an infinite float32 (halfway between the
#: greatest float32 and 2**128).
_ROUNDS_TO_INF = 2.0**128 - 2.0**103
#: The smallest normal float32.
_SMALLEST_NORMAL = np.float32(2.0**-126)
#: :func:`units` leaves a row whose float64 length is outside these bounds to
#: :func:`unit` (a margin about where the float32 formula fails: :func:`unit` decides).
_PLAIN_LENGTHS = (2.0**-125, 2.0**127)


def units(rows: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`unit` of each row of a float32 matrix, bit for bit: each row's norm is
    taken as ``numpy.linalg.norm`` takes a vector's (the square root of a float64 dot
    product), the products all in one stacked ``matmul`` (a dot product per row, in C;
    tests/replay/test_vectors_normalised_alike.py checks the bits against :func:`unit`).
    A row of huge or subnormal numbers, whose length is near or past where the float32
    formula fails, is left to :func:`unit` itself.
    A block of rows at a time (:data:`UNIT_BLOCK_BYTES` of float64), so that the float64
    copy stays in the cache. ``out``: a float32 array of the same shape to write them
    to (returned), instead of a new one."""
    rows = np.asarray(rows, dtype=np.float32)
    step = max(1, UNIT_BLOCK_BYTES // (8 * rows.shape[1])) if rows.ndim == 2 else len(rows)
    if len(rows) <= step and out is None:
        return _units(rows)
    if out is None:
        out = np.empty(rows.shape, dtype=np.float32)
    for i in range(0, len(rows), step):
        out[i : i + step] = _units(rows[i : i + step])
    return out


#: The float64 bytes :func:`units` normalises at a time.
UNIT_BLOCK_BYTES = 2**19


def _units(rows: np.ndarray) -> np.ndarray:
    r64 = rows.astype(np.float64)
    norms: np.ndarray = np.sqrt(np.matmul(r64[:, None, :], r64[:, :, None])[:, 0, 0])
    # A row whose length is near or past where the float32 formula fails (huge or
    # subnormal numbers) is normalised by unit itself, which decides.
    low, high = _PLAIN_LENGTHS
    if low <= norms.min() and norms.max() <= high:  # (False with a NaN)
        out: np.ndarray = rows / norms.astype(np.float32)[:, None]
        return out
    odd = np.flatnonzero(~((norms >= low) & (norms <= high)))
    norms[odd] = 1.0
    out = rows / norms.astype(np.float32)[:, None]
    for i in odd:
        out[i] = unit(rows[i])
    return out


class Embeddings:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.dim = 0
        self._mat: GrowArray | None = None
        self.has = GrowArray(np.bool_)
        #: Slots whose vector a VectorsSet replaced: slot -> that event's sequence
        #: number (where the vector as written is read back from).
        self.replaced: dict[int, int] = {}
        #: The approximate index, once built (None: not yet, or being built).
        self.index: VectorIndex | None = None
        #: The build under way (None: none).
        self.build: Build | None = None
        #: Why the last build ended without an index ("failed: ..." keeps search exact).
        self.build_failure = ""
        self._mu = threading.Lock()

    def add_run(self, seq: int, events: list[DocumentAdded], first: int) -> None:
        """New documents in slots ``first``.. (as ``apply`` of each would)."""
        embs = [e.embedding for e in events]
        if any(embs):
            if not self._add_vectors(embs, first):
                for k, e in enumerate(events):
                    self.apply(seq, e, Change(first + k, -1))
            return
        assert self.has.n == first
        self.has.extend(np.zeros(len(events), dtype=np.bool_))
        if self._mat is not None:
            self._mat.extend(np.zeros((len(events), self.dim), dtype=np.float32))

    def _add_vectors(self, embs: list[bytes], first: int) -> bool:
        """:meth:`add_run` of documents some of which have a vector, all at once, when
        every vector has the store's dimension (or, on a store without one yet, one
        dimension, a whole number of float32s); False, nothing done, otherwise: one at
        a time, the first odd one is then reported. Each row is normalised exactly as
        :func:`unit` does it."""
        sizes = set(map(len, embs))
        sizes.discard(0)
        if len(sizes) != 1:
            return False
        size = sizes.pop()
        if size % 4 or (self.dim and size != 4 * self.dim):
            return False
        assert self.has.n == first
        if not self.dim:  # the first vector fixes the dimension (as apply's would)
            self._fix_dim(size // 4, first)
        dim = self.dim
        assert self._mat is not None
        has = np.fromiter(map(bool, embs), dtype=np.bool_, count=len(embs))
        given = np.frombuffer(b"".join(embs), dtype="<f4").reshape(-1, dim)
        # Room for another run this size when it grows: a bulk load's next run is
        # written into pages never touched, not into a copy of the whole matrix.
        self._mat.reserve(first + len(embs), spare=len(embs))
        if has.all():  # normalised straight into the matrix's new rows
            rows = units(given, out=self._mat.grow(len(embs)))
        else:
            rows = units(given)
            mat = np.zeros((len(embs), dim), dtype=np.float32)
            mat[has] = rows
            self._mat.extend(mat)
        self.has.extend(has)
        self._indexed_run(first + np.flatnonzero(has), rows)
        return True

    def apply(self, seq: int, event: Event, change: Change) -> None:
        if isinstance(event, StoreSettings):
            if event.embedding_dim and not self.dim:
                self._fix_dim(event.embedding_dim, self.has.n)
            return
        if isinstance(event, VectorsSet):
            self._set(seq, event)
            return
        if change.old >= 0:
            self.replaced.pop(change.old, None)
            self._indexed(change.old, None)
        if change.new < 0 or not isinstance(event, (DocumentAdded, DocumentReplaced)):
            return
        assert self.has.n == change.new
        if not event.embedding:
            self.has.append(False)
            if self._mat is not None:
                # A whole row: GrowArray.append queues values and copies them in one
                # assignment, which cannot mix rows with broadcast scalars.
                self._mat.append(np.zeros(self.dim, dtype=np.float32))
            return
        vec = np.frombuffer(event.embedding, dtype="<f4")
        if self.dim == 0:
            self.dim = len(vec)
            self._mat = GrowArray(np.float32, width=self.dim)
            self._mat.extend(np.zeros((change.new, self.dim), dtype=np.float32))
        elif len(vec) != self.dim:
            raise CorruptError(f"event {seq}: embedding of dimension {len(vec)} in a store of "
                               f"dimension {self.dim}")
        assert self._mat is not None
        row = unit(vec)
        self._mat.append(row)
        self.has.append(True)
        self._indexed(change.new, row)

    def _set(self, seq: int, event: VectorsSet) -> None:
        n = len(event.ids)
        if not n:
            return
        if len(event.vectors) % (4 * n):
            raise CorruptError(f"event {seq}: {len(event.vectors)} bytes of vectors for {n} ids")
        dim = len(event.vectors) // (4 * n)
        if not self.dim:
            self._fix_dim(dim, self.has.n)
        elif dim != self.dim:
            raise CorruptError(f"event {seq}: vectors of dimension {dim} in a store of "
                               f"dimension {self.dim}")
        assert self._mat is not None
        vectors = np.frombuffer(event.vectors, dtype="<f4").reshape(n, dim)
        for doc_id, vec in zip(event.ids, vectors, strict=True):
            slot = self.catalog.slot(doc_id)
            if slot < 0:
                continue  # forgotten in the same transaction: nothing to hold
            row = unit(vec)
            self._mat[slot] = row
            self.has[slot] = True
            self.replaced[slot] = seq
            self._indexed(slot, row)

    def _indexed(self, slot: int, row: np.ndarray | None) -> None:
        """Keep the approximate index in step: ``slot`` now holds ``row`` (None: no
        vector). Called after the matrix changed; a build under way queues it."""
        build = self.build
        if build is not None and build.note(slot, row):
            return
        index = self.index  # (read after the build's hand-over, which sets it first)
        if index is not None:
            index.put(slot, row)

    def _indexed_run(self, slots: np.ndarray, rows: np.ndarray) -> None:
        """:meth:`_indexed` of new ``slots`` (none indexed yet) and their ``rows``."""
        build = self.build
        if build is not None and build.note_many(slots, rows):
            return
        index = self.index  # (read after the build's hand-over, which sets it first)
        if index is not None:
            index.add(slots, rows)

    def compacted(self, old: Embeddings, kept: Kept) -> None:
        """Fill this fresh projection with the vectors of the documents ``kept`` of
        ``old``: what a replay of the compacted journal builds. It holds each vector
        as written (:meth:`View.vector_as_written`), which normalises to the very row
        ``old`` holds; a re-embedded vector is then the document's own (nothing is
        ``replaced``), and the dimension stays (written first, StoreSettings)."""
        assert not self.has.n  # fresh
        has = old.has.view()[kept.slots]
        self.has.extend(has)
        if old.dim and old._mat is not None:  # (a dimension always comes with a matrix)
            self.dim = old.dim
            rows = old._mat.view()[kept.slots]
            rows[~has] = 0.0  # (a row without a vector is zeros there too)
            self._mat = GrowArray.of(rows, np.float32)

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The matrix is lent, not copied (it can be large): a VectorsSet that changes a
        row afterwards copies it first (:meth:`GrowArray.lend`), so the snapshot never
        holds a vector of a later sequence number. The flags are lent too; the table of
        replaced rows is copied."""
        return {"dim": self.dim, "matrix": self._mat.lend() if self._mat is not None else None,
                "has": self.has.lend(),
                "replaced_slots": np.fromiter(self.replaced, dtype=np.int64,
                                              count=len(self.replaced)),
                "replaced_seqs": np.fromiter(self.replaced.values(), dtype=np.int64,
                                             count=len(self.replaced))}

    def restore(self, snap: Snapshot) -> None:
        self.dim = int(snap["dim"])
        matrix = snap["matrix"]
        self._mat = None if matrix is None else GrowArray.of(matrix, np.float32)
        self.has = GrowArray.of(snap["has"], np.bool_)
        self.replaced = dict(zip(snap["replaced_slots"].tolist(),
                                 snap["replaced_seqs"].tolist(), strict=True))
        self.stop_index()
        self.index = None  # built again from the restored matrix when first asked for
        if self._mat is not None and (len(self._mat) != len(self.has)
                                      or self._mat.view().shape[1] != self.dim):
            raise ValueError("embeddings: matrix and flags disagree")

    def _fix_dim(self, dim: int, rows: int) -> None:
        self.dim = dim
        self._mat = GrowArray(np.float32, width=dim)
        if rows:
            self._mat.extend(np.zeros((rows, dim), dtype=np.float32))

    def vector(self, slot: int) -> np.ndarray | None:
        if self._mat is None or slot >= self.has.n or not self.has.view()[slot]:
            return None
        out: np.ndarray = self._mat.view()[slot]
        return out

    def cosine(self, query: np.ndarray, allowed: np.ndarray | None = None,
               depth: int | None = None, approximate: bool = False,
               include: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(slots ascending, exact cosine) of the live documents with an embedding that
        ``allowed`` (a slot mask; None: all) lets through: every one of them, or with
        ``depth`` only those whose ``max(cosine, 0)`` is among the ``depth`` best, ties
        included (so that a linear fusion's top ``depth`` is the same as over all); with
        ``approximate`` (and the index built: :meth:`approximate`) the ones the
        approximate index finds instead. ``include`` (slots) are added whatever their
        rank (the facts an explanation is about)."""
        if self._mat is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        q = unit(query)
        index = self.index
        if approximate and depth is not None and index is not None:
            searched = self._approximate(index, q, allowed, depth)
            if searched is not None:
                return self._exact(q, searched[0], include)
        mask = self.has.view() & self.catalog.alive.view()
        if allowed is not None:
            mask = mask & allowed
        slots = np.flatnonzero(mask)
        mat = self._mat.view()
        if len(slots) * 4 < len(mat):
            # A few rows (the filtered path): gather them, a small copy.
            cos = (mat[slots] @ q).astype(np.float64)
        else:
            # Most rows: one product over the whole matrix in place, then pick. Gathering
            # the rows first copied the matrix on every query (1.5 GB at a million facts).
            cos = (mat @ q)[slots].astype(np.float64)
        if depth is None or depth >= len(slots):
            return slots, cos
        positive = np.maximum(cos, 0.0)
        bar = threshold(positive, depth)
        if bar <= 0.0:
            return slots, cos  # every document from the bar down scores 0: all tie
        keep = positive >= bar
        if include is not None and len(include):
            extra = np.zeros(len(mat), dtype=bool)
            extra[include[include < len(mat)]] = True
            keep |= extra[slots]
        return slots[keep], cos[keep]

    def nearest(self, q: np.ndarray, allowed: np.ndarray | None, count: int,
                shallow: bool = False) -> tuple[np.ndarray, np.ndarray, float] | None:
        """Through the approximate index (built: :meth:`approximate`): (slots ascending,
        exact cosine, floor) of about the ``count`` live vectors nearest the unit vector
        ``q`` (:func:`unit`) that ``allowed`` lets through; ``floor``, the worst cosine
        of those it proposed, estimates where the others lie (not a bound: a graph
        search passes over some nearer vectors), or is -1 when it proposed every vector.
        ``shallow``: the index's shallow search (:meth:`VectorIndex.nearest`). None:
        search exactly (no index, or a restriction that allows few documents)."""
        index = self.index
        if self._mat is None or index is None:
            return None
        searched = self._approximate(index, q, allowed, max(1, count // OVERSAMPLE), shallow)
        if searched is None:
            return None
        found, everything = searched
        found = np.sort(found)  # (the index holds a slot once)
        if len(found) and found[-1] >= self.has.n:
            found = found[found < self.has.n]
        cos = gathered_cosine(self._mat.view(), found, q)
        floor = -1.0 if everything or not len(found) else float(cos.min())
        # (whatever the index held, a forgotten fact is never a candidate)
        keep = self.has.view()[found]
        if self.catalog.live != self.catalog.slots:
            keep &= self.catalog.alive.view()[found]
        if keep.all():
            return found, cos, floor
        return found[keep], cos[keep], floor

    def cosines(self, q: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The exact cosine (float64) of the unit vector ``q`` with each of ``slots``
        (live documents): 0 for one without a vector."""
        if self._mat is None or not len(slots):
            return np.zeros(len(slots))
        cos = gathered_cosine(self._mat.view(), slots, q)
        has = self.has.view()[slots]
        return cos if has.all() else np.where(has, cos, 0.0)

    def _approximate(self, index: VectorIndex, q: np.ndarray, allowed: np.ndarray | None,
                     depth: int, shallow: bool = False) -> tuple[np.ndarray, bool] | None:
        """The slots the approximate index proposes (at least ``depth`` of them that
        ``allowed`` lets through, when there are that many) and whether it was asked for
        every vector it holds, or None: search exactly (a restriction that allows few
        documents, or a search for every vector that did not reach them all)."""
        live = self.catalog.live
        share = 1.0
        if allowed is not None:
            allowed_n = int(np.count_nonzero(allowed))
            if allowed_n <= EXACT_RESTRICTED:
                return None
            share = allowed_n / live
        count = int(depth * OVERSAMPLE / share) + 1
        while True:
            found = index.nearest(q, count, shallow)
            everything = count >= len(index)
            if everything and len(found) < len(index):
                # Asked for every vector it holds, the graph reached fewer (a search
                # can miss some, many equal vectors among them): no list of its is
                # then known to be complete.
                return None
            if allowed is not None:
                found = found[allowed[found]]
            if len(found) >= depth * OVERSAMPLE or everything:
                return found, everything
            count *= 4  # the restriction is rarer near this query: look further

    def _exact(self, q: np.ndarray, slots: np.ndarray, include: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(slots ascending, exact cosine) of ``slots`` and ``include``: those of them
        that are live and hold a vector (whatever the index held, a forgotten fact is
        never a candidate)."""
        if include is not None and len(include):
            slots = np.concatenate([slots, include])
        slots = np.unique(slots)
        slots = slots[(slots >= 0) & (slots < self.has.n)]
        slots = slots[self.has.view()[slots] & self.catalog.alive.view()[slots]]
        assert self._mat is not None
        return slots, gathered_cosine(self._mat.view(), slots, q)

    # -- the approximate index ----------------------------------------------------------
    def approximate(self, mode: VectorSearch) -> bool:
        """Whether a query's vector takes its candidates from the approximate index
        under ``mode`` now: the index is wanted (``"approximate"``; ``"auto"`` from
        :data:`AUTO_MIN` live documents) and built. When it is wanted and not built,
        a build starts in the background and this query searches exactly. The caller
        holds writers off (the store's state or write lock)."""
        if mode == "exact" or self._mat is None or self.build_failure.startswith("failed"):
            return False
        if mode == "auto" and self.catalog.live < AUTO_MIN:
            return False
        if self.index is not None:
            return True
        self._start()
        return False

    def _start(self) -> Build | None:
        """Start building the index unless a build is under way (or ended)."""
        with self._mu:
            if self.index is not None or self.build is not None or self._mat is None:
                return self.build
            rows = np.flatnonzero(self.has.view() & self.catalog.alive.view())
            build = Build(self.dim, self._mat.view(), rows, self._ready)
            self.build = build
            build.start()
            return build

    def _ready(self, index: VectorIndex | None, why: str) -> None:
        # (the build's thread, under the build's lock: the hand-over of one build)
        if index is not None:
            self.index = index
        self.build_failure = why
        self.build = None

    def ensure_index(self, timeout: float | None = None) -> VectorIndex:
        """The approximate index, waiting for its build (started now if none is under
        way) to finish. Needs no lock a writer takes, so it may be called inside a read.
        Errors: ``unavailable`` (the build failed, was stopped or did not finish within
        ``timeout`` seconds; without the usearch library)."""
        while self.index is None:
            build = self._start()
            if build is None:
                break  # (no vectors)
            if not build.finished.wait(timeout):
                raise UnavailableError("the approximate vector index is still being built")
            if build.failure:
                raise UnavailableError(f"the approximate vector index: {build.failure}")
        if self.index is None:
            raise UnavailableError("no vectors to index")
        return self.index

    def stop_index(self, timeout: float | None = 5.0) -> None:
        """Stop a build under way (the store closes, or these projections are replaced),
        waiting up to ``timeout`` seconds for its thread to end."""
        build = self.build
        if build is not None:
            build.stop()
            build.join(timeout)

    def memory_bytes(self) -> int:
        return ((self._mat.nbytes if self._mat is not None else 0) + self.has.nbytes
                + (self.index.memory_bytes() if self.index is not None else 0))
