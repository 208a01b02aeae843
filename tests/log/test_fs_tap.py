"""The file layer's one recording hook (issue 12, item 3): every operation that changes
the disk is reported to the installed tap once it succeeded, with what the power-loss
model needs (path, file, offset, bytes), and the recorder's log holds all of it in one
place -- no second log to join by position."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from holomem.errors import FsyncError, StorageIOError
from holomem.log import fs, tap


class ListTap:
    """A tap that keeps what it is told."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def created(self, path: str, fd: int) -> None:
        self.calls.append(("created", path, fs.file_id(fd, path)))

    def wrote(self, path: str, fd: int, offset: int, data: memoryview) -> None:
        self.calls.append(("wrote", path, fs.file_id(fd, path), offset, bytes(data)))

    def truncated(self, path: str, fd: int, length: int) -> None:
        self.calls.append(("truncated", path, fs.file_id(fd, path), length))

    def synced(self, path: str, fd: int) -> None:
        self.calls.append(("synced", path, fs.file_id(fd, path)))

    def synced_dir(self, path: str) -> None:
        self.calls.append(("synced_dir", path))

    def made_dir(self, path: str) -> None:
        self.calls.append(("made_dir", path))

    def renamed(self, src: str, dst: str) -> None:
        self.calls.append(("renamed", src, dst))

    def unlinked(self, path: str) -> None:
        self.calls.append(("unlinked", path))

    def removed_dir(self, path: str) -> None:
        self.calls.append(("removed_dir", path))


@pytest.fixture
def listening() -> Any:
    listener = ListTap()
    previous = fs.install_tap(listener)
    yield listener
    fs.install_tap(previous)


def test_every_operation_that_changes_the_disk_is_reported_with_its_bytes(
        tmp_path: Path, listening: ListTap) -> None:
    d = str(tmp_path / "d")
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    fs.mkdir(d)
    fd = fs.create(a)
    ino = fs.file_id(fd, a)
    fs.write_at(fd, b"hello", 0, a)
    fs.truncate(fd, 3, a)
    fs.sync(fd, a)
    fs.close(fd)
    fs.rename(a, b)
    fs.sync_dir(d)
    fs.unlink(b)
    fs.rmdir(d)
    assert listening.calls == [
        ("made_dir", d), ("created", a, ino), ("wrote", a, ino, 0, b"hello"),
        ("truncated", a, ino, 3), ("synced", a, ino), ("renamed", a, b), ("synced_dir", d),
        ("unlinked", b), ("removed_dir", d)]


def test_the_compositions_report_through_the_same_hook(tmp_path: Path,
                                                       listening: ListTap) -> None:
    target = str(tmp_path / "w")
    fs.write_file_atomic(target, b"content")
    kinds = [c[0] for c in listening.calls]
    assert kinds == ["created", "wrote", "synced", "renamed", "synced_dir"]
    assert listening.calls[1][-1] == b"content"
    listening.calls.clear()
    assert fs.erase(target) == len(b"content")
    assert [c[0] for c in listening.calls] == ["wrote", "synced", "unlinked"]
    assert listening.calls[0][-1] == bytes(len(b"content"))  # the zeros are reported


def test_a_copied_tree_is_made_through_the_same_hook(tmp_path: Path,
                                                   listening: ListTap) -> None:
    src, dst = tmp_path / "src", str(tmp_path / "dst")
    (src / "sub").mkdir(parents=True)
    (src / "a").write_bytes(b"a")
    (src / "sub" / "b").write_bytes(b"bb")
    fs.copy_tree(str(src), dst)
    assert fs.read_file(os.path.join(dst, "a")) == b"a"
    assert fs.read_file(os.path.join(dst, "sub", "b")) == b"bb"
    made = [c[1] for c in listening.calls if c[0] == "made_dir"]
    wrote = sorted(c[-1] for c in listening.calls if c[0] == "wrote")
    assert made == [dst, os.path.join(dst, "sub")] and wrote == [b"a", b"bb"]
    with pytest.raises(StorageIOError):
        fs.copy_tree(str(tmp_path / "missing"), str(tmp_path / "other"))


def test_a_failed_operation_is_not_reported(tmp_path: Path, listening: ListTap,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(StorageIOError):
        fs.mkdir(str(tmp_path))  # exists
    path = str(tmp_path / "f")
    fd = fs.create(path)
    listening.calls.clear()

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(FsyncError):
        fs.sync(fd, path)  # an fsync that failed synced nothing
    fs.close(fd)
    assert listening.calls == []


def test_appends_to_a_log_file_are_not_reported(tmp_path: Path, listening: ListTap) -> None:
    log = fs.LogFile(str(tmp_path / "acks"))
    log.append(b"one\n")
    log.append(b"two\n")
    log.close()
    assert listening.calls == []
    assert fs.read_file(str(tmp_path / "acks")) == b"one\ntwo\n"


def test_the_recorder_keeps_one_log_with_the_order_the_files_and_the_bytes(
        tmp_path: Path) -> None:
    """The one log says which file a write went to even after a rename (the file id),
    and holds the bytes written: nothing has to be joined from a second log."""
    log = tmp_path / "ops.log"
    recorder = fs.recorder(str(log))
    previous = fs.install_tap(recorder)
    try:
        a, b = str(tmp_path / "a"), str(tmp_path / "b")
        fd = fs.create(a)
        fs.rename(a, b)
        fs.write_at(fd, b"\x00\xffafter the rename", 7, a)  # the fd still names the file
        fs.sync(fd, a)
        ino = fs.file_id(fd, b)
        fs.close(fd)
    finally:
        fs.install_tap(previous)
        recorder.close()
    records = tap.parse(log.read_bytes())
    assert [r.kind for r in records] == ["create", "rename", "write", "sync"]
    assert records[1].dst == b
    assert {r.file for r in records if r.kind != "rename"} == {ino}
    assert (records[2].offset, records[2].data) == (7, b"\x00\xffafter the rename")
    # The lines stay readable as text: kind, then path, tab-separated.
    assert log.read_text().splitlines()[2].split("\t")[:4] == ["write", a, "7", "18"]


paths = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1) | st.binary(
    min_size=1).map(os.fsdecode)


@given(kind=st.sampled_from(tap.KINDS), path=paths, dst=paths,
       file=st.integers(0, 2**64 - 1), offset=st.integers(0, 2**63), data=st.binary())
def test_every_record_reads_back_as_it_was_written(kind: str, path: str, dst: str, file: int,
                                                   offset: int, data: bytes) -> None:
    record = {
        "create": tap.Record(kind, path, file=file),
        "sync": tap.Record(kind, path, file=file),
        "write": tap.Record(kind, path, file=file, offset=offset, length=len(data), data=data),
        "truncate": tap.Record(kind, path, file=file, length=offset),
        "rename": tap.Record(kind, path, dst=dst),
    }.get(kind, tap.Record(kind, path))
    line = tap.encode(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert tap.parse(line + line) == [record, record]


def test_a_line_that_is_no_record_is_refused_with_its_number() -> None:
    good = tap.encode(tap.Record("mkdir", "/x"))
    with pytest.raises(ValueError, match="line 2"):
        tap.parse(good + b"write\t/x\t0\n")


def test_a_replacement_that_cannot_be_renamed_in_leaves_no_copy_beside_it(
        tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()  # a directory where the file should go: the rename fails
    with pytest.raises(StorageIOError):
        fs.write_file_atomic(str(target), b"the new bytes")
    assert not os.path.exists(fs.atomic_temp(str(target))) and target.is_dir()
