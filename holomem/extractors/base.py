"""What every shipped extractor shares: the turn it reads, the fact it gives, and names.

Owns: :class:`Turn` (what an extractor reads of a conversation turn — the memory tier's
``ConversationTurn`` has it, and so does any object with these attributes), the shape
of an extracted fact (a plain dict of RememberInput fields plus ``sources``, the ids of
the turns it came from: what ``remember_conversation``'s extractor seam takes), and
:func:`slug`, which turns a speaker's or a thing's name into a part of a subject.
Imports nothing from holomem but the errors; it must not import the memory tier (an
extractor is text in, fact inputs out: it never touches a store).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, Protocol

#: An extracted fact: ``text`` and ``sources`` always; ``subject``, ``entities``,
#: ``event_time`` and ``metadata`` when the extractor has them.
Fact = dict[str, Any]

#: The characters a slug keeps (letters and digits of any script); the rest is ``-``.
_NOT_WORD = re.compile(r"[\W_]+")
#: The longest slug, in characters: a subject holds a few of them (ids: 512).
MAX_SLUG_CHARS = 64


class Turn(Protocol):
    """A conversation turn as an extractor reads it (``ConversationTurn`` is one)."""

    @property
    def id(self) -> str: ...

    @property
    def speaker(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def time(self) -> int | None: ...


def slug(name: str) -> str:
    """``name`` as a part of a subject: NFKC, case-folded, every run of characters
    that are not letters or digits one ``-``, at most :data:`MAX_SLUG_CHARS`; ``""``
    when nothing is left. ``"Zoë Smith"`` -> ``"zoë-smith"``."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    return _NOT_WORD.sub("-", folded).strip("-")[:MAX_SLUG_CHARS].strip("-")


def encodable(*parts: str) -> bool:
    """Whether every part is text a store takes (UTF-8: no lone surrogate)."""
    try:
        for p in parts:
            p.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
