"""An encrypted store holds only ciphertext, opens only with its key, and binds every
frame to its place: a frame moved, duplicated or spliced from another store fails.

docs/guarantees.md §6 "Encrypted stores"; §2 "a wrong key is a clear error, never garbage".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import surgery

from holomem.errors import (
    AuthenticationError,
    CorruptError,
    InvalidError,
    KeyRequiredError,
    UnexpectedKeyError,
    WrongKeyError,
)
from holomem.log import Journal

KEY = bytes(range(32))
OTHER_KEY = bytes(range(1, 33))
MARKER = b"MARKER-holomem-plaintext-9c1e"


def _marked_transactions() -> list[list[bytes]]:
    return [
        [MARKER],
        [b"before " + MARKER + b" after", b""],
        [MARKER * 200],  # compressible: compressed, then sealed
        [os.urandom(3000) + MARKER + os.urandom(3000)],  # a segment of its own
        [MARKER[:10], MARKER[10:]],
    ]


@pytest.mark.parametrize("compress", [True, False], ids=["compressed", "uncompressed"])
def test_marker_written_to_an_encrypted_store_appears_in_no_file(
    tmp_path: object, compress: bool
) -> None:
    store = os.path.join(str(tmp_path), "store")
    plain = os.path.join(str(tmp_path), "plain")
    txs = _marked_transactions()
    # The scan must be able to fail: the same payloads in a plaintext store are found.
    with Journal.open(plain, sync="none", compress=False) as j:
        for tx in txs:
            j.append(tx)
    assert surgery.files_containing(plain, MARKER)
    with Journal.open(store, key=KEY, sync="none", segment_size=4096, compress=compress) as j:
        for tx in txs:
            j.append(tx)
        assert surgery.files_containing(store, MARKER) == []  # while open
    assert len(surgery.segment_paths(store)) > 1  # several segments were scanned
    assert surgery.files_containing(store, MARKER) == []
    # After a reopen that repairs a torn tail and appends again.
    surgery.append(surgery.segment_paths(store)[-1], b"\x07" * 40)
    with Journal.open(store, key=KEY, sync="none", segment_size=4096) as j:
        assert j.recovery.truncated
        j.append([MARKER + b" again"])
        assert [tx for _, tx in j.replay()] == [*txs, [MARKER + b" again"]]
    assert surgery.files_containing(store, MARKER) == []
    for path in surgery.all_files(store):
        assert KEY not in surgery.read(path)


def _store(tmp_path: object, key: bytes | None, name: str = "store") -> str:
    store = os.path.join(str(tmp_path), name)
    with Journal.open(store, key=key, sync="none") as j:
        j.append([b"one"])
        j.append([b"two"])
    return store


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "follower"])
def test_a_wrong_key_is_refused_before_anything_is_read_or_written(
    tmp_path: object, read_only: bool
) -> None:
    store = _store(tmp_path, KEY)
    before = surgery.snapshot(store)
    with pytest.raises(WrongKeyError) as info:
        Journal.open(store, key=OTHER_KEY, read_only=read_only)
    assert info.value.code == "key.wrong"
    with pytest.raises(KeyRequiredError) as info2:
        Journal.open(store, read_only=read_only)
    assert info2.value.code == "key.required"
    assert {k: v for k, v in surgery.snapshot(store).items() if k != "."} == {
        k: v for k, v in before.items() if k != "."}
    with Journal.open(store, key=KEY, read_only=read_only) as j:
        assert list(j.replay()) == [(1, [b"one"]), (2, [b"two"])]


_REWRITE_CHILD = """
import sys
from holomem.log import Journal
with Journal.open(sys.argv[1], key=bytes.fromhex(sys.argv[2]), sync="none") as j:
    target = j.begin_rewrite()
    j.refile(target, [j.first_seq])
    j.switch(target)
