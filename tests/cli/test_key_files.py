"""Key files (docs/cli.md): a ``--key-file`` holds exactly the store key's 32 raw bytes,
and is read no further than one byte past them, whatever its size; any other length is bad
usage (exit 2) on every command and server, with a hint when a newline follows the key.
An ``--api-key-file`` is read no further than 4096 bytes, and an empty one is refused: it
never means "no key".
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from holomem import Store
from holomem.api.doors.cli import opening
from tests.cli.run import ROOT, holomem_all

KEY = bytes(range(100, 132))


@pytest.fixture()
def secret(tmp_path: Path) -> str:
    path = str(tmp_path / "secret")
    with Store.open(path, key=KEY):
        pass
    return path


def test_a_key_file_is_read_no_further_than_one_byte_past_the_key(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.write(KEY)
        f.truncate(16 << 20)  # sparse: 16 MiB that read as zeros
    asked: list[int] = []
    real_read, real_pread = os.read, os.pread

    def read(fd: int, n: int) -> bytes:
        asked.append(n)
        return real_read(fd, n)

    def pread(fd: int, n: int, offset: int) -> bytes:
        asked.append(n)
        return real_pread(fd, n, offset)

    monkeypatch.setattr(os, "read", read)
    monkeypatch.setattr(os, "pread", pread)
    with pytest.raises(opening.Failure) as refused:
        opening.store_key(argparse.Namespace(key_file=str(huge)))
    monkeypatch.undo()
    assert refused.value.status == opening.EXIT_USAGE
    assert "exactly 32 raw bytes" in str(refused.value)
    assert sum(asked) <= 33, asked


def test_a_key_file_of_another_length_is_bad_usage_on_every_command_naming_a_newline(
        tmp_path: Path, secret: str) -> None:
    newline, short, hexed = tmp_path / "newline", tmp_path / "short", tmp_path / "hex"
    newline.write_bytes(KEY + b"\n")  # what `echo` leaves
    short.write_bytes(KEY[:5])
    hexed.write_bytes(KEY.hex().encode())
    data = str(tmp_path / "data")
    cases = [[*command, "--key-file", str(f)] for f in (newline, short, hexed)
             for command in (["info", secret], ["list", secret], ["recall", secret, "q"],
                             ["remember", secret, "--text", "x"], ["export", secret],
                             ["serve", "--data", data, "--port", "0"],
                             ["mcp", "--data", data], ["ui", secret, "--port", "0"])]
    for args, done in zip(cases, holomem_all(cases), strict=True):
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert "--key-file" in done.stderr and "exactly 32 raw bytes" in done.stderr, (
            args, done.stderr)
        assert ("newline" in done.stderr) == (args[-1] == str(newline)), (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert not os.path.exists(data)  # nothing created before the options held
    fsck = holomem_all([["fsck", secret, "--key-file", str(newline)]])[0]
    assert fsck.returncode == 8 and "newline" in fsck.stderr, fsck.stderr


def test_a_key_file_may_be_a_pipe(secret: str) -> None:
    """``--key-file <(pass show holomem)``: the key read in order, not by position."""
    r, w = os.pipe()
    try:
        os.write(w, KEY)
        os.close(w)
        done = subprocess.run([sys.executable, "-m", "holomem", "info", secret,
                               "--key-file", f"/dev/fd/{r}"], cwd=ROOT, pass_fds=(r,),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, check=False)
    finally:
        os.close(r)
    assert done.returncode == 0, done.stderr
    assert "storeId" in done.stdout


def test_an_api_key_file_that_is_empty_or_too_big_is_refused_before_anything_listens(
        tmp_path: Path, secret: str) -> None:
    empty, blank, huge = tmp_path / "empty", tmp_path / "blank", tmp_path / "huge"
    empty.write_bytes(b"")
    blank.write_bytes(b" \n")
    with open(huge, "wb") as f:
        f.write(b"k" * 8192)
    # An option refused after the key file is read: a server that took an empty key
    # file for "no key" exits naming that option instead (and never listens).
    cases = [[*command, "--api-key-file", str(f)] for f in (empty, blank, huge)
             for command in (["serve", "--data", str(tmp_path / "data"), "--port", "99999"],
                             ["ui", secret, "--allow-origin", "nonsense"])]
    for args, done in zip(cases, holomem_all(cases), strict=True):
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        why = "more than 4096 bytes" if args[-1] == str(huge) else "is empty"
        assert "--api-key-file" in done.stderr and why in done.stderr, (args, done.stderr)
