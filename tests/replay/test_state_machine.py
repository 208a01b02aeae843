"""Incremental state equals a full rebuild, and search equals a brute-force reference.

docs/contract.md §1: "Deleting every projection file and reopening must give the same answers."
docs/contract.md §2: lexical scoring is BM25 (k1 = 1.2, b = 0.75), cosine fused when the caller
gives an embedding, ties broken deterministically by insertion order.

A Hypothesis state machine drives one writable Store through adds, replacements,
atomic batches (repeated ids included), deletes, searches, compactions (with and
without purge), clean reopens and reopens after the text segment was deleted.
After every step it checks that:

(a) the store answers exactly like a store rebuilt from the same journal (a
    read-only open replays everything and takes no lock): the same documents, the
    same hits and scores for lexical, fused and filtered searches;
(b) search_documents equals a reference BM25 written here from the formula
    documented in holomem.projections.bm25 (Lucene's idf, k1 = 1.2, b = 0.4, N/df/
    avglen over live documents, distinct query terms, query stopwords left out
    unless nothing else remains, the store's tokenizer and stemmer), ties in write
    order, where a replaced document counts as newly written; fused scores equal
    the documented fusion.

BM25's merge threshold is lowered so that the base + delta posting layout and its
merges (which drop vacated slots) run during the incremental steps, not only at
the end of a replay.
"""

from __future__ import annotations

import glob
import itertools
import math
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

import holomem.projections.bm25 as bm25_module
from holomem import Hit, Store
from holomem.projections.tokenize import STOPWORDS, stem, tokenize

# As documented in holomem.projections.bm25 (b = 0.4 was measured on LoCoMo).
K1 = 1.2
B = 0.4
W_LEXICAL = W_SEMANTIC = 0.5  # docs/contract.md §2 / holomem.projections.fusion

# Small on purpose, so that queries match and document frequencies collide. Plurals,
# inflections, case and an apostrophe exercise tokenize() and stem(); "the" and "and"
# are query stopwords (documents keep them).
VOCAB = [
    "apple", "apples", "box", "boxes", "city", "cities", "glass", "painted", "painting",
    "river", "stone", "Stones", "quiet", "moon", "lamp", "LAMPS", "cats", "don't", "the",
    "and",
]
QUERY_WORDS = [*VOCAB, "zebra", "alice's", "paints"]  # some match nothing
IDS = [f"doc-{i}" for i in range(8)]
DIM = 3

texts = st.lists(st.sampled_from(VOCAB), max_size=12).map(" ".join)
queries = st.lists(st.sampled_from(QUERY_WORDS), min_size=1, max_size=4).map(", ".join)
metadatas = st.none() | st.fixed_dictionaries({"n": st.integers(-5, 5)})
entity_lists = st.lists(st.sampled_from(["Alice", "Bob", "Paris"]), max_size=2, unique=True)
# Small integer vectors, so that equal directions (exact cosine ties) are common.
vectors = st.lists(st.integers(-2, 2), min_size=DIM, max_size=DIM).filter(any).map(
    lambda v: [float(x) for x in v])
embeddings = st.none() | vectors
documents = st.fixed_dictionaries(
    {"text": texts, "metadata": metadatas, "entities": entity_lists, "embedding": embeddings})

# Checked against the rebuilt store after every step.
PROBES = ["apple", "boxes city", "cats lamp paint", "don't quiet moon stone", "the river glass",
          "the and"]
PROBE_EMBEDDING = [1.0, -1.0, 2.0]


def reference_bm25(docs: dict[str, dict[str, Any]], query: str) -> dict[str, float]:
    """Brute-force Lucene BM25 of every matching document in ``docs``."""
    terms = {d: [stem(w) for w in tokenize(v["text"])] for d, v in docs.items()}
    n = len(docs)
    if n == 0:
        return {}
    avglen = sum(len(t) for t in terms.values()) / n
    words = tokenize(query)
    words = [w for w in words if w not in STOPWORDS] or words
    qterms = list(dict.fromkeys(stem(w) for w in words))
    df = {t: sum(1 for ts in terms.values() if t in ts) for t in qterms}
    out: dict[str, float] = {}
    for doc_id, ts in terms.items():
        score = 0.0
        matched = False
        for t in qterms:
            tf = ts.count(t)
            if not tf:
                continue
            matched = True
            idf = math.log(1.0 + (n - df[t] + 0.5) / (df[t] + 0.5))
            norm = K1 * (1.0 - B + B * len(ts) / avglen)
            # Written in the store's association order, so that documents that tie
            # exactly there tie exactly here (and are then ordered by write order).
            score += idf * (K1 + 1.0) * tf / (tf + norm)
        if matched:
            out[doc_id] = score
    return out


def reference_ranking(docs: dict[str, dict[str, Any]], query: str, k: int,
                      ids: list[str] | None = None) -> list[tuple[str, float]]:
    """Reference BM25 hits, best first, ties in write order (the order of ``docs``)."""
    scores = reference_bm25(docs, query)
    order = {d: i for i, d in enumerate(docs)}
    hits = [(d, s) for d, s in scores.items() if ids is None or d in ids]
    hits.sort(key=lambda h: (-h[1], order[h[0]]))
    return hits[:k]


