"""A posting merge holds exactly the postings of the segment and of the newer groups,
sorted by term then slot, without those of vacated slots — whatever the chunking,
the vacated slots and the number of groups (BM25's answers are read from it)."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import given, settings

from holomem.projections import postings
from holomem.projections.postings import Segment, merge, tokens_to_postings


def _documents(draw: st.DrawFn, n: int, terms: int) -> tuple[np.ndarray, np.ndarray]:
    lengths = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    tokens = draw(st.lists(st.integers(0, terms - 1), min_size=sum(lengths),
                           max_size=sum(lengths)))
    return np.array(tokens, dtype=np.int32), np.array(lengths, dtype=np.int32)


@st.composite
def _case(draw: st.DrawFn) -> tuple[int, list[tuple[np.ndarray, np.ndarray]], np.ndarray,
                                    int]:
    terms = draw(st.integers(1, 9))
    groups = [_documents(draw, draw(st.integers(0, 12)), terms)
              for _ in range(draw(st.integers(1, 4)))]
    slots = sum(len(lengths) for _, lengths in groups)
    alive = np.array(draw(st.lists(st.booleans(), min_size=slots, max_size=slots)), dtype=bool)
    return terms, groups, alive, draw(st.integers(1, 8))


def _reference(groups: list[tuple[np.ndarray, np.ndarray]], alive: np.ndarray
               ) -> list[tuple[int, int, int]]:
    """(term, slot, tf) of every live document's terms, counted one token at a time."""
    counts: dict[tuple[int, int], int] = {}
    slot = 0
    for tokens, lengths in groups:
        at = 0
        for n in lengths.tolist():
            for t in tokens[at : at + n].tolist():
                if alive[slot]:
                    counts[(t, slot)] = counts.get((t, slot), 0) + 1
            at += n
            slot += 1
    return sorted((t, s, tf) for (t, s), tf in counts.items())


@settings(max_examples=300, deadline=None)
@given(_case(), st.integers(0, 3))
def test_a_merge_holds_the_live_postings_of_the_segment_and_the_newer_groups(
        case: tuple[int, list[tuple[np.ndarray, np.ndarray]], np.ndarray, int],
        in_segment: int) -> None:
    terms, groups, alive, chunk = case
    in_segment = min(in_segment, len(groups) - 1)
    saved = postings.CHUNK
    postings.CHUNK = chunk  # every chunk boundary gets crossed
    try:
        _check(terms, groups, alive, in_segment)
    finally:
        postings.CHUNK = saved


def _check(terms: int, groups: list[tuple[np.ndarray, np.ndarray]], alive: np.ndarray,
           in_segment: int) -> None:
    triples = []
    first = 0
    for tokens, lengths in groups:
        triples.append(tokens_to_postings(tokens, lengths, first, terms))
        first += len(lengths)
    seg: Segment | None = None
    hi = sum(len(lengths) for _, lengths in groups[:in_segment])
    everyone = np.ones(len(alive), dtype=bool)
    # The first groups make the segment (all live then: slots are vacated later).
    if in_segment:
        seg = merge(None, triples[:in_segment], terms, everyone, 0, hi)
    got = merge(seg, triples[in_segment:], terms, alive, 0, first)
    assert got.indptr[-1] == len(got.slot) == len(got.tf)
    listed = [(t, s, tf) for t in range(terms)
              for s, tf in zip(*(a.tolist() for a in got.postings(t)), strict=True)]
    assert listed == _reference(groups, alive)
    assert got.docs == int(alive.sum())
