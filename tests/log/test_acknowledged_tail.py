"""An acknowledged transaction is never taken for a torn tail (issue 11, item 1).

A torn tail can only come from an append that never returned. The watermark
(FORMAT.md §7.1), written whenever the writer knows everything is on disk (its open
after recovery, its close, a compaction's new generation), names the last transaction
that was durable: damage at or before it refuses the open with the file and offset —
for the writer and for followers — and fsck reports it, says it was acknowledged and
what to do. Before the watermark, a flipped bit in the last frame of a cleanly closed
store was cut off as a torn tail: a forgotten fact came back, and fsck said "clean".
"""

from __future__ import annotations

import os

import pytest
import surgery

from holomem import ManualClock, Memory, Store
from holomem.errors import CorruptError, HeaderError, MissingSegmentError, TruncatedError
from holomem.fsck import check
from holomem.log import Journal

KEY = bytes(range(32))
CLOCK = 1_700_000_000_000


def _memory_store(path: str, key: bytes | None) -> None:
    """Three facts, then a forget as the last transaction; closed cleanly."""
    with Store.open(path, key=key) as store:
        memory = Memory(store, clock=ManualClock(CLOCK))
        for i in range(3):
            memory.remember(id=f"fact-{i}", text=f"the lighthouse keeper {i} logged the storm")
        report = memory.forget({"ids": ["fact-1"]})
        assert list(report.removed) == ["fact-1"]


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_a_flipped_bit_in_the_forget_that_closed_the_store_refuses_the_open(
        tmp_path: object, key: bytes | None) -> None:
    path = os.path.join(str(tmp_path), "store")
    _memory_store(path, key)
    (seg,) = surgery.segment_paths(path)
    forget = surgery.frames(seg)[-1]
    assert surgery.watermark(path) == (1, forget.seq, forget.end)  # written at close
    surgery.flip_bit(seg, forget.offset + surgery.FRAME_HEADER_SIZE + forget.length // 2, 2)
    damaged = surgery.read(seg)
    for read_only in (False, True):
        with pytest.raises(CorruptError) as info:
            Store.open(path, key=key, read_only=read_only)
        assert info.value.code == "corrupt.checksum"
        assert (info.value.path, info.value.offset) == (seg, forget.offset)
        assert f"transaction {forget.seq} was durable" in info.value.message
    assert surgery.read(seg) == damaged  # nothing cut: the forgotten fact cannot come back
    report = check(path, key=key)
    assert not report.clean and report.exit_code == 4
    (finding,) = report.findings
    assert (finding.code, finding.path, finding.offset) == ("corrupt.checksum", seg,
                                                            forget.offset)
    assert not finding.repairable
    assert "acknowledged" in finding.message and "Restore the store from a backup" in \
        finding.message
    # A repair cannot fix it, and leaves every byte alone.
    assert check(path, key=key, repair=True).exit_code == 4
    assert surgery.read(seg) == damaged
    # What fsck says to do, to give the transaction up, does what it says: the cut
    # bytes are kept, and the store opens with what was before them.
    os.unlink(surgery.watermark_path(path))
    repaired = check(path, key=key, repair=True)
    assert repaired.exit_code == 1, repaired
    (torn,) = [f for f in repaired.findings if f.code == "journal.torn"]
    assert torn.repaired and torn.backup is not None
    assert surgery.read(torn.backup) == damaged[forget.offset:]
    with Store.open(path, key=key) as store:
        memory = Memory(store, clock=ManualClock(CLOCK))
        assert memory.get("fact-0") is not None and memory.get("fact-2") is not None


def test_a_journal_cut_at_a_frame_boundary_after_a_clean_close_is_refused(
        tmp_path: object) -> None:
    """No bad frame shows this one: the transactions are just gone."""
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        for i in range(5):
            j.append([f"transaction {i}".encode()])
    (seg,) = surgery.segment_paths(store)
    last = surgery.frames(seg)[-1]
    surgery.truncate(seg, last.offset)
    for read_only in (False, True):
        with pytest.raises(TruncatedError) as info:
            Journal.open(store, read_only=read_only)
        assert (info.value.path, info.value.offset) == (seg, last.offset)
    assert os.path.getsize(seg) == last.offset


def test_a_lost_last_segment_after_a_clean_close_is_refused(tmp_path: object) -> None:
    """Once undetectable (FORMAT.md §7): nothing but the watermark names the last segment."""
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", segment_size=4096) as j:
        while j.stats().segments < 3:
            j.append([os.urandom(700)])
    last = surgery.segment_paths(store)[-1]
    os.unlink(last)
    for read_only in (False, True):
        with pytest.raises(MissingSegmentError) as info:
            Journal.open(store, read_only=read_only, segment_size=4096)
        assert info.value.path == last


def test_a_damaged_watermark_refuses_the_open_and_fsck_repairs_it(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Store.open(store) as s:
        s.add_document("a", "one document")
    wm = surgery.watermark_path(store)
    surgery.flip_bit(wm, 30, 1)
    for read_only in (False, True):
        with pytest.raises(HeaderError) as info:
            Store.open(store, read_only=read_only)
        assert (info.value.path, info.value.offset) == (wm, 0)
    report = check(store, repair=True)
    assert report.exit_code == 1, report
    (finding,) = report.findings
    assert finding.path == wm and finding.repaired and finding.backup is not None
    with Store.open(store) as s:
        assert s.ids() == ["a"]
    assert surgery.watermark(store) == (1, 1, os.path.getsize(surgery.segment_paths(store)[0]))
    assert check(store).clean


def test_the_writer_s_open_and_a_compaction_record_what_is_durable(tmp_path: object) -> None:
    """What the watermark says at each moment a writer knows it (not only at close)."""
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        j.append([b"one"])
        j.append([b"two"])
    end = os.path.getsize(surgery.segment_paths(store)[0])
    assert surgery.watermark(store) == (1, 2, end)
    surgery.crashed_append(store, [[b"three"]])  # its open recorded 2; it died after 3
    assert surgery.watermark(store) == (1, 2, end)
    j = Journal.open(store)  # the open settles what the crash left: 3 is durable now
    try:
        seg = surgery.segment_paths(store)[0]
        assert surgery.watermark(store) == (1, 3, os.path.getsize(seg))
        rewrite = j.begin_rewrite()
        rewrite.append([b"the live state"])
        j.switch(rewrite)
        # Before the switch, in the new generation: all of it is durable.
        new_seg = surgery.segment_paths(store)[0]
        assert new_seg != seg
        assert surgery.watermark(store) == (1, 4, os.path.getsize(new_seg))
    finally:
        j.close()
