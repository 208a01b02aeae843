"""An embedder is deterministic: the same text gives the same bytes, on repeat and in
any batch composition (issue 14, item 2).

``minilm`` runs each text alone, as one unpadded sequence on one thread (a long text
embedded alone on one thread per core), and spreads a batch over a pool of threads,
so a text's vector cannot depend on its neighbours,
their number, their order, which thread ran it, or the process (a forked child
starts threads of its own). Hypothesis draws batches mixing arbitrary text with
sentences of equal token counts and compares each row's bytes with the text embedded
alone.
"""

from __future__ import annotations

import os
import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from holomem.embedders import MiniLM, by_name, minilm

EMBEDDER = by_name("minilm")
_ALONE: dict[str, bytes] = {}


def alone(text: str) -> bytes:
    if text not in _ALONE:
        _ALONE[text] = EMBEDDER.embed([text]).tobytes()
    return _ALONE[text]


#: Sentences of equal token counts, so that a batch forms groups of several sequences.
POOL = [f"Fact number {i} says the {colour} door is open."
        for i, colour in enumerate(["red", "blue", "green", "black", "white", "grey"])]
assert {len(MiniLM().token_ids(t)) for t in POOL} == {12}
TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(POOL), TEXT), min_size=1, max_size=10))
def test_a_vector_has_the_same_bytes_in_any_batch_as_alone(batch: list[str]) -> None:
    vectors = EMBEDDER.embed(batch)
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
    assert vectors.shape == (len(batch), 384)
    for text, row in zip(batch, vectors, strict=True):
        assert row.tobytes() == alone(text)


def test_a_long_text_alone_has_the_bytes_it_has_in_a_batch() -> None:
    # A text of WIDE_TOKENS word pieces or more, alone, runs on one thread per core;
    # in a batch, on one thread: the bytes are the same, at every length up to the cap.
    words = "we went hiking near the lake and talked about her new job at the hospital"
    texts = [" ".join([words] * n) + f" ({n})" for n in (4, 5, 8, 12, 17, 40)]
    lengths = [len(MiniLM().token_ids(t)) for t in texts]
    assert min(lengths) >= minilm.WIDE_TOKENS and max(lengths) == minilm.MAX_TOKENS
    together = EMBEDDER.embed([*texts, "a short one"])
    for text, row in zip(texts, together, strict=False):
        assert row.tobytes() == EMBEDDER.embed([text]).tobytes()


def test_repeated_calls_give_the_same_bytes() -> None:
    texts = ["She works as a nurse", "", "Alice lives in Berlin"]
    first = EMBEDDER.embed(texts).tobytes()
    EMBEDDER.embed(POOL)  # anything in between changes nothing
    assert EMBEDDER.embed(texts).tobytes() == first
    assert by_name("minilm").embed(texts).tobytes() == first  # another instance


def test_a_group_split_into_chunks_keeps_every_vector() -> None:
    # 150 texts of one token count: more than one encoder call's worth, in any order.
    texts = [f"Fact number {i} says the red door is open." for i in range(150)]
    assert {len(MiniLM().token_ids(t)) for t in texts} == {12}
    together = EMBEDDER.embed(texts)
    backwards = EMBEDDER.embed(texts[::-1])[::-1]
    for i in (0, 63, 64, 65, 127, 128, 149):
        assert together[i].tobytes() == alone(texts[i]) == backwards[i].tobytes()


def test_threads_embedding_at_once_get_the_same_bytes() -> None:
    texts = [*POOL, "She works as a nurse"]
    expected = [alone(t) for t in texts]
    results: list[list[bytes]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append([v.tobytes() for v in by_name("minilm").embed(texts)])
        except BaseException as exc:  # reported below, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert results == [expected] * 4


def test_a_forked_child_embeds_as_its_parent_does() -> None:
    texts = [f"turn {i}: we went hiking near the lake" for i in range(6)]
    embedder = by_name("minilm")
    # the parent's threads are running now: the pool's, and those of a text alone
    mine = np.concatenate([embedder.embed(texts), embedder.embed(texts[:1])])
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own threads, the same bytes
        try:
            child = np.concatenate([embedder.embed(texts), embedder.embed(texts[:1])])
            os.write(write, child.tobytes())
        finally:
            os._exit(0)
    os.close(write)
    got = b""
    while chunk := os.read(read, 1 << 16):
        got += chunk
    os.close(read)
    os.waitpid(pid, 0)
    assert got == mine.tobytes()
