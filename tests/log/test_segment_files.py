"""A segment file missing, duplicated or out of place is refused, never skipped.

FORMAT.md "A generation is valid iff": segments numbered 1, 2, ... without a gap, each
naming its own number, generation and store, each continuing the previous sequence.
"""

from __future__ import annotations

import os
import shutil

import pytest
import surgery

from holomem.errors import CorruptError, HeaderError, MissingSegmentError
from holomem.log import Journal


def _store(tmp_path: object, segments: int = 3) -> str:
    store = os.path.join(str(tmp_path), "store")
    with Journal.open(store, sync="none", segment_size=4096) as j:
        while j.stats().segments < segments:
            j.append([os.urandom(900)])
        j.append([b"last"])
    return store


@pytest.mark.parametrize("read_only", [True, False], ids=["follower", "writer"])
def test_a_missing_middle_segment_is_refused_and_named(tmp_path: object, read_only: bool) -> None:
    store = _store(tmp_path)
    first, second, third = surgery.segment_paths(store)
    os.remove(second)
    with pytest.raises(MissingSegmentError) as info:
        Journal.open(store, read_only=read_only)
    assert info.value.code == "corrupt.missing"
    assert "seg-00000002" in info.value.path
    assert sorted(surgery.segment_paths(store)) == [first, third]  # nothing repaired


def test_a_missing_first_segment_is_refused(tmp_path: object) -> None:
    store = _store(tmp_path)
    os.remove(surgery.segment_paths(store)[0])
    with pytest.raises(CorruptError) as info:
        Journal.open(store, read_only=True)
    assert "seg-00000001" in info.value.path


def test_a_segment_copied_under_another_number_is_refused(tmp_path: object) -> None:
    store = _store(tmp_path)
    _, second, third = surgery.segment_paths(store)
    shutil.copy(second, third)  # seg-3 now holds seg-2's bytes
    with pytest.raises(HeaderError) as info:
        Journal.open(store)
    assert (info.value.path, info.value.offset) == (third, 0)


def test_a_segment_from_another_generation_is_refused(tmp_path: object) -> None:
    store = _store(tmp_path)
    gen = surgery.generation_dirs(store)[0]
    os.rename(gen, os.path.join(store, "gen-00000002"))
    with pytest.raises(HeaderError) as info:
        Journal.open(store, read_only=True)
    assert info.value.offset == 0 and "seg-00000001" in info.value.path


def test_an_empty_generation_directory_is_refused(tmp_path: object) -> None:
    store = _store(tmp_path, 1)
    for seg in surgery.segment_paths(store):
        os.remove(seg)
    with pytest.raises(CorruptError):
        Journal.open(store)


@pytest.mark.parametrize("read_only", [True, False], ids=["follower", "writer"])
def test_a_file_only_named_like_a_segment_or_generation_is_not_the_stores(
        tmp_path: object, read_only: bool) -> None:
    """A name is the store's only when it is exactly the form FORMAT.md §1 gives: one
    with a line break after it, or with another script's digits, is never read (it
    was: a stray "seg-00000001.hlj\\n" counted as a second segment 1 and the store no
    longer opened)."""
    store = _store(tmp_path)
    with Journal.open(store, read_only=True) as j:
        before = list(j.replay())
    first = surgery.segment_paths(store)[0]
    gen = surgery.generation_dirs(store)[0]
    shutil.copy(first, first + "\n")
    arabic_indic = "".join(chr(0x0660 + int(d)) for d in "00000004")  # int() reads them
    shutil.copy(first, os.path.join(gen, f"seg-{arabic_indic}.hlj"))
    shutil.copytree(gen, os.path.join(store, "gen-00000009\n"))
    with Journal.open(store, read_only=read_only) as j:
        assert j.generation == 1
        assert list(j.replay()) == before
