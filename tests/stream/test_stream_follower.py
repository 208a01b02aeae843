"""A stream store's follower: a generation larger than its buffer, and a failed move to a
new generation (one server)."""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable

import pytest
from nats.js import JetStreamContext

from holomem import Store
from holomem import events as ev
from holomem.api.engine import following
from holomem.errors import UnavailableError
from holomem.log.stream import follow
from holomem.log.stream.codec import StreamCodec

from .cluster import Cluster, needs_server
from .scan import files_with

pytestmark = needs_server

BUFFER = 4096  # bytes a follower buffers: a few messages


def _noise(n: int) -> str:
    """``n`` bytes of text that does not compress."""
    return base64.b64encode(os.urandom(n * 3 // 4)).decode()


class _Measured:
    """How full each follower's buffer was whenever it was taken from, and the largest
    stream message split (a single message larger than the limit is still taken in)."""

    def __init__(self) -> None:
        self.held: list[int] = []
        self.largest = 0

    @property
    def within_limit(self) -> bool:
        return bool(self.held) and max(self.held) <= max(BUFFER, self.largest)


def _bounded_buffer(monkeypatch: pytest.MonkeyPatch) -> _Measured:
    """Make followers buffer at most :data:`BUFFER` bytes, measured."""
    monkeypatch.setattr(follow, "MAX_BUFFERED", BUFFER)
    measured = _Measured()
    take, split = follow.Tail.take, StreamCodec.split

    def measured_take(self: follow.Tail, upto: int) -> list[tuple[int, bytes]]:
        measured.held.append(self._bytes)
        return take(self, upto)

    def measured_split(self: StreamCodec, stream_seq: int, data: bytes
                       ) -> list[tuple[int, bytes]]:
        measured.largest = max(measured.largest, len(data))
        return split(self, stream_seq, data)

    monkeypatch.setattr(follow.Tail, "take", measured_take)
    monkeypatch.setattr(StreamCodec, "split", measured_split)
    return measured


def _write(writer: Store, prefix: str, n: int) -> dict[str, str]:
    docs = {f"{prefix}{i}": f"{prefix} document {i} {_noise(500)}" for i in range(n)}
    for doc_id, text in docs.items():
        writer.add_document(doc_id, text)
    return docs


def _holds(store: Store, docs: dict[str, str]) -> bool:
    return all((d := store.get_document(i)) is not None and d.text == t
               for i, t in docs.items())


def test_a_follower_opens_and_moves_to_generations_many_times_its_buffer(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening replays the whole live generation through the follower's bounded buffer,
    and so does each move to a new one: neither waits for a buffer nobody takes."""
    buffered = _bounded_buffer(monkeypatch)
    url = single.url("bigger-than-buffer", timeout=3)
    with Store.open(url) as writer:
        docs = _write(writer, "a", 40)  # ~25 KiB of messages: six buffers and more
        with Store.open(url, read_only=True) as follower:
            assert follower.revision == writer.revision
            assert _holds(follower, docs)
            docs |= _write(writer, "b", 20)
            writer.delete_document("a0", purge=True)  # a new generation, still large
            del docs["a0"]
            _sees_new_generation(follower)  # else this look takes one buffer of the old
            assert follower.refresh() == writer.revision
            assert follower.generation == writer.generation == 2
            assert not follower.has_document("a0")
            assert _holds(follower, docs) and len(follower.ids()) == len(docs)
    assert buffered.within_limit


def _failing_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The follower's next rebuild from a new generation fails (``unavailable``), once;
    answers the list that counts the rebuilds tried."""
    build: Callable[..., object] = following.build
    tried: list[int] = []

    def flaky(*args: object, **kwargs: object) -> object:
        tried.append(1)
        if len(tried) == 1:
            raise UnavailableError("the rebuild failed (test)")
        return build(*args, **kwargs)

    monkeypatch.setattr(following, "build", flaky)
    return tried


def _sees_new_generation(follower: Store) -> None:
    """Wait (bounded) until the follower's watch of the generation record saw the
    writer's switch."""
    deadline = time.monotonic() + 10.0
    while not follower._journal.replaced():
        assert time.monotonic() < deadline, "the follower never saw the new generation"
        time.sleep(0.05)


def test_a_stream_follower_whose_move_to_a_purged_generation_fails_never_answers_from_the_old(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    url = single.url("failed-move", timeout=3)
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        writer.add_document("seed", "the kestrel-marker hovers over the verge")
        writer.add_document("other", "a wren in the hedge")
        follower._journal.wait_for(writer.revision, 10.0)
        assert follower.refresh() == writer.revision
        assert follower.has_document("seed")
        writer.delete_document("seed", purge=True)
        _sees_new_generation(follower)
        tried = _failing_once(monkeypatch)
        with pytest.raises(UnavailableError):
            follower.refresh()
        assert len(tried) == 1 and follower._journal.generation == 2
        # The journal is on the new generation, the state was not rebuilt: the next
        # read rebuilds (here it succeeds) instead of answering from the old state.
        assert not follower.has_document("seed")
        assert follower.get_document("seed") is None
        assert follower.search_documents("kestrel") == []
        assert follower.ids() == ["other"]
        assert len(tried) == 2
        local = os.environ["HOLOMEM_NATS_LOCAL"]
        assert files_with(local, b"kestrel-marker") == []
        writer.add_document("after", "written after the purge")
        follower._journal.wait_for(writer.revision, 10.0)
        assert follower.refresh() == writer.revision
        assert sorted(follower.ids()) == ["after", "other"]


def test_a_stream_follower_whose_subscription_to_the_new_generation_fails_stays_on_the_old(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A move to the writer's new generation that fails midway (here: subscribing to
    the new stream) leaves the follower's journal wholly on the generation it had, so
    the next look moves again, instead of a journal on the new generation with no
    consumer delivering it."""
    url = single.url("failed-subscribe", timeout=3)
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        writer.add_document("seed", "the plover-marker runs along the tideline")
        writer.add_document("other", "a curlew on the mudflat")
        follower._journal.wait_for(writer.revision, 10.0)
        follower.refresh()
        writer.delete_document("seed", purge=True)
        _sees_new_generation(follower)
        _subscribing_fails_once(monkeypatch)
        with pytest.raises(UnavailableError):
            follower.refresh()
        assert follower._journal.generation == 1 and follower._journal.replaced()
        assert not follower.has_document("seed")
        assert follower.generation == 2 and follower.ids() == ["other"]
        writer.add_document("after", "written after the purge")
        follower._journal.wait_for(writer.revision, 10.0)
        assert follower.refresh() == writer.revision
        assert sorted(follower.ids()) == ["after", "other"]


def _subscribing_fails_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Arm a single failure of the next subscription (a server hiccup); answers the list
    that records it."""
    start = follow.Tail.start
    failed: list[int] = []

    async def flaky(self: follow.Tail, js: JetStreamContext, stream: str, subject: str
                    ) -> None:
        if not failed:
            failed.append(1)
            raise UnavailableError("subscribing failed (test)")
        await start(self, js, stream, subject)

    monkeypatch.setattr(follow.Tail, "start", flaky)
    return failed


def _refresh_until(follower: Store, revision: int) -> int:
    """Refresh (each look takes at most a buffer's worth) until the follower reaches
    ``revision``, bounded; answers how many looks failed ``unavailable``."""
    failures = 0
    deadline = time.monotonic() + 30.0
    while follower.revision < revision:
        assert time.monotonic() < deadline, (
            f"the follower stays at {follower.revision}, the writer is at {revision}")
        try:
            follower.refresh()
        except UnavailableError:
            failures += 1
        time.sleep(0.02)
    return failures


def test_a_stream_follower_whose_resubscription_fails_once_consumes_again_at_the_next_look(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """The bounded buffer filled up and was taken; consuming again fails once. The
    follower is not left without a subscription: a later look subscribes again from
    the first message not taken, and it sees every write, later ones too."""
    _bounded_buffer(monkeypatch)
    url = single.url("resubscribe-fails", timeout=3)
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        docs = _write(writer, "a", 30)  # several buffers
        failed = _subscribing_fails_once(monkeypatch)
        assert _refresh_until(follower, writer.revision) == 1
        assert failed == [1]
        docs |= _write(writer, "b", 3)
        _refresh_until(follower, writer.revision)
        assert _holds(follower, docs) and len(follower.ids()) == len(docs)


def _refill_fails_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Arm a single failure of the next time a follower's tail consumes again after its
    buffer filled up (a server hiccup), as :meth:`follow.Tail.refill` fails when
    subscribing does."""
    refill = follow.Tail.refill
    failed: list[int] = []

    async def flaky(self: follow.Tail, js: JetStreamContext, stream: str, subject: str
                    ) -> None:
        if not failed:
            failed.append(1)
            await self.stop()
            raise UnavailableError("consuming again failed (test)")
        await refill(self, js, stream, subject)

    monkeypatch.setattr(follow.Tail, "refill", flaky)
    return failed


def test_a_stream_follower_whose_move_fails_midway_applies_each_transaction_once(
        single: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A move to a purged generation fails partway through the new stream (consuming
    again after a full buffer fails once); the next look rebuilds by reading the stream
    directly. The follower then holds what a fresh follower holds (the transactions
    its tail had not delivered are not applied a second time), and goes on following."""
    _bounded_buffer(monkeypatch)
    url = single.url("move-fails-midway", timeout=3)
    with Store.open(url) as writer, Store.open(url, read_only=True) as follower:
        docs = _write(writer, "a", 30)
        _refresh_until(follower, writer.revision)
        writer.delete_document("a0", purge=True)
        del docs["a0"]
        _sees_new_generation(follower)
        failed = _refill_fails_once(monkeypatch)
        with pytest.raises(UnavailableError):
            follower.refresh()
        assert failed == [1]
        applied: list[int] = []
        follow_one = follower._follow

        def counted(seq: int, events: list[ev.Event]) -> None:
            applied.append(seq)
            follow_one(seq, events)

        monkeypatch.setattr(follower, "_follow", counted)
        assert follower.refresh() == writer.revision
        docs |= _write(writer, "b", 3)
        _refresh_until(follower, writer.revision)
        assert len(applied) == len(set(applied)) == 3
        assert all(s > writer.revision - 3 for s in applied)
        with Store.open(url, read_only=True) as fresh:
            assert fresh.revision == follower.revision
            assert len(follower._state.catalog.ids) == len(fresh._state.catalog.ids)
            assert follower.stats().text_bytes == fresh.stats().text_bytes
            assert follower.stats().documents == fresh.stats().documents == len(docs)
            assert (follower.search_documents("a document 7", 10)
                    == fresh.search_documents("a document 7", 10))
        assert _holds(follower, docs) and len(follower.ids()) == len(docs)
