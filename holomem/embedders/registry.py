"""Built-in embedders by name, for configuration and the doors.

Owns: :data:`NAMES` and :func:`by_name`. Imports the embedders it names.
"""

from __future__ import annotations

from collections.abc import Callable

from holomem.embedders.base import Embedder
from holomem.embedders.minilm import MiniLM
from holomem.errors import InvalidError

__all__ = ["NAMES", "by_name"]

_BUILT_IN: dict[str, Callable[[], Embedder]] = {"minilm": MiniLM}
#: The names :func:`by_name` knows, sorted.
NAMES: tuple[str, ...] = tuple(sorted(_BUILT_IN))


def by_name(name: str) -> Embedder:
    """The built-in embedder called ``name`` (``"minilm"``).

    Raises ``InvalidError`` (``invalid_request``) for a name that is not built in, and
    ``UnavailableError`` (``unavailable``) when its model package is not installed
    (the message names the command that installs it).
    """
    make = _BUILT_IN.get(name) if isinstance(name, str) else None
    if make is None:
        known = ", ".join(repr(n) for n in NAMES)
        raise InvalidError(f"unknown embedder {name!r}: the built-in embedders are {known}")
    return make()
