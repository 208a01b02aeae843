"""The approximate vector index built in the background (docs/contract.md §4e "Vector
search at scale").

Guarantees: its top 10 agrees with exact search on a fixed clustered corpus; a look into
the past (as_of, known_at, history) and a namespace restriction answer exactly what exact
search answers; a writer never waits for a build (a build held still on purpose while a
remember completes), recall is exact until the build is done, and what was written,
forgotten or purged meanwhile is caught up — a forgotten fact never comes back from it.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from holomem import ManualClock, Memory, Store
from holomem.api.engine import view as view_module
from holomem.projections import embeddings, vectorindex

DIM = 24
APPROX = {"vectorSearch": "approximate"}
EXACT = {"vectorSearch": "exact"}
WORDS = ["apple", "river", "stone", "cloud", "lamp", "tiger", "piano", "window", "bread",
         "forest", "amber", "delta"]


def corpus(n: int, seed: int) -> tuple[np.ndarray, list[str]]:
    """Seeded clustered unit vectors (40 topics plus noise) and 4-word texts."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    v = centres[rng.integers(0, 40, n)] + 0.7 * rng.standard_normal((n, DIM))
    vecs = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)
    return vecs, [" ".join(rng.choice(WORDS, size=4)) for _ in range(n)]


def fill(memory: Memory, clock: ManualClock, vecs: np.ndarray, texts: list[str]) -> None:
    for start in range(0, len(vecs), 500):
        memory.remember_many(
            {"id": f"f{i}", "text": texts[i], "embedding": vecs[i].tolist(),
             "namespace": ["team", f"t{i % 4}"]}
            for i in range(start, min(len(vecs), start + 500)))
        clock.advance(60_000)


def built(store: Store) -> int:
    """Wait for the index (started now if no build is under way); its size."""
    return store.read(lambda v: len(v.embeddings.ensure_index(timeout=120)))


def ids(results: list[object]) -> list[str]:
    return [r.id for r in results]  # type: ignore[attr-defined]


def test_approximate_top_10_agrees_with_exact_on_a_clustered_corpus(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        exact = Memory(store, EXACT, clock=clock, persist=True)
        vecs, texts = corpus(4_000, seed=11)
        fill(exact, clock, vecs, texts)
        approx = Memory(store, APPROX, clock=clock)
        built(store)
        rng = np.random.default_rng(12)
        fused = alone = total = 0
        for _ in range(60):
            q = vecs[rng.integers(0, len(vecs))] + 0.3 * rng.standard_normal(DIM)
            words = " ".join(rng.choice(WORDS, size=2))
            e = ids(exact.recall(words, embedding=q.tolist(), k=10))
            a = ids(approx.recall(words, embedding=q.tolist(), k=10))
            fused += len(set(a) & set(e))
            e = ids(exact.recall("zzzz", embedding=q.tolist(), k=10))
            a = ids(approx.recall("zzzz", embedding=q.tolist(), k=10))
            alone += len(set(a) & set(e))
            total += len(e)
        assert store.read(lambda v: v.embeddings.index) is not None
        assert fused / total >= 0.95, fused / total
        assert alone / total >= 0.95, alone / total


@pytest.mark.parametrize("restriction", [
    {"as_of": 1_000_000 + 60_000 * 3}, {"known_at": 1_000_000 + 60_000 * 2},
    {"history": "all"}, {"history": "historical"}, {"namespace": ["team", "t1"]},
    {"namespace": ["team"]}], ids=lambda r: "-".join(map(str, r)))
def test_a_look_into_the_past_or_a_namespace_answers_exactly_as_exact_search(
        tmp_path: Path, restriction: dict[str, object]) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        exact = Memory(store, EXACT, clock=clock, persist=True)
        vecs, texts = corpus(3_000, seed=13)
        fill(exact, clock, vecs, texts)
        # Facts that supersede others, so that history has something to show.
        for i in range(0, 300, 3):
            exact.remember(text=texts[i] + " again", id=f"g{i}", supersedes=[f"f{i}"],
                           embedding=vecs[i].tolist(), namespace=["team", f"t{i % 4}"])
        approx = Memory(store, APPROX, clock=clock)
        built(store)
        rng = np.random.default_rng(14)
        for _ in range(25):
            q = vecs[rng.integers(0, len(vecs))] + 0.3 * rng.standard_normal(DIM)
            words = " ".join(rng.choice(WORDS, size=2))
            e = exact.recall(words, embedding=q.tolist(), k=10, **restriction)
            a = approx.recall(words, embedding=q.tolist(), k=10, **restriction)
            assert [(r.id, r.score) for r in a] == [(r.id, r.score) for r in e]


@pytest.fixture
def held_build(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, threading.Event]]:
    """A build that, once it has started adding vectors, waits for ``release``: the
    build's thread alone is held (a writer's add to an installed index is not)."""
    events = {"adding": threading.Event(), "release": threading.Event()}
    add = vectorindex.VectorIndex.add

    def slow_add(self: vectorindex.VectorIndex, slots: np.ndarray, vectors: np.ndarray
                 ) -> None:
        if threading.current_thread().name == "holomem-vector-index":
            events["adding"].set()
            assert events["release"].wait(60), "the test never released the build"
        add(self, slots, vectors)

    monkeypatch.setattr(vectorindex.VectorIndex, "add", slow_add)
    yield events
    events["release"].set()  # (a failing test must not leave the build's thread waiting)


