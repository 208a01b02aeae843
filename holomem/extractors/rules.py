"""The rule-based extractor: a few kinds of facts read from a conversation's words,
offline and deterministic (docs/contract.md §4g, "Extractors").

Owns: :class:`RuleExtractor`, its rules and its bounds, written down once here. Imports
the shared shapes of :mod:`.base` and nothing else from holomem (it never touches a
store: text in, fact inputs out).

**What it reads.** The first :data:`MAX_CHARS` characters of each turn, NFKC-normalised,
cut into sentences (at ``.``, ``!``, ``?`` and ``;`` followed by a space, and at line
breaks), every run of spaces, tabs and other whitespace in a sentence read as one space,
and each sentence into clauses (at commas, colons, dashes, brackets, and before
``but``, ``so``, ``because``, ``when`` …, and before ``and`` when a new subject follows).
Turns said by ``system``, ``developer``, ``tool``, ``function`` and ``assistant`` are not
read (``skip_speakers``): what an assistant says about itself is not a fact about a
person.

**What it never reads** — precision before recall. A whole sentence is passed over when
it holds a question mark, a quotation mark, starts like a question (``do``, ``does``,
``what``, ``where``, ``is`` …), or holds a word of doubt or of a world that is not this
one: ``if``, ``unless``, ``would``, ``could``, ``might``, ``maybe``, ``perhaps``,
``probably``, ``think``, ``guess``, ``wish``, ``imagine``, ``suppose``, ``pretend``,
``whether``, ``I'd`` … So "if I lived in Rome", "do you like jazz?" and "I think I'll
quit" give nothing.

**The rules**, tried in this order on each clause; the first that matches gives its
fact (``who`` is the speaker, first person resolved to them; ``x`` a slug, :func:`slug`):

============================================  =============================  ===========
the clause                                    the fact's text                subject
============================================  =============================  ===========
my favourite C is/are X; X is my favourite C  who's favourite C is X         who/favourite/c
I love/like/enjoy/adore/prefer X              who loves/likes/... X          who/preference/x
I hate/dislike/detest/despise/loathe X,
I don't like/love/enjoy X, I can't stand X    who hates/does not like/... X  who/preference/x
I prefer X to/over/than Y                     who prefers X to Y             who/preference/x-vs-y
I live/reside in P, I'm living/based in P,
I (have) (just) moved/relocated to P          who lives in P                 who/city
I'm from P, I come from P                     who is from P                  who/origin
I work as a J, my job is a J,
I got a job as a J                            who works as a J               who/job
I work at/for O, I got a job at O, I joined O who works at O                 who/employer
my name is N, call me N                       who's name is N                who/name
I/we decided (not) to A                       who decided (not) to A         who/decision/a
I'm/we're going to A, I/we will A             who plans to A                 who/decision/a
N lives in / moved to / works as / works at /
is from …, and the same of "my sister" …      (as above, of N)               n/city …
============================================  =============================  ===========

``P``, ``O`` and ``N`` must be proper names (each word capitalised, with ``de``, ``of``,
``the`` … between): "I live in fear" and "I work at home" give nothing. ``X`` and ``A``
are at most :data:`MAX_OBJECT_WORDS` words, and neither may lean on a pronoun whose
referent the rules cannot know (``it``, ``that``, ``you``, ``her``, ``them`` …): "I love
it" gives nothing. ``my`` in them becomes the speaker's. A preference is about its
object, so "I love sushi" and later "I can't stand sushi" are two facts of one subject
— with latest-by-subject supersession the second replaces the first, which stays as
history — while "I love sushi" and "I love jazz" are two subjects. ``A``'s subject is
its first two content words, so "I decided to learn Spanish" and "I decided not to
learn Spanish" are one subject too.

**What it gives** for each fact: ``text``, ``subject``, ``entities`` (the person, and the
place, organisation or name when there is one), ``event_time`` (the turn's time, so a
later statement supersedes an earlier one), ``metadata`` (``{"extractor": "rules",
"rule": ...}``) and ``sources`` (the turn it came from). The same fact said again, with
nothing else of its subject said in between, is one fact with both turns as sources
(at most :data:`MAX_SOURCES`).

**Bounds.** At most :data:`MAX_CHARS` characters and :data:`MAX_SENTENCES` sentences of
a turn are read, at most ``max_facts_per_turn`` facts come from one turn and
``max_facts`` from one call; the work is linear in what is read. Any text gives facts
or nothing: never an error, and never a fact the store refuses (a name past
:data:`MAX_ENTITY_CHARS` gives no fact).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple

from holomem.errors import InvalidError
from holomem.extractors.base import Fact, Turn, encodable, slug

#: Characters of a turn read; the rest is not looked at.
MAX_CHARS = 2_000
#: Sentences of a turn read.
MAX_SENTENCES = 64
#: Facts one turn gives, and one call, by default.
MAX_FACTS_PER_TURN = 4
MAX_FACTS = 1_000
#: Words of an object (what is liked, what is decided) and of a proper name.
MAX_OBJECT_WORDS = 6
MAX_NAME_WORDS = 4
#: Source turns one fact names (a fact repeated more often keeps the first ones).
MAX_SOURCES = 8
#: holomem's limits on a fact's entity and subject (docs/contract.md §5d; a test pins
#: them to the engine's): a fact past them is not given, so that what the rules find
#: never turns a conversation the store takes into one it refuses.
MAX_ENTITY_CHARS = 256
MAX_SUBJECT_CHARS = 512
#: The speakers whose turns are not read.
SKIPPED_SPEAKERS = ("system", "developer", "tool", "function", "assistant")

#: A sentence that holds one of these is not read (doubt, other worlds, hearsay).
_HYPOTHETICAL = frozenset("""
    if unless suppose supposing imagine imagining pretend pretending wish wished whether
    would could might maybe perhaps probably possibly hypothetically think guess wonder
    dream dreaming kidding joking should shouldn't wouldn't couldn't i'd we'd you'd he'd
    she'd they'd lest someday heard rumour rumor apparently supposedly
