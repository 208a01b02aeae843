"""``python -m holomem.crashtest``: the crash-injection harness (SPEC §6, issue 6).

Owns: the crash workload, the fault kinds, the power-loss model of the disk and the
checks run after every crash. Imports anything (a tool, like :mod:`holomem.fsck`).

How a run goes:

1. A child process (``python -m holomem.crashtest --child ...``) runs a fixed,
   deterministic workload over the memory API (:func:`plan`, a :class:`ManualClock`):
   single remembers, ``remember_many`` batches, supersessions, forgets, two purges,
   enough writes to rotate 4 KiB journal segments, a compaction, and a reopen that
   has to cut a torn tail. Before each step it writes a ``begin`` line and after the
   step returns an ``ack`` line (JSON, one ``write()`` to an ``O_APPEND`` file), so
   the parent knows exactly which steps were acknowledged and which one was running.
2. The child runs with ``HOLOMEM_CRASH_AT=point:N`` and aborts the N-th time it
   reaches ``point`` (:mod:`holomem.log.crashpoints`). The parent checks that it died
   of SIGABRT at that very point and hit (``HOLOMEM_CRASH_TRACE``); a child that
   finishes was "not reached", never a pass.
3. The fault kinds:

   - ``crash``: a process crash. What the child wrote is in the page cache, so the
     directory is checked as it was left.
   - ``power``: a power cut. The child also runs with ``HOLOMEM_FAULT_LOG`` and
     records the bytes of every write beside it (:class:`_Shim`); the parent replays
     both into a model of the disk (:class:`_Disk`) that knows each file's content at
     its last fsync and each directory's entries at its last sync, and builds what a
     power cut could leave (leveldb's ``fault_injection_test``, SQLite's ``test6.c``):
     per file, with a seeded RNG, the bytes written since its last fsync are dropped,
     cut at a random point, or garbled (random bytes over some unsynced writes, the
     others kept or dropped); per directory, the creates, renames and unlinks since
     its last sync are kept, undone, or kept in part (a prefix or any subset). A
     write is assumed not to damage bytes outside its own range (SQLite's "powersafe
     overwrite"). The model is first checked against the real directory (with every
     write applied it must equal it byte for byte), and the faults are checked to
     have landed (the files written are the ones intended; which ones differ from
     what the process left is reported, or that nothing was unsynced).
   - ``recover``: a process crash, then a crash of the recovery (the next open) at
     every point it reaches, the first and the last time; each is checked.
4. The checks (:func:`_verify`): the store opens with :meth:`holomem.Store.open` and
   no manual repair; fsck finds nothing right after the open (before any read, which
   would heal a bad text-segment record); every acknowledged remember is there with
   its text, every acknowledged forget is gone (``get`` is None, recall never
   returns it), every acknowledged supersession link holds (``get``, ``history``,
   status) and no other appears; no batch is there in part; the step that was
   running is wholly there or wholly absent; after an acknowledged purge its marker
   is in no file; no text segment holds the text of a forgotten fact; an encrypted
   store holds no plaintext; and after closing, fsck reports the store clean.

The matrix is every registered crash point, times a few hit counts (1, 2, 3, the
middle and the last time the uncrashed workload reaches it; ``--soak``: every one),
times the fault kinds, for a plain or encrypted store in ``full`` or ``batch`` sync
mode. Power cuts are seeded from ``--seed`` (printed); a failing run is replayed with
``--point P --hits N --fault F --seed S``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import glob
import json
import logging
import multiprocessing
import os
import random
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import zstandard

import holomem
from holomem import ForgetScope, ManualClock, Memory, MemoryConfig, RememberInput, Store
from holomem import fsck as fsck_mod
from holomem.api.documents import TEXT_FILE
from holomem.events import DocumentAdded, DocumentReplaced, PurgeRequested
from holomem.events import decode as decode_event
from holomem.log import Journal, crashpoints, fs
from holomem.log.envelope import Envelope, OpenFailed
from holomem.log.format import (
    AAD,
    FRAME_FLAG_ENCRYPTED,
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    FRAME_KIND_TRANSACTION,
    SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC,
)
from holomem.log.recordfile import FLAG_SEALED, RECORD, RECORD_AAD, RECORD_SIZE
from holomem.log.recordfile import HEADER_SIZE as RECORD_HEADER_SIZE
from holomem.log.recordfile import MAGIC as RECORD_MAGIC

#: Journal segment size of the workload's store: small, so that it rotates.
SEGMENT_SIZE = 4096
#: The key of the encrypted variant.
KEY = bytes(range(1, 33))
#: The workload's clock: step i runs at BASE_MS + i * STEP_MS.
BASE_MS = 1_700_000_000_000
STEP_MS = 60_000
#: The checker's clock: long after every step, so that every link is in effect.
CHECK_MS = BASE_MS + 10**9
MARKERS = ("zqx-purge-marker-alpha-7f3a", "zqx-purge-marker-beta-91c2")
CONFIG = MemoryConfig(supersession="latest-by-subject")
#: crash: the process aborts; power: a power cut; recover: the process aborts, then the
#: recovery (the next open) aborts too, at every point it reaches; restart: the process
#: aborts, the next one opens the store and acknowledges more writes, then the power fails.
FAULTS = ("crash", "power", "recover", "restart")
#: What a plain run tries (``recover`` runs a dozen children per case: ask for it).
DEFAULT_FAULTS = ("crash", "power")
SYNC_MODES = ("full", "batch")
CHILD_TIMEOUT = 120.0

_VOCAB = (
    "amber basin cedar delta ember fjord glacier harbor island juniper kestrel lagoon "
    "meadow nectar orchard pebble quarry ravine saffron tundra umber valley willow "
    "yarrow zephyr anchor beacon canyon dune estuary falcon granite heron inlet jasper "
    "kelp lantern marsh nimbus otter prairie quartz reef summit thicket upland vortex"
).split()


# -- the workload ---------------------------------------------------------------------
def _text(i: int) -> str:
    words = [_VOCAB[(i * 7 + k * 11 + k * k) % len(_VOCAB)] for k in range(14)]
    return f"note {i:03d} records {' '.join(words)} item{i:03d}"


def _fact(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"f{i:03d}", "text": _text(i), **extra}


def _batch(name: str, facts: list[dict[str, Any]]) -> dict[str, Any]:
    for f in facts:
        f["metadata"] = {"batch": name, "of": len(facts)}
    return {"kind": "remember_many", "batch": name, "facts": facts}


def plan() -> list[dict[str, Any]]:
    """The workload's steps, the same in the child and the parent."""
    steps: list[dict[str, Any]] = [{"kind": "open"}]

    def single(fact: dict[str, Any]) -> None:
        steps.append({"kind": "remember", "facts": [fact]})

    def chain(who: str, subject: str, places: Sequence[str]) -> None:
        for n, place in enumerate(places, start=1):
            single({"id": f"{who}-{n}", "subject": subject,
                    "text": f"{who.title()} lives in {place} now, version {n} of {who}"})

    for i in range(1, 7):
        single(_fact(i))
    single({"text": _text(7)})  # an id derived from the content
    single(_fact(1))  # a retry: same id, same payload, nothing written
    steps.append(_batch("b1", [_fact(i, id=f"b1-{i}") for i in range(8, 12)]))
    chain("alice", "alice/city", ("Paris", "Berlin", "Rome"))
    steps.append({"kind": "forget", "ids": ["f003"]})
    single({"id": "p1", "text": f"secret {MARKERS[0]} to be purged"})
    steps.append({"kind": "forget", "ids": ["p1"], "purge": True, "marker": MARKERS[0]})
    for i in range(12, 30):  # enough to rotate segments
        single(_fact(i))
    steps.append(_batch("b2", [_fact(i) for i in range(30, 34)] + [
        {"id": "bob-1", "subject": "bob/job", "text": "Bob works as a baker in town"},
        {"id": "bob-2", "subject": "bob/job", "text": "Bob works as a pilot for an airline"},
    ]))
    steps.append({"kind": "forget", "ids": ["alice-2"]})  # a middle version: re-linked
    steps.append({"kind": "compact"})
    for i in range(34, 38):
        single(_fact(i))
    steps.append(_batch("b3", [_fact(i) for i in range(38, 41)]))
    steps.append({"kind": "forget", "subject": "bob/job"})
    steps.append({"kind": "reopen_torn"})
    for i in range(41, 45):
        single(_fact(i))
    steps.append(_batch("b4", [_fact(i) for i in range(45, 48)]))
    steps.append({"kind": "forget", "ids": ["f010", "b1-9"]})
    single({"id": "p2", "text": f"another secret {MARKERS[1]} to be purged"})
    steps.append({"kind": "forget", "ids": ["p2"], "purge": True, "marker": MARKERS[1]})
    chain("carol", "carol/city", ("Oslo", "Lima"))
    for i in range(48, 51):
        single(_fact(i))
    steps.append({"kind": "close"})
    return steps