def _building(store: Store, held_build: dict[str, threading.Event], seed: int, probe: int
              ) -> tuple[Memory, Memory, np.ndarray]:
    """2,000 facts written through an exact memory, then a recall through an
    approximate one by fact ``probe``'s vector, which starts the build (and is answered
    exactly); returns once the build is held adding. (exact, approximate, vectors)"""
    clock = ManualClock(1_000_000)
    exact = Memory(store, EXACT, clock=clock, persist=True)
    vecs, texts = corpus(2_000, seed=seed)
    fill(exact, clock, vecs, texts)
    approx = Memory(store, APPROX, clock=clock)
    approx.recall("", embedding=vecs[probe].tolist(), k=5)
    assert held_build["adding"].wait(60)
    return exact, approx, vecs


def test_a_remember_completes_while_a_build_is_held_and_is_caught_up(
        tmp_path: Path, held_build: dict[str, threading.Event]) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        exact, approx, vecs = _building(store, held_build, seed=15, probe=7)
        probe = vecs[7].tolist()
        order: list[str] = []
        # A writer while the build is held: it is acknowledged, the build still runs.
        new = (-vecs[7]).tolist()
        exact.remember(text="written during the build", id="during", embedding=new)
        order.append("remembered")
        exact.forget({"ids": ["f7"]}, dry_run=False)
        order.append("forgotten")
        assert store.read(lambda v: (v.embeddings.build is not None, v.embeddings.index)) \
            == (True, None)
        order.append("build still running")
        # Until the index is built, recall is the exact path's.
        for q in (probe, new, vecs[100].tolist()):
            assert ids(approx.recall("apple", embedding=q, k=10)) == \
                ids(exact.recall("apple", embedding=q, k=10))
        held_build["release"].set()
        assert built(store) == 2_000  # 2,000 - f7 + during
        order.append("built")
        assert order == ["remembered", "forgotten", "build still running", "built"]
        with store.reading() as view:
            index = view.embeddings.index
            assert index is not None
            assert view.catalog.slot("during") in index
            assert view.catalog.slot("f7") < 0  # (forgotten: its slot is vacated)
        assert approx.recall("", embedding=new, k=1)[0].id == "during"
        assert "f7" not in ids(approx.recall("", embedding=probe, k=50))


def test_a_batch_remembered_while_a_build_is_held_is_in_the_index_it_installs(
        tmp_path: Path, held_build: dict[str, threading.Event]) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        exact, approx, vecs = _building(store, held_build, seed=16, probe=3)
        # A batch (written as one run of new documents, not one by one) meanwhile.
        late = -vecs[:40]
        exact.remember_many([{"id": f"late{i}", "text": f"late fact {i}",
                              "embedding": v.tolist()} for i, v in enumerate(late)])
        held_build["release"].set()
        assert built(store) == 2_040
        with store.reading() as view:
            index = view.embeddings.index
            assert index is not None
            assert all(view.catalog.slot(f"late{i}") in index for i in range(40))
        for i in (0, 17, 39):
            assert approx.recall("", embedding=late[i].tolist(), k=1)[0].id == f"late{i}"


