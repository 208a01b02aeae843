"""The documentation of fsck stays true to it: the README's and docs/guarantees.md §7's
synopses show every option its parser has, and §7's table gives the next step of every
kind of finding it reports (issue 15, item 9)."""

from __future__ import annotations

from pathlib import Path

from holomem import errors
from holomem.fsck import parser

REPO = Path(__file__).resolve().parents[2]
#: Every kind of finding the checker reports: the damage the log's scan names (the
#: codes of CorruptError's subclasses), and the checker's own.
FINDING_CODES = {cls.code for cls in vars(errors).values()
                 if isinstance(cls, type) and issubclass(cls, errors.CorruptError)} - {
    "corrupt"} | {"leftover", "journal.torn", "event.undecodable", "text.header",
                  "text.record", "text.stale", "purge.pending", "corrupt.lost_tail"}


def _section(text: str, heading: str) -> str:
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def _synopsis(section: str) -> str:
    return section.split("```sh\n", 1)[1].split("```", 1)[0]


def _options() -> set[str]:
    return {o for a in parser()._actions for o in a.option_strings} - {"-h", "--help"}


def test_the_readme_synopsis_shows_every_option() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    synopsis = _synopsis(_section(readme, "## fsck\n"))
    assert synopsis.startswith("python -m holomem.fsck STORE")
    assert _options() and {o for o in _options() if o not in synopsis} == set()


def test_the_reference_synopsis_shows_every_option_and_every_finding_has_a_next_step() -> None:
    doc = (REPO / "docs" / "guarantees.md").read_text(encoding="utf-8")
    section = _section(doc, "## §7 The recovery tool")
    assert {o for o in _options() if o not in _synopsis(section)} == set()
    table = section.split("| finding | meaning | next step |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| `")]
    documented = {code.strip("|` ") for row in rows for code in row[0].split(",")
                  for code in [code.split(" on the ")[0].split(" (")[0]]}
    assert FINDING_CODES - documented == set()
    assert all(len(row) == 3 and row[2].strip(" |") for row in rows)
