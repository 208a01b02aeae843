"""The Python client refuses NaN and infinities as Memory does, before anything is sent.

JSON has no NaN or infinity, and msgspec writes them as null: sent as they were, a NaN
confidence would be stored as the default 1.0, and an infinity in metadata as None.
``Client`` and ``AsyncClient`` raise Memory's ``InvalidError`` instead (its message,
where Memory has its own), for a float anywhere in a request, ``call`` included
(Hypothesis over the floats, against a real server and an embedded Memory).
"""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from holomem import InvalidError, Memory, MemoryConfig, Store
from holomem.client import AsyncClient, Client
from holomem.errors import HolomemError

from .conftest import API_KEY, Server, start

_texts = (f"fact number {n}" for n in itertools.count())


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start(tmp_path_factory.mktemp("nonfinite") / "data")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    store = Store.open(tmp_path_factory.mktemp("nonfinite-local") / "store", sync="none")
    yield Memory(store, MemoryConfig())
    store.close()


def outcome(call: Callable[[], Any], read: Callable[[str], Any]) -> tuple[Any, ...]:
    """What a remember did: its error's class and message, or what was stored."""
    try:
        fact = call()
    except HolomemError as exc:
        return type(exc), str(exc)
    stored = read(fact.id)
    return stored.confidence, stored.metadata


PLACES: dict[str, Callable[[float], dict[str, Any]]] = {
    "confidence": lambda x: {"confidence": x},
    "metadata": lambda x: {"metadata": {"score": x}},
    "metadata list": lambda x: {"metadata": {"xs": [1.0, x, "y"]}},
    "nested metadata": lambda x: {"metadata": {"a": {"b": [[x]]}}},
}


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=st.floats(), place=st.sampled_from(sorted(PLACES)))
@example(value=math.nan, place="confidence")
@example(value=math.inf, place="metadata")
@example(value=-math.inf, place="metadata list")
@example(value=0.5, place="confidence")
def test_a_float_is_refused_or_stored_by_the_client_exactly_as_by_memory(
        server: Server, memory: Memory, value: float, place: str) -> None:
    text = next(_texts)
    fields = PLACES[place](value)
    local = outcome(lambda: memory.remember(text, **fields), memory.get)
    with Client(server.url, api_key=API_KEY, tenant="floats") as client:
        remote = outcome(lambda: client.remember(text, **fields), client.get)
    if not math.isfinite(value):
        assert local[0] is InvalidError
    assert remote == local


CALLS: dict[str, Callable[[float], tuple[str, dict[str, Any]]]] = {
    "remember confidence": lambda x: ("remember", {"text": "t", "confidence": x}),
    "remember metadata": lambda x: ("remember", {"text": "t", "metadata": {"m": [x]}}),
    "facts": lambda x: ("remember", {"facts": [{"text": "u"}, {"text": "v", "confidence": x}]}),
    "setConfidence": lambda x: ("setConfidence", {"id": "f-none", "confidence": x}),
}


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(value=st.sampled_from([math.nan, -math.nan, math.inf, -math.inf]),
       which=st.sampled_from(sorted(CALLS)))
def test_call_refuses_a_non_finite_float_with_memory_calls_error(
        server: Server, memory: Memory, value: float, which: str) -> None:
    op, request = CALLS[which](value)
    with pytest.raises(InvalidError) as local:
        memory.call(op, request)
    with Client(server.url, api_key=API_KEY, tenant="calls") as client, \
            pytest.raises(InvalidError) as remote:
        client.call(op, request)
    assert str(remote.value) == str(local.value)


def test_a_non_finite_float_is_refused_before_anything_is_sent(server: Server) -> None:
    with Client(server.url, api_key=API_KEY, tenant="unsent") as client:
        fact = client.remember("one fact")
        refused: list[Callable[[], Any]] = [
            lambda: client.remember("a", confidence=math.nan),
            lambda: client.remember("b", metadata={"x": [math.inf]}),
            lambda: client.remember_many([{"text": "c"}, {"text": "d", "confidence": -math.inf}]),
            lambda: client.set_confidence(fact.id, math.nan),
            lambda: client.call("setConfidence", {"id": fact.id, "confidence": math.nan}),
            lambda: client.call("remember", {"text": "e", "metadata": {"x": math.nan}}),
        ]
        for call in refused:
            with pytest.raises(InvalidError, match=r"NaN and infinity|between 0 and 1"):
                call()
        stored = client.get(fact.id)
        assert stored is not None and stored.confidence == 1.0
        assert client.info().facts == 1

        async def main() -> None:
            async with AsyncClient(server.url, api_key=API_KEY, tenant="unsent") as aclient:
                with pytest.raises(InvalidError, match="between 0 and 1"):
                    await aclient.remember("f", confidence=math.nan)
                with pytest.raises(InvalidError, match=r"metadata\.x: NaN and infinity"):
                    await aclient.remember("g", metadata={"x": math.inf})
                with pytest.raises(InvalidError, match="between 0 and 1"):
                    await aclient.call("remember", {"text": "h", "confidence": math.inf})

        asyncio.run(main())
        assert client.info().facts == 1
