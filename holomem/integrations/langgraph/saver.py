"""holomem as a LangGraph checkpointer: :class:`HolomemSaver`, a ``BaseCheckpointSaver``.

Owns: a HolomemSaver's options (the Store or Memory it writes to, the namespace its
threads live under, purge on delete, LangGraph's serializer), the reading of LangGraph's
``RunnableConfig`` (thread, checkpoint namespace, checkpoint id: checked, else
``invalid_request``), and each of BaseCheckpointSaver's methods — put, put_writes,
get_tuple, list (filter, before, limit), delete_thread, delete_for_runs, copy_thread,
prune — with their ``a*`` forms, which run the sync method in a worker thread (holomem's
calls fsync; the event loop must not wait on them). The facts themselves are
:mod:`.layout`'s, read and written by :mod:`.threads`. Imports LangGraph's checkpoint
base and the memory API.

What is stored, and what a delete erases: README, "LangGraph checkpoints".
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from holomem.api.engine import Store, validate
from holomem.api.memory.memory import Memory
from holomem.errors import InvalidError
from holomem.integrations.langgraph import layout
from holomem.integrations.langgraph.layout import Head, Place
from holomem.integrations.langgraph.threads import Threads

#: Where a HolomemSaver's threads live unless it is told otherwise. HolomemStore
#: refuses the root label "langgraph" (LangGraph reserves it), so the two never meet.
DEFAULT_NAMESPACE = ("langgraph", "checkpoints")
STRATEGIES = ("keep_latest", "delete")


class HolomemSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer whose checkpoints and pending writes are holomem facts.

    Args:
        store: the ``holomem.Store`` (or a ``Memory`` over one) to keep them in; durable
            as the store is (each put returns once fsynced under ``sync="full"``) and
            encrypted when it is. A store of its own is best: see README, "LangGraph
            checkpoints", for what sharing one costs.
        namespace: the holomem namespace every thread lives under (default
            ``("langgraph", "checkpoints")``; at most 6 strings): thread ``t``'s facts
            are in ``(*namespace, t)``.
        purge: whether ``delete_thread``, ``delete_for_runs`` and ``prune`` purge what
            they forget (default True): before they return, no file of the store holds
            the deleted checkpoints' bytes (one compaction of the store per call;
            docs/guarantees.md §6). False: forgotten at once, the bytes leave the
            journal at the next ``Store.compact(purge=True)`` or purging forget.
        serde: LangGraph's serializer (default: BaseCheckpointSaver's).

    Errors: ``invalid_request`` (not a Store or Memory, a bad namespace).
    """

    def __init__(self, store: Store | Memory, *,
                 namespace: Sequence[str] = DEFAULT_NAMESPACE, purge: bool = True,
                 serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        if isinstance(store, Memory):
            memory = store
        elif isinstance(store, Store):
            memory = Memory(store)
        else:
            raise InvalidError(f"HolomemSaver needs a holomem.Store or Memory, got "
                               f"{type(store).__name__}")
        if isinstance(namespace, str) or not isinstance(namespace, Sequence):
            raise InvalidError("namespace must be a tuple of strings")
        base = validate.namespace(list(namespace), "namespace")
        if len(base) > validate.MAX_NAMESPACE_DEPTH - 2:
            raise InvalidError(f"namespace {base!r} leaves no room for a thread and its "
                               f"checkpoint namespaces (at most "
                               f"{validate.MAX_NAMESPACE_DEPTH - 2} strings)")
        if not isinstance(purge, bool):
            raise InvalidError("purge must be True or False")
        # The saver's facts are linked only as it says (a head supersedes the newest
        # older one) and name no entities, whatever the Memory's policies: a supersession
        # policy would link the heads of a subject by its own rule.
        self.memory = memory.with_supersession("none").with_entity_extractor("none")
        self.namespace = base
        self.purge = purge
        self.threads = Threads(self.memory, base, purge=purge)

    # -- the config --------------------------------------------------------------------
    def _where(self, config: object) -> tuple[Place, str | None]:
        """The place a config names, and its checkpoint id (None when absent)."""
        if not isinstance(config, Mapping) or not isinstance(config.get("configurable"),
                                                             Mapping):
            raise InvalidError("a config must be a dict with a 'configurable' dict")
        conf = config["configurable"]
        if "thread_id" not in conf:
            raise InvalidError("config['configurable'] has no 'thread_id'")
        thread = layout.thread_label(self.namespace, conf["thread_id"])
        ns = layout.ns_label(conf.get("checkpoint_ns", "") or "")
        cid = conf.get("checkpoint_id")
        return (Place(self.namespace, thread, ns),
                None if cid is None else layout.checkpoint_id(cid))

    @staticmethod
    def _config(place: Place, cid: str) -> RunnableConfig:
        return {"configurable": {"thread_id": place.thread, "checkpoint_ns": place.ns,
                                 "checkpoint_id": cid}}

    def _thread(self, thread_id: object) -> str:
        return layout.thread_label(self.namespace, thread_id)

    # -- reading -----------------------------------------------------------------------
    def _tuple(self, place: Place, head: Head) -> CheckpointTuple:
        checkpoint = self.serde.loads_typed((head.type, self.threads.checkpoint_bytes(head)))
        metadata = self.serde.loads_typed(head.meta)
        writes = [(w.task_id, w.channel, self.serde.loads_typed((w.type, raw)))
                  for w, raw in self.threads.writes(place, head.checkpoint_id)]
        parent = None if head.parent is None else self._config(place, head.parent)
        return CheckpointTuple(self._config(place, head.checkpoint_id), checkpoint, metadata,
                               parent, writes)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (its ``checkpoint_id``, else the thread's
        newest in its ``checkpoint_ns``), with its pending writes; None if there is none.

        Errors: ``invalid_request`` (a bad config), ``corrupt`` (facts changed by hand).
        """
        place, cid = self._where(config)
        head = self.threads.latest(place) if cid is None else self.threads.head(place, cid)
        return None if head is None else self._tuple(place, head)

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None,
             limit: int | None = None) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (by checkpoint id): of every thread (``config``
        None), of one thread (every checkpoint namespace unless the config names one),
        or the one checkpoint the config names; only those before ``before``'s
        checkpoint, whose metadata holds every key of ``filter`` with that value; at
        most ``limit``.

        Errors: ``invalid_request``.
        """
        if filter is not None and not isinstance(filter, Mapping):
            raise InvalidError(f"filter must be a dict, got {type(filter).__name__}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 0):
            raise InvalidError(f"limit must be an integer >= 0 or None, got {limit!r}")
        below = None if before is None else self._where(before)[1]
        found: builtins.list[tuple[Place, Head]]
        if config is None:
            found = list(self.threads.heads_with_places())
        else:
            place, cid = self._where(config)
            places = [place] if "checkpoint_ns" in config["configurable"] \
                else self.threads.places(place.thread)
            found = [(p, h) for p in places for h in self.threads.heads(p)
                     if cid is None or h.checkpoint_id == cid]
        if below is not None:
            found = [(p, h) for p, h in found if h.checkpoint_id < below]
        found.sort(key=lambda ph: ph[1].checkpoint_id, reverse=True)
        return self._listed(found, dict(filter or {}), limit)

    def _listed(self, found: builtins.list[tuple[Place, Head]], wanted: dict[str, Any],
                limit: int | None) -> Iterator[CheckpointTuple]:
        given = 0
        for place, head in found:
            if limit is not None and given >= limit:
                return
            if wanted:
                metadata = self.serde.loads_typed(head.meta)
                if not all(k in metadata and metadata[k] == v for k, v in wanted.items()):
                    continue
            given += 1
            yield self._tuple(place, head)

    # -- writing -----------------------------------------------------------------------
    def put(self, config: RunnableConfig, checkpoint: Checkpoint,
            metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Store ``checkpoint`` in the thread and namespace of ``config``, whose
        ``checkpoint_id`` (if any) is its parent; one transaction. Returns the config
        that names it.

        Limits: the serialized checkpoint <= ``layout.MAX_VALUE_BYTES``, its serialized
        metadata <= ``layout.MAX_METADATA_BYTES``. Errors: ``invalid_request``, ``limit``.
        """
        place, parent = self._where(config)
        if not isinstance(checkpoint, Mapping) or "id" not in checkpoint:
            raise InvalidError("a checkpoint must be a dict with an 'id'")
        cid = layout.checkpoint_id(checkpoint["id"], "checkpoint['id']")
        if not isinstance(metadata, Mapping):
            raise InvalidError(f"metadata must be a dict, got {type(metadata).__name__}")
        meta = get_checkpoint_metadata(config, metadata)
        typed = self.serde.dumps_typed(checkpoint)
        meta_typed = self.serde.dumps_typed(meta)
        self.threads.put(place, cid, lambda older: layout.head_inputs(
            place, cid, parent, typed, meta_typed, meta.get("run_id"), older))
        return self._config(place, cid)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store the pending writes of task ``task_id`` for the checkpoint ``config``
        names; one transaction. A write already stored for the task and index is kept
        (a retry writes nothing); a special write (an error, an interrupt) replaces it.

        Errors: ``invalid_request`` (no checkpoint id, a bad write), ``limit``.
        """
        place, cid = self._where(config)
        if cid is None:
            raise InvalidError("put_writes needs config['configurable']['checkpoint_id']")
        if not isinstance(task_id, str) or not isinstance(task_path, str):
            raise InvalidError("task_id and task_path must be strings")
        if isinstance(writes, (str, bytes, Mapping)) or not isinstance(writes, Sequence):
            raise InvalidError("writes must be a list of (channel, value) pairs")
        todo = []
        for n, write in enumerate(writes):
            if not isinstance(write, (tuple, list)) or len(write) != 2 \
                    or not isinstance(write[0], str):
                raise InvalidError(f"writes[{n}] is not a (channel, value) pair")
            channel, value = write
            idx = WRITES_IDX_MAP.get(channel, n)
            typed = self.serde.dumps_typed(value)
            wid = place.write_id(cid, task_id, idx, layout.write_value_key(idx, typed[1]))
            todo.append((idx, layout.write_inputs(place, cid, task_id, task_path, idx,
                                                  channel, typed, wid)))
        self.threads.put_writes(place, cid, todo)

    # -- deleting and copying ----------------------------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        """Forget every checkpoint and write of the thread (its namespace), purged when
        the saver purges. Errors: ``invalid_request``."""
        self.threads.forget_threads([self._thread(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Forget the checkpoints (and their writes) whose metadata's ``run_id`` is one
        of ``run_ids``, in every thread; purged when the saver purges. Reads every
        checkpoint's head. Errors: ``invalid_request``."""
        runs = self._strings(run_ids, "run_ids")
        if not runs:
            return
        ids: builtins.list[str] = []
        for place, head in self.threads.heads_with_places():
            if head.run_id in runs:
                ids.extend(self.threads.ids(place, head))
        self.threads.forget(ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint (the whole parent chain) and write of one thread into
        another, in transactions of at most ``MAX_FACTS`` facts. Errors:
        ``invalid_request``, ``conflict`` (the target holds one of the checkpoints with
        other contents)."""
        self.threads.copy(self._thread(source_thread_id), self._thread(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"keep_latest"``: keep only each namespace's newest checkpoint (and its
        writes) of each thread; ``"delete"``: forget the threads. Purged when the saver
        purges. A graph with LangGraph's ``DeltaChannel`` needs the ancestors that
        keep_latest drops (see BaseCheckpointSaver.prune). Errors: ``invalid_request``."""
        threads = [self._thread(t) for t in self._strings(thread_ids, "thread_ids")]
        if strategy not in STRATEGIES:
            raise InvalidError(f"strategy must be one of {', '.join(STRATEGIES)}, got "
                               f"{strategy!r}")
        if strategy == "delete":
            self.threads.forget_threads(threads)
            return
        ids: builtins.list[str] = []
        for thread in threads:
            for place in self.threads.places(thread):
                heads = sorted(self.threads.heads(place), key=lambda h: h.checkpoint_id)
                for head in heads[:-1]:
                    ids.extend(self.threads.ids(place, head))
        self.threads.forget(ids)

    @staticmethod
    def _strings(values: object, what: str) -> builtins.list[str]:
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Sequence):
            raise InvalidError(f"{what} must be a list of strings")
        if any(v is None for v in values):
            raise InvalidError(f"{what} holds None")
        return builtins.list(dict.fromkeys(str(v) for v in values))

    # -- async: the sync methods in a worker thread ------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(self, config: RunnableConfig | None, *,
                    filter: dict[str, Any] | None = None, before: RunnableConfig | None = None,
                    limit: int | None = None) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: builtins.list(self.list(config, filter=filter, before=before, limit=limit)))
        for item in found:
            yield item

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata,
                   new_versions: ChannelVersions) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *,
                     strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)
