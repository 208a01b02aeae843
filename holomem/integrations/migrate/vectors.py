"""Whether a peer's vectors may be stored with the facts they belong to (docs/migrate.md).

Owns: the rule, written once for every peer: :func:`decide` takes what the peer says
of the model that made its vectors (a name, a dimension) and the memory's embedder,
and answers keep or drop with the reason the report gives. A vector is only worth
keeping when the memory's embedder would have made the same one: recall embeds each
query with that embedder and compares it with the stored vectors, so vectors of
another model would match nothing (or, worse, match by accident). Imports the
memory API's embedder identity and the errors.
"""

from __future__ import annotations

from typing import NamedTuple

from holomem.api.memory.memory import Memory
from holomem.errors import InvalidError

#: What the ``vectors`` argument of every ``from_*`` call takes.
MODES = ("auto", "keep", "drop")

#: Peer model names known to be the model of a built-in holomem embedder (lowercased,
#: without an organisation prefix such as ``sentence-transformers/``). Chroma calls its
#: default embedding function, all-MiniLM-L6-v2 run with ONNX, ``default``.
ALIASES: dict[str, frozenset[str]] = {
    "minilm": frozenset({"minilm", "all-minilm-l6-v2", "default", "onnx_mini_lm_l6_v2",
                         "onnxminilm_l6_v2"}),
}


class Decision(NamedTuple):
    keep: bool
    note: str


def mode(value: object) -> str:
    """The ``vectors`` argument, checked. Errors: ``invalid_request``."""
    if value not in MODES:
        raise InvalidError(f"vectors must be one of {', '.join(map(repr, MODES))}, "
                           f"got {value!r}")
    assert isinstance(value, str)  # one of MODES
    return value


def plain(name: str) -> str:
    """A model name compared without case or organisation prefix."""
    return name.strip().lower().rsplit("/", 1)[-1]


def same_model(embedder_name: str, peer_model: str) -> bool:
    ours, theirs = plain(embedder_name), plain(peer_model)
    return ours == theirs or theirs in ALIASES.get(ours, frozenset())


def decide(memory: Memory, want: str, peer_model: str | None, peer_dim: int | None
           ) -> Decision:
    """Keep the peer's vectors or not. ``want``: ``"auto"`` keeps them when the memory's
    embedder is the peer's model (by name, or a known alias) with the same dimension;
    ``"keep"`` keeps them whatever the model (the caller vouches for it), as long as
    the dimension is the embedder's, or without one the store's (that of the vectors
    it holds, if any); ``"drop"`` never keeps them. Errors: ``invalid_request``
    (``"keep"`` of vectors of another dimension).
    """
    embedder = memory.embedder
    model = f"the peer's model {peer_model!r}" if peer_model else "the peer's model"
    if want == "drop":
        return Decision(False, "vectors='drop': the peer's vectors were not read")
    if want == "keep":
        if embedder is not None and peer_dim is not None \
                and peer_dim != embedder.identity.dim:
            raise InvalidError(f"vectors='keep': {model} gives {peer_dim} dimensions, the "
                               f"memory's embedder {embedder.identity.name!r} "
                               f"{embedder.identity.dim}")
        stored = memory.store.embedding_dim
        if stored and peer_dim is not None and peer_dim != stored:
            raise InvalidError(f"vectors='keep': {model} gives {peer_dim} dimensions, the "
                               f"vectors the store holds {stored}")
        return Decision(True, "vectors='keep': the peer's vectors were stored as they are")
    if embedder is None:
        return Decision(False, "the memory has no embedder, so recall could not compare "
                        "a query with the peer's vectors (vectors='keep' stores them "
                        "anyway)")
    if not peer_model:
        return Decision(False, f"the peer does not say which model made its vectors, so "
                        f"they may not be the embedder {embedder.identity.name!r}'s; "
                        f"it embedded the text (vectors='keep' keeps them)")
    if not same_model(embedder.identity.name, peer_model):
        return Decision(False, f"{model} is not the memory's embedder "
                        f"{embedder.identity.name!r}; it embedded the text instead")
    if peer_dim is not None and peer_dim != embedder.identity.dim:
        return Decision(False, f"{model} gives {peer_dim} dimensions, the memory's "
                        f"embedder {embedder.identity.dim}; it embedded the text instead")
    return Decision(True, f"{model} is the memory's embedder "
                    f"{embedder.identity.name!r}: its vectors were kept")
