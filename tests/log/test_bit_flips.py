"""A single flipped bit anywhere in a journal is detected; it never changes what is read.

docs/guarantees.md §6: corruption that is not a torn tail is never silently skipped: open fails
with an error naming the segment and the offset. In a cleanly closed journal that
holds for every byte, the last frame's included: the watermark written at close says
every transaction was durable (issue 11, item 1). Only when the writer crashed after
its last append (the watermark predates the last frame) is damage in the last frame
of the last segment indistinguishable from a torn write, and dropped as one.
"""

from __future__ import annotations

import os
import random

import pytest
import surgery

from holomem.errors import CorruptError
from holomem.log import Journal
from holomem.log.reader import Problem
from tests import exhaustive

SEED = 7031
KEY = bytes(range(32))
#: In CI, one body byte in this many (a prime, so that the phase moves across frames).
BODY_STRIDE = 11


#: closed: the journal was closed cleanly after its last append; crashed: the writer
#: died right after its last append returned (the state a crash leaves).
STATES = ["closed", "crashed"]


def _build(store: str, key: bytes | None, state: str) -> list[tuple[int, list[bytes]]]:
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    with Journal.open(store, key=key, sync="none", segment_size=4096) as j:
        while j.stats().segments < 3:
            n = rng.randrange(1, 3)
            j.append([rng.randbytes(rng.randrange(0, 700)) for _ in range(n)])
        # A few frames in the last segment too, so that damage before its tail
        # is distinguishable from a torn tail there.
        for _ in range(2):
            j.append([rng.randbytes(rng.randrange(1, 200))])
    last = [rng.randbytes(rng.randrange(1, 200))]
    if state == "crashed":
        surgery.crashed_append(store, [last], key, segment_size=4096)
    else:
        with Journal.open(store, key=key, sync="none", segment_size=4096) as j:
            j.append(last)
    with Journal.open(store, key=key, read_only=True) as j:
        replayed = list(j.replay())
    assert replayed[-1] == (len(replayed), last)
    segment, durable, _ = surgery.watermark(store) or (0, 0, 0)
    assert (segment, durable) == (3, len(replayed) if state == "closed" else len(replayed) - 1)
    return replayed


def _damaged_structure(seg: str, data: bytes, offset: int) -> int:
    """Start offset of the structure (segment header or frame) holding byte ``offset``."""
    if offset < surgery.SEGMENT_HEADER_SIZE:
        return 0
    for frame in surgery.frames(data):
        if frame.offset <= offset < frame.end:
            return frame.offset
    raise AssertionError(f"{seg}: offset {offset} is in no frame")


def _sampled(data: bytes, last_segment: bool) -> list[int]:
    """The offsets of one segment that are damaged: every one in the exhaustive run; in
    CI every header byte, the whole last frame of the last segment, and a stride through
    every other body that starts one byte later in each frame."""
    if exhaustive.on():
        return list(range(len(data)))
    frames = surgery.frames(data)
    out = set(range(surgery.SEGMENT_HEADER_SIZE))
    for i, frame in enumerate(frames):
        body = frame.offset + surgery.FRAME_HEADER_SIZE
        out.update(range(frame.offset, body))
        if last_segment and i == len(frames) - 1:
            out.update(range(body, frame.end))
        elif frame.length:
            out.update(exhaustive.strided(range(body, frame.end), BODY_STRIDE, i))
            out.update((body, frame.end - 1))
    return sorted(out)


Observed = tuple[list[tuple[int, list[bytes]]], tuple[Problem, ...]]


