"""The JSON contract (docs/contract.md §5): ``Memory.call(op, request) -> response``.

Owns: decoding a request (camelCase, unknown fields rejected, depth bounded, times as
milliseconds or ISO 8601 strings) into the Memory call its op's row of the op table
names (:func:`decode`, :mod:`.ops`), and the encoding of results (:func:`encode`).
``Memory.call`` runs the two around its own method; every door — HTTP, CLI, MCP — goes
through it, so they all speak the same contract. A client's input can only ever
produce a response or a caller error of the library's one vocabulary
(:mod:`holomem.errors`): ``invalid_request``, ``limit``, ``not_found``, ``conflict``,
and ``read_only`` on a follower. Imports the op table and the engine's time
conversion (:func:`holomem.api.engine.validate.to_ms`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgspec

from holomem.api.engine import nesting, validate
from holomem.api.memory.ops import OPS, fields, row
from holomem.errors import InvalidError


class Invocation(NamedTuple):
    """One decoded request: the Memory method to call, its arguments, and how its
    result becomes the response object."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    wrap: Callable[[Any], Any]


def _same(result: Any) -> Any:
    return result


#: The fields that hold a time, by JSON name, and the fields whose objects hold some
#: (a list of facts, a forget scope, a filter). A request may give a time as
#: milliseconds or as an ISO 8601 string; the Structs take milliseconds, so strings are
#: converted first (:func:`holomem.api.engine.validate.to_ms`), only where a time can be.
_TIMES = frozenset({"eventTime", "validFrom", "validTo", "asOf", "knownAt", "ingestedAfter",
                    "ingestedBefore", "eventAfter", "eventBefore", "time"})
_HOLDING_TIMES = ("facts", "fragments", "messages", "scope", "filter")


def _times(obj: dict[str, Any], where: str) -> dict[str, Any]:
    out = {k: validate.to_ms(v, where + k) if k in _TIMES and isinstance(v, str) else v
           for k, v in obj.items()}
    for key in _HOLDING_TIMES:
        held = out.get(key)
        if isinstance(held, dict):
            out[key] = _times(held, f"{where}{key}.")
        elif key in ("facts", "fragments", "messages") and isinstance(held, list):
            out[key] = [_times(x, f"{where}{key}[{i}].") if isinstance(x, dict) else x
                        for i, x in enumerate(held)]
    return out


def _decode(request: dict[str, Any], cls: type[Any]) -> Any:
    try:
        return msgspec.convert(_times(request, ""), cls, strict=True)
    except msgspec.ValidationError as exc:
        raise InvalidError(str(exc)) from exc
    except UnicodeEncodeError as exc:  # msgspec cannot even name a lone surrogate
        raise InvalidError("the request holds text that is not valid Unicode (a lone "
                           "surrogate)") from exc


def decode(op: object, request: object) -> Invocation:
    """The Memory call a contract request asks for (its op's row of :data:`~.ops.OPS`).

    A request nesting deeper than :data:`~holomem.api.engine.nesting.MAX_REQUEST_DEPTH`
    is refused (``limit``) before it is decoded. Errors: ``invalid_request`` (HTTP 422),
    ``limit`` (422).
    """
    if not isinstance(op, str) or op not in OPS:
        raise InvalidError(f"unknown op {op!r}; ops are {', '.join(OPS)}")
    if not isinstance(request, dict) or not all(isinstance(k, str) for k in request):
        raise InvalidError("the request must be a JSON object")
    nesting.check_depth(request)
    the = row(op, request)
    try:
        req = _decode(request, the.request)
    except RecursionError as exc:  # a last guard: check_depth should make this unreachable
        raise InvalidError("the request nests too deeply") from exc
    args, kwargs = the.args(req) if the.args is not None else ((), fields(req))
    key, single = the.key, the.single
    wrap = _same if key is None else (lambda result: {key: [result] if single else result})
    return Invocation(the.method, args, kwargs, wrap)


def decode_body(raw: bytes) -> dict[str, Any]:
    """The JSON object a request body holds (an empty body is ``{}``).

    Errors: ``invalid_request`` — not JSON, or not an object; ``limit`` — nested
    deeper than the contract's :data:`~holomem.api.engine.nesting.MAX_REQUEST_DEPTH`,
    found before decoding (:func:`~holomem.api.engine.nesting.check_nesting`).
    """
    if not raw:
        return {}
    nesting.check_nesting(raw, "the body")
    try:
        data = msgspec.json.decode(raw)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise InvalidError(f"the body is not JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise InvalidError("the body must be a JSON object")
    return data


def encode(response: object) -> dict[str, Any]:
    """A response object as plain JSON-ready data (camelCase)."""
    out: dict[str, Any] = msgspec.to_builtins(response)
    return out
