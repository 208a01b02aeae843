"""Opening only ever creates a store in a missing or empty directory; anything else that
is not a store is refused and left exactly as it was."""

from __future__ import annotations

import os

import pytest
import surgery

from holomem.errors import InvalidError, NotFoundError
from holomem.log import Journal


def test_a_non_empty_directory_that_is_not_a_store_is_refused_and_left_untouched(
    tmp_path: object,
) -> None:
    home = os.path.join(str(tmp_path), "home")
    os.makedirs(os.path.join(home, "photos"))
    surgery.write(os.path.join(home, "notes.txt"), b"my notes")
    before = surgery.snapshot(home)
    for kwargs in ({}, {"sync": "none"}, {"create": False}):
        with pytest.raises((InvalidError, NotFoundError)) as info:
            Journal.open(home, **kwargs)
        if kwargs.get("create", True):
            assert info.value.code == "invalid_request"
        assert surgery.snapshot(home) == before
    with pytest.raises(NotFoundError):
        Journal.open(home, read_only=True)
    assert surgery.snapshot(home) == before


def test_a_path_that_is_a_file_is_refused_as_invalid(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "file")
    surgery.write(path, b"not a directory")
    with pytest.raises(InvalidError):
        Journal.open(path)
    with pytest.raises((InvalidError, NotFoundError)):
        Journal.open(path, read_only=True)
    assert surgery.read(path) == b"not a directory"


def test_create_false_on_a_missing_store_is_not_found_and_creates_nothing(
    tmp_path: object,
) -> None:
    missing = os.path.join(str(tmp_path), "missing")
    with pytest.raises(NotFoundError) as info:
        Journal.open(missing, create=False)
    assert info.value.code == "not_found"
    assert not os.path.exists(missing)
    with pytest.raises(NotFoundError):
        Journal.open(missing, read_only=True)
    assert not os.path.exists(missing)
    empty = os.path.join(str(tmp_path), "empty")
    os.mkdir(empty)
    with pytest.raises(NotFoundError):
        Journal.open(empty, create=False)
    assert os.listdir(empty) == []


def test_a_store_is_created_in_a_missing_or_empty_directory_and_reopened_without_create(
    tmp_path: object,
) -> None:
    for name, make in (("missing", False), ("empty", True)):
        store = os.path.join(str(tmp_path), name)
        if make:
            os.mkdir(store)
        with Journal.open(store, sync="none") as j:
            j.append([name.encode()])
        with Journal.open(store, create=False, sync="none") as j:
            assert j.read(1) == [name.encode()]
        assert sorted(os.listdir(store)) == ["LOCK", "gen-00000001"]


def test_a_store_whose_lock_file_was_removed_still_opens(tmp_path: object) -> None:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none") as j:
        j.append([b"kept"])
    os.remove(os.path.join(store, "LOCK"))
    with Journal.open(store, create=False, sync="none") as j:
        assert j.read(1) == [b"kept"]