def test_a_purge_during_a_build_never_brings_the_fact_back(
        tmp_path: Path, held_build: dict[str, threading.Event]) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, APPROX, clock=clock, persist=True)
        vecs, texts = corpus(1_500, seed=16)
        fill(memory, clock, vecs, texts)
        probe = vecs[42].tolist()
        memory.recall("", embedding=probe, k=1)  # starts the build (of this generation)
        assert held_build["adding"].wait(60)
        memory.forget({"ids": ["f42"]}, {"purge": True, "dry_run": False})
        held_build["release"].set()
        assert built(store) == 1_499  # the new generation's own index
        assert "f42" not in ids(memory.recall("", embedding=probe, k=50))
        assert store.read(lambda v: v.catalog.slot("f42")) < 0


def test_auto_searches_exactly_below_its_floor_and_never_builds(tmp_path: Path) -> None:
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=clock)
        assert memory.config.vector_search == "auto"
        vecs, texts = corpus(300, seed=17)
        fill(memory, clock, vecs, texts)
        assert store.read(lambda v: v.catalog.live) < embeddings.AUTO_MIN
        memory.recall("apple", embedding=vecs[0].tolist(), k=5)
        assert store.read(lambda v: (v.embeddings.build, v.embeddings.index)) == (None, None)


def test_the_embedder_loads_in_a_process_that_already_built_an_index(tmp_path: Path) -> None:
    # usearch loaded before onnxruntime once crashed the process at the embedder's
    # first use (a pybind11 clash): a store past the index's floor, then an embed.
    code = (
        "import numpy as np\n"
        "from holomem import Memory, Store\n"
        "from holomem.embedders import MiniLM\n"
        f"store = Store.open({str(tmp_path / 's')!r}, sync='none')\n"
        "m = Memory(store, config={'vectorSearch': 'approximate'})\n"
        "rows = np.random.default_rng(1).standard_normal((64, 8)).astype('f4')\n"
        "m.remember_many([{'text': f'fact {i}', 'embedding': r} for i, r in enumerate(rows)])\n"
        "m.recall('fact', embedding=rows[0])\n"
        "import sys\n"
        "assert 'usearch.index' in sys.modules\n"
        "print(MiniLM().embed(['after the index']).shape)\n"
        "store.close()\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(1, 384)" in done.stdout


@pytest.mark.parametrize("fusion", [None, {"method": "linear", "lexicalWeight": 0.4},
                                    {"method": "bounded", "lexicalWeight": 0.5},
                                    {"method": "floored", "lexicalWeight": 0.55}],
                         ids=["default", "linear", "bounded", "floored"])
def test_lexical_candidates_left_unscored_change_no_approximate_answer(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fusion: dict[str, object] | None
) -> None:
    """The approximate path reads the vectors of only the lexical candidates that could
    still reach the top k (View._candidates): its answers, scores included, are those it
    gives when it scores every lexical candidate, and it does leave some unscored."""
    rng = np.random.default_rng(21)
    vocabulary = [f"w{i}" for i in range(80)]
    vecs, _ = corpus(3_000, seed=21)
    # Words drawn unevenly (a few common, many rare), so BM25 scores spread out.
    weights = 1.0 / np.arange(1, len(vocabulary) + 1)
    texts = [" ".join(rng.choice(vocabulary, size=6, p=weights / weights.sum()))
             for _ in range(len(vecs))]
    config: dict[str, object] = dict(APPROX)
    if fusion is not None:
        config["fusion"] = fusion
    scored_rows: list[int] = []
    cosines = embeddings.Embeddings.cosines

    def counted(self: embeddings.Embeddings, q: np.ndarray, slots: np.ndarray) -> np.ndarray:
        scored_rows.append(len(slots))
        return cosines(self, q, slots)

    monkeypatch.setattr(embeddings.Embeddings, "cosines", counted)
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, config, clock=clock, persist=True)
        memory.remember_many({"id": f"f{i}", "text": texts[i], "embedding": vecs[i].tolist()}
                             for i in range(len(vecs)))
        built(store)
        asks = [(" ".join(rng.choice(vocabulary, size=3)),
                 (vecs[rng.integers(0, len(vecs))] + 0.3 * rng.standard_normal(DIM)).tolist())
                for _ in range(40)]

        def answers() -> tuple[list[list[tuple[str, float]]], int]:
            scored_rows.clear()
            out = [[(r.id, r.score) for r in memory.recall(words, embedding=q, k=10)]
                   for words, q in asks]
            return out, sum(scored_rows)

        pruned, rows = answers()
        monkeypatch.setattr(view_module, "LEXICAL_SCORED_FIRST", 10**9)  # score them all
        whole, all_rows = answers()
        assert pruned == whole
        assert rows < all_rows


