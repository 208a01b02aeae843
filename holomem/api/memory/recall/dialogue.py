"""Conversation-aware recall: the reply links, the speakers and the dates a question
names, as shares and multipliers of recall scores (docs/contract.md §4g).

Owns: :class:`Reading` (what a question says to these signals: the speakers it names,
the words BM25 matches, the date windows) and :func:`apply` — on the best
:func:`pool` candidates of document search (and the context policy), each turn
borrows from the turn it answers (``replies_to``, the answer's weight) and from its
best answer (the question's weight); then a turn whose speaker the question names,
and a fact whose event time falls in a window the question names, are multiplied.
:func:`parts` takes a candidate's score apart for explain. Recall's ranking
(:mod:`.rank`) calls them. Imports the engine's view, the configuration, the
conversation links' relation name, the date reader and the fusion type.

The work is bounded: the signals look at the :func:`pool` best candidates and their
reply partners only, a question's speakers are looked up by its words (at most
:data:`MAX_NAME_WORDS` words a name), never by a pass over the speakers.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from holomem.api.engine import View
from holomem.api.memory import dates
from holomem.api.memory.config import DialogueConfig
from holomem.api.memory.conversation.links import REPLIES_TO
from holomem.projections.fusion import Fusion
from holomem.projections.temporal import UNSET

#: The most words of a speaker's name a question is searched for.
MAX_NAME_WORDS = 3
#: The least number of candidates the signals look at (:func:`pool`).
MIN_POOL = 400

#: An apostrophe, straight or typographic (U+2019).
_APOSTROPHE = "'\u2019"
_WORD = re.compile(rf"[^\W_]+(?:[{_APOSTROPHE}][^\W_]+)*", re.UNICODE)
_POSSESSIVE = re.compile(rf"[{_APOSTROPHE}]s$", re.IGNORECASE)


class Reading(NamedTuple):
    """What a question says to the dialogue signals."""

    #: the stored speakers the question names
    speakers: frozenset[str]
    #: the words BM25 matches: the question, its speakers' names left out when the
    #: configuration mutes them (and some other word remains)
    lexical: str
    #: the date windows the question names, [start, end) ms
    windows: tuple[tuple[int, int], ...]


def read(view: View, config: DialogueConfig, query: str, at: int) -> Reading:
    """The question ``query`` read against the stored speakers and the time ``at``."""
    words = [(m.start(), m.end(), _POSSESSIVE.sub("", m.group())) for m in
             _WORD.finditer(query[:dates.MAX_CHARS])]
    speakers = view.facts.turns.by_speaker
    named: set[str] = set()
    spans: list[tuple[int, int]] = []
    if config.speaker or config.mute_speakers:
        for i in range(len(words)):
            for n in range(min(MAX_NAME_WORDS, len(words) - i), 0, -1):
                name = " ".join(w for _, _, w in words[i:i + n])
                found = next((s for s in (name, name.title(), name.lower()) if s in speakers),
                             None)
                if found is not None:
                    named.add(found)
                    spans.append((words[i][0], words[i + n - 1][1]))
                    break
    lexical = query
    if config.mute_speakers and spans:
        kept = _cut(query, spans)
        if _WORD.search(kept) and len(kept.split()) > 0:
            lexical = kept
    windows = tuple(dates.windows(query, at)) if config.dates else ()
    return Reading(frozenset(named), lexical, windows)


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with the ``spans`` (and a possessive after each) blanked out."""
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            continue
        out.append(text[last:start])
        last = end
        m = re.match(rf"[{_APOSTROPHE}]s\b", text[last:], re.IGNORECASE)
        if m:
            last += m.end()
    out.append(text[last:])
    return " ".join("".join(out).split())


def pool(candidate_limit: int, k: int) -> int:
    """How many of the best candidates the signals look at."""
    return max(MIN_POOL, 4 * max(candidate_limit, k))


class Shares(NamedTuple):
    """Per slot of the answer (ascending), what :func:`apply` added and multiplied."""

    reply: np.ndarray  # the score borrowed through reply links
    speaker: np.ndarray  # the speaker multiplier
    date: np.ndarray  # the date multiplier


