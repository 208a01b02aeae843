"""The memory API, ``holomem.Memory`` (docs/contract.md §3, §4): facts over time on a Store.

Owns: :class:`Memory` — its configuration (:mod:`.configuration`: policies, clock,
observers, the embedder), the calls that write (:mod:`.writing`), read
(:mod:`.reading`), move facts (:mod:`.moving`) and link them (:mod:`.relating`), and the
JSON contract's entry point (:meth:`Memory.call`, decoded and encoded by
:mod:`.contract`). What each call does is the concern of its own module: planning a
remember (:mod:`.remember`), recall and explain (:mod:`.recall`, :mod:`.explain`), fact
records (:mod:`.records`), listing (:mod:`.listing`), the prompt block (:mod:`.render`),
the context window (:mod:`.contextcalls`: a block under a token budget, :mod:`.context`;
working contexts, :mod:`.working`), forgetting (:mod:`.forgetting`), consolidation
(:mod:`.consolidation`), holographic operations (:mod:`.holographic`,
:mod:`.contradiction`), export and import (:mod:`.transfer`) and embedders
(:mod:`.embedding`). Those modules take the engine's view and the policies; none of them
imports this one.

The fact index is a projection of the Store (:mod:`holomem.projections.facts`), so
every ``Memory`` over one ``Store`` reads the same, current index.
"""

from __future__ import annotations

from typing import Any

from holomem.api import contract
from holomem.api.contextcalls import ContextCalls
from holomem.api.moving import Moving
from holomem.api.relating import Relating
from holomem.api.writing import MAX_FACTS
from holomem.errors import InvalidError

__all__ = ["MAX_FACTS", "Memory"]


class Memory(ContextCalls, Moving, Relating):
    """Facts that hold over time, on top of a :class:`~holomem.Store`.

    ``Memory(store, config=None, *, clock=None, policies=None, initial=None,
    persist=False, embedder=None, reembed=False)``: see
    :class:`~holomem.api.configuration.Configured` for the arguments.
    """

    # -- the JSON contract ----------------------------------------------------------------
    def call(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """Run ``op`` with a camelCase JSON request; return a camelCase response
        (docs/contract.md §5).

        Every op's work is bounded by its request's documented limits (README
        "Limits"); a request nesting deeper than ``validate.MAX_REQUEST_DEPTH`` is
        refused. Errors: ``invalid_request``, ``limit``, ``not_found``, ``conflict``,
        ``read_only``, and nothing else for any request.
        """
        inv = contract.decode(op, request)
        try:
            result = getattr(self, inv.method)(*inv.args, **inv.kwargs)
            return contract.encode(inv.wrap(result))
        except RecursionError as exc:  # a last guard: decode bounds the depth
            raise InvalidError("the request nests too deeply") from exc

