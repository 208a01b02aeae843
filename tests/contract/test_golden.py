"""Golden request/response pairs of the JSON contract (docs/contract.md §5).

Each op of §5 is called with hand-written camelCase requests on a store filled by
the same calls, with explicit ids and a ManualClock, so every response is fully
determined. Responses are compared whole (every key, camelCase exactly), after a
round trip through ``json`` so that they are also plain JSON. Scores are the one
exception written as :data:`SCORE`: their values belong to the ranking function,
and they are checked against ``Store.search_documents`` instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from holomem import ManualClock, Memory, MemoryConfig, Store
from holomem.api.memory.config import config_from_json
from holomem.errors import HolomemError

T0 = 1_700_000_000_000  # the clock when the first fact is remembered
SECOND = 1_000


class _Score:
    """Equal to any finite, non-negative float (a score)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and math.isfinite(other) and other >= 0.0

    def __repr__(self) -> str:
        return "SCORE"


SCORE: Any = _Score()


#: The summary of dup-1 and dup-2: "c-" + sha256("dup-1\ndup-2")[:32], from the sources
#: alone, so the same on every run and machine.
SUMMARY_ID = "c-907c22aa610a3fc7395190605b55ef1d"



def fact(id: str, text: str, ingest_time: int, status: str, **fields: Any) -> dict[str, Any]:
    """A FactRecord as JSON: every RememberInput field as stored, ingestTime, status
    and supersededBy (plus the feedback fields and the namespace the contract has
    grown: a fact of the root namespace has ``namespace: []``)."""
    out = {
        "id": id, "text": text, "ingestTime": ingest_time, "status": status,
        "subject": None, "entities": [], "metadata": None, "embedding": None,
        "eventTime": None, "validFrom": None, "validTo": None, "supersedes": [],
        "supersededBy": [], "confidence": 1.0, "helpful": 0, "unhelpful": 0, "feedback": [],
        "namespace": [], "ttlMs": None, "expiresAt": None,
        # A conversation turn's fields (§4g): absent (null) on any other fact.
        "speaker": None, "session": None, "position": None,
    }
    unknown = set(fields) - set(out)
    assert not unknown, unknown
    out.update(fields)
    return out


BOB_1 = dict(subject="bob/drink", entities=["Bob"], metadata={"source": "chat"},
             validFrom=1_600_000_000_000)
BOB_2 = dict(subject="bob/drink", validFrom=1_650_000_000_000)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    store = Store.open(tmp_path / "store", sync="none")
    yield Memory(store, MemoryConfig(supersession="latest-by-subject"),
                 clock=ManualClock(T0))
    store.close()


def call(memory: Memory, op: str, request: dict[str, Any]) -> Any:
    response = memory.call(op, request)
    out = json.loads(json.dumps(response, allow_nan=False))
    assert out == response
    return out


def error(memory: Memory, op: str, request: Any) -> str:
    with pytest.raises(HolomemError) as info:
        memory.call(op, request)
    return info.value.code


def fill(memory: Memory) -> None:
    """The store every golden below starts from (its own responses are checked)."""
    assert call(memory, "remember", {
        "id": "bob-1", "text": "Bob drinks tea", "subject": "bob/drink",
        "validFrom": 1_600_000_000_000, "entities": ["Bob"], "metadata": {"source": "chat"},
    }) == {"remembered": [
        {"id": "bob-1", "created": True, "ingestTime": T0, "superseded": []}]}
    memory.clock.advance(SECOND)  # type: ignore[attr-defined]
    assert call(memory, "remember", {"facts": [
        {"id": "bob-2", "text": "Bob drinks coffee", "subject": "bob/drink",
         "validFrom": 1_650_000_000_000},
        {"id": "amy-1", "text": "Amy drinks water", "eventTime": 1_690_000_000_000},
    ]}) == {"remembered": [
        {"id": "bob-2", "created": True, "ingestTime": T0 + SECOND, "superseded": ["bob-1"]},
        {"id": "amy-1", "created": True, "ingestTime": T0 + SECOND, "superseded": []},
    ]}
    memory.clock.advance(SECOND)  # type: ignore[attr-defined]


