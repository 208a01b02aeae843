"""fsck finds every kind of damage where it is, repairs what can be, and touches nothing else.

docs/guarantees.md §7 and issue 6. Each case damages a copy of a small, cleanly closed store
(``corruption.build``: 34 facts, a forget and a final batch, over 3 journal
segments of 4 KiB) at a place the test computes from the bytes, then:

- ``check()`` without repair reports the damage with the right code, file and
  offset (the ones the test damaged), exits 4, and modifies nothing;
- repairable damage: ``check(repair=True)`` exits 1 and marks it repaired; a
  second check is clean (exit 0); the store opens; every fact that was in an
  intact part of the journal reads back exactly as before (``get()`` compared as
  plain data); a torn tail's cut bytes are in the backup file; removed text a
  repair is meant to destroy is gone;
- uncorrectable damage: ``check(repair=True)`` exits 4, marks nothing repaired,
  and leaves every byte of every file as it was (and the store still refuses to
  open);
- a wrong key is an operational error (exit 8), with or without repair.

Checkpoints: holomem writes no checkpoint or snapshot file (the only derived file
is the text segment, FORMAT.md §9), so the "flipped bit in a checkpoint" case of
issue 6 does not apply; the text segment's cases stand in for derived files.

The last frames of a cleanly closed store were acknowledged: the watermark written
at close says so (FORMAT.md §7.1), so damage there, a cut, or the loss of the whole
last segment is uncorrectable corruption, never a torn tail (issue 11, item 1).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import pytest

from holomem import CorruptError, Journal, Store, WrongKeyError
from holomem import events as ev
from holomem.fsck import Finding, Report, check
from tests.fsck import corruption as c
from tests.purge import markers

#: Text only the forgotten fact (corruption.FORGOTTEN, "fact 5: ... lit 15 times") held.
FORGOTTEN_TEXT = b"lit 15 times"


class Expected(NamedTuple):
    code: str
    path: str
    offset: int
    length: int | None = None  # None: not checked


class Damage(NamedTuple):
    expect: list[Expected]
    repairable: bool
    #: facts in the damaged part of the journal, which a repair may lose
    lost: frozenset[str] = frozenset()
    #: the bytes a repair cuts and must save in its backup
    cut: bytes = b""
    #: a repair must leave this text in no file at all ("nowhere"), or only in the
    #: journal segments ("journal")
    erased: str = ""


# -- the damage ------------------------------------------------------------------------------
def torn_tail(path: str) -> Damage:
    """The last frame torn by a crash during its append (the watermark predates it)."""
    c.crash_after_last_frame(path)
    seg = c.segments(path)[-1]
    frame = c.frames(seg)[-1]
    cut_at = frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2
    cut = c.read(seg)[frame.offset : cut_at]
    os.truncate(seg, cut_at)
    return Damage([Expected("journal.torn", seg, frame.offset, cut_at - frame.offset)], True,
                  lost=frozenset(c.TAIL), cut=cut)


def _segment_header_bit(index: int) -> Callable[[str], Damage]:
    def damage(path: str) -> Damage:
        seg = c.segments(path)[index]
        c.flip_bit(seg, 20)  # inside the store id
        return Damage([Expected("corrupt.header", seg, 0, c.SEGMENT_HEADER_SIZE)], False)
    return damage


def _frame_body_bit(index: int) -> Callable[[str], Damage]:
    def damage(path: str) -> Damage:
        seg = c.segments(path)[index]
        frame = c.frames(seg)[2]  # never the last frame: valid frames follow it
        c.flip_bit(seg, frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2)
        return Damage([Expected("corrupt.checksum", seg, frame.offset,
                                c.FRAME_HEADER_SIZE + frame.length)], False)
    return damage


def forged_frame(path: str) -> Damage:
    """A body bit flipped and the checksum recomputed: only the AEAD tag can tell."""
    seg = c.segments(path)[1]
    frame = c.frames(seg)[2]
    c.flip_bit(seg, frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2)
    c.reseal(seg, frame)
    return Damage([Expected("corrupt.auth", seg, frame.offset,
                            c.FRAME_HEADER_SIZE + frame.length)], False)


def text_record_bit(path: str) -> Damage:
    text = c.text_segment(path)
    offset, size = c.text_records(text)[3]
    c.flip_bit(text, offset + c.RECORD_HEADER_SIZE + 5)
    return Damage([Expected("text.record", text, offset, size)], True)


def text_header_bit(path: str) -> Damage:
    text = c.text_segment(path)
    c.flip_bit(text, 20)
    return Damage([Expected("text.header", text, 0)], True)


def missing_segment(path: str) -> Damage:
    seg = c.segments(path)[1]
    os.unlink(seg)
    return Damage([Expected("corrupt.missing", seg, 0)], False)


def truncated_middle_segment(path: str) -> Damage:
    seg = c.segments(path)[1]
    frame = c.frames(seg)[-1]
    os.truncate(seg, frame.offset + 30)
    return Damage([Expected("corrupt.truncated", seg, frame.offset, 30)], False)


def acknowledged_last_frame_bit(path: str) -> Damage:
    """A bit flipped in the last frame of the closed store: the forget-then-batch
    transaction the watermark says was durable."""
    seg = c.segments(path)[-1]
    frame = c.frames(seg)[-1]
    c.flip_bit(seg, frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2)
    return Damage([Expected("corrupt.checksum", seg, frame.offset,
                            c.FRAME_HEADER_SIZE + frame.length)], False)


def acknowledged_tail_cut(path: str) -> Damage:
    """The torn-tail cut of the matrix, but in the closed store: acknowledged bytes."""
    seg = c.segments(path)[-1]
    frame = c.frames(seg)[-1]
    os.truncate(seg, frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2)
    return Damage([Expected("corrupt.truncated", seg, frame.offset)], False)


def missing_last_segment(path: str) -> Damage:
    seg = c.segments(path)[-1]
    os.unlink(seg)
    return Damage([Expected("corrupt.missing", seg, 0)], False)


def watermark_bit(path: str) -> Damage:
    wm = c.watermark(path)
    c.flip_bit(wm, 20)  # inside the store id: its checksum fails
    return Damage([Expected("corrupt.header", wm, 0, 72)], True, cut=c.read(wm))


def leftover_generations(path: str, key: bytes | None) -> Damage:
    """An old generation (holding the forgotten fact's text) and a ``gen-N.tmp``, as a
    compaction cut short between its steps would leave them."""
    old = c.live_generation(path)
    saved = path + ".old-generation"
    shutil.copytree(old, saved)
    with Store.open(path, key=key, segment_size=c.SEGMENT_SIZE) as store:
        store.compact()
    live = c.live_generation(path)
    assert live != old
    shutil.copytree(saved, old)
    shutil.rmtree(saved)
    number = int(os.path.basename(live)[4:])
    tmp = os.path.join(path, f"gen-{number + 1:08d}.tmp")
    shutil.copytree(live, tmp)
    return Damage([Expected("leftover", old, 0), Expected("leftover", tmp, 0)], True,
                  erased="nowhere")


def stale_text(path: str, text_before_forget: bytes) -> Damage:
    """The forgotten fact's old record written back where it was zeroed."""
    text = c.text_segment(path)
    now = c.read(text)
    changed = [i for i in range(c.TEXT_HEADER_SIZE, min(len(now), len(text_before_forget)))
               if now[i] != text_before_forget[i]]
    lo, hi = changed[0], changed[-1] + 1
    assert not any(now[lo:hi]), "the forgotten record should have been zeroed"
    c.overwrite(text, lo, text_before_forget[lo:hi])
    return Damage([Expected("text.stale", text, lo, hi - lo)], True, erased="journal")


def pending_purge(path: str, key: bytes | None) -> Damage:
    with Journal.open(path, key=key, segment_size=c.SEGMENT_SIZE) as journal:
        journal.append([ev.encode(ev.PurgeRequested(time=c.CLOCK_START))])
    return Damage([Expected("purge.pending", c.live_generation(path), 0)], True,
                  erased="nowhere")


CASES: dict[str, Callable[[c.Built], Damage]] = {
    "torn-tail": lambda b: torn_tail(b.path),
    "first-segment-header-bit": lambda b: _segment_header_bit(0)(b.path),
    "middle-segment-header-bit": lambda b: _segment_header_bit(1)(b.path),
    "last-segment-header-bit": lambda b: _segment_header_bit(-1)(b.path),
    "frame-body-bit": lambda b: _frame_body_bit(1)(b.path),
    "frame-body-bit-in-last-segment": lambda b: _frame_body_bit(-1)(b.path),
    "forged-frame": lambda b: forged_frame(b.path),
    "text-record-bit": lambda b: text_record_bit(b.path),
    "text-header-bit": lambda b: text_header_bit(b.path),
    "missing-segment": lambda b: missing_segment(b.path),
    "truncated-middle-segment": lambda b: truncated_middle_segment(b.path),
    "leftover-generations": lambda b: leftover_generations(b.path, b.key),
    "stale-text": lambda b: stale_text(b.path, b.text_before_forget),
    "pending-purge": lambda b: pending_purge(b.path, b.key),
    "acknowledged-last-frame-bit": lambda b: acknowledged_last_frame_bit(b.path),
    "acknowledged-tail-cut": lambda b: acknowledged_tail_cut(b.path),
    "missing-last-segment": lambda b: missing_last_segment(b.path),
    "watermark-bit": lambda b: watermark_bit(b.path),
}
REPAIRABLE = {"torn-tail", "text-record-bit", "text-header-bit", "leftover-generations",
              "stale-text", "pending-purge", "watermark-bit"}
UNCORRECTABLE = {"first-segment-header-bit", "middle-segment-header-bit",
                 "last-segment-header-bit", "frame-body-bit", "frame-body-bit-in-last-segment",
                 "forged-frame", "missing-segment", "truncated-middle-segment",
                 "acknowledged-last-frame-bit", "acknowledged-tail-cut",
                 "missing-last-segment"}


def _params(names: set[str]) -> list[object]:
    return [pytest.param(name, kind, id=f"{name}-{kind}")
            for name in CASES if name in names for kind in ("plain", "encrypted")
            if not (name == "forged-frame" and kind == "plain")]  # no MAC without a key


# -- fixtures and helpers --------------------------------------------------------------------
@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, c.Built]:
    root = tmp_path_factory.mktemp("bases")
    out = {"plain": c.build(str(root / "plain")),
           "encrypted": c.build(str(root / "encrypted"), os.urandom(32))}
    for built in out.values():
        assert len(c.segments(built.path)) >= 3
        assert check(built.path, key=built.key).exit_code == 0
    return out


