"""The distribution is named holomem-db everywhere, carries one version, and says its licence.

``pip install holomem`` installs an unrelated project, so the distribution is
``holomem-db`` (the package stays ``import holomem``). The version is written once,
as ``holomem.__version__``: pyproject declares it dynamic and reads that attribute,
the installed metadata comes from it, and ``holomem --version`` prints the metadata.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tomllib
from typing import Any

import holomem
from holomem.integrations.hermes_plugin import manifest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _pyproject() -> dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _text(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def test_pyproject_takes_the_version_from_holomem_and_the_installed_metadata_agrees() -> None:
    project = _pyproject()
    assert "version" not in project["project"]  # no second copy to drift
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "holomem.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", holomem.__version__)
    # What pip installed was built from this version (reinstall after changing it).
    assert importlib.metadata.version(project["project"]["name"]) == holomem.__version__


def test_holomem_version_prints_the_version() -> None:
    done = subprocess.run([sys.executable, "-m", "holomem", "--version"], capture_output=True,
                          text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (
        0, f"holomem {holomem.__version__}\n", "")


def test_every_install_command_names_the_distribution() -> None:
    name = _pyproject()["project"]["name"]
    assert name == "holomem-db"
    docs = os.path.join(ROOT, "docs")
    pages = sorted(os.listdir(docs)) if os.path.isdir(docs) else []
    paths = [p for p in ("README.md", "benchmarks/README.md",
                         *(os.path.join("docs", f) for f in pages if f.endswith(".md")))
             if os.path.exists(os.path.join(ROOT, p))]
    named = []
    for path in paths:
        for command in re.findall(r"pip install [^`\n]*", _text(path)):
            for word in command.split()[2:]:
                target = re.split(r"[\[<>=!~;]", word.strip("'\""))[0]
                if target.startswith("holomem"):
                    assert target == name, f"{path}: {command}"
                    named.append(command)
    assert len(named) >= 2  # the README does tell users what to install
    # The Hermes plugin asks Hermes to install the same distribution.
    assert f"pip_dependencies:\n  - {name}\n" in manifest("0")


def test_the_license_file_is_the_apache_2_license_pyproject_declares() -> None:
    project = _pyproject()["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = _text("LICENSE")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert len(text) > 10_000  # the whole text, not a pointer to it


def test_the_wheel_carries_every_file_the_inspector_serves() -> None:
    import fnmatch

    patterns = _pyproject()["tool"]["setuptools"]["package-data"]["holomem.api.doors.ui"]
    static = os.path.join(ROOT, "holomem", "api", "doors", "ui", "static")
    files = sorted(os.listdir(static))
    assert files
    for name in files:
        assert any(fnmatch.fnmatch(f"static/{name}", p) for p in patterns), name
    from holomem.api.doors.ui.routes import STATIC

    assert set(STATIC) == set(files)
