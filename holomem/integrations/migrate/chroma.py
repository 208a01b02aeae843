"""Migration from Chroma: :func:`from_chroma` (docs/migrate.md).

Owns: opening a Chroma database read-only in effect (a path is checked to be one
before Chroma is asked to open it, since Chroma would create a missing one), finding
every named collection before anything is written, reading each a page at a time
with its documents, metadata and vectors, and turning each record into a fact:
the collection is the namespace (under the caller's), the record's id the subject,
its document the text, its metadata the metadata. What the collection's embedding
function is (its name and model) decides whether its vectors are kept
(:mod:`.vectors`). Imports chromadb (lazily, naming the extra when it is missing) and
the writer.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

from holomem.api.engine import validate
from holomem.api.memory.memory import Memory
from holomem.errors import HolomemError, InvalidError, NotFoundError, missing_extra
from holomem.integrations.migrate import vectors as peer_vectors
from holomem.integrations.migrate import writer
from holomem.integrations.migrate.report import MigrationReport, Tally

#: Records read per page of a collection.
PAGE = 1000
#: The file every Chroma persistent directory holds.
DATABASE = "chroma.sqlite3"


def open_chroma(path_or_client: object) -> Any:
    """A chromadb client: ``path_or_client`` itself, or a persistent client of the Chroma
    directory it names (which must exist and hold a Chroma database: Chroma would
    create a missing one). Errors: ``invalid_request``; ``ModuleNotFoundError`` naming
    the ``peers`` extra."""
    try:
        chromadb = importlib.import_module("chromadb")
    except ImportError as exc:
        raise missing_extra(exc, "holomem.integrations.migrate.from_chroma", "peers") from exc
    if isinstance(path_or_client, (str, os.PathLike)):
        path = os.fspath(path_or_client)
        if not os.path.isdir(path):
            raise InvalidError(f"{path}: no such directory (a Chroma persistent "
                               "directory is expected)")
        if not os.path.isfile(os.path.join(path, DATABASE)):
            raise InvalidError(f"{path}: not a Chroma database (it has no {DATABASE})")
        return chromadb.PersistentClient(path=path)
    if isinstance(path_or_client, chromadb.api.ClientAPI):
        return path_or_client
    raise InvalidError("from_chroma needs the path of a Chroma persistent directory or a "
                       f"chromadb client, got {type(path_or_client).__name__}")


def _names(collection: object) -> list[str]:
    if isinstance(collection, str):
        names = [collection]
    elif isinstance(collection, Sequence) and all(isinstance(c, str) for c in collection):
        names = list(collection)
    else:
        raise InvalidError("collection must be a collection's name or a list of names")
    if not names:
        raise InvalidError("collection: name at least one collection")
    for name in names:
        validate.doc_id(name, "collection")
    return list(dict.fromkeys(names))


def collections(client: Any, names: str | Sequence[str]) -> list[Any]:
    """The named collections of a chromadb ``client``, every one looked up before any
    is read. Errors: ``not_found`` naming the collections there are,
    ``invalid_request``."""
    cols = []
    for name in _names(names):
        try:
            cols.append(client.get_collection(name))
        except Exception as exc:  # Chroma's NotFoundError, or its ValueError before 1.0
            if "does not exist" in str(exc) or type(exc).__name__ == "NotFoundError":
                have = sorted(c.name for c in client.list_collections())
                raise NotFoundError(f"Chroma has no collection {name!r} (it has: "
                                    f"{', '.join(have) or 'none'})") from exc
            raise InvalidError(f"Chroma cannot open collection {name!r}: {exc}") from exc
    return cols


def _model(col: Any) -> str | None:
    """The name of the model the collection's embedding function runs, if it says."""
    try:
        ef = (col.configuration or {}).get("embedding_function")
    except Exception:  # an embedding function Chroma cannot rebuild: no model named
        return None
    if ef is None:
        return None
    try:
        config = ef.get_config() or {}
        model = config.get("model_name") or config.get("model")
        return str(model) if model else str(ef.name())
    except Exception:  # a legacy or custom function without a name
        return None