""".split())
#: A sentence that starts with one of these is a question, with or without its mark.
_QUESTION_START = frozenset("""
    do does did would could should can will are is am was were have has had what who whom
    whose where when why how which shall may might must don't doesn't didn't isn't aren't
    won't can't
""".split())
#: Words an object may not hold: their referent is not in the words.
_OPAQUE = frozenset("""
    you your yours yourself yourselves u ur he him his she her hers they them their theirs
    it its this that these those there here or what which whatever everything nothing
    anything something someone somebody anyone anybody everyone everybody
""".split())
#: Words an object may not start with.
_BAD_START = frozenset("""
    how when where why who whom all most some any each every both none one being so very
    too more less lot lots a-lot such own not no never
""".split()) | _OPAQUE
#: Words that end an object (what follows is another clause or a circumstance).
_OBJECT_STOP = frozenset("""
    but because cause since so although though while whereas until unless when whenever
    after before than
""".split())
#: Trailing words dropped from an object ("sushi a lot" is sushi).
_FILLERS = (("a", "lot"), ("so", "much"), ("very", "much"), ("too",), ("as", "well"),
            ("anyway",), ("lately",), ("now",), ("these", "days"), ("though",),
            ("right", "now"), ("at", "the", "moment"), ("nowadays",), ("honestly",),
            ("really",), ("anymore",), ("again",))
#: The first word of an action that is not a decision ("going to bed", "I'll be fine").
_NOT_ACTIONS = frozenset("""
    a an the my our your his her their this that be have has see try let need never not
    always maybe probably school work bed church class college home sleep bet do miss
    keep tell talk think
""".split())
#: Words of an action left out of its subject.
_FILLER_WORDS = frozenset("a an the to my our their some more".split())
#: Capitalised words that start a clause but name nobody.
_NOT_NAMES = frozenset("""
    i he she they it we you this that these those there here who what everyone everybody
    someone somebody nobody noone anyone anybody one each many most some all my your his
    her our their the a an and but so or then now today yesterday tomorrow tonight
    recently finally actually also well oh yes no yeah ok okay anyway btw last next
    monday tuesday wednesday thursday friday saturday sunday january february march april
    may june july august september october november december
""".split())
#: Lower-case words allowed between the capitalised words of a proper name.
_CONNECTORS = frozenset("de da do del della di du la le los las el von van der den of "
                        "upon on the y et am an im sur and".split())
#: Relatives and friends a third-person statement may start with ("my sister lives …").
_RELATIONS = frozenset("""
    mother father mom mum dad sister brother wife husband partner son daughter friend
    boyfriend girlfriend fiance fiancee boss cousin aunt uncle grandmother grandfather
    grandma grandpa roommate flatmate neighbour neighbor colleague
