"""The identity rule (docs/contract.md §4): with no validity window, no supersession link and no
recency policy in the store, recall returns exactly document search's ids and
scores, bit for bit (``==``, never approx), for any query and k; a subject or
entity filter gives what ``search_documents(ids=...)`` gives for the matching ids.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from holomem import Hit, ManualClock, Memory, Recalled, Store

Loaded = tuple[Store, Memory, random.Random]

SEED = 20240611
NAMES = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank", "Grace", "Heidi"]
VERBS = ["likes", "visited", "bought", "sold", "painted", "photographed", "lost", "found"]
THINGS = ["a red bicycle", "the old lighthouse", "three green apples", "a blue guitar",
          "the city museum", "a wooden boat", "two black cats", "the mountain cabin",
          "a silver watch", "the harbour market", "an apple pie", "a bicycle bell"]
PLACES = ["in Paris", "near the river", "at the station", "on Tuesday", "last summer",
          "in the rain", "with friends", "at night", ""]
SUBJECTS = [f"{n.lower()}/hobby" for n in NAMES[:4]]
DIM = 6
N_FACTS = 320


def sentence(rng: random.Random) -> tuple[str, str]:
    who = rng.choice(NAMES)
    text = f"{who} {rng.choice(VERBS)} {rng.choice(THINGS)} {rng.choice(PLACES)}".strip()
    return who, text


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loaded]:
    print(f"seed={SEED}")
    rng = random.Random(SEED)
    path: Path = tmp_path_factory.mktemp("identity") / "store"
    store = Store.open(path, sync="none")
    clock = ManualClock(1_700_000_000_000)
    memory = Memory(store, clock=clock)  # every policy at its default
    batch = []
    for i in range(N_FACTS):
        who, text = sentence(rng)
        fields: dict[str, object] = {"text": text, "entities": [who]}
        if i % 3 == 0:
            fields["subject"] = rng.choice(SUBJECTS)
        if i % 5 == 0:
            fields["event_time"] = 1_600_000_000_000 + i  # in the past: no future effect
        if i % 2 == 0:
            fields["embedding"] = [rng.uniform(-1, 1) for _ in range(DIM)]
        if i % 7 == 0:
            fields["metadata"] = {"n": i}
        if i % 4 == 0:
            memory.remember(**fields)  # one at a time ...
            clock.advance(1)
        else:
            batch.append(fields)  # ... and in batches
            if len(batch) == 17:
                memory.remember_many(batch)
                batch = []
                clock.advance(1)
    if batch:
        memory.remember_many(batch)
    clock.advance(1_000)
    with store.reading() as view:
        assert view.facts.windows == 0 and view.facts.links == 0  # the precondition of the rule
    assert len(store) == N_FACTS
    yield store, memory, rng
    store.close()


def queries(rng: random.Random, n: int) -> list[str]:
    vocab = " ".join(NAMES + VERBS + THINGS + PLACES).lower().split()
    out = ["", "zebra", "apple", "Alice", "the", "a bicycle", "alice bicycle red"]
    for _ in range(n):
        out.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 4))))
    return out


def pairs_recall(results: list[Recalled]) -> list[tuple[str, float]]:
    return [(r.id, r.score) for r in results]


def pairs_search(hits: list[Hit]) -> list[tuple[str, float]]:
    return [(h.id, h.score) for h in hits]


def test_recall_equals_document_search_bit_for_bit(loaded: Loaded) -> None:
    store, memory, rng = loaded
    for q in queries(rng, 60):
        assert pairs_recall(memory.recall(q)) == pairs_search(store.search_documents(q)), q
        for k in (1, 3, 10, 50, 400):
            got = pairs_recall(memory.recall(q, k=k))
            want = pairs_search(store.search_documents(q, k=k))
            assert got == want, (q, k)
            # Each result's score is exactly the hit's: same floats, same order.
            for (_, a), (_, b) in zip(got, want, strict=True):
                assert a.hex() == b.hex()


def test_recall_with_embedding_equals_document_search(loaded: Loaded) -> None:
    store, memory, rng = loaded
    for q in queries(rng, 20):
        emb = [rng.uniform(-1, 1) for _ in range(DIM)]
        for k in (5, 40):
            got = pairs_recall(memory.recall(q, k=k, embedding=emb))
            want = pairs_search(store.search_documents(q, k=k, embedding=emb))
            assert got == want, (q, k)


def test_subject_filter_equals_search_restricted_to_its_ids(loaded: Loaded) -> None:
    store, memory, rng = loaded
    by_subject: dict[str, list[str]] = {s: [] for s in SUBJECTS}
    for doc_id in store.ids():
        rec = memory.get(doc_id)
        assert rec is not None
        if rec.subject is not None:
            by_subject[rec.subject].append(doc_id)
    assert all(by_subject.values())
    for q in queries(rng, 25):
        for s in SUBJECTS:
            for k in (3, 10, 200):
                got = pairs_recall(memory.recall(q, k=k, subject=s))
                want = pairs_search(store.search_documents(q, k=k, ids=by_subject[s]))
                assert got == want, (q, s, k)
                assert {i for i, _ in got} <= set(by_subject[s])


def test_entity_filter_equals_search_restricted_to_its_ids(loaded: Loaded) -> None:
    store, memory, rng = loaded
    with_entity = {n: store.ids_with_entity(n) for n in NAMES}
    assert all(with_entity.values())
    for q in queries(rng, 25):
        for name in NAMES:
            got = pairs_recall(memory.recall(q, k=20, entities=[name]))
            want = pairs_search(store.search_documents(q, k=20, ids=with_entity[name]))
            assert got == want, (q, name)
        # Two entities: the facts carrying both (none here: one name per fact).
        assert memory.recall(q, entities=["Alice", "Bob"]) == []
        # Entity and subject together: the intersection.
        ids = [i for i in with_entity["Alice"]
               if (r := memory.get(i)) is not None and r.subject == "alice/hobby"]
        got = pairs_recall(memory.recall(q, k=30, entities=["Alice"], subject="alice/hobby"))
        assert got == pairs_search(store.search_documents(q, k=30, ids=ids)), q


def test_identity_holds_with_every_other_option_at_its_default(loaded: Loaded) -> None:
    """Options that change nothing (explain, candidate_limit, as_of now) keep the rule."""
    store, memory, rng = loaded
    now = memory.clock.now_ms()
    for q in queries(rng, 10):
        want = pairs_search(store.search_documents(q, k=10))
        assert pairs_recall(memory.recall(q, as_of=now)) == want
        assert pairs_recall(memory.recall(q, explain=True)) == want
        assert pairs_recall(memory.recall(q, candidate_limit=5)) == want
