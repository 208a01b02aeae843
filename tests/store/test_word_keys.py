"""Bulk loads find words through BM25's table of word keys, a numpy cache of its word
dict: a key stands for exactly one word, the table gives back every id put in it
(and nothing for a word it does not hold), and documents loaded in bulk get the
terms, new term ids and postings that one document at a time gives them."""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
from hypothesis import example, given, settings

from holomem.events import DocumentAdded, Event
from holomem.projections.state import BULK_MIN, ProjectionState
from holomem.projections.wordtable import KEY_BYTES, WordTable, word_keys

_WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz0123456789"), min_size=1,
                max_size=KEY_BYTES)


def _keys(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    raw = " ".join(words).encode("ascii")
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    starts = np.cumsum(lengths + 1) - lengths - 1
    return word_keys(raw, starts, lengths)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(_WORD, max_size=300, unique=True), min_size=1, max_size=4),
       st.lists(_WORD, max_size=50))
def test_the_table_gives_back_each_word_s_id_and_nothing_for_another_word(
        batches: list[list[str]], probes: list[str]) -> None:
    table = WordTable()
    ids: dict[str, int] = {}
    for batch in batches:
        new = [w for w in batch if w not in ids]
        for w in new:
            ids[w] = len(ids)
        if new:
            low, high = _keys(new)
            table.insert(low, high, np.array([ids[w] for w in new]))
        asked = list(ids) + probes
        low, high = _keys(asked)
        assert table.lookup(low, high).tolist() == [ids.get(w, -1) for w in asked]
    assert table.count == len(ids)


def test_a_key_stands_for_one_word_whatever_follows_it() -> None:
    words = ["a", "ab", "a0", "abcdefgh", "abcdefghi", "x" * KEY_BYTES, "x" * (KEY_BYTES - 1)]
    low, high = _keys(words)
    assert len(set(zip(low.tolist(), high.tolist(), strict=True))) == len(words)
    # The same word elsewhere in another string, followed by other bytes, keeps its key.
    raw = b"zz abcdefghi\x00ab"
    lo2, hi2 = word_keys(raw, np.array([3, 13]), np.array([9, 2]))
    assert (lo2.tolist(), hi2.tolist()) == ([low[4], low[1]], [high[4], high[1]])


#: Short and long words, words sharing a stem, possessives, case, digits, and runs
#: longer than a term (which send the batch down the word-at-a-time path).
_PIECE = st.sampled_from([
    "paint", "painting", "painted", "Paints", "the", "river", "rivers", "42", "x1",
    "supercalifragilistic", "internationalisation", "a" * 17, "a" * 16, "b" * 16, "Alice's",
    "don't", "c" * 70, "zz", "q"])
_TEXT = st.lists(_PIECE, min_size=1, max_size=6).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_TEXT, min_size=1, max_size=2 * BULK_MIN), min_size=1, max_size=5))
# A long word whose first KEY_BYTES bytes are a word the table already holds.
@example([["a" * KEY_BYTES] * BULK_MIN, ["a" * (KEY_BYTES + 1)] * BULK_MIN])
def test_documents_loaded_in_bulk_get_the_terms_one_at_a_time_gives(
        transactions: list[list[str]]) -> None:
    bulk, single = ProjectionState(None), ProjectionState(None)
    slot = 0
    for seq, texts in enumerate(transactions, start=1):
        events: list[Event] = [DocumentAdded(id=f"d{slot + i}", text=t)
                               for i, t in enumerate(texts)]
        slot += len(texts)
        bulk.apply_all(seq, events)  # BULK_MIN documents or more take the bulk path
        for e in events:
            single.apply(seq, e)
    a, b = bulk.bm25, single.bm25
    assert a.vocabulary.terms == b.vocabulary.terms
    assert list(a.vocabulary._word_term.items()) == list(b.vocabulary._word_term.items())
    a.merge()
    b.merge()
    assert a.postings.doclen.view().tolist() == b.postings.doclen.view().tolist()
    for tid in range(len(a.vocabulary.terms)):
        assert ([x.tolist() for x in a.postings.of_term(tid)]
                == [x.tolist() for x in b.postings.of_term(tid)])


def test_words_chosen_to_share_a_place_in_one_table_spread_over_another() -> None:
    """Each table hashes with its own random multipliers, as Python seeds its string
    hash: words picked to share one place in a table (found by trying words against a
    hash known in advance) spread over another table's places. So no fixed text can
    flood the table, whose linear probing would otherwise cost every bulk load's
    insert and lookup work growing with the square of such words."""
    rng = np.random.default_rng(7)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz0123456789", dtype=np.uint8)
    low = np.unique(letters[rng.integers(0, 36, size=(1 << 20, 8))].view("<u8").ravel())
    high = np.zeros(len(low), dtype=np.uint64)
    first = WordTable()
    home = first._home(low, high)
    chosen = low[home == home[0]]  # about 256 words sharing one of 4,096 places
    assert len(chosen) > 100
    other = WordTable()
    places = np.unique(other._home(chosen, high[: len(chosen)]))
    assert len(places) > len(chosen) // 2
