"""Exhaustive BM25, memoised per revision, is the reference BM25 ranking bit for bit.

Queries with few postings are scored exhaustively (holomem/projections/exhaustive.py):
each term's contributions are kept until the next write, queries add them up, and
``BM25.top`` keeps only the documents that may be among the k best. For any history
of additions, replacements, deletions and merges with queries in between (so terms
are read from the memo of the same revision and recomputed after every write), any
query, any k, any restriction and any memo size, the top k of ``BM25.top`` and of
``BM25.score`` are those of a plain Python BM25 written from the formula, with the
same scores to the last bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem.events import DocumentAdded, DocumentDeleted, DocumentReplaced
from holomem.projections import bm25 as bm25_module
from holomem.projections import exhaustive
from holomem.projections.bm25 import BM25
from holomem.projections.catalog import Catalog
from holomem.projections.fusion import top_k
from holomem.projections.tokenize import tokenize

WORDS = [f"w{i}" for i in range(30)]
zipf_word = st.integers(0, 10**6).map(
    lambda x: WORDS[min(len(WORDS) - 1, int((len(WORDS) ** (x / 10**6)) - 1))])
text = st.lists(zipf_word, min_size=1, max_size=25).map(" ".join)
query = st.lists(zipf_word, min_size=1, max_size=5).map(" ".join)
step = st.one_of(
    st.tuples(st.just("add"), text),
    st.tuples(st.just("replace"), st.integers(0, 10**6), text),
    st.tuples(st.just("delete"), st.integers(0, 10**6)),
    st.tuples(st.just("merge")),
    st.tuples(st.just("query"), query, st.integers(1, 30), st.integers(0, 3)),
)


def reference(index: BM25, texts: dict[str, str], q: str, k: int,
              allowed: np.ndarray | None) -> tuple[list[int], list[float]]:
    """The k best live documents by BM25 from the formula, one document at a time:
    (slots, scores), score descending then slot ascending."""
    catalog = index.catalog
    live = np.flatnonzero(catalog.alive.view()).tolist()
    tfs: dict[int, dict[int, int]] = {}
    lengths: dict[int, int] = {}
    for slot in live:
        words = tokenize(texts[catalog.ids[slot] or ""])
        lengths[slot] = len(words)
        counts: dict[int, int] = {}
        for word in words:
            tid = index.vocabulary._word_term[word]
            counts[tid] = counts.get(tid, 0) + 1
        tfs[slot] = counts
    n = len(live)
    avg = sum(lengths.values()) / n if n else 0.0
    scores: dict[int, float] = {}
    for tid in index.query_terms(q):
        holders = [s for s in live if tid in tfs[s]]
        if not holders:
            continue
        df = len(holders)
        weight = math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (index.k1 + 1.0)
        for slot in holders:
            if allowed is not None and not allowed[slot]:
                continue
            tf = float(tfs[slot][tid])
            norm = index.k1 * (1.0 - index.b + index.b * lengths[slot] / (avg or 1.0))
            scores[slot] = scores.get(slot, 0.0) + weight * tf / (tf + norm)
    best = sorted(scores, key=lambda s: (-scores[s], s))[:k]
    return best, [scores[s] for s in best]


def _check(index: BM25, texts: dict[str, str], q: str, k: int,
           allowed: np.ndarray | None) -> None:
    want_s, want_v = reference(index, texts, q, k, allowed)
    for slots, values in (index.top(q, k, allowed), index.score(q, allowed)):
        got = top_k(slots, values, k)
        assert slots[got].tolist() == want_s
        assert values[got].tobytes() == np.array(want_v, dtype=np.float64).tobytes()


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=80), seed=st.integers(0, 2**32 - 1),
       memo_postings=st.sampled_from([0, 7, 1 << 20]), memo_terms=st.sampled_from([1, 3, 4096]))
def test_exhaustive_top_k_is_the_reference_bm25_across_writes_and_memo_sizes(
        steps: list[tuple[object, ...]], seed: int, memo_postings: int,
        memo_terms: int) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bm25_module, "MERGE_DOCS", 5)  # base, mid and delta all hold postings
        mp.setattr(exhaustive, "MEMO_POSTINGS", memo_postings)
        mp.setattr(exhaustive, "MEMO_TERMS", memo_terms)
        rng = np.random.default_rng(seed)
        catalog = Catalog()
        index = BM25(catalog)
        texts: dict[str, str] = {}
        ids: list[str] = []
        seq = 0
        for s in steps:
            event: DocumentAdded | DocumentReplaced | DocumentDeleted
            if s[0] == "query":
                _, q, k, restrict = s
                allowed = (None if not restrict
                           else rng.random(catalog.slots) < int(str(restrict)) / 4)
                # Twice: the second reads every term from this revision's memo.
                _check(index, texts, str(q), int(str(k)), allowed)
                _check(index, texts, str(q), int(str(k)), allowed)
                continue
            if s[0] == "merge":
                index.merge()
                continue
            if s[0] == "add":
                doc_id = f"d{len(ids)}"
                ids.append(doc_id)
                texts[doc_id] = str(s[1])
                event = DocumentAdded(id=doc_id, text=str(s[1]))
            elif not ids:
                continue
            elif s[0] == "replace":
                doc_id = ids[int(str(s[1])) % len(ids)]
                texts[doc_id] = str(s[2])
                event = DocumentReplaced(id=doc_id, text=str(s[2]))
            else:
                event = DocumentDeleted(id=ids[int(str(s[1])) % len(ids)])
            seq += 1
            change = catalog.apply(seq, event)
            index.apply(seq, event, change)


def test_a_write_is_seen_by_the_next_query_of_a_term_already_scored() -> None:
    catalog = Catalog()
    index = BM25(catalog)
    for seq, doc in enumerate(["apple pie", "apple tart", "pear"], start=1):
        event = DocumentAdded(id=f"d{seq}", text=doc)
        index.apply(seq, event, catalog.apply(seq, event))
    before = index.top("apple", 10)
    event = DocumentAdded(id="d4", text="apple apple")
    index.apply(4, event, catalog.apply(4, event))
    slots, scores = index.top("apple", 10)
    assert slots.tolist() == [0, 1, 3]
    assert scores[0] != before[1][0]  # the idf and the average length moved
    texts = {"d1": "apple pie", "d2": "apple tart", "d3": "pear", "d4": "apple apple"}
    _check(index, texts, "apple", 10, None)
