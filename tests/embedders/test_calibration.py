"""The 8-bit graph's calibration is measured, not tuned by hand, and stored exactly
(issue 29, item 1).

``holomem.embedders.minilm_calibration`` holds the constants the shipped graph is
built with; ``python -m holomem.embedders.calibrate`` measures them on the pinned model
files and fixed texts. These tests prove the stored constants are that measurement,
that their text form round-trips, and that constants of another shape are refused
before a graph is built.
"""

from __future__ import annotations

import numpy as np
import pytest

from holomem.embedders import MiniLM, minilm
from holomem.embedders.bert import BertWeights
from holomem.embedders.calibrate import calibrate, calibration_texts
from holomem.embedders.graph import OUTLIERS, Calibration, encoder_graph, from_source, to_source
from holomem.embedders.minilm_calibration import OUTLIERS as STORED_OUTLIERS
from holomem.embedders.minilm_calibration import SHIFTS


@pytest.fixture(scope="module")
def weights() -> BertWeights:
    data, _ = minilm.read_files(minilm.archive_path())
    return minilm.encoder_weights(data)


def _same(a: Calibration, b: Calibration) -> bool:
    pairs = [*zip(a.qkv_shift, b.qkv_shift, strict=True),
             *zip(a.ff1_shift, b.ff1_shift, strict=True),
             *zip(a.outliers, b.outliers, strict=True)]
    return all(np.array_equal(x, y) for x, y in pairs)


def test_the_calibration_texts_are_the_same_on_every_call() -> None:
    texts = calibration_texts()
    assert texts == calibration_texts() and len(texts) == 256 and len(set(texts)) > 200


def test_the_stored_calibration_is_what_the_calibration_texts_measure(
        weights: BertWeights) -> None:
    embedder = MiniLM()
    ids = [embedder.token_ids(text) for text in calibration_texts()]
    assert _same(calibrate(weights, ids), from_source(SHIFTS, STORED_OUTLIERS))


def test_the_stored_form_round_trips() -> None:
    stored = from_source(SHIFTS, STORED_OUTLIERS)
    namespace: dict[str, object] = {}
    exec(to_source(stored), namespace)  # the module's constants, as the generator prints
    assert namespace["SHIFTS"] == SHIFTS and namespace["OUTLIERS"] == STORED_OUTLIERS
    # most channels are unshifted; a few wide ones are
    shifts = np.concatenate([*stored.qkv_shift, *stored.ff1_shift])
    assert 0.5 < float(np.mean(shifts == 0)) < 1.0


def test_a_calibration_that_does_not_fit_the_model_is_refused(weights: BertWeights) -> None:
    stored = from_source(SHIFTS, STORED_OUTLIERS)
    short = Calibration(qkv_shift=stored.qkv_shift[:-1], ff1_shift=stored.ff1_shift[:-1],
                        outliers=stored.outliers[:-1])
    with pytest.raises(ValueError, match="number of layers"):
        encoder_graph(weights, short)
    unsorted = Calibration(qkv_shift=stored.qkv_shift, ff1_shift=stored.ff1_shift,
                           outliers=(stored.outliers[0][::-1], *stored.outliers[1:]))
    with pytest.raises(ValueError, match="layer 0"):
        encoder_graph(weights, unsorted)
    wide = Calibration(qkv_shift=stored.qkv_shift, ff1_shift=stored.ff1_shift,
                       outliers=(np.arange(OUTLIERS + 1), *stored.outliers[1:]))
    with pytest.raises(ValueError, match="layer 0"):
        encoder_graph(weights, wide)
    with pytest.raises(ValueError, match="probes"):
        encoder_graph(weights, stored, probes=True)
    with pytest.raises(ValueError, match="two shift rows"):
        from_source(SHIFTS[:-1], STORED_OUTLIERS)
