"""The journal on a JetStream stream keeps the file journal's guarantees (one server)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from typing import Any

import nats
import pytest

from holomem import Memory, Store
from holomem.errors import (
    FormatVersionError,
    HolomemError,
    InvalidError,
    NotFoundError,
    StoreLockedError,
    WrongKeyError,
)
from holomem.log.backend import open_journal
from holomem.log.stream import follow, publisher, record, url
from holomem.log.stream.journal import StreamJournal
from holomem.log.stream.publisher import Item, Message

from .cluster import Cluster, needs_server
from .scan import files_with

pytestmark = needs_server


def intrude(cluster: Cluster, subject: str) -> None:
    """Publish one message to ``subject`` after stream message 1, as a writer that
    ignores the lease would."""
    async def publish() -> None:
        nc = await nats.connect(cluster.nodes[0].url)
        try:
            await nc.jetstream().publish(subject, b"x", headers={
                "Nats-Expected-Last-Sequence": "1"})
        finally:
            await nc.close()

    asyncio.run(publish())

def test_acknowledged_remembers_are_all_there_after_reopen(single: Cluster) -> None:
    url = single.url("reopen")
    with Store.open(url) as store:
        memory = Memory(store)
        ids = [memory.remember(f"the heron eats fish number {i}").id for i in range(20)]
        assert store.stats().sync == "quorum/1"
    with Store.open(url) as store:
        memory = Memory(store)
        assert sorted(h.id for h in memory.recall("heron fish", {"k": 50})) == sorted(ids)


def test_counters_count_each_acknowledged_transaction_across_a_compaction(
        single: Cluster) -> None:
    with Store.open(single.url("counted")) as store:
        memory = Memory(store)
        base = store.counters()
        for i in range(5):
            memory.remember(f"the stork eats frog number {i}")
        assert store.counters().acknowledged_writes == base.acknowledged_writes + 5
        store.compact()  # a new stream and sender: the count goes on
        memory.remember("the stork sleeps")
        counted = store.counters()
        assert counted.acknowledged_writes == base.acknowledged_writes + 6
        assert counted.fsyncs == 0  # nothing is synced locally


def test_every_frame_is_bound_to_its_store_generation_and_sequence(single: Cluster) -> None:
    url = single.url("frames")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        s1 = j.append([b"one"])
        s2 = j.append([b"two", b"three"])
        assert (s1, s2) == (1, 2)
        assert j.read(2) == [b"two", b"three"]
        assert [p for _, p in j.replay()] == [[b"one"], [b"two", b"three"]]
        with pytest.raises(HolomemError) as err:  # a frame from another place fails
            j._codec.decode(1, j._codec.encode(2, [b"moved"]))
        assert err.value.code.startswith("corrupt")


def test_an_encrypted_store_puts_only_ciphertext_on_the_nats_server(single: Cluster,
                                                                    tmp_path: object) -> None:
    key = os.urandom(32)
    url = single.url("sealed")
    with Store.open(url, key=key) as store:
        memory = Memory(store)
        for i in range(30):
            memory.remember(f"osprey-marker-{i} nests by the estuary, compressible " * 4)
    for root in single.store_dirs():
        assert files_with(root, b"osprey-marker") == []
    with pytest.raises(WrongKeyError):
        Store.open(url, key=os.urandom(32))
    with Store.open(url, key=key) as store:
        assert len(store) == 30


def test_a_plaintext_store_is_readable_on_the_server_so_the_scan_can_see(single: Cluster
                                                                         ) -> None:
    # The scan that proves the encrypted store holds no plaintext does find it here.
    with Store.open(single.url("plain")) as store:
        Memory(store).remember("kingfisher-marker dives " * 20)
    assert any(files_with(root, b"kingfisher-marker") for root in single.store_dirs())


def test_a_resent_transaction_is_stored_once(single: Cluster) -> None:
    url = single.url("resend")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        j.append([b"first"])
        data = j._codec.encode(1, [b"first"])
        stream, subject = j.address.stream(1), j.address.subject(1)
        msg_id = f"{j.store_id.hex()}:1:1"
        # The writer's own resend (its acknowledgement lost): acknowledged, not stored
        # again, and not mistaken for another writer's append.
        again = Item(1, data)
        publisher = j._publisher
        assert publisher is not None
        j._conn.loop.call_soon_threadsafe(publisher.put_message,
                                          Message(1, [again], data, msg_id))
        again.done.result(10)
        assert j.append([b"second"]) == 2

    async def resend() -> tuple[bool, int, int]:
        nc = await nats.connect(single.nodes[0].url)
        try:
            js = nc.jetstream()
            ack = await js.publish(subject, data, headers={"Nats-Msg-Id": msg_id})
            info = await js.stream_info(stream)
            return bool(ack.duplicate), ack.seq, info.state.messages
        finally:
            await nc.close()

    # The message id alone is recognised too (the duplicate window).
    assert asyncio.run(resend()) == (True, 1, 2)


def test_a_second_writer_is_locked_out_while_the_lease_is_held(single: Cluster) -> None:
    """... and its ``locked`` error names the holder and the URL it advertised."""
    url = single.url("lease")
    with Store.open(url + "?advertise=http://10.0.0.7:8080/") as first:
        Memory(first).remember("the first writer holds the lease")
        with pytest.raises(StoreLockedError) as locked:
            Store.open(url)
        assert locked.value.writer == "http://10.0.0.7:8080"
        assert locked.value.holder and " " not in locked.value.holder
        assert "serving at http://10.0.0.7:8080" in locked.value.message
        with Store.open(url, read_only=True) as follower:  # followers need no lease
            assert len(follower) == 1
    with Store.open(url) as second:  # closing gave the lease back: no wait
        Memory(second).remember("the second writer")
        assert len(second) == 2


def test_a_resend_whose_read_back_fails_once_is_looked_at_again_not_fenced(
        single: Cluster) -> None:
    """The writer's own resend is refused for its expected sequence, and reading the
    stored message back fails once (as it does while a stream elects its leader): the
    writer resends and reads it again, and acknowledges it, instead of taking it for
    another writer's and giving up for good."""
    url = single.url("readback")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        j.append([b"first"])
        publisher = j._publisher
        assert publisher is not None
        real = publisher.js.get_msg
        calls = []

        async def flaky(*args: Any, **kwargs: Any) -> Any:
            calls.append(args)
            if len(calls) == 1:
                raise nats.errors.TimeoutError
            return await real(*args, **kwargs)

        publisher.js.get_msg = flaky  # type: ignore[method-assign]
        again = Item(1, j._codec.encode(1, [b"first"]))
        j._conn.loop.call_soon_threadsafe(
            publisher.put_message,
            Message(1, [again], again.data, f"{j.store_id.hex()}:1:1"))
        again.done.result(10)  # acknowledged: not StoreLockedError
        assert len(calls) == 2 and publisher.resends >= 1
        assert j.append([b"second"]) == 2


