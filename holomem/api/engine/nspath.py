r"""A namespace written as one string (docs/contract.md §4a): ``users/u-42``.

Owns: the one rule that turns a namespace's strings into a single string and back,
which the library, the JSON contract, the Python client and the CLI all share. The
strings are joined by ``/``; inside a string, ``\/`` stands for a ``/`` and ``\\``
for a ``\``; ``""`` is the root. Every namespace has exactly one spelling, so
``format(parse(s)) == s`` for any ``s`` that parses, and
``parse(format(parts)) == parts`` for any parts the contract allows.

Only the grammar lives here: how many strings a namespace may hold and what each may
contain is :func:`holomem.api.engine.validate.namespace`'s to check. Imports the errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from holomem.errors import InvalidError

#: The pieces of a namespace string: an escape, a "\" that escapes nothing, the "/"
#: between two strings, or a run of other characters.
_PIECE = re.compile(r"\\[/\\]|\\|/|[^/\\]+")


def parse(text: str, field: str = "namespace") -> list[str]:
    r"""The strings ``text`` names (``[]`` for ``""``, the root).

    Errors: ``invalid_request`` naming ``field`` for an empty string between two
    ``/`` (or before the first, or after the last) and for a ``\`` that is not
    followed by ``/`` or ``\``.
    """
    parts: list[str] = []
    if not text:
        return parts
    current: list[str] = []
    for piece in _PIECE.finditer(text):
        token = piece.group()
        if token == "\\":
            raise InvalidError(
                f"{field} {text!r} has a \"\\\" at character {piece.start()} that escapes "
                "nothing (\"\\/\" is a \"/\" inside a string, \"\\\\\" a \"\\\")")
        if token != "/":
            current.append(token[1] if token[0] == "\\" else token)
            continue
        if not current:
            raise _empty(field, text, piece.start())
        parts.append("".join(current))
        current = []
    if not current:
        raise _empty(field, text, len(text))
    parts.append("".join(current))
    return parts


def _empty(field: str, text: str, at: int) -> InvalidError:
    return InvalidError(f"{field} {text!r} has an empty string at character {at} (the root "
                        "is written \"\", and a \"/\" inside a string as \"\\/\")")


def format(parts: Iterable[str]) -> str:
    """The one string that :func:`parse` reads back as ``parts``."""
    return "/".join(p.replace("\\", "\\\\").replace("/", "\\/") for p in parts)
