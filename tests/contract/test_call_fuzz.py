"""No client input can cause an internal failure (docs/contract.md §5).

``Memory.call`` is fed arbitrary JSON-like requests (recursive dicts, lists,
strings, ints of any size, floats including NaN and infinity, booleans, None,
values nested far past Python's recursion limit),
requests made of each op's real field names with wrong-typed or edge values, and
arbitrary op names. It may only answer, with a JSON-serialisable response, or
raise a caller error of the library's vocabulary (``invalid_request``, ``limit``,
``not_found``, ``conflict``): never anything else.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.config import (
    ConsolidationConfig,
    Duplicates,
    Exponential,
    ForgettingConfig,
    RecencyConfig,
)
from holomem.api.memory.ops import OPS
from holomem.errors import HolomemError

CODES = {"invalid_request", "limit", "not_found", "conflict"}
IDS = ["k1", "k2", "k3", "k4", "plain", "nope"]

FIELDS: dict[str, list[str]] = {
    "remember": ["id", "text", "subject", "entities", "metadata", "embedding", "eventTime",
                 "validFrom", "validTo", "supersedes", "facts"],
    "recall": ["query", "k", "asOf", "knownAt", "history", "subject", "entities",
               "embedding", "explain", "candidateLimit"],
    "explain": ["query", "id", "k", "asOf", "knownAt", "history", "subject", "entities",
                "embedding", "explain", "candidateLimit"],
    "forget": ["scope", "includeChain", "dryRun", "purge"],
    "get": ["id"],
    "history": ["id"],
    "applyForgetting": ["dryRun", "includeChain", "purge"],
    "consolidate": ["dryRun", "allowDestructive"],
    "probe": ["entity", "k"],
    "related": ["entity", "k"],
    "reason": ["entities", "k"],
    "contradict": ["subject", "entity", "k", "maxPairs", "cursor"],
    "feedback": ["id", "helpful", "note"],
    "setConfidence": ["id", "confidence"],
    "list": ["cursor", "limit", "filter", "history"],
    "export": ["namespace", "cursor", "limit"],
    "import": ["records", "batchSize", "dropEmbeddings", "relations"],
}
#: The fields of an export record (an import request's records).
RECORD_FIELDS = ["id", "text", "ingestTime", "namespace", "subject", "entities", "metadata",
                 "embedding", "eventTime", "validFrom", "validTo", "requested", "links",
                 "confidence", "feedback", "digest", "format", "ttlMs", "relations"]
#: For an op added later and not listed above: every field name any op takes.
ALL_FIELDS = sorted({f for names in FIELDS.values() for f in names})
SCOPE_FIELDS = ["ids", "subject", "entity", "ingestedBefore", "eventBefore", "metadata"]

# Text of any kind, lone surrogates and control characters included.
any_text = st.text(alphabet=st.characters(exclude_categories=()), max_size=12)
plain_text = st.sampled_from(["", "tea", "kim drinks tea", "Kim Lee met Bob", "zzz",
                              "a" * 600, "x\x00y", "k1", "kim/drink", "\ud800"])
scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.integers(min_value=-3, max_value=3) | any_text | plain_text
           | st.sampled_from(IDS) | st.sampled_from([0, 1, 10, 2**62, -2**62, 2**63, 1e308]))
json_like = st.recursive(
    scalars,
    lambda children: (st.lists(children, max_size=4)
                      | st.dictionaries(any_text | st.sampled_from(SCOPE_FIELDS), children,
                                        max_size=4)),
    max_leaves=10)
# Values of the right shape, so that requests get past decoding and reach the API.
good_values = (st.sampled_from(IDS) | plain_text
               | st.lists(st.sampled_from(IDS), max_size=3)
               | st.lists(st.floats(width=32) | st.integers(-2, 2), min_size=1, max_size=4)
               | st.integers(min_value=-5, max_value=2_000_000)
               | st.sampled_from(["current", "all", "historical"])
               | st.dictionaries(st.sampled_from(SCOPE_FIELDS),
                                  st.sampled_from(IDS) | st.lists(st.sampled_from(IDS))
                                  | st.integers(0, 2_000_000), min_size=1, max_size=2)
               | st.dictionaries(st.sampled_from(["src", "n"]), scalars, max_size=2)
               | st.dictionaries(st.sampled_from(["subject", "entity", "status"]),
                                 st.sampled_from(["kim/drink", "Kim", "current", "expired"])
                                 | scalars, max_size=2))

def nest(depth: int, kind: str) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


# Nesting around the contract's depth limit, and far past Python's recursion limit
# (msgspec and recursive checks used to raise RecursionError).
deep = st.builds(nest, st.integers(1, 80) | st.integers(900, 200_000),
                 st.sampled_from(["list", "dict"]))
field_value = json_like | good_values | deep


def requests_for(op: str) -> st.SearchStrategy[Any]:
    named = st.dictionaries(st.sampled_from(FIELDS.get(op, ALL_FIELDS)), field_value,
                            max_size=5)
    facts = st.fixed_dictionaries({"facts": st.lists(
        st.dictionaries(st.sampled_from(FIELDS["remember"][:-1]), field_value, max_size=5),
        max_size=3)})
    records = st.fixed_dictionaries({"records": st.lists(
        st.dictionaries(st.sampled_from(RECORD_FIELDS), field_value, max_size=6)
        | st.fixed_dictionaries({"id": st.sampled_from(IDS), "text": plain_text,
                                 "ingestTime": st.integers(-5, 2**63)}), max_size=3)})
    extra = st.dictionaries(any_text, json_like, max_size=3)
    out = named | st.builds(lambda a, b: {**a, **b}, named, extra) | json_like
    if op == "import":
        return out | records
    return out | facts if op == "remember" else out


def make_memory(path: Path) -> Memory:
    """A store with a little of everything: supersession, windows, embeddings, a plain doc."""
    store = Store.open(path, sync="none")
    config = MemoryConfig(
        supersession="latest-by-subject", entity_extractor="regex",
        recency=RecencyConfig(exponential=Exponential(half_life_ms=1_000)),
        forgetting=ForgettingConfig(expired_for_longer_than_ms=10,
                                    superseded_for_longer_than_ms=10),
        consolidation=ConsolidationConfig(duplicates=Duplicates(near_threshold=0.5),
                                          remove_sources=True))
    memory = Memory(store, config, clock=ManualClock(1_000_000))
    memory.remember(id="k1", text="Kim drinks tea", subject="kim/drink", valid_from=10,
                    embedding=[1.0, 0.0, 0.0], metadata={"src": "a"})
    memory.remember(id="k2", text="Kim drinks coffee", subject="kim/drink", valid_from=20,
                    embedding=[0.0, 1.0, 0.0])
    memory.remember(id="k3", text="kim drinks tea", valid_to=30, entities=["Kim"])
    store.add_document("plain", "a plain document about tea")
    return memory


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memory]:
    previous = logging.getLogger("holomem").level
    logging.getLogger("holomem").setLevel(logging.ERROR)
    memory = make_memory(tmp_path_factory.mktemp("fuzz") / "store")
    yield memory
    logging.getLogger("holomem").setLevel(previous)
    memory.store.close()


def call(memory: Memory, op: Any, request: Any) -> None:
    try:
        response = memory.call(op, request)
    except HolomemError as exc:
        assert exc.code in CODES, exc.code
        assert exc.status in (422, 404, 409)
        return
    assert isinstance(response, dict)
    json.dumps(response, allow_nan=False)


FUZZ = settings(max_examples=120, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow, HealthCheck.filter_too_much])
FUZZ_DEEP = settings(FUZZ, max_examples=60)


@pytest.mark.parametrize("op", sorted(OPS))
def test_any_request_gives_a_response_or_a_contract_error(memory: Memory, op: str) -> None:
    @FUZZ
    @given(request=requests_for(op))
    def run(request: Any) -> None:
        memory.clock.advance(1)  # type: ignore[attr-defined]
        call(memory, op, request)

    run()


@FUZZ
@given(op=any_text | st.sampled_from([o.upper() for o in OPS] + [" recall", "get "])
       | st.integers() | st.none() | st.lists(any_text, max_size=2),
       request=json_like)
def test_unknown_ops_are_invalid_requests(memory: Memory, op: Any, request: Any) -> None:
    if isinstance(op, str) and op in OPS:
        return
    with pytest.raises(HolomemError) as info:
        memory.call(op, request)
    assert info.value.code == "invalid_request"


@FUZZ
@given(op=st.sampled_from(sorted(OPS)), request=json_like.filter(
    lambda r: not isinstance(r, dict)) | st.dictionaries(st.integers(), scalars, min_size=1))
def test_a_request_that_is_not_an_object_is_invalid(memory: Memory, op: str,
                                                    request: Any) -> None:
    with pytest.raises(HolomemError) as info:
        memory.call(op, request)
    assert info.value.code == "invalid_request"


@FUZZ_DEEP
@given(op=st.sampled_from(sorted(OPS)), depth=st.integers(60, 200_000),
       kind=st.sampled_from(["list", "dict"]), where=st.sampled_from(
           [*ALL_FIELDS, "facts", "scope", "filter", "metadata"]))
def test_deeply_nested_requests_are_contract_errors(memory: Memory, op: str, depth: int,
                                                    kind: str, where: str) -> None:
    """Regression (issue 11): deep nesting raised RecursionError from Memory.call."""
    value = nest(depth, kind)
    for request in ({where: value}, {"text": "x", "query": "x", "id": "k1", where: value},
                    {"facts": [{"text": "x", "metadata": {"m": value}}]},
                    {"scope": {"metadata": {"m": value}}}, {"filter": value}):
        call(memory, op, request)


def test_valid_requests_of_every_op_succeed(tmp_path: Path) -> None:
    """A store like the fuzzers' answers ordinary requests (so the fuzz reaches the API).

    A fresh one: the fuzzers may really forget any of its facts, in any test order.
    """
    memory = make_memory(tmp_path / "store")
    requests: dict[str, dict[str, Any]] = {
        "remember": {"text": "Lee drinks juice", "subject": "lee/drink", "validFrom": 5},
        "recall": {"query": "drinks", "history": "all", "explain": True, "asOf": 25},
        "explain": {"query": "tea", "id": "k1"},
        "forget": {"scope": {"ids": ["nope"]}, "dryRun": True},
        "get": {"id": "k2"},
        "history": {"id": "k1"},
        "applyForgetting": {},
        "consolidate": {},
        "info": {},
        "capabilities": {},
        "export": {"limit": 2, "namespace": []},
        "import": {"records": [{"id": "imported", "text": "Lee drinks water",
                                "ingestTime": 7}], "batchSize": 1},
    }
    for op, request in requests.items():
        response = memory.call(op, request)
        json.dumps(response, allow_nan=False)
    memory.store.close()