"""


@pytest.mark.parametrize("point", ["journal.generation.created", "journal.generation.switched"])
def test_an_open_refused_for_its_key_leaves_an_interrupted_rewrite_as_it_was(
        tmp_path: object, point: str) -> None:
    """The leftovers of a compaction cut short (a generation being built, or the old one
    not yet erased) are erased by the next writer, but only once it has shown the key."""
    store = _store(tmp_path, KEY)
    child = subprocess.run([sys.executable, "-c", _REWRITE_CHILD, store, KEY.hex()],
                           capture_output=True, env={**os.environ,
                                                     "HOLOMEM_CRASH_AT": point + ":1"},
                           check=False)
    assert child.returncode == -signal.SIGABRT, child.stderr  # it died at the point
    before = surgery.snapshot(store)
    for key, error in ((OTHER_KEY, WrongKeyError), (None, KeyRequiredError)):
        with pytest.raises(error):
            Journal.open(store, key=key)
        assert surgery.snapshot(store) == before
    with Journal.open(store, key=KEY) as j:
        assert j.recovery.erased_leftovers
    assert len([n for n in os.listdir(store) if n.startswith("gen-")]) == 1


@pytest.mark.parametrize("read_only", [False, True], ids=["writer", "follower"])
def test_a_key_given_for_a_plaintext_store_is_refused(tmp_path: object, read_only: bool) -> None:
    store = _store(tmp_path, None)
    with pytest.raises(UnexpectedKeyError) as info:
        Journal.open(store, key=KEY, read_only=read_only)
    assert info.value.code == "key.unexpected"


def test_the_same_key_on_two_stores_gives_different_key_check_values(tmp_path: object) -> None:
    a = surgery.read(surgery.segment_paths(_store(tmp_path, KEY, "a"))[0])
    b = surgery.read(surgery.segment_paths(_store(tmp_path, KEY, "b"))[0])
    assert a[64:80] != b[64:80]  # key check value, bound to the store id


def _equal_frames_store(tmp_path: object, name: str) -> str:
    """An encrypted store whose four frames all have the same size."""
    store = os.path.join(str(tmp_path), name)
    with Journal.open(store, key=KEY, sync="none", compress=False) as j:
        for i in range(1, 5):
            j.append([f"{name} transaction {i}".encode()])
    sizes = {f.size for f in surgery.frames(surgery.segment_paths(store)[0])}
    assert len(sizes) == 1
    return store


def test_a_frame_spliced_from_another_store_with_the_same_key_is_refused(
    tmp_path: object,
) -> None:
    ours = _equal_frames_store(tmp_path, "ours")
    theirs = _equal_frames_store(tmp_path, "them")
    (seg,) = surgery.segment_paths(ours)
    (their_seg,) = surgery.segment_paths(theirs)
    target = surgery.frames(seg)[2]  # seq 3, followed by seq 4
    their_frame = surgery.frames(their_seg)[2]
    assert their_frame.seq == 3
    foreign = surgery.frame_bytes(their_seg, their_frame)
    # As copied: the segment's checksum salt differs, so the checksum catches it.
    surgery.overwrite(seg, target.offset, foreign)
    with pytest.raises(CorruptError) as info:
        Journal.open(ours, key=KEY, read_only=True)
    assert (info.value.path, info.value.offset) == (seg, target.offset)
    # With the checksum forged for our salt, only authentication can catch it.
    original = surgery.read(seg)
    surgery.overwrite(seg, target.offset, surgery.reseal_checksum(foreign, surgery.salt(original)))
    _assert_auth_failure_at(ours, seg, target.offset, seq=3)


def test_a_frame_moved_to_another_position_is_refused_by_authentication(
    tmp_path: object,
) -> None:
    store = _equal_frames_store(tmp_path, "store")
    (seg,) = surgery.segment_paths(store)
    data = surgery.read(seg)
    second, third = surgery.frames(data)[1:3]
    # Frame 2 copied over frame 3's place, its sequence number rewritten to 3 and
    # its checksum recomputed: a consistent-looking frame that is in the wrong place.
    moved = surgery.reseal_checksum(
        surgery.with_seq(data[second.offset : second.end], 3), surgery.salt(data))
    surgery.overwrite(seg, third.offset, moved)
    _assert_auth_failure_at(store, seg, third.offset, seq=3)


def _two_segment_store(tmp_path: object, name: str) -> str:
    store = os.path.join(str(tmp_path), name)
    with Journal.open(store, key=KEY, sync="none", segment_size=4096) as j:
        while j.stats().segments < 2:
            j.append([os.urandom(700)])
        j.append([b"last"])
    return store


@pytest.mark.parametrize("which", [0, 1], ids=["first-segment", "last-segment"])
def test_a_segment_header_from_another_store_is_refused(tmp_path: object, which: int) -> None:
    ours = _two_segment_store(tmp_path, "ours")
    theirs = _two_segment_store(tmp_path, "them")
    seg = surgery.segment_paths(ours)[which]
    their_seg = surgery.segment_paths(theirs)[which]
    # Their header (store id, salt, key check) over ours, same key, same numbers.
    surgery.overwrite(seg, 0, surgery.read(their_seg)[: surgery.SEGMENT_HEADER_SIZE])
    for read_only in (True, False):
        with pytest.raises(CorruptError) as info:
            Journal.open(ours, key=KEY, read_only=read_only)
        # The first segment's frames fail their checksum (wrong salt); the last
        # segment's header names another store than the first one.
        expected = surgery.SEGMENT_HEADER_SIZE if which == 0 else 0
        assert (info.value.path, info.value.offset) == (seg, expected)


def test_a_foreign_segment_header_in_a_one_segment_store_is_refused(tmp_path: object) -> None:
    """Once a gap: in a one-segment store nothing but the header names the store, so
    frames that all fail their checksum under a foreign header's salt looked like a
    torn tail, and the writer truncated them. The watermark written at close says they
    were durable (and names the store): refused, read-only or not."""
    ours = _equal_frames_store(tmp_path, "ours")
    theirs = _equal_frames_store(tmp_path, "them")
    (seg,) = surgery.segment_paths(ours)
    (their_seg,) = surgery.segment_paths(theirs)
    surgery.overwrite(seg, 0, surgery.read(their_seg)[: surgery.SEGMENT_HEADER_SIZE])
    damaged = surgery.read(seg)
    for read_only in (True, False):
        with pytest.raises(CorruptError) as info:
            Journal.open(ours, key=KEY, read_only=read_only)
        assert (info.value.path, info.value.offset) == (seg, surgery.SEGMENT_HEADER_SIZE)
        assert surgery.read(seg) == damaged


def _assert_auth_failure_at(store: str, seg: str, offset: int, seq: int) -> None:
    for read_only in (True, False):
        with Journal.open(store, key=KEY, read_only=read_only, sync="none") as j:
            assert j.recovery.truncated == ()
            replayed = []
            with pytest.raises(AuthenticationError) as info:
                for item in j.replay():
                    replayed.append(item)
            assert info.value.code == "corrupt.auth"
            assert (info.value.path, info.value.offset) == (seg, offset)
            assert [s for s, _ in replayed] == list(range(1, seq))  # nothing after it
            with pytest.raises(AuthenticationError) as info:
                j.read(seq)
            assert (info.value.path, info.value.offset) == (seg, offset)
            assert j.read(seq + 1) != j.read(seq - 1)  # its neighbours still read


def test_bad_keys_are_invalid_arguments(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    for bad in (b"", bytes(16), bytes(31), bytes(33), "k" * 32, 12345):
        with pytest.raises(InvalidError):
            Journal.open(store, key=bad)  # type: ignore[arg-type]
    assert not os.path.exists(store)