""".split())
#: Words that end a job ("a nurse at St Mary's" is a nurse: the employer is its own fact).
_JOB_STOP = frozenset("at for in with on from near".split())
#: Categories too vague for "my favourite C".
_VAGUE = frozenset("thing things part one ones bit kind way time moment memory".split())
_ADJECTIVES = r"(?:(?:all-time|absolute|very|new|current|best|older|younger|little|big)\s+)?"
#: Adverbs allowed between the pronoun and the verb.
_ADV = (r"(?:(?:really|absolutely|totally|truly|just|also|still|actually|honestly|"
        r"genuinely|definitely|especially|seriously|do|now|finally|recently|officially|"
        r"already|currently)\s+){0,2}")
_I = r"(?<![\w'])i"
_PRONOUN = r"(?<![\w'])(?P<p>i|we)"
_HAVE = r"(?:'ve|\s+have)?"
_AM = r"(?:'m|\s+am)"
_FLAGS = re.IGNORECASE

_SENTENCES = re.compile(r"(?<=[.!?;])\s+|\n+")
_CLAUSES = re.compile(
    r"\s*[,:()\[\]\u2013\u2014]\s*|\s+-+\s+"
    r"|\s+(?=(?:but|so|because|cause|although|though|while|whereas|when|whenever|"
    r"since|until|unless|then)\s)"
    r"|\s+(?=and\s+(?:i|we|you|he|she|they|it|my|then|now|also)\b)", _FLAGS)
_WORDS = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
_QUOTES = frozenset("\"\u201c\u201d\u201e\u00ab\u00bb")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_FAVOURITE = re.compile(
    r"(?<![\w'])(?P<owner>my|[^\W\d_][\w-]*'s)\s+" + _ADJECTIVES
    + r"favou?rite\s+(?P<cat>[^\W\d_]+(?:[\s-][^\W\d_]+){0,2}?)\s+(?:is|are)\s+"
    r"(?P<obj>.+)", _FLAGS)
_FAVOURITE_AFTER = re.compile(
    r"^(?P<obj>.+?)\s+(?:is|are)\s+(?:(?:definitely|still|always|really)\s+)?my\s+"
    + _ADJECTIVES + r"favou?rite\s+(?P<cat>[^\W\d_]+(?:[\s-][^\W\d_]+){0,2})$", _FLAGS)
_LIKE = re.compile(_I + r"\s+" + _ADV + r"(?P<verb>love|like|enjoy|adore|prefer)\s+"
                   r"(?P<obj>.+)", _FLAGS)
_DISLIKE = re.compile(
    _I + r"\s+" + _ADV + r"(?P<verb>hate|dislike|detest|despise|loathe|"
    r"(?:don't|do\s+not)\s+(?:really\s+)?(?:like|love|enjoy)|"
    r"(?:can't|cannot|can\s+not)\s+stand)\s+(?P<obj>.+)", _FLAGS)
_PREFER_PAIR = re.compile(r"^(?P<a>.+?)\s+(?:over|to|rather\s+than|more\s+than|than)\s+"
                          r"(?P<b>.+)$", _FLAGS)
_LIVE = re.compile(
    _I + r"(?:\s+" + _ADV + r"(?:live|reside)\s+in|" + _AM + r"\s+" + _ADV
    + r"(?:living|based)\s+in|" + _HAVE + r"\s+" + _ADV
    + r"(?:moved|relocated)\s+(?:back\s+)?to)\s+(?P<rest>.+)", _FLAGS)
_FROM = re.compile(_I + r"(?:" + _AM + r"\s+(?:originally\s+)?from|\s+(?:originally\s+)?"
                   r"come\s+from)\s+(?P<rest>.+)", _FLAGS)
_JOB = re.compile(
    r"(?:" + _I + r"(?:\s+" + _ADV + r"work|" + _AM + r"\s+" + _ADV + r"working)\s+as|"
    r"(?<![\w'])my\s+(?:new\s+)?job\s+is(?:\s+being)?|"
    + _I + _HAVE + r"\s+" + _ADV + r"(?:got|started|landed|took)\s+(?:a\s+)?(?:new\s+)?"
    r"job\s+as)\s+(?P<obj>an?\s+.+)", _FLAGS)
_EMPLOYER = re.compile(
    _I + r"(?:\s+" + _ADV + r"work\s+(?:at|for)|" + _AM + r"\s+" + _ADV
    + r"working\s+(?:at|for)|" + _HAVE + r"\s+" + _ADV
    + r"(?:(?:got|started|landed|took)\s+(?:a\s+)?(?:new\s+)?job\s+(?:at|with)|joined))"
    r"\s+(?P<rest>.+)", _FLAGS)
_NAME = re.compile(r"(?:(?<![\w'])my\s+name\s+is|(?<![\w'])call\s+me)\s+(?P<rest>.+)",
                   _FLAGS)
_DECIDED = re.compile(_PRONOUN + _HAVE + r"\s+" + _ADV + r"decided\s+(?P<neg>not\s+)?to\s+"
                      r"(?P<act>.+)", _FLAGS)
_PLAN = re.compile(_PRONOUN + r"(?:(?:'m|'re|\s+am|\s+are)\s+" + _ADV + r"going\s+to|"
                   r"(?:'ll|\s+will))\s+" + _ADV + r"(?P<act>.+)", _FLAGS)
_THIRD = re.compile(
    r"(?P<who>(?<![\w'])my\s+" + _ADJECTIVES + r"[^\W\d_]+|"
    r"(?<![\w'-])[^\W\d_][\w'-]*(?:\s+[^\W\d_][\w'-]*){0,2})\s+"
    r"(?P<verb>lives\s+in|(?:has\s+|just\s+)?moved\s+to|relocated\s+to|works\s+as|"
    r"works\s+(?:at|for)|is\s+(?:originally\s+)?from|comes\s+from)\s+(?P<rest>.+)", _FLAGS)

_THIRD_PERSON = {"love": "loves", "like": "likes", "enjoy": "enjoys", "adore": "adores",
                 "prefer": "prefers", "hate": "hates", "dislike": "dislikes",
                 "detest": "detests", "despise": "despises", "loathe": "loathes"}


class Found(NamedTuple):
    """One fact a clause states: its text, subject, entities and rule."""

    text: str
    subject: str
    entities: tuple[str, ...]
    rule: str


class RuleExtractor:
    """Facts from a conversation by rules (the module doc lists them): an extractor for
    ``Memory.remember_conversation(..., extractor=RuleExtractor())``, also named
    ``"rules"`` there and through every door.

    ``skip_speakers``: the speakers whose turns are not read (compared case-folded);
    ``max_facts`` (1 to 10,000): the facts one call gives at most; ``max_facts_per_turn``
    (1 to 64). Errors: ``invalid_request`` for a bad argument, here and never later.
    """

    name = "rules"

    def __init__(self, *, skip_speakers: Iterable[str] = SKIPPED_SPEAKERS,
                 max_facts: int = MAX_FACTS,
                 max_facts_per_turn: int = MAX_FACTS_PER_TURN) -> None:
        if isinstance(skip_speakers, str) or not all(isinstance(s, str)
                                                     for s in skip_speakers):
            raise InvalidError("skip_speakers must be a list of speaker names")
        for label, value, top in (("max_facts", max_facts, 10_000),
                                  ("max_facts_per_turn", max_facts_per_turn, 64)):
            if type(value) is not int or not 1 <= value <= top:
                raise InvalidError(f"{label} must be an integer from 1 to {top}")
        self.skip_speakers = frozenset(s.casefold() for s in skip_speakers)
        self.max_facts = max_facts
        self.max_facts_per_turn = max_facts_per_turn

    def __repr__(self) -> str:
        return (f"RuleExtractor(max_facts={self.max_facts}, "
                f"max_facts_per_turn={self.max_facts_per_turn})")

    def __call__(self, turns: Sequence[Turn]) -> list[Fact]:
        """The facts the turns state, in the order they were said (see the module doc)."""
        out: list[Fact] = []
        latest: dict[str, Fact] = {}  # subject -> its last fact of this call
        seen: set[tuple[str, str, int | None]] = set()
        for turn in turns:
            if len(out) >= self.max_facts:
                break
            speaker, text = getattr(turn, "speaker", None), getattr(turn, "text", None)
            if (not isinstance(speaker, str) or not isinstance(text, str)
                    or speaker.casefold() in self.skip_speakers):
                continue
            time = getattr(turn, "time", None)
            time = time if type(time) is int else None
            for found in self.read(speaker, text):
                last = latest.get(found.subject)
                if last is not None and last["text"] == found.text:
                    if turn.id not in last["sources"] and len(last["sources"]) < MAX_SOURCES:
                        last["sources"].append(turn.id)
                    continue  # said again: one fact, one more source
                key = (found.subject, found.text, time)
                if key in seen or len(out) >= self.max_facts:
                    continue  # (the same payload twice in one call: one fact)
                seen.add(key)
                fact: Fact = {"text": found.text, "subject": found.subject,
                              "entities": list(found.entities), "sources": [turn.id],
                              "metadata": {"extractor": self.name, "rule": found.rule}}
                if time is not None:
                    fact["event_time"] = time
                latest[found.subject] = fact
                out.append(fact)
        return out

    def read(self, speaker: str, text: str) -> list[Found]:
        """The facts one turn of ``speaker`` states (at most ``max_facts_per_turn``)."""
        who = unicodedata.normalize("NFKC", speaker).strip()
        owner = slug(who)
        if not owner or not encodable(who):
            return []
        words = unicodedata.normalize("NFKC", text[:MAX_CHARS]).translate(_APOSTROPHES)
        out: list[Found] = []
        for sentence in _SENTENCES.split(words, maxsplit=MAX_SENTENCES)[:MAX_SENTENCES]:
            # Every run of whitespace is read as one space: no rule tells one space from
            # several, and a pattern that begins at each position of a long run (the
            # clause cuts do) would cost the run's length squared.
            sentence = " ".join(sentence.split())
            if not _readable(sentence):
                continue
            for clause in _CLAUSES.split(sentence):
                found = _clause(clause.strip().rstrip(".!;"), who, owner)
                if found is not None and found not in out and _takeable(found):
                    out.append(found)
                    if len(out) >= self.max_facts_per_turn:
                        return out
        return out


def _takeable(found: Found) -> bool:
    """Whether a store takes the fact: UTF-8 text, and its subject and entities within
    holomem's limits (a "name" of 300 letters is none)."""
    return (encodable(found.text) and len(found.subject) <= MAX_SUBJECT_CHARS
            and all(0 < len(e) <= MAX_ENTITY_CHARS for e in found.entities))


