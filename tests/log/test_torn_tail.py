"""A torn tail is not an error: opening drops it, says so, keeps the cut bytes, and the
journal goes on.

docs/guarantees.md §6: "A torn tail (power cut mid-append) is detected by checksum and dropped on
open, with a warning." A tail is torn only if its append never returned: each case
here is what a writer that died during (or right after) its last append leaves, so
the watermark does not cover the last transaction (see test_acknowledged_tail.py for
the cleanly closed journal, where the same damage refuses the open). Whatever the
writer cuts is first saved beside the store, and the warning says where (issue 11).

In CI the last frame is cut inside its header at every offset, and in its body at every
``BODY_STRIDE``-th offset and one byte short of its end; ``pytest --exhaustive`` cuts it
at every offset (tests/exhaustive.py).
"""

from __future__ import annotations

import logging
import os
import random

import pytest
import surgery

from holomem.log import Journal
from tests import exhaustive

KEY = bytes(range(32))
SEED = 20261130
#: In CI, one cut in this many inside the last frame's body.
BODY_STRIDE = 5

#: name -> (key, the last transaction, whether it sits alone in a fresh segment).
CASES = {
    "plain": (None, [b"last", b"transaction " * 3], False),
    "compressed": (None, [b"compressible " * 60], False),
    "encrypted": (KEY, [b"secret last", b""], False),
    "alone-in-a-rotated-segment": (None, [random.Random(SEED).randbytes(400), b"last"], True),
}


def _build(store: str, key: bytes | None, last: list[bytes], rotated: bool) -> list[list[bytes]]:
    """Transactions in a closed journal, then ``last`` appended by a writer that died
    right after: the state a crash during the last append leaves, once torn."""
    rng = random.Random(SEED)
    txs = [[rng.randbytes(rng.randrange(1, 200))] for _ in range(6)]
    txs.append(last)
    segment_size = 4096
    with Journal.open(store, key=key, sync="none", segment_size=segment_size) as j:
        for tx in txs[:-1]:
            j.append(tx)
        if rotated:
            # Fill the segment almost up, so that the last transaction starts a new one.
            while j.stats().bytes < segment_size - 300:
                filler = [rng.randbytes(100)]
                j.append(filler)
                txs.insert(-1, filler)
            assert j.stats().segments == 1
    end = os.path.getsize(surgery.segment_paths(store)[0])
    surgery.crashed_append(store, [txs[-1]], key, segment_size)
    assert len(surgery.segment_paths(store)) == (2 if rotated else 1)
    assert surgery.watermark(store) == (1, len(txs) - 1, end)  # it predates the last
    return txs


def _backup_dir(store: str) -> str:
    return store + ".fsck-backup"


