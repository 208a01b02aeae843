"""The calls of ``Memory`` for an agent's context window: a prompt block under a token
budget and saved working contexts (docs/contract.md §4 "Context under a budget",
"Working contexts").

Owns: :class:`ContextCalls` — each call checks its request and runs its own module:
:mod:`.context` compiles the block from recall's facts and the caller's fragments,
:mod:`.working` turns a state into the facts of one save and back. Imports those
modules, the reading and writing halves of ``Memory`` and validate; ``Memory``
(:mod:`.memory`) composes it.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from holomem.api import context, tokens, validate, working
from holomem.api.context import CompiledContext, ContextDecision, ContextFragment
from holomem.api.engine import View
from holomem.api.reading import Reading
from holomem.api.types import Recalled
from holomem.api.working import WorkingContext, WorkingContextList
from holomem.api.writing import Writing
from holomem.errors import NotFoundError


class ContextCalls(Reading, Writing):
    """compile_context, explain_context and the working contexts."""

    # -- context under a budget -----------------------------------------------------------
    def _candidates(self, query: str, budget_tokens: int, namespace: Sequence[str] | None,
                    fragments: Iterable[ContextFragment | Mapping[str, Any]] | None,
                    k: int, recall: Mapping[str, Any] | None
                    ) -> tuple[builtins.list[Recalled], builtins.list[ContextFragment], int]:
        b = context.budget(budget_tokens)
        given = context.fragments(fragments)
        validate.positive_int(k, "k", context.MAX_K)
        opts = dict(recall or {})
        opts.update(k=k, namespace=list(validate.namespace(namespace)) or None)
        found = [r for r in self.recall(query, opts)
                 if not (r.fact.subject or "").startswith(working.SUBJECT_PREFIX)]
        return found, given, b

    def compile_context(self, query: str, budget_tokens: int,
                        namespace: Sequence[str] | None = None,
                        fragments: Iterable[ContextFragment | Mapping[str, Any]] | None = None,
                        *, k: int = context.DEFAULT_K, counter: tokens.Counter | None = None,
                        recall: Mapping[str, Any] | None = None) -> CompiledContext:
        """A prompt block of the facts most relevant to ``query`` and the caller's
        ``fragments`` that fit in ``budget_tokens``, fenced as untrusted data, with a
        decision for every candidate (:mod:`holomem.api.context` states the rules).

        Args:
            k: how many facts recall brings as candidates (1 to ``context.MAX_K``).
            counter: ``text -> tokens`` (default: tiktoken's cl100k_base when it
                loads, else the word-piece estimate of :mod:`holomem.api.tokens`).
            recall: further recall options (``as_of``, ``history``, ``filter``, ...).

        The block never exceeds the budget and the same inputs give the same bytes.
        Working-context facts are never candidates.
        Limits: ``budget_tokens`` 1 to ``context.MAX_BUDGET``, at most
        ``context.MAX_FRAGMENTS`` fragments, each text as a fact's.
        Errors: ``invalid_request`` (also a budget below the empty block's tokens),
        ``limit``.
        """
        count = tokens.checked(counter)
        found, given, b = self._candidates(query, budget_tokens, namespace, fragments, k,
                                           recall)
        return context.compile(found, given, b, count)

    def explain_context(self, query: str, budget_tokens: int, id: str,
                        namespace: Sequence[str] | None = None,
                        fragments: Iterable[ContextFragment | Mapping[str, Any]] | None = None,
                        *, k: int = context.DEFAULT_K, counter: tokens.Counter | None = None,
                        recall: Mapping[str, Any] | None = None) -> ContextDecision:
        """What :meth:`compile_context` with the same arguments decides for ``id`` (a
        fragment's or a fact's), and why.

        Errors: as :meth:`compile_context`; ``not_found`` when ``id`` is neither a
        fragment nor a stored fact (in ``namespace``).
        """
        fid = validate.doc_id(id)
        compiled = self.compile_context(query, budget_tokens, namespace, fragments, k=k,
                                        counter=counter, recall=recall)
        for d in compiled.decisions:
            if d.id == fid:
                return d
        ns = validate.namespace(namespace)

        def stored(view: View) -> bool:
            slot = view.facts.slot(fid)
            return slot >= 0 and view.facts.namespace(slot)[:len(ns)] == ns

        if self.store.read(stored):
            return context.not_a_candidate(fid, k)
        raise NotFoundError(f"{fid!r} is neither a fragment nor a stored fact")

    # -- working contexts -----------------------------------------------------------------
    def save_working_context(self, namespace: Sequence[str] | None, session: str,
                             state: Any) -> WorkingContext:
        """Save ``state`` (JSON, not empty, at most ``working.MAX_STATE_BYTES``) as the
        next version of ``session`` in ``namespace``; returns what a load gives back.

        Errors: ``invalid_request``, ``limit``, ``conflict`` (another save of the same
        session was written at the same moment: load and save again).
        """
        ns = validate.namespace(namespace)
        name = working.session(session)
        raw = working.canonical(state)
        inputs = self.store.read(lambda view: working.plan(view, ns, name, raw))
        self.remember_many(inputs)
        return self.store.read(lambda view: working.assemble(view, ns, name, None))

    def load_working_context(self, namespace: Sequence[str] | None, session: str,
                             save: int | None = None) -> WorkingContext:
        """The latest save of ``session`` in ``namespace`` (or save number ``save``).

        Errors: ``invalid_request``, ``not_found`` (listing the namespace's other
        sessions, so a misspelt name is noticed).
        """
        ns = validate.namespace(namespace)
        name = working.session(session)
        if save is not None:
            validate.positive_int(save, "save", 2**62)
        return self.store.read(lambda view: working.assemble(view, ns, name, save))

    def list_working_contexts(self, namespace: Sequence[str] | None = None
                              ) -> WorkingContextList:
        """The sessions saved in exactly ``namespace``, by name, with their latest save.

        Errors: ``invalid_request``."""
        ns = validate.namespace(namespace)
        return self.store.read(lambda view: WorkingContextList(
            namespace=list(ns), sessions=working.sessions(view, ns)))
