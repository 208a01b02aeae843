"""The README's Quick start, HTTP server and Python client examples run as written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ._readme import blocks
from .conftest import start


def test_the_quick_start_examples_run_in_order(tmp_path: Path) -> None:
    code = "\n".join(blocks("Quick start", "python"))  # read in order, as one script
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stderr


def test_the_http_server_and_client_examples_run(tmp_path: Path) -> None:
    (command,) = blocks("HTTP server", "sh")
    assert command.split()[:3] == ["holomem", "serve", "--data"]
    assert "--api-key-file ./api-key" in command
    srv = start(tmp_path / "holomem-data", api_key="secret")
    try:
        (code,) = blocks("Python client", "python")
        port = srv.url.rsplit(":", 1)[1]
        out = subprocess.run([sys.executable, "-c", code.replace("8080", port)],
                             capture_output=True, text=True, check=False,
                             env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert out.returncode == 0, out.stderr
        assert "Alice lives in Paris" in out.stdout
        assert (srv.data / "tenants" / "alice").is_dir()
    finally:
        srv.stop()