def test_a_writer_that_sees_another_writers_append_stops_acknowledging(single: Cluster
                                                                       ) -> None:
    url = single.url("fenced")
    with open_journal(url, key=None, sync="full") as j:
        j.append([b"mine"])
        intrude(single, "hm.fenced.g1")  # a writer that ignores the lease appends seq 2
        with pytest.raises(StoreLockedError):
            j.append([b"would interleave"])
        with pytest.raises(StoreLockedError):
            j.append([b"and never again"])


def test_a_transaction_whose_number_another_writer_used_is_never_acknowledged(
        single: Cluster) -> None:
    url = single.url("sameid")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        j.append([b"mine"])
        msg_id = f"{j.store_id.hex()}:1:2"

        async def earlier_writer() -> None:  # its transaction 2 landed late, same id
            nc = await nats.connect(single.nodes[0].url)
            try:
                await nc.jetstream().publish("hm.sameid.g1", b"not mine", headers={
                    "Nats-Msg-Id": msg_id, "Nats-Expected-Last-Sequence": "1"})
            finally:
                await nc.close()

        asyncio.run(earlier_writer())
        with pytest.raises(StoreLockedError):
            j.append([b"my own transaction 2"])


def test_a_writers_open_fences_the_generation_switch_of_any_earlier_writer(
        single: Cluster) -> None:
    url = single.url("epoch")
    with open_journal(url, key=None, sync="full") as first:
        assert isinstance(first, StreamJournal)
        first.append([b"one"])
        stale = first._revision  # what a stalled compaction of this writer would name
        meta = first.address.meta_bucket
    with open_journal(url, key=None, sync="full") as second:
        second.append([b"two"])

        async def late_switch() -> None:
            nc = await nats.connect(single.nodes[0].url)
            try:
                kv = await record.bucket(nc.jetstream(), meta, 1)
                found = await record.read(kv, url)
                assert found is not None
                rec, revision = found
                assert revision > stale
                await record.write(kv, rec._replace(generation=2), stale, url)
            finally:
                await nc.close()

        with pytest.raises(StoreLockedError):
            asyncio.run(late_switch())
        assert [p for _, p in second.replay()] == [[b"one"], [b"two"]]


