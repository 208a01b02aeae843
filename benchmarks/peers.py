"""holomem beside the memory stores an agent might use instead, on the same data and
queries, in one run (issue 32).

    python benchmarks/peers.py [--facts 10000] [--mem0-facts 1000] [--queries 200]
                               [--only holomem,fts5,...] [--no-locomo] [--data DIR]
                               [--locomo-skip SYSTEMS] [--query-budget 20]
                               [--cache DIR] [--checkpointer-n 1000] [--save]
    python benchmarks/peers.py --table benchmarks/results/peers.json

Peers: SQLite FTS5 (stdlib), Chroma, LanceDB, LangGraph's ``SqliteStore`` and
``InMemoryStore``, Mem0 (``infer=False``: no LLM; a local Chroma vector store; its
history database in the work directory). Chroma, LanceDB, LangGraph and Mem0 come with
the ``peers`` extra; a peer that cannot be imported or run offline is reported with the
reason, never left out silently.

The same vectors for everyone: every text (the facts, the queries and the LoCoMo turns
and questions) is embedded once by holomem's built-in ``minilm`` and cached under
/tmp/holomem-embed-cache (``fusion_study.cached_vectors``); each system is handed those
vectors — directly where it takes vectors, through an embedding function that looks the
text up where it wants one (LangGraph, Mem0). No system embeds anything itself.

Facts: ``search_bench.corpus`` (seeded 24-word texts), queries: its "light" 3-6 word
queries. Each system runs in a child process of its own (its peak RSS, ``ru_maxrss``, is
its own) and:

- ingests the facts in calls of 1,000 (Mem0: one ``add`` each: it has no batch call),
  each system at its default sync setting (``durability`` says which), and builds what
  it needs to answer (LanceDB's full-text index; holomem's background HNSW index, from
  ``AUTO_MIN`` facts) — ``ingest_facts_per_s`` counts both, wall and per CPU second;
- writes ``SINGLE`` more facts one call each (latency p50/p99);
- answers the queries as lexical, vector and hybrid (text + vector) where it offers
  each, k = 10 (p50/p99; a mode stops after ``--query-budget`` seconds and says how
  many queries it ran);
- updates a fact and says whether the old text is still reachable through its API
  (``update_keeps_history``);
- writes ``MARKERS`` facts with unique marker strings, deletes half of them, and exits.

The parent counts the syncs of ten write calls on a fresh store under ``strace -f -c``
(``syncs_per_write_call``; LanceDB's default makes none), measures the files (bytes per
fact written) and scans every file under
the system's directory for each marker's bytes, raw and inside every zstd frame (magic
``28 B5 2F FD``, decompressed): ``deleted_markers_found`` of the deleted ones and, as a
control, ``kept_markers_found`` of those never deleted (0 kept found: the scan cannot see
that system's encoding, so its "not found" proves nothing). holomem is scanned after
``forget`` (no purge) and again after ``Store.compact(purge=True)`` in another child.
A last child per system times reopening the store and its first query.

LoCoMo development set (``--data DIR``, read in place), one store per conversation,
one fact per turn ("speaker: text", id = dia_id), every mode each system offers with the
same cached MiniLM vectors: recall_any@10, recall_all@5 and MRR over categories 1-4.

``benchmarks/checkpointer_bench.py`` (a LangGraph checkpointer, written apart) is
measured when it exists (``measure(n, workdir)`` in a child), else reported absent.
Prints one JSON document (ratios to holomem beside each figure, ``holomem_advantage``:
above 1 where holomem is better); writes benchmarks/results/peers.json only with
``--save``; ``--table FILE`` prints a saved run's summary as Markdown (docs/peers.md).
"""

from __future__ import annotations

import abc
import argparse
import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import resource
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import check, emit, machine, percentile, strace_counts  # noqa: E402
from benchmarks.locomo_data import DEFAULT_DIR, FILE, load, metrics, summarise  # noqa: E402
from benchmarks.search_bench import corpus, queries  # noqa: E402

K = 10
BATCH = 1_000
SINGLE = 100
MARKERS = 20
#: Write calls whose syncs are counted (each of SINGLE // FSYNC_CALLS facts).
FSYNC_CALLS = 10
SYNC_CALLS = ("fsync", "fdatasync", "msync", "sync_file_range")
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
MODES = ("lexical", "vector", "hybrid")
SYSTEMS = ("holomem", "fts5", "chroma", "lancedb", "langgraph_sqlite", "langgraph_memory",
           "mem0")
#: The distribution each peer's version is read from.
DISTS = {"holomem": "holomem-db", "chroma": "chromadb", "lancedb": "lancedb",
         "langgraph_sqlite": "langgraph-checkpoint-sqlite", "langgraph_memory": "langgraph",
         "mem0": "mem0ai"}

Vec = npt.NDArray[np.float32]


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Vectors:
    """The cached MiniLM vector of every text of the run, by text."""

    def __init__(self, path: str) -> None:
        with np.load(path) as z:
            self._rows = dict(zip(z["keys"].tolist(), z["vectors"], strict=True))
        self._model: Any = None
        self.embedded_here = 0

    def __getitem__(self, text: str) -> Vec:
        row: Vec = self._rows[_key(text)]
        return row

    def many(self, texts: Sequence[str]) -> list[list[float]]:
        """For the peers that embed through a function of texts."""
        return [self[t].tolist() for t in texts]

    def any(self, text: str) -> Vec:
        """A text of the run from the cache; one the system made up itself (Mem0's
        entity names) embedded here by the same MiniLM, and counted (``embedded_here``)."""
        row: Vec | None = self._rows.get(_key(text))
        if row is None:
            if self._model is None:
                from holomem.embedders import MiniLM
                self._model = MiniLM()
            row = self._rows[_key(text)] = self._model.embed([text])[0]
            self.embedded_here += 1
        return row


