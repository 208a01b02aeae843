"""Recall reads its k text records together (one read each)
and gets the records one at a time would: a record that does not read back intact is
never served, it comes from the journal — plain and sealed, writer and follower.

``View.records_of`` (over ``TextSegment.read_each``) against ``View.record`` per slot.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, Store
from holomem.api.engine import View
from holomem.api.memory.facts import records
from holomem.log.envelope import Envelope
from holomem.log.recordfile import HEADER_SIZE, RECORD_SIZE, RecordFile
from holomem.projections.text import TextRecord
from tests.store._util import text_segment

KEY = bytes(range(32))
WORDS = ["apple", "river", "moon", "stone", "lamp", "cat"]


def _fill(store: Store) -> None:
    memory = Memory(store, clock=ManualClock(1_000))
    memory.remember_many([
        {"id": f"f{i}", "text": f"{WORDS[i % 6]} {WORDS[(i * 5) % 6]} note {i}",
         **({"entities": ["Ada", f"E{i % 3}"]} if i % 2 else {}),
         **({"metadata": {"n": i}} if i % 3 == 0 else {}),
         **({"namespace": ["u", str(i % 2)]} if i % 4 == 0 else {})}
        for i in range(40)])


def _one_at_a_time(view: View, slots: list[int]) -> list[TextRecord]:
    view._records.clear()  # (so each record is read, not kept)
    return [view.record(s) for s in slots]


def _answers(store: Store) -> list[list[records.FactRecord]]:
    memory = Memory(store, clock=ManualClock(2_000))
    return [[r.fact for r in memory.recall(w, k=10)] for w in WORDS]


def _damage(seg: str) -> None:
    """Flip a byte at seven places spread over the records (never the file's header)."""
    with open(seg, "r+b") as f:
        data = bytearray(f.read())
        first = HEADER_SIZE + RECORD_SIZE
        for at in range(first, len(data), max(1, (len(data) - first) // 7)):
            data[at] ^= 0x5A
        f.seek(0)
        f.write(bytes(data))


def _unreadable(store: Store) -> int:
    """How many live records do not read back intact from the text segment."""
    def count(view: View) -> int:
        slots = [int(s) for s in view.live_slots()]
        seqs = [view.state.catalog.seq.item(s) for s in slots]
        return sum(r is None for r in view.state.text.read_each(slots, seqs))
    return store.read(count)


def _check_store(path: Path, key: bytes | None) -> None:
    with Store.open(path, sync="none", key=key) as store:
        _fill(store)
        expected = _answers(store)

        def same(view: View) -> None:
            slots = [int(s) for s in view.live_slots()[::-1]]  # any order, not ascending
            want = _one_at_a_time(view, slots)
            view._records.clear()  # (so each record is read, not kept)
            assert view.records_of(slots) == want
            assert view.records_of(slots[:3] + slots[:3]) == want[:3] + want[:3]
        store.read(same)
    _damage(text_segment(path))
    with Store.open(path, read_only=True, key=key) as follower:  # reads, never repairs
        damaged = _unreadable(follower)
        assert damaged > 0
        assert _answers(follower) == expected
    with Store.open(path, sync="none", key=key) as store:  # a sealed file: heals on read
        assert _answers(store) == expected
        assert _unreadable(store) < damaged  # the records recall read were rewritten
        assert _answers(store) == expected


def test_recall_over_a_damaged_text_segment_serves_the_journals_text(tmp_path: Path) -> None:
    _check_store(tmp_path / "plain", None)


def test_recall_over_a_damaged_sealed_text_segment_serves_the_journals_text(
        tmp_path: Path) -> None:
    _check_store(tmp_path / "sealed", KEY)


def test_records_read_together_past_the_end_of_a_truncated_file(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        _fill(store)
        expected = _answers(store)
    seg = text_segment(path)
    os.truncate(seg, os.path.getsize(seg) // 2)
    with Store.open(path, read_only=True) as follower:
        assert _unreadable(follower) > 0
        assert _answers(follower) == expected


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=12),
       flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
       cut=st.integers(0, 60), sealed=st.booleans())
def test_a_compactions_read_of_many_records_gives_each_records_own_answer(
        tmp_path: Path, bodies: list[bytes], flips: list[tuple[int, int]], cut: int,
        sealed: bool) -> None:
    """``RecordFile.decode_many`` (what a compaction's ``read_many`` verifies a span
    with) answers for each record exactly what ``decode`` answers for it alone: a
    damaged header or body, a record cut short by the end of the read, a sealed file."""
    path = tmp_path / f"text-{len(bodies)}-{cut}-{sealed}.seg"
    if path.exists():
        path.unlink()
    records = RecordFile(str(path), store_id=bytes(16), generation=1,
                         envelope=Envelope(KEY) if sealed else None, read_only=False)
    try:
        offsets, raw = [], b""
        for body in bodies:
            offsets.append(HEADER_SIZE + len(raw))
            raw += records.encode(offsets[-1], 7, body)
        data = bytearray(raw)
        for at, mask in flips:
            data[at % len(data)] ^= mask
        span = bytes(data[:max(0, len(data) - cut)])
        sizes = [records.record_size(len(b)) for b in bodies]
        starts = [o - HEADER_SIZE for o in offsets]
        seqs = [7] * len(bodies)
        assert records.decode_many([span] * len(starts), starts, sizes, offsets, seqs) == [
            records.decode(span[s:s + n], o, 7) for s, n, o in zip(starts, sizes, offsets,
                                                                  strict=True)]
    finally:
        records.close()
