"""The types of conversations (docs/contract.md §4g).

Owns: :class:`Message` (one message as a caller gives it, OpenAI's chat shape
included), :class:`ConversationTurn` (a turn as an extractor sees it) and
:class:`RememberedConversation` (what ``remember_conversation`` answers). Same
conventions as :mod:`holomem.api.memory.types`; kept apart so that module stays the
size of its own concern. Imports msgspec and the shapes.
"""

from __future__ import annotations

from typing import Any

import msgspec

from holomem.api.memory.shapes import Request, Response
from holomem.api.memory.types import Remembered


class Message(Request, frozen=True):
    """One message: who said it (``speaker``, else ``name``, else ``role``), its words
    (``text`` or ``content``: a string, or OpenAI's list of parts, whose text parts are
    taken), and optionally when (``time``, ms) and its own ``id``.

    OpenAI's chat-message keys that hold no words — ``tool_calls``, ``tool_call_id``,
    ``function_call``, ``refusal``, ``audio`` — are accepted and ignored, so a chat
    transcript goes in unchanged; any other key is refused, as everywhere.
    """

    speaker: str | None = None
    role: str | None = None
    name: str | None = None
    text: str | None = None
    content: str | list[Any] | None = None
    time: int | None = None
    id: str | None = None
    tool_calls: Any = msgspec.field(default=None, name="tool_calls")
    tool_call_id: Any = msgspec.field(default=None, name="tool_call_id")
    function_call: Any = msgspec.field(default=None, name="function_call")
    refusal: Any = None
    audio: Any = None


class ConversationTurn(Response, frozen=True):
    """A turn as an extractor receives it: the fact it is stored as (``id``), who said
    it, its words, its session and position, and its event time (None: the call gave
    none, and the fact's ingest time stands for it)."""

    id: str
    speaker: str
    text: str
    session: str
    position: int
    time: int | None = None


class RememberedConversation(Response, frozen=True):
    """What ``remember_conversation`` did: each stored turn in message order
    (``created`` False: it was there already), the positions of the messages that hold
    no words (stored as nothing), the facts the extractor gave, and how many typed
    links the call wrote (``replies_to`` between turns, ``derived_from`` from an
    extracted fact to its turns)."""

    turns: list[Remembered]
    skipped: list[int] = msgspec.field(default_factory=list)
    derived: list[Remembered] = msgspec.field(default_factory=list)
    linked: int = 0