@pytest.mark.parametrize("fusion", [None, {"method": "linear", "lexicalWeight": 0.2}],
                         ids=["default", "vector-heavy"])
def test_a_query_with_few_lexical_candidates_scores_them_all_from_a_shallow_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fusion: dict[str, object] | None
) -> None:
    """With at least the depth (k, or the candidate limit) and at most View's
    SHALLOW_LEXICAL lexical candidates, the index is searched shallowly first and every
    lexical candidate is scored (its vector read, in the index's list or after it): the
    top 10 still agrees with exact search on a clustered corpus."""
    vecs, texts = corpus(3_000, seed=23)
    # 150 facts hold the rare word: more than recall's depth (candidate_limit 100 when a
    # fusion other than the default ranks), far fewer than SHALLOW_LEXICAL.
    rare = [i for i in range(len(texts)) if i % 20 == 0]
    for i in rare:
        texts[i] += " quartz"
    shallow: list[bool] = []
    read: list[int] = []
    nearest, cosines = embeddings.Embeddings.nearest, embeddings.Embeddings.cosines

    def searched(self: embeddings.Embeddings, q: np.ndarray, allowed: np.ndarray | None,
                 count: int, flag: bool = False
                 ) -> tuple[np.ndarray, np.ndarray, float] | None:
        shallow.append(flag)
        found = nearest(self, q, allowed, count, flag)
        if found is not None:
            read.extend(found[0].tolist())
        return found

    def scored(self: embeddings.Embeddings, q: np.ndarray, slots: np.ndarray) -> np.ndarray:
        read.extend(slots.tolist())
        return cosines(self, q, slots)

    monkeypatch.setattr(embeddings.Embeddings, "nearest", searched)
    monkeypatch.setattr(embeddings.Embeddings, "cosines", scored)
    config: dict[str, object] = {} if fusion is None else {"fusion": fusion}
    clock = ManualClock(1_000_000)
    with Store.open(tmp_path / "s", sync="none") as store:
        exact = Memory(store, {**EXACT, **config}, clock=clock, persist=True)
        fill(exact, clock, vecs, texts)
        approx = Memory(store, {**APPROX, **config}, clock=clock)
        built(store)
        rare_slots = set(store.read(lambda v: [v.slot(f"f{i}") for i in rare]))
        rng = np.random.default_rng(24)
        agree = total = 0
        for n in range(30):
            # Half the queries near a fact holding the word, half anywhere.
            at = rare[n % len(rare)] if n % 2 else int(rng.integers(0, len(vecs)))
            q = (vecs[at] + 0.3 * rng.standard_normal(DIM)).tolist()
            shallow.clear()
            read.clear()
            a = ids(approx.recall("quartz", embedding=q, k=10))
            assert shallow[:1] == [True]
            assert rare_slots <= set(read)  # every lexical candidate's vector was read
            e = ids(exact.recall("quartz", embedding=q, k=10))
            agree += len(set(a) & set(e))
            total += len(e)
        assert agree / total >= 0.95, agree / total