# -- the systems, each behind the same small interface --------------------------------
class Peer(abc.ABC):
    """One system: a store at ``path`` opened on construction."""

    modes: tuple[str, ...] = ()
    durability = ""
    history_note = ""
    note = ""
    files = True
    #: Imported before reopening is timed (an import is not an open).
    imports: tuple[str, ...] = ()

    @abc.abstractmethod
    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        ...

    @abc.abstractmethod
    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        ...

    @abc.abstractmethod
    def update(self, fid: str, text: str, vec: Vec) -> None:
        ...

    @abc.abstractmethod
    def history_kept(self, fid: str, old: str) -> bool:
        ...

    @abc.abstractmethod
    def delete(self, ids: list[str]) -> None:
        ...

    def prepare(self) -> None:  # noqa: B027 (a hook: nothing by default)
        """Whatever the system builds after a bulk load before it answers (timed as
        part of the ingest)."""

    def close(self) -> None:  # noqa: B027 (a hook: nothing by default)
        pass


class Holomem(Peer):
    imports = ("holomem",)
    modes = MODES
    durability = 'Store.open default sync="full": fsync before each write call returns'
    history_note = "remember(supersedes=[old]) keeps the old version in history(id)"

    def __init__(self, path: str, vectors: Vectors) -> None:
        from holomem import Memory, Store
        self.store = Store.open(path)
        self.m = Memory(self.store)

    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        # (float32 numpy rows, as the others get them: remember takes them as they are)
        if len(ids) == 1:
            self.m.remember(text=texts[0], id=ids[0], embedding=vecs[0])
            return
        self.m.remember_many([{"id": i, "text": t, "embedding": v}
                              for i, t, v in zip(ids, texts, vecs, strict=True)])

    def prepare(self) -> None:
        """The approximate vector index (vectorSearch "auto", from AUTO_MIN facts) is
        built in the background after the first query with a vector: start it and wait,
        as Chroma builds its HNSW index within its adds."""
        self.m.recall("zzzz", embedding=[1.0] + [0.0] * 383, k=1)
        while self.store.read(lambda v: v.embeddings.build is not None):
            time.sleep(0.02)

    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        if mode == "lexical":
            hits = self.m.recall(text, k=K)
        elif mode == "vector":  # a text that matches no word: the vector alone ranks
            hits = self.m.recall("zzzz", embedding=vec.tolist(), k=K)
        else:
            hits = self.m.recall(text, embedding=vec.tolist(), k=K)
        return [h.id for h in hits]

    def update(self, fid: str, text: str, vec: Vec) -> None:
        self.m.remember(text=text, id=fid + "-v2", embedding=vec.tolist(), supersedes=[fid])

    def history_kept(self, fid: str, old: str) -> bool:
        return any(r.text == old for r in self.m.history(fid + "-v2"))

    def delete(self, ids: list[str]) -> None:
        self.m.forget({"ids": ids})

    def close(self) -> None:
        self.store.close()


def _fts_query(text: str) -> str:
    from holomem.projections.tokenize import tokenize
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(tokenize(text)))


class Fts5(Peer):
    imports = ("holomem.projections.tokenize",)
    modes = ("lexical",)
    durability = "WAL, synchronous=FULL (a commit per call)"
    history_note = "UPDATE replaces the row"

    def __init__(self, path: str, vectors: Vectors) -> None:
        os.makedirs(path, exist_ok=True)
        self.con = sqlite3.connect(os.path.join(path, "facts.db"), isolation_level=None)
        self.con.execute("PRAGMA journal_mode=WAL")
        self.con.execute("PRAGMA synchronous=FULL")
        self.con.execute("CREATE VIRTUAL TABLE IF NOT EXISTS t USING fts5(id UNINDEXED, body)")

    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        with self.con:
            self.con.execute("BEGIN")
            self.con.executemany("INSERT INTO t VALUES (?, ?)", zip(ids, texts, strict=True))

    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        q = _fts_query(text)
        return [r[0] for r in self.con.execute(
            "SELECT id FROM t WHERE t MATCH ? ORDER BY bm25(t) LIMIT ?", (q, K))] if q else []

    def update(self, fid: str, text: str, vec: Vec) -> None:
        self.con.execute("UPDATE t SET body = ? WHERE id = ?", (text, fid))

    def history_kept(self, fid: str, old: str) -> bool:
        return bool(self.con.execute("SELECT 1 FROM t WHERE body = ?", (old,)).fetchall())

    def delete(self, ids: list[str]) -> None:
        self.con.executemany("DELETE FROM t WHERE id = ?", [(i,) for i in ids])

    def close(self) -> None:
        self.con.close()


