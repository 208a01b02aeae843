"""Migration from any LangGraph ``BaseStore`` (in-memory, SQLite, Postgres, ...):
:func:`from_langgraph_store` (docs/migrate.md).

Owns: reading a LangGraph store's items a page at a time and turning each into the
fact a :class:`~holomem.integrations.langgraph.HolomemStore` would have stored for the
same put — the same namespace, key (the subject), value (the metadata, with the item
marker) and indexed text, all by that integration's own checks — so the migrated
store is served by a HolomemStore straight away. Imports LangGraph (lazily, naming
the extra when it is missing), the LangGraph integration's checks and the writer.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import importlib
import os
from collections.abc import Iterator, Sequence
from typing import Any

from holomem.api.engine import validate
from holomem.api.memory.memory import Memory
from holomem.errors import HolomemError, InvalidError, missing_extra
from holomem.integrations.migrate import sqlitefiles, writer
from holomem.integrations.migrate import vectors as peer_vectors
from holomem.integrations.migrate.report import MigrationReport, Tally

#: Items read per page of the LangGraph store.
PAGE = 1000
#: The table every LangGraph SQLite store holds its items in.
TABLE = "store"


@contextlib.contextmanager
def open_langgraph_sqlite(path: str | os.PathLike[str]) -> Iterator[Any]:
    """A LangGraph ``SqliteStore`` over the database file at ``path``, opened read-only
    (nothing of it is changed, and a missing file is not created), closed afterwards.

    Errors: ``invalid_request`` (no such file, or not a LangGraph store's database);
    ``ModuleNotFoundError`` naming the ``peers`` extra (langgraph-checkpoint-sqlite).
    """
    try:
        sqlite = importlib.import_module("langgraph.store.sqlite")
    except ImportError as exc:
        raise missing_extra(exc, "holomem migrate langgraph-sqlite", "peers") from exc
    name = os.fspath(path)
    conn = sqlitefiles.open_read_only(name, "a LangGraph SqliteStore's database")
    try:
        if TABLE not in sqlitefiles.tables(conn, name):
            raise InvalidError(f"{name}: not a LangGraph store's database (it has no "
                               f"{TABLE!r} table)")
        yield sqlite.SqliteStore(conn)
    finally:
        conn.close()


def _ms(value: object) -> int | None:
    """A LangGraph time (an aware datetime; a naive one is UTC) in milliseconds."""
    if isinstance(value, str):
        try:
            value = dt.datetime.fromisoformat(value)
        except ValueError:
            return None
    if not isinstance(value, dt.datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    return int(value.timestamp() * 1000)


def from_langgraph_store(store: Any, memory: Memory, namespace_prefix: Sequence[str] = (),
                         *, namespace: Sequence[str] = (), fields: Sequence[str] | None = None,
                         vectors: str = "auto", batch_size: int = writer.BATCH,
                         progress: writer.Progress | None = None) -> MigrationReport:
    """Move every item at or under ``namespace_prefix`` of a LangGraph ``store`` into
    ``memory``, as a ``HolomemStore(memory, namespace=namespace, index={"fields":
    fields})`` would have stored it.

    Each item becomes one fact: its LangGraph namespace under ``namespace`` (default:
    the root), its key the subject, its value the metadata, the text of its ``fields``
    (default ``["$"]``, the whole value) what recall searches; its ``updated_at`` is
    the fact's ingest time and its ``created_at`` the event time. Idempotent: a second
    run stores nothing (``created == 0``); an item whose value changed since an earlier
    run supersedes the value that run stored. A LangGraph ``BaseStore`` does not hand
    out its vectors: with an embedder the memory embeds the text (``vectors`` is taken
    for symmetry with the other peers). Items HolomemStore would refuse (a namespace
    under ``"langgraph"``, a label with a period, a value too large) are skipped and
    named in the report. Written ``batch_size`` facts per transaction; ``progress(n)``
    is told the items read after each.

    Errors: ``invalid_request`` (not a BaseStore, a bad prefix or option), and those of
    ``Memory.import_``; ``ModuleNotFoundError`` naming the ``langgraph`` extra.
    """
    try:
        base = importlib.import_module("langgraph.store.base")
        from holomem.integrations.langgraph import checks
    except ImportError as exc:
        raise missing_extra(exc, "holomem.integrations.migrate.from_langgraph_store",
                            "peers") from exc
    if not isinstance(store, base.BaseStore):
        raise InvalidError(f"from_langgraph_store needs a LangGraph BaseStore, got "
                           f"{type(store).__name__}")
    if not isinstance(memory, Memory):
        raise InvalidError(f"from_langgraph_store needs a holomem.Memory, got "
                           f"{type(memory).__name__}")
    try:
        prefix = checks.labels(namespace_prefix, "namespace_prefix")
        into = checks.labels(validate.namespace(namespace), "namespace")
    except base.InvalidNamespaceError as exc:
        raise InvalidError(str(exc)) from exc
    paths = checks.paths(list(fields) if fields is not None else ["$"], "fields")
    vectors_mode = peer_vectors.mode(vectors)
    size = writer.batch_size(batch_size)
    tally = Tally("langgraph")
    # The item marker of Entry.replaces says which facts are LangGraph items.
    out = writer.Writer(memory, tally, size, writer.progress_callback(progress),
                        moved_only=False)
    seen: set[tuple[tuple[str, ...], str]] = set()
    offset = 0
    while True:
        page = store.search(prefix, limit=PAGE, offset=offset)
        for item in page:
            name = (tuple(item.namespace), str(item.key))
            if name in seen:  # a store whose order moved between two pages
                continue
            seen.add(name)
            tally.read += 1
            _add(out, tally, checks, base, item, into, paths)
        if len(page) < PAGE:
            break
        offset += len(page)
    out.flush()
    note = ("a LangGraph store does not hand out its vectors" if vectors_mode != "drop"
            else "vectors='drop'")
    if memory.embedder is not None:
        note += f"; the memory's embedder {memory.embedder.identity.name!r} embedded the text"
    return tally.report("none", note)


def _add(out: writer.Writer, tally: Tally, checks: Any, base: Any, item: Any,
         into: tuple[str, ...], paths: list[str]) -> None:
    ns, key = tuple(item.namespace), item.key
    source_id = "/".join(map(str, ns)) + f":{key}"
    updated = _ms(item.updated_at)
    created = _ms(item.created_at)
    if updated is None or updated < 0:
        tally.skip(source_id, "the item has no updated_at time")
        return
    # The version's identity: where it is and what it holds as this migration reads it
    # (its value, and the fields that make its text). Not when it was written: an item
    # put again with the same value is the same version, not a new one over an edit.
    try:
        version = (*ns, str(key), writer.digest([item.value, paths]))
    except HolomemError as exc:
        tally.skip(source_id, str(exc))
        return
    if out.already((*into, *ns), version):
        return  # moved by an earlier run: not checked again
    try:
        put = checks.check_put(base.PutOp(ns, key, item.value), into, paths)
    except (HolomemError, base.InvalidNamespaceError) as exc:
        tally.skip(source_id, str(exc))
        return
    full = tuple(checks.full(into, put.namespace, "namespace"))
    out.add(writer.Entry(
        source_id=source_id, key=version, namespace=full, text=put.text, ingest_time=updated,
        subject=put.key, metadata=put.metadata,
        event_time=created if created is not None and created >= 0 else None,
        replaces={"subject": put.key, "metadata": {checks.MARK: {"$exists": True}}}))