@pytest.mark.parametrize("case", list(CASES))
def test_torn_tail_at_every_offset_recovers_previous_transaction(
    tmp_path: object, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    key, last, rotated = CASES[case]
    store = os.path.join(str(tmp_path), "store")
    txs = _build(store, key, last, rotated)
    seg = surgery.segment_paths(store)[-1]
    original = surgery.read(seg)
    frame = surgery.frames(original)[-1]
    assert frame.end == len(original) and frame.seq == len(txs)
    if rotated:
        assert len(surgery.frames(original)) == 1
    if case == "compressed":
        assert frame.flags & surgery.FRAME_FLAG_COMPRESSED
    if case == "encrypted":
        assert frame.flags & surgery.FRAME_FLAG_ENCRYPTED
    earlier = list(enumerate(txs[:-1], start=1))
    crashed = surgery.save_generation(store)
    body = frame.offset + surgery.FRAME_HEADER_SIZE
    cuts = sorted({*range(frame.offset + 1, body + 1),
                   *exhaustive.strided(range(body + 1, frame.end), BODY_STRIDE), frame.end - 1})
    for tried, cut in enumerate(cuts, start=1):
        surgery.restore_generation(store, crashed)
        surgery.write(seg, original[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="holomem.log"):
            j = Journal.open(store, key=key, sync="none")
        with j:
            (problem,) = j.recovery.truncated
            assert (problem.path, problem.offset, problem.tail) == (seg, frame.offset, True)
            assert problem.code.startswith("corrupt")
            # The cut bytes are kept, in a new file each time, and the warning says where.
            (backup,) = j.recovery.backups
            assert backup is not None and os.path.dirname(backup) == _backup_dir(store)
            assert surgery.read(backup) == original[frame.offset : cut]
            assert len(os.listdir(_backup_dir(store))) == tried
            (warning,) = [r.getMessage() for r in caplog.records if "torn tail" in r.getMessage()]
            assert backup in warning and seg in warning, warning
            assert os.path.getsize(seg) == frame.offset  # truncated on disk
            assert j.last_seq == len(txs) - 1
            assert list(j.replay()) == earlier
            assert j.append([b"after recovery"]) == len(txs)
        with Journal.open(store, key=key, read_only=True) as j:
            assert j.recovery.truncated == ()
            assert list(j.replay()) == [*earlier, (len(txs), [b"after recovery"])]
    surgery.restore_generation(store, crashed)
    with Journal.open(store, key=key, read_only=True) as j:
        assert list(j.replay()) == list(enumerate(txs, start=1))


def test_cut_exactly_at_a_frame_boundary_after_a_crash_is_a_clean_shorter_journal(
        tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    txs = _build(store, None, [b"last"], False)
    (seg,) = surgery.segment_paths(store)
    surgery.truncate(seg, surgery.frames(seg)[-1].offset)
    with Journal.open(store, sync="none") as j:
        assert j.recovery.truncated == ()
        assert list(j.replay()) == list(enumerate(txs[:-1], start=1))
        assert j.append([b"next"]) == len(txs)


@pytest.mark.parametrize("tail", ["zeros", "garbage"])
@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_zero_or_garbage_bytes_after_the_last_frame_are_dropped_on_open(
    tmp_path: object, tail: str, key: bytes | None
) -> None:
    store = os.path.join(str(tmp_path), "store")
    txs = _build(store, key, [b"last"], False)
    (seg,) = surgery.segment_paths(store)
    end = os.path.getsize(seg)
    rng = random.Random(SEED)
    for size in (1, 7, 23, 24, 25, 100, 4096):
        junk = bytes(size) if tail == "zeros" else rng.randbytes(size)
        surgery.append(seg, junk)
        with Journal.open(store, key=key, sync="none") as j:
            (problem,) = j.recovery.truncated
            assert (problem.path, problem.offset, problem.tail) == (seg, end, True)
            assert os.path.getsize(seg) == end
            assert list(j.replay()) == list(enumerate(txs, start=1))
        assert os.path.getsize(seg) == end  # closing wrote nothing more
    with Journal.open(store, key=key, sync="none") as j:
        assert j.append([b"more"]) == len(txs) + 1
    with Journal.open(store, key=key, read_only=True) as j:
        assert j.read(len(txs) + 1) == [b"more"]


def test_a_read_only_open_drops_a_torn_tail_without_touching_the_file(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    txs = _build(store, None, [b"last transaction"], False)
    (seg,) = surgery.segment_paths(store)
    frame = surgery.frames(seg)[-1]
    surgery.truncate(seg, frame.offset + 30)
    before = surgery.snapshot(store)
    with Journal.open(store, read_only=True) as j:
        assert [p.offset for p in j.recovery.truncated] == [frame.offset]
        assert list(j.replay()) == list(enumerate(txs[:-1], start=1))
    assert surgery.snapshot(store) == before


def test_a_rotated_segment_with_a_torn_header_is_removed_on_open(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    _, last, rotated = CASES["alone-in-a-rotated-segment"]
    txs = _build(store, None, last, rotated)
    first, second = surgery.segment_paths(store)
    crashed = surgery.save_generation(store)
    # Rotation synced the first segment and then died while writing the second's header.
    for cut in (0, 1, 50, 95):
        surgery.restore_generation(store, crashed)
        surgery.write(second, surgery.read(second)[:cut])
        with Journal.open(store, sync="none", segment_size=4096) as j:
            assert [p.path for p in j.recovery.truncated] == [second]
            assert list(j.replay()) == list(enumerate(txs[:-1], start=1))
            assert not os.path.exists(second)
            assert j.append(last) == len(txs)  # too big for the first segment
            assert j.stats().segments == 2 and os.path.exists(second)
        with Journal.open(store, read_only=True) as j:
            assert list(j.replay()) == list(enumerate(txs, start=1))
    assert os.path.exists(first)