def reference_fused(docs: dict[str, dict[str, Any]], query: str,
                    embedding: list[float]) -> dict[str, tuple[float, float, float]]:
    """id -> (score, lexical, cosine) of every candidate of a fused search."""
    lex = reference_bm25(docs, query)
    q = np.asarray(embedding) / np.linalg.norm(embedding)
    cos = {d: float(np.dot(np.asarray(v["embedding"]) / np.linalg.norm(v["embedding"]), q))
           for d, v in docs.items() if v["embedding"] is not None}
    top = max(lex.values(), default=0.0)
    out = {}
    for d in docs:
        if d in lex or d in cos:
            lexical, cosine = lex.get(d, 0.0), cos.get(d, 0.0)
            score = W_LEXICAL * (lexical / top if top > 0 else 0.0) + W_SEMANTIC * max(cosine, 0)
            out[d] = (score, lexical, cosine)
    return out


def assert_same_hits(got: list[Hit], want: list[Hit] | list[tuple[str, float]]) -> None:
    pairs = [(h.id, h.score) if isinstance(h, Hit) else h for h in want]
    assert [h.id for h in got] == [i for i, _ in pairs]
    for h, (_, score) in zip(got, pairs, strict=True):
        assert h.score == pytest.approx(score, rel=1e-9, abs=0.0)
    for h, w in zip(got, want, strict=True):
        if isinstance(w, Hit):
            assert h.lexical_score == pytest.approx(w.lexical_score, rel=1e-9, abs=0.0)
            assert (h.semantic_score is None) == (w.semantic_score is None)
            if h.semantic_score is not None:
                assert h.semantic_score == pytest.approx(w.semantic_score, rel=1e-9, abs=0.0)
        else:
            assert h.lexical_score == h.score
            assert h.semantic_score is None


