"""How deeply a request nests: the one bound every door and the memory API apply
before decoding anything (docs/contract.md §5d).

Owns: :data:`MAX_REQUEST_DEPTH`, :func:`check_depth` (a decoded request, walked without
recursion), and :func:`nesting_depth` / :func:`check_nesting` (raw JSON bytes, counted
with numpy before they are parsed). Imports numpy and the errors.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from holomem.errors import LimitError

#: How deeply a request, or one import record, may nest objects and arrays. The deepest
#: legitimate one, a remember of facts whose metadata nests 32 levels, reaches 36.
MAX_REQUEST_DEPTH = 64


def check_depth(request: object, limit: int = MAX_REQUEST_DEPTH,
                what: str = "the request") -> None:
    """``limit`` unless ``request`` nests at most ``limit`` levels of objects and arrays.

    Iterative (an explicit stack), so no nesting, however deep, and no cycle can
    exhaust Python's recursion limit here; depth first, so a cycle is caught as soon
    as it has been followed ``limit`` times. Only objects and arrays go on the stack,
    and one holding nothing but strings, numbers, booleans and None (a vector) is
    passed over at once.
    """
    stack: list[tuple[object, int]] = [(request, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            children: Any = value.values()
        elif isinstance(value, (list, tuple)):
            children = value
        else:
            continue
        if depth > limit:
            raise LimitError(f"{what} nests deeper than {limit} levels")
        if not _SCALARS.issuperset(map(type, children)):
            stack.extend((child, depth + 1) for child in children
                         if isinstance(child, (dict, list, tuple)))


_SCALARS = frozenset({str, int, float, bool, type(None)})


# A JSON string, or an unterminated one up to the end of the text (what a decoder
# would read as a string). Possessive, and total from any quote, so the search is
# linear: a pattern that could fail at a quote would be retried at every later one.
_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))
_OPENS = np.zeros(256, dtype=np.int32)
_OPENS[list(b"[{")] = 1
_OPENS[list(b"]}")] = -1


def nesting_depth(raw: bytes) -> int:
    """How deep the JSON text ``raw`` nests arrays and objects: the most brackets and
    braces open at once, outside strings (for text that is not JSON, the deepest a
    decoder could reach before it finds out).

    Counted without recursion, in time linear in the text, because msgspec's decoder
    recurses once per level and gives up with ``RecursionError`` near the
    interpreter's limit.
    """
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKET)
    if not brackets:
        return 0
    depth = np.cumsum(_OPENS[np.frombuffer(brackets, dtype=np.uint8)])
    return max(int(depth.max()), 0)


def check_nesting(raw: bytes, what: str, limit: int = MAX_REQUEST_DEPTH) -> None:
    """:func:`check_depth` of the JSON text ``raw``, before it is decoded (``what``
    names it in the error)."""
    # Text with few opening brackets cannot nest deeper than their number: skip the count.
    opens = raw.count(b"[") + raw.count(b"{")
    if opens > limit and nesting_depth(raw) > limit:
        raise LimitError(f"{what} nests deeper than {limit} levels of arrays and objects")
