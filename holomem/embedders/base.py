"""What an embedder is: an identity that pins its model, and ``embed``.

Owns: :class:`EmbedderIdentity`, the :class:`Embedder` protocol the memory API calls
(docs/contract.md §4e), and :func:`check_texts`, the one check of ``embed``'s input. Imports
msgspec, numpy and ``holomem.errors`` only.

An identity is what a store records at first use, so that a store written with one
model is never silently queried with another: two embedders whose identities are
equal must map every text to the same vector (up to the last bits that BLAS kernels
on different processors may differ in), and anything that could change a vector —
weights, vocabulary, pooling, truncation — must show in the identity.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import msgspec
import numpy as np
import numpy.typing as npt

from holomem.errors import InvalidError

__all__ = ["Embedder", "EmbedderIdentity", "check_texts"]


class EmbedderIdentity(msgspec.Struct, frozen=True, kw_only=True):
    """Pins an embedder's model; equal identities embed alike, on any machine.

    ``name`` is the short name (``"minilm"``); ``digest`` the lowercase hex SHA-256 of
    what pins the model (for the built-in embedder: its weights and tokenizer files,
    see ``holomem.embedders.minilm``); ``dim`` the vector length; ``normalized``
    whether every vector has unit L2 norm; ``pooling`` how token states become one
    vector (``"mean"``); ``max_tokens`` the longest input in tokens, longer text being
    truncated.
    """

    name: str
    digest: str
    dim: int
    normalized: bool
    pooling: str
    max_tokens: int


@runtime_checkable
class Embedder(Protocol):
    """Text to vectors, deterministically.

    ``embed(texts)`` returns a C-contiguous float32 array of shape
    ``[len(texts), identity.dim]``, row i for ``texts[i]``. The same text gives the
    same bytes on every call in a process, whatever else is in the batch. Bad input
    raises ``InvalidError`` (``invalid_request``); a model that cannot be loaded,
    ``UnavailableError`` (``unavailable``).
    """

    @property
    def identity(self) -> EmbedderIdentity: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def check_texts(texts: object) -> list[str]:
    """``texts`` as a list of str, or ``InvalidError`` naming what is wrong: not a
    sequence (a lone ``str`` is refused, not split into characters), an item that is
    not a str, or one that is not valid Unicode (a lone surrogate)."""
    if isinstance(texts, str | bytes | bytearray | memoryview) or not isinstance(
            texts, Sequence):
        raise InvalidError(f"texts must be a sequence of strings, not {type(texts).__name__}")
    out: list[str] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise InvalidError(f"texts[{i}] must be a string, not {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidError(f"texts[{i}] is not valid Unicode text (lone surrogate?)") from exc
        out.append(text)
    return out