class Chroma(Peer):
    imports = ("chromadb",)
    modes = ("vector",)
    durability = "PersistentClient defaults (SQLite write-ahead log, HNSW files)"
    history_note = "update() replaces the record"

    def __init__(self, path: str, vectors: Vectors) -> None:
        import chromadb
        from chromadb.config import Settings
        self.client = chromadb.PersistentClient(path=path,
                                                settings=Settings(anonymized_telemetry=False))
        self.col = self.client.get_or_create_collection(
            "facts", metadata={"hnsw:space": "cosine"}, embedding_function=None)

    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        self.col.add(ids=ids, embeddings=np.stack(vecs), documents=texts)

    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        return list(self.col.query(query_embeddings=[vec.tolist()], n_results=K)["ids"][0])

    def update(self, fid: str, text: str, vec: Vec) -> None:
        self.col.update(ids=[fid], documents=[text], embeddings=np.stack([vec]))

    def history_kept(self, fid: str, old: str) -> bool:
        return bool(self.col.get(where_document={"$contains": old})["ids"])

    def delete(self, ids: list[str]) -> None:
        self.col.delete(ids=ids)


class Lance(Peer):
    imports = ("lancedb",)
    modes = MODES
    durability = "defaults (each add writes a new table version)"
    history_note = "update() writes a new table version; the old one stays readable " \
        "(checkout) until the old versions are cleaned up"

    def __init__(self, path: str, vectors: Vectors) -> None:
        import lancedb
        self.db = lancedb.connect(path)
        self.table: Any = None
        if "facts" in self.db.table_names():
            self.table = self.db.open_table("facts")
        self.indexed = False

    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        rows = [{"id": i, "text": t, "vector": v}
                for i, t, v in zip(ids, texts, vecs, strict=True)]
        if self.table is None:
            self.table = self.db.create_table("facts", data=rows)
        else:
            self.table.add(rows)

    def prepare(self) -> None:
        """The full-text index lexical and hybrid search need (built once, after ingest)."""
        self.table.create_fts_index("text", use_tantivy=False, replace=True)
        self.indexed = True

    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        t = self.table
        if mode == "lexical":
            q = t.search(text, query_type="fts")
        elif mode == "vector":
            q = t.search(vec).metric("cosine")
        else:
            q = t.search(query_type="hybrid").vector(vec).text(text)
        return [r["id"] for r in q.limit(K).select(["id"]).to_list()]

    def update(self, fid: str, text: str, vec: Vec) -> None:
        self.version_before = self.table.version
        self.table.update(where=f"id = '{fid}'", values={"text": text})

    def history_kept(self, fid: str, old: str) -> bool:
        import lancedb
        old_table = lancedb.connect(self.db.uri).open_table("facts")
        old_table.checkout(self.version_before)
        rows = old_table.search().where(f"id = '{fid}'").select(["text"]).to_list()
        return any(r["text"] == old for r in rows)

    def delete(self, ids: list[str]) -> None:
        self.table.delete("id IN (" + ",".join(f"'{i}'" for i in ids) + ")")


class LangGraph(Peer):
    imports = ("langgraph.store.sqlite", "langgraph.store.memory")
    modes = ("vector",)
    history_note = "put() on the same key replaces the item"
    NS = ("facts",)

    def __init__(self, path: str, vectors: Vectors, durable: bool) -> None:
        index: Any = {"dims": 384, "embed": vectors.many, "fields": ["text"]}
        self.cm: Any = None
        if durable:
            from langgraph.store.sqlite import SqliteStore
            os.makedirs(path, exist_ok=True)
            if not hasattr(sqlite3.Connection, "enable_load_extension"):
                # Its vector index is the sqlite-vec extension, which this Python's
                # sqlite3 cannot load: the store runs without an index (unranked).
                index, self.modes = None, ("unranked",)
                self.note = ("no vector index: this Python's sqlite3 was built without "
                             "enable_load_extension, which sqlite-vec needs")
            self.cm = SqliteStore.from_conn_string(os.path.join(path, "store.db"),
                                                   index=index)
            self.store: Any = self.cm.__enter__()
            self.store.setup()
        else:
            from langgraph.store.memory import InMemoryStore
            self.store = InMemoryStore(index=index)

    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        from langgraph.store.base import PutOp
        self.store.batch([PutOp(self.NS, i, {"text": t}) for i, t in zip(ids, texts,
                                                                           strict=True)])

    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        if mode == "unranked":  # the first K items of the namespace, the query unused
            return [it.key for it in self.store.search(self.NS, limit=K)]
        return [it.key for it in self.store.search(self.NS, query=text, limit=K)]

    def update(self, fid: str, text: str, vec: Vec) -> None:
        self.store.put(self.NS, fid, {"text": text})

    def history_kept(self, fid: str, old: str) -> bool:
        item = self.store.get(self.NS, fid)
        return bool(item and item.value.get("text") == old)

    def delete(self, ids: list[str]) -> None:
        from langgraph.store.base import PutOp
        self.store.batch([PutOp(self.NS, i, None) for i in ids])

    def close(self) -> None:
        if self.cm is not None:
            self.cm.__exit__(None, None, None)


class LangGraphSqlite(LangGraph):
    durability = "sqlite3 defaults (rollback journal, synchronous=FULL), autocommit"

    def __init__(self, path: str, vectors: Vectors) -> None:
        super().__init__(path, vectors, durable=True)


class LangGraphMemory(LangGraph):
    durability = "none: in memory, no files"
    files = False

    def __init__(self, path: str, vectors: Vectors) -> None:
        super().__init__(path, vectors, durable=False)


