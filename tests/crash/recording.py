"""Recording the file layer's operations in this process, as a power-loss child does."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from holomem.log import fs, tap


@contextlib.contextmanager
def recording(log: Path | str) -> Iterator[None]:
    """Install a recorder appending to ``log`` (holomem.log.tap's format) for the block."""
    recorder = fs.recorder(str(log))
    previous = fs.install_tap(recorder)
    try:
        yield
    finally:
        fs.install_tap(previous)
        recorder.close()


def ops(log: Path) -> list[tuple[str, str]]:
    """(kind, path) of every operation recorded in ``log``, in order."""
    return [(r.kind, r.path) for r in tap.parse(log.read_bytes())]