def apply(view: View, config: DialogueConfig, reading: Reading, own: Fusion,
          fused: Fusion, allowed: np.ndarray | None, size: int
          ) -> tuple[Fusion, Shares]:
    """``fused`` (document search's scores, with the context policy's share) with the
    dialogue signals on its ``size`` best candidates: the reply shares (lent from
    ``own``, document search's scores without the context policy's share) and the
    speaker and date multipliers. ``allowed`` (a slot mask) restricts the answer."""
    order = np.argsort(-fused.score, kind="stable")[:size]
    best = fused.slots[order]
    lend_slots, lend_score = own.slots, own.score
    extra_slots, extra_score = _replies(view, config, best, lend_slots, lend_score)
    slots = np.union1d(fused.slots, extra_slots).astype(np.int64)
    base = _at(fused.slots, fused.score, slots)
    reply = _at(extra_slots, extra_score, slots) if len(extra_slots) else np.zeros(len(slots))
    # Multipliers on the pool and the turns that borrowed, the rest keep theirs.
    looked = np.union1d(best, extra_slots)
    speaker = _speakers(view, reading, slots, looked, config.speaker)
    date = _dates(view, reading, slots, looked, config.dates)
    score = (base + reply) * speaker * date
    if allowed is not None:
        held = allowed[slots]
        slots, score, base = slots[held], score[held], base[held]
        reply, speaker, date = reply[held], speaker[held], date[held]
    keep = score > 0
    slots, score = slots[keep], score[keep]
    semantic = None if fused.semantic is None else _at(fused.slots, fused.semantic, slots)
    out = Fusion(slots, score, _at(fused.slots, fused.lexical, slots), semantic,
                 fused.lexical_scale, fused.semantic_best)
    return out, Shares(reply[keep], speaker[keep], date[keep])


def _at(slots: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values`` of ``wanted`` in ``slots`` (ascending), 0 where absent."""
    if not len(slots):
        return np.zeros(len(wanted))
    i = np.minimum(np.searchsorted(slots, wanted), len(slots) - 1)
    return np.where(slots[i] == wanted, values[i], 0.0)


def _replies(view: View, config: DialogueConfig, best: np.ndarray, slots: np.ndarray,
             score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(slots ascending, the share each borrows through reply links) for the reply
    partners of ``best``: an answer ``answer`` times the score of the turn it answers,
    a turn ``question`` times its best answer's (scores from ``slots``/``score``)."""
    a, q = config.replies.answer, config.replies.question
    rel = view.relations
    rid = rel.relation_id(REPLIES_TO)
    if (not a and not q) or rid < 0 or not len(best):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    _, rows = rel.touching_many(np.sort(best))
    rows = np.unique(rows)
    rows = rows[rel.rel.view()[rows] == rid]
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    src, dst = rel.src.view()[rows], rel.dst.view()[rows]  # the answer, what it answers
    gets: dict[int, float] = {}
    if a:
        for answer, lent in zip(src.tolist(), (a * _at(slots, score, dst)).tolist(),
                                strict=True):
            if lent > 0:
                gets[answer] = gets.get(answer, 0.0) + lent
    if q:
        best_answer: dict[int, float] = {}
        for asked, lent in zip(dst.tolist(), (q * _at(slots, score, src)).tolist(),
                               strict=True):
            if lent > best_answer.get(asked, 0.0):
                best_answer[asked] = lent
        for asked, lent in best_answer.items():
            gets[asked] = gets.get(asked, 0.0) + lent
    if not gets:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    out = np.array(sorted(gets), dtype=np.int64)
    return out, np.array([gets[s] for s in out.tolist()], dtype=np.float64)


def _speakers(view: View, reading: Reading, slots: np.ndarray, looked: np.ndarray,
              boost: float) -> np.ndarray:
    """The speaker multiplier of each of ``slots``: ``1 + boost`` for a turn in
    ``looked`` whose speaker the question names, else 1."""
    out = np.ones(len(slots))
    if not boost or not reading.speakers:
        return out
    turns, id_of = view.facts.turns, view.id_of
    hit = np.isin(slots, looked)
    for i in np.flatnonzero(hit).tolist():
        turn = turns.get(id_of(int(slots[i])))
        if turn is not None and turn.speaker in reading.speakers:
            out[i] = 1.0 + boost
    return out


def _dates(view: View, reading: Reading, slots: np.ndarray, looked: np.ndarray,
           boost: float) -> np.ndarray:
    """The date multiplier of each of ``slots``: ``1 + boost`` for a fact in
    ``looked`` whose event time falls in one of the question's windows, else 1."""
    out = np.ones(len(slots))
    if not boost or not reading.windows or not len(slots):
        return out
    facts = view.facts
    when = facts.event.view()[slots]
    inside = np.zeros(len(slots), dtype=bool)
    for start, end in reading.windows:
        inside |= (when >= start) & (when < end)
    inside &= (when != UNSET) & facts.is_fact.view()[slots] & np.isin(slots, looked)
    out[inside] = 1.0 + boost
    return out


def parts(shares: Shares, slots: np.ndarray, slot: int) -> tuple[float, float, float]:
    """(reply share, speaker multiplier, date multiplier) of ``slot`` in an answer of
    :func:`apply` (``slots`` its slots, ascending): (0, 1, 1) when it is not there."""
    i = int(np.searchsorted(slots, slot))
    if i < len(slots) and slots[i] == slot:
        return (float(shares.reply[i]), float(shares.speaker[i]), float(shares.date[i]))
    return 0.0, 1.0, 1.0
