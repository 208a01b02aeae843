"""Embedders: text to vectors with a pinned identity (docs/contract.md §4e).

Owns: the embedder interface (:class:`Embedder`, :class:`EmbedderIdentity`), the
built-in local model (``"minilm"``, :class:`MiniLM`) and :func:`by_name`, which the
doors and ``MemoryConfig.embedder`` resolve names with. Imports ``holomem.errors``
only from holomem, plus msgspec, numpy, tokenizers and safetensors.
"""

from holomem.embedders.base import Embedder, EmbedderIdentity
from holomem.embedders.minilm import MiniLM
from holomem.embedders.registry import NAMES, by_name

__all__ = ["NAMES", "Embedder", "EmbedderIdentity", "MiniLM", "by_name"]
