"""The BERT encoder of ``holomem.embedders.bert`` written as an ONNX graph, for onnxruntime.

Owns: :func:`encoder_graph`, which turns :class:`~holomem.embedders.bert.BertWeights`
into the serialized bytes of an ONNX model mapping word-piece ids ``[n, length]``
(int64, whole sequences, no padding) to mean-pooled token states ``[n, d]`` (float32,
not yet normalised), and :func:`quantize_blocks`, the weights' 8-bit form. Imports
numpy and ``onnx`` (its graph builder only); nothing here runs a model.

Quantised (the default), the weight matrices of the encoder layers (but the second
feed-forward product's, see :data:`EXACT`) are stored as 8-bit
integers with one float32 scale per block of :data:`BLOCK` consecutive inputs of one
output column (symmetric: the zero point is 128 in onnxruntime's unsigned layout), and
applied by onnxruntime's ``MatMulNBits`` at accuracy level 4, which also quantises
each row of its input to 8 bits block by block. No scale is shared between rows, so a
sequence's result does not depend on the other rows of a call. Word and position
embeddings, LayerNorms, the attention products, softmax and GELU stay float32.
Unquantised, the same graph uses float32 ``MatMul`` throughout: the exact model, which
tests compare the quantised one against.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from holomem.embedders.bert import BertWeights

__all__ = ["BLOCK", "EXACT", "OPSET", "encoder_graph", "quantize_blocks"]

#: The ONNX opset the graph is written for (LayerNormalization needs 17).
OPSET = 17
_MS = "com.microsoft"
#: Inputs per quantisation block (onnxruntime accepts powers of two from 16).
BLOCK = 32
#: The per-layer products kept in float32: the second feed-forward product, whose input
#: (the GELU's output) has the longest tails. Quantised too, it moved one LoCoMo dev
#: question out of the top 10 of 883 (recall_any@10 0.8086 against float32's 0.8097);
#: kept exact, the figures are float32's, for a third of the layers' arithmetic.
EXACT = frozenset({"ff2"})


def quantize_blocks(w: npt.NDArray[np.float32], block: int = BLOCK) -> tuple[
        npt.NDArray[np.uint8], npt.NDArray[np.float32]]:
    """``w`` [in, out] in ``MatMulNBits``' 8-bit layout: ``q`` [out, in / block, block]
    (uint8, zero point 128) and ``scale`` [out * in / block], so that column ``j``'s
    inputs ``b * block ...`` are ``(q[j, b] - 128) * scale[j * in / block + b]``. A
    block's scale is its largest magnitude over 127 (1 for a block of zeros)."""
    inputs, outputs = w.shape
    blocks = w.T.reshape(outputs, inputs // block, block)
    peak = np.abs(blocks).max(axis=2)
    scale = np.where(peak > 0, peak / np.float32(127.0), np.float32(1.0)).astype(np.float32)
    q = np.clip(np.rint(blocks / scale[:, :, None]), -127, 127) + 128
    return q.astype(np.uint8), scale.reshape(-1)


def encoder_graph(w: BertWeights, *, quantized: bool = True,
                  exact: frozenset[str] = EXACT) -> bytes:
    """The serialized ONNX model of the encoder over ``w`` (see the module docstring).
    Input ``ids`` int64 ``[n, length]``, output ``pooled`` float32 ``[n, d]``.
    ``quantized``: the layers' products in 8 bits, but for those named in ``exact``
    (of ``qkv``, ``attn``, ``ff1``, ``ff2``), which stay float32."""
    from onnx import NodeProto, TensorProto, helper, numpy_helper

    d = w.dim
    heads = w.heads
    hd = d // heads
    nodes: list[NodeProto] = []
    inits: list[TensorProto] = []

    def const(name: str, value: npt.NDArray[np.generic]) -> str:
        inits.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def node(op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def linear(x: str, weight: npt.NDArray[np.float32], bias: npt.NDArray[np.float32],
               name: str) -> str:
        if not quantized or name.rsplit(".", 1)[-1] in exact:
            y = node("MatMul", [x, const(name + ".w", weight)], name + ".mm")
            return node("Add", [y, const(name + ".bias", bias)], name + ".out")
        inputs, outputs = weight.shape
        q, scale = quantize_blocks(weight)
        return node("MatMulNBits", [x, const(name + ".q", q), const(name + ".scale", scale),
                                    "", "", const(name + ".bias", bias)],
                    name + ".out", domain=_MS, K=inputs, N=outputs, bits=8, block_size=BLOCK,
                    accuracy_level=4)

    def layer_norm(x: str, g: npt.NDArray[np.float32], b: npt.NDArray[np.float32],
                   name: str) -> str:
        return node("LayerNormalization", [x, const(name + ".g", g), const(name + ".b", b)],
                    name + ".out", axis=-1, epsilon=float(w.eps))

    shape_qkv = const("shape.qkv", np.array([0, 0, 3, heads, hd], dtype=np.int64))
    shape_ctx = const("shape.ctx", np.array([0, 0, d], dtype=np.int64))
    zero = const("axis.zero", np.array([0], dtype=np.int64))
    sqrt_half = const("gelu.sqrt_half", np.array(np.sqrt(0.5), dtype=np.float32))
    half = const("gelu.half", np.array(0.5, dtype=np.float32))
    unit = const("gelu.one", np.array(1.0, dtype=np.float32))

    # embeddings: word piece + position (token type 0 folded in), then LayerNorm
    words = node("Gather", [const("word", w.word), "ids"], "emb.words")
    length = node("Shape", ["ids"], "emb.shape", start=1, end=2)
    position = node("Slice", [const("position", w.position), zero, length, zero], "emb.pos")
    x = node("Add", [words, position], "emb.sum")
    x = layer_norm(x, w.ln_g, w.ln_b, "emb.ln")
    for i, layer in enumerate(w.layers):
        p = f"l{i}"
        qkv = linear(x, layer.qkv_w, layer.qkv_b, p + ".qkv")
        qkv = node("Reshape", [qkv, shape_qkv], p + ".qkv5")
        qkv = node("Transpose", [qkv], p + ".qkvT", perm=[2, 0, 3, 1, 4])  # [3, n, h, L, hd]
        q, k, v = (node("Gather", [qkv, const(f"{p}.pick{j}", np.array(j, dtype=np.int64))],
                        f"{p}.{part}", axis=0) for j, part in enumerate("qkv"))
        kt = node("Transpose", [k], p + ".kT", perm=[0, 1, 3, 2])
        scores = node("MatMul", [q, kt], p + ".scores")  # the query is pre-scaled
        probs = node("Softmax", [scores], p + ".probs", axis=-1)
        ctx = node("MatMul", [probs, v], p + ".ctx")
        ctx = node("Transpose", [ctx], p + ".ctxT", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, shape_ctx], p + ".ctx3")
        attn = linear(ctx, layer.out_w, layer.out_b, p + ".attn")
        x = node("Add", [attn, x], p + ".res1")
        x = layer_norm(x, layer.ln1_g, layer.ln1_b, p + ".ln1")
        h = linear(x, layer.ff1_w, layer.ff1_b, p + ".ff1")
        # gelu(h) = h * 0.5 * (1 + erf(h / sqrt 2)), exactly
        e = node("Erf", [node("Mul", [h, sqrt_half], p + ".gelu.s")], p + ".gelu.erf")
        e = node("Add", [e, unit], p + ".gelu.a")
        h = node("Mul", [node("Mul", [h, half], p + ".gelu.h"), e], p + ".gelu")
        out = linear(h, layer.ff2_w, layer.ff2_b, p + ".ff2")
        x = node("Add", [out, x], p + ".res2")
        x = layer_norm(x, layer.ln2_g, layer.ln2_b, p + ".ln2")
    node("ReduceMean", [x], "pooled", axes=[1], keepdims=0)

    graph = helper.make_graph(
        nodes, "holomem_minilm",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n", "length"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["n", d])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid(_MS, 1)],
                              producer_name="holomem")
    model.ir_version = 8
    data: bytes = model.SerializeToString()
    return data
