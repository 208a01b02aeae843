"""Measuring the constants of the 8-bit encoder graph, and their stored text form.

Owns: :func:`calibration_texts` (the fixed texts measured) and :func:`calibrate`
(which runs the exact graph of ``holomem.embedders.graph`` over them and derives a
:class:`~holomem.embedders.graph.Calibration`); run as a module, it prints the
constants ``holomem.embedders.minilm_calibration`` stores. Imports numpy, the stdlib,
``holomem.embedders.graph`` and ``holomem.embedders.bert``; onnxruntime only inside
:func:`calibrate`, and ``holomem.embedders.minilm`` (for the model files) only when
run as a module.

The measurement, for each layer's query-key-value and first feed-forward products:
``x[j]``, the largest magnitude input channel ``j`` takes over every token of every
calibration text, and ``w[j]``, the largest magnitude of the weight row it multiplies;
the channel's shift is ``round(log2(x[j] ** ALPHA / w[j] ** (1 - ALPHA)))`` (SmoothQuant
with migration strength :data:`ALPHA`, rounded to a power of two), less the most common
shift of the product (a shift shared by every channel changes no quantised value). For the second
feed-forward product, the :data:`~holomem.embedders.graph.OUTLIERS` channels with the
largest ``x[j]`` (ties to the lower channel) stay float32. The texts are made here from
fixed templates by a seeded generator, so the figures depend on the model files alone;
they are computed once, by ``python -m holomem.embedders.calibrate``, and stored: the
embedder never measures at load, so every machine builds the same graph.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from holomem.embedders.bert import BertWeights
from holomem.embedders.graph import OUTLIERS, PRODUCTS, Calibration, encoder_graph, to_source

__all__ = ["ALPHA", "calibrate", "calibration_texts"]

#: SmoothQuant's migration strength: 0 leaves the inputs, 1 moves all their range.
ALPHA = 0.7
_SEED = 29

_WHO = ("I", "She", "My brother", "Our team", "The doctor", "Alice", "We", "They",
        "Grandma", "Tom and Sara", "My neighbour", "You")
_DID = ("went hiking near", "painted a picture of", "talked about", "moved to",
        "cooked dinner at", "read a book about", "adopted a dog from", "started a new job at",
        "volunteered at", "took photos of", "learned to play guitar in", "visited")
_WHAT = ("the lake", "Paris last summer", "the community garden", "a small startup",
         "the animal shelter", "the old library", "my sister's wedding", "the mountains",
         "a pottery class", "the hospital", "New York in 2022", "the beach at sunset")
_TAIL = ("", " and it was amazing!", " because I needed a break.", " with my kids.",
         " - it made me so happy :)", " last week.", "? What do you think?",
         ", which reminded me of my childhood.", " on 8 May 2023.", " again.")
_ASK = ("What did you do last weekend?", "How is your new job going?",
        "Do you have any pets?", "Where are you travelling next?",
        "When did she start painting?", "Why did they move?",
        "Who went to the concert with you?", "What is her favourite book?")


def calibration_texts(n: int = 256) -> list[str]:
    """``n`` conversational texts of one to five sentences, the same on every run."""
    rng = random.Random(_SEED)

    def sentence() -> str:
        if rng.random() < 0.2:
            return rng.choice(_ASK)
        return f"{rng.choice(_WHO)} {rng.choice(_DID)} {rng.choice(_WHAT)}{rng.choice(_TAIL)}"

    return [" ".join(sentence() for _ in range(rng.choice((1, 1, 2, 3, 5))))
            for _ in range(n)]


def calibrate(w: BertWeights, token_ids: Sequence[Sequence[int]],
              alpha: float = ALPHA) -> Calibration:
    """The calibration of ``w`` measured on ``token_ids`` (one sequence each, as the
    embedder runs them; see the module docstring)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(encoder_graph(w, probes=True), options,
                                           providers=["CPUExecutionProvider"])
    peaks: list[npt.NDArray[np.float32]] | None = None
    for ids in token_ids:
        outputs: list[Any] = session.run(None, {"ids": np.array([list(ids)], dtype=np.int64)})
        seen = [np.abs(o.reshape(-1, o.shape[-1])).max(axis=0) for o in outputs[1:]]
        peaks = seen if peaks is None else [np.maximum(a, b) for a, b in zip(peaks, seen,
                                                                              strict=True)]
    if peaks is None:
        raise ValueError("calibrate needs at least one sequence")
    qkv, ff1, outliers = [], [], []
    for i, layer in enumerate(w.layers):
        peak = dict(zip(PRODUCTS, peaks[len(PRODUCTS) * i:len(PRODUCTS) * (i + 1)],
                        strict=True))
        qkv.append(_shifts(peak["qkv"], layer.qkv_w, alpha))
        ff1.append(_shifts(peak["ff1"], layer.ff1_w, alpha))
        order = np.argsort(-peak["ff2"].astype(np.float64), kind="stable")
        outliers.append(np.sort(order[:OUTLIERS]).astype(np.int64))
    return Calibration(qkv_shift=tuple(qkv), ff1_shift=tuple(ff1), outliers=tuple(outliers))


def _shifts(peak: npt.NDArray[np.float32], weight: npt.NDArray[np.float32],
            alpha: float) -> npt.NDArray[np.int8]:
    raw = [round(alpha * math.log2(max(x, 1e-6)) - (1 - alpha) * math.log2(max(r, 1e-6)))
           for x, r in zip(peak.tolist(), np.abs(weight).max(axis=1).tolist(), strict=True)]
    common = max(sorted(set(raw)), key=raw.count)  # the most common, the lowest of a tie
    return np.array([min(7, max(-8, e - common)) for e in raw], dtype=np.int8)


def _main() -> None:  # python -m holomem.embedders.calibrate: print the stored constants
    from holomem.embedders import minilm

    weights, _ = minilm.read_files(minilm.archive_path())
    embedder = minilm.MiniLM()  # (its tokenizer: the sequences the embedder runs)
    ids = [embedder.token_ids(text) for text in calibration_texts()]
    print(to_source(calibrate(minilm.encoder_weights(weights), ids)), end="")


if __name__ == "__main__":
    _main()
