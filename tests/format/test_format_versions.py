"""A store written by a build of another format version opens as FORMAT.md §2 says, and
every door says what to do (docs/platforms.md "Upgrades"):

- a journal whose **read version** is higher than this build's is refused, by the writer
  and by a follower alike, with ``format.version`` naming the command that upgrades
  holomem; fsck stops (exit 8) and says the same; the CLI exits 3;
- a journal whose **write version** is higher (its read version this build's) is read,
  never appended to: a follower answers from it, a writer is refused with
  ``format.version``, and fsck checks it;
- an event this build does not know (a newer build's) stops the open, writer and
  follower alike, with ``corrupt`` naming the transaction; a stored configuration with a
  field this build does not know is refused by ``Memory``, naming the field.

The version bytes are set by hand, from FORMAT.md's layout, not through the code tested.
(Older versions are the golden files' tests: a version 1 text segment in
``test_golden_text.py``, a checkpoint of another schema in
``tests/store/test_checkpoints.py``, an export of format 1 in
``tests/relations/test_export_import.py``.)
"""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
import xxhash

from holomem import Journal, Memory, Store
from holomem import events as ev
from holomem.errors import CorruptError, FormatVersionError, InvalidError
from holomem.fsck import check
from tests.cli.run import holomem
from tests.log import surgery

WRITE_VERSION_OFFSET = 8  # FORMAT.md §2: u8 write version, u8 read version
READ_VERSION_OFFSET = 9
CHECKSUMMED = 88  # the header checksum: xxh3-64, seed 0, of bytes [0, 88)


def _store(path: Path) -> str:
    with Store.open(str(path)) as store:
        Memory(store).remember(id="ann", text="Ann lives in Rome")
    return str(path)


def _set_version(store: str, offset: int, version: int) -> None:
    for seg in surgery.segment_paths(store):
        raw = bytearray(surgery.read(seg))
        raw[offset] = version
        raw[CHECKSUMMED:CHECKSUMMED + 8] = xxhash.xxh3_64_intdigest(
            bytes(raw[:CHECKSUMMED])).to_bytes(8, "little")
        surgery.write(seg, bytes(raw))


def test_a_journal_of_a_newer_read_version_is_refused_naming_the_upgrade(
        tmp_path: Path) -> None:
    store = _store(tmp_path / "store")
    _set_version(store, READ_VERSION_OFFSET, 2)
    _set_version(store, WRITE_VERSION_OFFSET, 2)
    for read_only in (False, True):
        with pytest.raises(FormatVersionError, match=r"read version 2; this build reads up "
                                                     r"to 1\. Upgrade holomem"):
            Store.open(store, read_only=read_only)
    report = check(store)
    assert (report.exit_code, report.error_code) == (8, "format.version")
    assert "A newer holomem wrote this store" in report.next_step
    assert "pip install -U holomem-db" in report.next_step
    done = holomem("recall", store, "Rome")
    assert done.returncode == 3 and "format.version" in done.stderr
    assert "Upgrade holomem" in done.stderr


def test_a_journal_of_a_newer_write_version_is_read_but_never_appended_to(
        tmp_path: Path) -> None:
    store = _store(tmp_path / "store")
    _set_version(store, WRITE_VERSION_OFFSET, 2)
    with pytest.raises(FormatVersionError, match="may only open it read-only"):
        Store.open(store)
    with Store.open(store, read_only=True) as follower:
        fact = Memory(follower).get("ann")
        assert fact is not None and fact.text == "Ann lives in Rome"
    assert check(store).exit_code == 0
    reads, writes = holomem("recall", store, "Rome"), holomem("remember", store, "--text", "x")
    assert reads.returncode == 0 and "Ann lives in Rome" in reads.stdout
    assert writes.returncode == 3 and "may only open it read-only" in writes.stderr


def test_an_event_this_build_does_not_know_stops_the_open_naming_its_transaction(
        tmp_path: Path) -> None:
    store = _store(tmp_path / "store")
    with Journal.open(store) as journal:
        seq = journal.append([msgspec.msgpack.encode({"t": "a.later.event", "x": 1})])
    for read_only in (False, True):
        with pytest.raises(CorruptError, match=f"transaction {seq} holds an event this "
                                               "build cannot read"):
            Store.open(store, read_only=read_only)


def test_a_configuration_field_this_build_does_not_know_is_refused_by_name(
        tmp_path: Path) -> None:
    store = _store(tmp_path / "store")
    with Journal.open(store) as journal:
        journal.append([ev.encode(ev.ConfigRecorded(
            config=b'{"supersession": "none", "laterKnob": 1}', time=1))])
    with Store.open(store) as opened, pytest.raises(InvalidError, match="laterKnob"):
        Memory(opened)