def _readable(sentence: str) -> bool:
    """Whether a sentence may state a fact (not a question, hypothesis or quote)."""
    if "?" in sentence or any(c in _QUOTES for c in sentence):
        return False
    tokens = _WORDS.findall(sentence.casefold())
    if not tokens or tokens[0] in _QUESTION_START:
        return False
    return not any(t in _HYPOTHETICAL for t in tokens)


def _clause(clause: str, who: str, owner: str) -> Found | None:
    """The fact one clause states, by the first rule that matches, or None."""
    if not clause:
        return None
    for rule in (_favourite, _preference, _residence, _origin, _job, _employer, _name,
                 _decision, _third):
        found = rule(clause, who, owner)
        if found is not None:
            return found
    return None


# -- the rules -------------------------------------------------------------------------
def _favourite(clause: str, who: str, owner: str) -> Found | None:
    m = _FAVOURITE.search(clause)
    if m is not None:
        obj, cat, holder = m["obj"], m["cat"], m["owner"]
    else:
        m = _FAVOURITE_AFTER.search(clause)
        if m is None:
            return None
        obj, cat, holder = m["obj"], m["cat"], "my"
    cat = cat.casefold()
    if cat in _VAGUE or cat.split()[0] in _VAGUE:
        return None
    thing = _object(obj, who, "i")
    if thing is None:
        return None
    if holder.casefold() == "my":
        name, key = who, owner
    else:
        name = holder[:-2]
        key = slug(name)
        if not _proper(name.split()) or not key:
            return None
    return Found(f"{name}'s favourite {cat} is {thing.shown}", f"{key}/favourite/{slug(cat)}",
                 (name,), "favourite")