class StoreMachine(RuleBasedStateMachine):
    #: where each run's store directory goes (the test points it at its tmp_path)
    base: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="holomem-replay-", dir=self.base)
        self.path = os.path.join(self.dir, "store")
        self.store = Store.open(self.path, sync="none", segment_size=4096)
        # id -> {"text", "metadata", "entities", "embedding"}, in write order
        self.docs: dict[str, dict[str, Any]] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _record(self, doc_id: str, doc: dict[str, Any]) -> None:
        self.docs.pop(doc_id, None)  # a replacement is a new write: it goes last
        self.docs[doc_id] = doc

    # -- writes -----------------------------------------------------------------------
    @precondition(lambda self: len(self.docs) < len(IDS))
    @rule(data=st.data(), doc=documents)
    def add_new(self, data: st.DataObject, doc: dict[str, Any]) -> None:
        doc_id = data.draw(st.sampled_from([i for i in IDS if i not in self.docs]))
        before = self.store.revision
        assert self.store.add_document(doc_id, **doc) == self.store.revision == before + 1
        self._record(doc_id, doc)

    @precondition(lambda self: bool(self.docs))
    @rule(data=st.data(), doc=documents)
    def replace(self, data: st.DataObject, doc: dict[str, Any]) -> None:
        doc_id = data.draw(st.sampled_from(sorted(self.docs)))
        self.store.add_document(doc_id, **doc)
        self._record(doc_id, doc)

    @rule(batch=st.lists(st.tuples(st.sampled_from(IDS), documents), min_size=1, max_size=4))
    def add_batch(self, batch: list[tuple[str, dict[str, Any]]]) -> None:
        # Repeated ids inside one batch are allowed: the later item wins.
        before = self.store.revision
        seq = self.store.add_documents([{"id": i, **doc} for i, doc in batch])
        assert seq == self.store.revision == before + 1  # one transaction
        for doc_id, doc in batch:
            self._record(doc_id, doc)

    @rule(doc_id=st.sampled_from(IDS))
    def delete(self, doc_id: str) -> None:
        existed = doc_id in self.docs
        before = self.store.revision
        assert self.store.delete_document(doc_id) is existed
        assert self.store.revision == (before + 1 if existed else before)
        self.docs.pop(doc_id, None)

    # -- reads ------------------------------------------------------------------------
    @rule(query=queries, k=st.integers(1, len(IDS) + 2))
    def search(self, query: str, k: int) -> None:
        assert_same_hits(self.store.search_documents(query, k),
                         reference_ranking(self.docs, query, k))

    @rule(query=queries, wanted=st.lists(st.sampled_from([*IDS, "never-written"]), unique=True))
    def search_filtered(self, query: str, wanted: list[str]) -> None:
        # The filter restricts results; collection statistics still count every doc.
        assert_same_hits(self.store.search_documents(query, len(IDS), ids=wanted),
                         reference_ranking(self.docs, query, len(IDS), wanted))

    @rule(query=queries, embedding=vectors, k=st.integers(1, len(IDS) + 2))
    def search_fused(self, query: str, embedding: list[float], k: int) -> None:
        hits = self.store.search_documents(query, k, embedding=embedding)
        if not self.store.embedding_dim:
            # No document of this generation has had an embedding (none fixed the
            # dimension): the query embedding has nothing to compare, search is lexical.
            assert not any(d["embedding"] is not None for d in self.docs.values())
            assert_same_hits(hits, reference_ranking(self.docs, query, k))
            return
        want = reference_fused(self.docs, query, embedding)
        assert len(hits) == min(k, len(want))
        order = list(self.docs)
        for h in hits:
            score, lexical, cosine = want[h.id]
            # float32 vectors: cosine agrees to ~1e-7
            assert h.score == pytest.approx(score, abs=1e-6)
            assert h.lexical_score == pytest.approx(lexical, rel=1e-9, abs=0.0)
            assert h.semantic_score == pytest.approx(cosine, abs=1e-6)
        for a, b in itertools.pairwise(hits):
            assert (-a.score, order.index(a.id)) < (-b.score, order.index(b.id))
        # Nothing left out scores better than the last hit returned.
        if hits:
            returned = {h.id for h in hits}
            assert all(s <= hits[-1].score + 1e-6
                       for d, (s, _, _) in want.items() if d not in returned)

    @rule(purge=st.booleans())
    def compact(self, purge: bool) -> None:
        # A new generation holding only the live state, in write order.
        generation, revision = self.store.generation, self.store.revision
        before = self._answers()
        self.store.compact(purge=purge)
        assert self.store.generation == generation + 1
        assert self.store.revision >= revision  # sequence numbers only grow
        assert len(glob.glob(os.path.join(self.path, "gen-*"))) == 1
        # Compaction changes no answer (documents, lexical and filtered search).
        assert self._answers() == before

    def _answers(self) -> tuple[object, ...]:
        return (self.store.ids(), [self.store.get_document(i) for i in IDS],
                [self.store.search_documents(q, 100) for q in PROBES],
                [self.store.search_documents(q, 100, ids=IDS[1::2]) for q in PROBES])

    # -- restarts ---------------------------------------------------------------------
    @rule()
    def reopen(self) -> None:
        revision = self.store.revision
        self.store.close()
        self.store = Store.open(self.path, sync="none", segment_size=4096)
        assert self.store.revision == revision
        # A clean close sealed the text segment: it is trusted as is.
        assert self.store.stats().opened_by == "replay"

    @rule()
    def delete_text_segment_then_reopen(self) -> None:
        self.store.close()
        segs = glob.glob(os.path.join(self.path, "gen-*", "text.seg"))
        assert len(segs) == 1
        os.unlink(segs[0])
        self.store = Store.open(self.path, sync="none", segment_size=4096)
        assert self.store.stats().opened_by == "replay+reconcile"
        assert os.path.exists(segs[0])

    # -- invariants -------------------------------------------------------------------
    @invariant()
    def documents_match_the_model(self) -> None:
        assert len(self.store) == len(self.docs)
        assert self.store.ids() == list(self.docs)  # write order
        for doc_id in IDS:
            doc = self.store.get_document(doc_id)
            assert self.store.has_document(doc_id) is (doc_id in self.docs)
            if doc_id not in self.docs:
                assert doc is None
                continue
            want = self.docs[doc_id]
            assert doc is not None
            assert (doc.id, doc.text, doc.metadata, doc.entities) == (
                doc_id, want["text"], want["metadata"], tuple(want["entities"]))
            if want["embedding"] is None:
                assert doc.embedding is None
            else:  # stored as a float32 unit vector
                w = np.asarray(want["embedding"])
                assert doc.embedding is not None
                assert np.allclose(doc.embedding, w / np.linalg.norm(w), rtol=0, atol=1e-6)

    @invariant()
    def incremental_state_equals_a_full_rebuild(self) -> None:
        with Store.open(self.path, read_only=True) as rebuilt:
            assert rebuilt.revision == self.store.revision
            assert rebuilt.ids() == self.store.ids()
            assert rebuilt.embedding_dim == self.store.embedding_dim
            for doc_id in IDS:
                assert rebuilt.get_document(doc_id) == self.store.get_document(doc_id)
            for q in PROBES:
                got = self.store.search_documents(q, 100)
                assert_same_hits(got, rebuilt.search_documents(q, 100))
                assert_same_hits(got, reference_ranking(self.docs, q, 100))
                assert_same_hits(self.store.search_documents(q, 100, embedding=PROBE_EMBEDDING),
                                 rebuilt.search_documents(q, 100, embedding=PROBE_EMBEDDING))
                some = IDS[::2]
                assert_same_hits(self.store.search_documents(q, 100, ids=some),
                                 rebuilt.search_documents(q, 100, ids=some))


def test_the_reference_uses_the_documented_parameters() -> None:
    assert (bm25_module.K1, bm25_module.B) == (K1, B)


def test_incremental_state_equals_full_rebuild_and_reference_bm25(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(bm25_module, "MERGE_DOCS", 3)
    monkeypatch.setattr(StoreMachine, "base", str(tmp_path))
    run_state_machine_as_test(
        StoreMachine,
        settings=settings(max_examples=40, stateful_step_count=30, deadline=None,
                          database=None, suppress_health_check=[HealthCheck.too_slow]),
    )
