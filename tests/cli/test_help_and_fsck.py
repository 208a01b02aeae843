"""Every command, option and argument of ``holomem`` says what it is for; every time
option names both accepted forms (ISO 8601 and milliseconds), which both work; the help
ends with the exit statuses; ``holomem fsck`` is ``python -m holomem.fsck``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from holomem.api.doors.cli.commands import EPILOG, build_parser
from tests.cli.run import ROOT, holomem, holomem_all, make_store


def parsers(parser: argparse.ArgumentParser, name: str = "holomem"
            ) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:  # argparse has no public walk of its actions
        if isinstance(action.choices, dict):  # the subcommands
            for sub, child in action.choices.items():
                yield from parsers(child, f"{name} {sub}")


def test_every_option_and_argument_has_help_and_times_name_both_forms() -> None:
    seen = 0
    for name, parser in parsers(build_parser()):
        for action in parser._actions:
            what = f"{name} {'/'.join(action.option_strings) or action.dest}"
            assert action.help and action.help != argparse.SUPPRESS, what
            if action.metavar == "W":
                assert "milliseconds" in action.help and "ISO 8601" in action.help, what
                seen += 1
    assert seen >= 9  # remember's three, recall's and explain's two each, forget's two
    for words in ("exit status", "1 not found", "2 bad usage", "3 the store cannot be opened",
                  "ISO 8601", "milliseconds"):
        assert words in EPILOG


def test_help_prints_and_both_time_forms_mean_the_same(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "a", "text": "Ann lives in Oslo"}])
    top, sub = holomem_all([["--help"], ["forget", "--help"]])
    # One writer at a time: the two remembers run one after the other.
    iso = holomem("remember", store, "--text", "x1", "--event-time",
                  "2025-01-01T00:00:00+01:00", "--json")
    ms = holomem("remember", store, "--text", "x2", "--event-time", "1735686000000", "--json")
    for done in (top, sub):
        assert done.returncode == 0 and "exit status" in done.stdout
    assert "--include-chain" in sub.stdout and "--within" in sub.stdout
    assert iso.returncode == 0 and ms.returncode == 0, (iso.stderr, ms.stderr)
    times = holomem_all([["get", store, json.loads(d.stdout)["remembered"][0]["id"], "--json"]
                         for d in (iso, ms)])
    assert [json.loads(t.stdout)["fact"]["eventTime"] for t in times] == [1735686000000] * 2


def test_holomem_fsck_is_python_m_holomem_fsck(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"id": "a", "text": "Ann lives in Oslo"}])

    def direct(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "holomem.fsck", *args], cwd=ROOT,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, check=False)

    for args in ([store, "--json"], [str(tmp_path / "missing"), "--json"], ["--help"]):
        ours, theirs = holomem("fsck", *args), direct(*args)
        assert ours.returncode == theirs.returncode, (args, ours.stderr)
        if args[-1] == "--json":
            mine, other = json.loads(ours.stdout), json.loads(theirs.stdout)
            mine.pop("seconds", None), other.pop("seconds", None)
            assert mine == other
        else:
            assert ours.stdout == theirs.stdout and "--repair" in ours.stdout
    assert holomem("fsck", store).returncode == 0


def test_every_command_the_parser_knows_has_a_handler() -> None:
    from holomem.api.doors.cli.commands import HANDLERS

    (commands,) = [a.choices for a in build_parser()._actions if isinstance(a.choices, dict)]
    assert set(commands) == set(HANDLERS)