def _copy(base: c.Built, dst: Path) -> c.Built:
    shutil.copytree(base.path, dst)
    return base._replace(path=str(dst))


def _find(report: Report, e: Expected) -> Finding:
    for f in report.findings:
        if (f.code, f.path, f.offset) == (e.code, e.path, e.offset) and (
                e.length is None or f.length == e.length):
            return f
    raise AssertionError(f"fsck did not report {e}; it reported "
                         f"{[(f.code, f.path, f.offset, f.length) for f in report.findings]}")


def _backup_dir(path: str) -> str:
    return path.rstrip("/") + ".fsck-backup"


def _damaged(bases: dict[str, c.Built], name: str, kind: str, tmp_path: Path
             ) -> tuple[c.Built, Damage]:
    built = _copy(bases[kind], tmp_path / "store")
    return built, CASES[name](built)


# -- the tests -------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "kind"), _params(REPAIRABLE | UNCORRECTABLE))
def test_check_reports_damage_where_it_is_and_changes_nothing(
        bases: dict[str, c.Built], tmp_path: Path, name: str, kind: str) -> None:
    built, damage = _damaged(bases, name, kind, tmp_path)
    before = c.tree(built.path)
    report = check(built.path, key=built.key)
    assert report.error is None
    assert report.exit_code == 4
    for e in damage.expect:
        f = _find(report, e)
        assert f.repairable == damage.repairable and not f.repaired
        assert f.message
    if damage.repairable:
        assert all(f.repairable for f in report.findings), report.findings
    assert c.tree(built.path) == before
    assert not os.path.exists(_backup_dir(built.path))


