"""The power-loss model of the disk: what a power cut could leave of a crashed store.

Owns: the model of the store's files and directories rebuilt from the operations log
a power-loss run records (:mod:`holomem.log.tap`: the child's file layer appends one
line per operation, with the bytes of every write), the power cut drawn from it, and
the checks that the model is faithful and that the faults landed (:func:`power_loss`).
Imports the file layer and the log's record format only.

The model knows each file's content at its last fsync and each directory's entries at
its last sync, and builds what a power cut could leave (leveldb's
``fault_injection_test``, SQLite's ``test6.c``): per file, with a seeded RNG, the bytes
written since its last fsync are dropped, cut at a random point, or garbled (random
bytes over some unsynced writes, the others kept or dropped); per directory, the
creates, renames and unlinks since its last sync are kept, undone, or kept in part (a
prefix or any subset) -- a created directory whose entry is lost takes everything under
it along, and so does one above the store, up to the run directory. A directory that
exists on the disk but that the log never saw created (made behind the file layer's
back, e.g. by ``os.makedirs``) is modelled as created just before the first operation
under it, its entry in its parent unsynced until that parent is synced. A write is
assumed not to damage bytes outside its own range (SQLite's "powersafe overwrite").
Files are followed by inode, so a write through a descriptor lands in the right file
whatever its name became, and the log of a second process (``restart``) simply goes
on where the first one's ends. The log is in the order operations completed, which is
the order they happened in for the workload's one thread. The model is first checked
against the real directory (with every write applied it must equal it byte for byte),
and the faults are checked to have landed (the files written are the ones intended;
which ones differ from what the process left is reported, or that nothing was
unsynced).
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Sequence
from typing import Any

from holomem.errors import HolomemError
from holomem.log import fs, tap
from holomem.log.format import LOCK_NAME

#: The operations log of a power-loss run, in its run directory.
FAULT_LOG = "fault.log"


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


class Disk:
    """The store's files as a power cut would see them, rebuilt from the operations log."""

    def __init__(self, base: str, log: str) -> None:
        self.base = os.path.abspath(base)
        self.root = _Dir()
        self._by_ino: dict[int, _File] = {}
        #: directories found on the disk that no ``mkdir`` line created
        self.unlogged: list[str] = []
        # No log at all: the process died before its first logged operation.
        try:
            records = tap.parse(fs.read_file_or_none(log) or b"")
        except ValueError as exc:
            raise ModelError(str(exc)) from exc
        for n, record in enumerate(records, start=1):
            try:
                self._op(record)
            except (KeyError, IndexError, ValueError, AssertionError) as exc:
                raise ModelError(f"operations log line {n} ({record.kind} {record.path}): "
                                 f"{exc!r}") from exc

    def _parent(self, path: str) -> tuple[_Dir, str]:
        rel = os.path.relpath(path, self.base)
        assert not rel.startswith(".."), f"{path} is outside the run directory"
        parts = rel.split(os.sep)
        node: _File | _Dir = self.root
        for depth, part in enumerate(parts[:-1]):
            assert isinstance(node, _Dir)
            if part not in node.entries:
                self._unlogged_dir(node, part, os.path.join(self.base, *parts[: depth + 1]))
            node = node.entries[part]
        assert isinstance(node, _Dir)
        return node, parts[-1]

    def _unlogged_dir(self, parent: _Dir, name: str, real: str) -> None:
        """A directory the log never saw created, yet an operation happens under it: it
        was made behind the file layer's back. As a power cut sees it: created now, its
        entry in ``parent`` not synced (a later sync of ``parent`` makes it durable)."""
        if not os.path.isdir(real):
            raise KeyError(name)  # not on the disk either: the log is wrong
        new = _Dir()
        parent.entries[name] = new
        parent.pending.append(("add", name, new))
        self.unlogged.append(real)

    def _lookup(self, path: str) -> _File | _Dir:
        if os.path.abspath(path) == self.base:
            return self.root
        parent, name = self._parent(path)
        if name not in parent.entries:
            self._unlogged_dir(parent, name, os.path.abspath(path))
        return parent.entries[name]

    def _op(self, r: tap.Record) -> None:
        kind = r.kind
        if kind == "create":
            parent, name = self._parent(r.path)
            node = _File()
            self._by_ino[r.file] = node
            parent.entries[name] = node
            parent.pending.append(("add", name, node))
        elif kind == "write":
            file = self._by_ino[r.file]
            file.cur = _apply(file.cur, [(r.offset, r.data)])
            file.pending.append((r.offset, r.data))
        elif kind == "truncate":
            file = self._by_ino[r.file]
            file.cur = _apply(file.cur, [(r.length, None)])
            file.pending.append((r.length, None))
        elif kind == "sync":
            file = self._by_ino[r.file]
            file.durable = bytes(file.cur)
            file.pending.clear()
        elif kind == "dirsync":
            if os.path.relpath(r.path, self.base).startswith(".."):
                return  # above the run directory, which the model takes as durable
            d = self._lookup(r.path)
            assert isinstance(d, _Dir)
            d.durable = dict(d.entries)
            d.pending.clear()
        elif kind == "mkdir":
            parent, name = self._parent(r.path)
            new = _Dir()
            parent.entries[name] = new
            parent.pending.append(("add", name, new))
        elif kind in ("unlink", "rmdir"):
            parent, name = self._parent(r.path)
            gone = parent.entries.pop(name)
            parent.pending.append(("del", name, gone))
        elif kind == "rename":
            src_dir, src = self._parent(r.path)
            dst_dir, dst = self._parent(r.dst)
            assert src_dir is dst_dir, "a rename across directories"
            moved = src_dir.entries.pop(src)
            src_dir.entries[dst] = moved
            src_dir.pending.append(("mv", src, dst, moved))
        else:
            raise ValueError(f"unknown operation {kind!r}")

    # -- what is on the disk ---------------------------------------------------------
    def current(self, top: str) -> dict[str, bytes | None]:
        """Every path under ``top`` with all writes applied (None for a directory);
        nothing if ``top`` was never created (a crash before the store's directory)."""
        out: dict[str, bytes | None] = {}
        if not os.path.isdir(top):
            return out
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
        notes: list[str] = [f"{os.path.relpath(d, self.base)}/: created behind the file "
                            "layer's back (no mkdir in the log)" for d in self.unlogged]
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


