"""The built-in ``"minilm"`` embedder computes all-MiniLM-L6-v2 as the reference
implementation does (issue 14, item 2).

The reference vectors in ``minilm_reference.json`` were recorded from an independent
run of the same model files with sentence-transformers on PyTorch (not with holomem):
the fixture's ``made_with`` says exactly how (tools, versions, command). Every vector
must have cosine >= 0.999 to its reference, and no coordinate may differ by more than
1e-4 (the references are rounded to 6 decimals), which an approximate activation or a
wrong pooling, truncation or normalisation would break. The long text (10,010 words)
checks truncation at 256 word pieces against sentence-transformers' own.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from holomem.embedders import by_name

FIXTURE = os.path.join(os.path.dirname(__file__), "minilm_reference.json")


def _reference() -> tuple[dict[str, str], dict[str, list[float]]]:
    with open(FIXTURE, encoding="utf-8") as f:
        ref = json.load(f)
    texts = dict(ref["texts"])
    long = ref["long"]
    texts["long"] = long["sentence"] * long["times"]
    assert len(texts["long"].split()) == long["words"] == 10_010
    return texts, ref["vectors"]


TEXTS, VECTORS = _reference()


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_minilm_vector_matches_the_sentence_transformers_reference(name: str) -> None:
    (vector,) = by_name("minilm").embed([TEXTS[name]])
    reference = np.array(VECTORS[name], dtype=np.float64)
    assert vector.shape == reference.shape == (384,)
    cosine = float(vector @ reference) / float(np.linalg.norm(reference))
    assert cosine >= 0.999
    assert float(np.abs(vector - reference).max()) <= 1e-4


def test_the_fixture_covers_the_cases_the_issue_names() -> None:
    assert set(TEXTS) == set(VECTORS)
    assert "" in TEXTS.values()  # the empty string
    assert {"nurse", "nursing", "long"} <= set(TEXTS)
