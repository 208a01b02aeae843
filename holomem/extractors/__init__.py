"""Extractors: facts from a conversation's turns, for ``remember_conversation``
(docs/contract.md §4g, "Extractors").

Owns: the two shipped extractors — :class:`RuleExtractor` (offline, deterministic
rules) and :class:`ChatExtractor` (any OpenAI-compatible chat-completions endpoint) —
and :func:`by_name`, which resolves the built-in names a request may carry
(``"rules"``). Imports ``holomem.errors`` only from holomem, plus msgspec and the
standard library: an extractor never touches a store.
"""

from holomem.extractors.base import Fact, Turn, slug
from holomem.extractors.chat import ChatExtractor
from holomem.extractors.registry import NAMES, by_name
from holomem.extractors.rules import RuleExtractor

__all__ = ["NAMES", "ChatExtractor", "Fact", "RuleExtractor", "Turn", "by_name", "slug"]