def test_a_follower_consumes_new_writes_and_refresh_applies_them(single: Cluster) -> None:
    url = single.url("follow")
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        w = Memory(writer)
        f = Memory(follower)
        for i in range(10):
            seq = w.remember(f"the lapwing calls at dusk {i}").id
            assert follower._journal.wait_for(writer.revision, 10.0)
            follower.refresh()
            assert f.get(seq) is not None
        assert follower.revision == writer.revision


def test_forget_on_a_stream_store_zeroes_this_nodes_text(single: Cluster) -> None:
    url = single.url("forget")
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        m = Memory(writer)
        fid = m.remember("the avocet-marker wades the shallows").id
        m.remember("an unrelated fact about terns")
        follower._journal.wait_for(writer.revision, 10.0)
        follower.refresh()
        m.forget({"ids": [fid]})
        follower._journal.wait_for(writer.revision, 10.0)
        follower.refresh()
        assert Memory(follower).get(fid) is None
        local = os.environ["HOLOMEM_NATS_LOCAL"]
        assert files_with(local, b"avocet-marker") == []


def test_bad_addresses_and_missing_stores_get_clear_errors(single: Cluster) -> None:
    for bad in ("nats://", "nats:///x", f"nats://{single.nodes[0].url}/bad name",
                f"nats://{single.nodes[0].url}/s?replicas=9",
                f"nats://{single.nodes[0].url}/s?bogus=1",
                f"nats://{single.nodes[0].url}/s?lease=0",
                f"nats://{single.nodes[0].url}/s?advertise=ftp://x",
                f"nats://{single.nodes[0].url}/s?advertise=http://a%20b"):
        with pytest.raises(InvalidError):
            Store.open(bad)
    with pytest.raises(NotFoundError):
        Store.open(single.url("absent"), create=False)
    with pytest.raises(NotFoundError):
        Store.open(single.url("absent2"), read_only=True)


