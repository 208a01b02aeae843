"""A restored catalog finds every id where the replayed one does (FORMAT.md §9.2's id
table): the table a checkpoint holds is the same whether it was built from scratch or
from the previous checkpoint's, and a catalog restored from it answers slot lookups,
membership and ``none_live`` exactly as the catalog it was taken from, through the
writes that follow (adds, replacements, deletes of restored and of new ids).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.events import DocumentAdded, DocumentDeleted, DocumentReplaced
from holomem.projections import checkpoint as codec
from holomem.projections.catalog import Catalog, IdTable

ID = st.sampled_from([f"d{i}" for i in range(40)] + ["", "é", "a" * 300])
#: (0 add, 1 replace, 2 delete, id)
OPS = st.lists(st.tuples(st.integers(0, 2), ID), max_size=60)


def _run(catalog: Catalog, ops: list[tuple[int, str]], seq: int) -> int:
    for kind, doc_id in ops:
        seq += 1
        if kind == 2:
            catalog.apply(seq, DocumentDeleted(id=doc_id))
        elif kind == 1 and doc_id in catalog:
            catalog.apply(seq, DocumentReplaced(id=doc_id, text="t"))
        elif doc_id not in catalog:
            catalog.apply(seq, DocumentAdded(id=doc_id, text="t"))
    return seq


def _restored(catalog: Catalog) -> Catalog:
    parts = codec.decode(codec.encode({"catalog": catalog.snapshot()}).join())
    out = Catalog()
    out.restore(parts["catalog"])
    return out


def _same_lookups(a: Catalog, b: Catalog, ids: list[str]) -> None:
    for doc_id in ids:
        assert a.slot(doc_id) == b.slot(doc_id), doc_id
        assert (doc_id in a) == (doc_id in b), doc_id
        assert a.none_live([doc_id, "never"]) == b.none_live([doc_id, "never"]), doc_id
    assert a.ids == b.ids and a.live == b.live


@settings(max_examples=60, deadline=None)
@given(OPS, OPS, OPS)
def test_a_restored_catalog_answers_every_lookup_as_the_replayed_one(
        first: list[tuple[int, str]], second: list[tuple[int, str]],
        third: list[tuple[int, str]]) -> None:
    every = sorted({i for _, i in first + second + third} | {"never"})
    live = Catalog()
    seq = _run(live, first, 0)
    restored = _restored(live)
    _same_lookups(live, restored, every)
    seq = _run(live, second, seq)
    _run(restored, second, seq - len(second))
    _same_lookups(live, restored, every)
    # A second checkpoint, built from the first one's table, then restored again.
    again = _restored(restored)
    scratch = IdTable.build(live.ids, np.array([i is not None for i in live.ids], dtype=bool))
    snap = again.snapshot()
    assert np.array_equal(snap["table_keys"](), scratch.keys)
    assert np.array_equal(snap["table_slots"](), scratch.slots)
    _run(again, third, seq)
    _run(live, third, seq)
    _same_lookups(live, again, every)