def _observe(store: str, key: bytes | None,
             expected: list[tuple[int, list[bytes]]]) -> Observed | CorruptError:
    """Open read-only and read everything; return the error or what was read."""
    try:
        with Journal.open(store, key=key, read_only=True) as j:
            replayed = list(j.replay())
            reads = [(seq, j.read(seq)) for seq, _ in replayed]
            assert replayed == reads
            assert len(replayed) <= len(expected)
            return replayed, j.recovery.truncated
    except CorruptError as exc:
        return exc


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_a_flipped_bit_in_any_byte_of_any_segment_is_detected_and_located(
    tmp_path: object, key: bytes | None, state: str
) -> None:
    store = os.path.join(str(tmp_path), "store")
    expected = _build(store, key, state)
    segments = surgery.segment_paths(store)
    assert len(segments) == 3
    last_seg = segments[-1]
    last_frame = surgery.frames(last_seg)[-1]
    refused = tolerated = tried = 0
    for seg in segments:
        original = surgery.read(seg)
        for offset in _sampled(original, seg == last_seg):
            tried += 1
            # Every byte, with the bit chosen by position so that all eight bit
            # positions are exercised in every field.
            bit = (offset * 5 + len(original)) % 8
            surgery.write(seg, surgery.flipped(original, offset, bit))
            start = _damaged_structure(seg, original, offset)
            # Only where the writer may have died mid-append: never in a closed journal.
            in_tail = state == "crashed" and seg == last_seg and start == last_frame.offset
            outcome = _observe(store, key, expected)
            where = f"{os.path.basename(seg)} byte {offset} bit {bit}"
            if isinstance(outcome, CorruptError):
                assert not in_tail, f"{where}: a torn-looking tail refused the open: {outcome}"
                assert outcome.code.startswith("corrupt"), where
                assert (outcome.path, outcome.offset) == (seg, start), (where, outcome)
                refused += 1
            else:
                assert in_tail, f"{where}: damage before the tail was not detected"
                replayed, truncated = outcome
                assert replayed == expected[:-1], where
                assert [(p.path, p.offset, p.tail) for p in truncated] == [
                    (seg, start, True)], where
                tolerated += 1
        surgery.write(seg, original)
    torn = last_frame.size if state == "crashed" else 0
    assert tolerated == torn
    assert refused == tried - torn
    if exhaustive.on():
        assert tried == sum(os.path.getsize(s) for s in segments)
    with Journal.open(store, key=key, read_only=True) as j:
        assert list(j.replay()) == expected


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_every_bit_of_the_last_frame_and_the_headers_is_checked_and_the_writer_truncates(
    tmp_path: object, key: bytes | None, state: str
) -> None:
    store = os.path.join(str(tmp_path), "store")
    expected = _build(store, key, state)
    segments = surgery.segment_paths(store)
    last_seg = segments[-1]
    original = surgery.read(last_seg)
    saved = surgery.save_generation(store)
    last_frame = surgery.frames(original)[-1]
    # Every bit of the last frame (in CI every byte, one bit each: exhaustive.bits).
    # After a crash, the writer drops it as a torn tail, truncates the file there (the
    # cut bytes saved beside the store), and the next transaction takes its sequence
    # number. After a clean close, it was durable: the writer refuses the open, at the
    # frame, and changes nothing.
    for offset in range(last_frame.offset, last_frame.end):
        for bit in exhaustive.bits(offset):
            surgery.restore_generation(store, saved)
            damaged = surgery.flipped(original, offset, bit)
            surgery.write(last_seg, damaged)
            if state == "closed":
                with pytest.raises(CorruptError) as info:
                    Journal.open(store, key=key, sync="none")
                assert (info.value.path, info.value.offset) == (last_seg, last_frame.offset)
                assert "durable" in info.value.message
                assert surgery.read(last_seg) == damaged
                continue
            with Journal.open(store, key=key, sync="none") as j:
                assert [p.offset for p in j.recovery.truncated] == [last_frame.offset]
                (backup,) = j.recovery.backups
                assert backup is not None and surgery.read(backup) == damaged[last_frame.offset:]
                assert os.path.getsize(last_seg) == last_frame.offset
                assert list(j.replay()) == expected[:-1]
                assert j.append([b"replacement"]) == len(expected)
    surgery.restore_generation(store, saved)
    # Every bit of every segment header and of every frame header: refused, and
    # nothing is truncated or rewritten. In the last segment, where the writer
    # would truncate a torn tail, the opens are the writer's.
    # (In CI one bit of each byte, a different one in each structure: exhaustive.bits.)
    structure = 0
    for seg in segments:
        writer = seg == last_seg
        data = surgery.read(seg)
        starts = [(0, surgery.SEGMENT_HEADER_SIZE)] + [
            (f.offset, surgery.FRAME_HEADER_SIZE) for f in surgery.frames(data)
            if not (seg == last_seg and f.offset == last_frame.offset)]
        for start, size in starts:
            structure += 1
            for offset in range(start, start + size):
                for bit in exhaustive.bits(offset - start, structure):
                    damaged = surgery.flipped(data, offset, bit)
                    surgery.write(seg, damaged)
                    with pytest.raises(CorruptError) as info:
                        Journal.open(store, key=key, sync="none", read_only=not writer)
                    assert (info.value.path, info.value.offset) == (seg, start)
                    assert surgery.read(seg) == damaged  # refused, not repaired
        surgery.write(seg, data)


@pytest.mark.parametrize("span", [1, 2, 3, 4, 10])
@pytest.mark.parametrize("fill", ["zeros", "garbage"])
def test_a_damaged_block_spanning_several_frames_before_the_tail_is_refused(
    tmp_path: object, span: int, fill: str
) -> None:
    # A lost or garbled disk block covers many small frames at once; the valid frames
    # after it prove that it is damage, not a torn write, however many it spans.
    store = os.path.join(str(tmp_path), "store")
    rng = random.Random(SEED)
    with Journal.open(store, sync="none") as j:
        for i in range(30):
            j.append([f"transaction {i}".encode(), rng.randbytes(rng.randrange(0, 40))])
    (seg,) = surgery.segment_paths(store)
    original = surgery.read(seg)
    frames = surgery.frames(original)
    for first in (0, 5, 29 - span):
        start = frames[first].offset + 3
        end = frames[first + span - 1].end - 2
        block = bytes(end - start) if fill == "zeros" else rng.randbytes(end - start)
        damaged = original[:start] + block + original[end:]
        surgery.write(seg, damaged)
        for read_only in (True, False):
            with pytest.raises(CorruptError) as info:
                Journal.open(store, read_only=read_only, sync="none")
            assert (info.value.path, info.value.offset) == (seg, frames[first].offset)
            assert surgery.read(seg) == damaged  # nothing truncated
    surgery.write(seg, original)
