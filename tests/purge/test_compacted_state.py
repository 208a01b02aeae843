"""A compaction's new projections are what a replay of its new journal builds, over
every kind of state the projections keep (docs/guarantees.md §6).

A compaction (and so a purge) does not apply the events it writes: it renumbers the
old projections' kept documents (``ProjectionState.compacted``). This compares that
state, attribute by attribute, with a fresh open of the compacted store (a replay),
over random workloads that reach what ``test_purged_state`` does not: namespaces,
times to live and validity windows, confidence, feedback notes, vectors and a
re-embed left half done (re-embedded rows), a document replaced through the document
API (a fact moving to a new slot), plain documents, linked and unlinked relations
with metadata, stem variants and non-ASCII words, and an old state restored from a
checkpoint (the catalog's id table) rather than replayed.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, Store
from holomem.errors import HolomemError
from holomem.projections import postings
from holomem.projections.firstwords import FirstWords
from holomem.projections.tokenize import tokenize
from tests.memory import test_reopen as reopen
from tests.memory.test_embedder_hook import Fake
from tests.purge.test_purged_state import compare_with_a_fresh_open

#: Stem variants ("river"/"rivers", "run"/"running"), a word first met in one text and
#: again in a later one, and non-ASCII words (the tokenizer's slow path).
WORDS = ["river", "rivers", "run", "running", "runs", "stone", "lamp", "Café", "naïve",
         "東京", "moon", "tea"]

_ids = st.integers(0, 15)
_words = st.lists(st.sampled_from(WORDS), min_size=1, max_size=7)
_op = st.one_of(
    st.tuples(st.just("remember"), _ids, _words, st.sampled_from([None, "s0", "s1"]),
              st.sampled_from([(), ("a",), ("a", "b"), ("c",)]),
              st.sampled_from([None, "ttl", "window"]), st.booleans()),
    st.tuples(st.just("document"), _ids, _words),  # a plain document, or a fact's replaced
    st.tuples(st.just("supersede"), _ids, _ids),
    st.tuples(st.just("relate"), _ids, _ids, st.sampled_from(["knows", "near"]),
              st.booleans()),
    st.tuples(st.just("unrelate"), _ids, _ids),
    st.tuples(st.just("feedback"), _ids, st.booleans()),
    st.tuples(st.just("confidence"), _ids, st.sampled_from([0.25, 0.5, 1.0])),
    st.tuples(st.just("forget"), _ids, st.booleans()),
    st.tuples(st.just("delete"), _ids),
    st.tuples(st.just("reopen"), st.booleans()),  # with a checkpoint, or a replay
)
WORKLOAD = st.tuples(st.lists(_op, min_size=1, max_size=30), st.booleans(), st.booleans(),
                     st.booleans())


def _existing(store: Store, i: int) -> str:
    ids = store.ids()
    if not ids:
        raise LookupError("nothing stored yet")
    return ids[i % len(ids)]


def _run(memory: Memory, op: tuple[Any, ...], n: int) -> None:
    kind, store = op[0], memory.store
    try:
        if kind == "remember":
            _, i, words, subject, namespace, window, late = op
            times: dict[str, Any] = ({"ttl_ms": 40} if window == "ttl" else
                                     {"valid_from": 900, "valid_to": 5_000}
                                     if window == "window" else {})
            memory.remember(id=f"f{i}-{n}", text=" ".join(words), subject=subject,
                            namespace=list(namespace), entities=[f"E{i % 3}", "Ö"],
                            metadata={"n": i}, event_time=-n if late else n, **times)
        elif kind == "document":
            _, i, words = op
            store.add_document(_existing(store, i) if i % 2 else f"d{i}-{n}",
                               " ".join(reversed(words)), entities=[f"E{i % 4}"],
                               metadata={"doc": True})
        elif kind == "supersede":
            _, i, j = op
            memory.remember(id=f"v{i}-{n}", text=f"{WORDS[i % len(WORDS)]} replaced",
                            supersedes=[_existing(store, j)])
        elif kind == "relate":
            _, i, j, rel, meta = op
            memory.relate(_existing(store, i), _existing(store, j), rel,
                          {"why": f"because {n}"} if meta else None)
        elif kind == "unrelate":
            memory.unrelate(_existing(store, op[1]), _existing(store, op[2]), "knows")
        elif kind == "feedback":
            memory.feedback(_existing(store, op[1]), op[2], f"note {n}")
        elif kind == "confidence":
            memory.set_confidence(_existing(store, op[1]), op[2])
        elif kind == "forget":
            memory.forget({"ids": [_existing(store, op[1])]}, include_chain=op[2])
        elif kind == "delete":
            store.delete_document(_existing(store, op[1]))
    except (HolomemError, LookupError):
        pass  # an op on something that is not there (or not a fact): nothing written


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workload=WORKLOAD, encrypted=st.booleans())
def test_a_compactions_renumbered_state_is_what_a_replay_of_its_journal_builds(
        tmp_path_factory: Any, workload: tuple[list[tuple[Any, ...]], bool, bool, bool],
        encrypted: bool) -> None:
    ops, vectors, reembedding, purge = workload
    path = tmp_path_factory.mktemp("compacted") / "store"
    key = os.urandom(32) if encrypted else None
    opened = {"key": key, "sync": "none", "checkpoint_every": None,
              "checkpoint_close_min": 1 << 40}
    clock = ManualClock(1_000)
    store = Store.open(path, **opened)  # type: ignore[arg-type]
    try:
        memory = Memory(store, reopen.CONFIG, clock=clock,
                        embedder=Fake("1") if vectors else None)
        for n, op in enumerate(ops):
            clock.advance(5)
            if op[0] == "reopen":
                if op[1]:
                    store.checkpoint()
                store.close()
                store = Store.open(path, **opened)  # type: ignore[arg-type]
                memory = Memory(store, reopen.CONFIG, clock=clock,
                                embedder=Fake("1") if vectors else None)
            else:
                _run(memory, op, n)
        if vectors and reembedding and store.ids():
            # A re-embed cut short: some rows re-embedded (VectorsSet), the target pending.
            failing = Fake("2", fail_after=1)
            with contextlib.suppress(RuntimeError):
                Memory(store, clock=clock, embedder=failing, reembed=True).reembed(batch_size=2)
        store.compact(purge=purge)
        compare_with_a_fresh_open(store, path, key, sealed=True)
        # (without an embedder: a re-embed left pending refuses the old one's vectors)
        Memory(store, clock=clock).remember(id="after", text="a fact after it, running",
                                            subject="s0")
        compare_with_a_fresh_open(store, path, key, sealed=False)
    finally:
        store.close()


def test_tables_whose_order_the_history_set_follow_the_kept_documents_after_a_compaction(
        tmp_path: Any) -> None:
    """Where the old generation's order is not the kept slots' order (a confidence or a
    feedback given to an older fact later, a fact whose document moved to a new slot,
    a word, entity, namespace, subject or relation name first met in a removed
    document), the compacted state takes a replay's order, not the old one."""
    path = tmp_path / "store"
    clock = ManualClock(1_000)
    with Store.open(path, sync="none", checkpoint_every=None,
                    checkpoint_close_min=1 << 40) as store:
        memory = Memory(store, reopen.CONFIG, clock=clock)
        for i, (text, subject, namespace) in enumerate([
                ("naïve zebra river", "gone", ["x"]), ("river running", "s1", ["z"]),
                ("moon runs zebra", "s2", ["c"]), ("tea naïve stone", "s1", ["z"]),
                ("a lamp", None, ["z"])]):
            clock.advance(5)
            memory.remember(id=f"f{i}", text=text, subject=subject, namespace=namespace,
                            entities=[f"E{i}", "E9"], ttl_ms=10_000 + i,
                            supersedes=["f1"] if i == 4 else None)
        memory.relate("f3", "f4", "first", {"m": 1})
        memory.relate("f1", "f3", "second")
        memory.unrelate("f3", "f4", "first")
        memory.relate("f1", "f4", "first", {"m": 2})
        for fid, value in (("f3", 0.5), ("f2", 0.25)):  # later facts first
            memory.set_confidence(fid, value)
            memory.feedback(fid, True, f"note on {fid}")
        store.add_document("f1", "river stone moved", entities=["E1"])  # to a new slot
        memory.forget({"ids": ["f0"]})  # its words, entity, namespace and subject first
        # A late fact that the newest of its subject supersedes, after another subject's
        # link: its link is made after that one, but listed with its successor's.
        for fid, subject, at in (("a", "p", 10), ("s", "p", 20), ("b", "q", 10),
                                 ("t", "q", 20), ("c", "p", 15)):
            clock.advance(5)
            memory.remember(id=fid, text=f"{fid} said so", subject=subject, event_time=at)
        with store.reading() as view:
            old = view.state
            for table in (old.facts.confidence, old.facts.feedback, old.facts.ttl):
                assert list(table) != sorted(table, key=old.catalog.slot)
            assert old.relations.names == ["first", "second"]
            # (the successor table lists its keys as the links were made)
            assert list(old.facts.superseded_by)[-3:] == ["a", "b", "c"]
        store.compact()
        compare_with_a_fresh_open(store, path, None, sealed=True)
        with store.reading() as view:
            new = view.state
            for table in (new.facts.confidence, new.facts.feedback, new.facts.ttl):
                assert list(table) == sorted(table, key=new.catalog.slot)
            assert new.relations.names == ["second", "first"]
            assert new.facts.namespaces.names == [("c",), ("z",), ()]
            assert new.facts.subject_names == ["s2", "s1", "p", "q"]
            assert list(new.facts.superseded_by)[-3:] == ["a", "c", "b"]


