"""Migration speed (issue 32, item 2): records/s of ``holomem.integrations.migrate``'s
calls moving a peer's memory into a durable store, and of the second run that finds
everything already there.

    python benchmarks/migrate_bench.py [--records 10000] [--mem0 1000] [--rounds 3] [--save]

Peers (the ``peers`` extra), each filled once per run with seeded texts of 12 words
drawn from a 2,000-word vocabulary plus a unique word:

- ``langgraph_memory``: a LangGraph ``InMemoryStore``, ``--records`` items in 50
  namespaces, read with ``fields=["text"]``;
- ``langgraph_sqlite``: the same items in a ``SqliteStore`` file, opened read-only
  through ``open_langgraph_sqlite``;
- ``chroma``: ``--records`` records of one collection of a persistent directory, with
  8-dimension vectors, moved with ``vectors="keep"``;
- ``mem0``: ``--mem0`` memories of 10 users in an offline Mem0 (Chroma vector store, a
  hashing embedder of the benchmark's registered as its ``huggingface`` provider, no
  telemetry), every one updated once, so each moves as a chain of two versions.

Each round migrates every peer into a new store (``sync="full"``, the default: one
fsync per batch of 500), then runs the same migration again; the medians of the
rounds are reported as seconds and records/s (records: what the report counts as
read). Targets: the first run moves at least 1,000 records/s, and the second run takes
at most half the first's time, for each peer. Prints one JSON document; saves it as
benchmarks/results/migrate_bench.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
os.environ.setdefault("MEM0_TELEMETRY", "False")
os.environ.setdefault("MEM0_DIR", tempfile.mkdtemp(prefix="holomem-bench-mem0-"))

import numpy as np  # noqa: E402

import holomem  # noqa: E402
from benchmarks._common import add_save, check, emit, machine, median  # noqa: E402
from holomem.integrations import migrate  # noqa: E402

DIM = 8


def texts(n: int, seed: int = 7) -> list[str]:
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i:04d}" for i in range(2000)]
    return [" ".join(rng.choice(vocabulary, 12)) + f" unique{i}" for i in range(n)]


def hashed(text: str) -> list[float]:
    v = np.zeros(DIM)
    for word in text.split():
        v[int(hashlib.sha256(word.encode()).hexdigest(), 16) % DIM] += 1.0
    return (v / (np.linalg.norm(v) or 1.0)).tolist()


def langgraph_peers(corpus: list[str], workdir: str) -> tuple[Any, str]:
    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    store = InMemoryStore()
    path = os.path.join(workdir, "langgraph.sqlite")
    with SqliteStore.from_conn_string(path) as sqlite:
        sqlite.setup()
        for i, text in enumerate(corpus):
            ns, key, value = ("users", f"u{i % 50}"), f"k{i}", {"text": text}
            store.put(ns, key, value)
            sqlite.put(ns, key, value)
    return store, path


def chroma_peer(corpus: list[str], workdir: str) -> Any:
    import chromadb

    client = chromadb.PersistentClient(path=os.path.join(workdir, "chroma"))
    col = client.get_or_create_collection("bench", embedding_function=None)
    for start in range(0, len(corpus), 2000):
        part = corpus[start:start + 2000]
        col.add(ids=[f"id{start + i}" for i in range(len(part))], documents=part,
                embeddings=[hashed(t) for t in part],
                metadatas=[{"i": start + i} for i in range(len(part))])
    return client


class HashedMem0:
    """Mem0's ``huggingface`` embedder, replaced for the benchmark (offline)."""

    def __init__(self, config: Any = None) -> None:
        self.config = config

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return hashed(text)


def mem0_peer(corpus: list[str], workdir: str) -> Any:
    from mem0 import Memory as Mem0
    from mem0.utils import factory

    factory.EmbedderFactory.provider_to_class["huggingface"] = f"{__name__}.HashedMem0"
    sys.modules.setdefault(__name__, sys.modules["__main__"])
    base = os.path.join(workdir, "mem0")
    os.makedirs(base, exist_ok=True)
    m0 = Mem0.from_config({
        "vector_store": {"provider": "chroma",
                         "config": {"collection_name": "bench", "path": base + "/v"}},
        "embedder": {"provider": "huggingface", "config": {"model": "hashed",
                                                           "embedding_dims": DIM}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": base + "/history.db"})
    for i, text in enumerate(corpus):
        mid = m0.add(text, user_id=f"u{i % 10}", infer=False)["results"][0]["id"]
        m0.update(mid, text + " updated")
    return m0


def timed(run: Callable[[holomem.Memory], migrate.MigrationReport], workdir: str,
          name: str, rounds: int) -> dict[str, Any]:
    first, second, read = [], [], 0
    for r in range(rounds):
        with holomem.Store.open(os.path.join(workdir, f"{name}-{r}")) as store:
            memory = holomem.Memory(store)
            t0 = time.perf_counter()
            report = run(memory)
            t1 = time.perf_counter()
            again = run(memory)
            t2 = time.perf_counter()
        assert again.created == 0 and report.created > 0, (report, again)
        read = report.read
        first.append(t1 - t0)
        second.append(t2 - t1)
    f, s = median(first), median(second)
    return {"records": read, "first_s": round(f, 3), "first_per_s": round(read / f),
            "second_s": round(s, 3), "second_per_s": round(read / s),
            "second_over_first": round(s / f, 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--mem0", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=3)
    add_save(ap, "migrate_bench")
    args = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="holomem-migrate-bench-")
    corpus = texts(args.records)
    memory_store, sqlite_path = langgraph_peers(corpus, workdir)
    client = chroma_peer(corpus, workdir)
    m0 = mem0_peer(texts(args.mem0, seed=8), workdir)
    results: dict[str, Any] = {}

    def from_sqlite(memory: holomem.Memory) -> migrate.MigrationReport:
        with migrate.open_langgraph_sqlite(sqlite_path) as peer:
            return migrate.from_langgraph_store(peer, memory, fields=["text"])

    results["langgraph_memory"] = timed(
        lambda m: migrate.from_langgraph_store(memory_store, m, fields=["text"]),
        workdir, "lgm", args.rounds)
    results["langgraph_sqlite"] = timed(from_sqlite, workdir, "lgs", args.rounds)
    results["chroma"] = timed(lambda m: migrate.from_chroma(client, "bench", m,
                                                            vectors="keep"),
                              workdir, "chroma", args.rounds)
    results["mem0"] = timed(lambda m: migrate.from_mem0(
        m0, m, user_ids=[f"u{i}" for i in range(10)]), workdir, "mem0", args.rounds)
    targets = {}
    for name, r in results.items():
        targets[f"{name}_first_per_s"] = check(r["first_per_s"], ">=", 1000)
        targets[f"{name}_second_over_first"] = check(r["second_over_first"], "<=", 0.5)
    emit("migrate_bench", {"machine": machine(workdir), "records": args.records,
                           "mem0_memories": args.mem0, "rounds": args.rounds,
                           "results": results, "targets": targets}, args.save)


if __name__ == "__main__":
    main()
