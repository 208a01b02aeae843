"""The fact index of a compacted generation, renumbered from the old one's.

Owns: :func:`compacted`, which fills a fresh :class:`~holomem.projections.facts.FactIndex`
with the kept facts of an old one — exactly what a replay of the journal a compaction
wrote builds (tests/purge/test_compacted_state.py, tests/purge/test_purged_state.py),
without a FactAdded applied again. Part of :meth:`ProjectionState.compacted`.
Imports numpy and the fact index (whose parts renumber their own tables).

What the replay does, and so what this must give: the compaction writes each kept
fact once, in slot order — its times, subject, namespace, request, confidence and
time to live and turn on its FactAdded (no link), then its feedback — and then every link in
the order of the old index's ``all_links()``. So:

- the per-slot columns are the old rows of the kept slots (a document that is not a
  fact has a new slot's values);
- a namespace or a subject is numbered when its first kept fact is met;
- the tables keyed by fact (request, feedback, confidence, time to live, turn) are in the
  new slot order, whatever order the old history put them in (a confidence set on an
  older fact later, a fact whose document moved to a new slot);
- the successor table (``supersedes``) keeps the old order, which ``all_links()``
  walks; the predecessor table is built in the order that walk meets its keys;
- the link slots and the subjects' heads are built on first use, as after a replay.
"""

from __future__ import annotations

import numpy as np

from holomem.projections.base import GrowArray, Kept, compaction_check
from holomem.projections.facts import FactIndex
from holomem.projections.temporal import UNSET


def compacted(new: FactIndex, old: FactIndex, kept: Kept) -> None:
    """Fill the fresh index ``new`` (whose catalog is the compacted one already) with
    the facts of the documents ``kept`` of ``old``."""
    assert not new.is_fact.n  # fresh
    n = len(kept.slots)
    is_fact = old.is_fact.view()[kept.slots]
    new_slots = np.flatnonzero(is_fact)
    old_slots = kept.slots[new_slots]
    new.is_fact.extend(is_fact)
    for name, default in (("ingest", 0), ("event", UNSET), ("valid_from", UNSET),
                          ("valid_to", UNSET), ("end", UNSET), ("eff", UNSET), ("digest", 0)):
        col: GrowArray = getattr(new, name)
        values = np.full(n, default, dtype=col.dtype)
        values[new_slots] = getattr(old, name).view()[old_slots]
        col.extend(values)
    nids = new.namespaces.compacted(old.namespaces, old_slots, new_slots, n)
    old_sids = old.subject.view()[old_slots]
    distinct, first = np.unique(old_sids[old_sids >= 0], return_index=True)
    sids = distinct[np.argsort(first)].tolist()  # the order a replay meets them in
    renumber = np.full(len(old.subject_names) + 1, -1, dtype=np.int32)  # [-1]: none
    renumber[sids] = np.arange(len(sids), dtype=np.int32)
    subject = np.full(n, -1, dtype=np.int32)
    subject[new_slots] = renumber[old_sids]
    new.subject.extend(subject)
    # Every column (whatever columns the index grows) covers every slot: one this
    # function does not fill would fail here, not answer wrongly later.
    compaction_check(all(len(v) == n for v in vars(new).values() if isinstance(v, GrowArray)),
                     "a fact index column does not cover every kept slot")
    ids = new.catalog.ids
    fact_ids: list[str] = [ids[s] for s in new_slots.tolist()]  # type: ignore[misc]
    members: list[list[str]] = [[] for _ in sids]
    for fid, sid in zip(fact_ids, subject[new_slots].tolist(), strict=True):
        if sid >= 0:
            members[sid].append(fid)
    new.subject_index.compacted(old.subject_index, sids, nids, members)
    new.notes.compacted(old.notes, fact_ids)
    new.turns.compacted(old.turns, fact_ids)
    new.ttl = {f: old.ttl[f] for f in fact_ids if f in old.ttl}
    # A link joins two stored facts (a removal takes its links along), so every link
    # is kept.
    new.supersession.compacted(old.supersession)
    # The old counts are of stored facts and their links: all of them are kept.
    compaction_check(new.links == old.links and len(fact_ids) == old.facts,
                     "the kept facts or links differ in number from the stored ones")
    new.facts = len(fact_ids)
    windowed = ((new.valid_from.view()[new_slots] != UNSET)
                | (new.valid_to.view()[new_slots] != UNSET))
    new.windows = int(windowed.sum()) + sum(
        1 for f, w in zip(fact_ids, windowed.tolist(), strict=True) if not w and f in new.ttl)
    if len(new_slots):
        new.max_eff = int(new.eff.view()[new_slots].max())