class Mem0(Peer):
    imports = ("mem0",)
    modes = ("vector",)
    note = ("search is the cosine plus Mem0's entity boost (entity names it extracts, "
            "embedded by the same MiniLM in its process); no keyword part with a Chroma "
            "store")
    durability = "defaults: Chroma PersistentClient vector store, SQLite history database"
    history_note = "update() records the old text in the history database (history(id))"
    USER = "bench"

    def __init__(self, path: str, vectors: Vectors) -> None:
        os.environ.setdefault("MEM0_TELEMETRY", "False")
        os.environ.setdefault("MEM0_DIR", os.path.join(path, "home"))
        # The LLM client is built but never called (infer=False); it wants a key.
        os.environ.setdefault("OPENAI_API_KEY", "unused-no-llm-call-is-made")
        from mem0 import Memory  # type: ignore[import-untyped]
        from mem0.embeddings.base import EmbeddingBase  # type: ignore[import-untyped]
        os.makedirs(path, exist_ok=True)

        class Lookup(EmbeddingBase):  # type: ignore[misc]
            def embed(self, text: Any, memory_action: Any = None) -> list[float]:
                out: list[float] = vectors.any(text).tolist()
                return out

        self.m = Memory.from_config({
            "vector_store": {"provider": "chroma", "config": {
                "collection_name": "facts", "path": os.path.join(path, "chroma")}},
            # (built without a call; replaced below by the lookup of the cached vectors)
            "embedder": {"provider": "openai", "config": {"embedding_dims": 384}},
            "history_db_path": os.path.join(path, "history.db"),
        })
        self.m.embedding_model = Lookup()
        self.ids: dict[str, str] = {}  # our id -> Mem0's
        self.back: dict[str, str] = {}

    def add(self, ids: list[str], texts: list[str], vecs: list[Vec]) -> None:
        for i, t in zip(ids, texts, strict=True):
            out = self.m.add([{"role": "user", "content": t}], user_id=self.USER,
                             metadata={"fid": i}, infer=False)
            mid = out["results"][0]["id"]
            self.ids[i], self.back[mid] = mid, i

    def query(self, mode: str, text: str, vec: Vec) -> list[str]:
        out = self.m.search(text, top_k=K, filters={"user_id": self.USER}, threshold=0.0)
        return [self.back.get(r["id"], r["id"]) for r in out["results"]]

    def update(self, fid: str, text: str, vec: Vec) -> None:
        self.m.update(self.ids[fid], data=text)

    def history_kept(self, fid: str, old: str) -> bool:
        return any(old in json.dumps(h) for h in self.m.history(self.ids[fid]))

    def delete(self, ids: list[str]) -> None:
        for i in ids:
            self.m.delete(self.ids[i])


PEERS: dict[str, Callable[[str, Vectors], Peer]] = {
    "holomem": Holomem, "fts5": Fts5, "chroma": Chroma, "lancedb": Lance,
    "langgraph_sqlite": LangGraphSqlite, "langgraph_memory": LangGraphMemory, "mem0": Mem0}

PEERS_IMPORTS = {name: getattr(cls, "imports", ()) for name, cls in PEERS.items()}


# -- what a child measures ------------------------------------------------------------
def _ms(samples: list[float]) -> dict[str, Any]:
    return {"p50_ms": round(percentile(samples, 50), 3),
            "p99_ms": round(percentile(samples, 99), 3), "n": len(samples)}


