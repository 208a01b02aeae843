"""Search: deterministic ties, the ids filter, and cosine fusion.

docs/contract.md §2: "search_documents(query, k=10, *, embedding=None, ids=None) -> hits best
first, each with id, score, lexical_score, semantic_score ... cosine is added when
the caller gives an embedding ... ids restricts the search to those documents ...
Ties are broken deterministically (document order of insertion)." "embedding
dimension fixed per store at first use."
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from holomem import Store
from holomem.errors import InvalidError
from holomem.projections.fusion import W_LEXICAL, W_SEMANTIC


def _ids(hits: list) -> list[str]:
    return [h.id for h in hits]


@pytest.mark.parametrize("n", [5, 300])
def test_equal_scores_come_back_in_write_order(tmp_path: Path, n: int) -> None:
    seed = random.randrange(2**32)
    print(f"seed={seed}")
    rng = random.Random(seed)
    names = [f"id-{i:04d}" for i in range(n)]
    rng.shuffle(names)  # write order differs from any order of the ids themselves
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        store.add_document("other", "a longer text that also mentions the lamp once")
        for name in names:
            store.add_document(name, "the same lamp")
        hits = store.search_documents("lamp", n + 1)
        assert _ids(hits[:-1]) == names  # all tie; the longer text scores lower
        assert hits[-1].id == "other"
        assert len({h.score for h in hits[:-1]}) == 1
        for k in (1, 2, 3, n // 2, n - 1):  # a cut inside the ties keeps the first written
            assert _ids(store.search_documents("lamp", k)) == names[:k]
        # A replaced document counts as newly written: it moves to the end of the ties.
        moved = names[1]
        store.add_document(moved, "the same lamp")
        order = [x for x in names if x != moved] + [moved]
        assert _ids(store.search_documents("lamp", n)) == order
        store.delete_document(names[0])
        order = [x for x in order if x != names[0]]
        assert _ids(store.search_documents("lamp", n)) == [*order, "other"]
        assert _ids(store.search_documents("lamp", 3)) == order[:3]
    with Store.open(path, read_only=True) as rebuilt:  # the same after a full replay
        assert _ids(rebuilt.search_documents("lamp", n)) == [*order, "other"]


def test_ties_in_a_batch_keep_the_batch_order(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        store.add_documents([{"id": i, "text": "moon"} for i in ["z", "b", "y", "a"]])
        assert _ids(store.search_documents("moon")) == ["z", "b", "y", "a"]
        store.add_documents([{"id": "b", "text": "moon"}, {"id": "c", "text": "moon"},
                             {"id": "z", "text": "moon"}])
        assert _ids(store.search_documents("moon")) == ["y", "a", "b", "c", "z"]


def test_the_ids_filter_restricts_results_without_changing_scores(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        store.add_document("a", "river stones")
        store.add_document("b", "river river river")
        store.add_document("c", "stones only")
        store.add_document("d", "nothing relevant", embedding=[1.0, 0.0])
        store.add_document("gone", "river")
        store.delete_document("gone")
        full = {h.id: h for h in store.search_documents("river stones", 10)}
        assert set(full) == {"a", "b", "c"}
        for wanted in (["a"], ["b", "c"], ["c", "a", "missing", "gone"], ["a", "b", "c", "d"]):
            hits = store.search_documents("river stones", 10, ids=wanted)
            assert set(_ids(hits)) == set(wanted) & set(full)
            # N, df and avglen still count every live document: same scores.
            for h in hits:
                assert h == full[h.id]
        assert store.search_documents("river stones", 10, ids=[]) == []
        assert store.search_documents("river stones", 10, ids=iter(["a"]))[0].id == "a"
        # The filter applies to the semantic side as well.
        fused = store.search_documents("river", 10, embedding=[1.0, 0.0], ids=["d", "a"])
        assert set(_ids(fused)) == {"a", "d"}


def test_a_document_with_an_identical_embedding_ranks_first_when_text_ties(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        store.add_document("x", "quiet moon", embedding=[1.0, 0.0, 0.0])
        store.add_document("y", "quiet moon", embedding=[0.0, 1.0, 0.0])
        store.add_document("z", "quiet moon", embedding=[0.6, 0.8, 0.0])
        store.add_document("no-emb", "quiet moon")
        store.add_document("far", "unrelated text", embedding=[-1.0, 0.0, 0.0])
        plain = store.search_documents("quiet moon", 10)
        assert _ids(plain) == ["x", "y", "z", "no-emb"]  # text ties: write order
        assert all(h.semantic_score is None and h.score == h.lexical_score for h in plain)

        for target, vec in (("y", [0.0, 2.0, 0.0]), ("z", [0.6, 0.8, 0.0]),
                            ("x", [3.0, 0.0, 0.0])):
            hits = store.search_documents("quiet moon", 10, embedding=vec)
            assert hits[0].id == target
            assert hits[0].semantic_score == pytest.approx(1.0, abs=1e-6)
            lexical = {h.id: h.lexical_score for h in plain}
            top = max(lexical.values())
            for h in hits:
                assert h.semantic_score is not None
                # score = W_LEXICAL * bm25 / max_bm25 + W_SEMANTIC * max(cosine, 0)
                assert h.lexical_score == pytest.approx(lexical.get(h.id, 0.0), rel=1e-12)
                assert h.score == pytest.approx(
                    W_LEXICAL * h.lexical_score / top + W_SEMANTIC * max(h.semantic_score, 0.0),
                    rel=1e-9)
            by_id = {h.id: h for h in hits}
            assert by_id["no-emb"].semantic_score == 0.0  # no embedding: cosine 0
            # A document with only an embedding is a candidate; negative cosine adds 0.
            assert by_id["far"].lexical_score == 0.0 and by_id["far"].score == 0.0
            assert by_id["far"].semantic_score == pytest.approx(
                -vec[0] / math.hypot(*vec), abs=1e-6)

        # Purely semantic: an empty query ranks by cosine alone.
        hits = store.search_documents("", 2, embedding=[0.6, 0.8, 0.0])
        assert _ids(hits) == ["z", "y"]
        assert store.search_documents("", 10) == []


def test_semantic_score_is_none_without_a_query_embedding(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        store.add_document("a", "apple", embedding=[1.0, 2.0])
        store.add_document("b", "apple")
        for h in store.search_documents("apple"):
            assert h.semantic_score is None
            assert h.score == h.lexical_score > 0
        for h in store.search_documents("apple", embedding=[1.0, 2.0]):
            assert h.semantic_score is not None


def test_an_embedding_of_another_dimension_is_refused(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        assert store.embedding_dim == 0
        store.add_document("a", "apple")  # no embedding: the dimension stays open
        assert store.embedding_dim == 0
        store.add_document("b", "apple", embedding=[1.0, 0.0, 0.0])
        assert store.embedding_dim == 3  # fixed at first use
        revision = store.revision
        with pytest.raises(InvalidError) as info:
            store.add_document("c", "apple", embedding=[1.0, 0.0])
        assert info.value.code == "invalid_request"
        with pytest.raises(InvalidError):
            store.add_documents([{"id": "c", "text": "apple", "embedding": [1.0, 0.0, 0.0]},
                                 {"id": "d", "text": "apple", "embedding": [1.0] * 4}])
        with pytest.raises(InvalidError):
            store.add_document("b", "replacement", embedding=[1.0] * 4)
        with pytest.raises(InvalidError):
            store.search_documents("apple", embedding=[1.0, 0.0])
        with pytest.raises(InvalidError):
            store.search_documents("apple", embedding=[1.0, 0.0, 0.0, 0.0])
        assert store.revision == revision and store.ids() == ["a", "b"]
        doc = store.get_document("b")
        assert doc is not None and doc.text == "apple"
        # Deleting every document with an embedding does not reopen the dimension.
        store.delete_document("b")
        with pytest.raises(InvalidError):
            store.add_document("c", "apple", embedding=[1.0, 0.0])


def test_compaction_keeps_the_embedding_dimension_and_fused_answers(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        store.add_document("a", "apple", embedding=[1.0, 0.0])
        store.add_document("b", "apple pie")
        store.delete_document("a")
        before = store.search_documents("apple", embedding=[1.0, 0.0])
        store.compact()
        assert store.search_documents("apple", embedding=[1.0, 0.0]) == before
        assert store.embedding_dim == 2  # "fixed per store at first use" (docs/contract.md §2)
        with pytest.raises(InvalidError):
            store.add_document("c", "x", embedding=[1.0, 2.0, 3.0])
