"""The namespace index: which namespace every fact lives in, and the facts under a prefix.

Owns: the namespace of each fact slot (an interned id), the live facts of each
namespace, and the lookups of docs/contract.md §4a — the facts at or under a prefix (the
filtered path: built from per-namespace member lists, never a scan of every
fact) and the namespaces that hold facts. Part of the fact index
(:mod:`holomem.projections.facts`), which feeds it. Imports numpy and the base.

A namespace is a tuple of 0 to 8 non-empty strings; the empty tuple is the root,
and every namespace is under the root. Nothing here is persisted.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import cast

import numpy as np

from holomem.projections.base import GrowArray, Later, Snapshot, compaction_check

Namespace = tuple[str, ...]
ROOT: Namespace = ()


class NamespaceIndex:
    def __init__(self) -> None:
        self._ids: dict[Namespace, int] = {}
        self.names: list[Namespace] = []
        #: the namespace id of each slot's fact (-1: not a fact)
        self.of_slot = GrowArray(np.int32)
        #: per namespace id, its facts' slots (int32; may hold dead slots)
        self._members: list[array[int]] = []
        self._live: list[int] = []  # live facts per namespace id
        #: proper prefix -> ids of the namespaces strictly under it (the root's: all)
        self._below: dict[Namespace, list[int]] = {}

    # -- changes (called by the fact index) ---------------------------------------------
    def new_slot(self) -> None:
        self.of_slot.append(-1)

    def new_slots(self, count: int) -> None:
        self.of_slot.extend(np.full(count, -1, dtype=np.int32))

    def intern(self, namespace: Namespace) -> int:
        nid = self._ids.get(namespace)
        if nid is None:
            nid = self._ids[namespace] = len(self.names)
            self.names.append(namespace)
            self._members.append(array("i"))
            self._live.append(0)
            for k in range(len(namespace)):
                self._below.setdefault(namespace[:k], []).append(nid)
        return nid

    def intern_id(self, namespace: Namespace) -> int:
        """The id of ``namespace``, or -1 if no fact ever lived there."""
        return self._ids.get(namespace, -1)

    def add(self, slot: int, namespace: Namespace) -> int:
        """Place the fact in ``slot`` in ``namespace``; returns its namespace id."""
        nid = self.intern(namespace)
        self.of_slot[slot] = nid
        self._members[nid].append(slot)
        self._live[nid] += 1
        return nid

    def add_run(self, first: int, count: int, ks: Sequence[int], namespaces: list[Namespace]
                ) -> list[int]:
        """Slots ``first``..``first + count`` (as :meth:`new_slots`), the fact of slot
        ``first + k`` placed in ``namespaces[i]`` for each ``ks[i]`` (ascending), as
        :meth:`add` of each in turn would; returns their namespace ids."""
        known = list(map(self._ids.get, namespaces))
        nids = ([self.intern(ns) for ns in namespaces] if None in known  # in order
                else cast("list[int]", known))
        col = np.full(count, -1, dtype=np.int32)
        col[ks] = nids
        self.of_slot.extend(col)
        if nids and nids.count(nids[0]) == len(nids):
            self._members[nids[0]].frombytes((np.array(ks, dtype=np.int32) + first).tobytes())
            self._live[nids[0]] += len(nids)
        else:
            for k, nid in zip(ks, nids, strict=True):
                self._members[nid].append(first + k)
                self._live[nid] += 1
        return nids

    def move(self, old: int, new: int) -> None:
        """The fact of slot ``old`` now lives in slot ``new`` (its document replaced)."""
        nid = int(self.of_slot[old])
        self.of_slot[old] = -1
        self.of_slot[new] = nid
        if nid >= 0:
            self._members[nid].append(new)

    def remove(self, slot: int) -> None:
        nid = int(self.of_slot[slot])
        if nid >= 0:
            self.of_slot[slot] = -1
            self._live[nid] -= 1
            members = self._members[nid]
            if len(members) > 64 and len(members) > 2 * self._live[nid]:
                col = self.of_slot.view()
                slots = np.frombuffer(members, dtype=np.int32)
                self._members[nid] = array("i", slots[col[slots] == nid].tobytes())

    def compacted(self, old: NamespaceIndex, old_slots: np.ndarray, new_slots: np.ndarray,
                  slots: int) -> np.ndarray:
        """Fill this fresh index for ``slots`` slots whose facts are those of ``old``'s
        ``old_slots``, now in ``new_slots`` (both ascending, pairwise): what a replay of
        the compacted journal builds, which meets each namespace first with its first
        kept fact (ids given in that order). Returns each fact's old namespace id
        -> new id (-1: no kept fact there)."""
        assert not self.names  # fresh
        old_nids = old.of_slot.view()[old_slots]
        compaction_check(not len(old_nids) or int(old_nids.min()) >= 0,
                         "a kept fact has no namespace")  # (the root is one)
        distinct, first = np.unique(old_nids, return_index=True)
        remap = np.full(len(old.names), -1, dtype=np.int32)
        for nid in distinct[np.argsort(first)].tolist():
            remap[nid] = self.intern(old.names[nid])
        nids = remap[old_nids]
        col = np.full(slots, -1, dtype=np.int32)
        col[new_slots] = nids
        self.of_slot.extend(col)
        order = np.argsort(nids, kind="stable")  # by namespace, slots ascending within
        ends = np.cumsum(np.bincount(nids, minlength=len(self.names))).tolist()
        members = new_slots[order].astype(np.int32)
        start = 0
        for nid, end in enumerate(ends):
            self._members[nid].frombytes(members[start:end].tobytes())
            self._live[nid] = end - start
            start = end
        return remap

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Nothing copied under the lock: the slots' namespaces are lent (a fact that
        goes clears its slot, which copies the column first), and a member list is
        only appended to in place (a shrink puts a new one in), so its length is
        taken and the lists are joined when the snapshot is encoded."""
        members = list(self._members)
        lengths = list(map(len, members))

        def joined() -> np.ndarray:
            return np.frombuffer(b"".join(m[:n].tobytes() for m, n
                                          in zip(members, lengths, strict=True)), dtype=np.int32)

        return {"names": list(self.names), "of_slot": self.of_slot.lend(),
                "member_counts": np.array(lengths, dtype=np.int64), "members": Later(joined),
                "live": list(self._live)}

    def restore(self, snap: Snapshot) -> None:
        for namespace in snap["names"]:
            self.intern(tuple(namespace))  # ids, and the prefixes, in the same order
        self.of_slot = GrowArray.of(snap["of_slot"], np.int32)
        flat = np.ascontiguousarray(snap["members"], dtype=np.int32)
        ends = np.cumsum(snap["member_counts"]).tolist()
        if len(ends) != len(self.names) or (ends[-1] if ends else 0) != len(flat):
            raise ValueError("namespaces: member lists disagree")
        self._members, start = [], 0
        for end in ends:
            members = array("i")
            members.frombytes(flat[start:end].tobytes())
            self._members.append(members)
            start = end
        self._live = list(snap["live"])
        if len(self._live) != len(self.names):
            raise ValueError("namespaces: member lists disagree")

    # -- queries ------------------------------------------------------------------------
    def namespace(self, slot: int) -> Namespace:
        nid = self.of_slot.item(slot)
        return self.names[nid] if nid >= 0 else ROOT

    def under(self, prefix: Namespace) -> Iterator[int]:
        """Ids of the namespaces at or under ``prefix`` that hold a live fact, ascending
        (looked up, not searched: each namespace is filed under its prefixes)."""
        exact = self._ids.get(prefix)
        below = self._below.get(prefix, ())
        nids = sorted([exact, *below]) if exact is not None else below
        live = self._live
        return (nid for nid in nids if live[nid])

    def slots(self, prefix: Namespace) -> np.ndarray:
        """Slots of the live facts at or under ``prefix``, ascending (write order).

        From the member lists when they are few; when they are many (a wide prefix),
        from one pass over the slots' namespace ids, which costs the same whatever
        the number of namespaces."""
        col = self.of_slot.view()
        nids = list(self.under(prefix))
        if sum(len(self._members[nid]) for nid in nids) * 16 > len(col):
            wanted = np.zeros(len(self.names) + 1, dtype=bool)  # [-1]: no namespace
            wanted[nids] = True
            out: np.ndarray = np.flatnonzero(wanted[col])
            return out
        parts = []
        for nid in nids:
            members = np.frombuffer(self._members[nid], dtype=np.int32).astype(np.int64)
            parts.append(members[col[members] == nid])
        if not parts:
            return np.zeros(0, dtype=np.int64)
        out = np.concatenate(parts)
        out.sort()
        return out

    def members(self, nid: int) -> np.ndarray:
        """Slots of the live facts of the namespace with id ``nid`` (exactly that one,
        none under it), ascending (write order)."""
        members = np.frombuffer(self._members[nid], dtype=np.int32).astype(np.int64)
        out: np.ndarray = members[self.of_slot.view()[members] == nid]
        return out

    def counts(self, prefix: Namespace) -> list[tuple[Namespace, int]]:
        """(namespace, live facts) of every namespace at or under ``prefix``, sorted."""
        return sorted((self.names[nid], self._live[nid]) for nid in self.under(prefix))

    def memory_bytes(self) -> int:
        return self.of_slot.nbytes + 4 * sum(len(m) for m in self._members)