def read_tree(top: str, skip: Sequence[str] = (LOCK_NAME,)) -> dict[str, bytes | None]:
    """Every path under ``top`` with its bytes (None for a directory)."""
    out: dict[str, bytes | None] = {}
    for root, dirnames, files in fs.walk(top):
        rel = os.path.relpath(root, top)
        for name in dirnames:
            out[os.path.normpath(os.path.join(rel, name))] = None
        for name in files:
            path = os.path.normpath(os.path.join(rel, name))
            if path not in skip:
                out[path] = fs.read_file(os.path.join(root, name))
    return out


def _write_new(path: str, content: bytes) -> None:
    fd = fs.create(path)
    try:
        fs.write_at(fd, content, 0, path)
    finally:
        fs.close(fd)


def _materialize(tree: dict[str, bytes | None], top: str) -> None:
    """Make ``tree`` on the disk under the new directory ``top`` (nothing synced: the
    power cut is already modelled; the checks reopen it as it is)."""
    fs.make_dirs(top)
    for path in sorted(tree):  # a directory sorts before what is under it
        content = tree[path]
        if content is None:
            fs.mkdir(os.path.join(top, path))
        else:
            _write_new(os.path.join(top, path), content)


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
    disk = Disk(run_dir, os.path.join(run_dir, FAULT_LOG))
    try:
        real = read_tree(store)
    except HolomemError as exc:
        raise ModelError(f"the store's files cannot be read: {exc}") from exc
    modeled = disk.current(store)
    diff = _describe_diff(modeled, real, ("in the model", "on the disk"))
    if diff:
        raise ModelError("the fault model does not match the disk: " + "; ".join(diff[:5]))
    cut, notes = disk.power_cut(store, random.Random(seed))
    after = cut if cut is not None else {}
    if cut is not None:
        _materialize(cut, target)
        if os.path.exists(os.path.join(store, LOCK_NAME)):
            _write_new(os.path.join(target, LOCK_NAME), b"")
    # Did it land? The files on disk are the ones intended, and they differ from
    # what the crashed process left wherever a fault had an effect.
    landed = read_tree(target)
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
