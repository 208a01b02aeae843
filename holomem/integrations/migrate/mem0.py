"""Migration from Mem0 (its open-source ``mem0.Memory``): :func:`from_mem0`
(docs/migrate.md).

Owns: reading the memories of the users, agents and runs asked for (Mem0 lists
memories only by those ids), each memory's history (Mem0's ``history(memory_id)``:
the text it was added with and every update) as one holomem supersession chain —
each version a fact whose ingest time is when Mem0 recorded it, superseding the
version before — the memory's namespace (its user, agent and run ids), its metadata
and, from the Chroma or Qdrant vector stores Mem0 runs on, its current vector when
the memory's embedder is Mem0's model (:mod:`.vectors`). Imports nothing of Mem0 (it
is handed a Mem0 memory) and the writer.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from holomem.api.engine import validate
from holomem.api.memory.memory import Memory
from holomem.errors import HolomemError, InvalidError, missing_extra
from holomem.integrations.migrate import sqlitefiles, writer
from holomem.integrations.migrate import vectors as peer_vectors
from holomem.integrations.migrate.report import MigrationReport, Tally
from holomem.log import fs

#: The most memories read for one user, agent or run id (Mem0 lists without paging).
MAX_PER_SCOPE = 100_000
#: Mem0's scope ids, in the order their labels nest in the namespace.
SCOPES = (("user_id", "users"), ("agent_id", "agents"), ("run_id", "runs"))
#: Mem0's payload keys kept as metadata beside the caller's own.
KEPT = ("user_id", "agent_id", "run_id", "actor_id", "role")


def open_mem0(config: Mapping[str, Any]) -> Any:
    """A Mem0 ``Memory`` of ``config`` (the dict ``mem0.Memory.from_config`` takes),
    after checking that what it names is there, since Mem0 would create it empty in its
    place (or at its own default places when the config names none): the config must
    name its vector store and its ``history_db_path``; a local Chroma or Qdrant
    ``path`` must exist and hold the named collection (``collection_name``, Mem0's
    default ``mem0``); the history file must be an SQLite database holding Mem0's
    ``history`` table (``:memory:`` is taken as it is). Errors: ``invalid_request`` (a
    missing file or collection, a config Mem0 refuses or cannot build, whatever the
    exception Mem0 raised); ``ModuleNotFoundError`` naming the ``peers`` extra."""
    try:
        mem0 = importlib.import_module("mem0")
    except ImportError as exc:
        raise missing_extra(exc, "holomem.integrations.migrate.open_mem0", "peers") from exc
    if not isinstance(config, Mapping):
        raise InvalidError("a Mem0 config must be a JSON object (Memory.from_config's dict)")
    _check_vector_store(config.get("vector_store"))
    _check_history(config.get("history_db_path"))
    try:
        return mem0.Memory.from_config(dict(config))
    except Exception as exc:  # pydantic's checks, a provider's own (a missing API key)
        raise InvalidError(f"Mem0 cannot build a memory of this config: "
                           f"{type(exc).__name__}: {exc}") from exc


#: Mem0's own name of its collection when the config names none.
DEFAULT_COLLECTION = "mem0"
#: Keys of a vector store's config that make it a server's, not a local directory's.
_SERVED = ("client", "host", "url", "api_key")


def _check_vector_store(store: object) -> None:
    """The config's ``vector_store``: named, and a local Chroma's or Qdrant's directory
    there with its collection in it. Errors: ``invalid_request``."""
    if not isinstance(store, Mapping) or not store.get("provider"):
        raise InvalidError("the Mem0 config names no vector_store (with its provider): "
                           "Mem0 would start an empty one at its default place")
    provider = store.get("provider")
    local = store.get("config") or {}
    if not isinstance(local, Mapping):
        raise InvalidError("the Mem0 config's vector_store.config must be a JSON object")
    if provider not in ("chroma", "qdrant") or any(local.get(k) for k in _SERVED):
        return  # a server's store: Mem0 asks it, and creates no file here
    path = local.get("path")
    if not isinstance(path, str) or not path:
        raise InvalidError(f"the Mem0 config's vector_store.config names no path: Mem0 "
                           f"would start an empty {provider} store at its default place")
    if not os.path.isdir(path):
        raise InvalidError(f"the Mem0 config's vector_store.config.path {path!r} does not "
                           "exist (Mem0 would start an empty memory there)")
    name = local.get("collection_name") or DEFAULT_COLLECTION
    if provider == "chroma":
        database = os.path.join(path, "chroma.sqlite3")
        if not os.path.isfile(database):
            raise InvalidError(f"{path}: not a Chroma database (it has no chroma.sqlite3)")
        conn = sqlitefiles.open_read_only(database, "a Chroma database")
        try:
            if "collections" not in sqlitefiles.tables(conn, database):
                raise InvalidError(f"{database}: not a Chroma database")
            have = sorted(str(n) for (n,) in conn.execute("SELECT name FROM collections"))
        finally:
            conn.close()
    else:
        have = _qdrant_collections(path)
    if name not in have:
        raise InvalidError(f"the Mem0 config's collection {name!r} is not in {path} (it "
                           f"has: {', '.join(have) or 'none'}); Mem0 would create it empty")


def _qdrant_collections(path: str) -> list[str]:
    """The collections of a local Qdrant directory (its ``meta.json``)."""
    meta = os.path.join(path, "meta.json")
    try:
        data = json.loads(fs.read_file(meta))
    except (HolomemError, ValueError) as exc:
        raise InvalidError(f"{path}: not a local Qdrant directory (its meta.json cannot "
                           f"be read: {exc})") from exc
    found = data.get("collections") if isinstance(data, dict) else None
    return sorted(found) if isinstance(found, dict) else []


def _check_history(path: object) -> None:
    """The config's ``history_db_path``: named, and an SQLite file holding Mem0's
    ``history`` table (or ``:memory:``). Errors: ``invalid_request``."""
    if path == ":memory:":
        return
    if not isinstance(path, str) or not path:
        raise InvalidError("the Mem0 config names no history_db_path: Mem0 would start "
                           "an empty history at its default place")
    if not os.path.isfile(path):
        raise InvalidError(f"the Mem0 config's history_db_path {path!r} does not exist "
                           "(Mem0 would start an empty memory there)")
    conn = sqlitefiles.open_read_only(path, "Mem0's history database")
    try:
        if "history" not in sqlitefiles.tables(conn, path):
            raise InvalidError(f"{path}: not Mem0's history database (it has no "
                               "'history' table); Mem0 would add its tables to it")
    finally:
        conn.close()


def _ms(value: object) -> int | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        when = dt.datetime.fromisoformat(value)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


def _ids(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable):
        raise InvalidError(f"{what} must be a list of ids")
    out = list(value)
    for v in out:
        validate.doc_id(v, what)
    return list(dict.fromkeys(out))


def _model(mem0_memory: Any) -> str | None:
    try:
        config = mem0_memory.config.embedder.config or {}
        model = config.get("model") if isinstance(config, dict) else getattr(config, "model",
                                                                              None)
        return str(model) if isinstance(model, str) and model else None
    except AttributeError:
        return None


def _vectors(mem0_memory: Any, ids: list[str]) -> dict[str, list[float]] | None:
    """The current vectors of ``ids`` from Mem0's vector store (Chroma or Qdrant), or
    None when its store is another (Mem0's own interface gives no vectors)."""
    store: Any = getattr(mem0_memory, "vector_store", None)
    provider = getattr(getattr(mem0_memory.config, "vector_store", None), "provider", None)
    if not ids:
        return {}
    if provider == "chroma" and hasattr(store, "collection"):
        got = store.collection.get(ids=ids, include=["embeddings"])
        return {i: [float(x) for x in v] for i, v in zip(got["ids"], got["embeddings"],
                                                          strict=True)}
    if provider == "qdrant" and hasattr(store, "client"):
        points = store.client.retrieve(collection_name=store.collection_name, ids=ids,
                                       with_vectors=True)
        return {str(p.id): [float(x) for x in p.vector] for p in points
                if isinstance(p.vector, list)}
    return None


#: The columns of Mem0's history table, in the order its ``get_history`` gives them.
HISTORY_COLUMNS = ("id", "memory_id", "old_memory", "new_memory", "event", "created_at",
                   "updated_at", "is_deleted", "actor_id", "role")
#: Memory ids per query of the history table.
_IN_QUERY = 500


def _histories(mem0_memory: Any, ids: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each memory's history, as ``mem0_memory.history(id)`` gives it. Mem0's history
    table has no index on the memory id, so a ``history`` call reads the whole table:
    one call per memory would make a migration quadratic. When Mem0 keeps it in SQLite
    (its own ``SQLiteManager``), the histories of a whole batch are read in one query,
    in the order ``history`` uses; otherwise one ``history`` call each."""
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in ids}
    conn = getattr(getattr(mem0_memory, "db", None), "connection", None)
    if isinstance(conn, sqlite3.Connection) and ids:
        rows: list[Any] | None = []
        try:
            for start in range(0, len(ids), _IN_QUERY):  # within SQLite's variable limit
                part = ids[start:start + _IN_QUERY]
                assert rows is not None  # set above, None only when the query failed
                rows += conn.execute(
                    f"SELECT {', '.join(HISTORY_COLUMNS)} FROM history "
                    f"WHERE memory_id IN ({','.join('?' * len(part))}) "
                    "ORDER BY created_at ASC, DATETIME(updated_at) ASC", part).fetchall()
        except sqlite3.Error:
            rows = None
        if rows is not None:
            for row in rows:
                entry = dict(zip(HISTORY_COLUMNS, row, strict=True))
                out[str(entry["memory_id"])].append(entry)
            return out
    for i in ids:
        out[i] = list(mem0_memory.history(i) or [])
    return out


def from_mem0(mem0_memory: Any, memory: Memory, *, user_ids: Sequence[str] | str = (),
              agent_ids: Sequence[str] | str = (), run_ids: Sequence[str] | str = (),
              namespace: Sequence[str] = (), vectors: str = "auto",
              batch_size: int = writer.BATCH,
              progress: writer.Progress | None = None) -> MigrationReport:
    """Move the Mem0 memories of ``user_ids``, ``agent_ids`` and ``run_ids`` (at least
    one id; Mem0 lists memories by them) into ``memory``, with their history.

    A memory lives in the namespace ``[*namespace, "users", U, "agents", A, "runs",
    R]`` (the parts of the ids it has). Its history becomes a supersession chain: the
    text it was added with and each update are facts, each superseding the one
    before, ingested when Mem0 recorded it (its ``created_at``, then each update's
    ``updated_at``), so ``Memory.history`` of the current fact shows the older values
    and ``recall(as_of=...)`` the value of the time. Every version carries the
    memory's metadata now (Mem0 keeps no older metadata), with Mem0's ``user_id``,
    ``agent_id``, ``run_id``, ``actor_id`` and ``role`` and its id as ``mem0_id``; the
    subject is the Mem0 id. An ``expiration_date`` becomes the current version's
    ``valid_to``. Idempotent: a second run stores nothing (``created == 0``); updates
    made since an earlier run add their versions to the chain. ``vectors``: as
    :func:`from_chroma` (the current version's vector, read from a Chroma or Qdrant
    store). Deleted memories are not listed by Mem0 and are not moved.

    Errors: ``invalid_request`` (no ids, a bad id or option, not a Mem0 memory), and
    those of ``Memory.import_``.
    """
    if not isinstance(memory, Memory):
        raise InvalidError(f"from_mem0 needs a holomem.Memory, got {type(memory).__name__}")
    if not all(hasattr(mem0_memory, name) for name in ("get_all", "history", "config")):
        raise InvalidError(f"from_mem0 needs a mem0 Memory, got {type(mem0_memory).__name__}")
    scopes = [(key, i) for key, ids in (("user_id", user_ids), ("agent_id", agent_ids),
                                         ("run_id", run_ids))
              for i in _ids(ids, key + "s")]
    if not scopes:
        raise InvalidError("from_mem0 needs user_ids, agent_ids or run_ids: Mem0 lists "
                           "memories only by them")
    into = validate.namespace(namespace)
    if len(into) > validate.MAX_NAMESPACE_DEPTH - 2 * len(SCOPES):
        raise InvalidError(f"namespace {list(into)!r}: at most "
                           f"{validate.MAX_NAMESPACE_DEPTH - 2 * len(SCOPES)} strings, to "
                           "leave room for the user, agent and run ids")
    want = peer_vectors.mode(vectors)
    size = writer.batch_size(batch_size)
    tally = Tally("mem0")
    out = writer.Writer(memory, tally, size, writer.progress_callback(progress))
    items: dict[str, dict[str, Any]] = {}
    for key, sid in scopes:
        try:
            found = mem0_memory.get_all(filters={key: sid}, top_k=MAX_PER_SCOPE,
                                        show_expired=True)
        except ValueError as exc:
            raise InvalidError(f"Mem0 refused {key}={sid!r}: {exc}") from exc
        results = found.get("results", []) if isinstance(found, dict) else list(found)
        if len(results) >= MAX_PER_SCOPE:
            tally.skip(f"{key}={sid}", f"Mem0 listed {MAX_PER_SCOPE} memories, the most "
                       "one id is read for; any more were not moved")
        for item in results:
            items.setdefault(str(item["id"]), item)
    decision = peer_vectors.Decision(False, "vectors='drop'") if want == "drop" else None
    order = list(items)
    for start in range(0, len(order), size):
        chunk = order[start:start + size]
        vecs: dict[str, list[float]] | None = None
        if want != "drop":
            vecs = _vectors(mem0_memory, chunk)
            if vecs is None:
                decision = peer_vectors.Decision(False, "Mem0's vector store "
                                                 f"{mem0_memory.config.vector_store.provider!r}"
                                                 " does not hand out its vectors")
            elif decision is None and vecs:
                first = next(iter(vecs.values()))
                decision = peer_vectors.decide(memory, want, _model(mem0_memory), len(first))
        histories = _histories(mem0_memory, chunk)
        for mid in chunk:
            vector = vecs.get(mid) if vecs and decision is not None and decision.keep \
                else None
            _add(out, tally, histories[mid], into, items[mid], vector)
    out.flush()
    if decision is None:
        return tally.report("none", "Mem0 held no vectors for these memories")
    return tally.report("kept" if decision.keep else "dropped", decision.note)


def _add(out: writer.Writer, tally: Tally, history: list[dict[str, Any]],
         into: tuple[str, ...], item: dict[str, Any], vector: list[float] | None) -> None:
    mid = str(item["id"])
    text = item.get("memory")
    labels: list[str] = list(into)
    for key, label in SCOPES:
        if item.get(key):
            labels += [label, str(item[key])]
    own = item.get("metadata")
    try:
        ns = validate.namespace(labels)
        validate.unreserved(mid, "id")
        if own is not None and not isinstance(own, Mapping):
            raise InvalidError(f"its metadata is a {type(own).__name__}, not an object")
    except HolomemError as exc:
        tally.read += 1
        tally.skip(mid, exc.message)
        return
    metadata = {**(own or {}),
                **{k: item[k] for k in KEPT if item.get(k) is not None}, "mem0_id": mid}
    versions: list[tuple[str, str, int]] = []  # (key, text, time)
    for row in history:
        new = row.get("new_memory")
        if row.get("event") not in ("ADD", "UPDATE") or not isinstance(new, str):
            continue
        when = _ms(row.get("updated_at") if row.get("event") == "UPDATE"
                   else row.get("created_at")) or _ms(row.get("created_at"))
        if when is None:
            continue
        versions.append((str(row.get("id")), new, when))
    current_time = _ms(item.get("updated_at")) or _ms(item.get("created_at"))
    if isinstance(text, str) and (not versions or versions[-1][1] != text):
        # History that does not end in the current text (kept off, or cut short).
        versions.append((f"current:{writer.digest(text)}", text, current_time or 0))
    valid_to = None
    if item.get("expiration_date"):
        day = _ms(str(item["expiration_date"]))
        valid_to = None if day is None else day + 86_400_000  # it holds through that day
    previous: tuple[str, ...] | None = None
    for n, (key, words, when) in enumerate(versions):
        tally.read += 1
        last = n == len(versions) - 1
        if not words.strip():
            tally.skip(f"{mid}@{key}", "an empty text")
            continue
        entry_key = (mid, key)
        out.add(writer.Entry(
            source_id=mid if last else f"{mid}@{key}", key=entry_key, namespace=ns,
            text=words, ingest_time=when, subject=mid, metadata=metadata,
            embedding=vector if last else None, valid_to=valid_to if last else None,
            supersedes=(previous,) if previous is not None else (),
            # The current version also supersedes whatever holomem holds as current
            # for the memory (an edit made there; a value moved without its history).
            replaces={"subject": mid} if last else None))
        previous = entry_key