#: What the process started after a crash writes (fault kind ``restart``).
RESUMED: list[dict[str, Any]] = [
    {"id": f"r{i}", "text": f"written after the restart, fact {i} of three"} for i in range(1, 4)]


def resume_workload(store_path: str, acks_path: str, key: bytes | None, sync: str,
                    create: bool) -> None:
    """After a crash: open the store, acknowledge a few remembers, and die (the power
    fails right after, so nothing may be synced on the way out)."""
    acks = _Acks(acks_path)
    store = Store.open(store_path, key=key, segment_size=SEGMENT_SIZE, sync=sync,
                       create=create)
    memory = Memory(store, CONFIG, clock=ManualClock(BASE_MS + 1000 * STEP_MS))
    for fact in RESUMED:
        memory.remember(RememberInput(**fact))
        acks.put({"t": "ack", "id": fact["id"]})
    os.abort()


class _Acks:
    """The child's side of the acknowledgement channel: one JSON line per event."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def put(self, record: dict[str, Any]) -> None:
        # One write() per line: once it returns, the line is in the page cache and
        # survives the process (the power-loss model leaves this file alone: it
        # stands for what the client saw, not for the store's disk).
        os.write(self._fd, json.dumps(record, sort_keys=True).encode() + b"\n")


def _result(value: object) -> Any:
    if isinstance(value, list):
        return [_result(v) for v in value]
    if isinstance(value, holomem.Remembered):
        return {"id": value.id, "created": value.created, "superseded": list(value.superseded),
                "ingest_time": value.ingest_time}
    if isinstance(value, holomem.ForgetReport):
        return {"removed": list(value.removed), "purged": value.purged,
                "relinked": [[r.successor, r.predecessor] for r in value.relinked]}
    return value


def _torn_tail(store_path: str) -> None:
    """Append zeros to the live generation's last segment: the remains of a torn write."""
    last = sorted(glob.glob(os.path.join(store_path, "gen-*[0-9]", "seg-*.hlj")))[-1]
    fd = fs.open_rw(last)
    try:
        fs.write_at(fd, bytes(40), os.fstat(fd).st_size, last)
        fs.sync(fd, last)
    finally:
        fs.close(fd)


def run_workload(store_path: str, acks_path: str, key: bytes | None, sync: str = "full"
                 ) -> None:
    """The child's workload (also usable in-process, e.g. by the harness's own tests)."""
    acks = _Acks(acks_path)
    acks.put({"t": "registry", "points": sorted(crashpoints.REGISTRY)})
    clock = ManualClock(BASE_MS)
    store: Store | None = None
    memory: Memory | None = None

    def reopen() -> tuple[Store, Memory]:
        s = Store.open(store_path, key=key, segment_size=SEGMENT_SIZE, sync=sync)
        return s, Memory(s, CONFIG, clock=clock)

    for i, step in enumerate(plan()):
        clock.set(BASE_MS + i * STEP_MS)
        acks.put({"t": "begin", "i": i, "kind": step["kind"]})
        kind = step["kind"]
        result: Any = None
        if kind == "open":
            parent = os.path.dirname(store_path)
            fs.mkdir(store_path)  # through the file layer, so the fault log sees it
            fs.sync_dir(parent)
            store, memory = reopen()
        else:
            assert store is not None and memory is not None
            if kind == "remember":
                result = [memory.remember(RememberInput(**step["facts"][0]))]
            elif kind == "remember_many":
                result = memory.remember_many([RememberInput(**f) for f in step["facts"]])
            elif kind == "forget":
                scope = (ForgetScope(subject=step["subject"]) if "subject" in step
                         else ForgetScope(ids=step["ids"]))
                result = memory.forget(scope, purge=step.get("purge", False))
            elif kind == "compact":
                store.compact()
            elif kind == "reopen_torn":
                store.close()
                _torn_tail(store_path)
                store, memory = reopen()
            elif kind == "close":
                store.close()
            else:  # pragma: no cover - plan() and this function are written together
                raise AssertionError(kind)
        acks.put({"t": "ack", "i": i, "result": _result(result)})
    acks.put({"t": "done"})


# -- the power-loss shim (child side) -------------------------------------------------
#: kind, inode, offset (or length for a truncate), data length; the data follows.
_SHIM = struct.Struct("<cQQQ")


class _Shim:
    """Records, beside ``HOLOMEM_FAULT_LOG``, what that log does not hold: the inode
    every fd-based operation touched and the bytes of every write.

    The fault log gives the order (and says when an fsync really returned); this
    gives the data. The k-th ``write`` line of the log is the k-th ``w`` record here,
    and so on per kind: the parent checks that they agree.
    """

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def _put(self, kind: bytes, fd: int, offset: int, data: bytes = b"") -> None:
        ino = os.fstat(fd).st_ino
        os.write(self._fd, _SHIM.pack(kind, ino, offset, len(data)) + data)

    def install(self) -> None:
        """Route the file layer's creates, writes, truncates and syncs through the shim."""
        for name, fn in self.functions().items():
            setattr(fs, name, fn)

    def functions(self) -> dict[str, Callable[..., Any]]:
        """The replacements of :mod:`holomem.log.fs` functions, by name."""
        create, write_at, truncate, sync = fs.create, fs.write_at, fs.truncate, fs.sync

        def shim_create(path: str) -> int:
            fd = create(path)
            self._put(b"c", fd, 0)
            return fd

        def shim_write_at(fd: int, data: bytes | memoryview, offset: int, path: str) -> None:
            self._put(b"w", fd, offset, bytes(data))
            write_at(fd, data, offset, path)

        def shim_truncate(fd: int, length: int, path: str) -> None:
            self._put(b"t", fd, length)
            truncate(fd, length, path)

        def shim_sync(fd: int, path: str) -> None:
            self._put(b"s", fd, 0)  # an intent: the fault log says whether it returned
            sync(fd, path)

        return {"create": shim_create, "write_at": shim_write_at, "truncate": shim_truncate,
                "sync": shim_sync}