@pytest.mark.parametrize(("name", "kind"), _params(REPAIRABLE))
def test_repair_fixes_repairable_damage_and_keeps_every_intact_fact(
        bases: dict[str, c.Built], tmp_path: Path, name: str, kind: str) -> None:
    built, damage = _damaged(bases, name, kind, tmp_path)
    assert damage.repairable
    report = check(built.path, key=built.key, repair=True)
    assert report.exit_code == 1, report
    for e in damage.expect:
        assert _find(report, e).repaired
    assert all(f.repaired for f in report.findings)

    again = check(built.path, key=built.key)
    assert again.exit_code == 0 and again.clean, again
    expected = {i: rec for i, rec in built.facts.items() if i not in damage.lost}
    assert c.open_facts(built.path, built.key) == expected
    if damage.lost:
        assert damage.lost <= set(built.facts)  # they were there, and only they went

    if damage.cut:
        backups = [f.backup for f in report.findings if f.backup]
        assert len(backups) == 1 and backups[0] is not None
        assert os.path.dirname(backups[0]) == _backup_dir(built.path)
        assert c.read(backups[0]) == damage.cut
    if damage.erased:
        hits = markers.files_with(built.path, FORGOTTEN_TEXT, built.key)
        if damage.erased == "nowhere":
            assert hits == {}
        else:
            assert hits and all(markers.is_journal_segment(f) for f in hits), hits
    assert not [n for n in os.listdir(built.path) if n.endswith(".tmp")]


