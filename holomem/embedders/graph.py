"""The BERT encoder of ``holomem.embedders.bert`` written as an ONNX graph, for onnxruntime.

Owns: :func:`encoder_graph`, which turns :class:`~holomem.embedders.bert.BertWeights`
into the serialized bytes of an ONNX model mapping word-piece ids ``[n, length]``
(int64, whole sequences, no padding) to mean-pooled token states ``[n, d]`` (float32,
not yet normalised); :class:`Calibration`, the per-channel constants its 8-bit form
needs, with :func:`to_source` / :func:`from_source`, the text form
``holomem.embedders.minilm_calibration`` stores them in; and :func:`quantize_columns`,
the weights' 8-bit form. Imports numpy and
``onnx`` (its graph builder only); nothing here runs a model (the calibration is
measured by ``holomem.embedders.calibrate``).

Quantised (the default), every product of an encoder layer runs as onnxruntime's
``DynamicQuantizeMatMul``: the weights are 8-bit integers with one float32 scale per
output column (symmetric), and the input is quantised to 8 bits when the product
runs, with one scale and zero point for the whole input (the min and max of every
value in it: each text is run alone, so that is the text's own range, whatever else is
embedded). One range for a whole input is coarse where a few channels are far larger
than the rest, so two measures keep the error small, both set by a
:class:`Calibration` measured once, on fixed texts, and stored with the model code:

- smoothing: the input of the query-key-value product and of the first feed-forward
  product (the outputs of a LayerNorm, with a few channels up to ten times the rest)
  is multiplied channel by channel by ``2**-e`` and the matching weight rows by
  ``2**e`` before quantising, which leaves the product unchanged in exact arithmetic
  (powers of two: the scaling itself rounds nothing) and moves range from the
  activations into the weights (SmoothQuant);
- outliers: the second feed-forward product's input (the GELU's output, whose largest
  channels reach 25 against a median of 1.5) keeps its :data:`OUTLIERS` largest
  channels out of the 8-bit product: they are multiplied in float32 and added.

The attention-output product is quantised as it is. Word and position embeddings,
LayerNorms, attention (onnxruntime's ``MultiHeadAttention``), softmax and GELU
(exact, with erf) stay float32. Unquantised, the same graph uses float32 ``MatMul``
throughout: the exact model, which tests compare the quantised one against.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from holomem.embedders.bert import BertWeights, Layer

__all__ = ["OPSET", "OUTLIERS", "PRODUCTS", "Calibration", "encoder_graph", "from_source",
           "quantize_columns", "to_source"]

#: The ONNX opset the graph is written for (Gelu needs 20).
OPSET = 20
_MS = "com.microsoft"
#: The four products of an encoder layer, in the order they run.
PRODUCTS = ("qkv", "attn", "ff1", "ff2")
#: Input channels of each layer's second feed-forward product kept in float32.
OUTLIERS = 16
#: A stored shift is one character per channel: ``_DIGITS[e + 8]`` for e in -8..7
#: (``.`` for 0, ``1``-``7`` up, ``a``-``h`` down by 1-8).
_DIGITS = "hgfedcba.1234567"


@dataclass(frozen=True, slots=True)
class Calibration:
    """Per-layer constants of the 8-bit graph (see the module docstring).

    ``qkv_shift[i]`` and ``ff1_shift[i]``: int8 exponents ``e``, one per input channel
    of layer ``i``'s query-key-value and first feed-forward products (the input is
    scaled by ``2**-e``, the weight row by ``2**e``); ``outliers[i]``: the ascending
    input channels of layer ``i``'s second feed-forward product kept in float32."""

    qkv_shift: tuple[npt.NDArray[np.int8], ...]
    ff1_shift: tuple[npt.NDArray[np.int8], ...]
    outliers: tuple[npt.NDArray[np.int64], ...]

    def check(self, w: BertWeights) -> None:
        """Raise ``ValueError`` unless these constants fit ``w``'s shapes."""
        layers = len(w.layers)
        if not len(self.qkv_shift) == len(self.ff1_shift) == len(self.outliers) == layers:
            raise ValueError(f"the calibration is for another number of layers than {layers}")
        for i, layer in enumerate(w.layers):
            hidden = layer.ff1_w.shape[1]
            out = self.outliers[i]
            if (self.qkv_shift[i].shape != (w.dim,) or self.ff1_shift[i].shape != (w.dim,)
                    or out.shape != (OUTLIERS,) or np.any(np.diff(out) <= 0)
                    or out.min() < 0 or out.max() >= hidden):
                raise ValueError(f"the calibration does not fit layer {i}")


