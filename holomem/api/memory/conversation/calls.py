"""The call that stores a conversation: remember_conversation (docs/contract.md §4g).

Owns: the call, a function of the :class:`~holomem.api.memory.session.Session` that
``Memory`` offers as a method, its bounds, and the extractor seam: each message
becomes a turn (:mod:`.messages`), the optional extractor turns them into more facts,
and everything — the turns, the extracted facts and their links (:mod:`.links`) —
is one remember transaction (:func:`holomem.api.memory.remember.calls.remember_checked`):
all of it is written, or none. Imports remember's calls and intake, the engine's
checks, the types and the links, and the built-in extractors' names
(:func:`holomem.extractors.by_name`).
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec.structs

from holomem.api.engine import View, validate
from holomem.api.memory.conversation import links
from holomem.api.memory.conversation.messages import read, time_of, turn_id
from holomem.api.memory.conversation.types import (
    ConversationTurn,
    Message,
    RememberedConversation,
)
from holomem.api.memory.remember import intake
from holomem.api.memory.remember.calls import MAX_FACTS, remember_checked
from holomem.api.memory.remember.intake import Checked
from holomem.api.memory.session import Session
from holomem.api.memory.types import NamespaceArg, Remembered, RememberInput
from holomem.errors import HolomemError, InvalidError, LimitError
from holomem.events import Event
from holomem.extractors import by_name as extractor_by_name

#: Messages one call takes, and the facts it stores in all (turns and extracted
#: facts: one transaction, as remember_many's).
MAX_MESSAGES = MAX_FACTS
#: The key of an extracted fact (a dict) that names the turns it came from.
SOURCES = "sources"

#: An extractor: the call's turns -> facts (RememberInputs or dicts of their fields;
#: a dict may name its source turns' ids under ``sources``, else every turn is one).
Extractor = Callable[[builtins.list[ConversationTurn]],
                     Iterable[RememberInput | Mapping[str, Any]]]


def remember_conversation(s: Session, /, messages: Iterable[Message | Mapping[str, Any]],
                          *, session: str, time: Any = None, namespace: NamespaceArg = None,
                          start: int = 0, extractor: str | Extractor | None = None
                          ) -> RememberedConversation:
    """Store a conversation: each message a turn, in one transaction (§4g).

    A message is ``{"speaker" | "name" | "role", "text" | "content", "time"?,
    "id"?}`` — OpenAI's chat messages as they are (:mod:`.messages` has the rules).
    Each turn is a fact whose text is its words alone, with ``speaker``, ``session``
    and ``position`` (``start`` + its index in ``messages``) as fields, its event time
    the message's ``time``, else ``time``, else none; its id the message's, else
    derived from the namespace, session and position, so a retried call stores
    nothing twice (every turn ``created=False``, no link written again). Each turn
    links to the turn it answers (``replies_to``: :mod:`.links`). Send the whole
    conversation each time (the turns already stored come back ``created=False``),
    or later messages with ``start`` at the position of the first.

    ``extractor(turns)``: more facts from the turns (RememberInputs or dicts; a dict
    may name the ids of its source turns under ``"sources"``, else it comes from all
    of them), stored in the same transaction in the conversation's namespace, each
    linked ``derived_from`` to its source turns. It runs before anything is written;
    an error it raises writes nothing. A string names a built-in extractor
    (``"rules"``: :class:`holomem.extractors.RuleExtractor`), which is how a request
    over a door asks for one.

    Limits: at most :data:`MAX_MESSAGES` messages, and as many facts in all; each
    turn as ``remember`` (text <= 64 KiB and 4096 words); content of at most
    :data:`MAX_PARTS` parts; ``session`` and speakers as ids (<= 512
    characters). Errors: ``invalid_request``, ``limit``, ``conflict`` (a turn's id
    holds another payload: another text at that position), and nothing is written.
    """
    where = validate.namespace(namespace)
    session = validate.doc_id(session, "session")
    default_time = validate.to_ms(time, "time")
    intake.position(start, "start")
    if isinstance(extractor, str):
        extractor = extractor_by_name(extractor)
    elif extractor is not None and not callable(extractor):
        raise InvalidError("extractor must be a callable (turns -> facts) or the name "
                           "of a built-in one")
    given = given_messages(messages)
    if start + len(given) - 1 > intake.MAX_POSITION:
        raise InvalidError(f"start + the messages pass position {intake.MAX_POSITION}")
    checked: builtins.list[Checked] = []
    planned: builtins.list[links.PlannedTurn] = []
    turns: builtins.list[ConversationTurn] = []
    skipped: builtins.list[int] = []
    for i, value in enumerate(given):
        label = f"message {i}"
        m = read(value, label)
        position = start + i
        if m.text is None:
            skipped.append(position)
            continue
        fid = m.id if m.id is not None else turn_id(where, session, position)
        when = time_of(m, default_time)
        x = RememberInput(text=m.text, id=fid, event_time=when, namespace=list(where),
                          speaker=m.speaker, session=session, position=position)
        checked.append(_checked(x, label))
        planned.append(links.PlannedTurn(position, m.speaker))
        turns.append(ConversationTurn(id=fid, speaker=m.speaker, text=m.text,
                                      session=session, position=position, time=when))
    sources: builtins.list[builtins.list[int]] = []
    if extractor is not None and turns:
        extracted, sources = _extracted(extractor, turns, where, MAX_FACTS - len(checked))
        checked.extend(extracted)
    if not checked:
        return RememberedConversation(turns=[], skipped=skipped)

    linked = [0]

    def more(view: View, results: builtins.list[Remembered]) -> builtins.list[Event]:
        events = links.plan(view, results, planned, sources, where, session,
                            s.now_ms())
        linked[0] = len(events)
        return events

    results = remember_checked(s, checked, more=more)
    return RememberedConversation(turns=results[:len(planned)], skipped=skipped,
                                  derived=results[len(planned):], linked=linked[0])


def given_messages(messages: object) -> builtins.list[Any]:
    """The messages of a call, as given (each read later: :func:`.messages.read`),
    counted while they are taken: an endless iterable stops at the limit. The client
    takes them so too. Errors: ``invalid_request`` (not a list, or none), ``limit``."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Iterable):
        raise InvalidError("messages must be a list of messages")
    given = builtins.list(itertools.islice(messages, MAX_MESSAGES + 1))
    if len(given) > MAX_MESSAGES:
        raise LimitError(f"more than {MAX_MESSAGES} messages in one call")
    if not given:
        raise InvalidError("remember_conversation needs at least one message")
    return given


