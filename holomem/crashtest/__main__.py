"""``python -m holomem.crashtest``: run :func:`holomem.crashtest.cli.main` (also the
entry of the child processes the harness starts with ``--child``)."""

from __future__ import annotations

import sys

from holomem.crashtest.cli import main

if __name__ == "__main__":
    sys.exit(main())