def to_source(calibration: Calibration) -> str:
    """The Python source of ``holomem.embedders.minilm_calibration``'s constants."""
    lines = ["SHIFTS = ("]
    for i, (qkv, ff1) in enumerate(zip(calibration.qkv_shift, calibration.ff1_shift,
                                       strict=True)):
        for name, shift in (("qkv", qkv), ("ff1", ff1)):
            text = "".join(_DIGITS[int(e) + 8] for e in shift)
            chunks = [text[k:k + 96] for k in range(0, len(text), 96)]
            lines.append(f"    # layer {i}, {name}")
            lines += [f'    "{c}"' for c in chunks[:-1]]
            lines.append(f'    "{chunks[-1]}",')
    lines += [")", "OUTLIERS = ("]
    lines += [f"    ({', '.join(str(int(c)) for c in out)}),"
              for out in calibration.outliers]
    lines.append(")")
    return "\n".join(lines) + "\n"


def from_source(shifts: Sequence[str], outliers: Sequence[Sequence[int]]) -> Calibration:
    """The :class:`Calibration` stored as ``to_source`` writes it (``SHIFTS``: per
    layer the query-key-value then the first feed-forward shifts; ``OUTLIERS``)."""
    if len(shifts) != 2 * len(outliers):
        raise ValueError("the stored calibration needs two shift rows per layer")
    rows = [np.array([_DIGITS.index(c) - 8 for c in row], dtype=np.int8) for row in shifts]
    return Calibration(qkv_shift=tuple(rows[0::2]), ff1_shift=tuple(rows[1::2]),
                       outliers=tuple(np.array(o, dtype=np.int64) for o in outliers))