def _checked(x: RememberInput, label: str) -> Checked:
    """``intake.check`` of one input, its errors naming ``label``."""
    try:
        return intake.check(x, 1)
    except (InvalidError, LimitError) as exc:
        raise type(exc)(f"{label}: {exc.message.removeprefix('input 1: ')}") from None


def _extracted(extractor: Extractor, turns: builtins.list[ConversationTurn],
               where: tuple[str, ...], room: int
               ) -> tuple[builtins.list[Checked], builtins.list[builtins.list[int]]]:
    """The extractor's facts, checked, and the turns each came from (indexes)."""
    try:
        out = extractor(builtins.list(turns))
        items = builtins.list(itertools.islice(out, room + 1))
    except HolomemError:
        raise
    except Exception as exc:  # the caller's code: named, and nothing is written
        raise InvalidError(f"the extractor failed: {type(exc).__name__}: {exc}") from exc
    if len(items) > room:
        raise LimitError(f"the extractor gave more facts than the call has room for "
                         f"({room}: {MAX_FACTS} in all)")
    index = {t.id: k for k, t in enumerate(turns)}
    checked: builtins.list[Checked] = []
    sources: builtins.list[builtins.list[int]] = []
    for i, item in enumerate(items):
        label = f"extracted fact {i}"
        named = builtins.list(range(len(turns)))  # every turn, unless it names some
        if isinstance(item, Mapping) and SOURCES in item:
            named = _source_ids(item[SOURCES], index, label)
            item = {k: v for k, v in item.items() if k != SOURCES}
        x = validate.to_struct(RememberInput, item, {}, label, validate.TIME_FIELDS)
        if x.namespace is not None and tuple(x.namespace) != where:
            raise InvalidError(f"{label}: an extracted fact lives in its conversation's "
                               "namespace; leave namespace out")
        if x.session is not None or x.position is not None:
            raise InvalidError(f"{label}: an extracted fact is not a turn; leave session "
                               "and position out")
        x = msgspec.structs.replace(x, namespace=builtins.list(where))
        checked.append(_checked(x, label))
        sources.append(named)
    return checked, sources


def _source_ids(value: object, index: Mapping[str, int], label: str) -> builtins.list[int]:
    """The turns (indexes) a ``sources`` list of turn ids names."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise InvalidError(f"{label}: sources must be a non-empty list of this call's "
                           "turn ids")
    out: builtins.list[int] = []
    for fid in value:
        k = index.get(fid) if isinstance(fid, str) else None
        if k is None:
            raise InvalidError(f"{label}: sources names {fid!r}, which is not a turn of "
                               "this call")
        out.append(k)
    return builtins.list(dict.fromkeys(out))
