"""Moving an agent's memory from another library into holomem in one call
(docs/migrate.md; the ``holomem migrate`` command runs them from the shell).

Owns nothing itself: it names the public calls of its modules —
:func:`from_langgraph_store` (:mod:`.langgraph`: any LangGraph ``BaseStore``),
:func:`from_chroma` (:mod:`.chroma`: a Chroma persistent directory or client),
:func:`from_mem0` (:mod:`.mem0`: an open-source Mem0 memory, with its history) and
the :class:`MigrationReport` each returns (:mod:`.report`), and the openers the
command line uses to reach a peer without changing it (:func:`open_langgraph_sqlite`,
:func:`open_chroma` and :func:`collections`, :func:`open_mem0`). They share
:mod:`.writer` (deterministic fact ids, bounded atomic batches through
``Memory.import_``) and :mod:`.vectors` (when a peer's vectors are kept).

Every call is idempotent — a fact's id derives from the peer's own identity of the
record, so a second run stores nothing and reports ``created == 0`` — and keeps the
peer's namespaces, metadata, times and, when the memory's embedder is the peer's
model, its vectors. The peer libraries are imported only when a call needs them
(the ``peers`` extra installs them: ``pip install 'holomem-db[peers]'``).
"""

from __future__ import annotations

from holomem.integrations.migrate.chroma import collections, from_chroma, open_chroma
from holomem.integrations.migrate.langgraph import from_langgraph_store, open_langgraph_sqlite
from holomem.integrations.migrate.mem0 import from_mem0, open_mem0
from holomem.integrations.migrate.report import MigrationReport, NamespaceCount, Skipped

__all__ = ["MigrationReport", "NamespaceCount", "Skipped", "collections", "from_chroma",
           "from_langgraph_store", "from_mem0", "open_chroma", "open_langgraph_sqlite",
           "open_mem0"]
