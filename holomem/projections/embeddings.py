"""Caller embeddings: one unit vector per document that has one, and cosine search.

Owns: the embedding matrix and its dimension. Imports numpy, :mod:`holomem.events`
and the other projections.

The dimension is fixed by the first embedding the generation holds; a document
with another dimension is refused before it is written (``invalid``). Vectors are
stored as float32, normalised to unit length, so cosine is one matrix product.
"""

from __future__ import annotations

import numpy as np

from holomem.errors import CorruptError
from holomem.events import DocumentAdded, DocumentReplaced, Event, StoreSettings, VectorsSet
from holomem.projections.base import Change, GrowArray, Snapshot
from holomem.projections.catalog import Catalog


def unit(vector: np.ndarray) -> np.ndarray:
    v = np.asarray(vector, dtype=np.float32)
    return v / np.float32(np.linalg.norm(v.astype(np.float64)))


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
        self.overwrites = 0

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
        self._mat.append(unit(vec))
        self.has.append(True)

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
            self.overwrites += 1
            self._mat[slot] = unit(vec)
            self.has[slot] = True
            self.replaced[slot] = seq

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The matrix is shared (it can be large): a row changes only by a VectorsSet,
        which bumps :attr:`overwrites`, and the checkpoint writer compares that count
        before and after encoding. The rest is copied."""
        return {"dim": self.dim, "matrix": self._mat.view() if self._mat is not None else None,
                "has": self.has.view().copy(),
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

    def cosine(self, query: np.ndarray, allowed: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(slots ascending, cosine) of every live document with an embedding."""
        if self._mat is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        mask = self.has.view() & self.catalog.alive.view()
        if allowed is not None:
            mask = mask & allowed
        slots = np.flatnonzero(mask)
        q = unit(query)
        mat = self._mat.view()
        if len(slots) * 4 < len(mat):
            # A few rows (the filtered path): gather them, a small copy.
            return slots, (mat[slots] @ q).astype(np.float64)
        # Most rows: one product over the whole matrix in place, then pick. Gathering
        # the rows first copied the matrix on every query (1.5 GB at a million facts).
        return slots, (mat @ q)[slots].astype(np.float64)

    def memory_bytes(self) -> int:
        return (self._mat.nbytes if self._mat is not None else 0) + self.has.nbytes
