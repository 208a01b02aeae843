"""Append-only logs, and the tap that records the operations log in one.

Owns: :class:`LogFile` (one record per ``write``, ``O_APPEND``) and :func:`recorder`,
the :class:`~holomem.log.tap.Recorder` appending to the operations log that the crash
harness's power-loss model replays. Not a store's files: nothing here is synced or
reported to the tap. Imports the standard library, :mod:`holomem.log.tap` and
:mod:`holomem.log.fs.base` and ``files``.
"""

from __future__ import annotations

import os
import threading

from holomem.log.fs.base import call, open_fd
from holomem.log.fs.files import close, file_id
from holomem.log.tap import Recorder


class LogFile:
    """A file appended to one record per ``write`` (``O_APPEND``: records of several
    threads or processes never interleave, and each outlives the process once written),
    opened (created if missing) at the first append. Not a store's file: nothing is
    synced or reported to the tap. The operations log, the crash-point trace and the
    crash harness's acknowledgements are kept this way."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1
        self._opening = threading.Lock()

    def append(self, record: bytes) -> None:
        """Append ``record`` (one ``write``)."""
        if self._fd < 0:
            with self._opening:
                if self._fd < 0:
                    self._fd = open_fd(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        call("appending to", self.path, os.write, self._fd, record)

    def close(self) -> None:
        if self._fd >= 0:
            close(self._fd)
            self._fd = -1


def recorder(path: str) -> Recorder:
    """A tap that records every operation in the operations log at ``path`` (its format:
    :mod:`holomem.log.tap`); install it with :func:`~holomem.log.fs.install_tap`."""
    log = LogFile(path)
    return Recorder(log.append, file_id, log.close)
