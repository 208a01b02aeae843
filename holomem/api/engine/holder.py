"""Who holds a store's writer lock, for a door to name it: :func:`lock_holder`.

Owns: the answer a door gives when another process writes the store it was asked to
open (docs/cli.md, docs/http.md) — the engine's face over the log's lock, so that no
door reaches into the log for it. Imports the log's file seam and its layout.
"""

from __future__ import annotations

import os

from holomem.log import fs
from holomem.log.format import LOCK_NAME


def lock_holder(store: str) -> str:
    """Who holds the writer lock of the store at ``store``: ``process PID (its command
    line)`` where the system says (:func:`holomem.log.fs.lock_holder`, which names the
    holder in every ``locked`` error of a store too), else ``another process``."""
    return fs.lock_holder(os.path.join(store, LOCK_NAME)) or "another process"
