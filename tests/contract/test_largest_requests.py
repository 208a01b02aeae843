"""The largest request every op allows is answered within a documented memory bound.

Issue 11, item 2: one ``reason`` with 6,000 entities (a 30 KB body) took a 20,000-fact
server from 77 MB to 3.3 GB. Every op's request is now bounded by documented limits,
and its memory grows with the store or with the request, never with their product.
Here each op gets the largest request its limits allow, on a store with facts of a
little of everything (subjects with long chains, an entity every other fact carries,
embeddings, feedback), and the peak of the memory Python and numpy allocate during
the call (``tracemalloc``) must stay below :func:`bound` — the figure the README's
"Limits" section documents. The same requests then run on a store twice the size:
the peak may grow with the store, but not by more than the store's growth allows.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.engine import nesting, validate
from holomem.api.memory import memory as memory_module
from holomem.api.memory import requests as shapes
from holomem.api.memory.config import (
    ConsolidationConfig,
    Duplicates,
    FeedbackConfig,
    ForgettingConfig,
)
from holomem.api.memory.conversation import calls as conversation
from holomem.api.memory.entities import profile
from holomem.api.memory.facts import listing
from holomem.api.memory.forget import removal as forgetting
from holomem.api.memory.graph import evidence, reach, relations
from holomem.api.memory.holographic import algebra, contradiction
from holomem.api.memory.ops import OPS
from holomem.api.memory.recall import rank as recall_api
from holomem.api.memory.window import budget, working
from holomem.errors import HolomemError

MiB = 1 << 20
#: The documented bound (README "Limits"): every op's largest request allocates at most
#: 48 MiB plus 8 KiB per stored fact (the remember of MAX_FACTS facts, whose request is
#: itself ~2 MiB of Python objects, is the largest), during the call.
BASE_BYTES = 48 * MiB
PER_FACT_BYTES = 8 * 1024
VOCABULARY = [f"w{i}" for i in range(3000)]
NAMES = [f"N{i}" for i in range(400)]


def bound(facts: int) -> int:
    return BASE_BYTES + PER_FACT_BYTES * facts


def build(path: Path, n: int) -> Memory:
    rnd = random.Random(n)
    store = Store.open(path, sync="none")
    memory = Memory(store, MemoryConfig(
        supersession="latest-by-subject", feedback=FeedbackConfig(weight=0.5),
        forgetting=ForgettingConfig(superseded_for_longer_than_ms=0),
        consolidation=ConsolidationConfig(duplicates=Duplicates(near_threshold=0.5))),
        clock=ManualClock(1_000_000))
    batch = []
    for i in range(n):
        batch.append({
            "id": f"f{i}",
            "text": " ".join(rnd.choice(VOCABULARY) for _ in range(rnd.randint(4, 16))),
            "entities": rnd.sample(NAMES, rnd.randint(0, 3)) + (["User"] if i % 2 else []),
            "subject": f"s{i % 50}" if i % 3 == 0 else None,  # chains of n/150 versions
            "embedding": [rnd.random() + 0.01 for _ in range(8)],
        })
        if len(batch) == 2000:
            memory.remember_many(batch)
            batch = []
    if batch:
        memory.remember_many(batch)
    for i in range(0, n, 97):
        memory.feedback(f"f{i}", helpful=bool(i % 2))
    for i in range(0, n - 7, 3):  # links for why and graph recall to walk
        memory.relate(f"f{i}", f"f{i + 7}", "next")
    return memory


_IMPORTS = itertools.count()


def largest(op: str) -> dict[str, Any]:
    """The largest request each op's limits allow (every size at its maximum)."""
    query = " ".join(VOCABULARY[: validate.MAX_QUERY_TERMS])
    recall = {"query": query, "k": recall_api.MAX_RECALL_K,
              "candidateLimit": recall_api.MAX_CANDIDATES, "history": "all",
              "explain": True, "embedding": [0.5] * 8,
              "graph": {"hops": reach.MAX_GRAPH_HOPS, "weight": 0.5}}
    per = budget.MAX_FRAGMENT_BYTES // budget.MAX_FRAGMENTS - 10
    compile_context = {
        "query": query, "budgetTokens": budget.MAX_BUDGET, "k": budget.MAX_K,
        "history": "all",
        "fragments": [{"id": f"frag-{i}", "text": " ".join(VOCABULARY[i:])[:per]}
                      for i in range(budget.MAX_FRAGMENTS)]}
    requests: dict[str, dict[str, Any]] = {
        # Subjects spread as in a bulk load: supersession planning is linear in the facts
        # of a subject per fact, so one subject's batch costs time (not memory) quadratic
        # in its share of the batch (README "Limits").
        "remember": {"facts": [{"text": f"new fact {i} " + " ".join(VOCABULARY[i % 50:][:20]),
                                "subject": f"s{i % 500}", "entities": NAMES[: i % 8],
                                "metadata": {"i": i}, "embedding": [0.25] * 8}
                               for i in range(memory_module.MAX_FACTS)]},
        # A new session each time: every turn and reply link is written.
        "rememberConversation": {
            "session": f"conversation-{next(_IMPORTS)}", "time": 1000,
            "messages": [{"role": ("user", "assistant")[i % 2], "time": 1000 + i,
                          "content": f"turn {i} " + " ".join(VOCABULARY[i % 50:][:20])}
                         for i in range(conversation.MAX_MESSAGES)]},
        "recall": recall,
        "explain": {**recall, "id": "f0"},
        "forget": {"scope": {"ids": [f"f{i}" for i in range(forgetting.MAX_IDS)]},
                   "dryRun": True, "includeChain": True},
        "get": {"id": "f0"},
        "history": {"id": "f0"},
        "applyForgetting": {"dryRun": True, "includeChain": True},
        "consolidate": {"dryRun": True},
        "probe": {"entity": "User", "k": algebra.MAX_K},
        "related": {"entity": "User", "k": algebra.MAX_K},
        "reason": {"entities": ["User"] * algebra.MAX_REASON_ENTITIES,
                   "k": algebra.MAX_K},
        "contradict": {"k": algebra.MAX_K, "maxPairs": contradiction.MAX_PAIRS_LIMIT},
        # "User" is carried by half the store's facts, and s* subjects key "s0".."s49".
        "entityProfile": {"name": "User", "limit": profile.MAX_LIMIT, "asOf": 2_000_000},
        "feedback": {"id": "f1", "helpful": False, "note": "n" * validate.MAX_TEXT_BYTES},
        "setConfidence": {"id": "f1", "confidence": 0.5},
        "list": {"limit": listing.MAX_LIMIT, "history": "all"},
        "listNamespaces": {"prefix": [], "maxDepth": validate.MAX_NAMESPACE_DEPTH,
                           "limit": listing.MAX_LIMIT},
        "info": {},
        "capabilities": {},
        "relate": {"fromId": "f1", "toId": "f2", "relation": "r" * validate.MAX_ID_CHARS,
                   "metadata": {"m": "x" * (relations.MAX_LINK_METADATA_BYTES - 16)}},
        # The relate above, as many times as a batch takes: the largest request, which
        # adds no link (more links on f1 would change what later ops' graph walks do).
        "relateMany": {"links": [
            {"fromId": "f1", "toId": "f2", "relation": "r" * validate.MAX_ID_CHARS,
             "metadata": {"m": "x" * (relations.MAX_LINK_METADATA_BYTES - 16)}}
        ] * relations.MAX_RELATE_MANY},
        "unrelate": {"fromId": "f1", "toId": "f2", "relation": "r" * validate.MAX_ID_CHARS},
        "links": {"id": "f1", "direction": "both"},
        "why": {"query": query, "maxHops": evidence.MAX_HOPS,
                "relation": [f"r{i}" * 100 for i in range(evidence.MAX_RELATIONS)]},
        "export": {"limit": shapes.MAX_EXPORT_PAGE},
        # New facts each time (an id per store size and call), written as they come.
        "import": {"records": [
            {"id": f"imported-{i}-{next(_IMPORTS)}", "ingestTime": 1000 + i,
             "text": f"imported fact {i} " + " ".join(VOCABULARY[i % 50:][:20]),
             "subject": f"s{i % 500}", "entities": NAMES[: i % 8], "metadata": {"i": i},
             "embedding": [0.25] * 8, "feedback": [{"helpful": True, "time": 1000}],
             "links": [{"supersedes": "f0", "knownAt": 1000}] if i == 0 else []}
            for i in range(shapes.MAX_IMPORT_RECORDS)], "batchSize": 10_000},
        "compileContext": compile_context,
        "explainContext": {**compile_context, "id": "frag-0"},
        # A new state each time: a save writes the next version of the session.
        "saveWorkingContext": {"session": "s", "namespace": ["agent"], "state": {
            "blob": f"{next(_IMPORTS)} " + "w" * (working.MAX_STATE_BYTES - 40)}},
        "loadWorkingContext": {"session": "s", "namespace": ["agent"]},
        "listWorkingContexts": {"namespace": ["agent"]},
    }
    return requests[op]