# -- remember -------------------------------------------------------------------------------
def test_remember(memory: Memory) -> None:
    fill(memory)
    # A retry: created false, the first ingest time kept.
    assert call(memory, "remember", {
        "id": "bob-1", "text": "Bob drinks tea", "subject": "bob/drink",
        "validFrom": 1_600_000_000_000, "entities": ["Bob"], "metadata": {"source": "chat"},
    }) == {"remembered": [
        {"id": "bob-1", "created": False, "ingestTime": T0, "superseded": []}]}
    # Explicit supersession and a validity window.
    assert call(memory, "remember", {
        "id": "amy-2", "text": "Amy drinks juice", "supersedes": ["amy-1"],
        "validFrom": 1_695_000_000_000, "validTo": 1_800_000_000_000,
    }) == {"remembered": [
        {"id": "amy-2", "created": True, "ingestTime": T0 + 2 * SECOND,
         "superseded": ["amy-1"]}]}
    # Without an id: derived from the content, the same on every machine.
    first = call(memory, "remember", {"text": "Carl walks"})["remembered"][0]
    assert first["id"].startswith("f-") and len(first["id"]) == 34
    assert call(memory, "remember", {"text": "Carl walks"})["remembered"][0] == {
        **first, "created": False}


def test_remember_errors(memory: Memory) -> None:
    fill(memory)
    assert error(memory, "remember", {"id": "bob-1", "text": "Bob drinks milk"}) == "conflict"
    assert error(memory, "remember", {"text": "x", "colour": "red"}) == "invalid_request"
    assert error(memory, "remember", {"text": "x", "valid_from": 1}) == "invalid_request"
    assert error(memory, "remember", {}) == "invalid_request"
    assert error(memory, "remember", {"text": "x", "supersedes": ["nope"]}) == "invalid_request"
    assert error(memory, "remember", {"facts": []}) == "invalid_request"
    assert error(memory, "remember", {"facts": [{"text": "ok"}, {"text": 1}]}) == (
        "invalid_request")
    assert call(memory, "get", {"id": "f-nothing"}) == {"fact": None}


# -- recall ---------------------------------------------------------------------------------
def test_recall(memory: Memory) -> None:
    fill(memory)
    # Now: bob-2 superseded bob-1; amy-1 is current. "tea" matches only bob-1.
    assert call(memory, "recall", {"query": "tea"}) == {"results": []}
    assert call(memory, "recall", {"query": "tea", "history": "all"}) == {"results": [
        {"id": "bob-1", "text": "Bob drinks tea", "score": SCORE, "status": "superseded",
         "fact": fact("bob-1", "Bob drinks tea", T0, "superseded", **BOB_1,
                      supersededBy=["bob-2"])}]}
    # As of a time when bob-1 held and bob-2 and amy-1 had not begun.
    response = call(memory, "recall", {"query": "drinks", "history": "all",
                                       "asOf": 1_620_000_000_000, "k": 5})
    assert response == {"results": [
        {"id": "bob-1", "text": "Bob drinks tea", "score": SCORE, "status": "current",
         "fact": fact("bob-1", "Bob drinks tea", T0, "current", **BOB_1,
                      supersededBy=["bob-2"])},
        {"id": "bob-2", "text": "Bob drinks coffee", "score": SCORE,
         "status": "not-yet-valid",
         "fact": fact("bob-2", "Bob drinks coffee", T0 + SECOND, "not-yet-valid", **BOB_2,
                      supersedes=["bob-1"])},
        {"id": "amy-1", "text": "Amy drinks water", "score": SCORE,
         "status": "not-yet-valid",
         "fact": fact("amy-1", "Amy drinks water", T0 + SECOND, "not-yet-valid",
                      eventTime=1_690_000_000_000)},
    ]}
    hits = memory.store.search_documents("drinks", k=5)
    assert [r["score"] for r in response["results"]] == [h.score for h in hits]
    # knownAt before bob-2 was ingested: bob-1 is current now, unsuperseded.
    assert call(memory, "recall", {"query": "bob", "knownAt": T0, "subject": "bob/drink"}) == {
        "results": [{"id": "bob-1", "text": "Bob drinks tea", "score": SCORE,
                     "status": "current",
                     "fact": fact("bob-1", "Bob drinks tea", T0, "current", **BOB_1)}]}
    assert call(memory, "recall", {"query": "drinks", "entities": ["Bob"],
                                   "history": "historical"})["results"][0]["id"] == "bob-1"


