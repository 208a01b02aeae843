"""The real ``holomem`` shows a long embedding batch's progress on stderr, and stderr
only, when stderr is a pipe as in a log (issue 27, item 10; docs/cli.md, "Progress").

``--progress-every 0`` asks for a line at every step, so what is shown does not depend
on how fast the machine embeds; the default interval (2 s) is the reporter's own test's
(tests/memory/test_progress.py), with an injected clock.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from holomem.api.memory.embedding.embedder import EMBED_CHUNK
from tests.cli.run import holomem, jsonl, make_store

N = 2 * EMBED_CHUNK + 44


def test_an_import_embedding_one_long_batch_shows_lines_as_it_goes_and_stdout_stays_json(
        tmp_path: Path) -> None:
    records = tmp_path / "facts.jsonl"
    records.write_text("".join(json.dumps({"id": f"f{i}", "text": f"Ann met Bob on day {i}",
                                           "ingestTime": 1_735_689_600_000 + i})
                               + "\n" for i in range(N)))
    config = tmp_path / "config.json"
    config.write_text('{"embedder": "minilm"}')
    done = holomem("import", str(tmp_path / "store"), str(records), "--config", str(config),
                   "--batch-size", str(N), "--progress-every", "0")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # stdout is the report, nothing else
    assert report["imported"] == N and done.stdout.count("\n") == 1
    lines = done.stderr.splitlines()
    counts = [int(m.group(1).replace(",", "")) for line in lines
              if (m := re.fullmatch(r"import: ([\d,]+) facts( \(.*/s\))?", line))]
    # the one batch is embedded a chunk at a time, each shown before the batch is written
    assert counts[:3] == [EMBED_CHUNK, 2 * EMBED_CHUNK, N]
    assert re.fullmatch(rf"import: {N} facts in \d+\.\d s", lines[-1])
    assert "\r" not in done.stderr  # a pipe gets whole lines, never a terminal's redraw


def test_an_export_to_a_pipe_keeps_its_progress_off_stdout(tmp_path: Path) -> None:
    make_store(tmp_path / "s", [{"text": f"fact {i}"} for i in range(5)])
    done = holomem("export", str(tmp_path / "s"), "--progress-every", "0")
    assert done.returncode == 0, done.stderr
    assert [r["text"] for r in jsonl(done.stdout)] == [f"fact {i}" for i in range(5)]
    assert re.fullmatch(r"export: 5 facts in \d+\.\d s", done.stderr.splitlines()[-1])


def test_a_progress_interval_that_is_not_seconds_is_bad_usage(tmp_path: Path) -> None:
    for bad in ("-1", "soon", "nan"):
        done = holomem("export", str(tmp_path / "s"), "--progress-every", bad)
        assert done.returncode == 2 and "--progress-every" in done.stderr
