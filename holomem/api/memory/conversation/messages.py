"""What a message becomes: a turn's speaker, words, time and id (docs/contract.md §4g).

Owns: the rules that read a message — whose turn it is, which of its words are kept,
when it happened, which id it is stored under — written down once here:

- **speaker**: ``speaker``, else ``name``, else ``role``. An explicit ``speaker`` is
  what the caller means; OpenAI's ``name`` tells participants of one ``role`` apart
  (``{"role": "user", "name": "alice"}`` is alice), so it comes before the role. A
  message with none of the three is refused.
- **words**: ``text`` or ``content`` (not both). A string is kept as it is; a list of
  parts (OpenAI's multi-part content) keeps the ``text`` of each part whose ``type``
  is ``text``, ``input_text`` or ``output_text``, joined by a newline, and leaves the
  rest (images, audio, files) out. A message with no words — ``content`` null, as on
  an assistant's tool call, or only whitespace, or no text part — is *skipped*: it
  keeps its position, and nothing is stored for it.
- **time**: the message's ``time``, else the call's ``time``, else none (the fact's
  ingest time stands for it). Never the clock: a retry must give the same payload.
- **id**: the message's ``id``, else one derived from the namespace, the session and
  the position (:func:`turn_id`), so a retried call names the same facts.

Imports the engine's checks and the types.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import NamedTuple

from holomem.api.engine import validate
from holomem.api.memory.conversation.types import Message
from holomem.errors import InvalidError, LimitError

#: Parts one message's content may list.
MAX_PARTS = 1024
#: The part types whose ``text`` is kept.
TEXT_PARTS = ("text", "input_text", "output_text")


class Read(NamedTuple):
    """One message, read: its speaker, its words (None: it has none), time and id."""

    speaker: str
    text: str | None
    time: int | None
    id: str | None


def message(value: object, where: str) -> Message:
    """A message (a Message or a dict) as a :class:`Message`, its ``time`` made
    milliseconds (an int, an ISO 8601 string or an aware datetime; a naive one is the
    process's local time, and refused). The client sends what this gives. Errors:
    ``invalid_request``."""
    return validate.to_struct(Message, value, {}, where, ("time",))


def read(value: object, where: str) -> Read:
    """A message (a Message or a dict) read by the module's rules. Errors:
    ``invalid_request``, ``limit``."""
    m = message(value, where)
    who = m.speaker if m.speaker is not None else m.name if m.name is not None else m.role
    if who is None:
        raise InvalidError(f"{where}: a message needs a speaker (speaker, name or role)")
    speaker = validate.doc_id(who, f"{where}: speaker")
    if m.text is not None and m.content is not None:
        raise InvalidError(f"{where}: give text or content, not both")
    words = _words(m.text if m.text is not None else m.content, where)
    if m.id is not None:
        validate.doc_id(m.id, f"{where}: id")
    return Read(speaker, words if words is not None and words.strip() else None,
                m.time, m.id)


def _words(value: object, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    assert isinstance(value, list)  # (the Message's type)
    if len(value) > MAX_PARTS:
        raise LimitError(f"{where}: content lists more than {MAX_PARTS} parts")
    texts = []
    for i, part in enumerate(value):
        if not isinstance(part, Mapping):
            raise InvalidError(f"{where}: content[{i}] must be an object (a part)")
        if part.get("type") in TEXT_PARTS:
            text = part.get("text")
            if not isinstance(text, str):
                raise InvalidError(f"{where}: content[{i}] is a text part without a "
                                   "string text")
            texts.append(text)
    return "\n".join(texts) if texts else None


def turn_id(namespace: tuple[str, ...], session: str, position: int) -> str:
    """The id of the turn at ``position`` of ``session`` in ``namespace`` when its
    message gives none: the same for every call, distinct from content ids (``f-``)."""
    key = json.dumps([list(namespace), session, position], ensure_ascii=False,
                     separators=(",", ":"))
    return "t-" + hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()[:16].hex()


def time_of(message: Read, default: int | None) -> int | None:
    """The event time of a turn (see the module doc)."""
    return message.time if message.time is not None else default
