"""Context under a token budget (docs/contract.md §4 "Context under a budget").

Owns: the caller's fragments (:class:`ContextFragment`) and their checks, the order
in which facts and fragments compete for the budget, the compiled prompt block and
what became of every candidate (:class:`CompiledContext`, :class:`ContextDecision`),
all decided by :func:`compile`. Imports the prompt block's fence and lines
(:mod:`.render`), the token counters (:mod:`.tokens`), the types and validate; the
facts come from recall, which ``Memory.compile_context`` runs.

The rules, in order:

1. candidates are the pinned fragments (in the caller's order), then every recalled
   fact and unpinned fragment by relevance — a fact's recall score divided by the
   best recalled score, a fragment's own ``score`` (in [0, 1], default 1) — ties
   going to fragments, then to the earlier one;
2. each candidate in that order is *kept* if its whole line fits in what the budget
   has left; else *shortened* (its text cut at a word, marked ``…``) if at least
   :data:`MIN_SHORTENED` tokens are left and its head and a word fit; else
   *dropped*;
3. the block is the fence of :func:`holomem.api.memory.window.render.fence` around the kept lines;
   it is counted whole, and while it exceeds the budget (a counter that is not
   additive over lines) the last line placed is dropped.

So the block never exceeds the budget, and the same inputs give the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from holomem.api.engine import validate
from holomem.api.memory.shapes import Request, Response
from holomem.api.memory.types import Recalled
from holomem.api.memory.window import tokens
from holomem.api.memory.window.render import fact_head, fence, format_time, neutralise
from holomem.errors import InvalidError, LimitError

#: The most fragments one call takes, their largest total text (UTF-8), the largest budget.
MAX_FRAGMENTS = 1000
MAX_FRAGMENT_BYTES = 1 << 20
MAX_BUDGET = 1_000_000
#: Facts recalled as candidates by default, and at most.
DEFAULT_K = 20
MAX_K = 1000
#: A line is shortened only when at least this many tokens are left for it.
MIN_SHORTENED = 16
_ELLIPSIS = " …"
_EMPTY = "(no context)"
_WHAT = "compiled from memory and the caller"


class ContextFragment(Request, frozen=True):
    """A piece of the caller's own text competing for the budget (JSON: camelCase).

    ``score``: its relevance in [0, 1] against facts' (the best fact is 1);
    ``pinned``: placed before every fact, in the caller's order; ``time``: when it
    is from (shown in its line), milliseconds or ISO 8601.
    """

    id: str
    text: str
    score: float = 1.0
    pinned: bool = False
    time: int | None = None


class ContextDecision(Response, frozen=True):
    """What became of one candidate: ``decision`` is kept, shortened or dropped;
    ``tokens`` what its line takes in the block (0 when dropped), ``full_tokens``
    what its whole line would; ``rank`` its place in the candidates' order."""

    id: str
    source: Literal["fact", "fragment"]
    decision: Literal["kept", "shortened", "dropped"]
    reason: str
    rank: int | None
    relevance: float
    tokens: int
    full_tokens: int
    status: str | None = None


class CompiledContext(Response, frozen=True):
    """The prompt block, its token count under ``counter``, and every decision."""

    text: str
    tokens: int
    budget_tokens: int
    counter: str
    decisions: list[ContextDecision]


def fragments(value: Iterable[ContextFragment | Mapping[str, Any]] | None
              ) -> list[ContextFragment]:
    """Checked fragments: ids like a fact's, distinct; texts like a fact's; score in
    [0, 1]. Errors: ``invalid_request``, ``limit``."""
    if value is None:
        return []
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise InvalidError("fragments must be a list of {id, text, ...} objects")
    out: list[ContextFragment] = []
    seen: set[str] = set()
    total = 0
    for i, item in enumerate(value):
        if i >= MAX_FRAGMENTS:
            raise LimitError(f"more than {MAX_FRAGMENTS} fragments")
        f = validate.to_struct(ContextFragment, item, {}, f"fragment {i}", ("time",))
        validate.doc_id(f.id, f"fragment {i}: id")
        validate.text(f.text, f"fragment {i}: text")
        if not f.text.strip():
            raise InvalidError(f"fragment {i}: text must not be empty or only whitespace")
        if isinstance(f.score, bool) or not 0.0 <= f.score <= 1.0:
            raise InvalidError(f"fragment {i}: score must be in [0, 1]")
        if f.id in seen:
            raise InvalidError(f"fragment {i}: id {f.id!r} is given twice")
        total += len(f.text.encode("utf-8", "surrogatepass"))
        if total > MAX_FRAGMENT_BYTES:
            raise LimitError(f"the fragments' texts exceed {MAX_FRAGMENT_BYTES} bytes together")
        seen.add(f.id)
        out.append(f)
    return out


def budget(value: object) -> int:
    return validate.positive_int(value, "budget_tokens", MAX_BUDGET)


