"""A BERT encoder's forward pass in numpy, one sequence length at a time.

Owns: the weights of a BERT-style encoder laid out for inference (:class:`BertWeights`,
built from a safetensors state dict by :func:`weights_from_state`) and
:func:`encode_group`, which runs every layer over a group of sequences of one length.
Imports numpy only; the tokenizer, the weights' origin and pooling live elsewhere.

Why one length per group: nothing is padded, so no reduction ever runs over a padded
position and no matrix product's shape depends on which other texts share the call.
Every product is a stack of per-sequence products (numpy's ``matmul`` runs one
``gemm`` per leading index), so a sequence gets the same bytes alone or in a batch of
any composition. The layout follows the original BERT: embeddings (word + position +
token type 0) and LayerNorm, then per layer self-attention and a GELU feed-forward
block, each followed by a residual LayerNorm.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]

# GELU uses the exact Gaussian CDF: gelu(x) = x * Phi(x) = relu(x) - |x| * Phi(-|x|)
# (both sides agree for either sign of x). numpy has no erf; Abramowitz & Stegun 7.1.26
# gives Phi(-a) = 0.5 * erfc(a / sqrt 2) ~ 0.5 * poly(u) * exp(-a^2 / 2) with
# u = 1 / (1 + P a / sqrt 2), |error| <= 1.5e-7 / 2, below float32 resolution near 1.
# With v = 1 / (K + a), K = sqrt 2 / P, u = K v, so K^j and the 0.5 fold into the
# coefficients: one pass fewer, and no sign handling.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
_GELU_K = np.float32(math.sqrt(2.0) / _AS_P)
_GELU_C = tuple(np.float32(0.5 * a * (math.sqrt(2.0) / _AS_P) ** (j + 1))
                for j, a in enumerate(_AS_A))


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
    ``encoder.layer.N.*``) for :func:`encode_group`. Raises ``KeyError`` or
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


def _layer_norm(x: F32, g: F32, b: F32, eps: float) -> F32:
    mean = x.mean(axis=-1, keepdims=True)
    x = x - mean
    var = np.mean(x * x, axis=-1, keepdims=True)
    var += np.float32(eps)
    np.sqrt(var, out=var)
    x /= var
    x *= g
    x += b
    return x


def _gelu(x: F32) -> F32:
    """gelu(x), in place on a fresh array ``x`` (see the constants above)."""
    a = np.abs(x)
    v = a + _GELU_K
    np.reciprocal(v, out=v)
    c0, c1, c2, c3, c4 = _GELU_C
    q = v * c4
    for c in (c3, c2, c1, c0):
        q += c
        q *= v
    e = a * np.float32(-0.5)
    e *= a
    np.exp(e, out=e)
    q *= e  # Phi(-|x|)
    q *= a
    np.maximum(x, np.float32(0.0), out=x)
    x -= q
    return x


def encode_group(w: BertWeights, ids: npt.NDArray[np.int64]) -> F32:
    """Hidden states [n, length, d] for ``ids`` [n, length], every row one whole
    sequence (special tokens included, no padding), length <= ``w.max_positions``."""
    n, length = ids.shape
    d = w.dim
    heads = w.heads
    hd = d // heads
    x = w.word[ids]
    x += w.position[:length]
    x = _layer_norm(x, w.ln_g, w.ln_b, w.eps)
    for layer in w.layers:
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        # [n, length, 3, heads, hd] -> three [n, heads, length, hd] views
        qkv5 = qkv.reshape(n, length, 3, heads, hd).transpose(2, 0, 3, 1, 4)
        q, k, v = qkv5[0], qkv5[1], qkv5[2]
        scores = q @ k.transpose(0, 1, 3, 2)  # [n, heads, length, length]
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, d)
        attn = ctx @ layer.out_w
        attn += layer.out_b
        attn += x
        x = _layer_norm(attn, layer.ln1_g, layer.ln1_b, w.eps)
        h = x @ layer.ff1_w
        h += layer.ff1_b
        h = _gelu(h)
        out = h @ layer.ff2_w
        out += layer.ff2_b
        out += x
        x = _layer_norm(out, layer.ln2_g, layer.ln2_b, w.eps)
    return x
