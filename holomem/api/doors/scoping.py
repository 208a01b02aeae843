"""A door's own namespace: every contract call confined to one namespace and what is under it.

Owns: :class:`Scope`, the base namespace of a door that serves one principal out of
a shared store (``holomem mcp --namespace``, a Hermes user), and the rewriting of
contract requests and responses that keeps each call inside it. Imports the memory
API (``Memory``, the contract's op table, validate) and nothing of any protocol.

The rules, written down once:

- A namespace in a request is **relative** to the base: under ``["users", "u-1"]``,
  ``["notes"]`` means ``["users", "u-1", "notes"]``; none (or ``[]``) means the base
  itself. That covers ``namespace`` (remember and rememberConversation, and the prefix
  of every reading and maintenance op), the forget scope ``{"namespace": [...]}``,
  forget's ``within`` (always set: the other scopes only ever reach facts under the
  base) and the
  ``prefix`` of ``listNamespaces``, and the context-window ops: ``compileContext`` and
  ``explainContext`` (a prefix: only facts under it are candidates) and the working
  contexts (``saveWorkingContext``, ``loadWorkingContext``, ``listWorkingContexts``:
  the namespace a session is saved in). No value can name a namespace outside the base:
  a request has no way to say "absolute" or "up". Base and relative part together
  hold at most ``validate.MAX_NAMESPACE_DEPTH`` strings.
- Calls that name a fact by id (``get``, ``history``, ``explain``, ``feedback``,
  ``setConfidence``; ``relate``, ``unrelate``, ``links`` and ``why``, whose
  ``namespace`` is a prefix every fact they touch must be under) answer for a fact
  outside the base exactly as for an id that does not exist (``{"fact": null}``, or
  ``not_found`` with the same message).
- Namespaces in responses are relative to the base too (``FactRecord.namespace``,
  ``listNamespaces``, a working context's ``namespace``, the subjects and sessions of
  an ``entityProfile``'s summary, and the namespace a ``not_found`` of
  ``loadWorkingContext`` names), so a caller sees the same names it gives.

What a scoped caller can still learn of the rest of the store: that an explicit
``id`` it chooses is taken (ids are store-wide: remembering another payload under
it is a ``conflict``, and ``supersedes`` naming it says it is in another
namespace). Content-derived ids (no ``id`` given) cover the namespace and never
collide.

A root base (``()``) changes nothing: requests and responses pass through as they are.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from holomem.api.engine import validate
from holomem.api.memory import ops
from holomem.api.memory.memory import Memory
from holomem.errors import InvalidError, LimitError, NotFoundError

#: Ops whose ``namespace`` field is a prefix, and those that change a fact named by
#: ``id`` (checked before the call), as the op table says (:data:`~.ops.Op.scope`).
_PREFIX_OPS = frozenset(op.name for op in ops.OPS.values() if op.scope == "prefix")
_ID_WRITES = frozenset(op.name for op in ops.OPS.values() if op.scope == "id-write")
#: Ops whose ``namespace`` is the one place they write in (``remember``'s batch apart).
_PLACE_OPS = frozenset(op.name for op in ops.OPS.values() if op.scope == "place")
#: Every op a scope knows how to confine (or that names nothing to confine). An op the
#: table marks ``none`` reaches the whole store and is refused through a scoped door
#: rather than passed through unconfined.
HANDLED = frozenset(op.name for op in ops.OPS.values() if op.scope != "none")


class Scope:
    """A base namespace that no call through it can leave (see the module doc)."""

    def __init__(self, base: Iterable[str] = ()) -> None:
        """Errors: ``invalid_request``, ``limit`` (checked like any namespace)."""
        self.base: tuple[str, ...] = validate.namespace(base, "namespace")

    def __repr__(self) -> str:
        return f"Scope({list(self.base)!r})"

    # -- namespaces -----------------------------------------------------------------------
    def under(self, value: object, field: str = "namespace") -> list[str]:
        """The absolute namespace a request's relative ``value`` names (None: the base).

        Errors: ``invalid_request`` (not a list of id-like strings), ``limit`` (base and
        ``value`` together longer than ``validate.MAX_NAMESPACE_DEPTH``).
        """
        given = validate.namespace(value, field)
        room = validate.MAX_NAMESPACE_DEPTH - len(self.base)
        if len(given) > room:
            raise LimitError(f"{field} holds at most {room} strings here (this door's own "
                             f"namespace already holds {len(self.base)} of the "
                             f"{validate.MAX_NAMESPACE_DEPTH})")
        return [*self.base, *given]

    def holds(self, namespace: object) -> bool:
        """Whether an absolute namespace (a list from a response) is at or under the base."""
        return isinstance(namespace, list) and tuple(namespace[: len(self.base)]) == self.base

    def relative(self, namespace: list[str]) -> list[str]:
        return namespace[len(self.base):]

    # -- calls ----------------------------------------------------------------------------
    def call(self, memory: Memory, op: str, request: Any) -> dict[str, Any]:
        """``memory.call(op, request)``, confined to the base.

        Errors: those of ``Memory.call``; ``not_found`` for a fact outside the base.
        """
        if not self.base or op not in ops.OPS or not isinstance(request, dict):
            return memory.call(op, request)  # the contract answers (or refuses) as it is
        if op not in HANDLED:
            raise InvalidError(f"{op} is not offered by a door confined to a namespace")
        if op in _ID_WRITES and isinstance(request.get("id"), str):
            self._check(memory, request["id"])
        placed = self._request(op, request)
        try:
            response = memory.call(op, placed)
        except NotFoundError as exc:
            raise self._relative_error(exc, placed) from None
        if op == "get" and response["fact"] is not None and \
                not self.holds(response["fact"]["namespace"]):
            return {"fact": None}
        if op == "history" and not all(self.holds(f["namespace"]) for f in response["history"]):
            raise NotFoundError(f"no fact {request['id']!r}")
        if op == "explain":
            self._check(memory, request["id"])  # a valid id: the contract decoded it
        return self._response(response)

    def _relative_error(self, exc: NotFoundError, placed: dict[str, Any]) -> NotFoundError:
        """``exc`` naming the namespace it names as the caller named it."""
        ns = placed.get("namespace")
        if not isinstance(ns, list):
            return exc
        absolute, relative = f"in namespace {ns!r}", f"in namespace {self.relative(ns)!r}"
        if absolute not in exc.message:
            return exc
        return NotFoundError(exc.message.replace(absolute, relative))

    def _check(self, memory: Memory, fid: str) -> None:
        fact = memory.get(fid)
        if fact is None or not self.holds(fact.namespace):
            raise NotFoundError(f"no fact {fid!r}")

    def _request(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        if op == "remember":
            facts = request.get("facts")
            if isinstance(facts, list):
                return {**request, "facts": [self._placed(f, f"facts[{i}].namespace")
                                             for i, f in enumerate(facts)]}
            return {**request, "namespace": self.under(request.get("namespace"))}
        if op in _PREFIX_OPS or op in _PLACE_OPS:
            return {**request, "namespace": self.under(request.get("namespace"))}
        if op == "forget":
            out = {**request, "within": self.under(request.get("within"), "within")}
            scope = request.get("scope")
            if isinstance(scope, dict) and scope.get("namespace") is not None:
                out["scope"] = {**scope, "namespace": self.under(scope["namespace"],
                                                                 "scope.namespace")}
            return out
        if op == "listNamespaces":
            out = {**request, "prefix": self.under(request.get("prefix"), "prefix")}
            depth = request.get("maxDepth")
            if (isinstance(depth, int) and not isinstance(depth, bool)
                    and 1 <= depth <= validate.MAX_NAMESPACE_DEPTH):
                # Counted from the caller's root, which is the base: the base's own
                # strings do not count (a bad value is left for the contract to refuse).
                out["maxDepth"] = min(depth + len(self.base), validate.MAX_NAMESPACE_DEPTH)
            return out
        return request  # get, history, feedback, setConfidence: an id, checked by call

    def _placed(self, fact: object, field: str) -> Any:
        if not isinstance(fact, dict):
            return fact  # the contract refuses it
        return {**fact, "namespace": self.under(fact.get("namespace"), field)}

    def _response(self, response: dict[str, Any]) -> dict[str, Any]:
        """Namespaces in a contract response, made relative (in place: it is ours)."""
        records: list[dict[str, Any]] = []
        if isinstance(response.get("fact"), dict):
            records.append(response["fact"])
        for key in ("history", "facts"):
            records.extend(response.get(key) or [])
        records.extend(r["fact"] for r in response.get("results") or [] if "fact" in r)
        if isinstance(response.get("workingContext"), dict):  # saved or loaded
            records.append(response["workingContext"])
        if "sessions" in response:  # listWorkingContexts: the namespace listed
            records.append(response)
        summary = response.get("summary")
        if isinstance(summary, dict):  # entityProfile: its subjects' and sessions'
            for key in ("subjects", "sessions"):
                records.extend(summary.get(key) or [])
        for record in records:
            if isinstance(record, dict) and isinstance(record.get("namespace"), list):
                record["namespace"] = self.relative(record["namespace"])
        for entry in response.get("namespaces") or []:
            entry["namespace"] = self.relative(entry["namespace"])
        return response
