"""``index["embed"]``: the embedding function a HolomemStore was given, its vectors checked.

Owns: :class:`IndexEmbeddings` — the vectors of a batch's puts (one call for all of
them) and of a search's query, each checked to be as many finite vectors as texts, of
``index["dims"]`` dimensions when that is given. Imports LangGraph's ``Embeddings``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from langgraph.store.base import Embeddings

from holomem.errors import InvalidError
from holomem.integrations.langgraph.checks import Put


class IndexEmbeddings:
    """LangChain ``Embeddings`` (or what ``ensure_embeddings`` made of a function)."""

    def __init__(self, embeddings: Embeddings, dims: int | None,
                 store_dim: Callable[[], int] = lambda: 0) -> None:
        self.embeddings = embeddings
        self.dims = dims
        #: the store's dimension now (0: none yet), which every vector must have
        self.store_dim = store_dim

    def puts(self, puts: list[Put]) -> dict[int, list[float]]:
        """The vectors of the puts' texts, by id of the :class:`Put` (one call)."""
        todo = [p for p in puts if p.embed]
        if not todo:
            return {}
        vectors = self.checked(self.embeddings.embed_documents([p.text for p in todo]),
                               len(todo))
        return {id(p): v for p, v in zip(todo, vectors, strict=True)}

    def query(self, text: str) -> list[float]:
        return self.checked([self.embeddings.embed_query(text)], 1)[0]

    def checked(self, raw: object, n: int) -> list[list[float]]:
        """``raw`` as ``n`` vectors of one length (``index["dims"]`` when given), each
        finite: checked for every put of a batch before the first op runs."""
        tolist = None if isinstance(raw, Sequence) else getattr(raw, "tolist", None)
        if callable(tolist):
            raw = tolist()  # (a numpy matrix: what SentenceTransformer.encode gives)
        if not isinstance(raw, Sequence) or len(raw) != n:
            got = f"{len(raw)} vectors" if isinstance(raw, Sequence) \
                else type(raw).__name__
            raise InvalidError(f"index.embed gave {got} for {n} texts: it must give a list "
                               "of one vector per text")
        out = []
        for vector in raw:
            try:
                floats = [float(x) for x in vector]
            except (TypeError, ValueError) as exc:
                raise InvalidError("index.embed gave a vector that is not numbers") from exc
            if not floats or not all(math.isfinite(x) for x in floats):
                raise InvalidError("index.embed gave an empty or non-finite vector")
            if self.dims is not None and len(floats) != self.dims:
                raise InvalidError(f"index.embed gave {len(floats)} dimensions; index.dims "
                                   f"is {self.dims}")
            out.append(floats)
        if len({len(v) for v in out}) > 1:
            raise InvalidError("index.embed gave vectors of different lengths in one call")
        dim = self.store_dim()
        if out and dim and len(out[0]) != dim:
            raise InvalidError(f"index.embed gave {len(out[0])} dimensions; the store's "
                               f"vectors have {dim}")
        return out
