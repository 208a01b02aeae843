"""Recall with the default options on a store the identity rule covers answers from
document search's top k without building a ranking (``rank.plain``), and its answer is
the ranking's, field for field: each fact's record (metadata, entities, event time,
subject, namespace), plain documents, and holomem's own facts (a reserved subject)
left out. The ranking's answer is asked for with an option that changes nothing
(``k=10``), which takes the other path.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from holomem import ManualClock, Memory, Store
from holomem.api.memory.recall import rank

WORDS = ["apple", "river", "moon", "stone", "lamp", "cat", "boat", "pie", "bell", "road",
         "tree", "cup"]


def _facts(rng: random.Random, n: int, extra: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n):
        fact: dict[str, Any] = {"id": f"f{i}",
                                "text": " ".join(rng.choice(WORDS) for _ in range(8))}
        if i % 3 == 0:
            fact["metadata"] = {"n": i, "tag": rng.choice(WORDS)}
        if i % 4 == 0:
            fact["entities"] = ["Ada", f"E{i % 5}"]
        if i % 7 == 0:
            fact["event_time"] = 500_000 + i
        if extra == "subjects" and i % 5 == 0:
            fact["subject"] = f"s{i}"  # one fact each: no supersession link
        if extra == "subjects" and i % 11 == 0:
            fact["subject"] = f"holomem:s{i}"  # holomem's own: never recalled
        if extra == "namespaces" and i % 6 == 0:
            fact["namespace"] = ["u", str(i % 2)]
        out.append(fact)
    return out


@pytest.mark.parametrize("extra", ["none", "subjects", "namespaces"])
def test_default_recall_answers_as_the_ranking_does(tmp_path: Path, extra: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(f"plain-{extra}")
    answered = []  # (what rank.plain answered: the default recalls took that path)

    def plain(*args: Any) -> Any:
        answered.append(rank_plain(*args))
        return answered[-1]
    rank_plain = rank.plain
    monkeypatch.setattr(rank, "plain", plain)
    with Store.open(tmp_path / "s", sync="none") as store:
        memory = Memory(store, clock=ManualClock(1_000_000))
        memory.remember_many(_facts(rng, 300, extra))
        store.add_documents([{"id": f"d{i}", "text": " ".join(rng.choice(WORDS)
                                                               for _ in range(6))}
                             for i in range(40)])
        for _ in range(40):
            query = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
            got = memory.recall(query)
            assert got == memory.recall(query, k=10)
            assert [(r.id, r.score) for r in got] == [
                (h.id, h.score) for h in store.search_documents(query, 30)
                if not h.id.startswith("f") or int(h.id[1:]) % 11 or extra != "subjects"
            ][:10]
            assert not any(r.fact.subject and r.fact.subject.startswith("holomem:")
                           for r in got)
    assert len(answered) == 40 and None not in answered