def _peak_rss_mib() -> float:
    """This process's peak resident set (``VmHWM``: unlike ``ru_maxrss``, not inherited
    from the parent across fork and exec)."""
    with open("/proc/self/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def marker(i: int) -> str:
    return f"qzxmarker{i:03d}k{_key(str(i))[:12]}"


def marker_texts() -> list[str]:
    return [f"the audit code is {marker(i)}" for i in range(MARKERS)]


def updated_text() -> str:
    """What fact f0 is updated to."""
    return "the updated text of fact zero " + corpus(SINGLE, seed=3)[0]


def measure(system: str, n: int, nq: int, budget: float, work: str, vectors: Vectors
            ) -> dict[str, Any]:
    """Ingest, single writes, queries, update, then the markers (the files are the
    parent's to scan once this process has exited)."""
    texts = corpus(n)
    path = os.path.join(work, system)
    peer = PEERS[system](path, vectors)
    t0, c0 = time.perf_counter(), time.process_time()
    for s in range(0, n, BATCH):
        part = texts[s:s + BATCH]
        peer.add([f"f{s + i}" for i in range(len(part))], part, [vectors[t] for t in part])
    ingest_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    peer.prepare()
    index_s = time.perf_counter() - t1
    ingest_cpu_s = time.process_time() - c0
    single = []
    extra = corpus(SINGLE, seed=3)
    for i, text in enumerate(extra):
        t = time.perf_counter()
        peer.add([f"s{i}"], [text], [vectors[text]])
        single.append((time.perf_counter() - t) * 1e3)
    qs = queries(nq)["light"]
    latency: dict[str, Any] = {}
    for mode in peer.modes:
        for q in qs[:5]:  # warm
            peer.query(mode, q, vectors[q])
        samples: list[float] = []
        stop = time.perf_counter() + budget
        for q in qs:
            t = time.perf_counter()
            got = peer.query(mode, q, vectors[q])
            samples.append((time.perf_counter() - t) * 1e3)
            if len(got) > K:
                raise AssertionError(f"{system} {mode}: {len(got)} results")
            if time.perf_counter() > stop:
                break
        latency[mode] = _ms(samples)
    new = updated_text()
    peer.update("f0", new, vectors[new])
    kept = peer.history_kept("f0", texts[0])
    marks = marker_texts()
    peer.add([f"m{i}" for i in range(MARKERS)], marks, [vectors[t] for t in marks])
    peer.delete([f"m{i}" for i in range(0, MARKERS, 2)])  # the even ones
    peer.close()
    return {
        "facts": n, "durability": peer.durability, "modes": list(peer.modes),
        "ingest_s": round(ingest_s, 2), "index_s": round(index_s, 2),
        "ingest_facts_per_s": round(n / (ingest_s + index_s), 1),
        # (every thread of the process: less moved by other processes than wall time)
        "ingest_cpu_s": round(ingest_cpu_s, 2),
        "ingest_facts_per_cpu_s": round(n / max(ingest_cpu_s, 1e-9), 1),
        "batch": 1 if system == "mem0" else BATCH,
        "single_write": _ms(single),
        "query": latency, "query_budget_s": budget, "queries_asked": nq,
        "update_keeps_history": kept, "history_note": peer.history_note,
        "note": peer.note,
        "written": n + SINGLE + MARKERS, "files": peer.files,
        "embedded_in_the_child": vectors.embedded_here,
        "peak_rss_mib": _peak_rss_mib(),
    }


def fsync_probe(system: str, work: str, vectors: Vectors) -> dict[str, Any]:
    """``FSYNC_CALLS`` write calls of ``SINGLE // FSYNC_CALLS`` facts each on a fresh
    store (the parent counts this process's syncs under strace)."""
    texts = corpus(SINGLE, seed=3)
    peer = PEERS[system](os.path.join(work, f"fsync-{system}"), vectors)
    step = SINGLE // FSYNC_CALLS
    for call in range(FSYNC_CALLS):
        part = texts[call * step:(call + 1) * step]
        peer.add([f"p{call}-{i}" for i in range(step)], part, [vectors[t] for t in part])
    peer.close()
    return {"write_calls": FSYNC_CALLS, "facts_per_call": step}


def reopen(system: str, nq: int, work: str, vectors: Vectors) -> dict[str, Any]:
    """Open the store again in a fresh process and answer one query."""
    q = queries(nq)["light"][0]
    for module in PEERS_IMPORTS.get(system, ()):
        importlib.import_module(module)
    t0 = time.perf_counter()
    peer = PEERS[system](os.path.join(work, system), vectors)
    opened = time.perf_counter() - t0
    got = peer.query(peer.modes[0], q, vectors[q])
    first = time.perf_counter() - t0
    peer.close()
    return {"open_s": round(opened, 3), "open_and_first_query_s": round(first, 3),
            "first_query_hits": len(got)}


def purge(work: str) -> dict[str, Any]:
    from holomem import Store
    t0 = time.perf_counter()
    with Store.open(os.path.join(work, "holomem")) as store:
        store.compact(purge=True)
    return {"purge_s": round(time.perf_counter() - t0, 2)}


def locomo(system: str, work: str, data: str, vectors: Vectors) -> dict[str, Any]:
    """One store per conversation; every mode the system offers; the same vectors."""
    convs = load(os.path.join(data, FILE))
    rows: dict[str, list[tuple[int, dict[str, float]]]] = {}
    t0 = time.perf_counter()
    for conv in convs:
        peer = PEERS[system](os.path.join(work, f"locomo-{system}-{conv.id}"), vectors)
        ids, texts = [t.id for t in conv.turns], [t.text for t in conv.turns]
        for s in range(0, len(ids), BATCH):
            peer.add(ids[s:s + BATCH], texts[s:s + BATCH], [vectors[t]
                                                            for t in texts[s:s + BATCH]])
        peer.prepare()
        for mode in peer.modes:
            for q in conv.questions:
                ranked = peer.query(mode, q.text, vectors[q.text])
                rows.setdefault(mode, []).append((q.category, metrics(ranked, q.evidence)))
        peer.close()
    out: dict[str, Any] = {"seconds": round(time.perf_counter() - t0, 1),
                           "embedded_in_the_child": vectors.embedded_here}
    for mode, got in rows.items():
        head = summarise(got)["cat1-4"]
        out[mode] = {k: head[k] for k in ("recall_any@10", "recall_all@5", "mrr", "n")}
    return out


def checkpointer(n: int, work: str) -> dict[str, Any]:
    from pathlib import Path

    from benchmarks import checkpointer_bench  # type: ignore[attr-defined]
    result: dict[str, Any] = checkpointer_bench.measure(n, Path(work))
    return result


# -- files: bytes and the marker scan -------------------------------------------------
def _files(path: str) -> Iterator[str]:
    for d, _, fs in os.walk(path):
        for f in fs:
            yield os.path.join(d, f)


def dir_bytes(path: str) -> int:
    return sum(os.path.getsize(f) for f in _files(path) if os.path.isfile(f))


def zstd_payloads(data: bytes, limit: int = 1 << 28) -> Iterator[bytes]:
    """What every zstd frame in ``data`` decompresses to (frames that fail are skipped)."""
    import zstandard
    at = data.find(ZSTD_MAGIC)
    while at >= 0:
        with contextlib.suppress(zstandard.ZstdError):
            d = zstandard.ZstdDecompressor().decompressobj()
            yield d.decompress(data[at:at + limit])
        at = data.find(ZSTD_MAGIC, at + 4)


def scan(path: str) -> dict[str, Any]:
    """Which markers' bytes are in any file under ``path``, raw or inside zstd frames."""
    wanted = {i: marker(i).encode() for i in range(MARKERS)}
    raw: set[int] = set()
    framed: set[int] = set()
    frames = 0
    for f in _files(path):
        with open(f, "rb") as fh:
            data = fh.read()
        raw |= {i for i, m in wanted.items() if m in data}
        for payload in zstd_payloads(data):
            frames += 1
            framed |= {i for i, m in wanted.items() if m in payload}
    deleted = set(range(0, MARKERS, 2))
    kept = set(wanted) - deleted
    found = raw | framed
    n_del, n_kept = len(found & deleted), len(found & kept)
    return {"deleted_markers_found": n_del, "deleted_of": len(deleted),
            "deleted_found_raw": len(raw & deleted),
            "deleted_found_in_zstd": len(framed & deleted),
            "kept_markers_found": n_kept, "kept_of": len(kept), "zstd_frames": frames,
            "verdict": ("found" if n_del else "not found" if n_kept else
                        "inconclusive: the kept markers are not visible either")}


# -- the parent -----------------------------------------------------------------------
def _args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--facts", type=int, default=10_000)
    ap.add_argument("--mem0-facts", type=int, default=1_000,
                    help="Mem0's N (it writes one fact per call)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--query-budget", type=float, default=20.0,
                    help="seconds at most per system and query mode")
    ap.add_argument("--only", default="", help="systems, comma separated (default: all)")
    ap.add_argument("--no-locomo", action="store_true")
    ap.add_argument("--locomo-skip", default="",
                    help="systems left out of the LoCoMo part (reported as such)")
    ap.add_argument("--checkpointer-n", type=int, default=1_000)
    ap.add_argument("--data", metavar="DIR", default=DEFAULT_DIR,
                    help=f"the LoCoMo development set's directory, holding {FILE}")
    ap.add_argument("--cache", default=None,
                    help="the vector cache directory (LoCoMo's; the facts' in its peers/; "
                    "default: fusion_study.py's, under /tmp)")
    ap.add_argument("--save", action="store_true",
                    help="also write benchmarks/results/peers.json (default: print only)")
    ap.add_argument("--table", metavar="FILE", default="",
                    help="print the Markdown summary of a saved result and stop")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--work", default="", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def syncs(args: argparse.Namespace, system: str) -> dict[str, Any]:
    """How many syncs ``FSYNC_CALLS`` write calls make (``strace -f -c``), or why unknown."""
    strace = shutil.which("strace")
    if strace is None:
        return {"status": "unchecked: no strace"}
    out = os.path.join(args.work, f"strace-{system}.txt")
    got = run_child(args, "fsyncs", system, 0, [strace, "-f", "-c", "-o", out, "-e",
                                                "trace=" + ",".join(SYNC_CALLS)])
    if "error" in got:
        return {"status": f"failed: {got['error']}"}
    with open(out, encoding="utf-8") as f:
        counts = strace_counts(f.read())
    n = sum(counts.get(c, 0) for c in SYNC_CALLS)
    return {"write_calls": FSYNC_CALLS, "syncs": n,
            "by_call": {c: k for c, k in counts.items() if c in SYNC_CALLS},
            "syncs_per_write_call": round(n / FSYNC_CALLS, 1),
            "how": "strace -f -c over the whole child (open and close included)"}


def run_child(args: argparse.Namespace, what: str, system: str, n: int = 0,
              prefix: Sequence[str] = ()) -> dict[str, Any]:
    """``what`` for ``system`` in a child process; its JSON, or why it failed."""
    cmd = [*prefix, sys.executable, os.path.abspath(__file__), "--child", f"{what}:{system}:{n}",
           "--work", args.work, "--queries", str(args.queries), "--data", args.data,
           "--query-budget", str(args.query_budget)]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False,
                       env={**os.environ, "PYTHONPATH": ROOT, "ANONYMIZED_TELEMETRY": "False"})
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {p.returncode}: {tail[:400]}"}
    out: dict[str, Any] = json.loads(lines[-1])
    out.setdefault("child_wall_s", round(time.perf_counter() - t0, 1))
    return out


