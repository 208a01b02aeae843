"""A read-only follower sees the writer's new transactions after refresh(), including
across segment rotations, and never writes.

docs/contract.md §2: "Store.open(path, read_only=True) opens a follower that never writes and can
refresh() to see the writer's new events."
"""

from __future__ import annotations

import os

import pytest
import surgery

from holomem.errors import ReadOnlyError
from holomem.log import Journal, Refreshed


def test_a_follower_sees_new_transactions_after_refresh_across_rotations(
    tmp_path: object,
) -> None:
    store = os.path.join(str(tmp_path), "store")
    appended: dict[int, list[bytes]] = {}
    with Journal.open(store, sync="none", segment_size=4096) as writer:
        for i in range(2):
            appended[writer.append([f"early {i}".encode()])] = [f"early {i}".encode()]
        follower = Journal.open(store, read_only=True)
        with follower:
            assert follower.last_seq == 2
            # Nothing new: an empty catch-up.
            assert follower.refresh() == Refreshed(False, 3)
            assert list(follower.replay(3)) == []
            # New frames in the same segment.
            for i in range(3):
                tx = [f"same segment {i}".encode()]
                appended[writer.append(tx)] = tx
            assert follower.last_seq == 2  # not before refresh
            assert follower.refresh() == Refreshed(False, 3)
            assert list(follower.replay(3)) == [(s, appended[s]) for s in (3, 4, 5)]
            # Enough to rotate twice and more: the follower picks up the new segments.
            segments_before = writer.stats().segments
            while writer.stats().segments < segments_before + 3:
                tx = [os.urandom(900)]
                appended[writer.append(tx)] = tx
            assert follower.refresh() == Refreshed(False, 6)
            assert follower.last_seq == writer.last_seq
            assert follower.stats().segments == writer.stats().segments
            assert dict(follower.replay()) == appended
            assert {s: follower.read(s) for s in appended} == appended
            with pytest.raises(ReadOnlyError) as info:
                follower.append([b"no"])
            assert info.value.code == "read_only"
            # A rotation that has just happened, the new segment still empty.
            while writer.stats().segments == follower.stats().segments:
                tx = [os.urandom(900)]
                appended[writer.append(tx)] = tx
            follower.refresh()
            assert follower.last_seq == writer.last_seq
            tx = [b"into the fresh segment"]
            appended[writer.append(tx)] = tx
            assert follower.refresh().from_seq == writer.last_seq
            assert follower.read(writer.last_seq) == tx


def test_a_follower_stops_at_a_frame_the_writer_is_still_writing(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as writer:
        writer.append([b"one"])
        with Journal.open(store, read_only=True) as follower:
            writer.append([b"two, being written right now"])
            seg = surgery.segment_paths(store)[-1]
            whole = surgery.read(seg)
            second = surgery.frames(whole)[-1]
            # The follower looks while only half of the frame has reached the file.
            surgery.truncate(seg, second.offset + second.size // 2)
            assert follower.refresh() == Refreshed(False, 2)
            assert follower.last_seq == 1
            surgery.write(seg, whole)  # the write completes
            assert follower.refresh() == Refreshed(False, 2)
            assert list(follower.replay(2)) == [(2, [b"two, being written right now"])]
