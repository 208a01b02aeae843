"""What the relations tests share: a snapshot of every link in a store (what replay,
compaction and purge must keep exactly) and a seeded workload of facts and links."""

from __future__ import annotations

import contextlib
import random
from typing import Any

from holomem import ConflictError, ManualClock, Memory


def snapshot(memory: Memory) -> dict[str, Any]:
    """Every fact's links, both directions, in order, with times and metadata."""
    out: dict[str, Any] = {}
    cursor = None
    while True:
        page = memory.list(cursor=cursor, limit=1000)
        for f in page.facts:
            out[f.id] = [(x.from_id, x.to_id, x.relation, x.time, x.metadata)
                         for x in memory.links(f.id, direction="both").links]
        cursor = page.next_cursor
        if cursor is None:
            return out


def workload(memory: Memory, clock: ManualClock, seed: int, facts: int = 40,
             steps: int = 200) -> list[str]:
    """Facts in two namespaces, then a random mix of relate, unrelate and forget
    (seeded); returns the ids of the facts remembered."""
    rng = random.Random(seed)
    ids = []
    for i in range(facts):
        ns = ["a"] if i % 2 else ["b"]
        ids.append(memory.remember(f"fact {i} about topic{i % 7} marker{i}", id=f"f{i}",
                                   namespace=ns).id)
    relations = ("cites", "causes", "part_of")
    for _ in range(steps):
        clock.advance(rng.randint(1, 50))
        x, y = rng.sample(ids, 2)
        if int(x[1:]) % 2 != int(y[1:]) % 2:
            continue  # different namespaces: refused (tested elsewhere)
        roll = rng.random()
        if memory.get(x) is None or memory.get(y) is None:
            continue
        if roll < 0.7:
            meta = {"n": rng.randint(0, 3)} if rng.random() < 0.3 else None
            with contextlib.suppress(ConflictError):  # other metadata on a link there
                memory.relate(x, y, rng.choice(relations), meta)
        elif roll < 0.95:
            memory.unrelate(x, y, rng.choice(relations))
        else:
            memory.forget({"ids": [x]})
    return ids
