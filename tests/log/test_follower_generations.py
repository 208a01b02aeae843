"""A follower's journal across a compaction: what it holds stays readable, a replaced
generation is ``unavailable`` (never ``corrupt``, never a builtin error), and refresh
moves it to the new generation (issue 11, item 8)."""

from __future__ import annotations

import os

import pytest

from holomem.errors import UnavailableError
from holomem.log import Journal


def _compact(writer: Journal, payloads: list[bytes], *, zero: bool) -> None:
    rewrite = writer.begin_rewrite()
    rewrite.append(payloads)
    old = writer.switch(rewrite)
    writer.erase_generation(old, zero=zero)


def test_a_follower_keeps_reading_a_generation_the_writer_unlinked(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", segment_size=4096) as writer:
        txs = {writer.append([os.urandom(700)]): None for _ in range(12)}
        with Journal.open(store, read_only=True) as follower:
            assert follower.stats().segments >= 3
            _compact(writer, [b"live state"], zero=False)
            assert not os.path.exists(os.path.join(store, "gen-00000001"))
            assert follower.replaced()
            # Every transaction it knew still reads, from the files it holds open.
            assert [s for s, _ in follower.replay()] == list(txs)
            assert all(follower.read(s) for s in txs)


def test_a_zeroed_replaced_generation_is_unavailable_then_refresh_moves_on(
        tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as writer:
        for i in range(5):
            writer.append([f"transaction {i}".encode()])
        with Journal.open(store, read_only=True) as follower:
            _compact(writer, [b"live state"], zero=True)  # a purge: zeroed, then unlinked
            with pytest.raises(UnavailableError) as info:
                follower.read(3)
            assert info.value.code == "unavailable" and "replaced" in info.value.message
            with pytest.raises(UnavailableError):
                list(follower.replay())
            result = follower.refresh()
            assert result.reset and result.from_seq == 6
            assert follower.generation == 2 and not follower.replaced()
            assert list(follower.replay()) == [(6, [b"live state"])]


def test_after_refresh_the_left_generation_reads_until_it_is_released(
        tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as writer:
        for i in range(5):
            writer.append([f"transaction {i}".encode()])
        with Journal.open(store, read_only=True) as follower:
            _compact(writer, [b"live state"], zero=False)
            assert follower.refresh().reset
            # A reader still answering from the old state reads by sequence number.
            assert follower.read(2) == [b"transaction 1"]
            assert follower.read(6) == [b"live state"]
            follower.release_retired()
            with pytest.raises(Exception) as info:
                follower.read(2)
            assert getattr(info.value, "code", "") == "not_found"
