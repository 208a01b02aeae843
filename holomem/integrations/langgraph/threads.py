"""A HolomemSaver's threads as facts of its Memory: the reads and writes of
:mod:`.layout`'s facts.

Owns: :class:`Threads` — the heads of a checkpoint namespace, one head, a value joined
from its slices, a checkpoint's pending writes (sorted, a special write's latest value
only), the puts of a checkpoint and of writes (one transaction each), the ids a
checkpoint holds (to forget them), a thread's copy and the forgetting of facts or
threads (purged when the saver purges); the lock that makes the writes of every
HolomemSaver of this process over one Store take turns (a put of writes reads what is
stored before it adds); and the :class:`Tips`, each place's newest head as long as
no other write has touched the store. Imports the memory API and :mod:`.layout`.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterator, Sequence

from holomem.api.engine import Store
from holomem.api.memory.memory import MAX_FACTS, Memory
from holomem.api.memory.types import FactRecord, RememberInput
from holomem.errors import CorruptError
from holomem.integrations.langgraph import layout
from holomem.integrations.langgraph.layout import Head, Place, Write

_PAGE = 1000  # facts or namespaces read per page
_FORGET = 4096  # ids per forget call

#: The most places whose newest head :class:`Tips` remembers (past it, it starts over).
MAX_TIPS = 100_000


class Tips:
    """The newest head (id and checkpoint id, or None for none) of each place that a
    HolomemSaver of this process has looked up, over one Store: what makes
    ``get_tuple`` of the latest checkpoint one read instead of a walk of the heads.

    Valid while the store's revision (one per transaction) is :attr:`revision`: any
    write this saver did not account for (another door, a ``Memory`` call, a follower's
    refresh) changes the revision, and the next look-up starts over. A saver's own put
    keeps it valid when the put was the store's only transaction in between.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.revision = -1
        self.heads: dict[Place, tuple[str, str] | None] = {}

    def get(self, place: Place, revision: int) -> tuple[bool, tuple[str, str] | None]:
        with self.lock:
            if self.revision != revision or place not in self.heads:
                return False, None
            return True, self.heads[place]

    def found(self, place: Place, revision: int, head: Head | None) -> None:
        """``head`` was the newest of ``place`` as of (at least) ``revision``."""
        with self.lock:
            if self.revision != revision:
                self.revision, self.heads = revision, {}
            if len(self.heads) >= MAX_TIPS:
                self.heads = {}
            self.heads[place] = None if head is None else (head.id, head.checkpoint_id)

    def wrote(self, before: int, after: int, place: Place | None = None,
              head: tuple[str, str] | None = None) -> None:
        """The saver's own transaction took the store from ``before`` to ``after``;
        ``head``: the head it added to ``place`` (None: it added none)."""
        with self.lock:
            if self.revision != before or after not in (before, before + 1):
                self.revision, self.heads = -1, {}  # someone else wrote too: start over
                return
            self.revision = after
            if place is not None and head is not None and place in self.heads:
                known = self.heads[place]
                if known is None or known[1] < head[1]:
                    self.heads[place] = head

    def clear(self) -> None:
        with self.lock:
            self.revision, self.heads = -1, {}


