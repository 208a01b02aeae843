"""A checkpoint proves its transactions durable: one past the journal's end means
acknowledged writes were lost, and the writer's open refuses the store rather than
losing them with a log line (docs/guarantees.md §6a, FORMAT.md §9.2).

Every checkpoint follows an fsync of the journal through its sequence number and says
so in its header (the journal-synced flag). The store here loses the end of its journal
(its last segment file, and the watermark that would otherwise show it), keeping a
checkpoint taken after its last transaction: the writer's open refuses with
``corrupt.truncated`` and changes none of the files that hold the evidence, in every
durable sync mode, plaintext or encrypted. A checkpoint that proves nothing -- one from
a build before the flag, a header that fails its checksum, a sealed block that fails
authentication, a sealed header rewritten to a later sequence number -- is ignored and
erased as before, and the store opens from its journal. A follower judges no
checkpoint past its view of the journal (it is normally the writer's newer one).
fsck's side is in tests/fsck/test_checkpoints.py; the ``sync="none"`` fsync in
tests/crash/test_checkpoint_durability.py.
"""

from __future__ import annotations

import glob
import logging
import os
import struct
from pathlib import Path
from typing import NamedTuple

import pytest

from holomem import Journal, Store
from holomem.errors import TruncatedError
from holomem.log.checksum import checksum, checksum_parts
from tests.store._util import all_files

#: stored, length, flags, index, checksum: a checkpoint block's header (FORMAT.md §9.2)
BLOCK = struct.Struct("<IIIIQ")
HEADER = struct.Struct("<8sBBHI16sQQQQ16sQ")
FIELDS = ["magic", "wv", "rv", "flags", "schema", "store", "gen", "seq", "salt", "len",
          "digest", "sum"]


class Lost(NamedTuple):
    path: Path
    key: bytes | None
    #: the checkpoint, and the transaction it holds the state after (the last written)
    checkpoint: str
    acknowledged: int
    #: the journal's last transaction once its last segment is gone
    end: int


def checkpoints(path: Path) -> list[str]:
    return sorted(glob.glob(str(path / "gen-*" / "checkpoint-*.hck")))


def lose_the_tail(path: Path, *, sync: str = "full", key: bytes | None = None) -> Lost:
    """The defect's repro: a store whose newest checkpoint holds the state after its
    last transaction, then its last journal segment and its watermark deleted."""
    with Store.open(path, key=key, sync=sync, segment_size=4096,
                    checkpoint_every=None) as store:
        for i in range(60):
            store.add_document(f"d{i}", f"document {i} about rivers and stones")
        done = store.checkpoint()
        assert done is not None
    segments = sorted(glob.glob(str(path / "gen-*" / "seg-*.hlj")))
    assert len(segments) >= 2
    os.unlink(segments[-1])
    os.unlink(glob.glob(str(path / "gen-*" / "watermark"))[0])
    with Journal.open(path, key=key, read_only=True) as journal:
        end = journal.last_seq
    (ck,) = checkpoints(path)
    assert end < done.seq
    return Lost(path, key, ck, done.seq, end)


def evidence(path: Path) -> dict[str, bytes]:
    """The files the refusal must leave as they are: every one but the watermark (the
    journal's open writes it anew, saying where the journal now ends)."""
    return {p: data for p, data in all_files(path).items()
            if os.path.basename(p) not in ("watermark", "LOCK")}


@pytest.mark.parametrize("sync, encrypted", [("full", False), ("batch", False),
                                             ("full", True), ("batch", True)])
def test_a_checkpoint_past_the_journal_s_end_refuses_the_writer_and_keeps_every_file(
        tmp_path: Path, sync: str, encrypted: bool) -> None:
    lost = lose_the_tail(tmp_path / "store", sync=sync,
                         key=os.urandom(32) if encrypted else None)
    before = evidence(lost.path)
    for _ in range(2):  # and again: nothing the first refusal did lets the second in
        with pytest.raises(TruncatedError) as refused:
            Store.open(lost.path, key=lost.key, sync=sync)
        err = refused.value
        assert err.code == "corrupt.truncated" and err.path == lost.checkpoint
        assert (f"transactions up to {lost.acknowledged} were acknowledged"
                in err.message)
        assert f"the journal ends at transaction {lost.end}" in err.message
        assert f"transactions {lost.end + 1} to {lost.acknowledged} are missing" in err.message
        assert "--salvage DEST" in err.message and "backup" in err.message
        assert evidence(lost.path) == before
    if not encrypted:  # the lost documents' text is still there: nothing was zeroed
        text = next(data for p, data in before.items() if p.endswith("text.seg"))
        assert b"document 59 about rivers" in text


