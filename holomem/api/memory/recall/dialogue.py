"""Conversation-aware recall: the reply links, the speakers and the dates a question
names, and the session a turn belongs to, as shares and multipliers of recall scores
(docs/contract.md §4g).

Owns: :class:`Reading` (what a question says to these signals: the speakers it names,
the words BM25 matches, the date windows) and :func:`apply` — on the best
:func:`pool` candidates of document search (and the context policy), each turn
borrows from the turn it answers (``replies_to``, the answer's weight) and from its
best answer (the question's weight), through the stored links and, when the
configuration infers them, the reply rule's for turns stored without one; then a turn
whose speaker the question names, and a fact whose event time falls in a window the
question names, are multiplied; last, each turn by how well its session's best turn
scored against the best session's (the session prior). :func:`parts` takes a
candidate's score apart for explain. Recall's ranking (:mod:`.rank`) calls them.
Imports the engine's view, the configuration, the conversation links' relation name
and reply rule, the date reader, the fusion type and the namespace type.

The work is bounded: the signals look at the :func:`pool` best candidates and their
reply partners only (an inferred partner is looked for at most
:data:`~holomem.api.memory.conversation.links.REPLY_WINDOW` positions away), a
question's speakers are looked up by its words (at most :data:`MAX_NAME_WORDS` words
a name), never by a pass over the speakers. A name counts only as the speaker of a turn
the question can see (at or under its namespace: looked up among the namespaces the
speaker spoke in; under ``known_at``, its turns there are looked at until one was
known then).
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from holomem.api.engine import View
from holomem.api.memory import dates
from holomem.api.memory.config import DialogueConfig
from holomem.api.memory.conversation import links
from holomem.api.memory.conversation.links import REPLIES_TO
from holomem.projections.fusion import Fusion
from holomem.projections.namespaces import ROOT, Namespace
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


def read(view: View, config: DialogueConfig, query: str, at: int,
         namespace: Namespace = ROOT, known_at: int | None = None) -> Reading:
    """The question ``query`` read against the speakers of the turns it can see (those
    at or under ``namespace`` and, with ``known_at``, ingested by then) and the time
    ``at``."""
    words = [(m.start(), m.end(), _POSSESSIVE.sub("", m.group())) for m in
             _WORD.finditer(query[:dates.MAX_CHARS])]
    heard = _Heard(view, namespace, known_at)
    named: set[str] = set()
    spans: list[tuple[int, int]] = []
    if config.speaker or config.mute_speakers:
        for i in range(len(words)):
            for n in range(min(MAX_NAME_WORDS, len(words) - i), 0, -1):
                last = words[i + n - 1]
                # the run as written, what joins its words kept ("jean-luc",
                # "joanna_smith", "J.R."), then its words joined by one space
                start, end = words[i][0], last[0] + len(last[2])
                name = " ".join(w for _, _, w in words[i:i + n])
                written = query[start:end]
                forms = [(name, last[1])] if written == name else [(written, last[1]),
                                                                   (name, last[1])]
                if query[end:end + 1] == "." and last[1] == end:
                    forms.insert(0, (query[start:end + 1], end + 1))
                found = heard.first(forms)
                if found is not None:
                    named.add(found[0])
                    spans.append((start, found[1]))
                    break
    lexical = query
    if config.mute_speakers and spans:
        kept = _cut(query, spans)
        if _WORD.search(kept) and len(kept.split()) > 0:
            lexical = kept
    windows = tuple(dates.windows(query, at)) if config.dates else ()
    return Reading(frozenset(named), lexical, windows)


class _Heard:
    """Whether a name is the speaker of a turn a question can see: one at or under its
    namespace and, with ``known_at``, ingested by then (each name looked up once)."""

    def __init__(self, view: View, namespace: Namespace, known_at: int | None) -> None:
        self.facts, self.namespace, self.known_at = view.facts, namespace, known_at
        self.speakers = view.facts.turns.spaces  # (every stored speaker)
        self.seen: dict[str, bool] = {}

    def first(self, forms: list[tuple[str, int]]) -> tuple[str, int] | None:
        """The first of ``forms`` (a name, and where its run ends), as written, in
        title case or in lower case, that is heard, and where its run ends."""
        speakers = self.speakers
        for form, stop in forms:
            for name in (form, form.title(), form.lower()):
                if name in speakers and self(name):
                    return name, stop
        return None

    def __call__(self, name: str) -> bool:
        got = self.seen.get(name)
        if got is None:
            got = self.seen[name] = self._look(name)
        return got

    def _look(self, name: str) -> bool:
        facts, turns = self.facts, self.facts.turns
        if not turns.speaks_under(name, self.namespace):
            return False
        if self.known_at is None:
            return True
        # (turns are stored mostly in ingest order: the first is usually known then)
        return any(facts.known(facts.slot(fid), self.known_at)
                   for fid in turns.speaker_facts_under(name, self.namespace))


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
    inferred: np.ndarray  # the part of ``reply`` borrowed through inferred links
    speaker: np.ndarray  # the speaker multiplier
    date: np.ndarray  # the date multiplier
    session: np.ndarray  # the session prior's multiplier


def apply(view: View, config: DialogueConfig, reading: Reading, own: Fusion,
          fused: Fusion, allowed: np.ndarray | None, size: int,
          known_at: int | None = None) -> tuple[Fusion, Shares]:
    """``fused`` (document search's scores, with the context policy's share) with the
    dialogue signals on its ``size`` best candidates among those ``allowed`` (a slot
    mask that restricts the answer; None: every one): the reply shares (lent from
    ``own``, document search's scores without the context policy's share, whatever
    the restriction), the speaker and date multipliers, then the session prior (over
    the candidates ``allowed`` lets through). With ``known_at``, the links and turns
    the store learnt after it are no reply partners."""
    if allowed is None:
        order = np.argsort(-fused.score, kind="stable")[:size]
    else:  # (what the answer cannot hold takes no place in the pool)
        inside = np.flatnonzero(allowed[fused.slots])
        order = inside[np.argsort(-fused.score[inside], kind="stable")[:size]]
    best = fused.slots[order]
    extra_slots, extra_score, extra_inferred = _replies(view, config, best, own.slots,
                                                        own.score, known_at)
    slots = np.union1d(fused.slots, extra_slots).astype(np.int64)
    base = _at(fused.slots, fused.score, slots)
    reply = _at(extra_slots, extra_score, slots)
    inferred = _at(extra_slots, extra_inferred, slots)
    # Multipliers on the pool and the turns that borrowed, the rest keep theirs.
    looked = np.union1d(best, extra_slots)
    speaker = _speakers(view, reading, slots, looked, config.speaker)
    date = _dates(view, reading, slots, looked, config.dates)
    score = (base + reply) * speaker * date
    if allowed is not None:
        held = allowed[slots]
        slots, score, base = slots[held], score[held], base[held]
        reply, inferred = reply[held], inferred[held]
        speaker, date = speaker[held], date[held]
    session = _sessions(view, slots, score, looked, config.session)
    score = score * session
    keep = score > 0
    slots, score = slots[keep], score[keep]
    semantic = None if fused.semantic is None else _at(fused.slots, fused.semantic, slots)
    out = Fusion(slots, score, _at(fused.slots, fused.lexical, slots), semantic,
                 fused.lexical_scale, fused.semantic_best)
    return out, Shares(reply[keep], inferred[keep], speaker[keep], date[keep],
                       session[keep])


def _at(slots: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """``values`` of ``wanted`` in ``slots`` (ascending), 0 where absent."""
    if not len(slots):
        return np.zeros(len(wanted))
    i = np.minimum(np.searchsorted(slots, wanted), len(slots) - 1)
    return np.where(slots[i] == wanted, values[i], 0.0)


def _replies(view: View, config: DialogueConfig, best: np.ndarray, slots: np.ndarray,
             score: np.ndarray, known_at: int | None
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slots ascending, the share each borrows through reply links, the part of it
    through inferred links) for the reply partners of ``best``: an answer ``answer``
    times the score of the turn it answers, a turn ``question`` times its best
    answer's (scores from ``slots``/``score``)."""
    a, q = config.replies.answer, config.replies.question
    none = np.zeros(0, dtype=np.int64), np.zeros(0), np.zeros(0)
    if (not a and not q) or not len(best):
        return none
    # (with no question weight, a turn that matched nothing by itself lends nothing:
    # the turns answering it need not be looked for)
    lends = best if q else best[_at(slots, score, best) > 0]
    src, dst, guessed = _links(view, best, lends if config.replies.infer else None,
                               known_at)
    if not len(src):
        return none
    gets: dict[int, float] = {}
    inferred: dict[int, float] = {}
    if a:
        for answer, lent, guess in zip(src.tolist(), (a * _at(slots, score, dst)).tolist(),
                                       guessed.tolist(), strict=True):
            if lent > 0:
                gets[answer] = gets.get(answer, 0.0) + lent
                if guess:
                    inferred[answer] = inferred.get(answer, 0.0) + lent
    if q:
        best_answer: dict[int, tuple[float, bool]] = {}
        for asked, lent, guess in zip(dst.tolist(), (q * _at(slots, score, src)).tolist(),
                                      guessed.tolist(), strict=True):
            if lent > best_answer.get(asked, (0.0, False))[0]:
                best_answer[asked] = (lent, guess)
        for asked, (lent, guess) in best_answer.items():
            gets[asked] = gets.get(asked, 0.0) + lent
            if guess:
                inferred[asked] = inferred.get(asked, 0.0) + lent
    if not gets:
        return none
    out = np.array(sorted(gets), dtype=np.int64)
    return (out, np.array([gets[s] for s in out.tolist()], dtype=np.float64),
            np.array([inferred.get(s, 0.0) for s in out.tolist()], dtype=np.float64))


