#!/usr/bin/env python3
"""Thin wrapper: ``python tools/fsck.py STORE ...`` is ``python -m holomem.fsck STORE ...``."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from holomem.fsck import main

if __name__ == "__main__":
    sys.exit(main())
