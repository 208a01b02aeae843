"""The calls for an agent's context window: a block under a token budget
(compile_context, explain_context) and working contexts (save, load, list)
(docs/contract.md §4 "Context under a budget", "Working contexts").

Owns: the concept's calls, each a function of the
:class:`~holomem.api.memory.session.Session` that ``Memory`` offers as a method.
:mod:`.budget` compiles the block from recall's facts and the caller's fragments,
:mod:`.working` turns a state into the facts of one save and back, :mod:`.render`
fences facts as untrusted data and :mod:`.tokens` counts.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from holomem.api.engine import View, validate
from holomem.api.memory.recall import calls as recall_calls
from holomem.api.memory.remember import calls as remember_calls
from holomem.api.memory.session import Session
from holomem.api.memory.types import Recalled
from holomem.api.memory.window import budget, tokens, working
from holomem.api.memory.window.budget import CompiledContext, ContextDecision, ContextFragment
from holomem.api.memory.window.working import WorkingContext, WorkingContextList
from holomem.errors import InvalidError, NotFoundError


def _candidates(s: Session, /, query: str, budget_tokens: int, namespace: Sequence[str] | None,
                fragments: Iterable[ContextFragment | Mapping[str, Any]] | None,
                k: int, recall: Mapping[str, Any] | None
                ) -> tuple[builtins.list[Recalled], builtins.list[ContextFragment], int]:
    b = budget.budget(budget_tokens)
    given = budget.fragments(fragments)
    validate.positive_int(k, "k", budget.MAX_K)
    if recall is not None and not isinstance(recall, Mapping):
        raise InvalidError("recall must be a mapping of recall options (as recall takes)")
    opts = dict(recall or {})
    opts.update(k=k, namespace=list(validate.namespace(namespace)) or None)
    found = [r for r in recall_calls.recall(s, query, opts)
             if not (r.fact.subject or "").startswith(working.SUBJECT_PREFIX)]
    return found, given, b


def compile_context(s: Session, /, query: str, budget_tokens: int,
                    namespace: Sequence[str] | None = None,
                    fragments: Iterable[ContextFragment | Mapping[str, Any]] | None = None,
                    *, k: int = budget.DEFAULT_K, counter: tokens.Counter | None = None,
                    recall: Mapping[str, Any] | None = None) -> CompiledContext:
    """A prompt block of the facts most relevant to ``query`` and the caller's
    ``fragments`` that fit in ``budget_tokens``, fenced as untrusted data, with a
    decision for every candidate (:mod:`holomem.api.memory.window.budget` states the rules).

    Args:
        k: how many facts recall brings as candidates (1 to ``context.MAX_K``).
        counter: ``text -> tokens`` (default: tiktoken's cl100k_base when it
            loads, else the word-piece estimate of :mod:`holomem.api.memory.window.tokens`).
        recall: further recall options (``as_of``, ``history``, ``filter``, ...).

    The block never exceeds the budget and the same inputs give the same bytes.
    Working-context facts are never candidates.
    Limits: ``budget_tokens`` 1 to ``context.MAX_BUDGET``, at most
    ``context.MAX_FRAGMENTS`` fragments, each text as a fact's.
    Errors: ``invalid_request`` (also a budget below the empty block's tokens),
    ``limit``.
    """
    count = tokens.checked(counter)
    found, given, b = _candidates(s, query, budget_tokens, namespace, fragments, k,
                                       recall)
    return budget.compile(found, given, b, count)


def explain_context(s: Session, /, query: str, budget_tokens: int, id: str,
                    namespace: Sequence[str] | None = None,
                    fragments: Iterable[ContextFragment | Mapping[str, Any]] | None = None,
                    *, k: int = budget.DEFAULT_K, counter: tokens.Counter | None = None,
                    recall: Mapping[str, Any] | None = None) -> ContextDecision:
    """What :meth:`compile_context` with the same arguments decides for ``id`` (a
    fragment's or a fact's), and why.

    Errors: as :meth:`compile_context`; ``not_found`` when ``id`` is neither a
    fragment nor a stored fact (in ``namespace``).
    """
    fid = validate.doc_id(id)
    compiled = compile_context(s, query, budget_tokens, namespace, fragments, k=k,
                                    counter=counter, recall=recall)
    for d in compiled.decisions:
        if d.id == fid:
            return d
    ns = validate.namespace(namespace)

    def stored(view: View) -> bool:
        slot = view.facts.slot(fid)
        return slot >= 0 and view.facts.namespace(slot)[:len(ns)] == ns

    if s.store.read(stored):
        return budget.not_a_candidate(fid, k)
    raise NotFoundError(f"{fid!r} is neither a fragment nor a stored fact")


def save_working_context(s: Session, /, namespace: Sequence[str] | None, session: str,
                         state: Any) -> WorkingContext:
    """Save ``state`` (JSON, not empty, at most ``working.MAX_STATE_BYTES``) as the
    next version of ``session`` in ``namespace``; returns what a load gives back.

    Errors: ``invalid_request``, ``limit``, ``conflict`` (another save of the same
    session was written at the same moment: load and save again).
    """
    ns = validate.namespace(namespace)
    name = working.session(session)
    raw = working.canonical(state)
    inputs = s.store.read(lambda view: working.plan(view, ns, name, raw))
    remember_calls.remember_many(s, inputs)
    return s.store.read(lambda view: working.assemble(view, ns, name, None))


def load_working_context(s: Session, /, namespace: Sequence[str] | None, session: str,
                         save: int | None = None) -> WorkingContext:
    """The latest save of ``session`` in ``namespace`` (or save number ``save``).

    Errors: ``invalid_request``, ``not_found`` (listing the namespace's other
    sessions, so a misspelt name is noticed).
    """
    ns = validate.namespace(namespace)
    name = working.session(session)
    if save is not None:
        validate.positive_int(save, "save", 2**62)
    return s.store.read(lambda view: working.assemble(view, ns, name, save))


def list_working_contexts(s: Session, /, namespace: Sequence[str] | None = None
                          ) -> WorkingContextList:
    """The sessions saved in exactly ``namespace``, by name, with their latest save.

    Errors: ``invalid_request``."""
    ns = validate.namespace(namespace)
    return s.store.read(lambda view: WorkingContextList(
        namespace=list(ns), sessions=working.sessions(view, ns)))
