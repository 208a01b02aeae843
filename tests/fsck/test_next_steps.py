"""fsck says what to do next about every finding it does not repair, and what it says
works (docs/guarantees.md §7, issue 15 item 9).

For every damage of the corruption matrix (``test_corruption_matrix.CASES``), on plain
and encrypted stores: each finding left unrepaired carries a next step naming a command
(``--repair`` for what it repairs, ``--salvage DEST`` or a backup for what it cannot, the
missing file by its path), the report carries one for the whole store, and running the
command that step names ends with a store that checks clean. The same for a transaction
holding something that is not an event, for a repairable finding that an unrepairable
one blocks, and for every error that stops a check.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from holomem import Journal, Store
from holomem.fsck import Report, check, main
from tests.fsck import corruption as c
from tests.fsck.test_corruption_matrix import CASES, REPAIRABLE, UNCORRECTABLE


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, c.Built]:
    root = tmp_path_factory.mktemp("next-step-bases")
    return {"plain": c.build(str(root / "plain")),
            "encrypted": c.build(str(root / "encrypted"), os.urandom(32))}


def _damaged(bases: dict[str, c.Built], kind: str, tmp_path: Path
             ) -> tuple[c.Built, str | None]:
    built = bases[kind]
    path = tmp_path / "store"
    shutil.copytree(built.path, path)
    key_file = None
    if built.key is not None:
        key_file = str(tmp_path / "key")
        Path(key_file).write_bytes(built.key)
    return built._replace(path=str(path)), key_file


def _commands(step: str) -> list[str]:
    """The fsck commands a next step names (between backticks)."""
    return [cmd for cmd in re.findall(r"`([^`]+)`", step)
            if cmd.startswith("python -m holomem.fsck ")]


def _run(command: str) -> int:
    """Run a command fsck suggested, as given (in this process: ``main``)."""
    argv = shlex.split(command)
    assert argv[:3] == ["python", "-m", "holomem.fsck"], command
    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv[3:])


def _params(names: set[str]) -> list[object]:
    return [pytest.param(name, kind, id=f"{name}-{kind}") for name in sorted(names)
            for kind in ("plain", "encrypted")
            if not (name == "forged-frame" and kind == "plain")]


def _assert_every_unrepaired_finding_has_a_step(report: Report) -> None:
    assert report.findings and report.next_step
    for f in report.findings:
        assert not f.repaired and f.next_step, f
        if not f.repairable:
            assert "--salvage" in f.next_step and "backup" in f.next_step, f
        if f.code == "corrupt.missing":
            assert f.path in f.next_step


@pytest.mark.parametrize(("name", "kind"), _params(REPAIRABLE))
def test_a_repairable_finding_says_run_repair_and_the_command_repairs_it(
        bases: dict[str, c.Built], tmp_path: Path, name: str, kind: str) -> None:
    built, key_file = _damaged(bases, kind, tmp_path)
    CASES[name](built)
    report = check(built.path, key=built.key, key_file=key_file)
    _assert_every_unrepaired_finding_has_a_step(report)
    assert all(f.repairable for f in report.findings)
    (command,) = _commands(report.next_step)
    assert command.split()[4:5] == ["--repair"]
    for f in report.findings:
        assert _commands(f.next_step) == [command], f
    assert _run(command) == 1
    assert check(built.path, key=built.key).exit_code == 0


@pytest.mark.parametrize(("name", "kind"), _params(UNCORRECTABLE))
def test_an_unrepairable_finding_says_restore_or_salvage_and_the_salvage_works(
        bases: dict[str, c.Built], tmp_path: Path, name: str, kind: str) -> None:
    built, key_file = _damaged(bases, kind, tmp_path)
    CASES[name](built)
    report = check(built.path, key=built.key, key_file=key_file)
    _assert_every_unrepaired_finding_has_a_step(report)
    salvages = [cmd for cmd in _commands(report.next_step) if "--salvage" in cmd]
    assert len(salvages) == 1
    dest = shlex.split(salvages[0])[5]
    assert dest == built.path + ".salvaged"
    assert _run(salvages[0]) == 1  # written, with losses listed
    assert check(dest, key=built.key).exit_code == 0
    with Store.open(dest, key=built.key):
        pass


@pytest.mark.parametrize("kind", ["plain", "encrypted"])
def test_acknowledged_damage_at_the_tail_also_says_how_to_give_it_up(
        bases: dict[str, c.Built], tmp_path: Path, kind: str) -> None:
    built, key_file = _damaged(bases, kind, tmp_path)
    CASES["acknowledged-last-frame-bit"](built)
    report = check(built.path, key=built.key, key_file=key_file)
    (f,) = report.findings
    assert f.durable and "delete the watermark" in f.next_step
    assert c.watermark(built.path) in f.next_step
    # Doing what it says: delete the watermark, run the repair it names.
    os.unlink(c.watermark(built.path))
    repairs = [cmd for cmd in _commands(f.next_step) if "--repair" in cmd]
    assert len(repairs) == 1 and _run(repairs[0]) == 1
    assert check(built.path, key=built.key).exit_code == 0


@pytest.mark.parametrize("kind", ["plain", "encrypted"])
def test_a_transaction_that_is_no_event_says_upgrade_or_salvage(
        bases: dict[str, c.Built], tmp_path: Path, kind: str) -> None:
    built, key_file = _damaged(bases, kind, tmp_path)
    with Journal.open(built.path, key=built.key, segment_size=c.SEGMENT_SIZE) as journal:
        seq = journal.append([b"\xc1 not msgpack, not an event"])
    report = check(built.path, key=built.key, key_file=key_file)
    (f,) = report.findings
    assert f.code == "event.undecodable" and not f.repairable
    assert "pip install -U holomem-db" in f.next_step and "--salvage" in f.next_step
    (command,) = _commands(report.next_step)
    assert _run(command) == 1
    dest = built.path + ".salvaged"
    assert check(dest, key=built.key).exit_code == 0
    assert seq == 35
    assert c.open_facts(dest, built.key) == built.facts  # all but that transaction


def test_a_repairable_finding_blocked_by_an_unrepairable_one_says_so(
        bases: dict[str, c.Built], tmp_path: Path) -> None:
    built, _ = _damaged(bases, "plain", tmp_path)
    CASES["leftover-generations"](built)
    c.flip_bit(c.segments(built.path)[0], 20)  # the live generation's: not repairable
    report = check(built.path, key=built.key)
    leftovers = [f for f in report.findings if f.code == "leftover"]
    assert leftovers and all(f.repairable for f in leftovers)
    for f in leftovers:
        assert "changes nothing while an unrepairable finding remains" in f.next_step
    assert "--salvage" in report.next_step


def test_every_error_that_stops_a_check_says_what_to_do(
        bases: dict[str, c.Built], tmp_path: Path) -> None:
    plain, _ = _damaged(bases, "plain", tmp_path / "p")
    encrypted, key_file = _damaged(bases, "encrypted", tmp_path / "e")
    wrong = tmp_path / "wrong"
    wrong.write_bytes(os.urandom(32))
    steps: dict[str, Report] = {
        "not_found": check(str(tmp_path / "nothing")),
        "key.required": check(encrypted.path),
        "key.wrong": check(encrypted.path, key=os.urandom(32), key_file=str(wrong)),
        "key.unexpected": check(plain.path, key=os.urandom(32)),
    }
    with Store.open(plain.path, segment_size=c.SEGMENT_SIZE):
        steps["locked"] = check(plain.path, repair=True)
    for code, report in steps.items():
        assert report.exit_code == 8 and report.error_code == code, report
        assert report.next_step, code
    assert "--key-file" in steps["key.required"].next_step
    assert str(wrong) in steps["key.wrong"].next_step
    assert "without --key-file" in steps["key.unexpected"].next_step
    assert "stop it" in steps["locked"].next_step
    assert os.path.join(plain.path, "LOCK") in steps["locked"].next_step
    assert key_file is not None
