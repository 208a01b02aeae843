"""Refiling: transactions copied into a new generation as bytes (``Journal.refile``), the
log's half of a frame-level purge (issue 33).

A refiled transaction reads back with the same payloads under its new sequence
number, in a new segment with a new salt (and, encrypted, sealed to its new place); the
transactions not refiled are nowhere in the new generation, not even inside a zstd
frame; a frame that does not verify is never copied; refiled and appended
transactions number on one sequence; the journal reopens clean.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from holomem.errors import CorruptError, InvalidError, NotFoundError
from holomem.log import Journal
from tests.log import surgery
from tests.purge import markers

KEY = bytes(range(32))


def _payloads(i: int) -> list[bytes]:
    # big and repetitive enough to be compressed: the marker is not in the file as such
    return [f"marker-{i:03d} ".encode() * 40, f"second payload of {i}".encode()]


def _fill(journal: Journal, n: int) -> list[int]:
    return [journal.append(_payloads(i)) for i in range(n)]


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
@pytest.mark.parametrize("compress", [True, False], ids=["zstd", "raw"])
def test_refiled_transactions_read_back_the_same_under_new_numbers(
        tmp_path: object, key: bytes | None, compress: bool) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", key=key, compress=compress) as j:
        seqs = _fill(j, 10)
        old = dict(j.replay())
        kept = seqs[::3]
        rewrite = j.begin_rewrite()
        new = j.refile(rewrite, kept)
        assert new == list(range(seqs[-1] + 1, seqs[-1] + 1 + len(kept)))
        old_dir = j.switch(rewrite)
        j.erase_generation(old_dir, zero=True)
        assert dict(j.replay()) == {n: old[s] for n, s in zip(new, kept, strict=True)}
        assert j.append([b"after"]) == new[-1] + 1
    with Journal.open(store, key=key, compress=compress) as j:  # reopens clean
        assert j.recovery.truncated == ()
        assert [s for s, _ in j.replay()] == [*new, new[-1] + 1]


@pytest.mark.parametrize("key", [None, KEY], ids=["plain", "encrypted"])
def test_transactions_not_refiled_are_nowhere_in_the_new_generation(
        tmp_path: object, key: bytes | None) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", key=key) as j:
        seqs = _fill(j, 8)
        rewrite = j.begin_rewrite()
        j.refile(rewrite, [s for k, s in enumerate(seqs) if k != 5])
        j.erase_generation(j.switch(rewrite), zero=True)
    assert markers.files_with(store, b"marker-005", key) == {}
    assert markers.files_with(store, b"marker-004", key)  # (the scan finds a kept one)


def test_a_refiled_frame_is_bound_to_its_new_place(tmp_path: object) -> None:
    """Encrypted, the body is sealed again: the old frame's bytes are not in the new
    segment (a copy of them would not open there)."""
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", key=KEY) as j:
        _fill(j, 3)
        old_bytes = markers.read(surgery.segment_paths(store)[0])
        rewrite = j.begin_rewrite()
        j.refile(rewrite, [1, 2, 3])
        j.switch(rewrite)
        new_bytes = markers.read(surgery.segment_paths(store)[0])
    # Every frame body (past its 24-byte header) differs from every old one.
    chunk = old_bytes[96 + 24 : 96 + 24 + 64]
    assert chunk not in new_bytes


def test_refiling_rotates_segments_as_appending_does(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", segment_size=4096) as j:
        seqs = [j.append([os.urandom(900)]) for _ in range(20)]
        old = dict(j.replay())
        rewrite = j.begin_rewrite()
        new = j.refile(rewrite, seqs)
        j.switch(rewrite)
        assert j.stats().segments >= 3
        assert [p for _, p in j.replay()] == [old[s] for s in seqs]
        assert [s for s, _ in j.replay()] == new
    with Journal.open(store) as j:
        assert len(list(j.replay())) == 20


def test_refiling_mixes_with_appending_on_one_sequence(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        seqs = _fill(j, 4)
        rewrite = j.begin_rewrite()
        first = rewrite.append([b"settings"])
        middle = j.refile(rewrite, seqs[1:3])
        last = rewrite.append([b"links"])
        assert [first, *middle, last] == list(range(first, first + 4))
        j.switch(rewrite)
        assert [p for _, p in j.replay()] == [[b"settings"], _payloads(1), _payloads(2),
                                              [b"links"]]


def test_a_frame_that_does_not_verify_is_not_copied(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        seqs = _fill(j, 3)
        seg = surgery.segment_paths(store)[0]
        first = markers.FRAME_HEADER.unpack_from(surgery.read(seg), 96)[0]
        surgery.flip_bit(seg, 96 + 24 + first + 24 + 5, 3)  # a body byte of frame 2
        rewrite = j.begin_rewrite()
        with pytest.raises(CorruptError) as info:
            j.refile(rewrite, seqs)
        assert "transaction 2" in info.value.message
        assert rewrite.last_seq == seqs[-1] + 1  # the first was copied, the damaged one not
        rewrite.abandon()


def test_refiling_checks_what_it_is_asked(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        seqs = _fill(j, 3)
        rewrite = j.begin_rewrite()
        with pytest.raises(InvalidError):
            j.refile(rewrite, [seqs[1], seqs[0]])
        with pytest.raises(NotFoundError):
            j.refile(rewrite, [seqs[-1] + 5])
        assert j.refile(rewrite, []) == []
        rewrite.abandon()


_CHILD = """
import sys
from holomem.log import Journal
with Journal.open(sys.argv[1], sync="none") as j:
    target = j.begin_rewrite()
    j.refile(target, list(range(j.first_seq, j.last_seq + 1))[::2])
    j.switch(target)
"""


@pytest.mark.parametrize(("point", "switched"), [
    ("journal.frame.write.after:2", False),  # the second frame refiled, not synced
    ("journal.generation.created", False),   # all refiled and synced, not renamed in
    ("journal.generation.switched", True),   # renamed in, the old one not erased yet
])
def test_a_crash_while_refiling_leaves_one_whole_generation(
        tmp_path: object, point: str, switched: bool) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        seqs = _fill(j, 6)
        old = dict(j.replay())
    spec = point if ":" in point else point + ":1"
    child = subprocess.run([sys.executable, "-c", _CHILD, store], capture_output=True,
                           env={**os.environ, "HOLOMEM_CRASH_AT": spec}, check=False)
    assert child.returncode == -signal.SIGABRT, child.stderr  # it died at the point
    with Journal.open(store) as j:
        got = dict(j.replay())
        if switched:
            assert j.generation == 2
            assert list(got.values()) == [old[s] for s in seqs[::2]]
            assert min(got) == seqs[-1] + 1
        else:
            assert j.generation == 1 and got == old
            assert j.recovery.erased_leftovers  # the half-built generation is gone
        assert not any(name.endswith(".tmp") for name in os.listdir(store))
