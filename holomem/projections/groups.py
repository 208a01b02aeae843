"""Contradiction groups: which stored facts share a subject slot or an entity.

Owns: :class:`Groups` — a group per subject slot and per (entity, namespace); each
fact's *row* (the groups it belongs to), each group's members in slot order, and the
pairs they make: every pair of a fact with the earlier facts of its groups, or with the
later ones, each pair once however many groups it shares. Part of
:mod:`holomem.projections.candidates`, which feeds it. Imports numpy and the other
projections.

Memory is linear in memberships: each is stored once in a row and once in a group;
pairs are made a block at a time and never kept here.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

import numpy as np

from holomem.projections.base import GrowArray
from holomem.projections.facts import FactIndex

LOW = (1 << 32) - 1


def pair_key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int64 per pair of slots, ordered as (a, b) are."""
    out: np.ndarray = (a.astype(np.int64) << 32) | b.astype(np.int64)
    return out


class Groups:
    def __init__(self, facts: FactIndex) -> None:
        self.facts = facts
        # Entities noted for the slots without a row yet: (slot, entity id) each.
        self._note_slot: array[int] = array("i")
        self._note_entity: array[int] = array("i")
        self._entity_id: dict[str, int] = {}
        self.entity_names: list[str] = []
        # (entity id, namespace id) or a subject id -> group id.
        self._entity_group: dict[tuple[int, int], int] = {}
        self._subject_group: dict[int, int] = {}
        self.group_entity = GrowArray(np.int32)  # the entity id of a group, -1: a subject's
        self.group_size = GrowArray(np.int64)  # members ever added (vacated ones too)
        self._members: list[array[int]] = []  # ascending slots
        #: per slot with a row: where its groups end in ``row_flat``; its entity count
        self.row_end = GrowArray(np.int64)
        self.row_flat = GrowArray(np.int32)
        self.entity_count = GrowArray(np.int32)

    def note(self, slot: int, entities: tuple[str, ...]) -> None:
        """The entities of the document just written in ``slot``."""
        for name in dict.fromkeys(entities):
            eid = self._entity_id.get(name)
            if eid is None:
                name = "".join(name)  # a copy: do not pin the event's buffers
                eid = self._entity_id[name] = len(self.entity_names)
                self.entity_names.append(name)
            self._note_slot.append(slot)
            self._note_entity.append(eid)

    def note_many(self, slots: np.ndarray, name: str) -> None:
        """``slots`` carry the entity ``name``."""
        eid = self._entity_id.get(name)
        if eid is None:
            eid = self._entity_id[name] = len(self.entity_names)
            self.entity_names.append(name)
        self._note_slot.frombytes(slots.astype(np.int32).tobytes())
        self._note_entity.frombytes(np.full(len(slots), eid, dtype=np.int32).tobytes())

    def add_rows(self, stored: np.ndarray) -> None:
        """Rows for the slots after the last one with a row, up to ``len(stored)``: the
        groups of each stored fact (``stored``: which slots hold one), none for others;
        each such fact joins its groups' members."""
        first, stop = len(self.row_end), len(stored)
        if first == stop:
            return
        fact = stored[first:stop]
        note_slot = np.frombuffer(self._note_slot, dtype=np.int32).astype(np.int64)
        note_ent = np.frombuffer(self._note_entity, dtype=np.int32).astype(np.int64)
        self._note_slot, self._note_entity = array("i"), array("i")
        keep = (note_slot >= first) & (note_slot < stop)
        note_slot, note_ent = note_slot[keep], note_ent[keep]
        keep = fact[note_slot - first]
        note_slot, note_ent = note_slot[keep], note_ent[keep]
        of_ns = self.facts.namespaces.of_slot.view()
        # Entity groups: one per (entity, namespace).
        combo = (note_ent << 32) | of_ns[note_slot].astype(np.int64)
        uniq, inv = np.unique(combo, return_inverse=True)
        gid = np.fromiter((self._group_of_entity(int(c) >> 32, int(c) & LOW) for c in uniq),
                          dtype=np.int64, count=len(uniq))
        ent_gid = gid[inv] if len(uniq) else np.zeros(0, dtype=np.int64)
        # Subject groups.
        subj = self.facts.subject.view()[first:stop]
        with_subject = np.flatnonzero(fact & (subj >= 0))
        sids, sinv = np.unique(subj[with_subject], return_inverse=True)
        sgid = np.fromiter((self._group_of_subject(int(s)) for s in sids), dtype=np.int64,
                           count=len(sids))
        subj_gid = sgid[sinv] if len(sids) else np.zeros(0, dtype=np.int64)
        slot_of = np.concatenate((with_subject + first, note_slot))
        gid_of = np.concatenate((subj_gid, ent_gid))
        order = np.argsort(slot_of, kind="stable")
        slot_of, gid_of = slot_of[order], gid_of[order]
        ends = np.searchsorted(slot_of, np.arange(first, stop), side="right")
        base = self.row_end[first - 1] if first else 0
        self.row_end.extend(ends + int(base))
        self.row_flat.extend(gid_of.astype(np.int32))
        self.entity_count.extend(np.bincount(note_slot - first, minlength=stop - first)
                                 .astype(np.int32))
        self.add_members(slot_of, gid_of)

    def _group_of_entity(self, eid: int, nid: int) -> int:
        g = self._entity_group.get((eid, nid))
        if g is None:
            g = self._entity_group[(eid, nid)] = self._new_group(eid)
        return g

    def _group_of_subject(self, sid: int) -> int:
        g = self._subject_group.get(sid)
        if g is None:
            g = self._subject_group[sid] = self._new_group(-1)
        return g

    def _new_group(self, eid: int) -> int:
        self._members.append(array("i"))
        self.group_size.append(0)
        return self.group_entity.append(eid)

    def rows(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slot, group) of every membership of ``slots`` (ascending), in slot order."""
        lens, groups = self._memberships(slots)
        return np.repeat(slots, lens), groups

    def _memberships(self, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(groups of each slot, every group of each slot in turn)."""
        end = self.row_end.view()
        stop = end[slots]
        start = np.where(slots > 0, end[np.maximum(slots - 1, 0)], 0)
        lens = stop - start
        offsets = np.cumsum(lens) - lens
        idx = np.arange(int(lens.sum())) + np.repeat(start - offsets, lens)
        return lens, self.row_flat.view()[idx].astype(np.int64)

    def groups(self, slot: int) -> np.ndarray:
        end = self.row_end.view()
        out: np.ndarray = self.row_flat.view()[int(end[slot - 1]) if slot else 0:
                                               int(end[slot])]
        return out

    def add_members(self, t_of: np.ndarray, g_of: np.ndarray) -> None:
        """Each slot ``t_of[i]`` joins group ``g_of[i]`` (slots after every member)."""
        by_group = np.argsort(g_of, kind="stable")
        gs, ts = g_of[by_group], t_of[by_group].astype(np.int32)
        cuts = np.flatnonzero(np.diff(gs)) + 1
        sizes = self.group_size.view()
        for part_g, part_t in zip(np.split(gs, cuts), np.split(ts, cuts), strict=True):
            if len(part_g):
                g = int(part_g[0])
                self._members[g].frombytes(part_t.tobytes())
                sizes[g] += len(part_t)

    # -- pairs --------------------------------------------------------------------------
    def earlier_pairs(self, targets: np.ndarray, allow: np.ndarray, block: int
                      ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Every pair (a, t) of a ``t`` in ``targets`` (ascending, slots with rows) and
        an earlier ``a`` with ``allow[a]`` sharing a group with it, once: (a, t, entity
        groups shared) arrays, about ``block`` raw pairs (memberships) at a time (more
        only when one target alone has more)."""
        return self._pairs(targets, allow, block, later=False)

    def later_pairs(self, targets: np.ndarray, allow: np.ndarray, block: int
                    ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:meth:`earlier_pairs` with the partners after each target: (t, b, shared)."""
        return self._pairs(targets, allow, block, later=True)

    def _pairs(self, targets: np.ndarray, allow: np.ndarray, block: int, later: bool
               ) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        t_of, g_of = self.rows(targets)
        if not len(t_of):
            return
        uniq, inv = np.unique(g_of, return_inverse=True)
        parts = []
        for g in uniq.tolist():
            m = np.frombuffer(self._members[g], dtype=np.int32)
            parts.append(m[allow[m]])
        sizes = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
        flat = np.concatenate(parts).astype(np.int64)
        off = np.cumsum(sizes) - sizes
        fkey = (np.repeat(np.arange(len(uniq), dtype=np.int64), sizes) << 32) | flat
        at = (inv.astype(np.int64) << 32) | t_of
        if later:  # the group's allowed members after t
            begin = np.searchsorted(fkey, at, side="right")
            count = (off + sizes)[inv] - begin
        else:  # those before it
            begin = off[inv]
            count = np.searchsorted(fkey, at) - begin
        entity = (self.group_entity.view()[g_of] >= 0).astype(np.int64)
        raw = np.cumsum(count)
        i, n = 0, len(t_of)
        while i < n:
            before = int(raw[i - 1]) if i else 0
            j = max(int(np.searchsorted(raw, before + block, side="right")), i + 1)
            j = int(np.searchsorted(t_of, t_of[j - 1], side="right"))
            lens = count[i:j]
            total = int(lens.sum())
            if total:
                offsets = np.cumsum(lens) - lens
                idx = np.arange(total) + np.repeat(begin[i:j] - offsets, lens)
                mine = np.repeat(t_of[i:j], lens)
                keys = pair_key(mine, flat[idx]) if later else pair_key(flat[idx], mine)
                ent = np.repeat(entity[i:j], lens)
                order = np.argsort(keys, kind="stable")
                keys, ent = keys[order], ent[order]
                first = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
                keys = keys[first]
                yield keys >> 32, keys & LOW, np.add.reduceat(ent, first)
            i = j

    def later_partners(self, slot: int, allow: np.ndarray) -> np.ndarray:
        """The slots after ``slot`` with ``allow`` that share a group with it, ascending."""
        parts = []
        for g in self.groups(slot).tolist():
            m = np.frombuffer(self._members[g], dtype=np.int32)
            m = m[int(np.searchsorted(m, slot, side="right")):]
            parts.append(m[allow[m]])
        out: np.ndarray = np.unique(np.concatenate(parts)).astype(np.int64) if parts \
            else np.zeros(0, dtype=np.int64)
        return out

    def shared_entities(self, pairs: list[tuple[int, int]]) -> list[list[str]]:
        """For each pair of scored slots (a, b), the entities both facts carry, sorted."""
        out: list[list[str]] = [[] for _ in pairs]
        if not pairs:
            return out
        both = np.array(pairs, dtype=np.int64)
        tagged = []  # each side's memberships as (pair index, group)
        for side in (0, 1):
            lens, groups = self._memberships(both[:, side])
            tagged.append((np.repeat(np.arange(len(pairs), dtype=np.int64), lens) << 32) | groups)
        common = np.intersect1d(tagged[0], tagged[1])
        eid = self.group_entity.view()[common & LOW]
        names = self.entity_names
        for i, e in zip((common >> 32)[eid >= 0].tolist(), eid[eid >= 0].tolist(), strict=True):
            out[i].append(names[e])
        for names_of in out:
            names_of.sort()
        return out

    def memory_bytes(self) -> int:
        return (self.row_end.nbytes + self.row_flat.nbytes + self.entity_count.nbytes
                + 4 * int(self.group_size.view().sum()))