def test_a_follower_that_does_not_refresh_buffers_a_bounded_amount_and_still_catches_up(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(follow, "MAX_BUFFERED", 4096)  # a few frames
    url = single.url("bounded")
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        memory = Memory(writer)
        ids = [memory.remember(f"the dipper walks under water, fact {i} " * 8).id
               for i in range(40)]
        tail = follower._journal._tail
        assert tail is not None
        tail.wait(10**9, 1.0)  # let it fill up (bounded wait)
        assert tail.full
        for _ in range(100):  # each refresh takes the buffer, then consumes again
            if follower.refresh() == writer.revision:
                break
            tail.wait(writer.revision, 1.0)
        assert follower.revision == writer.revision
        f = Memory(follower)
        assert all(f.get(i) is not None for i in ids)


def _stream_messages(j: StreamJournal) -> int:
    async def count() -> int:
        info = await j._conn.js.stream_info(j.address.stream(j.generation))
        return int(info.state.messages)

    return j._conn.call(count(), 10.0, "counting")


def _queue_together(j: StreamJournal, texts: list[bytes]) -> list[int]:
    """Enqueue ``texts`` while the loop is held, so they leave in one message."""
    j._conn.loop.call_soon_threadsafe(time.sleep, 0.3)
    return [j.enqueue([t]) for t in texts]


def test_transactions_queued_together_leave_in_one_message_and_read_back_one_by_one(
        single: Cluster) -> None:
    url = single.url("packed")
    texts = [f"packed {i}".encode() for i in range(5)]
    with open_journal(url, key=None, sync="full") as j, \
            open_journal(url, key=None, sync="full", read_only=True) as follower:
        assert isinstance(j, StreamJournal) and isinstance(follower, StreamJournal)
        j.append([b"alone"])
        seqs = _queue_together(j, texts)
        j.wait(seqs[-1])
        assert seqs == [2, 3, 4, 5, 6] and _stream_messages(j) == 2
        assert [p for _, p in j.replay()] == [[b"alone"]] + [[t] for t in texts]
        assert [j.read(s) for s in (4, 2, 6, 1)] == [[texts[2]], [texts[0]], [texts[4]],
                                                    [b"alone"]]
        assert list(j.replay(4)) == [(4, [texts[2]]), (5, [texts[3]]), (6, [texts[4]])]
        assert follower.wait_for(6, 10.0)
        follower.refresh()
        assert [s for s, _ in follower.replay()] == [1, 2, 3, 4, 5, 6]
    with open_journal(url, key=None, sync="full") as again:  # numbering goes on after 6
        assert again.last_seq == 6 and again.append([b"next"]) == 7
        assert again.read(7) == [b"next"] and again.read(3) == [texts[1]]


def _as_if_writers_were_outstanding(j: StreamJournal, n: int) -> None:
    """Make the publisher remember ``n`` transactions lately outstanding at once."""
    pub = j._publisher
    assert pub is not None
    done = threading.Event()

    def peak() -> None:
        pub._peak = pub._peak_next = n
        done.set()

    j._conn.loop.call_soon_threadsafe(peak)
    assert done.wait(10)


def test_with_nothing_in_flight_a_transaction_waits_for_the_writers_lately_outstanding(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publisher, "GATHER", 60.0)  # (only the arrivals end the wait)
    url = single.url("gather")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        j.append([b"alone"])  # a lone writer's transaction leaves at once
        _as_if_writers_were_outstanding(j, 8)
        seqs = [j.enqueue([b"a"])]
        time.sleep(0.3)
        assert j.last_seq == 1 and _stream_messages(j) == 1  # it waits for the others
        seqs += [j.enqueue([t]) for t in (b"b", b"c", b"d")]  # half of eight: they leave
        j.wait(seqs[-1])
        assert seqs == [2, 3, 4, 5] and _stream_messages(j) == 2
        assert [p for _, p in j.replay()] == [[b"alone"], [b"a"], [b"b"], [b"c"], [b"d"]]


def test_the_wait_for_other_writers_is_bounded(single: Cluster,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(publisher, "GATHER", 0.05)
    url = single.url("gatherbound")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        _as_if_writers_were_outstanding(j, 8)
        j.wait(j.enqueue([b"nobody else comes"]))  # leaves after the wait, alone
        assert j.last_seq == 1 and _stream_messages(j) == 1


def test_a_packed_messages_transactions_are_all_acknowledged_or_none(single: Cluster
                                                                      ) -> None:
    url = single.url("allornone")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        j.append([b"mine"])
        intrude(single, "hm.allornone.g1")  # another writer appends message 2
        seqs = _queue_together(j, [b"a", b"b", b"c"])
        for seq in seqs:  # the message was refused whole: none of them is acknowledged
            with pytest.raises(StoreLockedError):
                j.wait(seq)
        assert j.last_seq == 1 and _stream_messages(j) == 2


def test_a_packed_message_resent_after_a_lost_acknowledgement_is_stored_once(
        single: Cluster) -> None:
    url = single.url("packedresend")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        j.wait(_queue_together(j, [b"one", b"two", b"three"])[-1])
        assert _stream_messages(j) == 1
        items = [Item(s, j._codec.encode(s, [t])) for s, t in
                 ((1, b"one"), (2, b"two"), (3, b"three"))]
        data = b"".join(item.data for item in items)
        publisher = j._publisher
        assert publisher is not None
        j._conn.loop.call_soon_threadsafe(
            publisher.put_message, Message(1, items, data, f"{j.store_id.hex()}:1:1-3"))
        for item in items:
            item.done.result(10)  # acknowledged: the stream holds exactly this message
        assert _stream_messages(j) == 1 and j.append([b"four"]) == 4


def test_a_version_1_store_with_one_transaction_per_message_still_reads_and_writes_on(
        single: Cluster) -> None:
    url = single.url("oldstore")
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        for i in range(4):  # one at a time: one message each, as version 1 wrote them
            j.append([f"old {i}".encode()])
        meta = j.address.meta_bucket
        assert _stream_messages(j) == 4

    async def as_version_1() -> None:
        nc = await nats.connect(single.nodes[0].url)
        try:
            kv = await record.bucket(nc.jetstream(), meta, 1)
            entry = await kv.get(record.KEY)
            old = json.loads(entry.value or b"")
            assert old["version"] == record.VERSION == 2
            await kv.put(record.KEY, json.dumps(dict(old, version=1)).encode())
        finally:
            await nc.close()

    asyncio.run(as_version_1())
    with open_journal(url, key=None, sync="full", read_only=True) as reader:
        assert [p for _, p in reader.replay()] == [[f"old {i}".encode()] for i in range(4)]
    with open_journal(url, key=None, sync="full") as j:
        assert isinstance(j, StreamJournal)
        assert j.read(3) == [b"old 2"]
        j.wait(_queue_together(j, [b"new 5", b"new 6"])[-1])
    with open_journal(url, key=None, sync="full") as j:
        assert [p for _, p in j.replay()][-3:] == [[b"old 3"], [b"new 5"], [b"new 6"]]


def test_a_generation_record_of_a_later_version_is_refused_by_name() -> None:
    raw = record.Record(1, 1, b"\0" * 16, False, b"").encode()
    later = json.dumps(dict(json.loads(raw), version=record.VERSION + 1)).encode()
    with pytest.raises(FormatVersionError, match=f"version {record.VERSION + 1}"):
        record.Record.decode(later, "nats://x/s")


@pytest.mark.parametrize("address", [
    "nats://h:4222/ab\nc", "nats://h:4222/abc\n", "nats://h:4222/a\tb", "nats://h:42\r22/s",
    "nats://h:\u00b2/s", "nats://h:\u0664\u0662\u0662\u0662/s",
    "nats://h:4222/s?replicas=\u00b2", "nats://h:4222/s?replicas=\u0663",
    "nats://h:4222/s?replicas=03"])
def test_an_address_with_a_control_character_or_a_port_in_other_digits_is_invalid(
        address: str) -> None:
    """URL parsing drops tabs and line breaks ("ab\\nc" named the store "abc"), and
    str.isdigit takes "²" (then int() raised ValueError) and Arabic-Indic digits, in the
    port and in replicas: each is ``invalid_request`` before anything connects."""
    with pytest.raises(InvalidError):
        url.parse(address)