def test_recall_errors(memory: Memory) -> None:
    fill(memory)
    for request in ({}, {"query": 3}, {"query": "x", "k": 0}, {"query": "x", "k": "3"},
                    {"query": "x", "history": "old"}, {"query": "x", "as_of": 1},
                    {"query": "x", "candidateLimit": 100_000}, {"query": "x", "k": True}):
        assert error(memory, "recall", request) == "invalid_request", request


# -- explain --------------------------------------------------------------------------------
def test_explain(memory: Memory) -> None:
    fill(memory)
    response = call(memory, "explain", {"query": "tea", "id": "bob-1"})
    assert response == {"explanation": {
        "id": "bob-1", "retrieved": False, "rank": 1,
        "lexicalScore": SCORE, "semanticScore": None,
        "fusion": {"method": "bm25", "lexicalWeight": 1.0, "semanticWeight": 0.0,
                   "fusedScore": SCORE},
        "matchedTerms": [{"term": "tea", "tf": 1, "idf": SCORE, "score": SCORE}],
        "recencyMultiplier": 1.0, "historyMultiplier": 1.0,
        "status": "superseded", "validAt": T0 + 2 * SECOND,
        "chain": [
            {"id": "bob-1", "status": "superseded", "effectiveTime": 1_600_000_000_000},
            {"id": "bob-2", "status": "current", "effectiveTime": 1_650_000_000_000},
        ],
        "score": SCORE, "usefulnessMultiplier": 1.0, "contextBonus": 0.0,
        "reason": "its status is superseded, filtered out by history=current",
        "ttlMs": None, "expiresAt": None, "rerankedRank": None,
        "graph": None, "graphBounds": None,
        "speaker": None, "session": None, "position": None, "dialogue": None,
    }}
    e = response["explanation"]
    hit = memory.store.search_documents("tea")[0]
    assert hit.id == "bob-1"
    assert e["lexicalScore"] == e["fusion"]["fusedScore"] == e["score"] == hit.score
    assert e["matchedTerms"][0]["score"] == hit.lexical_score
    # As of a time when it held, it is retrieved.
    e = call(memory, "explain", {"query": "tea", "id": "bob-1",
                                 "asOf": 1_620_000_000_000})["explanation"]
    assert (e["retrieved"], e["status"], e["reason"], e["validAt"]) == (
        True, "current", "retrieved", 1_620_000_000_000)
    assert [c["status"] for c in e["chain"]] == ["current", "not-yet-valid"]
    # A fact the query does not match.
    e = call(memory, "explain", {"query": "tea", "id": "amy-1"})["explanation"]
    assert (e["retrieved"], e["rank"], e["matchedTerms"], e["lexicalScore"], e["chain"]) == (
        False, None, [], 0.0,
        [{"id": "amy-1", "status": "current", "effectiveTime": 1_690_000_000_000}])
    assert e["reason"] == "not a candidate: no query term (or embedding) matches it"


def test_explain_errors(memory: Memory) -> None:
    fill(memory)
    assert error(memory, "explain", {"query": "tea", "id": "nope"}) == "not_found"
    assert error(memory, "explain", {"query": "tea"}) == "invalid_request"
    assert error(memory, "explain", {"id": "bob-1"}) == "invalid_request"


