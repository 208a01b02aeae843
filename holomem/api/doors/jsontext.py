"""JSON a client typed into a door (a query parameter, a header), decoded.

Owns :func:`loads`: Python's decoder raises ``RecursionError``, not ``ValueError``, for
a value nested past its recursion limit (a few thousand ``[``), which a door that
catches ``ValueError`` would answer as an internal error.
"""

from __future__ import annotations

import json
from typing import Any

#: What :func:`loads` says of a value nested past the decoder's recursion limit (far past
#: any limit of the contract, which refuses a request nested deeper than 64).
TOO_DEEP = "JSON nested too deeply"


def loads(text: str) -> Any:
    """The JSON value ``text`` holds. Errors: ``ValueError`` — not JSON, or nested past
    what the decoder takes."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None
