"""``python -m holomem``: the same as the ``holomem`` console script."""

from __future__ import annotations

import sys

from holomem.api.doors.cli.commands import main

if __name__ == "__main__":
    sys.exit(main())