def child_main(args: argparse.Namespace) -> None:
    what, system, n = args.child.split(":")
    vectors = Vectors(os.path.join(args.work, "vectors.npz"))
    try:
        if what == "measure":
            out = measure(system, int(n), args.queries, args.query_budget, args.work, vectors)
        elif what == "reopen":
            out = reopen(system, args.queries, args.work, vectors)
        elif what == "fsyncs":
            out = fsync_probe(system, args.work, vectors)
        elif what == "purge":
            out = purge(args.work)
        elif what == "locomo":
            out = locomo(system, args.work, args.data, vectors)
        else:
            out = checkpointer(int(n), os.path.join(args.work, "checkpointer"))
        out["peak_rss_mib"] = _peak_rss_mib()
    except Exception as e:  # reported by the parent with the reason
        traceback.print_exc()
        out = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
    print(json.dumps(out))


def available(system: str) -> str | None:
    """Why ``system`` cannot run here, or None."""
    module = {"chroma": "chromadb", "lancedb": "lancedb", "langgraph_sqlite":
              "langgraph.store.sqlite", "langgraph_memory": "langgraph.store.memory",
              "mem0": "mem0"}.get(system)
    if module is None:
        return None
    try:
        if importlib.util.find_spec(module) is None:
            raise ImportError
    except ImportError:
        return f"{module} is not installed (pip install 'holomem-db[peers]')"
    return None


def version(system: str) -> str:
    if system == "fts5":
        return f"SQLite {sqlite3.sqlite_version}"
    try:
        return importlib.metadata.version(DISTS[system])
    except importlib.metadata.PackageNotFoundError:
        return "?"


