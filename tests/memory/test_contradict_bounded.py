"""contradict enumerates candidate pairs a block at a time and still finds exactly the
pairs, counts and scores a comparison of every pair of current facts gives, on every
page of every ``max_pairs`` (issue 11: it used to build every pair of the store first,
so memory grew with the square of a subject's or an entity's facts) — whether it
answers by that scan or from the candidates it keeps between calls (issue 16;
tests/memory/test_contradict_kept.py compares the two through every kind of change).
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.holographic import contradiction
from holomem.api.memory.holographic import kept as contradiction_kept
from holomem.api.memory.holographic import pairs as contradiction_pairs
from holomem.projections import groups, hrr
from holomem.projections.tokenize import tokenize

NAMES = ["Al", "Bo", "Cy", "Di"]
WORDS = "lives in paris berlin owes likes tea coffee cat dog".split()

facts = st.lists(st.fixed_dictionaries({
    "text": st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join),
    "entities": st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
    "subject": st.sampled_from([None, "s1", "s2"]),
}), min_size=1, max_size=25)


def reference(m: Memory) -> tuple[int, list[tuple[str, str, float, float, float]]]:
    """(candidate pairs, [(a, b, score, overlap, similarity)]) by brute force."""
    current = [r for r in m.list(limit=1000).facts if r.status == "current"]
    content = {r.id: hrr.pack(hrr.encode_text(tokenize(r.text))) for r in current}
    chain = {r.id: {h.id for h in m.history(r.id)} for r in current}
    all_entities = {r.id: set(r.entities) for r in m.list(limit=1000).facts}
    candidates = 0
    out = []
    for a, b in combinations(current, 2):  # list() is in write (slot) order
        ea, eb = all_entities[a.id], all_entities[b.id]
        same_subject = a.subject is not None and a.subject == b.subject
        if not same_subject and not ea & eb:
            continue
        candidates += 1
        union = len(ea | eb)
        overlap = 1.0 if same_subject else min(len(ea & eb) / union if union else 0.0, 0.999)
        sim = float(hrr.bit_similarity(content[a.id][None, :], content[b.id])[0])
        if (overlap < contradiction.MIN_OVERLAP or not 0.2 <= sim <= 0.9
                or b.id in chain[a.id]):
            continue
        weight = 1.0 if overlap >= 1.0 else contradiction.ENTITY_ONLY_WEIGHT * overlap
        out.append((a.id, b.id, weight * 4.0 * sim * (1.0 - sim), overlap, sim))
    out.sort(key=lambda p: -p[2])  # stable: ties keep pair order
    return candidates, out


def as_tuples(pairs: list[Any]) -> list[tuple[str, str, float, float, float]]:
    return [(p.a, p.b, p.score, p.overlap, p.content_similarity) for p in pairs]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=facts, budget=st.sampled_from([1, 2, 5, 1 << 18]),
       max_pairs=st.sampled_from([1, 3, 1000]), supersession=st.booleans(),
       scan=st.booleans())
def test_contradict_pages_find_exactly_the_pairs_every_pair_comparison_finds(
        tmp_path_factory: pytest.TempPathFactory, data: list[dict[str, Any]], budget: int,
        max_pairs: int, supersession: bool, scan: bool) -> None:
    """Both ways of answering: from the kept candidates, and by the scan (forced)."""
    path = tmp_path_factory.mktemp("c") / "s"
    with Store.open(path, sync="none") as store, pytest.MonkeyPatch.context() as mp:
        mp.setattr(contradiction, "PAIR_BUDGET", budget)
        if scan:
            mp.setattr(contradiction_kept, "answer", lambda *a, **k: None)
        m = Memory(store, MemoryConfig(supersession="latest-by-subject" if supersession
                                       else "none"), clock=ManualClock(1_000_000))
        m.remember_many([{**f, "text": f"{f['text']} {i}"} for i, f in enumerate(data)])
        candidates, want = reference(m)
        whole = m.contradict(k=1000, max_pairs=contradiction.MAX_PAIRS_LIMIT)
        assert whole.compared_pairs == candidates and not whole.bound_hit
        assert sorted(as_tuples(whole.pairs), key=lambda p: -p[2]) == want
        # Paged: every candidate pair compared exactly once, the same pairs found.
        seen, found, cursor = 0, [], None
        while True:
            page = m.contradict(k=1000, max_pairs=max_pairs, cursor=cursor)
            assert page.compared_pairs <= max_pairs
            assert page.bound_hit == (page.next_cursor is not None)
            seen += page.compared_pairs
            found += as_tuples(page.pairs)
            cursor = page.next_cursor
            if cursor is None:
                break
            assert page.compared_pairs == max_pairs
        assert seen == candidates
        assert sorted(found) == sorted(want)


def test_contradict_holds_a_block_of_pairs_not_every_pair(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """One entity shared by 600 facts: 179,700 candidate pairs, never all at once — by
    the scan, and by the kept candidates scoring them on the first call."""
    with Store.open(tmp_path / "s", sync="none") as store:
        m = Memory(store, clock=ManualClock(1_000_000))
        m.remember_many([{"text": f"User note {i} w{i % 13}", "entities": ["User"]}
                         for i in range(600)])
        monkeypatch.setattr(contradiction, "PAIR_BUDGET", 4096)
        largest = {"scan": 0, "kept": 0}
        real = contradiction_pairs._Groups.pairs
        real_earlier = groups.Groups.earlier_pairs

        def spy(self: Any, i: int, j: int, n: int) -> Any:
            keys, shared = real(self, i, j, n)
            largest["scan"] = max(largest["scan"], len(keys))
            return keys, shared

        def spy_earlier(self: Any, *args: Any) -> Iterator[Any]:
            for block in real_earlier(self, *args):
                largest["kept"] = max(largest["kept"], len(block[0]))
                yield block

        monkeypatch.setattr(contradiction_pairs._Groups, "pairs", spy)
        monkeypatch.setattr(groups.Groups, "earlier_pairs", spy_earlier)
        kept = m.contradict(k=5, max_pairs=contradiction.MAX_PAIRS_LIMIT)
        monkeypatch.setattr(contradiction_kept, "answer", lambda *a, **k: None)
        res = m.contradict(k=5, max_pairs=contradiction.MAX_PAIRS_LIMIT)
        assert res == kept
        assert res.compared_pairs == 600 * 599 // 2 and not res.bound_hit
        # A block's budget, plus at most one fact's partners.
        assert 0 < largest["scan"] <= 4096 + 600 and 0 < largest["kept"] <= 4096 + 600
        assert np.all(np.diff([p.score for p in res.pairs]) <= 0)
