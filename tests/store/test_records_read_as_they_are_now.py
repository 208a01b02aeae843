"""Recall's k records (``RecordFile.read_each``) are always the file's bytes as they are
now: a record zeroed (forgotten) reads as gone at once, records written since read back,
and a file cut short, by this process or by a writer under a follower, reads as gone
past its end, never as an error or a crash; nothing is read after a close.

(The reads are system calls, not slices of a mapping of the file: a mapped page past a
file's end, or one the disk fails to read, is a bus error that kills the process; a
read's error is ``io`` and the record comes back from the journal.)
"""

from __future__ import annotations

from pathlib import Path

from holomem.log.recordfile import HEADER_SIZE, RecordFile


def _write(records: RecordFile, at: int, bodies: list[bytes]) -> tuple[list[int], list[int]]:
    """Write ``bodies`` back to back from ``at``; their offsets and sizes."""
    offsets, sizes = [], []
    for body in bodies:
        raw = records.encode(at, 1, body)
        records.write(at, raw)
        offsets.append(at)
        sizes.append(len(raw))
        at += len(raw)
    return offsets, sizes


def test_a_read_sees_zeroed_grown_and_truncated_files_as_they_are_now(
        tmp_path: Path) -> None:
    records = RecordFile(str(tmp_path / "text.seg"), store_id=bytes(16), generation=1,
                         envelope=None, read_only=False)
    try:
        first = [f"record {i} ".encode() * 5 for i in range(20)]
        offs, sizes = _write(records, HEADER_SIZE, first)
        assert records.read_each(offs, sizes, None) == first
        records.zero(offs[3], sizes[3])  # a forgotten fact's record
        got = records.read_each(offs, sizes, None)
        assert got[3] is None and got[:3] + got[4:] == first[:3] + first[4:]
        # Records written since: a few, then many.
        end = offs[-1] + sizes[-1]
        few_offs, few_sizes = _write(records, end, [b"one more"])
        assert records.read_each(few_offs, few_sizes, None) == [b"one more"]
        many = [f"later {i} ".encode() * 9 for i in range(200)]
        end = few_offs[-1] + few_sizes[-1]
        many_offs, many_sizes = _write(records, end, many)
        assert records.read_each(many_offs, many_sizes, None) == many
        assert records.read_each(offs[:2], sizes[:2], None) == first[:2]
        # Cut short: what lies past the new end reads as gone.
        records.truncate(offs[10])
        got = records.read_each(offs, sizes, None)
        assert got[:10] == [*first[:3], None, *first[4:10]] and got[10:] == [None] * 10
        assert records.read_each(many_offs[:3], many_sizes[:3], None) == [None] * 3
    finally:
        records.close()
    assert records.read_each(offs[:2], sizes[:2], None) == [None, None]  # closed


def test_a_follower_reads_a_file_the_writer_shrank_as_gone_past_its_end(
        tmp_path: Path) -> None:
    """A follower's file is the writer's, which the writer's open may cut short under
    it: what lies past the new end reads as gone."""
    path = str(tmp_path / "text.seg")
    writer = RecordFile(path, store_id=bytes(16), generation=1, envelope=None,
                        read_only=False)
    follower = None
    try:
        bodies = [f"record {i} ".encode() * 12 for i in range(300)]  # a few pages
        offs, sizes = _write(writer, HEADER_SIZE, bodies)
        follower = RecordFile(path, store_id=bytes(16), generation=1, envelope=None,
                              read_only=True)
        assert follower.read_each(offs, sizes, None) == bodies
        writer.truncate(offs[40])  # the writer's descriptor, not the follower's
        got = follower.read_each(offs, sizes, None)
        assert got[:40] == bodies[:40] and got[40:] == [None] * 260
        assert follower.read_each(offs[-3:], sizes[-3:], None) == [None] * 3
    finally:
        writer.close()
        if follower is not None:
            follower.close()