# -- get and history ------------------------------------------------------------------------
def test_get_and_history(memory: Memory) -> None:
    fill(memory)
    assert call(memory, "get", {"id": "bob-1"}) == {"fact": fact(
        "bob-1", "Bob drinks tea", T0, "superseded", **BOB_1, supersededBy=["bob-2"])}
    assert call(memory, "get", {"id": "nope"}) == {"fact": None}
    history = {"history": [
        fact("bob-1", "Bob drinks tea", T0, "superseded", **BOB_1, supersededBy=["bob-2"]),
        fact("bob-2", "Bob drinks coffee", T0 + SECOND, "current", **BOB_2,
             supersedes=["bob-1"]),
    ]}
    assert call(memory, "history", {"id": "bob-1"}) == history
    assert call(memory, "history", {"id": "bob-2"}) == history
    assert call(memory, "history", {"id": "amy-1"}) == {"history": [fact(
        "amy-1", "Amy drinks water", T0 + SECOND, "current", eventTime=1_690_000_000_000)]}
    assert error(memory, "history", {"id": "nope"}) == "not_found"
    assert error(memory, "get", {}) == "invalid_request"
    assert error(memory, "get", {"id": "bob-1", "extra": 1}) == "invalid_request"
    assert error(memory, "history", {"id": 1}) == "invalid_request"


# -- forget ---------------------------------------------------------------------------------
def test_forget(memory: Memory) -> None:
    fill(memory)
    assert call(memory, "forget", {"scope": {"ids": ["amy-1"]}, "dryRun": True}) == {
        "removed": ["amy-1"], "relinked": [], "dryRun": True, "purged": False, "unlinked": 0}
    assert call(memory, "get", {"id": "amy-1"})["fact"] is not None
    assert call(memory, "forget", {"scope": {"ids": ["bob-2"]}}) == {
        "removed": ["bob-2"], "relinked": [], "dryRun": False, "purged": False, "unlinked": 0}
    # bob-1 is current again.
    assert call(memory, "get", {"id": "bob-1"}) == {"fact": fact(
        "bob-1", "Bob drinks tea", T0, "current", **BOB_1)}
    assert call(memory, "forget", {"scope": {"ids": ["bob-2"]}}) == {
        "removed": [], "relinked": [], "dryRun": False, "purged": False, "unlinked": 0}
    assert call(memory, "forget", {"scope": {"eventBefore": 1_690_000_000_001},
                                   "purge": True}) == {
        "removed": ["amy-1"], "relinked": [], "dryRun": False, "purged": True, "unlinked": 0}
    assert call(memory, "forget", {"scope": {"metadata": {"source": "chat"}}}) == {
        "removed": ["bob-1"], "relinked": [], "dryRun": False, "purged": False, "unlinked": 0}
    assert memory.store.ids() == []


def test_forget_relinks_a_middle_version(memory: Memory) -> None:
    fill(memory)
    call(memory, "remember", {"id": "bob-3", "text": "Bob drinks cocoa",
                              "subject": "bob/drink", "validFrom": 1_660_000_000_000})
    assert call(memory, "forget", {"scope": {"subject": "bob/drink"}, "dryRun": True,
                                   "includeChain": True}) == {
        "removed": ["bob-1", "bob-2", "bob-3"], "relinked": [], "dryRun": True,
        "purged": False, "unlinked": 0}
    assert call(memory, "forget", {"scope": {"ids": ["bob-2"]}}) == {
        "removed": ["bob-2"], "relinked": [{"successor": "bob-3", "predecessor": "bob-1"}],
        "dryRun": False, "purged": False, "unlinked": 0}


def test_forget_errors(memory: Memory) -> None:
    fill(memory)
    requests: list[dict[str, Any]] = [
        {}, {"scope": {}}, {"scope": {"ids": ["a"], "subject": "s"}},
        {"scope": {"ingested_before": 1}}, {"scope": {"ids": "bob-1"}},
        {"scope": {"ids": ["bob-1"]}, "dry_run": True}, {"scope": {"metadata": {}}}]
    for request in requests:
        assert error(memory, "forget", request) == "invalid_request", request
    assert memory.store.ids() == ["bob-1", "bob-2", "amy-1"]


