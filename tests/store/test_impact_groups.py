"""A long posting list's impact groups are its postings by (frequency, length), exactly.

``impact.group`` reorders a list so that pruned search can read it best group first
(holomem/projections/impact.py): whichever way it sorts (a rank table or, with many
(frequency, length) pairs, 64-bit keys), every posting is in the group of its
frequency and document length, once; the groups go frequency descending, then length
ascending; and a group's slots stay ascending.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.projections import impact


@settings(max_examples=200, deadline=None)
@given(data=st.data(), ranked_max=st.sampled_from([1, 64, impact.RANKED_MAX]))
def test_impact_groups_are_the_postings_by_frequency_then_length(
        data: st.DataObject, ranked_max: int) -> None:
    n = data.draw(st.integers(1, 400))
    slots = np.array(sorted(data.draw(st.sets(st.integers(0, 10**6), min_size=n, max_size=n))),
                     dtype=np.int32)
    top_tf = data.draw(st.sampled_from([1, 3, 300]))
    top_len = data.draw(st.sampled_from([1, 30, 700, 5000]))
    tfs = np.array(data.draw(st.lists(st.integers(1, top_tf), min_size=n, max_size=n)),
                   dtype=np.uint16)
    lengths = np.array(data.draw(st.lists(st.integers(1, top_len), min_size=n, max_size=n)),
                       dtype=np.int32)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(impact, "RANKED_MAX", ranked_max)
        got = impact.group(slots, tfs, lengths)
    want: dict[tuple[int, int], list[int]] = {}
    for s, tf, length in zip(slots.tolist(), tfs.tolist(), lengths.tolist(), strict=True):
        want.setdefault((tf, length), []).append(s)
    keys = sorted(want, key=lambda kv: (-kv[0], kv[1]))
    assert got.slots.dtype == np.int32
    assert list(zip(got.tf.tolist(), got.length.tolist(), strict=True)) == keys
    assert got.size.tolist() == [len(want[kv]) for kv in keys]
    assert got.start.tolist() == np.cumsum([0, *got.size.tolist()[:-1]]).tolist()
    assert got.slots.tolist() == [s for kv in keys for s in want[kv]]
