"""holomem runs on POSIX systems only (docs/platforms.md): on one without the POSIX file
calls it needs (Windows: no ``fcntl``), ``import holomem`` fails at once with a message
that says so and what to do, not with a bare ``No module named 'fcntl'`` from deep inside;
docs/platforms.md quotes that message as it is.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.log.surgery import ROOT


def test_without_fcntl_importing_holomem_says_it_needs_a_posix_system() -> None:
    # ``None`` in sys.modules makes ``import fcntl`` fail as it does on Windows.
    done = subprocess.run([sys.executable, "-c",
                           "import sys; sys.modules['fcntl'] = None; import holomem"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: holomem needs a POSIX system"), done.stderr
    assert "WSL" in last
    with open(os.path.join(ROOT, "docs", "platforms.md"), encoding="utf-8") as f:
        assert f"```text\n{last}\n```" in f.read()
