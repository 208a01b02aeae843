"""The two bases of every shape the contract takes and gives: :class:`Request` and
:class:`Response` (docs/contract.md §5b).

Owns: the wire form every shape shares — camelCase names in JSON, and for a request,
unknown fields refused so that a client's typo fails loudly. Imports msgspec.
"""

from __future__ import annotations

import msgspec


class Request(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
              forbid_unknown_fields=True):
    """Every request shape: camelCase in JSON, unknown fields refused."""


class Response(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """Every response shape: camelCase in JSON."""
