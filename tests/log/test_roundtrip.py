"""What is appended is what replay and read return, across close, reopen and rotation."""

from __future__ import annotations

import os
import tempfile

import surgery
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem.log import Journal

KEY = bytes(range(32))

#: Incompressible bytes (empty included), and long runs that zstd shrinks, so that
#: both the plain and the compressed frame paths are taken.
payloads = st.one_of(
    st.binary(max_size=64),
    st.binary(min_size=200, max_size=6000),
    st.builds(lambda unit, n: unit * n, st.binary(min_size=1, max_size=8),
              st.integers(min_value=40, max_value=3000)),
)
transactions = st.lists(payloads, min_size=1, max_size=5)

ROUND_TRIP = settings(
    max_examples=40, deadline=None, database=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _check_round_trip(txs: list[list[bytes]], segment_size: int, split: int,
                      key: bytes | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = os.path.join(tmp, "store")
        seqs = []
        # Two writing sessions, so that appending after a reopen is covered too.
        with Journal.open(store, key=key, sync="none", segment_size=segment_size) as j:
            seqs += [j.append(tx) for tx in txs[:split]]
        with Journal.open(store, key=key, sync="none", segment_size=segment_size) as j:
            seqs += [j.append(tx) for tx in txs[split:]]
        assert seqs == list(range(1, len(txs) + 1))
        expected = list(zip(seqs, txs, strict=True))
        for read_only in (False, True):
            with Journal.open(store, key=key, read_only=read_only,
                              segment_size=segment_size) as j:
                assert j.recovery.truncated == ()
                assert list(j.replay()) == expected
                assert [j.read(seq) for seq in seqs] == txs
                assert j.last_seq == len(txs)
                mid = len(txs) // 2 + 1
                assert list(j.replay(mid)) == expected[mid - 1 :]


@ROUND_TRIP
@given(txs=st.lists(transactions, min_size=1, max_size=12),
       segment_size=st.integers(min_value=4096, max_value=64 * 1024),
       data=st.data())
def test_replay_and_read_return_exactly_what_was_appended(
    txs: list[list[bytes]], segment_size: int, data: st.DataObject
) -> None:
    split = data.draw(st.integers(min_value=0, max_value=len(txs)), label="split")
    _check_round_trip(txs, segment_size, split, None)


@ROUND_TRIP
@given(txs=st.lists(transactions, min_size=1, max_size=12),
       segment_size=st.integers(min_value=4096, max_value=64 * 1024),
       data=st.data())
def test_encrypted_replay_and_read_return_exactly_what_was_appended(
    txs: list[list[bytes]], segment_size: int, data: st.DataObject
) -> None:
    split = data.draw(st.integers(min_value=0, max_value=len(txs)), label="split")
    _check_round_trip(txs, segment_size, split, KEY)


def test_compressible_transactions_are_stored_compressed_and_read_back(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    big = b"holomem remembers " * 500
    with Journal.open(store, sync="none") as j:
        j.append([big, b""])
        j.append([os.urandom(1000)])
    (seg,) = surgery.segment_paths(store)
    first, second = surgery.frames(seg)
    # The fault really landed: the first frame took the compressed path, the
    # incompressible one did not.
    assert first.flags & surgery.FRAME_FLAG_COMPRESSED and first.length < len(big) // 4
    assert not second.flags & surgery.FRAME_FLAG_COMPRESSED
    with Journal.open(store, read_only=True) as j:
        assert j.read(1) == [big, b""]


def test_a_transaction_larger_than_a_segment_gets_a_segment_of_its_own(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    huge = os.urandom(3 * 4096)
    with Journal.open(store, sync="none", segment_size=4096) as j:
        assert j.append([b"small"]) == 1
        assert j.append([huge]) == 2
        assert j.append([b"after"]) == 3
        assert j.stats().segments == 3
    with Journal.open(store, segment_size=4096) as j:
        assert list(j.replay()) == [(1, [b"small"]), (2, [huge]), (3, [b"after"])]


def test_an_empty_store_replays_nothing_and_starts_at_sequence_one(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        assert j.last_seq == 0
        assert list(j.replay()) == []
    with Journal.open(store, sync="none") as j:
        assert list(j.replay()) == []
        assert j.append([b"x"]) == 1
