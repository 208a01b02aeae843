"""Checks on the memory API's own shapes: a whole configuration and the caller's named
policies (the values inside them are checked by :mod:`holomem.api.engine.validate`; a
forget scope is checked by :mod:`holomem.api.memory.forget.removal`).

Owns: :func:`memory_config`, :func:`custom_policies`. Imports the memory API's
configuration and the errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from holomem.api.memory.config import MemoryConfig
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
