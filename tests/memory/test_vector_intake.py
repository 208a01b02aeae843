"""A caller's vector is checked once, the same way on every path, and hashed as the bytes
stored (issue 29, "vectors that cost what they should").

- every bad vector — not finite, the wrong dimension, not numbers (complex, objects,
  strings, booleans), hostile (past the limit, nested, 2-d, raw bytes, an endless
  iterator, a list that holds itself or is nested thousands deep) — is
  ``invalid_request`` and writes nothing, in remember, remember_many, the JSON
  contract and the document engine, and whatever a batch's vector holds, remember_many
  raises only holomem's errors;
- the same numbers as a list, a float32 or float64 numpy array, an ``array.array``
  or a memoryview give the same stored bytes, the same digest and the same content id;
- a fact stored with digest 1 (the versions before digest 2 hashed the vector's JSON)
  is still recognised by a retry with the same id;
- a batch checked together (``vectors.matrix``) gives what one at a time gives, for
  every form, and a list not decoded as JSON passes together only when it holds
  Python floats alone (anything else is checked one at a time, and named).
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from holomem import Memory, Store
from holomem.api.engine import vectors
from holomem.api.memory.remember import intake
from holomem.api.memory.types import RememberInput
from holomem.errors import ConflictError, HolomemError, InvalidError
from holomem.events import DocumentAdded, FactAdded

DIM = 8
NAN, INF = float("nan"), float("inf")

good = st.lists(st.floats(-1.0, 1.0, allow_subnormal=False, width=32), min_size=DIM,
                max_size=DIM).filter(lambda v: any(v))


def _endless() -> Iterator[float]:
    return itertools.repeat(0.5)


def _bad_values() -> list[Any]:
    """Made afresh for each example: a buffer is not hashable, an iterator is used up."""
    return [
        b"\0" * 4 * DIM, bytearray(4 * DIM), memoryview(b"\0" * 4 * DIM), "0.5" * DIM,
        {"a": 1.0}, {1.0, 2.0}, 5, 1.5, object(),
        [True] * DIM, [0.5] * (DIM - 1) + [True], ["0.5"] * DIM, [0.5] * (DIM - 1) + ["1"],
        [None] * DIM, [[0.5] * DIM], [[0.5]] * DIM, [0.5, [0.5] * (DIM - 1)],
        np.array(["1"] * DIM), np.array([True] * DIM), np.array([1 + 1j] * DIM),
        np.array([0.5] * DIM, dtype=object).astype(str), [np.complex128(1 + 1j)] * DIM,
        np.ones((2, DIM)), np.ones((1, DIM)), np.array(0.5), np.zeros(0),
        np.array([{"a": 1}] * DIM, dtype=object), array.array("i", [1] * DIM),
        array.array("b", [1] * DIM), memoryview(np.ones((2, DIM))),
        [1e39] + [0.5] * (DIM - 1), [10**400] * DIM, [], [0.0] * DIM, np.zeros(DIM),
        [-0.0] * DIM, [0] * DIM, [1e-46] * DIM,  # rounds to float32 zeros
        (True,) * DIM, ("0.5",) * DIM, (0.5,) * (DIM - 1) + (None,),  # tuples are looked at too
        [0.5] * (vectors.MAX_DIM + 1), np.ones(vectors.MAX_DIM + 1),
        np.ones(10**6, dtype=np.float32), _endless(),
    ]


bad = st.one_of(
    st.integers(0, len(_bad_values()) - 1).map(lambda i: _bad_values()[i]),
    # NaN or an infinity somewhere, as a list or a float32 array
    st.tuples(good, st.integers(0, DIM - 1), st.sampled_from([NAN, INF, -INF]),
              st.booleans()).map(
        lambda t: (np.array if t[3] else list)([*t[0][: t[1]], t[2], *t[0][t[1] + 1:]])),
    # the wrong dimension (the store's is DIM)
    st.lists(st.floats(0.5, 1.0), min_size=1, max_size=2 * DIM).filter(lambda v: len(v) != DIM),
)


def _forms(v: list[float]) -> list[Any]:
    """The same numbers in every form a vector may be given in."""
    f32 = np.array(v, dtype=np.float32)
    return [v, tuple(v), f32, f32.astype(np.float64), array.array("f", f32.tobytes()),
            array.array("d", f32.astype(np.float64).tobytes()), memoryview(f32),
            f32.astype(">f4"), f32.astype(np.float64).tolist(),
            list(f32), list(f32.astype(np.float64)),  # numpy scalars: list(array)
            [_Float(x) for x in v]]


class _Float(float):
    """A subclass of float (a number, whatever a decoder of list[float] says)."""


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    with Store.open(str(tmp_path / "s"), sync="none") as store:
        m = Memory(store)
        m.remember("the dimension", id="first", embedding=[1.0] + [0.0] * (DIM - 1))
        yield m


def _state(m: Memory) -> tuple[int, int]:
    return m.store.revision, len(m.store)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vec=bad, where=st.integers(0, 3))
def test_a_bad_vector_is_invalid_and_writes_nothing_on_every_path(
        memory: Memory, vec: Any, where: int) -> None:
    before = _state(memory)
    calls = [
        lambda: memory.remember("x", embedding=vec),
        lambda: memory.remember_many([{"text": "fine"}, {"text": "x", "embedding": vec}]),
        lambda: memory.remember(RememberInput(text="x", embedding=vec)),
        lambda: memory.store.add_document("d", "x", embedding=vec),
    ]
    with pytest.raises(InvalidError):
        calls[where]()
    assert _state(memory) == before


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vec=bad.filter(lambda v: isinstance(v, list) and len(v) <= vectors.MAX_DIM
                      and all(type(x) in (int, float) for x in v)))
def test_a_bad_vector_in_a_json_request_is_invalid_and_writes_nothing(
        memory: Memory, vec: list[float]) -> None:
    before = _state(memory)
    with pytest.raises(InvalidError):
        memory.call("remember", {"facts": [{"text": "fine"}, {"text": "x", "embedding": vec}]})
    assert _state(memory) == before


def test_bytes_are_refused_with_a_hint_to_say_what_they_hold() -> None:
    with pytest.raises(InvalidError, match=r"numpy\.frombuffer"):
        vectors.vector(b"\0\0\x80?" * DIM)


def _fact_digest(m: Memory, fid: str) -> bytes:
    return m.store.read(lambda view: view.facts.times(view.facts.slot(fid)).digest)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(v=good)
def test_every_form_of_the_same_numbers_stores_the_same_bytes_and_digest(
        memory: Memory, v: list[float]) -> None:
    forms = _forms(v)
    checked = [vectors.vector(f, DIM) for f in forms]
    assert {c.tobytes() for c in checked} == {np.array(v, dtype="<f4").tobytes()}
    digests = {intake.check(RememberInput(text="same", embedding=f), 0).digest  # type: ignore[arg-type]
               for f in forms}
    assert len(digests) == 1
    first = memory.remember("same numbers", embedding=forms[0])
    for f in forms[1:]:
        again = memory.remember("same numbers", embedding=f)
        assert (again.id, again.created) == (first.id, False)
        again = memory.remember_many([{"text": "same numbers", "embedding": f}])[0]
        assert (again.id, again.created) == (first.id, False)
    assert _fact_digest(memory, first.id) == intake.digest(
        RememberInput(text="same numbers", embedding=v))[:8]
    # The JSON contract's list gives the same fact as well.
    answer = memory.call("remember", {"text": "same numbers", "embedding": v})
    assert answer["remembered"][0]["created"] is False


def test_a_batch_checked_together_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(29)
    rows = rng.standard_normal((50, DIM)).astype(np.float32)
    for given_rows in (rows.tolist(), list(rows), list(rows.astype(np.float64))):
        items = [RememberInput(text=f"t{i}", embedding=r)  # type: ignore[arg-type]
                 for i, r in enumerate(given_rows)]
        together = intake.check_all(items)
        alone = [intake.check(x, i) for i, x in enumerate(items)]
        assert [c.digest for c in together] == [c.digest for c in alone]
        assert [c.vector.tobytes() for c in together] == \
            [c.vector.tobytes() for c in alone]  # type: ignore[union-attr]


def test_a_fact_stored_with_digest_1_is_recognised_by_a_retry(tmp_path: Path) -> None:
    """A fact written by a version before digest 2 holds the digest of its JSON: a
    retry with the same id is created=False, one with other numbers a conflict."""
    vec = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    x = RememberInput(text="old fact", id="old", embedding=vec)
    legacy = intake.legacy_digest(x)
    assert legacy == hashlib.sha256(intake.canonical_payload(x)).digest()
    assert legacy != intake.digest(x)
    with Store.open(str(tmp_path / "s"), sync="none") as store:
        m = Memory(store)

        # A fact as the old version wrote it: its events, with digest 1.
        store.commit(lambda view: [
            DocumentAdded(id="old1", text="old fact", embedding=np.array(
                vec, dtype="<f4").tobytes()),
            FactAdded(id="old1", ingest_time=1, digest=legacy[:8])])
        again = m.remember(msgspec.structs.replace(x, id="old1"))
        assert again.created is False
        again = m.remember(text="old fact", id="old1", embedding=np.array(vec))
        assert again.created is False
        with pytest.raises(ConflictError):
            m.remember(text="old fact", id="old1", embedding=[0.9, *vec[1:]])


def test_a_batch_of_any_form_checked_together_equals_one_at_a_time() -> None:
    rng = np.random.default_rng(7)
    rows = rng.standard_normal((40, DIM)).astype(np.float32)
    forms = [rows.tolist(), rows.astype(np.float64).tolist(), list(rows),
             list(rows.astype(">f4")), list(rows.astype(np.float64)),
             list(np.repeat(rows, 2, axis=1)[:, ::2]),  # arrays that are not contiguous
             [array.array("f", r.tobytes()) for r in rows],
             [array.array("d", r.astype(np.float64).tobytes()) for r in rows],
             [memoryview(r) for r in rows], [memoryview(r) for r in rows.astype(">f8")]]
    for given_rows in forms:
        m = vectors.matrix(given_rows, decoded=False)
        assert m is not None and m.dtype == np.dtype("<f4")
        assert m.tobytes() == rows.astype("<f4").tobytes()
        assert [vectors.vector(r).tobytes() for r in given_rows] == [r.tobytes() for r in m]


class _Float(float):
    pass


@pytest.mark.parametrize("odd", [True, False, 1, 0, "0.5", None, [0.5], np.float64(0.5),
                                 np.float32(0.5), _Float(0.5), 10**400],
                         ids=repr)
def test_a_list_not_decoded_passes_together_only_with_floats_alone(odd: object) -> None:
    """A list a caller built may hold anything: in a batch it is read at once only
    when every item is a Python float; else each is looked at (and a bad one named)."""
    rows = [[0.5] * DIM for _ in range(20)]
    rows[13] = [0.5] * (DIM - 1) + [odd]
    assert vectors.matrix(rows, decoded=False) is None
    assert vectors.matrix(rows[:13], decoded=False) is not None


def test_remember_many_reads_a_batch_of_lists_as_one_at_a_time_does(tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    rows = rng.standard_normal((30, DIM)).astype(np.float32).tolist()
    rows[3] = [1, 0, 0, 0, 0, 0, 0, 0]  # ints: msgspec converts the batch
    with Store.open(str(tmp_path / "s"), sync="none") as store:
        m = Memory(store)
        for batch in ([{"text": f"t{i}", "embedding": r} for i, r in enumerate(rows)],
                      [{"text": f"t{i}", "embedding": r} for i, r in enumerate(rows) if i != 3]):
            converted = intake.convert_all(batch)
            assert converted is not None
            together = intake.check_all(*converted)
            alone = [intake.check(RememberInput(**x), i)  # type: ignore[arg-type]
                     for i, x in enumerate(batch)]
            assert [c.digest for c in together] == [c.digest for c in alone]
            assert [c.vector.tobytes() for c in together] == \
                [c.vector.tobytes() for c in alone]  # type: ignore[union-attr]
        first = m.remember_many([{"text": f"t{i}", "embedding": r} for i, r in enumerate(rows)])
        again = [m.remember(f"t{i}", embedding=r) for i, r in enumerate(rows)]
        assert [(a.id, a.created) for a in again] == [(f.id, False) for f in first]
        with pytest.raises(InvalidError, match="input 5"):
            m.remember_many([{"text": f"u{i}", "embedding": [True] * DIM if i == 5 else r}
                             for i, r in enumerate(rows)])


@pytest.mark.parametrize("vec", [(True,) * DIM, ("0.5",) * DIM, (0.5,) * (DIM - 1) + ("1",)],
                         ids=repr)
def test_a_tuple_of_strings_or_booleans_is_refused_by_remember_many(
        memory: Memory, vec: tuple[object, ...]) -> None:
    """A tuple is never what a JSON decoder gives: its items are looked at (a batch
    once read them as numbers, "0.5" and True included)."""
    before = _state(memory)
    for call in (lambda: memory.remember_many([{"text": "x", "embedding": vec}]),
                 lambda: memory.remember(RememberInput(text="x", embedding=vec))):  # type: ignore[arg-type]
        with pytest.raises(InvalidError, match="embedding"):
            call()
    assert _state(memory) == before


def _holds_itself() -> list[object]:
    x: list[object] = []
    x.append(x)
    return [1.0, x] + [0.5] * (DIM - 2)


def _nested(depth: int) -> list[object]:
    deep: object = 1.0
    for _ in range(depth):
        deep = [deep]
    return [1.0, deep] + [0.5] * (DIM - 2)


@pytest.mark.parametrize("make", [_holds_itself, lambda: _nested(5_000)],
                         ids=["holds itself", "nested 5,000 deep"])
def test_a_list_that_holds_itself_or_is_nested_too_deep_is_invalid_in_a_batch(
        memory: Memory, make: Any) -> None:
    """The batch check walks such a list down until the interpreter's limit: it then
    leaves the batch to the one-at-a-time check, which names the input."""
    before = _state(memory)
    assert vectors.matrix([make(), [0.5] * DIM], decoded=False) is None
    assert vectors.matrix([make(), [0.5] * DIM]) is None
    for bad in (0, 1):
        batch = [{"text": f"t{i}", "embedding": make() if i == bad else [0.5] * DIM}
                 for i in range(2)]
        with pytest.raises(InvalidError, match=f"input {bad}: .*embedding"):
            memory.remember_many(batch)
        with pytest.raises(InvalidError, match=f"document {bad}: .*embedding"):
            memory.store.add_documents([{"id": f"d{i}", **x} for i, x in enumerate(batch)])
    with pytest.raises(InvalidError, match="embedding"):
        memory.remember("x", embedding=make())
    assert _state(memory) == before


def _object_array(items: list[object]) -> np.ndarray:
    """A 1-d array of ``items`` as Python objects (``np.array`` of nested lists would
    try to make them dimensions, and fail on ragged ones)."""
    out = np.empty(len(items), dtype=object)
    for i, item in enumerate(items):
        out[i] = item
    return out


_leaves = st.one_of(st.floats(width=32), st.floats(), st.integers(), st.booleans(),
                    st.none(), st.text(max_size=3), st.binary(max_size=8),
                    st.complex_numbers(max_magnitude=10))
_odd = st.recursive(_leaves, lambda inner: st.one_of(
    st.lists(inner, max_size=DIM + 1), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.text(max_size=2), inner, max_size=2),
    st.lists(inner, min_size=1, max_size=DIM).map(_object_array)),
    max_leaves=24)


def _looped(value: object) -> object:
    """``value`` made to hold itself, where it can."""
    if isinstance(value, list):
        value.append(value)
    elif isinstance(value, dict):
        value["self"] = value
    return value


odd_vectors = st.one_of(
    _odd, _odd.map(_looped),
    st.tuples(_odd, st.sampled_from([1, 30, 900, 1_100, 5_000])).map(
        lambda t: _nested(t[1])[:1] + [t[0]] + [0.5] * (DIM - 2)),
    st.lists(st.one_of(st.floats(-1, 1, width=32), _odd.map(_looped)), min_size=DIM,
             max_size=DIM))


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(vec=odd_vectors, where=st.integers(0, 2), size=st.integers(2, 20))
def test_remember_many_of_any_nested_or_odd_vector_raises_only_holomem_errors(
        memory: Memory, vec: Any, where: int, size: int) -> None:
    """Whatever a batch's vector holds, remember_many stores it (a vector after all) or
    refuses it with holomem's own error, never one of the checks' own."""
    batch: list[dict[str, Any]] = [{"text": f"fine {i}", "embedding": [0.5] * DIM}
                                   for i in range(size)]
    batch.insert(min(where, size), {"text": "odd", "embedding": vec})
    with contextlib.suppress(HolomemError):
        memory.remember_many(batch)


def test_import_and_recall_take_a_vector_in_every_form_remember_takes(tmp_path: Path) -> None:
    v = [0.25, -0.5, 1.0, 2.0] + [0.125] * (DIM - 4)
    stored = np.array(v, dtype="<f4").tobytes()
    for n, form in enumerate(_forms(v)):
        with Store.open(str(tmp_path / str(n)), sync="none") as store:
            memory = Memory(store)
            report = memory.import_([{"format": 3, "id": "x", "text": "imported",
                                      "ingestTime": 1, "embedding": form}])
            assert report.imported == 1
            assert store.read(lambda view: view.vector_as_written(view.slot("x"))) == stored
            assert [r.id for r in memory.recall("imported", embedding=form)] == ["x"]
    with Store.open(str(tmp_path / "bad"), sync="none") as store, \
            pytest.raises(InvalidError, match="line 1: embedding"):
        Memory(store).import_([{"format": 3, "id": "x", "text": "t", "ingestTime": 1,
                                "embedding": np.array([True] * DIM)}])
