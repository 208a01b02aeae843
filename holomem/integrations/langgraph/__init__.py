"""holomem as a LangGraph store: :class:`HolomemStore`, a ``langgraph.store.base.BaseStore``.

Owns: the translation of LangGraph's store operations (``GetOp``, ``PutOp``,
``SearchOp``, ``ListNamespacesOp``, run by ``batch`` / ``abatch`` and the
``get`` / ``put`` / ``delete`` / ``search`` / ``list_namespaces`` methods BaseStore
builds on them) into ``holomem.Memory`` calls, in four parts: :mod:`.store`
(:class:`HolomemStore`: its options, the batch, BaseStore's methods), :mod:`.checks`
(namespaces, keys, values and filters checked and mapped to holomem's, every op
checked before any runs), :mod:`.vectors` (``index["embed"]``'s vectors) and
:mod:`.items` (the checked ops run as Memory calls). The checkpointer, :class:`HolomemSaver`
(LangGraph's ``BaseCheckpointSaver``), is :mod:`.saver`, over :mod:`.threads` and
:mod:`.layout` (README, "LangGraph checkpoints"). Imports LangGraph (the
``langgraph`` extra: without it, importing this package says how to install it) and
the memory API; nothing else in holomem imports this package.

How an item is stored (docs/contract.md §3, §4a, §4b):

- **Where**: a LangGraph namespace is the holomem namespace of the same strings, under
  the store's own ``namespace`` prefix (default: the root). The key is the fact's
  ``subject``; subjects belong to a namespace, so one key in two namespaces is two items.
- **What**: the value is the fact's ``metadata`` (its top-level keys are the value's,
  so LangGraph's filters are holomem's metadata filters), plus the marker key
  :data:`MARK` that tells an item from the other facts of a store shared with other
  doors. The fact's text is what search finds: the value's ``index`` fields (the
  store's ``index["fields"]``, default ``["$"]``, the whole value as JSON), or the key
  alone for ``index=False``.
- **Updates are supersessions**: a put of an existing key remembers a new fact that
  names the current one in ``supersedes`` (explicitly, so it holds whatever
  supersession policy the Memory applies). ``Memory.history`` of either id shows every
  value the key had, and ``recall(..., as_of=t)`` sees the value current at t.
  ``created_at`` is the first version's ingest time, ``updated_at`` the current one's.
- **Delete is a forget** of every version of the key (``include_chain``), purged when
  the store was built with ``purge=True`` (docs/guarantees.md §6).
- **Search**: with a query, ``Memory.recall`` restricted to the namespace prefix and
  the filter (BM25; semantic as well when the Memory has an embedder, or with
  ``index["embed"]``); without one, ``Memory.list`` in write order. ``score`` is the
  recall score (None for a listing).

Ops of one batch run in order, each seeing the ones before it; a batch is checked
whole before anything runs, but is not one transaction. The puts and deletes of every
HolomemStore of a process over one Store take turns (a put reads the current version
before it supersedes it); another process cannot write to a Store that one holds.
TTLs are not supported (``supports_ttl`` is False). A key is a subject, so a put
refuses a key that starts with ``holomem:``, the prefix of holomem's reserved subjects,
whose facts search would never list (get and delete still take one). Bad input raises
LangGraph's own ``InvalidNamespaceError`` for a namespace (``BaseStore`` raises it for
the same namespaces), otherwise a holomem ``InvalidError`` or ``LimitError`` naming what
is wrong (an embedding function's own failure aside, never another exception).
"""

from __future__ import annotations

import importlib

from holomem.errors import missing_extra

try:  # the extra's presence, checked before any part of this package imports it
    importlib.import_module("langgraph.store.base")
except ImportError as _missing:  # the langgraph extra is not installed
    raise missing_extra(_missing, "holomem.integrations.langgraph", "langgraph") \
        from _missing

from holomem.integrations.langgraph.checks import MARK
from holomem.integrations.langgraph.saver import HolomemSaver
from holomem.integrations.langgraph.store import HolomemStore

__all__ = ["MARK", "HolomemSaver", "HolomemStore"]