def _child(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m holomem.crashtest --child")
    ap.add_argument("--child", action="store_true")
    ap.add_argument("store")
    ap.add_argument("acks")
    ap.add_argument("--key-hex", default="")
    ap.add_argument("--shim", default="")
    ap.add_argument("--sync", default="full")
    ap.add_argument("--recover", action="store_true",
                    help="only open the store (its recovery) and close it")
    ap.add_argument("--resume", action="store_true",
                    help="open the store, remember a few facts, abort (see RESUMED)")
    ap.add_argument("--create", action="store_true",
                    help="with --recover or --resume: the creation of the store was not "
                    "acknowledged")
    args = ap.parse_args(argv)
    # os.abort() must not write a core file per run.
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if args.shim:
        _Shim(args.shim).install()
    key = bytes.fromhex(args.key_hex) or None
    if args.recover:
        Store.open(args.store, key=key, segment_size=SEGMENT_SIZE, sync=args.sync,
                   create=args.create).close()
        return 0
    if args.resume:
        resume_workload(args.store, args.acks, key, args.sync, args.create)
    run_workload(args.store, args.acks, key, args.sync)
    return 0


# -- the disk model for power loss (parent side) --------------------------------------
@dataclasses.dataclass(eq=False)
class _File:
    cur: bytearray = dataclasses.field(default_factory=bytearray)
    durable: bytes = b""
    #: operations since the last fsync: (offset, data) for a write, (length, None)
    #: for a truncate.
    pending: list[tuple[int, bytes | None]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class _Dir:
    entries: dict[str, _File | _Dir] = dataclasses.field(default_factory=dict)
    durable: dict[str, _File | _Dir] = dataclasses.field(default_factory=dict)
    #: entry operations since the directory's last sync, in order:
    #: ("add", name, node), ("del", name, node), ("mv", src, dst, node).
    pending: list[tuple[Any, ...]] = dataclasses.field(default_factory=list)


def _apply(base: bytes | bytearray, ops: Sequence[tuple[int, bytes | None]]) -> bytearray:
    out = bytearray(base)
    for offset, data in ops:
        if data is None:
            del out[offset:]
            out.extend(bytes(offset - len(out)))
        else:
            if offset > len(out):
                out.extend(bytes(offset - len(out)))
            out[offset : offset + len(data)] = data
    return out


def _apply_dir(base: dict[str, _File | _Dir], ops: Sequence[tuple[Any, ...]]
               ) -> dict[str, _File | _Dir]:
    out = dict(base)
    for op in ops:
        if op[0] == "add":
            out[op[1]] = op[2]
        elif op[0] == "del":
            out.pop(op[1], None)
        else:
            out.pop(op[1], None)
            out[op[2]] = op[3]
    return out


class ModelError(Exception):
    """The logs do not describe what is on the disk: the harness itself is wrong."""


class _Disk:
    """The store's files as a power cut would see them, rebuilt from the two logs."""

    def __init__(self, base: str, fault_log: str, shim_log: str) -> None:
        self.base = os.path.abspath(base)
        self.root = _Dir()
        self._by_ino: dict[int, _File] = {}
        #: per process (an ``epoch`` line / ``e`` record separates two): kind -> records
        self._epochs: list[dict[bytes, list[tuple[int, int, bytes]]]] = []
        self._epoch = 0
        self._next: dict[bytes, int] = {}
        self._read_shim(shim_log)
        with open(fault_log, encoding="utf-8") as f:
            for n, line in enumerate(f, start=1):
                try:
                    self._op(line.rstrip("\n").split("\t"))
                except (KeyError, IndexError, ValueError, AssertionError) as exc:
                    raise ModelError(f"fault log line {n} ({line.strip()!r}): {exc!r}") from exc
        self._end_epoch()
        if self._epoch != len(self._epochs):
            raise ModelError("the shim and the fault log count different processes")

    def _end_epoch(self) -> None:
        """Every record of the process was matched by a line (but the last sync, which
        may have been cut short by the crash)."""
        records = self._epochs[self._epoch]
        left = {k.decode(): len(v) - self._next.get(k, 0) for k, v in records.items()}
        if any(n for k, n in left.items() if k != "s") or left.get("s", 0) > 1:
            raise ModelError(f"the shim recorded operations the fault log lacks: {left}")
        self._epoch += 1
        self._next = {}

    def _read_shim(self, path: str) -> None:
        with open(path, "rb") as f:
            raw = f.read()
        at = 0
        self._epochs.append({})
        while at < len(raw):
            kind, ino, offset, length = _SHIM.unpack_from(raw, at)
            at += _SHIM.size
            if kind == b"e":
                self._epochs.append({})
            else:
                self._epochs[-1].setdefault(kind, []).append((ino, offset, raw[at : at + length]))
            at += length

    def _take(self, kind: bytes) -> tuple[int, int, bytes]:
        n = self._next.get(kind, 0)
        self._next[kind] = n + 1
        return self._epochs[self._epoch][kind][n]

    def _parent(self, path: str) -> tuple[_Dir, str]:
        rel = os.path.relpath(path, self.base)
        assert not rel.startswith(".."), f"{path} is outside the run directory"
        parts = rel.split(os.sep)
        node: _File | _Dir = self.root
        for part in parts[:-1]:
            assert isinstance(node, _Dir)
            node = node.entries[part]
        assert isinstance(node, _Dir)
        return node, parts[-1]

    def _lookup(self, path: str) -> _File | _Dir:
        if os.path.abspath(path) == self.base:
            return self.root
        parent, name = self._parent(path)
        return parent.entries[name]

    def _op(self, f: list[str]) -> None:
        kind = f[0]
        if kind == "epoch":  # another process starts (the parent wrote this line)
            self._end_epoch()
        elif kind == "create":
            ino, _, _ = self._take(b"c")
            parent, name = self._parent(f[1])
            node = _File()
            self._by_ino[ino] = node
            parent.entries[name] = node
            parent.pending.append(("add", name, node))
        elif kind == "write":
            ino, offset, data = self._take(b"w")
            assert offset == int(f[2]) and len(data) == int(f[3]), "shim and log disagree"
            file = self._by_ino[ino]
            file.cur = _apply(file.cur, [(offset, data)])
            file.pending.append((offset, data))
        elif kind == "truncate":
            ino, length, _ = self._take(b"t")
            assert length == int(f[2]), "shim and log disagree"
            file = self._by_ino[ino]
            file.cur = _apply(file.cur, [(length, None)])
            file.pending.append((length, None))
        elif kind == "sync":
            ino, _, _ = self._take(b"s")
            file = self._by_ino[ino]
            file.durable = bytes(file.cur)
            file.pending.clear()
        elif kind == "dirsync":
            d = self._lookup(f[1])
            assert isinstance(d, _Dir)
            d.durable = dict(d.entries)
            d.pending.clear()
        elif kind == "mkdir":
            parent, name = self._parent(f[1])
            new = _Dir()
            parent.entries[name] = new
            parent.pending.append(("add", name, new))
        elif kind in ("unlink", "rmdir"):
            parent, name = self._parent(f[1])
            gone = parent.entries.pop(name)
            parent.pending.append(("del", name, gone))
        elif kind == "rename":
            src_dir, src = self._parent(f[1])
            dst_dir, dst = self._parent(f[2])
            assert src_dir is dst_dir, "a rename across directories"
            moved = src_dir.entries.pop(src)
            src_dir.entries[dst] = moved
            src_dir.pending.append(("mv", src, dst, moved))
        else:
            raise ValueError(f"unknown operation {kind!r}")

    # -- what is on the disk ---------------------------------------------------------
    def current(self, top: str) -> dict[str, bytes | None]:
        """Every path under ``top`` with all writes applied (None for a directory)."""
        out: dict[str, bytes | None] = {}
        node = self._lookup(top)

        def walk(d: _Dir, rel: str) -> None:
            for name in sorted(d.entries):
                child = d.entries[name]
                path = os.path.join(rel, name) if rel else name
                if isinstance(child, _Dir):
                    out[path] = None
                    walk(child, path)
                else:
                    out[path] = bytes(child.cur)

        assert isinstance(node, _Dir)
        walk(node, "")
        return out

    def power_cut(self, top: str, rng: random.Random
                  ) -> tuple[dict[str, bytes | None] | None, list[str]]:
        """What a power cut could leave under ``top`` (None: not even ``top``), and a
        line per fault injected."""
        notes: list[str] = []
        files: dict[int, bytes] = {}
        dirs: dict[int, dict[str, _File | _Dir]] = {}
        out: dict[str, bytes | None] = {}

        def file_after(node: _File, path: str) -> bytes:
            if id(node) in files:
                return files[id(node)]
            content = bytes(node.cur)
            writes = [op for op in node.pending if op[1]]
            if node.pending:
                mode = rng.choice(("drop", "truncate", "garble")) if writes else "drop"
                if mode == "drop":
                    content = node.durable
                    notes.append(f"{path}: dropped {len(node.pending)} unsynced operations "
                                 f"({len(node.cur)} -> {len(content)} bytes)")
                elif mode == "truncate":
                    total = sum(len(op[1] or b"") for op in writes)
                    cut = rng.randrange(total)
                    kept: list[tuple[int, bytes | None]] = []
                    seen = 0
                    for op in node.pending:
                        if op[1] is None:
                            kept.append(op)
                            continue
                        if seen + len(op[1]) > cut:
                            if cut > seen:  # a torn write: its first bytes landed
                                kept.append((op[0], op[1][: cut - seen]))
                            break
                        kept.append(op)
                        seen += len(op[1])
                    content = bytes(_apply(node.durable, kept))
                    notes.append(f"{path}: unsynced writes cut after {cut} of {total} bytes")
                else:
                    garbled = rng.choice([i for i, op in enumerate(node.pending) if op[1]])
                    ops: list[tuple[int, bytes | None]] = []
                    counts = {"kept": 0, "dropped": 0, "garbled": 0}
                    for i, op in enumerate(node.pending):
                        if op[1] is None:
                            ops.append(op)
                            continue
                        fate = "garbled" if i == garbled else rng.choice(tuple(counts))
                        counts[fate] += 1
                        if fate == "kept":
                            ops.append(op)
                        elif fate == "garbled":
                            ops.append((op[0], rng.randbytes(len(op[1]))))
                    content = bytes(_apply(node.durable, ops))
                    notes.append(f"{path}: unsynced writes " + ", ".join(
                        f"{v} {k}" for k, v in counts.items()))
                if content == bytes(node.cur):
                    notes[-1] += " (no effect: the bytes were already there)"
            files[id(node)] = content
            return content

        def dir_after(node: _Dir, path: str) -> dict[str, _File | _Dir]:
            if id(node) in dirs:
                return dirs[id(node)]
            entries = dict(node.entries)
            if node.pending:
                n = len(node.pending)
                mode = rng.choice(("keep", "undo", "prefix", "subset"))
                if mode == "undo":
                    chosen = []
                elif mode == "prefix":
                    chosen = node.pending[: rng.randrange(n)]
                elif mode == "subset":
                    keep = [rng.random() < 0.5 for _ in range(n)]
                    if all(keep):
                        keep[rng.randrange(n)] = False
                    chosen = [op for op, k in zip(node.pending, keep, strict=True) if k]
                else:
                    chosen = list(node.pending)
                entries = _apply_dir(node.durable, chosen)
                lost = [" ".join(str(x) for x in op[:-1]) for op in node.pending
                        if op not in chosen]
                notes.append(f"{path or '.'}/: {n} unsynced entry operations, "
                             f"{'lost: ' + '; '.join(lost) if lost else 'all kept'}")
            dirs[id(node)] = entries
            return entries

        def walk(d: _Dir, rel: str) -> None:
            entries = dir_after(d, rel)
            for name in sorted(entries):
                child = entries[name]
                path = os.path.join(rel, name) if rel else name
                if isinstance(child, _Dir):
                    out[path] = None
                    walk(child, path)
                else:
                    out[path] = file_after(child, path)

        # Down from the run directory: the store directory itself may not survive.
        node: _File | _Dir = self.root
        for part in os.path.relpath(top, self.base).split(os.sep):
            assert isinstance(node, _Dir)
            entries = dir_after(node, "..")
            if part not in entries:
                notes.append(f"the store directory {part} vanished")
                return None, notes
            node = entries[part]
        assert isinstance(node, _Dir)
        walk(node, "")
        return out, notes


def _tree(top: str, skip: Sequence[str] = ("LOCK",)) -> dict[str, bytes | None]:
    """Every path under ``top`` with its bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for root, dirnames, files in os.walk(top):
        rel = os.path.relpath(root, top)
        for name in dirnames:
            out[os.path.normpath(os.path.join(rel, name))] = None
        for name in files:
            path = os.path.normpath(os.path.join(rel, name))
            if path in skip:
                continue
            with open(os.path.join(root, name), "rb") as f:
                out[path] = f.read()
    return out


def _materialize(tree: dict[str, bytes | None], top: str) -> None:
    os.makedirs(top, mode=0o700)
    for path in sorted(tree):
        content = tree[path]
        if content is None:
            os.makedirs(os.path.join(top, path), mode=0o700, exist_ok=True)
        else:
            with open(os.path.join(top, path), "wb") as f:
                f.write(content)


def _describe_diff(a: dict[str, bytes | None], b: dict[str, bytes | None],
                   names: tuple[str, str] = ("expected", "found")) -> list[str]:
    out = []
    for path in sorted(set(a) | set(b)):
        if path not in b:
            out.append(f"{path}: {names[0]} only")
        elif path not in a:
            out.append(f"{path}: {names[1]} only")
        elif a[path] != b[path]:
            out.append(f"{path}: content differs ({len(a[path] or b'')} vs "
                       f"{len(b[path] or b'')} bytes)")
    return out


def power_loss(run_dir: str, store: str, target: str, seed: int) -> list[str]:
    """Build in ``target`` what a power cut could have left of ``store``; return notes.

    Raises :class:`ModelError` if the model does not match the disk, or if an
    injected fault did not land.
    """
    disk = _Disk(run_dir, os.path.join(run_dir, "fault.log"), os.path.join(run_dir, "fault.data"))
    real = _tree(store)
    modeled = disk.current(store)
    diff = _describe_diff(modeled, real, ("in the model", "on the disk"))
    if diff:
        raise ModelError("the fault model does not match the disk: " + "; ".join(diff[:5]))
    cut, notes = disk.power_cut(store, random.Random(seed))
    after = cut if cut is not None else {}
    if cut is not None:
        _materialize(cut, target)
        if os.path.exists(os.path.join(store, "LOCK")):
            open(os.path.join(target, "LOCK"), "wb").close()
    # Did it land? The files on disk are the ones intended, and they differ from
    # what the crashed process left wherever a fault had an effect.
    landed = _tree(target)
    if landed != after:
        raise ModelError("the power-loss state was not written as intended: "
                         + "; ".join(_describe_diff(after, landed)[:5]))
    changed = _describe_diff(real, landed)
    if not notes:
        notes.append("nothing unsynced: every write and entry was already durable")
    elif not changed:
        notes.append("no effect: the faults changed no file (the bytes were already there)")
    else:
        notes.append(f"{len(changed)} paths differ from what the process left")
    return notes


# -- the checks -----------------------------------------------------------------------
@dataclasses.dataclass
class _Expected:
    """What the store must hold once the acknowledged steps are applied."""

    facts: dict[str, str] = dataclasses.field(default_factory=dict)
    links: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    removed: set[str] = dataclasses.field(default_factory=set)
    purged: list[str] = dataclasses.field(default_factory=list)
    opened: bool = False

    def apply(self, step: dict[str, Any], result: Any) -> None:
        kind = step["kind"]
        if kind == "open":
            self.opened = True
        elif kind in ("remember", "remember_many"):
            for inp, r in zip(step["facts"], result, strict=True):
                if not r["created"]:
                    continue
                self.facts[r["id"]] = inp["text"]
                self.links.update((r["id"], p) for p in r["superseded"])
        elif kind == "forget":
            gone = set(result["removed"])
            for fid in gone:
                self.facts.pop(fid, None)
            self.removed |= gone
            self.links = {(s, p) for s, p in self.links if s not in gone and p not in gone}
            self.links.update((s, p) for s, p in result["relinked"])
            if step.get("purge"):
                self.purged.append(step["marker"])


def _expected(steps: list[dict[str, Any]], results: list[Any], upto: int) -> _Expected:
    e = _Expected()
    for i in range(upto):
        e.apply(steps[i], results[i])
    return e


@dataclasses.dataclass
class _Observed:
    """What the reopened store holds, read through the memory API."""

    texts: dict[str, str]
    links: set[tuple[str, str]]
    #: fact id -> the batch its metadata tags it with
    batches: dict[str, str]
    problems: list[str]


def _observe(memory: Memory) -> _Observed:
    texts: dict[str, str] = {}
    links: set[tuple[str, str]] = set()
    back: set[tuple[str, str]] = set()
    batches: dict[str, str] = {}
    problems: list[str] = []
    for fid in memory.store.ids():
        rec = memory.get(fid)
        if rec is None:
            problems.append(f"{fid} is listed by the store but get() returns None")
            continue
        texts[fid] = rec.text
        if rec.metadata and "batch" in rec.metadata:
            batches[fid] = rec.metadata["batch"]
        links.update((fid, p) for p in rec.supersedes)
        back.update((s, fid) for s in rec.superseded_by)
        superseded = bool(rec.superseded_by)
        want = "superseded" if superseded else "current"
        if rec.status != want:
            problems.append(f"{fid} has status {rec.status}, {want} expected")
    if links != back:
        problems.append(f"supersedes and superseded_by disagree: {sorted(links ^ back)}")
    for s, p in sorted(links):
        chain = [h.id for h in memory.history(s)]
        if p not in chain:
            problems.append(f"history({s}) lacks {p}, which it supersedes")
    return _Observed(texts, links, batches, problems)


def _compare(e: _Expected, o: _Observed) -> list[str]:
    out = []
    for fid in sorted(set(e.facts) - set(o.texts)):
        out.append(f"acknowledged fact {fid} is missing")
    for fid in sorted(set(o.texts) - set(e.facts)):
        what = "an acknowledged forget" if fid in e.removed else "nothing acknowledged"
        out.append(f"fact {fid} is present, but {what} says it should not be")
    for fid in sorted(set(e.facts) & set(o.texts)):
        if e.facts[fid] != o.texts[fid]:
            out.append(f"fact {fid} has the wrong text: {o.texts[fid][:40]!r}")
    for s, p in sorted(e.links - o.links):
        out.append(f"acknowledged link {s} supersedes {p} is missing")
    for s, p in sorted(o.links - e.links):
        out.append(f"unexpected link {s} supersedes {p}")
    return out


def _partial_batches(steps: list[dict[str, Any]], tags: dict[str, str],
                     results: list[Any]) -> list[str]:
    """A batch is all or nothing: either every member is there, tagged with its batch
    (but those a forget removed later), or none is. ``tags``: fact id -> batch tag."""
    out = []
    for i, step in enumerate(steps):
        if step["kind"] != "remember_many" or i >= len(results):
            continue
        members = [r["id"] for r in results[i] if r["created"]]
        present = [m for m in members if tags.get(m) == step["batch"]]
        if present and len(present) < len(members):
            forgotten = {fid for j, s in enumerate(steps) if s["kind"] == "forget"
                         and j < len(results) and results[j] is not None
                         for fid in results[j]["removed"]}
            missing = [m for m in members if m not in present and m not in forgotten]
            if missing:
                out.append(f"partial transaction: batch {step['batch']} has "
                           f"{len(present)} of {len(members)} members (missing {missing})")
    return out


_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
#: bytes [4, 8) of a sealed journal frame's header (flags, kind, reserved), by flags.
_SEALED_FRAMES = [FRAME_HEADER.pack(0, flags, FRAME_KIND_TRANSACTION, 0, 0, 0)[4:8]
                  for flags in (FRAME_FLAG_ENCRYPTED, FRAME_FLAG_ENCRYPTED | 1)]
#: bytes [4, 8) of a sealed text-segment record's header (flags, reserved).
_SEALED_RECORD = RECORD.pack(0, FLAG_SEALED, 0, 0, 0)[4:8]


def _zstd_contents(data: bytes) -> list[bytes]:
    """What every zstd frame starting anywhere in ``data`` decompresses to."""
    out = []
    at = data.find(_ZSTD_MAGIC)
    while at >= 0:
        with contextlib.suppress(zstandard.ZstdError):
            out.append(zstandard.ZstdDecompressor().decompressobj().decompress(data[at:]))
        at = data.find(_ZSTD_MAGIC, at + 1)
    return out


def _sealed_contents(data: bytes, key: bytes) -> list[bytes]:
    """Every journal frame and text-segment record in ``data`` that opens under ``key``,
    at any offset (a leftover or damaged file must not hide one behind bad bytes)."""
    env = Envelope(key)
    out: list[bytes] = []
    if len(data) >= SEGMENT_HEADER_SIZE and data[:8] == SEGMENT_MAGIC:
        store_id = data[16:32]
        generation, number = struct.unpack_from("<QQ", data, 32)
        for pattern in _SEALED_FRAMES:
            at = data.find(pattern, 4)
            while at >= 0:
                off = at - 4
                length = struct.unpack_from("<I", data, off)[0]
                end = off + FRAME_HEADER_SIZE + length
                if end <= len(data):
                    aad = AAD.pack(store_id, generation, number, data[off : off + 16])
                    with contextlib.suppress(OpenFailed):
                        out.append(env.open(data[off + FRAME_HEADER_SIZE : end], aad))
                at = data.find(pattern, at + 1)
    if len(data) >= RECORD_HEADER_SIZE and data[:8] == RECORD_MAGIC:
        store_id = data[16:32]
        generation = struct.unpack_from("<Q", data, 32)[0]
        at = data.find(_SEALED_RECORD, RECORD_HEADER_SIZE + 4)
        while at >= 0:
            off = at - 4
            if off + RECORD_SIZE <= len(data):
                length, _flags, _res, seq, _ck = RECORD.unpack_from(data, off)
                end = off + RECORD_SIZE + length
                if end <= len(data):
                    aad = RECORD_AAD.pack(store_id, generation, off, seq)
                    with contextlib.suppress(OpenFailed):
                        out.append(env.open(data[off + RECORD_SIZE : end], aad))
            at = data.find(_SEALED_RECORD, at + 1)
    return out


def _contents(data: bytes, key: bytes | None) -> list[bytes]:
    """The raw bytes of a file and everything readable inside them: zstd frames and,
    with the key, sealed frames and records (and the zstd frames inside those)."""
    out = [data, *_zstd_contents(data)]
    if key is not None:
        for plain in _sealed_contents(data, key):
            out += [plain, *_zstd_contents(plain)]
    return out


def _scan_files(top: str, needles: dict[str, bytes], only: str | None = None,
                key: bytes | None = None) -> list[str]:
    """Where each needle is in a file under ``top``: raw, in a zstd frame, or (with the
    key) inside a sealed frame or record."""
    out = []
    for root, _dirs, files in os.walk(top):
        for name in files:
            if only is not None and name != only:
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                data = f.read()
            contents = _contents(data, key) if needles else []
            for what, needle in needles.items():
                if any(needle in c for c in contents):
                    how = "raw" if needle in data else "compressed or sealed"
                    out.append(f"{what} found in {os.path.relpath(path, top)} ({how})")
    return out


def _needles(e: _Expected, steps: list[dict[str, Any]], encrypted: bool) -> dict[str, bytes]:
    """What no file may hold: purged markers, and any plaintext in an encrypted store."""
    needles = {f"purged marker {m}": m.encode() for m in e.purged}
    if encrypted:
        for step in steps:
            for f in step.get("facts", ()):
                needles[f"plaintext of {f.get('id', 'a fact')}"] = f["text"].encode()
    return needles


def _forgotten(e: _Expected, steps: list[dict[str, Any]], reference: list[Any]
               ) -> dict[str, bytes]:
    """Texts of forgotten facts: zeroed and synced in the text segment before forget
    returned (SPEC §6), so no text segment may hold them, even after a power cut."""
    out = {}
    for text, fid in _queries(steps, reference):
        if fid in e.removed and fid not in e.facts:
            out[f"text of forgotten {fid}"] = text.encode()
    return out


def _scan_all(store_dir: str, e: _Expected, steps: list[dict[str, Any]],
              reference: list[Any], key: bytes | None) -> list[str]:
    """Purged markers in no file (seen through compression and the key); in an
    encrypted store, no plaintext (raw or compressed); forgotten text in no text
    segment."""
    purged = {f"purged marker {m}": m.encode() for m in e.purged}
    plain = _needles(e, steps, key is not None)
    for name in purged:
        plain.pop(name, None)
    return (_scan_files(store_dir, purged, key=key) + _scan_files(store_dir, plain)
            + _scan_files(store_dir, _forgotten(e, steps, reference), only=TEXT_FILE, key=key))


class _LogCatcher(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _catch_logs() -> Iterator[list[str]]:
    catcher = _LogCatcher()
    logger = logging.getLogger("holomem")
    logger.addHandler(catcher)
    old = logger.propagate
    logger.propagate = False
    try:
        yield catcher.messages
    finally:
        logger.propagate = old
        logger.removeHandler(catcher)


@dataclasses.dataclass
class Verdict:
    violations: list[str]
    inflight: str  # "" (none), "present" or "absent"
    notes: list[str]


def _verify(store_dir: str, key: bytes | None, steps: list[dict[str, Any]],
            reference: list[Any], acked: int, begun: int,
            extra: dict[str, str] | None = None) -> Verdict:
    """Reopen the crashed store and check every guarantee; see the module docstring.

    ``acked`` steps were acknowledged and ``begun`` started; ``extra`` are facts a
    later process acknowledged (id -> text).
    """
    before = _expected(steps, reference, acked)
    after = _expected(steps, reference, begun) if begun > acked else None
    for e in (before, after):
        if e is not None and extra:
            e.facts.update(extra)
            e.opened = True
    violations: list[str] = []
    notes: list[str] = []
    violations += [f"before reopen: {v}" for v in
                   _scan_all(store_dir, before, steps, reference, key)]
    purge = steps[acked] if begun > acked and steps[acked].get("purge") else None
    recorded = _purge_record(store_dir, key, purge["ids"][0]) if purge is not None else None
    pre = fsck_mod.check(store_dir, key=key)
    if not pre.clean:
        notes.append("fsck before reopen: " + ", ".join(
            sorted({f.code for f in pre.findings} | ({"error"} if pre.error else set()))))
    with _catch_logs() as logs:
        try:
            store = Store.open(store_dir, key=key, segment_size=SEGMENT_SIZE,
                               create=not before.opened)
        except holomem.HolomemError as exc:
            return Verdict([f"the store does not open without manual repair: {exc!r}"], "",
                           notes)
        try:
            # Before any read: a read of a damaged text-segment record heals it, which
            # would hide a text segment that the open trusted but should not have.
            violations += _fsck("fsck right after the open", store_dir, key)
            if purge is not None and recorded is not None and (recorded[0] or not recorded[1]):
                # The purge was recorded, or its compaction had already switched
                # generations: the open must have finished it.
                violations += [f"after the open finished an interrupted purge: {v}" for v in
                               _scan_files(store_dir, _marker(purge), key=key)]
            memory = Memory(store, CONFIG, clock=ManualClock(CHECK_MS))
            observed = _observe(memory)
            violations += observed.problems
            violations += _partial_batches(steps, observed.batches, reference[:begun])
            diff = _compare(before, observed)
            inflight = ""
            if after is not None and (after.facts, after.links) == (before.facts,
                                                                     before.links):
                after = None  # the step that was running changes nothing visible
            if after is not None:
                diff_after = _compare(after, observed)
                if not diff:
                    inflight = "absent"
                elif not diff_after:
                    inflight, diff = "present", []
                else:
                    diff.append(f"(and against the state with step {acked} applied: "
                                f"{'; '.join(diff_after)})")
            violations += diff
            # Recall never returns a fact that is gone (asked with the text of every
            # fact that is not there), and finds the ones that are (a sample).
            for n, (text, fid) in enumerate(_queries(steps, reference)):
                if fid in observed.texts and n % 4:
                    continue
                got = [r.id for r in memory.recall(text, k=10, history="all")]
                ghosts = [g for g in got if g not in observed.texts]
                if ghosts:
                    violations.append(f"recall returns removed facts {ghosts}")
                if fid in observed.texts and fid not in got:
                    violations.append(f"recall of its own text does not find {fid}")
            if purge is not None:
                # A forget cut short is finished by the same call (SPEC §4).
                memory.forget(ForgetScope(ids=purge["ids"]), purge=True)
        finally:
            store.close()
    notes += [f"open: {m}" for m in logs]
    final = after if inflight == "present" and after is not None else before
    violations += [f"after reopen: {v}" for v in
                   _scan_all(store_dir, final, steps, reference, key)]
    if purge is not None:
        violations += [f"after repeating the interrupted purge: {v}" for v in
                       _scan_files(store_dir, _marker(purge), key=key)]
    violations += _fsck("fsck after the checks and close", store_dir, key)
    return Verdict(violations, inflight, notes)


def _marker(step: dict[str, Any]) -> dict[str, bytes]:
    return {f"purged marker {step['marker']}": step["marker"].encode()}


def _purge_record(store_dir: str, key: bytes | None, fid: str) -> tuple[bool, bool] | None:
    """Before the reopen: (a purge is recorded in the live generation, the text of
    ``fid`` is in it), or None if the journal cannot be read without a repair."""
    try:
        journal = Journal.open(store_dir, key=key, read_only=True)
    except holomem.HolomemError:
        return None
    requested = written = False
    try:
        for seq, payloads in journal.replay():
            for payload in payloads:
                event = decode_event(payload, seq=seq)
                if isinstance(event, PurgeRequested):
                    requested = True
                elif isinstance(event, (DocumentAdded, DocumentReplaced)) and event.id == fid:
                    written = True
    except holomem.HolomemError:
        return None
    finally:
        journal.close()
    return requested, written


def _fsck(when: str, store_dir: str, key: bytes | None) -> list[str]:
    report = fsck_mod.check(store_dir, key=key)
    if report.exit_code == 0 and report.clean:
        return []
    return [f"{when}: exit {report.exit_code}, " + "; ".join(
        [f"{f.code} {os.path.relpath(f.path, store_dir)}@{f.offset}: {f.message}"
         for f in report.findings] + ([report.error] if report.error else []))]


def _queries(steps: list[dict[str, Any]], reference: list[Any]) -> Iterator[tuple[str, str]]:
    for step, result in zip(steps, reference, strict=False):
        if step["kind"] in ("remember", "remember_many"):
            for f, r in zip(step["facts"], result, strict=True):
                yield f["text"], r["id"]


# -- running the child ----------------------------------------------------------------
def _child_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOLOMEM_")}
    root = os.path.dirname(os.path.dirname(os.path.abspath(holomem.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def _spawn(run_dir: str, key: bytes | None, sync: str, env: dict[str, str], shim: bool,
           recover: bool = False, create: bool = False, resume: bool = False
           ) -> subprocess.CompletedProcess[str]:
    acks = "acks-resumed.jsonl" if resume else "acks.jsonl"
    cmd = [sys.executable, "-m", "holomem.crashtest", "--child",
           os.path.join(run_dir, "store"), os.path.join(run_dir, acks), "--sync", sync]
    if recover:
        cmd.append("--recover")
    if resume:
        cmd.append("--resume")
    if create:
        cmd.append("--create")
    if key is not None:
        cmd += ["--key-hex", key.hex()]
    if shim:
        cmd += ["--shim", os.path.join(run_dir, "fault.data")]
    return subprocess.run(cmd, env=_child_env(env), cwd=run_dir, capture_output=True,
                          text=True, timeout=CHILD_TIMEOUT, check=False)


def _read_acks(path: str) -> tuple[list[str], list[Any], int, bool]:
    """(registry, results of acknowledged steps, steps begun, finished)."""
    registry: list[str] = []
    results: list[Any] = []
    begun = 0
    done = False
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            if rec["t"] == "registry":
                registry = rec["points"]
            elif rec["t"] == "begin":
                begun = rec["i"] + 1
            elif rec["t"] == "ack":
                assert rec["i"] == len(results)
                results.append(rec["result"])
            elif rec["t"] == "done":
                done = True
    return registry, results, begun, done


@dataclasses.dataclass
class Reference:
    """An uncrashed run: what every step returns, and how often each point is hit."""

    encrypted: bool
    sync: str
    results: list[Any]
    hits: dict[str, int]
    registry: list[str]
    seconds: float

    @property
    def variant(self) -> str:
        return ("encrypted" if self.encrypted else "plain") + f"/{self.sync}"


def reference_run(encrypted: bool, sync: str = "full", workdir: str | None = None
                  ) -> Reference:
    """Run the workload once without a crash, tracing every crash point reached."""
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="holomem-crash-ref-", dir=workdir) as run_dir:
        trace = os.path.join(run_dir, "trace.txt")
        proc = _spawn(run_dir, KEY if encrypted else None, sync,
                      {"HOLOMEM_CRASH_TRACE": trace}, shim=False)
        if proc.returncode != 0:
            raise RuntimeError(f"the reference run failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-3000:]}")
        registry, results, _, done = _read_acks(os.path.join(run_dir, "acks.jsonl"))
        assert done, "the reference run did not finish"
        hits = dict.fromkeys(registry, 0)
        with open(trace, encoding="utf-8") as f:
            for line in f:
                hits[line.strip()] = hits.get(line.strip(), 0) + 1
    return Reference(encrypted, sync, results, hits, registry, time.monotonic() - t0)


@dataclasses.dataclass(frozen=True)
class Case:
    point: str
    hit: int
    fault: str
    encrypted: bool
    sync: str
    seed: int

    @property
    def variant(self) -> str:
        return ("encrypted" if self.encrypted else "plain") + f"/{self.sync}"


@dataclasses.dataclass
class Result:
    point: str
    hit: int
    fault: str
    encrypted: bool
    sync: str
    seed: int
    outcome: str  # "pass", "FAIL", "not reached", "ERROR"
    seconds: float
    step: int = -1  # the step that was running when the crash hit
    step_kind: str = ""
    inflight: str = ""
    #: what the fault did: "abort" (a process crash), or the power cut's effect
    effect: str = ""
    violations: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    kept: str = ""


def run_case(case: Case, reference: list[Any], workdir: str | None = None,
             keep: str | None = None) -> Result:
    """Crash the workload at ``case``, recover, check; never raises for a finding."""
    t0 = time.monotonic()
    steps = plan()
    res = Result(case.point, case.hit, case.fault, case.encrypted, case.sync, case.seed, "pass",
                 0.0)
    run_dir = tempfile.mkdtemp(prefix="holomem-crash-", dir=workdir)
    key = KEY if case.encrypted else None
    try:
        trace = os.path.join(run_dir, "trace.txt")
        env = {"HOLOMEM_CRASH_AT": f"{case.point}:{case.hit}", "HOLOMEM_CRASH_TRACE": trace}
        powered = case.fault in ("power", "restart")
        if powered:
            env["HOLOMEM_FAULT_LOG"] = os.path.join(run_dir, "fault.log")
        proc = _spawn(run_dir, key, case.sync, env, shim=powered)
        _, acked, begun, done = _read_acks(os.path.join(run_dir, "acks.jsonl"))
        res.step = begun - 1
        res.step_kind = steps[res.step]["kind"] if begun else ""
        if proc.returncode == 0 and done:
            res.outcome = "not reached"
            return res
        if proc.returncode != -signal.SIGABRT:
            res.outcome = "ERROR"
            res.violations.append(f"the child exited with {proc.returncode}, not SIGABRT: "
                                  f"{proc.stderr.strip()[-2000:]}")
            return res
        with open(trace, encoding="utf-8") as f:
            reached = [line.strip() for line in f]
        if not reached or reached[-1] != case.point or reached.count(case.point) != case.hit:
            res.outcome = "ERROR"
            res.violations.append(f"the child aborted, but not at {case.point}:{case.hit} "
                                  f"(last point reached: {reached[-1:]})")
            return res
        if acked != reference[: len(acked)]:
            res.outcome = "ERROR"
            res.violations.append("the workload is not deterministic: acknowledgements "
                                  "differ from the reference run")
            return res
        store_dir = os.path.join(run_dir, "store")
        res.effect = "abort"
        extra: dict[str, str] = {}
        if case.fault == "restart":
            extra = _restart(res, run_dir, key, case.sync, len(acked) == 0)
            if res.outcome != "pass":
                return res
        if case.fault == "recover":
            _recovery_crashes(res, run_dir, key, case.sync, steps, reference, len(acked),
                              begun)
            return res
        if powered:
            target = os.path.join(run_dir, "store-power-cut")
            try:
                res.notes += power_loss(run_dir, store_dir, target, case.seed)
                res.effect = res.notes[-1].split(":")[0]
            except ModelError as exc:
                res.outcome = "ERROR"
                res.violations.append(str(exc))
                return res
            store_dir = target
        verdict = _verify(store_dir, key, steps, reference, len(acked), begun, extra)
        res.violations += verdict.violations
        res.inflight = verdict.inflight
        res.notes += verdict.notes
        if res.violations:
            res.outcome = "FAIL"
        return res
    except Exception as exc:  # a harness bug must show up as a result, not kill the pool
        res.outcome = "ERROR"
        res.violations.append(f"harness error: {exc!r}\n{traceback.format_exc()}")
        return res
    finally:
        res.seconds = round(time.monotonic() - t0, 3)
        if keep is not None and res.outcome != "pass":
            os.makedirs(keep, exist_ok=True)
            dest = os.path.join(keep, f"{case.fault}-{'enc' if case.encrypted else 'plain'}-"
                                f"{case.sync}-{case.point}-{case.hit}")
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(run_dir, dest)
            res.kept = dest
        shutil.rmtree(run_dir, ignore_errors=True)


def _restart(res: Result, run_dir: str, key: bytes | None, sync: str, create: bool
             ) -> dict[str, str]:
    """Start a second process on the crashed store (logged like the first, for the
    power cut that follows); return the facts it acknowledged (id -> text)."""
    with open(os.path.join(run_dir, "fault.log"), "a", encoding="utf-8") as f:
        f.write("epoch\n")
    with open(os.path.join(run_dir, "fault.data"), "ab") as fb:
        fb.write(_SHIM.pack(b"e", 0, 0, 0))
    proc = _spawn(run_dir, key, sync, {"HOLOMEM_FAULT_LOG": os.path.join(run_dir, "fault.log")},
                  shim=True, create=create, resume=True)
    acked: list[str] = []
    with contextlib.suppress(FileNotFoundError), \
            open(os.path.join(run_dir, "acks-resumed.jsonl"), encoding="utf-8") as f:
        acked = [json.loads(line)["id"] for line in f]
    if proc.returncode != -signal.SIGABRT or len(acked) != len(RESUMED):
        res.outcome = "FAIL"
        res.violations.append(f"the store did not reopen and take writes after the crash "
                              f"(exit {proc.returncode}): {proc.stderr.strip()[-2000:]}")
    res.notes.append(f"after the crash, a new process acknowledged {', '.join(acked)}")
    texts = {f["id"]: f["text"] for f in RESUMED}
    return {fid: texts[fid] for fid in acked}


def _recovery_crashes(res: Result, run_dir: str, key: bytes | None, sync: str,
                      steps: list[dict[str, Any]], reference: list[Any], acked: int,
                      begun: int) -> None:
    """Crash the recovery of a crashed store at every point it reaches (the first and
    last time), and check each result like a first crash (SPEC §6; lesson 9: a second
    crash during recovery is survivable too)."""
    crashed = os.path.join(run_dir, "store")

    def attempt(name: str, env: dict[str, str]) -> tuple[str, subprocess.CompletedProcess[str]]:
        sub = os.path.join(run_dir, name)
        shutil.copytree(crashed, os.path.join(sub, "store"))
        return sub, _spawn(sub, key, sync, env, shim=False, recover=True,
                           create=acked == 0)  # step 0 (the open) was not acknowledged

    sub, proc = attempt("traced", {"HOLOMEM_CRASH_TRACE": os.path.join(run_dir, "rtrace")})
    shutil.rmtree(sub)
    if proc.returncode != 0:
        res.outcome = "FAIL"
        res.violations.append(f"the recovery failed (exit {proc.returncode}): "
                              f"{proc.stderr.strip()[-2000:]}")
        return
    hits: dict[str, int] = {}
    with contextlib.suppress(FileNotFoundError), \
            open(os.path.join(run_dir, "rtrace"), encoding="utf-8") as f:
        for line in f:
            hits[line.strip()] = hits.get(line.strip(), 0) + 1
    tried = 0
    for point, total in sorted(hits.items()):
        for n in sorted({1, total}):
            sub, proc = attempt(f"r-{point}-{n}", {"HOLOMEM_CRASH_AT": f"{point}:{n}"})
            tried += 1
            if proc.returncode != -signal.SIGABRT:
                res.outcome = "ERROR"
                res.violations.append(f"recovery crash at {point}:{n}: the child exited "
                                      f"with {proc.returncode}, not SIGABRT")
                continue
            verdict = _verify(os.path.join(sub, "store"), key, steps, reference, acked, begun)
            res.violations += [f"recovery crash at {point}:{n}: {v}"
                               for v in verdict.violations]
            shutil.rmtree(sub)
    res.effect = (f"{tried} recovery crashes" if tried
                  else "nothing to crash: the recovery reached no crash point")
    res.notes.append(f"the recovery reached {sum(hits.values())} crash points: "
                     + ", ".join(f"{p} x{n}" for p, n in sorted(hits.items())))
    if res.violations and res.outcome == "pass":
        res.outcome = "FAIL"


# -- the matrix -----------------------------------------------------------------------
def hit_counts(total: int, soak: bool = False) -> list[int]:
    """The hit counts tried for a point the workload reaches ``total`` times."""
    if soak:
        return list(range(1, total + 1))
    return sorted({n for n in (1, 2, 3, (total + 1) // 2, total) if 1 <= n <= total})


def case_seed(base: int, point: str, hit: int, fault: str, variant: str) -> int:
    return random.Random(f"{base}/{point}/{hit}/{fault}/{variant}").getrandbits(32)


def matrix(reference: Reference, *, faults: Sequence[str] = DEFAULT_FAULTS, seed: int = 0,
           points: Sequence[str] | None = None, hits: Sequence[int] | None = None,
           soak: bool = False) -> list[Case]:
    cases = []
    for point in sorted(points if points is not None else reference.hits):
        total = reference.hits.get(point, 0)
        for fault in faults:
            # A recover case crashes every recovery it causes: never every hit count.
            counts = (list(hits) if hits is not None
                      else hit_counts(total, soak and fault != "recover"))
            for n in counts:
                cases.append(Case(point, n, fault, reference.encrypted, reference.sync,
                                  case_seed(seed, point, n, fault, reference.variant)))
    return cases


def default_jobs() -> int:
    """Runs at a time: twice the CPUs, since a run spends much of its time in fsync."""
    env = os.environ.get("HOLOMEM_CRASH_JOBS", "")
    return int(env) if env.isdigit() and int(env) > 0 else 2 * (os.cpu_count() or 1)


def run_matrix(cases: Sequence[Case], references: Sequence[Reference], *,
               jobs: int | None = None, workdir: str | None = None, keep: str | None = None,
               progress: Callable[[Result], None] | None = None) -> list[Result]:
    """Run every case, ``jobs`` at a time (each job: a child, then the checks).

    ``references`` holds the uncrashed run of each variant the cases use.
    """
    by_variant = {r.variant: r.results for r in references}
    ctx = multiprocessing.get_context("spawn")
    results: list[Result] = []
    with concurrent.futures.ProcessPoolExecutor(max_workers=jobs or default_jobs(),
                                                mp_context=ctx) as pool:
        futures = [pool.submit(run_case, c, by_variant[c.variant], workdir, keep)
                   for c in cases]
        for fut in concurrent.futures.as_completed(futures):
            r = fut.result()
            results.append(r)
            if progress is not None:
                progress(r)
    order = {c: i for i, c in enumerate(cases)}
    results.sort(key=lambda r: order[Case(r.point, r.hit, r.fault, r.encrypted, r.sync,
                                          r.seed)])
    return results


def summary(results: Sequence[Result]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in results:
        out[r.outcome] = out.get(r.outcome, 0) + 1
    return out


def _variant(r: Result) -> str:
    return ("encrypted" if r.encrypted else "plain") + f"/{r.sync}"


def table(results: Sequence[Result], references: Sequence[Reference], seed: int,
          seconds: float) -> str:
    """The readable report: one line per run, then every finding in full."""
    lines = [f"holomem crash-injection harness, seed {seed}"]
    for ref in references:
        never = sorted(p for p, n in ref.hits.items() if n == 0)
        lines.append(f"  {ref.variant}: {len(ref.hits)} crash points, "
                     f"{sum(ref.hits.values())} hits in one uncrashed run of "
                     f"{len(ref.results)} steps"
                     + (f"; NEVER REACHED: {', '.join(never)}" if never else ""))
    head = (f"{'crash point':<28} {'hit':>4}  {'fault':<7} {'store':<15} {'outcome':<11} "
            f"{'crashed in step':<20} {'in-flight':<9} fault effect")
    lines += ["", head, "-" * len(head)]
    for r in results:
        step = f"{r.step} {r.step_kind}" if r.step >= 0 else "-"
        lines.append(f"{r.point:<28} {r.hit:>4}  {r.fault:<7} {_variant(r):<15} "
                     f"{r.outcome:<11} {step:<20} {r.inflight or '-':<9} {r.effect}")
    bad = [r for r in results if r.outcome != "pass"]
    if bad:
        lines += ["", "Findings (rerun one with --point P --hits N --fault F --seed S):"]
        for r in bad:
            lines.append(f"- {r.point}:{r.hit} {r.fault} {_variant(r)} "
                         f"(run seed {r.seed}): {r.outcome}"
                         + (f", kept in {r.kept}" if r.kept else ""))
            lines += [f"    {v}" for v in r.violations]
            lines += [f"    note: {n}" for n in r.notes]
    counts = summary(results)
    lines += ["", f"{len(results)} runs in {seconds:.1f} s, seed {seed}: "
              + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--child" in argv:
        return _child(argv)
    ap = argparse.ArgumentParser(prog="python -m holomem.crashtest",
                                 description="crash the workload at every crash point and "
                                 "check that every acknowledged write survives")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--soak", action="store_true",
                    help="every hit count of every point (long), not a few")
    ap.add_argument("--encrypted", action="store_true", help="an encrypted store")
    ap.add_argument("--both", action="store_true", help="plain and encrypted stores")
    ap.add_argument("--sync", choices=(*SYNC_MODES, "both"), default="full",
                    help="the store's sync mode (default full)")
    ap.add_argument("--fault", default="crash,power",
                    help=f"comma-separated fault kinds among {', '.join(FAULTS)}, or 'all' "
                    "(default crash,power)")
    ap.add_argument("--point", action="append", help="only this crash point (repeatable)")
    ap.add_argument("--hits", help="only these hit counts, e.g. 1,2,7")
    ap.add_argument("--seed", type=int, default=None,
                    help="base seed of the power-loss faults (default: random, printed)")
    ap.add_argument("--jobs", type=int, default=None,
                    help="runs at a time (default: twice the CPUs)")
    ap.add_argument("--keep", help="copy the directory of every failing run here")
    args = ap.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().getrandbits(32)
    faults = FAULTS if args.fault == "all" else tuple(args.fault.split(","))
    if set(faults) - set(FAULTS):
        ap.error(f"unknown fault kind in {args.fault!r}")
    keys = [False, True] if args.both else [args.encrypted]
    syncs = SYNC_MODES if args.sync == "both" else (args.sync,)
    hits = [int(h) for h in args.hits.split(",")] if args.hits else None
    t0 = time.monotonic()
    print(f"crashtest: seed {seed}", file=sys.stderr)
    refs = [reference_run(enc, sync) for enc in keys for sync in syncs]
    cases = [c for ref in refs for c in matrix(ref, faults=faults, seed=seed,
                                                points=args.point, hits=hits, soak=args.soak)]
    done = [0]

    def tick(r: Result) -> None:
        done[0] += 1
        if sys.stderr.isatty():
            print(f"\r{done[0]}/{len(cases)} {r.point}:{r.hit} {r.fault} {r.outcome:<12}",
                  end="", file=sys.stderr)

    results = run_matrix(cases, refs, jobs=args.jobs, keep=args.keep, progress=tick)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    seconds = time.monotonic() - t0
    never = [f"{ref.variant}: {p}" for ref in refs for p, n in ref.hits.items() if n == 0]
    if args.json:
        print(json.dumps({
            "seed": seed, "seconds": round(seconds, 3), "summary": summary(results),
            "matrix": {"points": len({c.point for c in cases}), "runs": len(cases),
                       "faults": list(faults), "variants": [r.variant for r in refs]},
            "hits": {r.variant: r.hits for r in refs}, "never_reached": never,
            "results": [dataclasses.asdict(r) for r in results]}, indent=2))
    else:
        print(table(results, refs, seed, seconds))
    ok = all(r.outcome == "pass" for r in results) and not never
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
