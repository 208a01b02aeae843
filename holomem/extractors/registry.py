"""Built-in extractors by name, for a request that names one (docs/contract.md §4g).

Owns: :data:`NAMES` and :func:`by_name`. Only extractors that need no configuration
and reach nothing outside the process are named here: a request carries a name, never
code, and a served store must not be made to call out to an endpoint a client picks —
so ``"rules"`` is named and the chat adapter is not. Imports the extractors it names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from holomem.errors import InvalidError
from holomem.extractors.base import Fact, Turn
from holomem.extractors.rules import RuleExtractor

__all__ = ["NAMES", "by_name"]

_BUILT_IN: dict[str, Callable[[], Callable[[Sequence[Turn]], list[Fact]]]] = {
    "rules": RuleExtractor}
#: The names :func:`by_name` knows, sorted.
NAMES: tuple[str, ...] = tuple(sorted(_BUILT_IN))


def by_name(name: object) -> Callable[[Sequence[Turn]], list[Fact]]:
    """A new built-in extractor called ``name`` (``"rules"``). Errors:
    ``invalid_request`` for a name that is not built in."""
    make = _BUILT_IN.get(name) if isinstance(name, str) else None
    if make is None:
        known = ", ".join(repr(n) for n in NAMES)
        raise InvalidError(f"unknown extractor {name!r}: the built-in extractors are "
                           f"{known} (an extractor of your own is Python code: pass it "
                           "to Memory.remember_conversation)")
    return make()
