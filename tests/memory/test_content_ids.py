"""A fact's content id is the SHA-256 of its canonical payload, and that payload is
always the bytes of Python's ``json.dumps(sort_keys=True, separators=(",", ":"),
ensure_ascii=False)`` — whichever encoder remember uses for it (the fast one when
nothing in it is a float), so an id never changes between versions or inputs. The one
change, once: a payload with a vector has digest 2 (the JSON without the vector, then
its float32 bytes), and its id with it; the digest 1 of such an input is still computed
(``legacy_digest``) so that a retry of a fact stored before is recognised.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import hypothesis.strategies as st
import msgspec
import numpy as np
from hypothesis import given, settings

from holomem.api.memory.remember import intake
from holomem.api.memory.types import RememberInput

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
    assert intake.canonical_payload(x) == _reference(x)
    if embedding is None:  # digest 1
        assert intake.digest(x) == hashlib.sha256(_reference(x)).digest()
        assert intake.legacy_digest(x) is None
        return
    # digest 2: the payload without the vector, then the vector's float32 bytes; the
    # digest the versions before it gave is still computed, for their facts' retries.
    assert intake.legacy_digest(x) == hashlib.sha256(_reference(x)).digest()
    with np.errstate(over="ignore"):
        f32 = np.array(embedding, dtype="<f4")
    if np.isfinite(f32).all() and f32.any():
        rest = msgspec.structs.replace(x, embedding=None)
        assert intake.digest(x) == hashlib.sha256(
            intake.DIGEST_2 + _reference(rest) + b"\n" + f32.tobytes()).digest()


def test_a_known_input_keeps_its_content_id() -> None:
    """Pinned: the id of one plain fact, as the versions before the fast encoder
    derived it."""
    x = RememberInput(text="Alice lives in Paris \u00e9\n", subject="alice/home",
                      metadata={"b": [1, True, None], "a": "x"})
    assert intake.content_id(intake.digest(x)) == "f-3e9a7d49c6d65d92667f3b37dd892aaa"


_ASCII = st.text(st.characters(max_codepoint=127), max_size=12)
_piece = st.sampled_from(["x", " ", "", "\t", '"', "\\", "\x00", "\x7f", "é", "\ud800",
                          "a" * 513, "w " * 2100])
_odd = st.lists(_piece, max_size=3).map("".join)


@st.composite
def _batch_input(draw: st.DrawFn) -> RememberInput:
    text = draw(_ASCII.filter(str.strip) | _odd)
    ident = draw(st.none() | _ASCII | _odd)
    subject = draw(st.none() | _ASCII | _odd)
    other = draw(st.sampled_from([{}, {}, {}, {"confidence": 0.5}, {"entities": ["e"]},
                                  {"namespace": []}, {"ttl_ms": 5}]))
    return RememberInput(text=text, id=ident, subject=subject, **other)


def _checked_one_by_one(items: list[RememberInput]) -> object:
    try:
        return [intake.check(x, i) for i, x in enumerate(items)]
    except Exception as exc:  # the error is the answer being compared
        return (type(exc), str(exc))


@settings(max_examples=400, deadline=None)
@given(st.lists(_batch_input(), min_size=1, max_size=6))
def test_a_batch_checked_together_gets_each_input_s_digest_and_the_same_first_error(
        items: list[RememberInput]) -> None:
    try:
        together: object = intake.check_all(items)
    except Exception as exc:
        together = (type(exc), str(exc))
    assert together == _checked_one_by_one(items)


def test_a_plain_batch_is_checked_a_column_at_a_time() -> None:
    """Plain inputs (an ASCII text, maybe an id and a subject) take the column path,
    whose digests are those of the payload's reference bytes."""
    items = [RememberInput(text='Alice said "hi" \\ there\t'),
             RememberInput(text="Bob", id="b-1", subject="people/bob")]
    digests = intake.plain_digests(items)
    assert digests == [hashlib.sha256(_reference(x)).digest() for x in items]
