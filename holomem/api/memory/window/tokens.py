"""Counting tokens for a context budget (docs/contract.md §4 "Context under a budget").

Owns: the token counters :func:`~holomem.api.memory.window.budget.compile` measures with — the
built-in word-piece estimate (:func:`estimate`), ``tiktoken`` when it is installed
and its encoding loads (:func:`tiktoken_counter`), the default choice between them
(:func:`default_counter`) and the check of a caller's counter (:func:`checked`).
Imports the errors only.

The estimate, written once here: a text is cut into runs of letters and digits
(``\\w+``) and single other non-space characters; a run of n characters counts
``ceil(n / 4)`` tokens (at least 1), every other character 1, whitespace nothing.
English prose with a BPE tokenizer such as ``cl100k_base`` averages about four
characters a token, and punctuation is a token of its own, so the estimate is near
and usually above a real count. It is additive over lines: a block's count is the
sum of its lines'.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from holomem.errors import InvalidError

_PIECE = re.compile(r"\w+|[^\w\s]")

#: ``text -> tokens``; a ``name`` attribute, when it has one, is reported.
Counter = Callable[[str], int]


def estimate(text: str) -> int:
    """The word-piece estimate of ``text``'s tokens (see the module docstring)."""
    total = 0
    for m in _PIECE.finditer(text):
        n = m.end() - m.start()
        total += (n + 3) // 4 if n > 1 else 1
    return total


estimate.name = "estimate"  # type: ignore[attr-defined]


def tiktoken_counter(encoding: str = "cl100k_base") -> Counter | None:
    """A counter over tiktoken's ``encoding``, or None when tiktoken is not installed or
    the encoding cannot be loaded (its files are fetched over the network on first use)."""
    try:
        import tiktoken  # type: ignore[import-not-found,unused-ignore]

        enc: Any = tiktoken.get_encoding(encoding)
        enc.encode("probe")
    except Exception:  # any failure to load means: use the estimate
        return None

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    count.name = f"tiktoken:{encoding}"  # type: ignore[attr-defined]
    return count


_DEFAULT: list[Counter] = []


def default_counter() -> Counter:
    """tiktoken's ``cl100k_base`` when it loads, else :func:`estimate` (decided once)."""
    if not _DEFAULT:
        _DEFAULT.append(tiktoken_counter() or estimate)
    return _DEFAULT[0]


def name_of(counter: Counter) -> str:
    name = getattr(counter, "name", None)
    return name if isinstance(name, str) else getattr(counter, "__qualname__", "custom")


def checked(counter: object) -> Counter:
    """The counter to use: ``None`` is the default; else a callable, whose every answer
    is checked when it is used (:func:`count`). Errors: ``invalid_request``."""
    if counter is None:
        return default_counter()
    if not callable(counter):
        raise InvalidError("counter must be a callable text -> number of tokens")
    return counter


def count(counter: Counter, text: str) -> int:
    """``counter(text)``, checked: a whole number >= 0. Errors: ``invalid_request``."""
    n = counter(text)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InvalidError(f"the token counter returned {n!r}, not a whole number >= 0")
    return n
