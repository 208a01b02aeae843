"""``holomem demo``: the whole story on an embedded store, printed as it happens.

Owns: the demo script. It uses only the public API (``holomem.Memory``), with a
manual clock so that every run prints the same times.
"""

from __future__ import annotations

import datetime as dt
import os

from holomem.api.engine import Store
from holomem.api.memory import Memory
from holomem.api.policies import ManualClock
from holomem.api.render import format_time
from holomem.api.types import MemoryConfig
from holomem.log import fs


def _ms(year: int, month: int = 1, day: int = 1) -> int:
    return int(dt.datetime(year, month, day, tzinfo=dt.UTC).timestamp() * 1000)


def _files_with(path: str, marker: bytes) -> list[str]:
    found = []
    for root, _, files in fs.walk(path):
        for name in files:
            full = os.path.join(root, name)
            if marker in fs.read_file(full):
                found.append(os.path.relpath(full, path))
    return found


def run(path: str) -> int:
    print(f"holomem demo: a new embedded store in {path}\n")
    clock = ManualClock(_ms(2026, 1, 5))
    config = MemoryConfig(supersession="latest-by-subject", entity_extractor="regex")
    store = Store.open(path)
    memory = Memory(store, config, clock=clock)

    print("1. remember (supersession policy: latest-by-subject)")
    paris = memory.remember(id="home-paris", text="Alice lives in Paris",
                            subject="alice/city", valid_from=_ms(2020))
    print(f"   {paris.id}: Alice lives in Paris (valid from 2020-01-01)")
    clock.set(_ms(2026, 2, 1))
    berlin = memory.remember(id="home-berlin", text="Alice moved to Berlin; Alice lives in Berlin",
                             subject="alice/city", valid_from=_ms(2025))
    print(f"   {berlin.id}: Alice lives in Berlin (valid from 2025-01-01), "
          f"supersedes {', '.join(berlin.superseded)}")
    debt = memory.remember(text="Bob owes Alice 10 EUR for the concert tickets")
    print(f"   {debt.id}: Bob owes Alice 10 EUR (entities found: "
          f"{', '.join(memory.get(debt.id).entities)})")  # type: ignore[union-attr]
    again = memory.remember(text="Bob owes Alice 10 EUR for the concert tickets")
    print(f"   the same fact again: created={again.created}, same id {again.id == debt.id}\n")

    query = "where does Alice live"
    print(f"2. recall {query!r}")
    for r in memory.recall(query):
        print(f"   now:                 {r.text}  [{r.status}, score {r.score:.3f}]")
    for r in memory.recall(query, as_of=_ms(2021, 6, 1)):
        print(f"   as of 2021-06-01:    {r.text}  [{r.status}]")
    for r in memory.recall(query, known_at=_ms(2026, 1, 10)):
        print(f"   known at 2026-01-10: {r.text}  [{r.status}] (Berlin was not yet known)")
    print()

    print(f"3. explain: why does {paris.id} not come back now?")
    e = memory.explain(query, paris.id)
    terms = ", ".join(f"{t.term} {t.score:.3f}" for t in e.matched_terms)
    print(f"   retrieved={e.retrieved}, rank {e.rank} among candidates, status {e.status}")
    print(f"   reason: {e.reason}")
    print(f"   bm25 {e.lexical_score:.3f} from {terms}; recency x{e.recency_multiplier}, "
          f"history x{e.history_multiplier}")
    print(f"   chain: {' -> '.join(f'{c.id} ({c.status})' for c in e.chain)}\n")

    print(f"4. history of {berlin.id}")
    for fact in memory.history(berlin.id):
        since = format_time(fact.valid_from, day=True)
        print(f"   {since}  {fact.id}: {fact.text}  [{fact.status}]")
    print()

    print(f"5. forget {debt.id} with purge, then look for its text in every file")
    print(f"   before: 'EUR' is in {_files_with(path, b'EUR')}")
    report = memory.forget({"ids": [debt.id]}, purge=True)
    print(f"   removed {report.removed}, purged={report.purged}")
    print(f"   after:  'EUR' is in {_files_with(path, b'EUR') or 'no file'}")
    print(f"   recall 'Bob owes': {[r.id for r in memory.recall('Bob owes')] or 'nothing'}\n")

    store.close()
    print("6. reopen: the journal is replayed into every index")
    store = Store.open(path)
    memory = Memory(store, clock=clock)  # no config: the one the store recorded applies
    print(f"   the store's own configuration: supersession={memory.config.supersession}")
    for r in memory.recall(query):
        print(f"   now: {r.text}  [{r.status}]")
    stats = store.stats()
    print(f"   {stats.documents} facts, revision {stats.revision}, generation {stats.generation}, "
          f"opened by {stats.opened_by} in {stats.open_seconds * 1000:.1f} ms")
    print("\n7. the JSON contract (what HTTP and the CLI speak)")
    response = memory.call("recall", {"query": query, "asOf": _ms(2021, 6, 1), "k": 1})
    print(f"   call('recall', {{'query': ..., 'asOf': ...}}) -> "
          f"{response['results'][0]['id']} [{response['results'][0]['status']}]")
    store.close()
    print(f"\ndone. The store is still at {path}; try:\n"
          f"   holomem recall {path} 'Alice' --history all --explain")
    return 0
