"""The power-loss model of the disk: what a power cut could leave of a crashed store.

Owns: the model of the store's files and directories rebuilt from the two logs of a
power-loss run (the fault log of :mod:`holomem.log.fs` and the shim's records of
:mod:`holomem.crashtest.shim`), the power cut drawn from it, and the checks that the
model is faithful and that the faults landed (:func:`power_loss`). Imports the shim's
record format only.

The model knows each file's content at its last fsync and each directory's entries at
its last sync, and builds what a power cut could leave (leveldb's
``fault_injection_test``, SQLite's ``test6.c``): per file, with a seeded RNG, the bytes
written since its last fsync are dropped, cut at a random point, or garbled (random
bytes over some unsynced writes, the others kept or dropped); per directory, the
creates, renames and unlinks since its last sync are kept, undone, or kept in part (a
prefix or any subset) -- a created directory whose entry is lost takes everything under
it along, and so does one above the store, up to the run directory. A directory that
exists on the disk but that the fault log never saw created (made behind the file
layer's back, e.g. by ``os.makedirs``) is modelled as created just before the first
operation under it, its entry in its parent unsynced until that parent is synced. A
write is assumed not to damage bytes outside its own range (SQLite's "powersafe
overwrite"). The model is first checked against the real
directory (with every write applied it must equal it byte for byte), and the faults
are checked to have landed (the files written are the ones intended; which ones differ
from what the process left is reported, or that nothing was unsynced).
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Sequence
from typing import Any

from holomem.crashtest.shim import _SHIM


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
        #: directories found on the disk that no ``mkdir`` line created
        self.unlogged: list[str] = []
        self._read_shim(shim_log)
        # No log at all: the process died before its first logged operation.
        lines: list[str] = []
        if os.path.exists(fault_log):
            with open(fault_log, encoding="utf-8") as f:
                lines = f.readlines()
        for n, line in enumerate(lines, start=1):
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
        raw = b""
        if os.path.exists(path):
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
            if os.path.relpath(f[1], self.base).startswith(".."):
                return  # above the run directory, which the model takes as durable
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
                            "layer's back (no mkdir in the fault log)" for d in self.unlogged]
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
