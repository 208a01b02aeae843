"""The memory API, ``holomem.Memory`` (docs/contract.md §3, §4): facts over time on a Store.

Owns: :class:`Memory`, one page that holds a :class:`~holomem.api.memory.session.Session`
and offers each concept's calls as its methods (:mod:`.binding`); what a call does is
written once, in its concept's ``calls`` module:

- ``remember/`` — remember and remember_many (planning: ``remember/planner.py``);
- ``conversation/`` — remember_conversation: turns, their reply links, an extractor;
- ``recall/`` — recall and explain (ranking, explanations, neighbours, rerankers);
- ``facts/`` — one fact, its history, listing, namespaces, feedback and confidence;
- ``forget/`` — forget, apply_forgetting and consolidate;
- ``graph/`` — typed links: relate, unrelate, links and why;
- ``holographic/`` — probe, related, reason and contradict;
- ``entities/`` — entity_profile: what is known about a name;
- ``window/`` — the agent's context window: a block under a token budget, working contexts;
- ``transfer/`` — export and import; ``embedding/`` — the embedder and reembed.

The JSON contract's entry point, :meth:`Memory.call`, runs the op table
(:mod:`.contract`). None of those modules imports this one. The fact index is a
projection of the Store (:mod:`holomem.projections.facts`), so every ``Memory`` over one
``Store`` reads the same, current index.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

from holomem.api.engine import Store
from holomem.api.memory import about, contract
from holomem.api.memory.binding import Call, Derived
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.conversation import calls as conversation_calls
from holomem.api.memory.embedding import calls as embedding_calls
from holomem.api.memory.entities import calls as entities_calls
from holomem.api.memory.facts import calls as facts_calls
from holomem.api.memory.forget import calls as forget_calls
from holomem.api.memory.graph import calls as graph_calls
from holomem.api.memory.holographic import calls as holographic_calls
from holomem.api.memory.policies import Clock, Policies
from holomem.api.memory.recall import calls as recall_calls
from holomem.api.memory.remember import calls as remember_calls
from holomem.api.memory.remember.calls import MAX_FACTS
from holomem.api.memory.session import Session
from holomem.api.memory.transfer import calls as transfer_calls
from holomem.api.memory.window import calls as window_calls
from holomem.api.memory.window import render
from holomem.embedders import Embedder
from holomem.errors import InvalidError

__all__ = ["MAX_FACTS", "Memory"]


class Memory:
    """Facts that hold over time, on top of a :class:`~holomem.Store`.

    ``Memory(store, config=None, *, clock=None, policies=None, initial=None,
    persist=False, embedder=None, reembed=False)``: see
    :class:`~holomem.api.memory.session.Session` for the arguments.
    """

    def __init__(self, store: Store, config: MemoryConfig | Mapping[str, Any] | None = None, *,
                 clock: Clock | None = None,
                 policies: Mapping[str, Callable[..., Any]] | None = None,
                 initial: MemoryConfig | Mapping[str, Any] | None = None,
                 persist: bool = False, embedder: Embedder | str | None = None,
                 reembed: bool = False) -> None:
        self.session = Session(store, config, clock=clock, policies=policies, initial=initial,
                               persist=persist, embedder=embedder, reembed=reembed)
        self.session.owner = self

    def _derive(self, session: Session) -> Memory:
        """A Memory over ``session`` (what the ``with_*`` calls return)."""
        memory = object.__new__(Memory)
        memory.session = session
        session.owner = memory
        return memory

    @property
    def store(self) -> Store:
        return self.session.store

    @property
    def config(self) -> MemoryConfig:
        """The configuration in force, checked whole."""
        return self.session.config

    @property
    def clock(self) -> Clock:
        return self.session.clock

    @property
    def policies(self) -> Policies:
        return self.session.policies

    @property
    def embedder(self) -> Embedder | None:
        """The embedder (None: recall is lexical unless a call brings a vector)."""
        return self.session.embedder

    # -- remember (remember/) ----------------------------------------------------------------
    remember = Call(remember_calls.remember)
    remember_many = Call(remember_calls.remember_many)
    remember_conversation = Call(conversation_calls.remember_conversation)

    # -- recall and explain (recall/) --------------------------------------------------------
    recall = Call(recall_calls.recall)
    explain = Call(recall_calls.explain)

    # -- one fact, listing, feedback (facts/) ------------------------------------------------
    get = Call(facts_calls.get)
    history = Call(facts_calls.history)
    info = Call(facts_calls.info)
    capabilities = Call(about.capabilities)
    list = Call(facts_calls.list_facts)
    list_namespaces = Call(facts_calls.list_namespaces)
    feedback = Call(facts_calls.feedback)
    set_confidence = Call(facts_calls.set_confidence)

    # -- forgetting and maintenance (forget/) ------------------------------------------------
    forget = Call(forget_calls.forget)
    apply_forgetting = Call(forget_calls.apply_forgetting)
    consolidate = Call(forget_calls.consolidate)

    # -- typed links (graph/) ----------------------------------------------------------------
    relate = Call(graph_calls.relate)
    relate_many = Call(graph_calls.relate_many)
    unrelate = Call(graph_calls.unrelate)
    links = Call(graph_calls.links)
    why = Call(graph_calls.why)

    # -- holographic operations (holographic/) -----------------------------------------------
    probe = Call(holographic_calls.probe)
    related = Call(holographic_calls.related)
    reason = Call(holographic_calls.reason)
    contradict = Call(holographic_calls.contradict)

    # -- what is known about a name (entities/) ----------------------------------------------
    entity_profile = Call(entities_calls.entity_profile)

    # -- the context window (window/) --------------------------------------------------------
    compile_context = Call(window_calls.compile_context)
    explain_context = Call(window_calls.explain_context)
    save_working_context = Call(window_calls.save_working_context)
    load_working_context = Call(window_calls.load_working_context)
    list_working_contexts = Call(window_calls.list_working_contexts)
    render_context = staticmethod(render.render_context)

    # -- moving facts and vectors (transfer/, embedding/) ------------------------------------
    export = Call(transfer_calls.export)
    export_page = Call(transfer_calls.export_page)
    import_ = Call(transfer_calls.import_)
    reembed = Call(embedding_calls.reembed)

    # -- a copy with one policy replaced (in this process only) ------------------------------
    with_supersession = Derived(Session.with_supersession)
    with_recency = Derived(Session.with_recency)
    with_entity_extractor = Derived(Session.with_entity_extractor)
    with_forgetting = Derived(Session.with_forgetting)
    with_consolidation = Derived(Session.with_consolidation)
    with_observer = Derived(Session.with_observer)
    with_clock = Derived(Session.with_clock)

    def notify(self, op: str, ids: builtins.list[str], revision: int) -> None:
        """Tell every observer what a committed change did."""
        self.session.notify(op, ids, revision)

    # -- the JSON contract ----------------------------------------------------------------
    def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """Run ``op`` with a camelCase JSON request; return a camelCase response
        (docs/contract.md §5).

        Every op's work is bounded by its request's documented limits (README
        "Limits"); a request nesting deeper than ``nesting.MAX_REQUEST_DEPTH`` is
        refused. Errors: ``invalid_request``, ``limit``, ``not_found``, ``conflict``,
        ``read_only``, and nothing else for any request.
        """
        inv = contract.decode(op, request)
        try:
            result = getattr(self, inv.method)(*inv.args, **inv.kwargs)
            return contract.encode(inv.wrap(result))
        except RecursionError as exc:  # a last guard: decode bounds the depth
            raise InvalidError("the request nests too deeply") from exc