_SHARED: weakref.WeakKeyDictionary[Store, tuple[threading.RLock, Tips]] = \
    weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def _shared(store: Store) -> tuple[threading.RLock, Tips]:
    """The writer lock and the tips every HolomemSaver of this process over ``store``
    shares."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(store, (threading.RLock(), Tips()))


class Threads:
    """The checkpoints under ``base`` in ``memory``; forgetting purges when ``purge``."""

    def __init__(self, memory: Memory, base: tuple[str, ...], *, purge: bool) -> None:
        self.memory = memory
        self.base = base
        self.purge = purge
        self.store = memory.store
        self.writing, self.tips = _shared(memory.store)

    # -- reading -------------------------------------------------------------------------
    def _subject(self, subject: str, namespace: list[str],
                 current: bool = False) -> Iterator[FactRecord]:
        """Every fact of ``subject`` at or under ``namespace`` (only the current ones
        when ``current``), in write order."""
        cursor = None
        while True:
            page = self.memory.list(cursor=cursor, limit=_PAGE, filter={"subject": subject},
                                    history="current" if current else "all",
                                    namespace=namespace)
            yield from page.facts
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def places(self, thread: str | None = None) -> list[Place]:
        """The checkpoint namespaces of ``thread`` (None: of every thread), sorted."""
        prefix = list(self.base) if thread is None else [*self.base, thread]
        out: list[Place] = []
        cursor = None
        while True:
            page = self.memory.list_namespaces(prefix=prefix, limit=_PAGE, cursor=cursor)
            for entry in page.namespaces:
                place = layout.place_of(self.base, entry.namespace)
                if place is not None:
                    out.append(place)
            if page.next_cursor is None:
                return out
            cursor = page.next_cursor

    def heads(self, place: Place | None = None, *, current: bool = False) -> list[Head]:
        """The heads of ``place`` (None: of every thread), in write order; ``current``:
        only the current ones (the newest head of each namespace is one of them)."""
        namespace = list(self.base) if place is None else place.namespace
        out = []
        for record in self._subject(layout.HEAD, namespace, current):
            head = layout.read_head(record.id, record.metadata)
            if head is not None:
                out.append(head)
        return out

    def heads_with_places(self) -> Iterator[tuple[Place, Head]]:
        """Every head of every thread, with its place."""
        for record in self._subject(layout.HEAD, list(self.base)):
            place = layout.place_of(self.base, record.namespace)
            head = layout.read_head(record.id, record.metadata)
            if place is not None and head is not None:
                yield place, head

    def head(self, place: Place, cid: str) -> Head | None:
        record = self.memory.get(place.head_id(cid))
        if record is None or record.namespace != place.namespace:
            return None
        return layout.read_head(record.id, record.metadata)

    def value(self, owner: str, parts: int, size: int, first: str | None = None) -> bytes:
        """The bytes a fact holds in its slices (``first``: the slice it holds itself,
        for a write; its parts are numbered from 1 then)."""
        pieces = [] if first is None else [first]
        for index in range(len(pieces), parts):
            fid = layout.part_id(owner, index)
            record = self.memory.get(fid)
            if record is None:
                raise CorruptError(f"part {index} of {owner!r} is missing")
            pieces.append(layout.read_part(fid, record.metadata))
        return layout.joined(pieces, size, f"the value of {owner!r}")

    def latest(self, place: Place) -> Head | None:
        """The newest checkpoint of ``place``: the one the tips name, else the greatest
        id among the current heads (then remembered in the tips)."""
        revision = self.store.revision
        known, tip = self.tips.get(place, revision)
        if known:
            if tip is None:
                return None
            head = self.head(place, tip[1])
            if head is not None and head.id == tip[0]:
                return head
        heads = self.heads(place, current=True)
        newest = max(heads, key=lambda h: h.checkpoint_id) if heads else None
        self.tips.found(place, revision, newest)
        return newest

    def checkpoint_bytes(self, head: Head) -> bytes:
        return self.value(head.id, head.parts, head.size, head.first)

    def write_records(self, place: Place, cid: str) -> list[Write]:
        """The pending writes of a checkpoint, as stored, in write order."""
        out = []
        for record in self._subject(layout.WRITES + cid, place.namespace):
            if record.namespace != place.namespace:
                continue
            write = layout.read_write(record.id, record.metadata)
            if write is not None:
                out.append(write)
        return out

    def writes(self, place: Place, cid: str) -> list[tuple[Write, bytes]]:
        """The pending writes of a checkpoint in LangGraph's order (task path, task id,
        index); of two values of one special write, the later one."""
        latest: dict[tuple[str, int], Write] = {}
        for write in self.write_records(place, cid):
            latest[(write.task_id, write.idx)] = write
        ordered = sorted(latest.values(), key=lambda w: (w.task_path, w.task_id, w.idx))
        return [(w, self.value(w.id, w.parts, w.size, w.first)) for w in ordered]

    def ids(self, place: Place, head: Head) -> list[str]:
        """Every fact id a checkpoint holds: its head, parts, writes and their parts."""
        out = [head.id, *(layout.part_id(head.id, i) for i in range(1, head.parts))]
        for write in self.write_records(place, head.checkpoint_id):
            out.append(write.id)
            out.extend(layout.part_id(write.id, i) for i in range(1, write.parts))
        return out

    # -- writing -------------------------------------------------------------------------
    def _remember(self, inputs: Sequence[RememberInput]) -> None:
        for start in range(0, len(inputs), MAX_FACTS):
            self.memory.remember_many(list(inputs[start:start + MAX_FACTS]))

    def put(self, place: Place, cid: str, make: Callable[[list[str]], list[RememberInput]]
            ) -> None:
        """A checkpoint's head and parts, ``make(supersedes)``, in one transaction; the
        head supersedes the newest head of ``place`` when that one is older (a head put
        out of order supersedes nothing: the newest stays the newest, and current). The same
        checkpoint again writes nothing; with other contents it replaces the stored
        one (its writes stay)."""
        with self.writing:
            record = self.memory.get(place.head_id(cid))
            stored = None if record is None or record.namespace != place.namespace \
                else layout.read_head(record.id, record.metadata)
            if record is not None and stored is not None:
                if record.metadata == make([])[0].metadata:
                    return  # a retry: nothing to write
                self.tips.clear()
                self.memory.forget({"ids": [stored.id, *(layout.part_id(stored.id, i)
                                                         for i in range(1, stored.parts))]})
            newest = self.latest(place)
            older = [newest.id] if newest is not None and newest.checkpoint_id < cid else []
            before = self.store.revision
            self.memory.remember_many(make(older))
            self.tips.wrote(before, self.store.revision, place, (place.head_id(cid), cid))

    def put_writes(self, place: Place, cid: str,
                   writes: list[tuple[int, list[RememberInput]]]) -> None:
        """Pending writes, each ``(index, its facts)``, in one transaction: a write of
        an index >= 0 already stored for the task is kept as it is; a special write
        (index < 0) replaces the stored one."""
        with self.writing:
            stored = self.write_records(place, cid)
            have = {(w.task_id, w.idx) for w in stored}
            todo: list[RememberInput] = []
            replaced: list[str] = []
            for idx, facts in writes:
                meta = facts[0].metadata or {}
                task = str(meta.get("task_id"))
                if idx >= 0 and (task, idx) in have:
                    continue
                if idx < 0:
                    replaced.extend(w.id for w in stored
                                    if (w.task_id, w.idx) == (task, idx) and w.id != facts[0].id)
                    parts = [w for w in stored if w.id in replaced]
                    replaced.extend(layout.part_id(w.id, i) for w in parts
                                    for i in range(1, w.parts))
                todo.extend(facts)
            if todo:
                before = self.store.revision
                self._remember(todo)
                self.tips.wrote(before, self.store.revision)
            if replaced:  # after the new value is durable: a crash between keeps both,
                self.forget(replaced, purge=False)  # and a read takes the later one

    def copy(self, source: str, target: str) -> None:
        """Every checkpoint and write of thread ``source`` into thread ``target``."""
        with self.writing:
            inputs: list[RememberInput] = []
            for place in self.places(source):
                dest = Place(self.base, target, place.ns)
                previous: list[str] = []
                for head in sorted(self.heads(place), key=lambda h: h.checkpoint_id):
                    cid = head.checkpoint_id
                    made = layout.head_inputs(
                        dest, cid, head.parent, (head.type, self.checkpoint_bytes(head)),
                        head.meta, head.run_id, previous)
                    inputs.extend(made)
                    previous = [str(made[0].id)]
                    for write, raw in self.writes(place, cid):
                        value = layout.write_value_key(write.idx, raw)
                        inputs.extend(layout.write_inputs(
                            dest, cid, write.task_id, write.task_path, write.idx,
                            write.channel, (write.type, raw),
                            dest.write_id(cid, write.task_id, write.idx, value)))
            self._remember(inputs)
            self.tips.clear()

    def forget(self, ids: list[str], *, purge: bool | None = None) -> None:
        """Forget ``ids`` (purged when the saver purges, unless ``purge`` says)."""
        purge = self.purge if purge is None else purge
        if not ids:
            return
        with self.writing:
            self.tips.clear()
            chunks = [ids[i:i + _FORGET] for i in range(0, len(ids), _FORGET)]
            for n, chunk in enumerate(chunks):
                # One purge, after the last chunk, compacts away every chunk's facts.
                self.memory.forget({"ids": chunk}, purge=purge and n == len(chunks) - 1)

    def forget_threads(self, threads: Sequence[str]) -> None:
        """Forget every fact of ``threads`` (their namespaces), one purge at the end."""
        with self.writing:
            self.tips.clear()
            held = [t for t in dict.fromkeys(threads) if self.places(t)]
            for n, thread in enumerate(held):
                self.memory.forget({"namespace": layout.namespace_of_thread(self.base, thread)},
                                   purge=self.purge and n == len(held) - 1)
