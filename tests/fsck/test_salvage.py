"""``python -m holomem.fsck STORE --salvage DEST`` copies every intact transaction, before
and after the damage, into a new store, and reports exactly what it could not copy
(docs/guarantees.md §7).

Each case damages a copy of the small closed store of ``corruption.build`` (34
transactions over 3 segments of 4 KiB: a recorded configuration, 31 facts, a forget, a
3-fact batch) by flipping bytes in, cutting or removing its segment files, then runs
the command line and checks:

- the report lists exactly the byte ranges the test damaged and the (original)
  sequence numbers they held, and says which losses may hide more;
- DEST opens, checks clean, is a new store (a new id), renumbered 1..n in order, and
  holds exactly the facts of the intact transactions -- compared with what the test
  wrote (which ids, with which texts) and with a store holding exactly the intact
  transactions (every fact read back as plain data);
- the damaged store is left byte for byte as it was.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from holomem import Journal, Store
from holomem import events as ev
from holomem.errors import KeyRequiredError
from holomem.fsck import check, salvage
from tests.fsck import corruption as c

REPO = Path(__file__).resolve().parents[2]


class Lost(NamedTuple):
    """A byte range the report must list: where, and the transactions it held."""

    path: str
    offset: int
    length: int
    first_seq: int = 0
    last_seq: int = -1
    open_ended: bool = False


class Written(NamedTuple):
    """What each transaction of the base store wrote, read back from its journal."""

    payloads: dict[int, list[bytes]]  # seq -> payloads
    added: dict[int, dict[str, str]]  # seq -> {fact id: text}
    deleted: dict[int, set[str]]  # seq -> ids removed


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[c.Built, Written]]:
    root = tmp_path_factory.mktemp("salvage-bases")
    out = {}
    for kind, key in (("plain", None), ("encrypted", os.urandom(32))):
        built = c.build(str(root / kind), key)
        out[kind] = (built, _written(built))
    return out


def _written(built: c.Built) -> Written:
    w = Written({}, {}, {})
    texts: dict[str, str] = {}
    with Journal.open(built.path, key=built.key, read_only=True) as journal:
        for seq, payloads in journal.replay():
            w.payloads[seq] = payloads
            w.added[seq], w.deleted[seq] = {}, set()
            for p in payloads:
                match ev.decode(p):
                    case ev.DocumentAdded(id=i, text=t):
                        texts[i] = t
                    case ev.FactAdded(id=i):
                        w.added[seq][i] = texts[i]
                    case ev.DocumentDeleted(id=i):
                        w.deleted[seq].add(i)
    assert len(w.payloads) == 34
    return w


# -- the damage ------------------------------------------------------------------------------
def _size(path: str) -> int:
    return os.path.getsize(path)


def _flip_frames(seg_index: int, *frame_indexes: int) -> Callable[[str], list[Lost]]:
    """Flip a bit in the body of each of these frames: consecutive ones make one loss."""
    def damage(path: str) -> list[Lost]:
        seg = c.segments(path)[seg_index]
        frames = c.frames(seg)
        for i in frame_indexes:
            c.flip_bit(seg, frames[i].offset + c.FRAME_HEADER_SIZE + frames[i].length // 2)
        runs: list[list[c.Frame]] = []
        for i in sorted(frame_indexes):
            if runs and runs[-1][-1] == frames[i - 1]:
                runs[-1].append(frames[i])
            else:
                runs.append([frames[i]])
        return [Lost(seg, r[0].offset, r[-1].end - r[0].offset, r[0].seq, r[-1].seq)
                for r in runs]
    return damage


def first_frame(path: str) -> list[Lost]:
    return _flip_frames(0, 0)(path)


def first_two_frames(path: str) -> list[Lost]:
    return _flip_frames(0, 0, 1)(path)


def middle_frame(path: str) -> list[Lost]:
    return _flip_frames(1, 3)(path)


def first_and_middle_frames(path: str) -> list[Lost]:
    return _flip_frames(0, 0)(path) + _flip_frames(1, 3)(path)


def acknowledged_tail(path: str) -> list[Lost]:
    """The last frame of the closed store: acknowledged (its watermark says so)."""
    seg = c.segments(path)[-1]
    last = c.frames(seg)[-1]
    c.flip_bit(seg, last.offset + c.FRAME_HEADER_SIZE + last.length // 2)
    return [Lost(seg, last.offset, _size(seg) - last.offset, last.seq, last.seq, True)]


def torn_tail(path: str) -> list[Lost]:
    """The last frame torn by a crash during its append: never acknowledged, so the
    report counts no transaction lost (nothing says one was there), open-ended."""
    c.crash_after_last_frame(path)
    seg = c.segments(path)[-1]
    last = c.frames(seg)[-1]
    cut_at = last.offset + c.FRAME_HEADER_SIZE + last.length // 2
    os.truncate(seg, cut_at)
    return [Lost(seg, last.offset, cut_at - last.offset, last.seq, last.seq - 1, True)]


#: Transactions a case destroys that its report cannot count (see torn_tail).
UNCOUNTED = {"torn-tail": {34}}


def middle_segment_header(path: str) -> list[Lost]:
    seg = c.segments(path)[1]
    c.flip_bit(seg, 20)  # inside the store id: the frames are intact
    return [Lost(seg, 0, c.SEGMENT_HEADER_SIZE)]


def every_headers_encryption_flag(path: str) -> list[Lost]:
    # No header reads back intact, and the bit flipped in each says the opposite of the
    # truth (plaintext marked encrypted, or the reverse): the key check decides it.
    out = []
    for seg in c.segments(path):
        c.flip_bit(seg, 10, bit=0)  # the flags' "encrypted" bit
        out.append(Lost(seg, 0, c.SEGMENT_HEADER_SIZE))
    return out


def missing_middle_segment(path: str) -> list[Lost]:
    seg = c.segments(path)[1]
    frames = c.frames(seg)
    os.unlink(seg)
    return [Lost(seg, 0, 0, frames[0].seq, frames[-1].seq)]


def missing_last_segment(path: str) -> list[Lost]:
    seg = c.segments(path)[-1]
    frames = c.frames(seg)
    os.unlink(seg)
    return [Lost(seg, 0, 0, frames[0].seq, frames[-1].seq)]


def truncated_middle_segment(path: str) -> list[Lost]:
    seg = c.segments(path)[1]
    last = c.frames(seg)[-1]
    os.truncate(seg, last.offset + 30)
    return [Lost(seg, last.offset, 30, last.seq, last.seq)]


def forged_frame(path: str) -> list[Lost]:
    """A body bit flipped and the checksum recomputed: only authentication tells."""
    seg = c.segments(path)[1]
    frame = c.frames(seg)[2]
    c.flip_bit(seg, frame.offset + c.FRAME_HEADER_SIZE + frame.length // 2)
    c.reseal(seg, frame)
    return [Lost(seg, frame.offset, c.FRAME_HEADER_SIZE + frame.length, frame.seq, frame.seq)]


CASES: dict[str, Callable[[str], list[Lost]]] = {
    "first-frame": first_frame,
    "first-two-frames": first_two_frames,
    "middle-frame": middle_frame,
    "first-and-middle-frames": first_and_middle_frames,
    "acknowledged-tail": acknowledged_tail,
    "torn-tail": torn_tail,
    "middle-segment-header": middle_segment_header,
    "every-headers-encryption-flag": every_headers_encryption_flag,
    "missing-middle-segment": missing_middle_segment,
    "missing-last-segment": missing_last_segment,
    "truncated-middle-segment": truncated_middle_segment,
    "forged-frame": forged_frame,
}


def _params() -> list[Any]:
    return [pytest.param(name, kind, id=f"{name}-{kind}") for name in CASES
            for kind in ("plain", "encrypted")
            if not (name == "forged-frame" and kind == "plain")]  # no MAC without a key


# -- helpers ---------------------------------------------------------------------------------
def _fsck(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "holomem.fsck", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)


def _key_args(built: c.Built, tmp_path: Path) -> list[str]:
    if built.key is None:
        return []
    key_file = tmp_path / "key"
    key_file.write_bytes(built.key)
    return ["--key-file", str(key_file)]


def _copy(built: c.Built, dst: Path) -> c.Built:
    shutil.copytree(built.path, dst)
    return built._replace(path=str(dst))


def _reference_facts(built: c.Built, written: Written, lost: set[int], root: Path
                     ) -> dict[str, Any]:
    """The facts of a store holding exactly the intact transactions, in order."""
    path = str(root / "reference")
    with Journal.open(path, key=built.key) as journal:
        for seq in sorted(written.payloads):
            if seq not in lost:
                journal.append(written.payloads[seq])
    return c.open_facts(path, built.key)


def _expected_texts(written: Written, lost: set[int]) -> dict[str, str]:
    """fact id -> text of every fact the intact transactions leave stored."""
    texts: dict[str, str] = {}
    for seq in sorted(written.payloads):
        if seq not in lost:
            texts.update(written.added[seq])
            for i in written.deleted[seq]:
                texts.pop(i, None)
    return texts


def _lost_seqs(expect: list[Lost]) -> set[int]:
    return {s for e in expect for s in range(e.first_seq, e.last_seq + 1)}


# -- the tests -------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "kind"), _params())
def test_salvage_copies_every_intact_transaction_and_lists_exactly_what_was_lost(
        bases: dict[str, tuple[c.Built, Written]], tmp_path: Path, name: str,
        kind: str) -> None:
    base, written = bases[kind]
    built = _copy(base, tmp_path / "store")
    expect = CASES[name](built.path)
    before = c.tree(built.path)
    dest = str(tmp_path / "salvaged")

    done = _fsck(built.path, "--salvage", dest, "--json", *_key_args(built, tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)["salvage"]
    assert report["error"] is None and report["exit_code"] == 1
    got = [Lost(x["path"], x["offset"], x["length"], x["first_seq"], x["last_seq"],
                x["open_ended"]) for x in report["losses"]]
    assert got == expect
    lost = _lost_seqs(expect)
    assert report["lost_transactions"] == len(lost)
    lost |= UNCOUNTED.get(name, set())
    assert report["lost_unknown"] == any(e.open_ended for e in expect)
    assert all(x["reason"] for x in report["losses"])

    # Renumbered 1..n in order: the runs cover exactly the intact transactions.
    kept = sorted(set(written.payloads) - lost)
    assert report["recovered"] == len(kept)
    mapped = [(old, run["new_first"] + old - run["first"]) for run in report["renumbered"]
              for old in range(run["first"], run["last"] + 1)]
    assert mapped == [(old, new) for new, old in enumerate(kept, start=1)]

    # A new store that opens and checks clean, with exactly the intact transactions.
    assert report["new_store_id"] != report["store_id"]
    with Journal.open(dest, key=built.key, read_only=True) as journal:
        assert journal.store_id.hex() == report["new_store_id"]
        assert [p for _, p in journal.replay()] == [written.payloads[s] for s in kept]
    assert check(dest, key=built.key).exit_code == 0
    facts = c.open_facts(dest, built.key)
    assert {i: f["text"] for i, f in facts.items()} == _expected_texts(written, lost)
    assert facts == _reference_facts(built, written, lost, tmp_path)
    if built.key is not None:
        with pytest.raises(KeyRequiredError):
            Store.open(dest)
    # The damaged store is left exactly as it was, and nothing is left beside DEST.
    assert c.tree(built.path) == before
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["store", "salvaged", "reference", *(["key"] if built.key else [])])


def test_the_text_report_names_each_lost_range_and_what_to_do(
        bases: dict[str, tuple[c.Built, Written]], tmp_path: Path) -> None:
    built = _copy(bases["plain"][0], tmp_path / "store")
    (first,) = first_frame(built.path)
    (middle,) = middle_frame(built.path)
    dest = str(tmp_path / "salvaged")
    done = _fsck(built.path, "--salvage", dest)
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert f"- transaction 1: {first.path} at offset {first.offset}, {first.length} bytes" \
        in out
    assert (f"- transaction {middle.first_seq}: {middle.path} at offset {middle.offset}, "
            f"{middle.length} bytes") in out
    assert "recovered 32 transactions" in out and "lost 2 transactions" in out
    assert f"2-{middle.first_seq - 1} -> 1-{middle.first_seq - 2}" in out
    assert f"{dest} opens and fsck finds it clean" in out
    assert f"what to do: Open {dest} instead of {built.path}" in out


def test_an_intact_store_is_copied_whole_and_exits_0(
        bases: dict[str, tuple[c.Built, Written]], tmp_path: Path) -> None:
    base = bases["encrypted"][0]
    dest = tmp_path / "salvaged"
    dest.mkdir()  # an empty directory will do
    done = _fsck(base.path, "--salvage", str(dest), "--json", *_key_args(base, tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)["salvage"]
    assert report["losses"] == [] and report["recovered"] == 34
    assert report["renumbered"] == [{"first": 1, "last": 34, "new_first": 1}]
    assert c.open_facts(str(dest), base.key) == base.facts


@pytest.mark.parametrize("where", ["non-empty directory", "file", "the store itself",
                                   "inside the store", "leftover temporary"])
def test_salvage_refuses_a_destination_it_would_write_over_and_writes_nothing(
        bases: dict[str, tuple[c.Built, Written]], tmp_path: Path, where: str) -> None:
    built = _copy(bases["plain"][0], tmp_path / "store")
    first_frame(built.path)
    dest = tmp_path / "dest"
    if where == "non-empty directory":
        dest.mkdir()
        (dest / "notes.txt").write_text("mine")
    elif where == "file":
        dest.write_text("mine")
    elif where == "the store itself":
        dest = Path(built.path)
    elif where == "inside the store":
        dest = Path(built.path) / "salvaged"
    else:
        Path(str(dest) + ".salvage.tmp").mkdir()
    before_store, before_dir = c.tree(built.path), sorted(os.listdir(tmp_path))
    before_dest = c.tree(str(dest)) if dest.is_dir() else None
    done = _fsck(built.path, "--salvage", str(dest), "--json")
    assert done.returncode == 8, done.stdout + done.stderr
    report = json.loads(done.stdout)["salvage"]
    assert report["error"] and report["next_step"]
    assert report["losses"] == [] and report["recovered"] == 0
    assert c.tree(built.path) == before_store
    assert sorted(os.listdir(tmp_path)) == before_dir
    if before_dest is not None and dest != Path(built.path):
        assert c.tree(str(dest)) == before_dest


def test_salvage_of_an_encrypted_store_needs_its_key(
        bases: dict[str, tuple[c.Built, Written]], tmp_path: Path) -> None:
    base = bases["encrypted"][0]
    built = _copy(base, tmp_path / "store")
    middle_frame(built.path)
    for key, code in ((None, "key.required"), (os.urandom(32), "key.wrong")):
        report = salvage(built.path, str(tmp_path / "dest"), key=key)
        assert report.exit_code == 8 and report.error_code == code, report
        assert report.next_step and not os.path.exists(tmp_path / "dest")
    assert not [n for n in os.listdir(tmp_path) if n.startswith("dest")]


def test_salvage_of_a_store_open_for_writing_is_refused(
        bases: dict[str, tuple[c.Built, Written]], tmp_path: Path) -> None:
    built = _copy(bases["plain"][0], tmp_path / "store")
    with Store.open(built.path, segment_size=c.SEGMENT_SIZE):
        report = salvage(built.path, str(tmp_path / "dest"))
    assert report.exit_code == 8 and report.error_code == "locked"
    assert "stop it" in report.next_step
    assert not [n for n in os.listdir(tmp_path) if n.startswith("dest")]


@pytest.mark.parametrize("entry", [
    ["-m", "holomem.fsck"], [str(REPO / "tools" / "fsck.py")], ["-m", "holomem", "fsck"]],
    ids=["module", "tools", "holomem-cli"])
def test_every_entry_point_salvages(bases: dict[str, tuple[c.Built, Written]],
                                    tmp_path: Path, entry: list[str]) -> None:
    built = _copy(bases["plain"][0], tmp_path / "store")
    (first,) = first_frame(built.path)
    dest = str(tmp_path / "salvaged")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, *entry, built.path, "--salvage", dest],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"- transaction 1: {first.path} at offset {first.offset}" in done.stdout
    assert check(dest).exit_code == 0
