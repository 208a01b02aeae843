"""The calls that store facts: remember and remember_many (docs/contract.md §3, §4).

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
Each call checks its inputs, embeds them outside the write lock when the session
has an embedder, plans the transaction's events under it (:mod:`.planner`), commits
and notifies.
"""

from __future__ import annotations

import builtins
import itertools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from holomem.api.engine import View, validate
from holomem.api.memory.embedding import embedder
from holomem.api.memory.progress import Progress, callback
from holomem.api.memory.remember import intake, planner
from holomem.api.memory.remember.intake import Checked
from holomem.api.memory.session import Session
from holomem.api.memory.types import Remembered, RememberInput
from holomem.errors import InvalidError, LimitError
from holomem.events import Event, RelationAdded
from holomem.projections.base import gc_paused

#: Facts in one remember_many call (one transaction; the plan is linear in it).
MAX_FACTS = 10_000


def remember(s: Session, input: str | RememberInput | Mapping[str, Any] | None = None, /,
             **fields: Any) -> Remembered:
    """Store one fact: ``remember("text", subject=..., ...)``, ``remember(text=...,
    ...)``, a RememberInput or a dict.

    Same id and same payload again: ``created=False`` and nothing is written.
    Same id, another payload: ``conflict``. The text must hold something other
    than whitespace. Limits: text <= 64 KiB and 4096 words, metadata <= 64 KiB
    of JSON nested <= 32 deep, ids and subject <= 512 characters, <= 256
    entities, embedding <= 8192 numbers, ``supersedes`` <= ``validate.MAX_IDS``
    ids. Errors: ``invalid_request``, ``limit``, ``conflict``.
    """
    if isinstance(input, str):
        input, fields = None, {"text": input, **fields}
    x = validate.to_struct(RememberInput, input, fields, "remember input",
                           validate.TIME_FIELDS)
    return remember_checked(s, [intake.check(x, 0)])[0]


def remember_many(s: Session, /, inputs: Iterable[RememberInput | Mapping[str, Any]], *,
                  progress: Progress | None = None) -> builtins.list[Remembered]:
    """Store several facts in one transaction: all or none; later inputs see earlier ones.

    ``progress(n)``: with an embedder, the inputs embedded so far, as they are; then
    all of them, once written (docs/contract.md §4, "Progress").
    Limits: at most :data:`MAX_FACTS` facts; each as :meth:`remember`.
    Errors: ``invalid_request``, ``limit``, ``conflict``.
    """
    if isinstance(inputs, (str, bytes, Mapping)) or not isinstance(inputs, Iterable):
        raise InvalidError("remember_many takes a list of inputs")
    progress = callback(progress)
    # A batch makes a few dozen objects per fact, all kept until it is applied: the
    # collector would walk them again and again (a quarter of a bulk load's time).
    # The call's work is bounded (MAX_FACTS), so is what waits for the next pass.
    with gc_paused():
        return _remember_many(s, inputs, progress)


def _remember_many(s: Session, /, inputs: Iterable[RememberInput | Mapping[str, Any]],
                   progress: Progress | None) -> builtins.list[Remembered]:
    # Counted while reading: an endless iterable stops here.
    items = list(itertools.islice(inputs, MAX_FACTS + 1))
    converted = intake.convert_all(items) if len(items) <= MAX_FACTS else None
    if converted is not None:
        checked = intake.check_all(*converted)
    else:  # one at a time: the first bad input (or the limit) is the one named
        checked = []
        for i, x in enumerate(items):
            if i >= MAX_FACTS:
                raise LimitError(f"more than {MAX_FACTS} facts in one call")
            item = validate.to_struct(RememberInput, x, {}, f"input {i}",
                                      validate.TIME_FIELDS)
            checked.append(intake.check(item, i))
    if not checked:
        raise InvalidError("remember_many needs at least one input")
    return remember_checked(s, checked, progress)


#: Events a caller adds to a remember's transaction, planned under the same lock from
#: the view and the remember's results (in the order of its inputs).
More = Callable[[View, builtins.list[Remembered]], builtins.list[Event]]


def remember_checked(s: Session, /, checked: builtins.list[Checked],
                     progress: Progress | None = None, *, more: More | None = None
                     ) -> builtins.list[Remembered]:
    """remember_many of inputs already checked (``intake.check``), one transaction;
    ``more``: events added after the facts' in the same transaction (the links
    ``remember_conversation`` makes), and their ids notified as ``relate``'s."""
    embedded = False
    if s.embedder is not None:  # outside the write lock: a model takes time
        checked, embedded = embedder.fill(checked, s.embedder, progress)
    planners: builtins.list[planner.Planner] = []

    def build(view: View) -> builtins.list[Event]:
        if embedded:
            s.check_pinned(view)
        planners[:] = [planner.Planner(view, s.policies, s.now_ms())]
        events = planners[0].plan(checked)
        if more is not None:
            added = more(view, planners[0].results)
            linked[:] = [i for e in added if isinstance(e, RelationAdded)
                         for i in (e.from_id, e.to_id)]
            events.extend(added)
        return events

    linked: builtins.list[str] = []
    seq, _ = s.store.commit(build)
    results = planners[0].results
    created = [r.id for r in results if r.created]
    if created:
        s.notify("remember", created, seq)
    if linked:
        s.notify("relate", builtins.list(dict.fromkeys(linked)), seq)
    if progress is not None:
        progress(len(results))
    return list(results)
