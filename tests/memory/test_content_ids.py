"""A fact's content id is the SHA-256 of its canonical payload, and that payload is
always the bytes of Python's ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` — whichever encoder remember uses for it (the fast one when
nothing in it is a float), so an id never changes between versions or inputs.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import hypothesis.strategies as st
import msgspec
from hypothesis import given, settings

from holomem.api import remember
from holomem.api.types import RememberInput

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=40)
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), _text,
                  st.floats(allow_nan=False, allow_infinity=False))
_json = st.recursive(_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)), max_leaves=8)


def _reference(x: RememberInput) -> bytes:
    payload = {k: v for k, v in msgspec.to_builtins(x).items()
               if k != "id" and v is not None and not (k == "namespace" and not v)}
    return json.dumps(payload, sort_keys=True, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


@settings(max_examples=300, deadline=None)
@given(text=_text.filter(str.strip), subject=st.none() | _text,
       entities=st.none() | st.lists(_text, max_size=3),
       metadata=st.none() | st.dictionaries(_text, _json, max_size=4),
       times=st.lists(st.none() | st.integers(0, 2**53), min_size=3, max_size=3),
       confidence=st.none() | st.floats(0, 1),
       embedding=st.none() | st.lists(st.floats(-1e20, 1e20), min_size=1, max_size=3),
       namespace=st.none() | st.lists(_text, max_size=2))
def test_the_canonical_payload_is_json_dumps_bytes_for_every_input(
        text: str, subject: str | None, entities: list[str] | None,
        metadata: dict[str, Any] | None, times: list[int | None], confidence: float | None,
        embedding: list[float] | None, namespace: list[str] | None) -> None:
    x = RememberInput(text=text, subject=subject, entities=entities, metadata=metadata,
                      event_time=times[0], valid_from=times[1], valid_to=times[2],
                      confidence=confidence, embedding=embedding, namespace=namespace)
    assert remember.canonical_payload(x) == _reference(x)
    assert remember.digest(x) == hashlib.sha256(_reference(x)).digest()


def test_a_known_input_keeps_its_content_id() -> None:
    """Pinned: the id of one plain fact, as the versions before the fast encoder
    derived it."""
    x = RememberInput(text="Alice lives in Paris \u00e9\n", subject="alice/home",
                      metadata={"b": [1, True, None], "a": "x"})
    assert remember.content_id(remember.digest(x)) == "f-3e9a7d49c6d65d92667f3b37dd892aaa"
