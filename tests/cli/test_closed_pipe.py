"""A reader that stops early is no error: ``holomem list S --jsonl | head -1`` exits 0
with no traceback, and so does every command that streams (recall, export, history).

Each command prints about 2 MB, far more than a pipe holds, so it is still writing when
``head`` exits and its next write meets the closed pipe.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.run import ROOT, make_store

FACTS = 2000
PAD = "many padding words to make each line long " * 24


def test_a_closed_pipe_ends_the_command_quietly_with_status_0(tmp_path: Path) -> None:
    store = str(tmp_path / "s")
    make_store(tmp_path / "s", [{"text": f"fact {i} {PAD}", "id": f"f{i}"}
                                for i in range(FACTS)])
    holomem = f"{sys.executable} -m holomem"
    pipelines = [f"{holomem} list {store} --all --jsonl | head -1",
                 f"{holomem} list {store} --all --limit 1000 | head -1",
                 f"{holomem} recall {store} padding --k 1000 --jsonl | head -1",
                 f"{holomem} export {store} | head -c 10"]
    children = [subprocess.Popen(["bash", "-o", "pipefail", "-c", line], cwd=ROOT,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True) for line in pipelines]
    for line, child in zip(pipelines, children, strict=True):
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, (line, err)
        assert err == "", (line, err)  # no traceback, no "Exception ignored"
        assert out.startswith(('{"id":"f0"', "f0 ", '{"id":"f')), (line, out[:80])