def from_chroma(path_or_client: object, collection: str | Sequence[str], memory: Memory, *,
                namespace: Sequence[str] = (), vectors: str = "auto",
                batch_size: int = writer.BATCH,
                progress: writer.Progress | None = None) -> MigrationReport:
    """Move every record of one or more Chroma collections into ``memory``.

    ``path_or_client``: a Chroma persistent directory or a chromadb client (an HTTP
    one included). Each record becomes one fact in the namespace ``[*namespace,
    COLLECTION]``: the record's id is its subject, its document the text, its
    metadata the metadata. Chroma keeps no times: the ingest time is the run's
    (a second run leaves the facts as the first stored them). A record whose document
    or metadata is not the value of its current fact in holomem (it changed since an
    earlier run, back to an earlier value included) supersedes that fact. ``vectors``:
    ``"auto"`` keeps the collection's vectors when its embedding function is the
    memory's embedder's model with the same dimension, ``"keep"`` keeps them whatever
    it is, ``"drop"`` never. Records without a document (a vector alone) are skipped
    and named in the report.

    Every collection is looked up before anything is written. Errors:
    ``invalid_request`` (a path that is no Chroma database, a bad option),
    ``not_found`` (a collection the database does not have), and those of
    ``Memory.import_``; ``ModuleNotFoundError`` naming the ``peers`` extra.
    """
    if not isinstance(memory, Memory):
        raise InvalidError(f"from_chroma needs a holomem.Memory, got {type(memory).__name__}")
    _names(collection)
    into = validate.namespace(namespace)
    if len(into) >= validate.MAX_NAMESPACE_DEPTH:
        raise InvalidError(f"namespace {list(into)!r} leaves no room for the collection")
    want = peer_vectors.mode(vectors)
    size = writer.batch_size(batch_size)
    tell = writer.progress_callback(progress)
    cols = collections(open_chroma(path_or_client), collection)
    tally = Tally("chroma")
    out = writer.Writer(memory, tally, size, tell)
    now = memory.clock.now_ms()
    notes: list[str] = []
    kept = False
    seen_vectors = False
    decisions = {} if want == "drop" else _decisions(memory, want, cols)
    for col in cols:
        decision = decisions.get(col.name)
        if decision is not None:
            seen_vectors = True
            notes.append(f"{col.name}: {decision.note}")
            kept = kept or decision.keep
        ns = (*into, col.name)
        offset = 0
        while True:
            include = ["documents", "metadatas"] + (["embeddings"] if want != "drop" else [])
            page = col.get(include=include, limit=PAGE, offset=offset)
            ids = page["ids"]
            embeddings = page.get("embeddings") if want != "drop" else None
            for i, rid in enumerate(ids):
                tally.read += 1
                vector = None
                if decision is not None and decision.keep and embeddings is not None:
                    vector = [float(x) for x in embeddings[i]]
                _add(out, tally, ns, rid, page["documents"][i],
                     (page.get("metadatas") or [None] * len(ids))[i], vector, now)
            if len(ids) < PAGE:
                break
            offset += len(ids)
    out.flush()
    if want == "drop":
        return tally.report("dropped", "vectors='drop': the collections' vectors were "
                            "not read")
    if not seen_vectors:
        return tally.report("none", "the collections held no vectors")
    return tally.report("kept" if kept else "dropped", "; ".join(notes))


def _decisions(memory: Memory, want: str, cols: list[Any]
               ) -> dict[str, peer_vectors.Decision]:
    """Whether each collection's vectors are kept, decided for all of them before
    anything is written (by the first vector of each: Chroma holds one dimension per
    collection). Errors: ``invalid_request`` (``"keep"`` of vectors whose dimension is
    not the embedder's or the store's, or not that of another collection kept)."""
    out: dict[str, peer_vectors.Decision] = {}
    dims: dict[str, int] = {}
    for col in cols:
        first = col.get(include=["embeddings"], limit=1).get("embeddings")
        if first is None or not len(first):
            continue
        dim = len(first[0])
        out[col.name] = decision = peer_vectors.decide(memory, want, _model(col), dim)
        if decision.keep:
            dims[col.name] = dim
    if len(set(dims.values())) > 1:
        (a, da), (b, db) = [next((n, d) for n, d in dims.items() if d == x)
                            for x in sorted(set(dims.values()))[:2]]
        raise InvalidError(f"vectors='keep': collection {a!r} holds vectors of {da} "
                           f"dimensions, collection {b!r} of {db} (a store holds vectors "
                           "of one dimension); migrate them into separate stores, or "
                           "with vectors='drop'")
    return out


def _add(out: writer.Writer, tally: Tally, ns: tuple[str, ...], rid: str,
         document: str | None, metadata: Any, vector: list[float] | None, now: int) -> None:
    source_id = f"{ns[-1]}:{rid}"
    if not isinstance(document, str) or not document.strip():
        tally.skip(source_id, "no document: a vector alone holds no text to recall")
        return
    try:
        validate.unreserved(rid, "id")
    except HolomemError as exc:
        tally.skip(source_id, exc.message)
        return
    meta = writer.metadata_of(metadata)
    out.add(writer.Entry(
        source_id=source_id, key=(rid, writer.digest([document, meta])), namespace=ns,
        text=document, ingest_time=now, subject=rid, metadata=meta, embedding=vector,
        replaces={"subject": rid}))
