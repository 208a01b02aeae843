"""Checks on the memory API's own shapes: a whole configuration, the caller's named
policies and a forget scope (the values inside them are checked by
:mod:`holomem.api.engine.validate`).

Owns: :func:`memory_config`, :func:`custom_policies`, :func:`forget_scope`. Imports the
memory API's types, the engine's value checks and the errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from holomem.api.engine.validate import doc_id, id_list, metadata, namespace
from holomem.api.memory.config import MemoryConfig
from holomem.api.memory.types import ForgetScope
from holomem.errors import InvalidError


def memory_config(value: object) -> MemoryConfig:
    """A whole :class:`MemoryConfig`, checked: every field's type and every number's range.

    ``value`` is a MemoryConfig (whose constructor checks nothing) or its JSON form as
    a dict (camelCase). The ranges are the msgspec constraints declared on the config
    Structs (:mod:`holomem.api.memory.types`), so this rejects exactly what
    :func:`~holomem.api.memory.types.config_from_json` rejects: recency ``halfLifeMs`` > 0;
    forgetting durations >= 0; ``nearThreshold``, feedback ``weight``, context
    ``weight`` and ``historicalWeight`` in [0, 1]; context ``window`` from 1 to
    :data:`~holomem.api.memory.types.MAX_CONTEXT_WINDOW`; durations at most 2**62 ms.

    Errors: ``invalid_request``, naming the field (``config: ... - at
    `$.recency.exponential.halfLifeMs```).
    """
    if isinstance(value, MemoryConfig):
        try:
            raw: object = msgspec.to_builtins(value)
        except (TypeError, ValueError, OverflowError, RecursionError) as exc:
            raise InvalidError(f"config: {exc}") from exc
    elif isinstance(value, Mapping):
        raw = dict(value)
    else:
        raise InvalidError(f"config must be a MemoryConfig, got {type(value).__name__}")
    try:
        # Converting the builtins form checks types and constraints, exactly as
        # decoding JSON does (a Struct built in Python was never checked).
        return msgspec.convert(raw, MemoryConfig)
    except (msgspec.ValidationError, TypeError, ValueError, OverflowError,
            RecursionError) as exc:
        raise InvalidError(f"config: {exc}") from exc


# -- request fields of the memory API ----------------------------------------------------
_SCOPE_FIELDS = ("ids", "subject", "entity", "ingested_before", "event_before", "metadata",
                 "namespace")


def forget_scope(scope: ForgetScope) -> str:
    """The one scope field that is set; ``invalid`` unless exactly one is."""
    given = [f for f in _SCOPE_FIELDS if getattr(scope, f) is not None]
    if len(given) != 1:
        raise InvalidError(f"a forget scope needs exactly one of {', '.join(_SCOPE_FIELDS)}; "
                           f"got {', '.join(given) or 'none'}")
    field = given[0]
    if field == "ids":
        id_list(scope.ids)
    elif field in ("subject", "entity"):
        doc_id(getattr(scope, field), field)
    elif field == "metadata":
        metadata(scope.metadata)
        if not scope.metadata:
            raise InvalidError("a metadata scope needs at least one key")
    elif field == "namespace":
        namespace(scope.namespace, "scope.namespace")
    return field


def custom_policies(value: object) -> dict[str, Any]:
    """The caller's named policies (``custom:NAME`` in a configuration): NAME -> callable."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidError("policies must be a dict of name -> callable")
    out = {}
    for name, fn in value.items():
        if not isinstance(name, str) or not name:
            raise InvalidError("a policy's name must be a non-empty string")
        if not callable(fn):
            raise InvalidError(f"policy {name!r} is not callable")
        out[name] = fn
    return out
