"""A stream store's follower and a generation larger than its buffer (one server)."""

from __future__ import annotations

import base64
import os

import pytest

from holomem import Store
from holomem.log.stream import follow
from holomem.log.stream.codec import StreamCodec

from .cluster import Cluster, needs_server

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
            assert follower.refresh() == writer.revision
            assert follower.generation == writer.generation == 2
            assert not follower.has_document("a0")
            assert _holds(follower, docs) and len(follower.ids()) == len(docs)
    assert buffered.within_limit
