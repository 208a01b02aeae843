"""The approximate nearest-neighbour index over the embeddings (docs/contract.md §4e
"Vector search at scale").

Owns: :class:`VectorIndex` — an HNSW graph (the ``usearch`` library, the ``ann`` extra)
keyed by slot, held in memory only. Nothing of it is ever written to a file: it is
built from the embedding matrix (which replay builds) the first time a query asks for
approximate search, then kept in step with every write, so a forgotten fact's vector
leaves it with the fact and a purge has no file to chase. Imports numpy; ``usearch``
only when an index is built.

The graph stores each unit vector quantised to 8 bits (``i8``): it only proposes
candidates, whose cosine the caller then computes exactly from the float32 matrix, so
the quantisation moves no score, only (rarely) which neighbours are found.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from holomem.errors import UnavailableError, install_extra

INSTALL = install_extra("ann")
#: HNSW's links per node ("M"), and its search breadth at insertion and at query time
#: (the query breadth grows to the number of neighbours asked for when that is more).
CONNECTIVITY = 16
EXPANSION_ADD = 64
EXPANSION_SEARCH = 512
#: Vectors added per call while building (bounds the copy of the matrix's rows).
BUILD_CHUNK = 65_536


def _usearch_index() -> Any:
    try:
        from usearch.index import Index
    except ImportError as exc:
        raise UnavailableError("approximate vector search (vectorSearch \"approximate\") needs "
                           f"the usearch library: {INSTALL}") from exc
    return Index


def available() -> bool:
    """Whether the ``ann`` extra is installed."""
    try:
        _usearch_index()
    except UnavailableError:
        return False
    return True


class VectorIndex:
    """An in-memory HNSW index of unit vectors of dimension ``dim``, keyed by slot."""

    def __init__(self, dim: int) -> None:
        index_type = _usearch_index()
        self.dim = dim
        self._index = index_type(ndim=dim, metric="ip", dtype="i8",
                                 connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD,
                                 expansion_search=EXPANSION_SEARCH)

    def __len__(self) -> int:
        return int(self._index.size)

    def add(self, slots: np.ndarray, vectors: np.ndarray) -> None:
        """Index ``vectors`` (unit rows) under ``slots`` (none of them indexed yet)."""
        if len(slots):
            self._index.add(np.asarray(slots, dtype=np.uint64),
                            np.ascontiguousarray(vectors, dtype=np.float32))

    def build(self, matrix: np.ndarray, slots: np.ndarray) -> None:
        """Index the rows ``slots`` of ``matrix``, a chunk at a time."""
        for start in range(0, len(slots), BUILD_CHUNK):
            part = slots[start:start + BUILD_CHUNK]
            self.add(part, matrix[part])

    def remove(self, slot: int) -> None:
        """Drop ``slot``'s vector (nothing if it has none)."""
        if self._index.contains(slot):
            self._index.remove(slot)

    def nearest(self, query: np.ndarray, count: int) -> np.ndarray:
        """Slots of (about) the ``count`` vectors nearest ``query``, nearest first."""
        if count <= 0 or not len(self):
            return np.zeros(0, dtype=np.int64)
        found = self._index.search(np.asarray(query, dtype=np.float32),
                                   min(count, len(self)), threads=1)
        return np.asarray(found.keys, dtype=np.int64)

    def memory_bytes(self) -> int:
        return int(self._index.memory_usage)