def peak_of(memory: Memory, op: str, request: dict[str, Any]) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        start, _ = tracemalloc.get_traced_memory()
        response = memory.call(op, request)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    json.dumps(response, allow_nan=False)
    return peak - start


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[int, Memory]]:
    previous = logging.getLogger("holomem").level
    logging.getLogger("holomem").setLevel(logging.ERROR)
    out = {n: build(tmp_path_factory.mktemp(f"s{n}") / "store", n) for n in (2000, 4000)}
    for memory in out.values():  # the HRR vectors are encoded once, at first use
        memory.clock.advance(1)  # type: ignore[attr-defined]
        memory.probe("User")
        # The largest working context there is, for load and list to read back.
        memory.save_working_context(["agent"], "s", {
            "blob": "w" * (working.MAX_STATE_BYTES - 20)})
    yield out
    for memory in out.values():
        memory.store.close()
    logging.getLogger("holomem").setLevel(previous)


def test_every_op_has_a_largest_request_here() -> None:
    for op in OPS:
        assert isinstance(largest(op), dict), op  # a KeyError for an op left out


@pytest.mark.parametrize("op", sorted(OPS))
def test_the_largest_request_of_every_op_stays_within_the_documented_memory_bound(
        stores: dict[int, Memory], op: str) -> None:
    peaks = {}
    # remember writes its request: its memory is the request's, whatever the store (and
    # tracing 10,000 facts' worth of allocations is slow), so one store is enough.
    sizes = {2000: stores[2000]} if op == "remember" else stores
    for n, memory in sizes.items():
        try:
            peaks[n] = peak_of(memory, op, largest(op))
        except HolomemError as exc:  # the largest *allowed* request must be answered
            raise AssertionError(f"{op}: {exc.code}: {exc}") from exc
        assert peaks[n] <= bound(n), (op, n, peaks[n] / MiB)
    # Twice the store may cost up to twice the store's share, never a product of the two.
    if len(peaks) == 2:
        assert peaks[4000] - peaks[2000] <= PER_FACT_BYTES * 2000, (op, peaks)