def _preference(clause: str, who: str, owner: str) -> Found | None:
    m = _DISLIKE.search(clause)
    positive = m is None
    if m is None:
        m = _LIKE.search(clause)
        if m is None:
            return None
    verb = " ".join(m["verb"].casefold().split())
    thing = _object(m["obj"], who, "i")
    if thing is None:
        return None
    if positive or verb in _THIRD_PERSON:
        said = _THIRD_PERSON[verb]
    elif "stand" in verb:
        said = "cannot stand"
    else:
        said = "does not " + verb.split()[-1]
    key = _topic(thing.said)
    if verb == "prefer":
        pair = _PREFER_PAIR.match(thing.said)
        if pair is not None:
            a, b = _topic(pair["a"]), _topic(pair["b"])
            if not a or not b or a == b:
                return None
            key = "-vs-".join(sorted((a, b)))
    if not key:
        return None
    return Found(f"{who} {said} {thing.shown}", f"{owner}/preference/{key}", (who,),
                 "preference")


def _job(clause: str, who: str, owner: str) -> Found | None:
    m = _JOB.search(clause)
    job = _object(m["obj"], who, "i", limit=5, stop=_JOB_STOP) if m is not None else None
    if job is None:
        return None
    return Found(f"{who} works as {job.shown}", f"{owner}/job", (who,), "job")