# -- maintenance ----------------------------------------------------------------------------
def test_apply_forgetting_and_consolidate(tmp_path: Path) -> None:
    config = json.dumps({
        "supersession": "latest-by-subject",
        "forgetting": {"supersededForLongerThanMs": 1_000},
        "consolidation": {"duplicates": {"nearThreshold": 1.0}},
    })
    with Store.open(tmp_path / "store", sync="none") as store:
        memory = Memory(store, config_from_json(config), clock=ManualClock(T0))
        fill(memory)
        call(memory, "remember", {"id": "dup-1", "text": "Dana swims"})
        call(memory, "remember", {"id": "dup-2", "text": "dana swims!"})
        assert call(memory, "applyForgetting", {}) == {
            "removed": ["bob-1"], "relinked": [], "dryRun": True, "purged": False, "unlinked": 0}
        plan = {"sources": ["dup-1", "dup-2"], "summaryId": SUMMARY_ID, "text": "dana swims!"}
        # sourcesKept (added by issue 11): null here, the policy keeps sources by design.
        assert call(memory, "consolidate", {}) == {
            "dryRun": True, "groups": [plan], "added": [], "removed": [], "sourcesKept": None}
        done = call(memory, "consolidate", {"dryRun": False})
        assert done == {"dryRun": False, "groups": [plan], "added": [SUMMARY_ID], "removed": [],
                        "sourcesKept": None}
        assert done["added"] == [done["groups"][0]["summaryId"]]
        assert call(memory, "consolidate", {"dryRun": False}) == {
            "dryRun": False, "groups": [], "added": [], "removed": [], "sourcesKept": None}
        assert call(memory, "applyForgetting", {"dryRun": False}) == {
            "removed": ["bob-1"], "relinked": [], "dryRun": False, "purged": False, "unlinked": 0}
        for op in ("applyForgetting", "consolidate"):
            assert error(memory, op, {"dry_run": False}) == "invalid_request"
            assert error(memory, op, {"dryRun": "no"}) == "invalid_request"


def test_consolidate_says_why_it_kept_the_sources_it_was_asked_to_remove(
        tmp_path: Path) -> None:
    """Regression (issue 11): removeSources without allowDestructive removed nothing, silently."""
    config = json.dumps({"consolidation": {"duplicates": {"nearThreshold": 1.0},
                                           "removeSources": True}})
    with Store.open(tmp_path / "store", sync="none") as store:
        memory = Memory(store, config_from_json(config), clock=ManualClock(T0))
        call(memory, "remember", {"id": "dup-1", "text": "Dana swims"})
        call(memory, "remember", {"id": "dup-2", "text": "dana swims!"})
        plan = {"sources": ["dup-1", "dup-2"], "summaryId": SUMMARY_ID, "text": "dana swims!"}
        kept = ("removeSources is set, but the call did not pass allow_destructive=True "
                "(JSON allowDestructive: true): the sources stay, superseded by their summaries")
        assert call(memory, "consolidate", {}) == {
            "dryRun": True, "groups": [plan], "added": [], "removed": [], "sourcesKept": kept}
        assert call(memory, "consolidate", {"dryRun": True, "allowDestructive": True}) == {
            "dryRun": True, "groups": [plan], "added": [], "removed": [], "sourcesKept": None}
        assert call(memory, "consolidate", {"dryRun": False}) == {
            "dryRun": False, "groups": [plan], "added": [SUMMARY_ID], "removed": [],
            "sourcesKept": kept}
        assert memory.get("dup-1") is not None and memory.get("dup-2") is not None
    with Store.open(tmp_path / "store2", sync="none") as store:
        memory = Memory(store, config_from_json(config), clock=ManualClock(T0))
        call(memory, "remember", {"id": "dup-1", "text": "Dana swims"})
        call(memory, "remember", {"id": "dup-2", "text": "dana swims!"})
        assert call(memory, "consolidate", {"dryRun": False, "allowDestructive": True}) == {
            "dryRun": False, "groups": [plan], "added": [SUMMARY_ID],
            "removed": ["dup-1", "dup-2"], "sourcesKept": None}
        assert memory.get("dup-1") is None and memory.get("dup-2") is None


def test_unknown_op_and_bad_request(memory: Memory) -> None:
    assert error(memory, "Recall", {"query": "x"}) == "invalid_request"
    assert error(memory, "recall", ["query"]) == "invalid_request"
    assert error(memory, "recall", {1: "x"}) == "invalid_request"