_text = st.lists(st.sampled_from(
    ["river", "Rivers", "run", "a", "b", "x" * 16, "y" * 17, "z" * 70, "Alice's", "don't",
     "naïve", "東京", "7", "tea.", "UPPER", "w" * 9, "w" * 8]), max_size=8).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(batches=st.lists(st.lists(_text, max_size=6), max_size=5))
def test_first_words_are_every_distinct_word_in_the_order_tokenize_first_gives_it(
        batches: list[list[str]]) -> None:
    """What the compaction numbers the vocabulary by: the words of the kept texts, batch
    after batch, each once, first occurrence first — through keys for short ASCII
    words, strings for long ones (past the key's 16 bytes, past 64 characters) and for
    a batch that is not plain ASCII or holds one text."""
    seen = FirstWords()
    for batch in batches:
        seen.add(batch)
    expected = dict.fromkeys(w for batch in batches for text in batch for w in tokenize(text))
    assert seen.words == list(expected)


@settings(max_examples=150, deadline=None)
@given(docs=st.lists(st.sets(st.integers(0, 30), max_size=6), min_size=1, max_size=40),
       cuts=st.tuples(st.integers(0, 40), st.integers(0, 40)),
       base_terms=st.integers(0, 31), dropped=st.sets(st.integers(0, 39)),
       seed=st.integers(0, 2**16), chunk=st.sampled_from([1, 3, 16, 1 << 20]))
