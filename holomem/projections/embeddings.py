"""Caller embeddings: one unit vector per document that has one, and cosine search.

Owns: the embedding matrix and its dimension, exact cosine search, and the choice of
the candidates a query's vector proposes (every vector, the best ``depth`` of them, or
those the approximate index of :mod:`holomem.projections.vectorindex` finds). Imports
numpy, :mod:`holomem.events` and the other projections.

The dimension is fixed by the first embedding the generation holds; a document
with another dimension is refused before it is written (``invalid``). Vectors are
stored as float32, normalised to unit length, so cosine is one matrix product.
"""

from __future__ import annotations

import numpy as np

from holomem.errors import CorruptError
from holomem.events import DocumentAdded, DocumentReplaced, Event, StoreSettings, VectorsSet
from holomem.projections.base import Change, GrowArray, Kept, Snapshot
from holomem.projections.catalog import Catalog
from holomem.projections.fusion import threshold
from holomem.projections.vectorindex import VectorIndex

#: Approximate search is used only over at least this many live documents: below it,
#: the exact product takes about a millisecond (docs/contract.md §4e).
APPROXIMATE_MIN = 50_000
#: An approximate search asks the index for this many times the candidates wanted
#: (the index may miss a few; the exact cosine then ranks them).
OVERSAMPLE = 2
#: A restriction (namespace, subject, entities, filter) allowing at most this many
#: documents is searched exactly over those rows instead (a gather and a small product).
EXACT_RESTRICTED = 20_000


def unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    return v / np.float32(np.linalg.norm(v.astype(np.float64)))


def units(rows: np.ndarray) -> np.ndarray:
    """:func:`unit` of each row of a float32 matrix, bit for bit: each row's norm is
    taken as ``numpy.linalg.norm`` takes a vector's (the square root of a float64 dot
    product of a fresh copy), only the division is done for all rows at once."""
    norms = np.sqrt(np.array([v.dot(v) for v in map(_f64, rows)], dtype=np.float64))
    return np.asarray(rows, dtype=np.float32) / norms.astype(np.float32)[:, None]


def _f64(row: np.ndarray) -> np.ndarray:
    return row.astype(np.float64)


class Embeddings:
    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self.dim = 0
        self._mat: GrowArray | None = None
        self.has = GrowArray(np.bool_)
        #: Slots whose vector a VectorsSet replaced: slot -> that event's sequence
        #: number (where the vector as written is read back from).
        self.replaced: dict[int, int] = {}
        #: How many times a vector already in the matrix was overwritten (VectorsSet):
        #: a checkpoint shares the matrix and checks this did not move while it wrote.
        #: The approximate index (built at the first approximate search; None: not yet).
        self.index: VectorIndex | None = None

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
        rows = units(given)
        if has.all():
            mat = rows
        else:
            mat = np.zeros((len(embs), dim), dtype=np.float32)
            mat[has] = rows
        self._mat.extend(mat)
        self.has.extend(has)
        if self.index is not None:
            self.index.add(first + np.flatnonzero(has), rows)
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
            if self.index is not None:
                self.index.remove(change.old)
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
        if self.index is not None:
            self.index.add(np.array([change.new]), row[None, :])

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
            if self.index is not None:
                self.index.remove(slot)
                self.index.add(np.array([slot]), row[None, :])

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
        ``approximate`` (and enough documents: :data:`APPROXIMATE_MIN`) the ones the
        approximate index finds instead. ``include`` (slots) are added whatever their
        rank (the facts an explanation is about)."""
        if self._mat is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        q = unit(query)
        if approximate and depth is not None and self.catalog.live >= APPROXIMATE_MIN:
            found = self._approximate(q, allowed, depth)
            if found is not None:
                return self._exact(q, found, include)
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

    def _approximate(self, q: np.ndarray, allowed: np.ndarray | None, depth: int
                     ) -> np.ndarray | None:
        """The slots the approximate index proposes (at least ``depth`` of them that
        ``allowed`` lets through, when there are that many), or None: search exactly
        (a restriction that allows few documents)."""
        live = self.catalog.live
        share = 1.0
        if allowed is not None:
            allowed_n = int(np.count_nonzero(allowed))
            if allowed_n <= EXACT_RESTRICTED:
                return None
            share = allowed_n / live
        index = self.ensure_index()
        count = int(depth * OVERSAMPLE / share) + 1
        while True:
            found = index.nearest(q, count)
            if allowed is not None:
                found = found[allowed[found]]
            if len(found) >= depth * OVERSAMPLE or count >= len(index):
                return found
            count *= 4  # the restriction is rarer near this query: look further

    def _exact(self, q: np.ndarray, slots: np.ndarray, include: np.ndarray | None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(slots ascending, exact cosine) of ``slots`` and ``include``."""
        if include is not None and len(include):
            extra = include[(include < self.has.n)]
            extra = extra[self.has.view()[extra] & self.catalog.alive.view()[extra]]
            slots = np.concatenate([slots, extra])
        slots = np.unique(slots)
        assert self._mat is not None
        return slots, (self._mat.view()[slots] @ q).astype(np.float64)

    def ensure_index(self) -> VectorIndex:
        """The approximate index, built now from every live vector if it is not yet
        (``unavailable`` without the ``ann`` extra)."""
        if self.index is None:
            assert self._mat is not None
            index = VectorIndex(self.dim)
            index.build(self._mat.view(),
                        np.flatnonzero(self.has.view() & self.catalog.alive.view()))
            self.index = index
        return self.index

    def memory_bytes(self) -> int:
        return ((self._mat.nbytes if self._mat is not None else 0) + self.has.nbytes
                + (self.index.memory_bytes() if self.index is not None else 0))
