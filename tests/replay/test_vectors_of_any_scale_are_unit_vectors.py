"""Every vector the contract accepts (finite float32 numbers, not all zero) is stored as
the unit vector of its direction, whatever its scale: a vector whose length overflows
float32 (numbers such as 3e38) once became zeros, and one of subnormal numbers (such as
1e-45) a vector longer than 1, whose cosines exceeded 1. A vector whose length is an
ordinary float32 is normalised to the very bits it always was (stores already written
replay to the same matrix), alone or in a batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, Store
from holomem.projections.embeddings import unit, units

F32 = np.finfo(np.float32)
SUBNORMAL = float(np.float32(F32.smallest_subnormal))

#: Numbers of one scale each: ordinary, huge (lengths past float32's range), small
#: normal ones, subnormal ones, and any float32 at all.
_scales = [
    st.floats(-1e3, 1e3, width=32),
    st.floats(2.0**120, float(F32.max), width=32).flatmap(
        lambda x: st.sampled_from([x, -x])),
    st.floats(-(2.0**-120), 2.0**-120, width=32),
    st.floats(-float(F32.tiny), float(F32.tiny), width=32),  # subnormal (and zero)
    st.sampled_from([SUBNORMAL, -SUBNORMAL, 2 * SUBNORMAL, 0.0]),
    st.floats(width=32, allow_nan=False, allow_infinity=False),
]


@st.composite
def vectors(draw: st.DrawFn, dim: int | None = None) -> np.ndarray:
    """A float32 vector, not all zero, of numbers of one scale or of several."""
    n = dim if dim is not None else draw(st.integers(1, 48))
    scale = draw(st.sampled_from(range(len(_scales))))
    mixed = draw(st.booleans())
    numbers = st.one_of(*_scales) if mixed else _scales[scale]
    v = np.array(draw(st.lists(numbers, min_size=n, max_size=n)), dtype=np.float32)
    if not v.any():
        v[draw(st.integers(0, n - 1))] = draw(st.sampled_from([SUBNORMAL, 1.0, 3e38]))
    return v


def _assert_unit_of(row: np.ndarray, v: np.ndarray) -> None:
    assert row.dtype == np.float32
    assert np.isfinite(row).all()
    assert abs(np.linalg.norm(row.astype(np.float64)) - 1.0) <= 1e-6
    v64 = v.astype(np.float64)
    assert row.astype(np.float64) @ (v64 / np.linalg.norm(v64)) >= 1.0 - 1e-6


@settings(max_examples=400, deadline=None)
@given(v=vectors())
def test_a_vector_of_any_scale_is_normalised_to_a_unit_vector_of_its_direction(
        v: np.ndarray) -> None:
    _assert_unit_of(unit(v), v)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), dim=st.integers(1, 24), rows=st.integers(1, 12))
def test_a_batch_of_any_scale_is_normalised_bit_for_bit_as_each_vector_alone(
        data: st.DataObject, dim: int, rows: int) -> None:
    m = np.stack([data.draw(vectors(dim)) for _ in range(rows)])
    batch = units(m)
    for i in range(rows):
        assert batch[i].tobytes() == unit(m[i]).tobytes()
        _assert_unit_of(batch[i], m[i])


@settings(max_examples=300, deadline=None)
@given(v=vectors())
def test_a_vector_whose_length_is_an_ordinary_float32_keeps_its_bits(v: np.ndarray) -> None:
    with np.errstate(over="ignore"):  # (a length past float32's range: inf)
        length = np.float32(np.linalg.norm(v.astype(np.float64)))
    if np.isfinite(length) and length >= F32.tiny:
        assert unit(v).tobytes() == (v / length).tobytes()  # the formula stores hold


def test_the_bounds_of_the_float32_formula_keep_its_bits() -> None:
    """Lengths just inside float32's normal range: the float32 formula, as ever."""
    for length in (float(F32.max), float(F32.tiny), 2.0**-125, 2.0**127, 1.0):
        v = np.array([length, 0.0], dtype=np.float32)
        assert unit(v).tobytes() == np.array([1.0, 0.0], dtype=np.float32).tobytes()
        assert units(v[None, :]).tobytes() == unit(v).tobytes()


def test_huge_and_subnormal_vectors_score_as_their_ordinary_twin(tmp_path: Path) -> None:
    """Stored one at a time or in a batch, after a replay too, and as a query's vector."""
    big, tiny, plain = [3e38, 3e38, 0.0], [1e-45, 1e-45, 0.0], [1.0, 1.0, 0.0]
    with Store.open(str(tmp_path / "s"), sync="none") as store:
        m = Memory(store, clock=ManualClock(1000))
        ids = [m.remember(text=f"alone {i}", embedding=e).id
               for i, e in enumerate((big, tiny, plain))]
        ids += [r.id for r in m.remember_many(
            [{"text": f"batch {i}", "embedding": e} for i, e in enumerate((big, tiny, plain))])]
        twin = store.read(lambda v: v.embeddings.vector(v.slot(ids[2])).copy())
        for query in (plain, big, tiny):
            hits = store.search_documents("nothing", k=10, embedding=query)
            assert len(hits) == 6
            for h in hits:
                assert abs(h.semantic_score - 1.0) <= 1e-6  # type: ignore[operator]
        rows = store.read(lambda v: [v.embeddings.vector(v.slot(i)).copy() for i in ids])
    for row in rows:
        assert np.abs(row - twin).max() <= 1e-6
        assert abs(np.linalg.norm(row.astype(np.float64)) - 1.0) <= 1e-6
    with Store.open(str(tmp_path / "s"), sync="none") as store:  # replayed
        again = store.read(lambda v: [v.embeddings.vector(v.slot(i)).copy() for i in ids])
    assert [r.tobytes() for r in again] == [r.tobytes() for r in rows]