def test_giving_up_the_lost_transactions_by_deleting_the_checkpoint_opens_the_journal(
        tmp_path: Path) -> None:
    """The last of the next steps the refusal names: delete the checkpoint, and the
    store opens with what its journal holds."""
    lost = lose_the_tail(tmp_path / "store")
    os.unlink(lost.checkpoint)
    with Store.open(lost.path) as store:
        assert store.revision == lost.end
        assert store.stats().opened_by.startswith("replay")
        assert store.has_document("d0") and not store.has_document("d59")


def _header(raw: bytes, **fields: int) -> bytes:
    values = dict(zip(FIELDS, HEADER.unpack_from(raw), strict=True))
    values.update(fields)
    head = HEADER.pack(*values.values())[:80]
    return head + checksum(head).to_bytes(8, "little") + raw[88:]


def _forge(kind: str, lost: Lost) -> str:
    """Make the store's checkpoint one that proves nothing, in the way ``kind`` says;
    return the path of the file now past the journal's end."""
    raw = Path(lost.checkpoint).read_bytes()
    if kind == "from a build before the flag":
        Path(lost.checkpoint).write_bytes(_header(raw, flags=raw[10] & ~2))
        return lost.checkpoint
    if kind == "header checksum fails":
        Path(lost.checkpoint).write_bytes(raw[:50] + bytes([raw[50] ^ 1]) + raw[51:])
        return lost.checkpoint
    assert kind == "sealed block fails authentication", kind
    stored = BLOCK.unpack_from(raw, 88)[0]
    body = bytearray(raw[112 : 112 + stored])
    body[len(body) // 2] ^= 1
    salt = HEADER.unpack_from(raw)[8]
    check = checksum_parts(raw[88:104], bytes(body), salt)  # the keyless check holds
    Path(lost.checkpoint).write_bytes(raw[:104] + check.to_bytes(8, "little")
                                      + bytes(body) + raw[112 + stored :])
    return lost.checkpoint


@pytest.mark.parametrize("kind, encrypted", [
    ("from a build before the flag", False),
    ("from a build before the flag", True),
    ("header checksum fails", False),
    ("sealed block fails authentication", True),
])
def test_a_checkpoint_past_the_journal_that_proves_nothing_is_ignored_as_before(
        tmp_path: Path, kind: str, encrypted: bool, caplog: pytest.LogCaptureFixture) -> None:
    lost = lose_the_tail(tmp_path / "store", key=os.urandom(32) if encrypted else None)
    forged = _forge(kind, lost)
    with caplog.at_level(logging.WARNING, logger="holomem"), \
            Store.open(lost.path, key=lost.key) as store:
        assert store.revision == lost.end and store.stats().opened_by.startswith("replay")
        assert store.has_document("d0") and not store.has_document("d59")
        (ignored,) = store.stats().checkpoints_ignored
        assert ignored.startswith(os.path.basename(forged))
    assert os.path.basename(forged) in caplog.text
    assert checkpoints(lost.path) == []  # erased by the writer, as any unusable one


def test_a_sealed_checkpoint_whose_header_claims_a_later_transaction_does_not_refuse(
        tmp_path: Path) -> None:
    """In an encrypted store the blocks' associated data binds the sequence number: a
    checkpoint the journal covers, renamed and its header rewritten (checksum and all)
    to claim a lost transaction, does not authenticate, and proves nothing."""
    key = os.urandom(32)
    lost = lose_the_tail(tmp_path / "store", key=key)
    os.unlink(lost.checkpoint)
    with Store.open(lost.path, key=key, checkpoint_every=None) as store:
        covered = store.checkpoint()
        assert covered is not None and covered.seq == lost.end
    (real,) = checkpoints(lost.path)
    later = real.replace(f"{lost.end:016d}", f"{lost.acknowledged:016d}")
    Path(later).write_bytes(_header(Path(real).read_bytes(), seq=lost.acknowledged))
    os.unlink(real)
    with Store.open(lost.path, key=key) as store:
        assert store.revision == lost.end and store.stats().opened_by.startswith("replay")
    assert checkpoints(lost.path) == []


def test_a_follower_of_a_store_that_lost_its_tail_serves_the_journal_and_erases_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A follower cannot tell the writer's newer checkpoint from one that outlived the
    journal's end: it says so at info level, serves what the journal holds, and
    leaves every file (the writer's open, and fsck, are where the loss is reported)."""
    lost = lose_the_tail(tmp_path / "store")
    before = all_files(lost.path)
    with caplog.at_level(logging.INFO, logger="holomem"), \
            Store.open(lost.path, read_only=True) as follower:
        assert follower.revision == lost.end and follower.stats().opened_by.startswith("replay")
        assert follower.has_document("d0") and not follower.has_document("d59")
    assert "not used yet" in caplog.text
    assert all_files(lost.path) == before
