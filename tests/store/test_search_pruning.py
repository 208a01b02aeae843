"""The pruned top-k of BM25 is the exhaustive top-k, bit for bit.

``BM25.top`` reads each term's best impact groups and skips documents that cannot
reach the k-th score (holomem/projections/pruning.py); ``BM25.score`` scores every
matching document. For any corpus (common and rare words, repeated words, documents
of very different lengths), any history of additions, replacements and deletions
(merges at every level), any query, any k, any restriction, and any setting of the
pruning's knobs (which lists are grouped or dense, how the heads grow, which way
candidates are merged), ``top_k`` of the two answers gives the same slots in the same
order with the same scores.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import Store
from holomem.events import DocumentAdded, DocumentDeleted, DocumentReplaced
from holomem.projections import bm25 as bm25_module
from holomem.projections import impact as impact_module
from holomem.projections import pruning as pruning_module
from holomem.projections.bm25 import BM25
from holomem.projections.catalog import Catalog
from holomem.projections.fusion import top_k

WORDS = [f"w{i}" for i in range(40)]
# Zipf-like: the first words are in most documents, the last in few.
WEIGHTS = [1.0 / (i + 1) for i in range(len(WORDS))]

word = st.sampled_from(WORDS)
zipf_word = st.integers(0, 10**6).map(
    lambda x: WORDS[min(len(WORDS) - 1, int((len(WORDS) ** (x / 10**6)) - 1))])
text = st.lists(st.one_of(zipf_word, word), min_size=1, max_size=30).map(" ".join)
op = st.one_of(
    st.tuples(st.just("add"), text),
    st.tuples(st.just("replace"), st.integers(0, 400), text),
    st.tuples(st.just("delete"), st.integers(0, 400)),
)


def _build(ops: list[tuple[object, ...]]) -> tuple[Catalog, BM25]:
    catalog = Catalog()
    index = BM25(catalog)
    ids: list[str] = []
    for seq, o in enumerate(ops, start=1):
        if o[0] == "add":
            doc_id = f"d{len(ids)}"
            ids.append(doc_id)
            event: DocumentAdded | DocumentReplaced | DocumentDeleted = DocumentAdded(
                id=doc_id, text=str(o[1]))
        elif not ids:
            continue
        elif o[0] == "replace":
            event = DocumentReplaced(id=ids[int(str(o[1])) % len(ids)], text=str(o[2]))
        else:
            event = DocumentDeleted(id=ids[int(str(o[1])) % len(ids)])
        index.apply(seq, event, catalog.apply(seq, event))
    return catalog, index


def _same_top(index: BM25, query: str, k: int, allowed: np.ndarray | None) -> None:
    full_s, full_v = index.score(query, allowed)
    part_s, part_v = index.top(query, k, allowed)
    want = top_k(full_s, full_v, k)
    got = top_k(part_s, part_v, k)
    assert full_s[want].tolist() == part_s[got].tolist()
    assert full_v[want].tobytes() == part_v[got].tobytes()  # the same bits


@pytest.fixture(autouse=True)
def _always_prune(monkeypatch: pytest.MonkeyPatch) -> None:
    # Prune every query, and merge often so that base, mid and delta all hold postings.
    monkeypatch.setattr(bm25_module, "EXHAUSTIVE", 0)
    monkeypatch.setattr(bm25_module, "DENSE_WORK", 0)
    monkeypatch.setattr(bm25_module, "MERGE_DOCS", 7)
    monkeypatch.setattr(impact_module, "GROUPED_MIN", 3)  # small lists are grouped too


# The pruning's knobs, each between its extremes (the defaults are tuned for 1M facts).
knobs = st.fixed_dictionaries({
    (impact_module, "GROUPED_MIN"): st.sampled_from([1, 3, 12]),
    (impact_module, "DENSE"): st.sampled_from([1, 8, 10**9]),
    (pruning_module, "FIRST"): st.sampled_from([1, 4, 1024]),
    (pruning_module, "GROW"): st.sampled_from([1.5, 8]),
    (pruning_module, "FLOOR"): st.sampled_from([0, 1 << 15]),
    (pruning_module, "SPARSE"): st.sampled_from([1, 10**9]),
    (pruning_module, "COLUMN_MIN"): st.sampled_from([0, 10**9]),
    (pruning_module, "POINTS"): st.sampled_from([4, 96]),
    (pruning_module, "AHEAD"): st.sampled_from([0, 1, 4]),
})


def _set(mp: pytest.MonkeyPatch, values: dict[tuple[object, str], object]) -> None:
    for (module, name), value in values.items():
        mp.setattr(module, name, value)


@settings(max_examples=60, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(ops=st.lists(op, min_size=1, max_size=120),
       queries=st.lists(st.lists(st.one_of(zipf_word, word), min_size=1, max_size=6),
                        min_size=1, max_size=4),
       k=st.integers(1, 40), restrict=st.integers(0, 3), seed=st.integers(0, 2**32 - 1),
       tuned=knobs)
def test_pruned_top_k_equals_exhaustive_top_k_bit_for_bit(
        ops: list[tuple[object, ...]], queries: list[list[str]], k: int, restrict: int,
        seed: int, tuned: dict[tuple[object, str], object]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _set(mp, tuned)
        catalog, index = _build(ops)
        rng = np.random.default_rng(seed)
        allowed = None if not restrict else rng.random(catalog.slots) < restrict / 4
        for q in queries:
            _same_top(index, " ".join(q), k, allowed)


@settings(max_examples=120, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(20, 1500), churn=st.floats(0, 0.3),
       skew=st.floats(0.5, 2.0), k=st.integers(1, 12), restrict=st.integers(0, 3),
       tuned=knobs)
def test_pruned_top_k_equals_exhaustive_on_larger_zipf_corpora(
        seed: int, n: int, churn: float, skew: float, k: int, restrict: int,
        tuned: dict[tuple[object, str], object]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        _set(mp, tuned)
        _zipf_case(seed, n, churn, skew, k, restrict)


def _zipf_case(seed: int, n: int, churn: float, skew: float, k: int, restrict: int) -> None:
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, len(WORDS) + 1) ** skew
    p /= p.sum()
    ops: list[tuple[object, ...]] = []
    for _ in range(n):
        words = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)), p=p))
        roll = rng.random()
        if roll < churn / 2:
            ops.append(("delete", int(rng.integers(0, 10**6))))
        elif roll < churn:
            ops.append(("replace", int(rng.integers(0, 10**6)), words))
        else:
            ops.append(("add", words))
    catalog, index = _build(ops)
    if rng.random() < 0.5:
        index.merge()
    allowed = None if not restrict else rng.random(catalog.slots) < restrict / 4
    for _ in range(4):
        q = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 7)), p=p))
        _same_top(index, q, k, allowed)


def test_pruning_skips_documents_yet_keeps_the_exhaustive_answer() -> None:
    # Many documents hold only common words; a rare word decides the top 10.
    rng = np.random.default_rng(5)
    catalog = Catalog()
    index = BM25(catalog)
    for i in range(3000):
        words = list(rng.choice(WORDS[:5], size=12))
        if i % 300 == 0:
            words.append("rare")
        event = DocumentAdded(id=f"d{i}", text=" ".join(words))
        index.apply(i + 1, event, catalog.apply(i + 1, event))
    index.merge()
    query = "w0 w1 w2 rare"
    slots, _ = index.top(query, 10)
    assert len(slots) < len(index.score(query)[0]) // 10  # most documents were skipped
    _same_top(index, query, 10, None)


def test_search_over_a_reopened_store_is_the_exhaustive_ranking(tmp_path: object) -> None:
    rng = np.random.default_rng(9)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 25)), p=np.array(WEIGHTS)
                                 / sum(WEIGHTS))) for _ in range(2500)]
    path = f"{tmp_path}/s"

    def check(s: Store) -> None:
        with s.reading() as view:
            for q in ("w0 w1 w30", "w2 w3 w4 w5", "w39", "w0"):
                hits = s.search_documents(q, 10)
                full_s, full_v = view.bm25.score(q)
                want = top_k(full_s, full_v, 10)
                assert [h.id for h in hits] == [view.id_of(int(x)) for x in full_s[want]]
                assert [h.score for h in hits] == full_v[want].tolist()

    with Store.open(path, sync="none") as s:
        for lo in range(0, len(texts), 500):  # runs of new documents (the bulk apply)
            s.add_documents([{"id": f"d{i}", "text": texts[i]}
                             for i in range(lo, lo + 500)])
        s.delete_document("d7")
        check(s)
    with Store.open(path) as s:
        check(s)