def test_the_largest_request_just_over_each_limit_is_refused_without_work(
        stores: dict[int, Memory]) -> None:
    memory = stores[2000]
    over: list[tuple[str, dict[str, Any]]] = [
        ("reason", {"entities": ["User"] * (algebra.MAX_REASON_ENTITIES + 1)}),
        ("recall", {"query": " ".join(VOCABULARY[: validate.MAX_QUERY_TERMS + 1])}),
        ("forget", {"scope": {"ids": ["x"] * (forgetting.MAX_IDS + 1)}}),
        ("remember", {"facts": [{"text": "x"}] * (memory_module.MAX_FACTS + 1)}),
        ("probe", {"entity": "User", "k": algebra.MAX_K + 1}),
        ("contradict", {"maxPairs": contradiction.MAX_PAIRS_LIMIT + 1}),
        ("list", {"limit": listing.MAX_LIMIT + 1}),
        ("entityProfile", {"name": "User", "limit": profile.MAX_LIMIT + 1}),
        ("entityProfile", {"name": "U" * (validate.MAX_ENTITY_CHARS + 1)}),
        ("recall", {"query": "w1", "metadata": None,
                    "subject": {"k": _nested(nesting.MAX_REQUEST_DEPTH)}}),
    ]
    for op, request in over:
        tracemalloc.start()
        try:
            with pytest.raises(HolomemError) as info:
                memory.call(op, request)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert info.value.code in ("limit", "invalid_request"), (op, info.value.code)
        assert peak <= 16 * MiB, (op, peak / MiB)


def _nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value
