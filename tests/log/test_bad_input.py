"""Caller mistakes raise the documented holomem errors and write nothing.

STYLE §4: caller errors (``invalid``, ``closed``, ``read_only``) are kept apart from
disk failures, and no bare ValueError (or TypeError) leaves a public call.
"""

from __future__ import annotations

import os

import pytest
import surgery

from holomem.errors import ClosedError, HolomemError, InvalidError, ReadOnlyError
from holomem.log import Journal

BAD_TRANSACTIONS = [
    pytest.param(b"one payload", id="bytes-not-a-list"),
    pytest.param(bytearray(b"one payload"), id="bytearray-not-a-list"),
    pytest.param("a str", id="str"),
    pytest.param([], id="empty-list"),
    pytest.param((), id="empty-tuple"),
    pytest.param(["a str in a list"], id="str-payload"),
    pytest.param([b"ok", "not ok"], id="second-payload-str"),
    pytest.param([b"ok", 7], id="int-payload"),
    pytest.param([b"ok", None], id="none-payload"),
    pytest.param([[b"nested"]], id="nested-list"),
    pytest.param(None, id="none"),
    pytest.param(42, id="int"),
]


@pytest.mark.parametrize("payloads", BAD_TRANSACTIONS)
def test_append_of_a_malformed_transaction_is_invalid_and_writes_nothing(
    tmp_path: object, payloads: object
) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        j.append([b"before"])
        before = surgery.snapshot(store)
        with pytest.raises(InvalidError) as info:
            j.append(payloads)  # type: ignore[arg-type]
        assert info.value.code == "invalid_request"
        assert j.last_seq == 1
        assert surgery.snapshot(store) == before
        assert j.append([b"after"]) == 2  # the journal is not harmed
    with Journal.open(store, read_only=True) as j:
        assert list(j.replay()) == [(1, [b"before"]), (2, [b"after"])]


def test_append_accepts_any_bytes_like_payloads_in_any_sequence(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        tx = (b"tuple", bytearray(b"bytearray"), memoryview(b"view"), b"")
        assert j.append(tx) == 1  # type: ignore[arg-type]
    with Journal.open(store, read_only=True) as j:
        assert j.read(1) == [b"tuple", b"bytearray", b"view", b""]


def test_every_call_on_a_closed_journal_raises_closed(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    j = Journal.open(store, sync="none")
    j.append([b"x"])
    j.close()
    j.close()  # idempotent
    before = surgery.snapshot(store)
    for call in (lambda: j.append([b"y"]), j.sync, lambda: list(j.replay()),
                 lambda: j.read(1), j.refresh):
        with pytest.raises(ClosedError) as info:
            call()
        assert info.value.code == "closed"
    assert j.closed
    assert surgery.snapshot(store) == before
    with Journal.open(store, read_only=True) as j2:
        assert j2.last_seq == 1


def test_append_on_a_read_only_journal_raises_read_only_and_writes_nothing(
    tmp_path: object,
) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        j.append([b"x"])
    before = surgery.snapshot(store)
    with Journal.open(store, read_only=True) as j:
        with pytest.raises(ReadOnlyError) as info:
            j.append([b"y"])
        assert info.value.code == "read_only"
        assert not isinstance(info.value, InvalidError)
        j.sync()  # nothing to sync: harmless
        assert j.last_seq == 1
    assert surgery.snapshot(store) == before


@pytest.mark.parametrize("kwargs", [
    pytest.param({"sync": "always"}, id="sync-unknown"),
    pytest.param({"sync": ""}, id="sync-empty"),
    pytest.param({"sync": None}, id="sync-none-object"),
    pytest.param({"segment_size": 4095}, id="segment-too-small"),
    pytest.param({"segment_size": 0}, id="segment-zero"),
    pytest.param({"segment_size": -1}, id="segment-negative"),
    pytest.param({"segment_size": 8192.0}, id="segment-float"),
    pytest.param({"segment_size": "8192"}, id="segment-str"),
    pytest.param({"segment_size": True}, id="segment-bool"),
    pytest.param({"key": bytes(31)}, id="key-short"),
    pytest.param({"key": bytes(33)}, id="key-long"),
    pytest.param({"key": "0" * 32}, id="key-str"),
])
def test_invalid_open_arguments_are_refused_before_anything_is_created(
    tmp_path: object, kwargs: dict[str, object]
) -> None:
    fresh = os.path.join(str(tmp_path), "fresh")
    with pytest.raises(InvalidError):
        Journal.open(fresh, **kwargs)  # type: ignore[arg-type]
    assert not os.path.exists(fresh)
    existing = os.path.join(str(tmp_path), "existing")
    with Journal.open(existing, sync="none") as j:
        j.append([b"x"])
    before = surgery.snapshot(existing)
    with pytest.raises(InvalidError):
        Journal.open(existing, **kwargs)  # type: ignore[arg-type]
    assert surgery.snapshot(existing) == before


@pytest.mark.parametrize("seq", [0, -1, 2, 10**9])
def test_reading_a_sequence_number_that_does_not_exist_is_not_found(
    tmp_path: object, seq: int
) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        j.append([b"only"])
        with pytest.raises(HolomemError) as info:
            j.read(seq)
        assert info.value.code == "not_found"
