"""A BERT encoder's weights, laid out for inference.

Owns: :class:`BertWeights` and :class:`Layer`, built from a Hugging Face ``BertModel``
state dict by :func:`weights_from_state`. Imports numpy only; the graph that runs them
is ``holomem.embedders.graph``, the tokenizer and pooling ``holomem.embedders.minilm``.

The layout follows the original BERT: embeddings (word + position + token type 0) and
LayerNorm, then per layer self-attention and a GELU feed-forward block, each followed
by a residual LayerNorm. What can be folded ahead of time is: the query's weights and
bias carry the 1/sqrt(head dim) of the attention scores, the three projections are one
[d, 3d] matrix, and the token-type-0 embedding is added into the position table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

@dataclass(frozen=True, slots=True)
class Layer:
    """One encoder layer; matrices are stored (in, out) so that ``x @ w`` applies them."""

    qkv_w: F32  # [d, 3d]: query (pre-scaled by 1/sqrt(head dim)), key, value
    qkv_b: F32  # [3d]
    out_w: F32  # [d, d]
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    ff1_w: F32  # [d, ff]
    ff1_b: F32
    ff2_w: F32  # [ff, d]
    ff2_b: F32
    ln2_g: F32
    ln2_b: F32


@dataclass(frozen=True, slots=True)
class BertWeights:
    word: F32       # [vocab, d]
    position: F32   # [max positions, d], token type 0 already added
    ln_g: F32
    ln_b: F32
    layers: tuple[Layer, ...]
    heads: int
    eps: float

    @property
    def dim(self) -> int:
        return int(self.word.shape[1])

    @property
    def max_positions(self) -> int:
        return int(self.position.shape[0])


def _f32(a: npt.NDArray[np.generic]) -> F32:
    return np.ascontiguousarray(a, dtype=np.float32)


def weights_from_state(state: Mapping[str, npt.NDArray[np.generic]], *, heads: int,
                       eps: float, prefix: str = "") -> BertWeights:
    """Lay out a Hugging Face ``BertModel`` state dict (``embeddings.*``,
    ``encoder.layer.N.*``) for ``holomem.embedders.graph``. Raises ``KeyError`` or
    ``ValueError`` on a state dict of another shape: callers pass only files whose
    digest they pinned, so that would be a bug, not bad input."""

    def get(name: str) -> F32:
        return _f32(state[prefix + name])

    dim = get("embeddings.word_embeddings.weight").shape[1]
    if dim % heads:
        raise ValueError(f"hidden size {dim} is not a multiple of {heads} heads")
    scale = np.float32(1.0 / math.sqrt(dim // heads))
    layers = []
    n = 0
    while prefix + f"encoder.layer.{n}.attention.self.query.weight" in state:
        p = f"encoder.layer.{n}."

        def lin(name: str, p: str = p) -> tuple[F32, F32]:
            return get(p + name + ".weight"), get(p + name + ".bias")

        (qw, qb), (kw, kb), (vw, vb) = (lin("attention.self.query"), lin("attention.self.key"),
                                        lin("attention.self.value"))
        ow, ob = lin("attention.output.dense")
        f1w, f1b = lin("intermediate.dense")
        f2w, f2b = lin("output.dense")
        g1, b1 = get(p + "attention.output.LayerNorm.weight"), get(
            p + "attention.output.LayerNorm.bias")
        g2, b2 = get(p + "output.LayerNorm.weight"), get(p + "output.LayerNorm.bias")
        layers.append(Layer(
            qkv_w=_f32(np.concatenate([qw * scale, kw, vw], axis=0).T),
            qkv_b=_f32(np.concatenate([qb * scale, kb, vb])),
            out_w=_f32(ow.T), out_b=ob, ln1_g=g1, ln1_b=b1,
            ff1_w=_f32(f1w.T), ff1_b=f1b, ff2_w=_f32(f2w.T), ff2_b=f2b, ln2_g=g2, ln2_b=b2))
        n += 1
    if not layers:
        raise ValueError("the state dict has no encoder layers")
    position = get("embeddings.position_embeddings.weight")
    position = _f32(position + get("embeddings.token_type_embeddings.weight")[0])
    return BertWeights(word=get("embeddings.word_embeddings.weight"), position=position,
                       ln_g=get("embeddings.LayerNorm.weight"),
                       ln_b=get("embeddings.LayerNorm.bias"),
                       layers=tuple(layers), heads=heads, eps=eps)

