"""The harness's command line reports progress where it is read (issue 15, item 9): a
line per case when its stderr is not a terminal (a CI log, a pipe), one status line
rewritten in place on a terminal; and the README's synopsis shows every option it has.
"""

from __future__ import annotations

import io
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from holomem import crashtest as ct

REPO = Path(__file__).resolve().parents[2]
#: One cheap point, two hit counts, one fault: two cases.
ARGS = ["--point", "journal.segment.rotate", "--hits", "1,2", "--fault", "crash", "--jobs", "2"]
CASE_LINE = re.compile(r"^crashtest \[(\d+)/2\] plain/full journal\.segment\.rotate:(\d) "
                       r"crash: pass \(\d+\.\d s\)$")


def _harness(stderr: int) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "holomem.crashtest", *ARGS], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)


def test_a_harness_writing_to_a_pipe_prints_one_line_per_case() -> None:
    proc = _harness(subprocess.PIPE)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, out + err
    lines = err.splitlines()
    assert "\r" not in err and "\x1b" not in err
    cases = [m for m in map(CASE_LINE.match, lines) if m]
    assert len(cases) == 2, err
    assert sorted(m.group(1) for m in cases) == ["1", "2"]
    assert sorted(m.group(2) for m in cases) == ["1", "2"]
    assert lines[0].startswith("crashtest: seed ")
    assert any(line.startswith("crashtest: reference run plain/full: ") for line in lines)
    assert "crashtest: 2 runs, 2 at a time" in lines
    assert "2 runs in" in out  # the table is on stdout, apart from the progress


def test_a_harness_writing_to_a_terminal_rewrites_one_status_line() -> None:
    master, slave = pty.openpty()
    try:
        proc = _harness(slave)
    finally:
        os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    screen = b"".join(chunks).decode().replace("\r\n", "\n")
    # Both cases are drawn over the same line (a carriage return before each), and the
    # status line is ended once, after the last case.
    statuses = re.findall(r"\rcrashtest \[(\d)/2\] [^\r\n]*?\x1b\[K", screen)
    assert sorted(statuses) == ["1", "2"], repr(screen)
    status_line = screen.split("crashtest: 2 runs, 2 at a time\n", 1)[1]
    assert status_line.count("\n") == 1 and status_line.endswith("\n"), repr(status_line)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _result(n: int, outcome: str = "pass") -> ct.Result:
    case = ct.Case("fs.fsync.before", n, "power", False, "full", 7)
    return ct.Result(case, outcome, 0.25, violations=["acknowledged fact f1 is missing\nmore"]
                     if outcome == "FAIL" else [])


def test_progress_lines_name_the_case_its_outcome_and_a_failures_first_violation() -> None:
    log = io.StringIO()
    progress = ct.Progress(3, log)
    for r in (_result(1), _result(2, "FAIL"), _result(3, "not reached")):
        progress.case(r)
    progress.close()
    assert log.getvalue().splitlines() == [
        "crashtest [1/3] plain/full fs.fsync.before:1 power: pass (0.2 s)",
        "crashtest [2/3] plain/full fs.fsync.before:2 power: FAIL (0.2 s); "
        "acknowledged fact f1 is missing",
        "crashtest [3/3] plain/full fs.fsync.before:3 power: not reached (0.2 s)",
    ]


def test_on_a_terminal_a_note_ends_the_status_line_first() -> None:
    screen = _Terminal()
    progress = ct.Progress(2, screen)
    progress.case(_result(1))
    progress.note("crashtest: something to say")
    progress.case(_result(2))
    progress.close()
    text = screen.getvalue()
    assert text.startswith("\rcrashtest [1/2] plain/full fs.fsync.before:1 power: pass")
    first, note, second = text.split("\n")[:3]
    assert first.endswith("\x1b[K") and note == "crashtest: something to say"
    assert second.startswith("\rcrashtest [2/2]") and text.endswith("\x1b[K\n")


def test_the_readme_synopsis_shows_every_option_of_the_harness() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Crash testing", 1)[1].split("\n## ", 1)[0]
    synopsis = section.split("```sh\n", 1)[1].split("```", 1)[0]
    assert synopsis.startswith("python -m holomem.crashtest")
    options = {o for a in ct.parser()._actions for o in a.option_strings} - {"-h", "--help"}
    assert options and {o for o in options if o not in synopsis} == set()
    for action in ct.parser()._actions:
        if action.choices:
            for choice in action.choices:
                assert str(choice) in synopsis, (action.dest, choice)