def _named(pattern: re.Pattern[str], said: str, kind: str, *, the: bool = True,
           digits: bool = False) -> Callable[[str, str, str], Found | None]:
    """A rule for "<who> <pattern> <a proper name>": the fact ``said`` (a template of
    ``who`` and ``name``), subject ``<owner>/<kind>``, both names as entities."""

    def rule(clause: str, who: str, owner: str) -> Found | None:
        m = pattern.search(clause)
        name = _proper_name(m["rest"], the=the, digits=digits) if m is not None else None
        if name is None:
            return None
        return Found(said.format(who=who, name=name), f"{owner}/{kind}", (who, name), kind)

    return rule


_residence = _named(_LIVE, "{who} lives in {name}", "city")
_origin = _named(_FROM, "{who} is from {name}", "origin")
_employer = _named(_EMPLOYER, "{who} works at {name}", "employer", digits=True)
_name = _named(_NAME, "{who}'s name is {name}", "name", the=False)


def _decision(clause: str, who: str, owner: str) -> Found | None:
    m = _DECIDED.search(clause)
    decided = m is not None
    if m is None:
        m = _PLAN.search(clause)
        if m is None:
            return None
    we = m["p"].casefold() == "we"
    thing = _object(m["act"], who, "we" if we else "i", limit=8)
    if thing is None:
        return None
    act = thing.shown
    first = act.split()[0]
    if not first[0].islower() or first.casefold() in _NOT_ACTIONS:
        return None
    content = [w for w in _WORDS.findall(thing.said.casefold())
               if w not in _FILLER_WORDS][:2]
    key = slug(" ".join(content))
    if not key:
        return None
    by = f"{who} (with others)" if we else who
    if decided:
        said = f"{by} decided {'not ' if m['neg'] else ''}to {act}"
    else:
        said = f"{by} plans to {act}"
    return Found(said, f"{owner}/decision/{key}", (who,), "decision")


def _third(clause: str, who: str, owner: str) -> Found | None:
    """"N lives in P", "my sister works at O" …: the same facts, of someone else."""
    m = _THIRD.search(clause)
    if m is None:
        return None
    words = m["who"].split()
    if words[0].casefold() == "my":
        relation = " ".join(w.casefold() for w in words[1:])
        if words[-1].casefold() not in _RELATIONS:
            return None
        name, key = f"{who}'s {relation}", f"{owner}/{slug(relation)}"
    else:
        # The longest run of capitalised words before the verb, without the leading
        # words that open a clause but name nobody ("Yesterday Bob moved to Rome").
        run: list[str] = []
        for w in reversed(words):
            if not w[0].isupper():
                break
            run.insert(0, w)
        while run and run[0].casefold() in _NOT_NAMES:
            run.pop(0)
        if not run or any(w.casefold() in _NOT_NAMES for w in run):
            return None
        name = " ".join(run)
        key = slug(name)
    if not key:
        return None
    verb = " ".join(m["verb"].casefold().split())
    rest = m["rest"]
    if verb.startswith("works as"):
        job = _object(rest, who, "i", limit=5, stop=_JOB_STOP)
        if job is None or job.said.split()[0].casefold() not in ("a", "an"):
            return None
        return Found(f"{name} works as {job.shown}", f"{key}/job", (name,), "job")
    if verb.startswith("works"):
        org = _proper_name(rest, digits=True)
        if org is None:
            return None
        return Found(f"{name} works at {org}", f"{key}/employer", (name, org), "employer")
    place = _proper_name(rest)
    if place is None:
        return None
    if "from" in verb:
        return Found(f"{name} is from {place}", f"{key}/origin", (name, place), "origin")
    return Found(f"{name} lives in {place}", f"{key}/city", (name, place), "city")


