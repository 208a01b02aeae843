"""The subjects of facts: which facts share one, and which of them may still be current.

Owns: subject ids (a subject is per namespace: namespace id -> subject -> id),
their names, each subject's members in write order, looked up by name in a
namespace or under a prefix, the subjects holomem reserves for its own facts
(:data:`RESERVED_PREFIX`) and the slots that hold one, and each subject's *heads*,
which let latest-by-subject plan a new fact without walking every fact of its
subject. The fact index (:mod:`holomem.projections.facts`) owns the slot column
that names each fact's subject and tells this index of every change; it lends the
namespace index and the two questions the heads need (a fact's effect order,
whether it is current at a time). Imports numpy and the namespace index.

Heads. For a subject with members M, let L be the member last in effect order and
E its effective time; the heads are the members current at E. A member that is not
current at E is superseded by a fact that has begun by E or has expired by E (it
has begun: no member begins after E), and so it is not current at any later time
either — as long as no link goes away. Links are only ever taken away with a fact
(forgotten, or its document deleted); a new link only takes currency away. So:

- a new member f: E' = the effective time of the later of L and f, and the heads
  become those of ``heads + [f]`` current at E' (after f's own links are in);
- a new link onto a head p: p leaves the heads unless it is still current at E;
- a member leaves, a member's document is replaced (its slot, and so its place in
  effect order, changes), or a fact that superseded a member leaves: the subject's
  heads are dropped and worked out again, from every member, when next asked for.

The heads are a function of the stored facts, worked out lazily and kept while
they hold; no checkpoint holds them (an opened store works each one out on first
use). Only the writer asks for them, under its write lock.

Names. A subject is a slash path whose first segment usually names what it is about
(``alice/city``); :func:`name_key` is the one rule that says which name a segment
is — its case folded, every run of spaces, underscores and hyphens one ``_``, none
at either end — so ``Alice/city``, ``alice/city`` and the name ``"alice"`` agree, and
``mary_ann/job`` is a subject of ``"Mary Ann"``. :meth:`SubjectIndex.named` finds the
subjects of a name through a table of first-segment keys, made on first use and
extended as subjects are added (subject names are only ever appended).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

import numpy as np

from holomem.projections.base import GrowArray, Later, Snapshot
from holomem.projections.namespaces import Namespace, NamespaceIndex

#: Subjects starting with this are holomem's own (working contexts: "holomem:working/S").
RESERVED_PREFIX = "holomem:"

#: (effective time, ingest time, transaction, slot): a fact's place in effect order.
OrderKey = tuple[int, int, int, int]

_SEPARATORS = re.compile(r"[\s_\-]+")


def name_key(name: str) -> str:
    """The key of a name, or of a subject's first segment (the module doc's rule):
    ``"Mary  Ann"``, ``"mary_ann"`` and ``"MARY-ANN"`` are all ``"mary_ann"``."""
    return _SEPARATORS.sub("_", name.casefold()).strip("_")


class SubjectIndex:
    """Subjects, their members and their heads. ``namespaces`` is the fact index's
    namespace index, ``key(fid)`` a stored fact's place in effect order (its slot
    last), ``current(slot, fid, t)`` whether the stored fact ``fid`` in ``slot`` is
    current at ``t`` (counting every stored link)."""

    #: The tables' shapes, for a typed decode.
    SNAPSHOT_TYPES: ClassVar[dict[str, object]] = {
        "subject_keys": list[tuple[int, str, int]], "by_subject": list[tuple[int, list[str]]],
    }

    def __init__(self, namespaces: NamespaceIndex, key: Callable[[str], OrderKey],
                 current: Callable[[int, str, int], bool]) -> None:
        self.namespaces = namespaces
        self._key = key
        self._current = current
        #: namespace id -> its subjects' ids (a table per namespace: no key tuple
        #: per subject)
        self._id: dict[int, dict[str, int]] = {}
        self.names: list[str] = []
        #: each subject's member ids in write order, by subject id: the id itself
        #: when it has exactly one (most subjects: no list), else a list (only
        #: appended to in place; a member leaving puts a new entry in: see snapshot())
        self.members: list[str | list[str]] = []
        #: ids of the subjects holomem reserves for its own facts (RESERVED_PREFIX)
        self.reserved: list[int] = []
        #: subject id -> (the place in effect order of its last member, its heads
        #: with their places: a stored fact's place changes only when its slot does,
        #: and that drops its subject's heads)
        self._heads: dict[int, tuple[OrderKey, list[tuple[OrderKey, str]]]] = {}
        self._reserved_mask: tuple[tuple[int, int], np.ndarray] | None = None
        #: first-segment key -> the ids of the subjects under it, and how many of
        #: :attr:`names` it covers (made on first use: see :meth:`named`)
        self._by_name: dict[str, list[int]] = {}
        self._by_name_upto = 0

    def named(self, key: str) -> list[int]:
        """The ids of every subject (of any namespace) whose first segment has the key
        ``key`` (:func:`name_key`), in the order they were made. The table covers the
        subjects made since the last call first (readers hold the state lock, so one
        extends it at a time; names are only ever appended)."""
        names, table = self.names, self._by_name
        for sid in range(self._by_name_upto, len(names)):
            head = names[sid].split("/", 1)[0]
            table.setdefault(name_key(head), []).append(sid)
        self._by_name_upto = len(names)
        return list(table.get(key, ()))

    def id_of(self, nid: int, subject: str) -> int | None:
        """The id of ``subject`` in namespace ``nid``, or None."""
        table = self._id.get(nid)
        return None if table is None else table.get(subject)

    def members_of(self, sid: int) -> list[str]:
        """The ids of subject ``sid``'s members in write order (a new list)."""
        held = self.members[sid]
        return [held] if isinstance(held, str) else list(held)

    def _named(self, subject: str, namespace: Namespace) -> int | None:
        nid = self.namespaces.intern_id(namespace)
        return self.id_of(nid, subject) if nid >= 0 else None

    def members_named(self, subject: str, namespace: Namespace) -> list[str]:
        """:meth:`members_of` the subject ``subject`` of ``namespace`` (none when it
        has no member)."""
        sid = self._named(subject, namespace)
        return self.members_of(sid) if sid is not None else []

    def members_under(self, subject: str, prefix: Namespace) -> list[str]:
        """The members of the subjects ``subject`` of every namespace at or under
        ``prefix``: each subject's in write order, one namespace after another."""
        out: list[str] = []
        for nid in self.namespaces.under(prefix):
            sid = self.id_of(nid, subject)
            if sid is not None:
                out.extend(self.members_of(sid))
        return out

    def heads_named(self, subject: str, namespace: Namespace
                    ) -> tuple[OrderKey, list[tuple[OrderKey, str]]] | None:
        """The place in effect order of the last stored fact of ``subject`` in
        ``namespace``, and the stored facts of it current when that one begins, in
        effect order (every other one is current at no later time: see the module
        docstring); None when it has no stored fact."""
        sid = self._named(subject, namespace)
        held = self.heads(sid) if sid is not None else None
        if held is None:
            return None
        last, heads = held
        return last, sorted(heads)

    def add(self, fid: str, nid: int, subject: str) -> int:
        """Note a new member (its heads wait for :meth:`added`); returns its subject id."""
        table = self._id.get(nid)
        if table is None:
            table = self._id[nid] = {}
        sid = table.get(subject)
        if sid is None:
            sid = table[subject] = len(self.names)
            self.names.append(subject)
            if subject.startswith(RESERVED_PREFIX):
                self.reserved.append(sid)
            self.members.append(fid)
            return sid
        held = self.members[sid]
        if isinstance(held, str):
            self.members[sid] = [held, fid]
        elif held:
            held.append(fid)
        else:
            self.members[sid] = fid
        return sid

    def added(self, sid: int, fid: str, supersedes: tuple[str, ...] = (),
              key: OrderKey | None = None) -> None:
        """The new member ``fid``'s links are in (``supersedes``: the facts it names as
        superseded; ``key``: its place in effect order, when the caller has it):
        bring its subject's heads up to date. A head ``fid`` supersedes is not
        current when the last member begins (``fid`` has begun by then), so it goes
        without asking; this also does what :meth:`linked` would have done for a
        link onto a member of ``sid`` made just before."""
        held = self._heads.get(sid)
        if held is None:
            return
        last, heads = held
        if key is None:
            key = self._key(fid)
        if key > last:
            last = key
        at = last[0]
        current = self._current
        self._heads[sid] = (last, [(k, h) for k, h in (*heads, (key, fid))
                                   if h not in supersedes and current(k[3], h, at)])

    def linked(self, sid: int, pred: str) -> None:
        """A new link supersedes ``pred``, a member of ``sid``."""
        held = self._heads.get(sid)
        if held is not None and any(h == pred for _, h in held[1]):
            last, heads = held
            slot = next(k[3] for k, h in heads if h == pred)
            if not self._current(slot, pred, last[0]):
                self._heads[sid] = (last, [(k, h) for k, h in heads if h != pred])

    def changed(self, sid: int) -> None:
        """Something took a link away from ``sid``'s members or moved one: its heads
        are worked out again when next asked for."""
        self._heads.pop(sid, None)

    def remove(self, sid: int, fid: str) -> None:
        members = self.members_of(sid)
        if fid in members:
            # A new entry: a list is only ever appended to in place (see snapshot()).
            self.members[sid] = _entry([m for m in members if m != fid])
        self._heads.pop(sid, None)

    def heads(self, sid: int) -> tuple[OrderKey, list[tuple[OrderKey, str]]] | None:
        """(the place in effect order of the last member, the members current when it
        begins with their places), or None when the subject has no member."""
        held = self._heads.get(sid)
        if held is None:
            members = self.members_of(sid)
            if not members:
                return None
            keyed = [(self._key(m), m) for m in members]
            last = max(k for k, _ in keyed)
            current, at = self._current, last[0]
            held = self._heads[sid] = (last, [(k, m) for k, m in keyed
                                              if current(k[3], m, at)])
        return held

    def compacted(self, old: SubjectIndex, sids: list[int], nids: np.ndarray,
                  members: list[list[str]]) -> None:
        """Fill this fresh index with the subjects ``sids`` of ``old`` (in the order a
        replay of the compacted journal meets them: the new id of ``sids[i]`` is ``i``),
        their namespace ids renumbered by ``nids`` (old -> new), ``members[i]`` the
        kept members of the i-th in slot order. The heads are worked out on use."""
        assert not self.names  # fresh
        nid_of = {sid: nid for nid, table in old._id.items() for sid in table.values()}
        for new, sid in enumerate(sids):
            name = old.names[sid]
            self._id.setdefault(int(nids[nid_of[sid]]), {})[name] = new
            self.names.append(name)
            if name.startswith(RESERVED_PREFIX):
                self.reserved.append(new)
            self.members.append(_entry(members[new]))

    def reserved_mask(self, subject: GrowArray, slots: int) -> np.ndarray | None:
        """The slot mask of the facts whose subject is reserved (``subject``: each
        slot's subject id, -1 for none), at least ``slots`` long; None when no subject
        is reserved. A slot's subject is set when the slot is made and never changes,
        so the mask is kept until a slot or a subject is added."""
        if not self.reserved:
            return None
        key = (len(subject), len(self.names))
        if self._reserved_mask is None or self._reserved_mask[0] != key:
            # Whether each subject id is reserved, shifted by one (index 0: no subject).
            table = np.zeros(len(self.names) + 1, dtype=bool)
            table[np.asarray(self.reserved, dtype=np.int64) + 1] = True
            mask = np.zeros(max(slots, key[0]), dtype=bool)
            mask[:key[0]] = table[subject.view().astype(np.int64) + 1]
            self._reserved_mask = (key, mask)
        return self._reserved_mask[1]

    # -- checkpoints ------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The keys' tables copied (a subject added later is not in them) and the
        member entries copied at the top; each member list's length taken and its
        prefix cut when the snapshot is encoded (lists are only appended to in place).
        The keys are listed in subject id order, as a replay makes them."""
        keys = {nid: dict(table) for nid, table in self._id.items()}
        members = list(self.members)
        lengths = [1 if isinstance(held, str) else len(held) for held in members]

        def subject_keys() -> list[list[object]]:
            out: list[list[object]] = [[] for _ in members]
            for nid, table in keys.items():
                for subject, sid in table.items():
                    out[sid] = [nid, subject, sid]
            return out

        return {
            "subject_keys": Later(subject_keys),
            "subject_names": list(self.names),
            "by_subject": Later(lambda: [[sid, [held] if isinstance(held, str) else held[:n]]
                                         for sid, (held, n)
                                         in enumerate(zip(members, lengths, strict=True))]),
        }

    def restore(self, snap: Snapshot) -> None:
        self._id = {}
        for nid, subject, sid in snap["subject_keys"]:
            self._id.setdefault(nid, {})[subject] = sid
        self.names = list(snap["subject_names"])
        self.reserved = [i for i, name in enumerate(self.names)
                         if name.startswith(RESERVED_PREFIX)]
        self.members = [[] for _ in self.names]
        for sid, ids in snap["by_subject"]:
            self.members[sid] = _entry(ids)
        self._heads = {}
        self._reserved_mask = None
        self._by_name, self._by_name_upto = {}, 0


def _entry(ids: list[str]) -> str | list[str]:
    """A subject's member entry for the ids ``ids``: the id alone when it is the only one."""
    return ids[0] if len(ids) == 1 else list(ids)
