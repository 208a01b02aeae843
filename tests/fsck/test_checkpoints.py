"""fsck verifies every checkpoint against a replay of the journal up to its sequence
number (a digest of the projections' state), reports a damaged, stale, mismatching,
replaced or half-written one, and ``--repair`` erases it and writes a fresh one
(docs/guarantees.md §6a, §7). What each finding says open does with the file is what
open does. One that proves acknowledged transactions lost from the journal's end is
damage, ``corrupt.lost_tail``, and never erased.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import Store
from holomem.fsck import check, salvage
from holomem.log import checkpoint as ckfile
from holomem.projections import checkpoint as codec
from tests.fsck import corruption as c
from tests.store._util import all_files
from tests.store.test_lost_tail import lose_the_tail


def _checkpoints(path: Path) -> list[str]:
    return sorted(glob.glob(str(path / "gen-*" / "checkpoint-*.hck")))


def _store(path: Path, key: bytes | None = None, n: int = 80) -> Store:
    store = Store.open(path, key=key, sync="none", checkpoint_every=None)
    store.add_documents([{"id": f"d{i}", "text": f"document {i} about rivers {i % 7}",
                          "metadata": {"i": i}, "entities": [f"E{i % 3}"]} for i in range(n)])
    store.delete_document("d5")
    return store


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_good_checkpoint_is_verified_against_the_journal_and_passes(
        tmp_path: Path, encrypted: bool) -> None:
    key = os.urandom(32) if encrypted else None
    path = tmp_path / "s"
    with _store(path, key) as store:
        store.checkpoint()
        store.add_document("tail", "written after the checkpoint")  # a tail to replay past
    report = check(str(path), key=key)
    assert report.clean, report.findings
    assert len(_checkpoints(path)) == 1


def _twins(path: Path, twin: Path) -> tuple[str, str]:
    """A store and its copy, each given a different document ``x`` and a checkpoint:
    the same store, generation and sequence number. Returns their checkpoints."""
    with _store(path):
        pass
    shutil.copytree(path, twin)
    with Store.open(path, sync="none") as store:
        store.add_document("x", "alpha words")
        store.checkpoint()
    with Store.open(twin, sync="none") as other:
        other.add_document("x", "beta words")
        other.checkpoint()
    (ours,), (theirs,) = _checkpoints(path), _checkpoints(twin)
    return ours, theirs


def _repaired_from_the_journal(path: Path) -> None:
    repaired = check(str(path), repair=True)
    assert repaired.exit_code == 1 and repaired.findings[0].repaired
    assert check(str(path)).clean
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "checkpoint"
        assert store.search_documents("alpha", 1)[0].id == "x"


def test_a_checkpoint_of_a_diverged_copy_is_stale_and_open_does_not_use_it_as_fsck_says(
        tmp_path: Path) -> None:
    path, twin = tmp_path / "s", tmp_path / "twin"
    ours, theirs = _twins(path, twin)
    shutil.copy(theirs, ours)
    report = check(str(path))
    assert [f.code for f in report.findings] == ["checkpoint.stale"]
    (finding,) = report.findings
    assert "written for another journal" in finding.message
    assert "open does not use it" in finding.message
    assert "--repair" in finding.next_step and "open does not use this one" in finding.next_step
    assert report.exit_code == 4
    # What fsck said: a follower (which erases nothing) replays the journal.
    with Store.open(path, read_only=True) as follower:
        assert follower.stats().opened_by == "replay"
        assert follower.search_documents("beta", 1) == []
    _repaired_from_the_journal(path)


def test_a_checkpoint_bound_to_the_journal_that_differs_from_it_is_a_mismatch_open_uses(
        tmp_path: Path) -> None:
    """A file whose journal digest is this journal's but whose state is another's (a
    forged or miswritten checkpoint): open would restore it, and fsck says so."""
    path, twin = tmp_path / "s", tmp_path / "twin"
    ours, theirs = _twins(path, twin)
    ck = ckfile.parse_header(Path(ours).read_bytes())
    their_header = ckfile.parse_header(Path(theirs).read_bytes())
    _, payload = ckfile.read(theirs, store_id=ck.store_id, generation=ck.generation,
                             digest=their_header.digest, schema=codec.SCHEMA, envelope=None)
    ckfile.write(os.path.dirname(ours), store_id=ck.store_id, generation=ck.generation,
                 seq=ck.seq, digest=ck.digest, schema=codec.SCHEMA, envelope=None,
                 payload=[payload], journal_synced=True)
    report = check(str(path))
    assert [f.code for f in report.findings] == ["checkpoint.mismatch"]
    (finding,) = report.findings
    assert "open restores it" in finding.message
    assert "before the store is opened again" in finding.next_step
    assert "Until then open restores this checkpoint" in finding.next_step
    assert report.exit_code == 4
    # What fsck said: open restores it (a follower, which leaves it in place).
    with Store.open(path, read_only=True) as follower:
        assert follower.stats().opened_by == "checkpoint"
        assert follower.search_documents("beta", 1)[0].id == "x"
    _repaired_from_the_journal(path)


@pytest.mark.parametrize("kind, code", [("bit flip", "checkpoint.damaged"),
                                        ("torn", "checkpoint.damaged"),
                                        ("replaced", "checkpoint.replaced"),
                                        ("leftover", "checkpoint.leftover")])
def test_a_damaged_replaced_or_half_written_checkpoint_is_reported_and_repaired(
        tmp_path: Path, kind: str, code: str) -> None:
    path = tmp_path / "s"
    with _store(path) as store:
        store.checkpoint()
        if kind == "replaced":
            old = Path(_checkpoints(path)[0]).read_bytes()
            store.add_document("more", "one more document")
            store.checkpoint()
    (ck,) = _checkpoints(path)
    raw = Path(ck).read_bytes()
    if kind == "bit flip":
        Path(ck).write_bytes(raw[:100] + bytes([raw[100] ^ 1]) + raw[101:])
    elif kind == "torn":
        Path(ck).write_bytes(raw[:-10])
    elif kind == "replaced":
        Path(ck.replace(f"{int(ck[-20:-4]):016d}", f"{int(ck[-20:-4]) - 1:016d}")
             ).write_bytes(old)
    else:
        Path(ck + ".tmp").write_bytes(raw[:50])
    report = check(str(path))
    assert [f.code for f in report.findings] == [code], report.findings
    repaired = check(str(path), repair=True)
    assert repaired.exit_code == 1 and all(f.repaired for f in repaired.findings)
    assert check(str(path)).clean
    (fresh,) = _checkpoints(path)
    with Store.open(path, sync="none") as store:
        assert store.stats().opened_by == "checkpoint"
        assert fresh.endswith(f"{store.revision:016d}.hck")


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_checkpoint_proving_acknowledged_transactions_lost_is_corrupt_and_never_erased(
        tmp_path: Path, encrypted: bool) -> None:
    """The journal lost its end (its last segment and the watermark), and the checkpoint
    of its last transaction remains: it proves transactions the journal no longer holds
    were acknowledged. fsck reports ``corrupt.lost_tail`` (exit 4), ``--repair`` leaves
    every file as it is (the checkpoint is the evidence), and ``--salvage`` copies every
    intact transaction and counts the lost ones."""
    lost = lose_the_tail(tmp_path / "s", key=os.urandom(32) if encrypted else None)
    before = all_files(lost.path)
    for repair in (False, True):
        report = check(str(lost.path), key=lost.key, repair=repair)
        assert report.exit_code == 4
        (finding,) = [f for f in report.findings if f.code.startswith("corrupt.")]
        assert (finding.code, finding.path) == ("corrupt.lost_tail", lost.checkpoint)
        assert not finding.repairable and not finding.repaired
        assert (f"transactions {lost.end + 1} to {lost.acknowledged} were acknowledged"
                in finding.message)
        assert "--salvage" in finding.next_step and "backup" in finding.next_step
        assert all_files(lost.path) == before
    dest = tmp_path / "salvaged"
    saved = salvage(str(lost.path), str(dest), key=lost.key)
    assert saved.exit_code == 1 and saved.recovered == lost.end
    (loss,) = saved.losses
    assert (loss.first_seq, loss.last_seq) == (lost.end + 1, lost.acknowledged)
    assert os.path.basename(lost.checkpoint) in loss.reason
    assert saved.lost_transactions == lost.acknowledged - lost.end and not saved.lost_unknown
    with Store.open(dest, key=lost.key) as store:
        assert store.revision == lost.end and store.has_document("d0")
    assert all_files(lost.path) == before


@pytest.fixture(scope="module")
def _checkpointed_at_the_end(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A store of several segments whose checkpoint holds the state after its last
    transaction (watermark intact)."""
    path = str(tmp_path_factory.mktemp("ends") / "s")
    with Store.open(path, segment_size=4096, checkpoint_every=None) as store:
        for i in range(150):
            store.add_document(f"d{i}", f"document {i} about rivers and stones")
        assert store.checkpoint() is not None
    assert len(c.segments(path)) >= 3
    return path


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_damage_that_stops_the_scan_of_the_last_segment_is_reported_as_itself_not_a_lost_tail(
        _checkpointed_at_the_end: str, data: st.DataObject) -> None:
    """A damaged frame in the last segment with intact frames after it, or its damaged
    header: the transactions past the last one read are still in the file. fsck reports
    that damage alone, not ``corrupt.lost_tail`` (which says the journal's end is gone)
    from the checkpoint of the last transaction, and nothing about the checkpoint."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "s")
        shutil.copytree(_checkpointed_at_the_end, path)
        last = c.segments(path)[-1]
        frames = c.frames(last)
        if data.draw(st.booleans(), label="in the header"):
            at, code = data.draw(st.integers(0, c.SEGMENT_HEADER_SIZE - 1), label="at"), \
                "corrupt.header"
        else:
            frame = frames[data.draw(st.integers(0, len(frames) - 2), label="frame")]
            at = data.draw(st.integers(frame.offset, frame.end - 1), label="at")
            code = None
        c.flip_bit(path=last, offset=at, bit=data.draw(st.integers(0, 7), label="bit"))
        report = check(path)
        assert report.exit_code == 4
        assert all(f.path == last for f in report.findings), report.findings
        assert not any(f.code == "corrupt.lost_tail" for f in report.findings)
        if code is not None:
            assert [f.code for f in report.findings] == [code]


def test_a_missing_middle_segment_is_reported_as_itself_not_a_lost_tail(
        _checkpointed_at_the_end: str, tmp_path: Path) -> None:
    path = str(tmp_path / "s")
    shutil.copytree(_checkpointed_at_the_end, path)
    middle = c.segments(path)[1]
    os.unlink(middle)
    report = check(path)
    assert report.exit_code == 4
    assert [f.code for f in report.findings if f.code.startswith("corrupt.")] == \
        ["corrupt.missing", "corrupt.sequence"]


def test_a_lost_tail_beside_damage_in_an_earlier_segment_is_still_reported(
        _checkpointed_at_the_end: str, tmp_path: Path) -> None:
    """The journal lost its last segment (and the watermark), and an earlier segment is
    damaged: its end is still known (its last file reads to its end), and the checkpoint
    still proves the lost transactions."""
    path = str(tmp_path / "s")
    shutil.copytree(_checkpointed_at_the_end, path)
    os.unlink(c.segments(path)[-1])
    os.unlink(c.watermark(path))
    first = c.segments(path)[0]
    c.flip_bit(first, c.frames(first)[2].offset + c.FRAME_HEADER_SIZE + 3)
    codes = sorted(f.code for f in check(path).findings)
    assert codes == ["corrupt.checksum", "corrupt.lost_tail", "corrupt.sequence"]
