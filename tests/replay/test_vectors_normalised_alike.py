"""A vector is normalised to the same bits whether it arrives alone or in a batch:
a bulk load (``remember_many``, a replay's runs) and one event at a time must build
the same embedding matrix."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.projections.embeddings import unit, units


@settings(max_examples=60, deadline=None)
@given(rows=st.integers(1, 40), dim=st.integers(1, 700), scale=st.floats(1e-3, 1e3),
       seed=st.integers(0, 2**32 - 1))
def test_a_batch_of_vectors_is_normalised_bit_for_bit_as_each_vector_alone(
        rows: int, dim: int, scale: float, seed: int) -> None:
    m = (np.random.default_rng(seed).standard_normal((rows, dim)) * scale).astype(np.float32)
    batch = units(m)
    assert batch.dtype == np.float32
    for i in range(rows):
        assert batch[i].tobytes() == unit(m[i]).tobytes()


def test_a_large_batch_is_normalised_as_its_rows_alone() -> None:
    m = np.random.default_rng(7).standard_normal((3000, 384)).astype(np.float32)
    batch = units(m)
    assert all(batch[i].tobytes() == unit(m[i]).tobytes() for i in range(0, 3000, 7))