def prepare_vectors(args: argparse.Namespace, n: int) -> dict[str, Any]:
    """Every text of the run embedded by MiniLM once (cached), written for the children."""
    from benchmarks.fusion_study import cached_vectors
    texts = (corpus(n) + corpus(SINGLE, seed=3) + queries(args.queries)["light"]
             + marker_texts() + [updated_text()])
    locomo_texts: list[str] = []
    if not args.no_locomo and os.path.isfile(os.path.join(args.data, FILE)):
        convs = load(os.path.join(args.data, FILE))
        locomo_texts = [t.text for c in convs for t in c.turns] + [
            q.text for c in convs for q in c.questions]
    info: dict[str, Any] = {}
    rows: dict[str, Vec] = {}
    facts_cache = os.path.join(args.cache or os.path.join(
        tempfile.gettempdir(), "holomem-embed-cache"), "peers")
    for name, group, cache in (("facts", texts, facts_cache),
                               ("locomo", locomo_texts, args.cache)):
        if not group:
            continue
        embedder, info[name] = cached_vectors(group, cache)
        for t in group:
            rows[_key(t)] = embedder.embed([t])[0]
    keys = sorted(rows)
    np.savez(os.path.join(args.work, "vectors.npz"), keys=np.array(keys),
             vectors=np.stack([rows[k] for k in keys]))
    return info


def ratio(value: Any, ours: Any, higher_better: bool) -> float | None:
    """holomem's advantage: >1 when holomem is better, whichever way the figure goes."""
    if not isinstance(value, (int, float)) or not isinstance(ours, (int, float)):
        return None
    if not value or not ours:
        return None
    return round(ours / value if higher_better else value / ours, 2)


def summary(runs: dict[str, Any]) -> dict[str, Any]:
    """One row per system with holomem's ratio beside each figure."""
    h = runs.get("holomem", {})
    hm = h.get("measure", {})
    table: dict[str, Any] = {}
    for system, r in runs.items():
        m = r.get("measure", {})
        if "error" in m or not m:
            table[system] = {"status": r.get("status", m.get("error", "not run"))}
            continue
        row: dict[str, Any] = {
            "facts": m["facts"],
            "ingest_facts_per_s": m["ingest_facts_per_s"],
            "ingest_facts_per_cpu_s": m.get("ingest_facts_per_cpu_s"),
            "single_write_p50_ms": m["single_write"]["p50_ms"],
            "reopen_s": r.get("reopen", {}).get("open_and_first_query_s"),
            "bytes_per_fact": r.get("bytes_per_fact"),
            "peak_rss_mib": m["peak_rss_mib"],
            "update_keeps_history": m["update_keeps_history"],
            "deleted_text_in_files": r.get("scan", {}).get("verdict", "n/a (no files)"),
            "syncs_per_write_call": r.get("fsyncs", {}).get("syncs_per_write_call"),
        }
        if m.get("note"):
            row["note"] = m["note"]
        for mode in (*MODES, "unranked"):
            q = m["query"].get(mode)
            if mode == "unranked" and not q:
                continue
            row[f"{mode}_p50_ms"] = q["p50_ms"] if q else None
            row[f"{mode}_p99_ms"] = q["p99_ms"] if q else None
        if system == "holomem":
            row["deleted_text_in_files_after_purge"] = r.get("scan_after_purge", {}).get(
                "verdict")
        else:
            row["holomem_advantage"] = {
                "ingest": ratio(m["ingest_facts_per_s"], hm.get("ingest_facts_per_s"), True),
                "single_write": ratio(m["single_write"]["p50_ms"],
                                      hm.get("single_write", {}).get("p50_ms"), False),
                **{f"{mode}_p50": ratio(row[f"{mode}_p50_ms"], hm.get("query", {}).get(
                    mode, {}).get("p50_ms"), False) for mode in MODES},
                "reopen": ratio(row["reopen_s"], h.get("reopen", {}).get(
                    "open_and_first_query_s"), False),
                "bytes_per_fact": ratio(row["bytes_per_fact"], h.get("bytes_per_fact"), False),
                "peak_rss": ratio(m["peak_rss_mib"], hm.get("peak_rss_mib"), False),
                "note": ">1: holomem better by that factor; <1: holomem behind",
            }
        table[system] = row
    return table


NONE = "-"


def _cell(v: Any, unit: str = "") -> str:
    if v is None:
        return NONE
    if isinstance(v, bool):
        return "yes" if v else "no"
    if (isinstance(v, float) and v >= 100) or isinstance(v, int):
        return f"{v:,.0f}{unit}"
    if isinstance(v, float):
        return f"{v:.3g}{unit}"
    return str(v)


