"""Sequence numbers start at 1 and strictly increase by one, across rotation and reopen."""

from __future__ import annotations

import os
import random

import surgery

from holomem.log import Journal

SEED = 1117


def test_sequence_numbers_strictly_increase_across_rotation_and_many_reopens(
    tmp_path: object,
) -> None:
    store = os.path.join(str(tmp_path), "store")
    rng = random.Random(SEED)
    print(f"seed {SEED}")
    expected: list[tuple[int, list[bytes]]] = []
    for cycle in range(25):
        size = rng.choice([4096, 4096, 5000, 8192])  # the limit may change between opens
        sync_mode = rng.choice(["none", "full", "batch"])
        with Journal.open(store, sync=sync_mode, segment_size=size) as j:
            assert j.last_seq == len(expected)
            for _ in range(rng.randrange(0, 12)):
                tx = [rng.randbytes(rng.randrange(0, 900)) for _ in range(rng.randrange(1, 3))]
                seq = j.append(tx)
                assert seq == len(expected) + 1, (cycle, seq)
                expected.append((seq, tx))
            assert j.last_seq == len(expected)
    segments = surgery.segment_paths(store)
    assert len(segments) >= 5  # rotation really happened, many times
    # On disk: every frame's sequence number, segment after segment, is 1, 2, 3, ...
    on_disk = [f.seq for seg in segments for f in surgery.frames(seg)]
    assert on_disk == list(range(1, len(expected) + 1))
    first_seqs = [int.from_bytes(surgery.read(s)[48:56], "little") for s in segments]
    assert first_seqs[0] == 1
    assert first_seqs == sorted(first_seqs)
    with Journal.open(store, read_only=True) as j:
        assert list(j.replay()) == expected
        assert j.stats().segments == len(segments)
        assert (j.first_seq, j.last_seq) == (1, len(expected))


def test_reopening_an_empty_rotated_segment_continues_the_sequence(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", segment_size=4096) as j:
        while j.stats().bytes + 1100 <= 4096:
            j.append([os.urandom(1000)])
        last = j.last_seq + 1
    # The next append rotates; its writer dies, and its frame never reaches the new
    # segment (a crash after the rotation): an empty last segment.
    surgery.crashed_append(store, [[os.urandom(1000)]], segment_size=4096)
    assert len(surgery.segment_paths(store)) == 2
    surgery.truncate(surgery.segment_paths(store)[-1], surgery.SEGMENT_HEADER_SIZE)
    with Journal.open(store, sync="none", segment_size=4096) as j:
        assert j.last_seq == last - 1
        assert j.append([b"next"]) == last
    with Journal.open(store, read_only=True) as j:
        assert [s for s, _ in j.replay()] == list(range(1, last + 1))