def _links(view: View, best: np.ndarray, infer: np.ndarray | None, known_at: int | None
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(answers, the turn each answers, whether the link is inferred) touching
    ``best``: the stored ``replies_to`` links, and unless ``infer`` is None the reply
    rule's (:func:`~holomem.api.memory.conversation.links.answered` and
    :func:`~holomem.api.memory.conversation.links.answering`) for the turns stored
    with no such link of their own: a turn of ``best`` answers the turn the rule
    names, and the turns the rule says answer a turn of ``infer`` (some of ``best``)
    answer it. With ``known_at``, the links and turns learnt after it are not there
    (a turn whose only link came later is one stored without a link)."""
    rel = view.relations
    rid = rel.relation_id(REPLIES_TO)
    src = dst = np.zeros(0, dtype=np.int64)
    if rid >= 0:
        src, dst = _stored(view, rid, best, known_at)
    stored = np.zeros(len(src), dtype=bool)
    if infer is None:
        return src, dst, stored
    facts, id_of = view.facts, view.id_of
    linked = set(src.tolist())  # (every link leaving a turn of best is among them)
    known = set(zip(src.tolist(), dst.tolist(), strict=True))

    def unlinked(slot: int) -> bool:
        if slot in linked or rid < 0:
            return slot not in linked
        own = [r for r in rel.rows(slot, "out") if rel.rel.item(r) == rid]
        return not own if known_at is None else not len(
            _visible(view, np.array(own, dtype=np.int64), known_at))

    pairs: set[tuple[int, int]] = set()
    looks = set(infer.tolist())
    for slot in best.tolist():
        fid = id_of(slot)
        if fid not in facts.turns.of:
            continue
        if slot not in linked:
            to = links.answered(view, fid, known_at)
            if to is not None:
                pairs.add((slot, facts.slot(to)))
        if slot not in looks:
            continue
        for later in links.answering(view, fid, known_at):
            at = facts.slot(later)
            if (at, slot) not in known and unlinked(at):
                pairs.add((at, slot))
    if not pairs:
        return src, dst, stored
    more = np.array(sorted(pairs), dtype=np.int64)
    return (np.concatenate([src, more[:, 0]]), np.concatenate([dst, more[:, 1]]),
            np.concatenate([stored, np.ones(len(more), dtype=bool)]))


def _stored(view: View, rid: int, slots: np.ndarray, known_at: int | None
            ) -> tuple[np.ndarray, np.ndarray]:
    """(answers, what each answers) of the stored links of relation ``rid`` touching
    ``slots`` (with ``known_at``, those known then)."""
    rel = view.relations
    _, rows = rel.touching_many(np.sort(slots))
    rows = np.unique(rows)
    rows = _visible(view, rows[rel.rel.view()[rows] == rid], known_at)
    return rel.src.view()[rows], rel.dst.view()[rows]


def _visible(view: View, rows: np.ndarray, known_at: int | None) -> np.ndarray:
    """The link ``rows`` known at ``known_at`` (all of them for None): learnt by then,
    between facts ingested by then (as ``links`` shows them, docs/contract.md §4f)."""
    if known_at is None or not len(rows):
        return rows
    rel, ingest = view.relations, view.facts.ingest.view()
    held = ((rel.time.view()[rows] <= known_at)
            & (ingest[rel.src.view()[rows]] <= known_at)
            & (ingest[rel.dst.view()[rows]] <= known_at))
    out: np.ndarray = rows[held]
    return out


def _sessions(view: View, slots: np.ndarray, score: np.ndarray, looked: np.ndarray,
              boost: float) -> np.ndarray:
    """The session prior's multiplier of each of ``slots`` (scored ``score``):
    ``1 + boost * b / top`` for a turn in ``looked`` whose session's best turn among
    them scores ``b``, the best session's ``top``; 1 for the others. A session is
    one within its namespace."""
    out = np.ones(len(slots))
    if not boost or not len(slots):
        return out
    turns, id_of = view.facts.turns, view.id_of
    of: dict[int, tuple[int, str]] = {}  # index -> (namespace id, session)
    best: dict[tuple[int, str], float] = {}
    wanted = np.flatnonzero(np.isin(slots, looked) & (score > 0))
    spaces = view.facts.namespaces.of_slot.view()[slots[wanted]].tolist()
    for i, space in zip(wanted.tolist(), spaces, strict=True):
        turn = turns.get(id_of(int(slots[i])))
        if turn is None or turn.session is None:
            continue
        key = (space, turn.session)
        of[i] = key
        best[key] = max(best.get(key, 0.0), float(score[i]))
    if best:
        top = max(best.values())
        for i, key in of.items():
            out[i] = 1.0 + boost * best[key] / top
    return out


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
    ``looked`` whose event time (its ingest time when it has none: a turn stored
    without a time) falls in one of the question's windows, else 1."""
    out = np.ones(len(slots))
    if not boost or not reading.windows or not len(slots):
        return out
    facts = view.facts
    event = facts.event.view()[slots]
    when = np.where(event != UNSET, event, facts.ingest.view()[slots])
    inside = np.zeros(len(slots), dtype=bool)
    for start, end in reading.windows:
        inside |= (when >= start) & (when < end)
    inside &= (when != UNSET) & facts.is_fact.view()[slots] & np.isin(slots, looked)
    out[inside] = 1.0 + boost
    return out


class Parts(NamedTuple):
    """One candidate's part of :class:`Shares`."""

    reply: float = 0.0
    inferred: float = 0.0
    speaker: float = 1.0
    date: float = 1.0
    session: float = 1.0


def parts(shares: Shares, slots: np.ndarray, slot: int) -> Parts:
    """The shares and multipliers of ``slot`` in an answer of :func:`apply` (``slots``
    its slots, ascending): nothing borrowed and multipliers of 1 when it is not there."""
    i = int(np.searchsorted(slots, slot))
    if i < len(slots) and slots[i] == slot:
        return Parts(*(float(a[i]) for a in shares))
    return Parts()
