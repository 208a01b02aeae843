"""Bad input to the document API raises an ``invalid`` error and writes nothing.

docs/contract.md §2: "Over a limit: a clear error, nothing written." docs/contract.md
§5: anything other than a caller error "must never be caused by any input a client can
send." STYLE.md §4: no bare ValueError (or TypeError, or warning) leaves a public call.

Hypothesis generates wrong types, empty ids, over-limit text, metadata that is not
JSON (or too deep, too big, NaN), embeddings with NaN, zeros or the wrong dimension,
lone surrogates, and k out of range, for every document call. Each must raise
an InvalidError (code "invalid_request", or "limit" for a LimitError;
pytest's filterwarnings=error also turns any warning into a failure), and neither
the store's revision, the journal's last sequence number, nor any byte of the
journal or text segment may change.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from holomem import DocumentInput, Journal, Store
from holomem.api.engine import validate
from holomem.errors import HolomemError, InvalidError
from tests.store._util import all_files

DIM = 4
NAN = float("nan")
INF = float("inf")
LONE = ["\ud800", "ab\udfffcd", "\udbff\udbff", "x\udc80"]  # lone surrogates

words = st.text(alphabet="abc ", max_size=20)
good_ids = st.text(alphabet="abcdefgh-0123", min_size=1, max_size=8)
good_vectors = st.lists(st.floats(-10, 10, allow_nan=False).filter(bool),
                        min_size=DIM, max_size=DIM)

# -- bad values, by field ------------------------------------------------------------
not_strings = st.one_of(st.none(), st.integers(), st.floats(), st.binary(max_size=4),
                        st.lists(st.text(max_size=2), max_size=2), st.just(("t",)),
                        st.just(object()))
bad_ids = st.one_of(
    not_strings,
    st.just(""),
    st.just("i" * (validate.MAX_ID_CHARS + 1)),
    st.text(max_size=4).flatmap(lambda s: st.sampled_from([s + "\x00", "\n" + s, s + "\x7f"])),
    st.sampled_from(LONE),
)
bad_texts = st.one_of(
    not_strings,
    st.sampled_from(LONE),
    st.just("x" * (validate.MAX_TEXT_BYTES + 1)),  # one long "word", over the byte limit
    st.just("é" * (validate.MAX_TEXT_BYTES // 2 + 1)),  # bytes, not characters, count
    st.just("w " * (validate.MAX_WORDS + 1)),  # over the word limit
    st.just("中" * (validate.MAX_WORDS + 1)),  # CJK: one word per character
)


def _nested(depth: int, leaf: object = 1, dicts: bool = True) -> dict[str, Any]:
    value: object = leaf
    for _ in range(depth):
        value = {"k": value} if dicts else [value]
    return {"top": value}


def _recursive() -> dict[str, Any]:
    d: dict[str, Any] = {}
    d["self"] = d
    return d


not_json = st.sampled_from([NAN, INF, -INF, {1, 2}, b"bytes", object(), 1 + 2j, 2**64,
                            -(2**64), *LONE, [1, NAN], {"x": [b"y"]}, {"x": {3: 4}}])
bad_metadata = st.one_of(
    st.lists(st.integers(), max_size=3), st.text(max_size=3), st.integers(), st.just(("a", 1)),
    st.binary(max_size=3),  # not a dict
    st.tuples(st.text(alphabet="ab", max_size=3), not_json).map(lambda kv: {kv[0]: kv[1]}),
    st.sampled_from([{1: "a"}, {None: 1}, {("t",): 1}, {"\ud800": 1},
                     {"ok": types.MappingProxyType({"x": NAN})}]),
    st.integers(validate.MAX_METADATA_DEPTH, 60).flatmap(
        lambda d: st.sampled_from([_nested(d), _nested(d, dicts=False)])),
    st.just(_recursive()),
    st.just({"k": "x" * validate.MAX_METADATA_BYTES}),  # too big once quoted
    st.just({str(i): i for i in range(8000)}),
)
bad_embeddings = st.one_of(
    st.sampled_from(["abcd", b"abcd", {"a": 1.0}, 5, 1.5, [True, False, True, True],
                     ["1", "2", "3", "4"], [None] * DIM, [[1.0] * DIM], {1.0, 2.0, 3.0, 4.0},
                     np.array(["1", "2", "3", "4"]), np.array([True] * DIM),
                     np.array([1 + 1j] * DIM), [np.complex128(1 + 1j)] * DIM, np.ones((2, 2)),
                     np.array(1.0), [1e39, 1.0, 1.0, 1.0], [10**400] * DIM, [],
                     [1.0] * (validate.MAX_EMBEDDING_DIM + 1)]),
    # NaN or infinity somewhere
    st.tuples(good_vectors, st.integers(0, DIM - 1), st.sampled_from([NAN, INF, -INF])).map(
        lambda t: [*t[0][: t[1]], t[2], *t[0][t[1] + 1 :]]),
    st.tuples(good_vectors, st.integers(0, DIM - 1)).map(
        lambda t: np.array([*t[0][: t[1]], NAN, *t[0][t[1] + 1 :]], dtype=np.float32)),
    # the wrong dimension
    st.lists(st.floats(0.5, 2.0), min_size=1, max_size=12).filter(lambda v: len(v) != DIM),
    # all zeros (no direction)
    st.sampled_from([[0.0] * DIM, [-0.0] * DIM, np.zeros(DIM), [0] * DIM]),
)
bad_entities = st.one_of(
    st.sampled_from(["abc", b"ab", 5, [1], [""], [None], ["ok", 3],
                     ["e" * (validate.MAX_ENTITY_CHARS + 1)],
                     [f"e{i}" for i in range(validate.MAX_ENTITIES + 1)]]),
    st.sampled_from(LONE).map(lambda s: [s]),
)
bad_queries = st.one_of(not_strings, st.sampled_from(LONE),
                        st.just("q" * (validate.MAX_QUERY_BYTES + 1)))
bad_ks = st.one_of(st.integers(max_value=0), st.integers(min_value=validate.MAX_K + 1),
                   st.sampled_from([1.5, True, False, "3", None, float("nan"), 2**200]))
bad_id_lists = st.one_of(st.sampled_from(["abc", b"ab", 5, 1.5]),
                         st.lists(bad_ids, min_size=1, max_size=3).flatmap(
                             lambda bad: st.lists(good_ids, max_size=2).map(lambda g: g + bad)))

# -- bad calls -------------------------------------------------------------------------
Call = tuple[str, tuple[Any, ...], dict[str, Any]]


def _add(doc_id: object = "new", text: object = "some words", **fields: object) -> Call:
    return ("add_document", (doc_id, text), fields)


def _one_bad_field() -> st.SearchStrategy[dict[str, Any]]:
    """A document dict with exactly one bad field."""
    return st.one_of(
        st.builds(lambda i: {"id": i, "text": "t"}, bad_ids),
        st.builds(lambda t: {"id": "x", "text": t}, bad_texts),
        st.builds(lambda m: {"id": "x", "text": "t", "metadata": m}, bad_metadata),
        st.builds(lambda e: {"id": "x", "text": "t", "embedding": e}, bad_embeddings),
        st.builds(lambda e: {"id": "x", "text": "t", "entities": e}, bad_entities),
    )


bad_items = st.one_of(
    _one_bad_field(),
    _one_bad_field().map(lambda d: DocumentInput(**d)),  # Structs do not validate on init
    st.sampled_from([5, "x", None, [("id", "a")], {"id": "a"}, {"text": "b"},
                     {"id": "a", "text": "b", "extra": 1}, {1: 2}]),
)
good_items = st.builds(lambda i, t, e: {"id": i, "text": t, "embedding": e},
                       good_ids, words, st.none() | good_vectors)
# Good documents around one bad one: the batch is atomic, so nothing is written.
bad_batches = st.tuples(st.lists(good_items, max_size=3), bad_items, st.integers(0, 3)).map(
    lambda t: [*t[0][: t[2]], t[1], *t[0][t[2] :]])

bad_calls: st.SearchStrategy[Call] = st.one_of(
    st.builds(lambda i: _add(i), bad_ids),
    st.builds(lambda t: _add(text=t), bad_texts),
    st.builds(lambda m: _add(metadata=m), bad_metadata),
    st.builds(lambda e: _add(embedding=e), bad_embeddings),
    st.builds(lambda e: _add(entities=e), bad_entities),
    st.builds(lambda i: _add("kept", "replacement text", metadata={"x": NAN}), st.none()),
    st.builds(lambda b: ("add_documents", (b,), {}), bad_batches),
    st.builds(lambda c: ("add_documents", (c,), {}),
              st.sampled_from(["abc", b"x", {"id": "a", "text": "b"}, 5, None, [], iter([])])),
    st.builds(lambda q: ("search_documents", (q,), {}), bad_queries),
    st.builds(lambda k: ("search_documents", ("words", k), {}), bad_ks),
    st.builds(lambda e: ("search_documents", ("words",), {"embedding": e}), bad_embeddings),
    st.builds(lambda ids: ("search_documents", ("words",), {"ids": ids}), bad_id_lists),
    st.builds(lambda name, i: (name, (i,), {}),
              st.sampled_from(["get_document", "has_document", "delete_document"]), bad_ids),
)


def _journal_state(store: Store) -> tuple[int, int]:
    with Journal.open(store.path, read_only=True) as j:
        return j.last_seq, j.stats().bytes


def _expect_invalid(store: Store, call: Call) -> None:
    name, args, kwargs = call
    method: Callable[..., Any] = getattr(store, name)
    revision, last = store.revision, _journal_state(store)
    stats, dim = store.stats(), store.embedding_dim
    with pytest.raises(HolomemError) as info:
        method(*args, **kwargs)
    assert isinstance(info.value, InvalidError), info.value
    assert store.revision == revision
    assert _journal_state(store) == last
    after = store.stats()
    assert (after.documents, after.journal_bytes, after.text_bytes) == (
        stats.documents, stats.journal_bytes, stats.text_bytes)
    assert store.embedding_dim == dim


def _seed(store: Store) -> None:
    store.add_document("kept", "some words to keep", metadata={"a": 1},
                       embedding=[1.0, 2.0, 3.0, 4.0], entities=["E"])
    store.add_document("plain", "more words")


@pytest.mark.parametrize("sync", ["none", "full"])
def test_bad_input_raises_only_invalid_errors_and_writes_nothing(
        tmp_path: Path, sync: str) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync=sync) as store:
        _seed(store)
        files = all_files(path)

        @settings(max_examples=300 if sync == "none" else 60, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(call=bad_calls)
        def check(call: Call) -> None:
            _expect_invalid(store, call)

        check()
        assert all_files(path) == files  # not one byte changed
        # The store still works after all those refusals (no lock left held).
        store.add_document("after", "words after")
        assert [h.id for h in store.search_documents("after")] == ["after"]
        doc = store.get_document("kept")
        assert doc is not None and doc.metadata == {"a": 1} and doc.entities == ("E",)


def test_a_batch_with_one_bad_item_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path, sync="none") as store:
        # An empty store: the batch's first embedding would fix the dimension; a later
        # item with another dimension fails the whole batch, and fixes nothing.
        _expect_invalid(store, ("add_documents", ([
            {"id": "a", "text": "first", "embedding": [1.0, 0.0, 0.0]},
            {"id": "b", "text": "second"},
            {"id": "c", "text": "third", "embedding": [1.0, 0.0]},
        ],), {}))
        assert store.embedding_dim == 0 and len(store) == 0
        _expect_invalid(store, ("add_documents", ([
            {"id": "a", "text": "fine"},
            {"id": "b", "text": "w " * (validate.MAX_WORDS + 1)},
        ],), {}))
        assert store.ids() == [] and store.search_documents("fine") == []
        store.add_documents([{"id": "a", "text": "fine", "embedding": [0.0, 1.0]}])
        assert store.embedding_dim == 2


def test_limits_are_inclusive(tmp_path: Path) -> None:
    """Exactly at a limit is accepted; one over is refused (docs/contract.md §2)."""
    with Store.open(tmp_path / "store", sync="none") as store:
        store.add_document("words", "w " * validate.MAX_WORDS)
        store.add_document("bytes", "x" * validate.MAX_TEXT_BYTES)
        store.add_document("id" + "i" * (validate.MAX_ID_CHARS - 2), "long id")
        store.add_document("deep", "d", metadata=_nested(validate.MAX_METADATA_DEPTH - 1))
        store.search_documents("w", validate.MAX_K)
        _expect_invalid(store, _add("words", "w " * (validate.MAX_WORDS + 1)))
        _expect_invalid(store, _add("bytes", "x" * (validate.MAX_TEXT_BYTES + 1)))
        _expect_invalid(store, _add("deep", "d",
                                    metadata=_nested(validate.MAX_METADATA_DEPTH)))


def test_metadata_may_be_any_mapping(tmp_path: Path) -> None:
    """The API takes a Mapping: a read-only mapping is stored as the dict it holds."""
    with Store.open(tmp_path / "store", sync="none") as store:
        meta = types.MappingProxyType({"b": types.MappingProxyType({"c": [1, 2]}), "a": 1})
        store.add_document("m", "text", metadata=meta)
        doc = store.get_document("m")
        assert doc is not None and doc.metadata == {"a": 1, "b": {"c": [1, 2]}}


@pytest.mark.parametrize("path", [None, 5, b"/tmp/x", "", "with\x00nul"],
                         ids=["none", "int", "bytes", "empty", "nul"])
def test_a_path_that_is_no_path_is_refused_before_anything_is_made(
        tmp_path: Path, path: Any) -> None:
    with pytest.raises(InvalidError, match="path must be"):
        Store.open(path)


def test_yes_or_no_options_take_only_booleans_and_refuse_before_acting(tmp_path: Path) -> None:
    where = tmp_path / "s"
    for option in ("create", "read_only"):
        with pytest.raises(InvalidError, match=option):
            Store.open(where, **{option: "no"})
    assert not where.exists()  # create="no" made no store
    with Store.open(where, sync="none") as store:
        store.add_document("x", "a text")
        generation = store.generation
        with pytest.raises(InvalidError, match="purge"):
            store.delete_document("x", purge="no")  # type: ignore[arg-type]
        with pytest.raises(InvalidError, match="purge"):
            store.compact(purge=1)  # type: ignore[arg-type]
        assert store.has_document("x") and store.generation == generation


def test_entity_lookups_and_the_event_feed_check_their_argument(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="none") as store:
        store.add_document("x", "a text", entities=["e"])
        assert store.ids_with_entity("e") == ["x"]
        for bad in (["e"], {"e": 1}, None, b"e", 3.5):
            with pytest.raises(InvalidError, match="entity"):
                store.ids_with_entity(bad)  # type: ignore[arg-type]
        with pytest.raises(HolomemError, match="entity"):
            store.ids_with_entity("e" * 100_000)
        for seq in ("x", None, 3.5, -1, True):
            with pytest.raises(InvalidError, match="from_seq"):
                list(store.events(seq))  # type: ignore[arg-type]
        assert [seq for seq, _ in store.events(0)] == [1]