def markdown(result: dict[str, Any]) -> str:
    """The summary table of a result, as Markdown (``--table FILE``)."""
    head = ["system", "version", "N", "ingest facts/s (per CPU s)", "syncs per write call",
            "single write p50 ms", "lexical p50 / p99 ms", "vector p50 / p99 ms",
            "hybrid p50 / p99 ms", "reopen s", "bytes/fact", "peak RSS MiB",
            "update keeps history", "deleted text in files"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for system, r in result["table"].items():
        version = result["versions"].get(system) or ""
        if "facts" not in r:
            lines.append(f"| {system} | {version} | {r.get('status', '')} |"
                         + " |" * (len(head) - 3))
            continue

        def q(mode: str, r: dict[str, Any] = r) -> str:
            p50, p99 = r.get(f"{mode}_p50_ms"), r.get(f"{mode}_p99_ms")
            return NONE if p50 is None else f"{_cell(p50)} / {_cell(p99)}"
        deleted = r["deleted_text_in_files"]
        if "deleted_text_in_files_after_purge" in r:
            deleted = f"{deleted} after forget; {r['deleted_text_in_files_after_purge']} " \
                "after purge"
        lexical = q("lexical") if "unranked_p50_ms" not in r else \
            f"unranked {q('unranked')}"
        lines.append("| " + " | ".join([
            system, version, _cell(r["facts"]),
            f"{_cell(r['ingest_facts_per_s'])} ({_cell(r.get('ingest_facts_per_cpu_s'))})",
            _cell(r.get("syncs_per_write_call")), _cell(r["single_write_p50_ms"]),
            lexical, q("vector"), q("hybrid"), _cell(r["reopen_s"]),
            _cell(r["bytes_per_fact"]), _cell(r["peak_rss_mib"]),
            _cell(r["update_keeps_history"]), deleted]) + " |")
    quality = result.get("locomo_recall_any@10_cat1-4", {})
    if quality:
        lines += ["", "| LoCoMo dev, categories 1-4 | recall_any@10 | recall_all@5 | MRR |",
                  "|---|---|---|---|"]
        for system, r in result["runs"].items():
            loc = r.get("locomo")
            if not isinstance(loc, dict):
                continue
            for mode, v in loc.items():
                if isinstance(v, dict) and "recall_any@10" in v:
                    lines.append(f"| {system} {mode} | {v['recall_any@10']:.3f} | "
                                 f"{v['recall_all@5']:.3f} | {v['mrr']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    args = _args(argv)
    if args.table:
        with open(args.table, encoding="utf-8") as f:
            print(markdown(json.load(f)))
        return {}
    if args.child:
        child_main(args)
        return {}
    systems = [s for s in args.only.split(",") if s] or list(SYSTEMS)
    for s in systems:
        if s not in SYSTEMS:
            raise SystemExit(f"unknown system {s!r}; there are {', '.join(SYSTEMS)}")
    before = machine(tempfile.gettempdir())
    data_ok = os.path.isfile(os.path.join(args.data, FILE))
    runs: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="holomem-peers-") as work:
        args.work = work
        vec_info = prepare_vectors(args, args.facts)
        for system in systems:
            why = available(system)
            run: dict[str, Any] = {"version": version(system) if why is None else None}
            runs[system] = run
            if why is not None:
                run["status"] = f"not run: {why}"
                print(f"{system}: {run['status']}", file=sys.stderr)
                continue
            n = args.mem0_facts if system == "mem0" else args.facts
            run["measure"] = m = run_child(args, "measure", system, n)
            print(f"{system}: {json.dumps(m)[:300]}", file=sys.stderr)
            if "error" in m:
                run["status"] = f"failed offline: {m['error']}"
                continue
            path = os.path.join(work, system)
            if m["files"]:
                run["fsyncs"] = syncs(args, system)
                run["bytes_per_fact"] = round(dir_bytes(path) / m["written"])
                run["scan"] = scan(path)
                if system == "holomem":
                    run["purge"] = run_child(args, "purge", system)
                    run["scan_after_purge"] = scan(path)
                run["reopen"] = run_child(args, "reopen", system)
            if args.no_locomo or system in args.locomo_skip.split(","):
                run["locomo"] = "not measured (--no-locomo or --locomo-skip)"
            elif not data_ok:
                run["locomo"] = f"not measured: no {FILE} in {args.data}"
            else:
                run["locomo"] = run_child(args, "locomo", system)
            shutil.rmtree(path, ignore_errors=True)
        if importlib.util.find_spec("benchmarks.checkpointer_bench") is None:
            ckpt: Any = "checkpointer: not measured (module absent)"
        else:
            ckpt = run_child(args, "checkpointer", "langgraph", args.checkpointer_n)
    table = summary(runs)
    h = table.get("holomem", {})
    result = {
        "benchmark": "peers",
        "machine": before,
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
        "command": "python benchmarks/peers.py " + " ".join(
            a for a in (argv if argv is not None else sys.argv[1:])),
        "conditions": {
            "facts": "search_bench corpus (seeded 24-word texts)",
            "queries": f"{args.queries} search_bench light queries (3-6 words), k = {K}",
            "vectors": "holomem minilm (384-d), embedded once and cached, the same for all",
            "vector_cache": vec_info, "batch": BATCH, "single_writes": SINGLE,
            "markers": MARKERS, "query_budget_s": args.query_budget,
            "n_per_system": {s: (args.mem0_facts if s == "mem0" else args.facts)
                             for s in systems},
        },
        "versions": {s: r["version"] for s, r in runs.items()},
        "table": table,
        "locomo_recall_any@10_cat1-4": {
            f"{s} {mode}": v["recall_any@10"] for s, r in runs.items()
            if isinstance(r.get("locomo"), dict)
            for mode, v in r["locomo"].items() if isinstance(v, dict) and "recall_any@10" in v},
        "checkpointer": ckpt,
        "runs": runs,
        "targets": {
            "holomem deleted text not in files after purge": {
                "value": h.get("deleted_text_in_files_after_purge"), "target": "not found",
                "status": "met" if h.get("deleted_text_in_files_after_purge") == "not found"
                else "missed" if h else "not measured"},
            "holomem update keeps history": check(
                1.0 if h.get("update_keeps_history") else 0.0 if h else None, ">=", 1.0),
        },
    }
    emit("peers", result, args.save)
    return result


if __name__ == "__main__":
    main()