class _Candidate(NamedTuple):
    id: str
    source: Literal["fact", "fragment"]
    head: str  # the line up to its text
    text: str  # neutralised
    relevance: float
    status: str | None


def candidates(recalled: Sequence[Recalled], given: Sequence[ContextFragment]
               ) -> list[_Candidate]:
    """Every candidate in the order of rule 1."""
    facts = {r.id for r in recalled}
    for f in given:
        if f.id in facts:
            raise InvalidError(f"fragment id {f.id!r} is also the id of a recalled fact")
    best = max((r.score for r in recalled), default=0.0)
    ranked: list[tuple[int, float, int, int, _Candidate]] = []
    for n, f in enumerate(given):
        when = f"time {format_time(f.time)}" if f.time is not None else "no time"
        c = _Candidate(f.id, "fragment", f"- [{neutralise(f.id)}] (fragment; {when}) ",
                       neutralise(f.text), f.score, None)
        ranked.append((0 if f.pinned else 1, -f.score, 0, n, c))
    for n, r in enumerate(recalled):
        rel = r.score / best if best > 0 else 0.0
        c = _Candidate(r.id, "fact", fact_head(r.fact), neutralise(r.text), rel, r.status)
        ranked.append((1, -rel, 1, n, c))
    ranked.sort(key=lambda t: t[:4])
    return [t[4] for t in ranked]


def _shortened(counter: tokens.Counter, c: _Candidate, left: int) -> str | None:
    """The longest cut of ``c``'s line at a word that fits in ``left`` tokens."""
    words = c.text.split(" ")
    lo, hi = 0, len(words) - 1  # never all of them: that did not fit
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokens.count(counter, c.head + " ".join(words[:mid]) + _ELLIPSIS) <= left:
            lo = mid
        else:
            hi = mid - 1
    if lo == 0:
        return None
    return c.head + " ".join(words[:lo]) + _ELLIPSIS


def compile(recalled: Sequence[Recalled], given: Sequence[ContextFragment], budget_tokens: int,
            counter: tokens.Counter) -> CompiledContext:
    """The block and the decisions (the rules of the module docstring).

    Errors: ``invalid_request`` when even an empty block exceeds the budget, or the
    counter answers something other than a whole number >= 0.
    """
    empty = tokens.count(counter, fence(_EMPTY, _WHAT))
    if empty > budget_tokens:
        raise InvalidError(f"budget_tokens {budget_tokens} is below the {empty} tokens the "
                           "fenced block takes with nothing in it")
    # The fence's own cost: the block's lines are joined by newlines, so a counter that
    # is additive over lines charges each line alone, and the fence around them.
    overhead = tokens.count(counter, fence("", _WHAT))
    left = budget_tokens - overhead
    placed: list[tuple[int, str, int]] = []  # (candidate index, line, its tokens)
    verdict: dict[int, tuple[str, str, int]] = {}
    full: dict[int, int] = {}
    cands = candidates(recalled, given)
    for i, c in enumerate(cands):
        line = c.head + c.text
        need = full[i] = tokens.count(counter, line)
        if need <= left:
            placed.append((i, line, need))
            verdict[i] = ("kept", "fits whole", need)
            left -= need
            continue
        cut = _shortened(counter, c, left) if left >= MIN_SHORTENED else None
        if cut is not None:
            took = tokens.count(counter, cut)
            placed.append((i, cut, took))
            verdict[i] = ("shortened", f"cut to {took} of its {need} tokens: "
                                       f"{left} were left", took)
            left -= took
        else:
            verdict[i] = ("dropped", f"needs {need} tokens, {left} were left", 0)
    text = fence("\n".join(line for _, line, _ in placed) or _EMPTY, _WHAT)
    used = tokens.count(counter, text)
    while used > budget_tokens and placed:
        i, _, _ = placed.pop()
        verdict[i] = ("dropped", "the whole block counted over the budget with it "
                                 "(the counter is not additive over lines)", 0)
        text = fence("\n".join(line for _, line, _ in placed) or _EMPTY, _WHAT)
        used = tokens.count(counter, text)
    assert used <= budget_tokens  # the empty block fits: checked first
    decisions = [ContextDecision(id=c.id, source=c.source, decision=verdict[i][0],  # type: ignore[arg-type]
                                 reason=verdict[i][1], rank=i + 1,
                                 relevance=round(c.relevance, 6), tokens=verdict[i][2],
                                 full_tokens=full[i], status=c.status)
                 for i, c in enumerate(cands)]
    return CompiledContext(text=text, tokens=used, budget_tokens=budget_tokens,
                           counter=tokens.name_of(counter), decisions=decisions)


def not_a_candidate(fid: str, k: int) -> ContextDecision:
    """The decision for a stored fact recall did not return among its k."""
    return ContextDecision(id=fid, source="fact", decision="dropped",
                           reason=f"not a candidate: recall did not return it among the "
                                  f"k={k} facts for this query",
                           rank=None, relevance=0.0, tokens=0, full_tokens=0)
