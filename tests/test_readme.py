"""The README's two first commands stay true: CI runs exactly its test command."""

from __future__ import annotations

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _readme_commands() -> list[str]:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```sh\n(.+?)\n```", text, re.S)[:2]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    demo, tests = _readme_commands()
    assert "holomem demo" in demo
    assert "pytest" in tests
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert tests.strip() in lines