def quantize_columns(w: npt.NDArray[np.float32]) -> tuple[
        npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """``w`` [in, out] as ``DynamicQuantizeMatMul`` takes it: ``q`` [in, out] int8 and
    ``scale`` [out], so that column ``j`` is ``q[:, j] * scale[j]``. A column's scale is
    its largest magnitude over 127 (1 for a column of zeros)."""
    peak = np.abs(w).max(axis=0)
    scale = np.where(peak > 0, peak / np.float32(127.0), np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, scale


def _outliers_last(layer: Layer, outliers: npt.NDArray[np.int64]) -> Layer:
    """``layer`` with its feed-forward channels reordered so that ``outliers`` come
    last (the first product's columns and the second's rows together: the same sum)."""
    hidden = layer.ff1_w.shape[1]
    order = np.concatenate([np.setdiff1d(np.arange(hidden), outliers), outliers])
    return dataclasses.replace(layer, ff1_w=np.ascontiguousarray(layer.ff1_w[:, order]),
                               ff1_b=layer.ff1_b[order],
                               ff2_w=np.ascontiguousarray(layer.ff2_w[order]))


def encoder_graph(w: BertWeights, calibration: Calibration | None = None, *,
                  probes: bool = False) -> bytes:
    """The serialized ONNX model of the encoder over ``w`` (see the module docstring).
    Input ``ids`` int64 ``[n, length]``, output ``pooled`` float32 ``[n, d]``.

    With ``calibration``, the layers' products run in 8 bits; without, in float32 (the
    exact model). ``probes``: also output the input of every layer's products, in
    layer order and :data:`PRODUCTS` order (``holomem.embedders.calibrate`` measures
    them); only without ``calibration``. Raises ``ValueError`` for a calibration that
    does not fit ``w`` or for probes of the 8-bit graph."""
    from onnx import NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

    if calibration is not None:
        calibration.check(w)
        if probes:
            raise ValueError("probes measure the exact graph: pass no calibration")
    d = w.dim
    heads = w.heads
    nodes: list[NodeProto] = []
    inits: list[TensorProto] = []
    probed: list[ValueInfoProto] = []

    def const(name: str, value: npt.NDArray[np.generic]) -> str:
        inits.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def node(op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def split(x: str, sizes: list[int], outs: list[str]) -> list[str]:
        sizes_name = const(outs[0] + ".sizes", np.array(sizes, dtype=np.int64))
        nodes.append(helper.make_node("Split", [x, sizes_name], outs, name=outs[0], axis=-1))
        return outs

    def linear(x: str, weight: npt.NDArray[np.float32], bias: npt.NDArray[np.float32],
               name: str, shift: npt.NDArray[np.int8] | None = None) -> str:
        if probes:
            probed.append(helper.make_tensor_value_info(x, TensorProto.FLOAT, None))
        if calibration is None:
            y = node("MatMul", [x, const(name + ".w", weight)], name + ".mm")
            return node("Add", [y, const(name + ".bias", bias)], name + ".out")
        if shift is not None:
            factor = np.ldexp(np.float32(1.0), shift.astype(np.int32)).astype(np.float32)
            x = node("Mul", [x, const(name + ".unshift", np.float32(1.0) / factor)],
                     name + ".shifted")
            weight = weight * factor[:, None]  # exact: powers of two
        q, scale = quantize_columns(weight)
        return node("DynamicQuantizeMatMul",
                    [x, const(name + ".q", q), const(name + ".scale", scale), "",
                     const(name + ".bias", bias)], name + ".out", domain=_MS)

    def layer_norm(x: str, g: npt.NDArray[np.float32], b: npt.NDArray[np.float32],
                   name: str) -> str:
        return node("LayerNormalization", [x, const(name + ".g", g), const(name + ".b", b)],
                    name + ".out", axis=-1, epsilon=float(w.eps))

    zero = const("axis.zero", np.array([0], dtype=np.int64))
    one = const("axis.one", np.array([1], dtype=np.int64))

    # embeddings: word piece + position (token type 0 folded in), then LayerNorm
    words = node("Gather", [const("word", w.word), "ids"], "emb.words")
    length = node("Shape", ["ids"], "emb.shape", start=1, end=2)
    position = node("Slice", [const("position", w.position), zero, length, zero], "emb.pos")
    x = node("Add", [words, position], "emb.sum")
    x = layer_norm(x, w.ln_g, w.ln_b, "emb.ln")
    for i, layer in enumerate(w.layers):
        p = f"l{i}"
        if calibration is not None:
            layer = _outliers_last(layer, calibration.outliers[i])
        qkv = linear(x, layer.qkv_w, layer.qkv_b, p + ".qkv",
                     None if calibration is None else calibration.qkv_shift[i])
        q, k, v = split(qkv, [d, d, d], [f"{p}.q", f"{p}.k", f"{p}.v"])
        # the query is pre-scaled by 1/sqrt(head dim) (holomem.embedders.bert)
        ctx = node("MultiHeadAttention", [q, k, v], p + ".ctx", domain=_MS, num_heads=heads,
                   scale=1.0)
        attn = linear(ctx, layer.out_w, layer.out_b, p + ".attn")
        x = layer_norm(node("Add", [attn, x], p + ".res1"), layer.ln1_g, layer.ln1_b,
                       p + ".ln1")
        h = linear(x, layer.ff1_w, layer.ff1_b, p + ".ff1",
                   None if calibration is None else calibration.ff1_shift[i])
        h = node("Gelu", [h], p + ".gelu")  # exact: 0.5 h (1 + erf(h / sqrt 2))
        if calibration is None:
            out = linear(h, layer.ff2_w, layer.ff2_b, p + ".ff2")
        else:
            hidden = layer.ff2_w.shape[0]
            kept = hidden - OUTLIERS
            low, high = split(h, [kept, OUTLIERS], [f"{p}.ff2.in8", f"{p}.ff2.in32"])
            out = linear(low, layer.ff2_w[:kept], layer.ff2_b, p + ".ff2")
            wide = node("MatMul", [high, const(p + ".ff2.w32", layer.ff2_w[kept:])],
                        p + ".ff2.mm32")
            out = node("Add", [out, wide], p + ".ff2.sum")
        x = layer_norm(node("Add", [out, x], p + ".res2"), layer.ln2_g, layer.ln2_b,
                       p + ".ln2")
    node("ReduceMean", [x, one], "pooled", keepdims=0)

    graph = helper.make_graph(
        nodes, "holomem_minilm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", "length"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["n", d]), *probed],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid(_MS, 1)],
                              producer_name="holomem")
    model.ir_version = 9
    data: bytes = model.SerializeToString()
    return data