def test_renumbered_postings_are_the_kept_ones_under_their_new_numbers(
        docs: list[set[int]], cuts: tuple[int, int], base_terms: int, dropped: set[int],
        seed: int, chunk: int) -> None:
    """``postings.compacted`` over a base and a mid segment and a delta (the base built
    before its later terms existed) equals the plain answer: every posting of a kept
    slot, renumbered, grouped by new term and slot ascending — whatever the chunk."""
    rng = np.random.default_rng(seed)
    n, n_terms = len(docs), 31
    lo, hi = sorted(min(c, n) for c in cuts)
    triples = np.array([(t, d, 1 + (t + d) % 3) for d, ts in enumerate(docs) for t in ts],
                       dtype=np.int64).reshape(-1, 3)

    def part(first: int, last: int, terms: int) -> tuple[np.ndarray, ...]:
        p = triples[(triples[:, 1] >= first) & (triples[:, 1] < last) & (triples[:, 0] < terms)]
        p = p[np.lexsort((p[:, 1], p[:, 0]))]
        return p[:, 0].astype(np.int32), p[:, 1].astype(np.int32), p[:, 2].astype(np.uint16)

    segments = []
    for first, last, terms in ((0, lo, base_terms), (lo, hi, n_terms)):
        if last > first:
            t, s, f = part(first, last, terms)
            ptr = np.zeros(terms + 1, dtype=np.int64)
            np.cumsum(np.bincount(t, minlength=terms), out=ptr[1:])
            segments.append(postings.Segment(first, last, ptr, s, f, last - first))
    delta = part(hi, n, n_terms)
    listed = np.concatenate([s.triples()[0] for s in segments] + [delta[0]]) if n else []
    in_parts = np.concatenate([s.slot for s in segments] + [delta[1]])
    alive = np.array([d not in dropped for d in range(n)])
    new_slot = np.where(alive, np.cumsum(alive) - 1, -1)
    kept_terms = np.unique(np.asarray(listed, dtype=np.int64)[alive[in_parts]])
    new_term = np.full(n_terms, -1, dtype=np.int32)
    new_term[rng.permutation(kept_terms)] = np.arange(len(kept_terms), dtype=np.int32)
    old_chunk, postings.COMPACT_CHUNK = postings.COMPACT_CHUNK, chunk
    try:
        got = postings.compacted(segments, delta, new_slot, new_term, len(kept_terms),
                                 int(alive.sum()))
    finally:
        postings.COMPACT_CHUNK = old_chunk
    # The plain answer, from every posting in the parts (the base's older terms only).
    every = np.concatenate([np.stack(s.triples()).T.astype(np.int64) for s in segments]
                           + [np.stack(delta).T.astype(np.int64)])
    every = every[alive[every[:, 1]]]
    t, s, f = new_term[every[:, 0]], new_slot[every[:, 1]], every[:, 2]
    order = np.lexsort((s, t))
    want_ptr = np.zeros(len(kept_terms) + 1, dtype=np.int64)
    np.cumsum(np.bincount(t, minlength=len(kept_terms)), out=want_ptr[1:])
    assert np.array_equal(got.indptr, want_ptr)
    assert np.array_equal(got.slot, s[order]) and got.slot.dtype == np.int32
    assert np.array_equal(got.tf, f[order]) and got.tf.dtype == np.uint16
    assert (got.lo, got.hi, got.docs) == (0, int(alive.sum()), int(alive.sum()))
