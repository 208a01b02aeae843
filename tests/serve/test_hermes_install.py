"""``holomem hermes install`` tells the truth about Hermes: run as a real process, with
Hermes hidden from it (no ``hermes`` on ``PATH``, no ``hermes_cli`` package) or found.

What the tests prove: without Hermes the command writes nothing, exits 1 and names the
install command; with Hermes in this Python it writes the plugin and says how to
activate it; with only a ``hermes`` command of another Python on ``PATH`` it writes the
plugin and says that holomem must be importable in that Python.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from holomem.integrations.hermes_plugin import INSTALL_HINT

from ._readme import ROOT

HIDE = "import sys; sys.modules['hermes_cli'] = None; sys.modules['hermes_constants'] = None; "
RUN = "from holomem.api.doors.cli.commands import main; sys.exit(main(sys.argv[1:]))"


def install(home: Path, *, hide: bool, path: str) -> subprocess.CompletedProcess[str]:
    program = (HIDE if hide else "import sys; ") + RUN
    return subprocess.run(
        [sys.executable, "-c", program, "hermes", "install", "--hermes-home", str(home)],
        env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=60,
        cwd=ROOT)


def test_without_hermes_install_writes_nothing_and_says_how_to_install_it(
        tmp_path: Path) -> None:
    home = tmp_path / "hermes-home"
    empty = tmp_path / "bin"
    empty.mkdir()
    done = install(home, hide=True, path=str(empty))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Hermes Agent is not installed" in done.stderr and INSTALL_HINT in done.stderr
    assert "installed the holomem memory provider" not in done.stdout
    assert "Traceback" not in done.stderr
    assert not home.exists()  # nothing written


def test_with_hermes_in_this_python_install_writes_the_plugin(tmp_path: Path) -> None:
    pytest.importorskip("hermes_cli", reason="hermes-agent is not installed here "
                        f"({INSTALL_HINT})")
    home = tmp_path / "hermes-home"
    done = install(home, hide=False, path=str(tmp_path))  # found as a package, not on PATH
    assert done.returncode == 0, done.stderr
    assert "activate it:  hermes config set memory.provider holomem" in done.stdout
    assert "note:" not in done.stdout
    plugin = home / "plugins" / "holomem"
    assert sorted(p.name for p in plugin.iterdir()) == ["__init__.py", "plugin.yaml"]


def test_a_hermes_of_another_python_gets_the_plugin_and_a_note(tmp_path: Path) -> None:
    home = tmp_path / "hermes-home"
    bin_dir = tmp_path / "elsewhere"
    bin_dir.mkdir()
    hermes = bin_dir / "hermes"
    hermes.write_text("#!/bin/sh\nexit 0\n")  # as pipx installs it: its own Python
    hermes.chmod(0o755)
    done = install(home, hide=True, path=str(bin_dir))
    assert done.returncode == 0, done.stderr
    assert str(hermes) in done.stdout and "holomem-db" in done.stdout
    assert (home / "plugins" / "holomem" / "plugin.yaml").is_file()
