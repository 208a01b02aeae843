"""A run of new facts applied to the fact index at once, a column at a time.

Owns: :func:`add_run`, which gives a fresh run of documents their rows of a
:class:`~holomem.projections.facts.FactIndex` and applies the facts among them —
exactly the state the index's ``apply`` of each document's event, then of its
FactAdded, would leave (tests/replay/test_bulk_apply.py) — with the columns built as
arrays and only the facts that hold more than their columns (a subject, a time to
live, a request, a confidence, links) taken one at a time. Part of
:meth:`ProjectionState.apply_all`'s bulk path. Imports numpy, :mod:`holomem.events`
and the fact index.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

import numpy as np

from holomem.events import FactAdded
from holomem.projections.facts import FactIndex
from holomem.projections.temporal import UNSET, end_time, unset_if_none

#: A FactAdded's columns (add_run reads each for every fact, a column at a time).
_TIMES = [attrgetter(name) for name in ("ingest_time", "event_time", "valid_from", "valid_to",
                                        "ttl_ms")]
_NAMESPACE = attrgetter("namespace")
_DIGEST = attrgetter("digest")
#: What a fact may hold beyond its columns and namespace, and a fact that holds none.
_SIDE = attrgetter("subject", "ttl_ms", "confidence", "requested", "supersedes",
                   "superseded_by", "turn")
_NO_SIDE = (None, None, None, (), (), (), None)


def add_run(index: FactIndex, first: int, count: int, ks: Sequence[int],
            es: list[FactAdded]) -> None:
    """Rows of ``index`` for ``count`` new documents in slots ``first``.., and the facts
    among them (``es[i]`` is the fact of slot ``first + ks[i]``, ``ks`` ascending): the
    state ``apply`` of each document's event, then its FactAdded, would leave."""
    assert index.is_fact.n == first
    is_fact = np.zeros(count, dtype=np.bool_)
    ingest = np.zeros(count, dtype=np.int64)
    times = np.full((5, count), UNSET, dtype=np.int64)  # event, from, to, end, eff
    digest = np.zeros(count, dtype=np.uint64)
    # (ks ascend: as many as the documents is every one of them.)
    at: slice | np.ndarray = (slice(0, count) if len(ks) == count
                              else np.array(ks, dtype=np.intp))
    nids = index.namespaces.add_run(first, count, ks, list(map(_NAMESPACE, es)))
    if es:
        ing, event, valid_from, valid_to, ttl = [list(map(get, es)) for get in _TIMES]
        is_fact[at] = True
        ingest[at] = ing
        # (_t, end_time and effective_time, without a call per fact; a column of
        # Nones is left UNSET as it is.)
        for row, col in ((0, event), (1, valid_from), (2, valid_to)):
            if col.count(None) != len(col):
                times[row, at] = [UNSET if t is None else t for t in col]
        unbounded = ttl.count(None) == len(ttl)
        times[3, at] = (times[2, at] if unbounded else
                        [unset_if_none(end_time(e.valid_to, e.ingest_time, e.ttl_ms))
                         if e.ttl_ms is not None else UNSET if e.valid_to is None
                         else e.valid_to for e in es])
        times[4, at] = (ingest[at] if valid_from.count(None) == event.count(None) == len(es)
                        else [f if f is not None else t if t is not None else i
                              for f, t, i in zip(valid_from, event, ing, strict=True)])
        digests = list(map(_DIGEST, es))
        digest[at] = np.frombuffer(
            b"".join(digests) if set(map(len, digests)) == {8}
            else b"".join(d[:8].ljust(8, b"\0") for d in digests), dtype="<u8")
        if not (unbounded and valid_from.count(None) == valid_to.count(None) == len(es)):
            index.windows += sum(1 for f, t, x in zip(valid_from, valid_to, ttl, strict=True)
                                 if f is not None or t is not None or x is not None)
    index.is_fact.extend(is_fact)
    index.ingest.extend(ingest)
    for col_, values in zip((index.event, index.valid_from, index.valid_to, index.end,
                             index.eff), times, strict=True):
        col_.extend(values)
    index.subject.extend(np.full(count, -1, dtype=np.int32))
    index.digest.extend(digest)
    # A column this function does not know of would be left short: fail loudly.
    assert all(len(col) == first + count for col in index.columns())
    if es:
        index.facts += len(es)
        index.max_eff = max(index.max_eff, int(times[4, at].max()))
    ids, slot_of = index.catalog.ids, index.catalog.slot
    seq = index.catalog.seq.item(first) if count else 0  # (one transaction's run)
    # Only facts with a subject, a time to live, a confidence, links or a turn need more
    # than the namespace and the columns.
    for j in [j for j, side in enumerate(map(_SIDE, es)) if side != _NO_SIDE]:
        k, e, nid = ks[j], es[j], nids[j]
        slot = first + k
        fid = ids[slot]
        assert fid is not None
        sid = index.side_tables(slot, fid, nid, e)
        # One at a time, a fact links only to documents already applied: those in
        # earlier slots.
        for pred in e.supersedes:
            at_pred = slot_of(pred)
            if at_pred < slot:
                index.link(fid, pred, e.ingest_time, sid, (slot, at_pred))
        for succ in e.superseded_by:
            if slot_of(succ) < slot:
                index.link(succ, fid, e.ingest_time, sid)
        if sid >= 0:  # (its place in effect order, from the columns)
            key = (times.item(4, k), e.ingest_time, seq, slot)
            index.subject_index.added(sid, fid, e.supersedes, key)
