"""``python -m holomem.fsck``: run :func:`holomem.fsck.cli.main`."""

from __future__ import annotations

import sys

from holomem.fsck.cli import main

if __name__ == "__main__":
    sys.exit(main())