# -- the parts of a clause -----------------------------------------------------------
class Thing(NamedTuple):
    """What a verb is about: as shown in the fact (first person made the speaker's)
    and as said (what its subject is made of)."""

    shown: str
    said: str


def _object(text: str, who: str, person: str, limit: int = MAX_OBJECT_WORDS,
            stop: frozenset[str] = frozenset()) -> Thing | None:
    """What a verb is about, cut at the end of its clause (or at a word of ``stop``),
    without trailing fillers, its first person made the speaker's; None when it is
    empty, too long, or leans on a referent the words do not give."""
    words: list[str] = []
    for raw in text.split():
        bare = raw.strip(".!;,").casefold()
        if bare in _OBJECT_STOP or bare in stop:
            break
        words.append(raw)
        if raw != raw.rstrip(".!;,"):
            break  # a word with the clause's last punctuation ends it
    if words:
        words[-1] = words[-1].rstrip(".!;,")
    changed = True
    while changed and words:
        changed = False
        low = [w.casefold() for w in words]
        for filler in _FILLERS:
            if len(low) > len(filler) and tuple(low[-len(filler):]) == filler:
                del words[-len(filler):]
                changed = True
                break
    if not words or len(words) > limit:
        return None
    low = [w.casefold() for w in words]
    if low[0] in _BAD_START or any(w.strip("'") in _OPAQUE for w in low):
        return None
    if not all(_WORDS.fullmatch(w) or w.replace("-", "").isalnum() for w in low):
        return None  # symbols, numbers with units, emoticons: not a thing named here
    out = []
    for w, lw in zip(words, low, strict=True):
        if lw in ("my", "mine") or (person == "we" and lw == "our"):
            out.append(f"{who}'s" if person == "i" or lw != "our" else "their")
        elif lw in ("me", "myself"):
            out.append(who)
        elif person == "we" and lw in ("us", "ourselves"):
            out.append("them")
        elif lw in ("i", "we", "i'm", "we're"):
            return None  # another clause the split did not see
        else:
            out.append(w)
    return Thing(" ".join(out), " ".join(words))


def _topic(thing: str) -> str:
    """The slug of what a preference is about (without articles or "to")."""
    words = [w for w in _WORDS.findall(thing.casefold()) if w not in _FILLER_WORDS]
    return slug(" ".join(words))


def _proper(words: Sequence[str]) -> bool:
    return bool(words) and all(w[:1].isupper() or w in _CONNECTORS for w in words) \
        and words[0][:1].isupper() and words[-1][:1].isupper()


def _proper_name(text: str, *, the: bool = True, digits: bool = False) -> str | None:
    """The proper name ``text`` starts with ("Berlin", "New York", "Rio de Janeiro",
    "the Netherlands"): capitalised words, lower-case connectors between them; None
    when it does not start with one."""
    tokens = text.split()
    out: list[str] = []
    if the and len(tokens) > 1 and tokens[0].casefold() == "the":
        out.append(tokens[0])
        tokens = tokens[1:]
    taken: list[str] = []
    for i, raw in enumerate(tokens):
        word = raw.rstrip(".!;,")
        first = word[:1]
        capital = first.isupper() or (digits and first.isdigit())
        if capital and all(c.isalnum() or c in "'&.-" for c in word):
            if word.casefold() in _NOT_NAMES and word.casefold() != "the":
                break
            taken.append(word)
        elif (word in _CONNECTORS and taken and i + 1 < len(tokens)
              and tokens[i + 1][:1].isupper()):
            taken.append(word)
        else:
            break
        if word != raw or len(taken) > MAX_NAME_WORDS:
            break
    while taken and not taken[-1][:1].isupper() and not taken[-1][:1].isdigit():
        taken.pop()
    if not taken or len(taken) > MAX_NAME_WORDS:
        return None
    return " ".join(out + taken)
