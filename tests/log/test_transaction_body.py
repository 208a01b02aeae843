"""A transaction body splits back into exactly the payloads it was packed from, and a
malformed body is refused with its reason, never split into wrong payloads."""

from __future__ import annotations

import hypothesis.strategies as st
import pytest
from hypothesis import given

from holomem.log.frame import BadBody, pack_tx, unpack_tx


@given(st.lists(st.binary(max_size=40), min_size=0, max_size=12))
def test_a_packed_body_unpacks_to_its_payloads(payloads: list[bytes]) -> None:
    assert unpack_tx(pack_tx(payloads)) == payloads


@given(st.lists(st.binary(max_size=20), min_size=1, max_size=6), st.data())
def test_a_cut_or_padded_body_is_refused(payloads: list[bytes], data: st.DataObject) -> None:
    body = pack_tx(payloads)
    if data.draw(st.booleans()):
        bad = body[: data.draw(st.integers(0, len(body) - 1))]
    else:
        bad = body + data.draw(st.binary(min_size=1, max_size=8))
    with pytest.raises(BadBody):
        unpack_tx(bad)


def test_a_count_past_the_body_is_refused() -> None:
    body = pack_tx([b"abc"])
    with pytest.raises(BadBody, match="ends inside"):
        unpack_tx((1000).to_bytes(4, "little") + body[4:])