@pytest.mark.parametrize(("name", "kind"), _params(UNCORRECTABLE))
def test_repair_reports_uncorrectable_damage_and_modifies_nothing(
        bases: dict[str, c.Built], tmp_path: Path, name: str, kind: str) -> None:
    built, damage = _damaged(bases, name, kind, tmp_path)
    assert not damage.repairable
    before = c.tree(built.path)
    report = check(built.path, key=built.key, repair=True)
    assert report.error is None
    assert report.exit_code == 4
    for e in damage.expect:
        f = _find(report, e)
        assert not f.repairable and not f.repaired
    assert not any(f.repaired for f in report.findings)
    assert c.tree(built.path) == before
    assert not os.path.exists(_backup_dir(built.path))
    with pytest.raises(CorruptError):
        Store.open(built.path, key=built.key, segment_size=c.SEGMENT_SIZE)


def test_every_case_of_the_matrix_is_either_repairable_or_uncorrectable() -> None:
    assert set(CASES) == REPAIRABLE | UNCORRECTABLE and not REPAIRABLE & UNCORRECTABLE


@pytest.mark.parametrize("repair", [False, True], ids=["check", "repair"])
def test_wrong_key_is_an_operational_error_and_modifies_nothing(
        bases: dict[str, c.Built], tmp_path: Path, repair: bool) -> None:
    built = _copy(bases["encrypted"], tmp_path / "store")
    before = c.tree(built.path)
    report = check(built.path, key=os.urandom(32), repair=repair)
    assert report.exit_code == 8
    assert report.error is not None and report.error.startswith("key.wrong")
    assert c.tree(built.path) == before
    with pytest.raises(WrongKeyError):
        Store.open(built.path, key=os.urandom(32))
    # The right key still opens it, and finds it clean.
    assert check(built.path, key=built.key).exit_code == 0
    assert c.open_facts(built.path, built.key) == built.facts
