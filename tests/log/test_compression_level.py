"""The zstd level is the writer's choice (FORMAT.md §6): a large body that level 1
barely shrinks (float vectors) is compressed at the fast level, every other body at
level 1, and a frame reads back exactly whatever level wrote it — a store written
before the choice existed (everything at level 1) reads as ever."""

from __future__ import annotations

import os

import numpy as np
import pytest
import surgery

from holomem.log import Journal
from holomem.log.format import COMPRESS_PROBE_MIN, ZSTD_FAST_LEVEL, ZSTD_LEVEL
from holomem.log.frame import FrameCodec, pack_tx


def _vector_payloads(n: int, dim: int = 384) -> list[bytes]:
    """What a bulk load with vectors writes, roughly: a short text beside each vector."""
    rng = np.random.default_rng(29)
    rows = rng.standard_normal((n, dim)).astype("<f4")
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return [b"the fact number %d, in a few plain words" % i + r.tobytes()
            for i, r in enumerate(rows)]


def _text_payloads(n: int) -> list[bytes]:
    words = [b"remember", b"the", b"store", b"of", b"facts", b"holomem", b"journal"]
    return [b" ".join(words[(i * k) % len(words)] for k in range(300)) for i in range(n)]


def _codec() -> FrameCodec:
    return FrameCodec(store_id=bytes(16), envelope=None, compress=True)


def test_a_large_body_of_vectors_is_compressed_at_the_fast_level() -> None:
    vectors = pack_tx(_vector_payloads(1000))
    assert len(vectors) >= COMPRESS_PROBE_MIN
    assert _codec().level(vectors) == ZSTD_FAST_LEVEL


def test_text_and_small_bodies_are_compressed_at_level_1() -> None:
    text = pack_tx(_text_payloads(2000))
    assert len(text) >= COMPRESS_PROBE_MIN
    assert _codec().level(text) == ZSTD_LEVEL
    small = pack_tx(_vector_payloads(100))
    assert len(small) < COMPRESS_PROBE_MIN
    assert _codec().level(small) == ZSTD_LEVEL


@pytest.mark.parametrize("old_writer", [False, True], ids=["this writer", "level 1 only"])
def test_frames_of_either_level_read_back_exactly(tmp_path: object, old_writer: bool,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    store = os.path.join(str(tmp_path), "store")
    txs = [_vector_payloads(1000), _text_payloads(2000), _vector_payloads(50)]
    with monkeypatch.context() as patch:
        if old_writer:  # as the builds before the fast level wrote
            patch.setattr(FrameCodec, "level", lambda self, body: ZSTD_LEVEL)
        with Journal.open(store, sync="none") as j:
            assert [j.append(tx) for tx in txs] == [1, 2, 3]
    (seg,) = surgery.segment_paths(store)
    # (the text is kept compressed; a body of vectors may not be: at most 90 % pays)
    assert surgery.frames(seg)[1].flags & surgery.FRAME_FLAG_COMPRESSED
    for read_only in (False, True):
        with Journal.open(store, read_only=read_only) as j:
            assert list(j.replay()) == list(enumerate(txs, start=1))
