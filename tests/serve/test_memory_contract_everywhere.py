"""The whole memory contract answers alike from ``Memory``, ``AsyncMemory``, ``Client``
and ``AsyncClient`` (issue 15, item 6).

Each scenario below drives one part of the contract — remember and reading, recall with
every option, explain, listing with filters and namespaces, forget in every scope,
feedback and confidence, the maintenance policies, the holographic operations, export
and import, ``info`` and ``call``, and the errors ``invalid_request``, ``limit``,
``not_found`` and ``conflict`` — with the same code on each of the four, each on a
store of its own: an embedded ``Memory``; an ``AsyncMemory``; a ``Client`` and an
``AsyncClient`` of one real ``holomem serve`` process on 127.0.0.1 (a tenant per
scenario and client). The async two run through :class:`Synced`, which runs each
coroutine to its end. A scenario asserts what the contract promises, and logs every
answer; every implementation's log must then equal ``Memory``'s, answer for answer,
error for error (class, code, status and message). The clock is the one thing that
differs (each side stamps writes with its own): every number that is a time of day
in milliseconds is logged as ``<clock>``; the scenarios' own times are small numbers,
so what they select does not depend on when the test runs.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
import pytest

from holomem import (
    AsyncMemory,
    ConflictError,
    HolomemError,
    InvalidError,
    LimitError,
    Memory,
    NotFoundError,
    RecallOptions,
    RememberInput,
    Store,
)
from holomem.api.memory.config import config_from_json
from holomem.client import AsyncClient, Client

from .conftest import API_KEY, Server, start

CONFIG = {"supersession": "latest-by-subject", "feedback": {"weight": 0.5},
          "forgetting": {"supersededForLongerThanMs": 0, "expiredForLongerThanMs": 0},
          "consolidation": {"duplicates": {"nearThreshold": 1.0}}}
IMPLEMENTATIONS = ["Memory", "AsyncMemory", "Client", "AsyncClient"]
#: Milliseconds since the epoch from 2001 on: a clock's reading, not a scenario's time.
CLOCK = 10**12
U1, U2 = ["users", "u1"], ["users", "u2"]


# -- the four implementations, driven the same way ------------------------------------------
async def _collect(items: Any) -> list[Any]:
    return [x async for x in items]


class Synced:
    """An async memory driven by sync code: every coroutine is run to its end on one
    event loop, an async iterator collected into a list."""

    def __init__(self, target: Any, runner: asyncio.Runner) -> None:
        self._target, self._runner = target, runner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            if inspect.iscoroutine(out):
                return self._runner.run(out)
            if inspect.isasyncgen(out):
                return iter(self._runner.run(_collect(out)))
            return out

        return call


@dataclass
class Maker:
    """Makes fresh memories of one implementation (each on a store of its own)."""

    kind: str
    root: Path
    server: Server
    scenario: str
    closers: list[Callable[[], None]] = field(default_factory=list)
    made: int = 0

    def __call__(self) -> Any:
        self.made += 1
        name = f"{self.scenario}-{self.made}"
        if self.kind in ("Memory", "AsyncMemory"):
            store = Store.open(self.root / name, sync="none")
            self.closers.append(store.close)
            memory = Memory(store, config_from_json(json.dumps(CONFIG)))
            if self.kind == "Memory":
                return memory
            runner = asyncio.Runner()
            self.closers.insert(0, runner.close)
            return Synced(AsyncMemory(memory), runner)
        tenant = f"{self.kind.lower()}-{name}".replace("_", "-")
        if self.kind == "Client":
            client = Client(self.server.url, api_key=API_KEY, tenant=tenant)
            self.closers.append(client.close)
            return client
        runner = asyncio.Runner()
        aclient = AsyncClient(self.server.url, api_key=API_KEY, tenant=tenant)
        self.closers.append(lambda: (runner.run(aclient.aclose()), runner.close()))
        return Synced(aclient, runner)

    def close(self) -> None:
        for close in self.closers:
            close()


# -- what is compared -------------------------------------------------------------------------
def _normal(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        return "<clock>" if value >= CLOCK else value
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normal(v) for v in value]
    return _normal(msgspec.to_builtins(value))


class Log:
    """Every answer of a scenario, in order, as comparable data."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []

    def __call__(self, label: str, value: Any) -> Any:
        self.entries.append((label, _normal(value)))
        return value

    def error(self, label: str, call: Callable[[], Any], cls: type[HolomemError]
              ) -> HolomemError:
        with pytest.raises(cls) as info:
            call()
        err = info.value
        self.entries.append((label, {"class": type(err).__name__, "code": err.code,
                                     "status": err.status, "message": err.message}))
        return err


# -- the scenarios ----------------------------------------------------------------------------
def remember_and_read(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    a1 = log("remember text first", m.remember(
        "Alice lives in Paris", id="a1", subject="alice/city", entities=["Alice", "Paris"],
        valid_from=dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC),
        metadata={"kind": "city", "rank": 1}))
    again = log("remember again", m.remember(
        text="Alice lives in Paris", id="a1", subject="alice/city",
        entities=["Alice", "Paris"], valid_from=1000, metadata={"kind": "city", "rank": 1}))
    assert a1.created and not again.created and again.ingest_time == a1.ingest_time
    a2 = log("remember a struct", m.remember(RememberInput(
        text="Alice lives in Berlin", id="a2", subject="alice/city",
        entities=["Alice", "Berlin"], valid_from=2000, metadata={"kind": "city", "rank": 2})))
    assert a2.superseded == ["a1"]
    derived = log("remember a dict", m.remember({
        "text": "Bob owes Alice ten euros", "entities": ["Bob", "Alice"],
        "eventTime": 1500, "confidence": 0.75, "embedding": [0.0, 1.0, 0.0]}))
    many = log("remember_many", m.remember_many([
        {"id": "b1", "text": "Bob works at Acme", "entities": ["Bob"], "namespace": U1},
        RememberInput(text="Bob works at Initech", id="b2", entities=["Bob"],
                      namespace=U1, supersedes=["b1"]),
        {"text": "the same sentence twice", "namespace": U2}]))
    assert [r.created for r in many] == [True, True, True] and many[1].superseded == ["b1"]
    record = log("get", m.get("a1"))
    assert record.status == "superseded" and record.superseded_by == ["a2"]
    assert log("get a content id", m.get(derived.id)).confidence == 0.75
    assert log("get missing", m.get("missing")) is None
    assert [f.id for f in log("history", m.history("a2"))] == ["a1", "a2"]
    log("history of the first", m.history("a1"))
    log("history across namespaces", m.history("b2"))
    log.error("conflict", lambda: m.remember(id="a1", text="Alice lives in Rome"),
              ConflictError)
    log.error("only whitespace", lambda: m.remember("   "), InvalidError)
    log.error("text too long", lambda: m.remember("x" * (64 * 1024 + 1)), LimitError)
    log.error("too many entities", lambda: m.remember("x", entities=[f"e{i}" for i in
                                                                     range(257)]), LimitError)
    log.error("unknown field", lambda: m.remember(text="x", colour="red"), InvalidError)
    log.error("naive datetime", lambda: m.remember("x", valid_from=dt.datetime(2020, 1, 1)),
              InvalidError)
    log.error("no inputs", lambda: m.remember_many([]), InvalidError)
    log.error("not a list", lambda: m.remember_many("text"), InvalidError)
    log.error("a bad id", lambda: m.get(""), InvalidError)
    log.error("history of nothing", lambda: m.history("missing"), NotFoundError)
    log.error("supersedes across namespaces",
              lambda: m.remember("x", namespace=U2, supersedes=["b1"]), InvalidError)


def _stock(m: Any) -> None:
    """Facts for the reading scenarios: a chain, entities, metadata, vectors, users."""
    m.remember_many([
        {"id": "a1", "text": "Alice lives in Paris", "subject": "alice/city",
         "entities": ["Alice", "Paris"], "validFrom": 1000,
         "metadata": {"kind": "city", "rank": 1}, "embedding": [1.0, 0.0, 0.0]},
        {"id": "a2", "text": "Alice lives in Berlin", "subject": "alice/city",
         "entities": ["Alice", "Berlin"], "validFrom": 2000,
         "metadata": {"kind": "city", "rank": 2}, "embedding": [0.9, 0.1, 0.0]},
        {"id": "a3", "text": "Alice met Bob in Berlin", "entities": ["Alice", "Bob", "Berlin"],
         "eventTime": 2500, "metadata": {"kind": "event", "rank": 3},
         "embedding": [0.0, 1.0, 0.0]},
        {"id": "a4", "text": "Alice's passport expired", "entities": ["Alice"],
         "validTo": 1500, "metadata": {"kind": "document"}, "embedding": [0.0, 0.0, 1.0]},
        {"id": "u1-tea", "text": "Alice prefers green tea", "entities": ["Alice"],
         "namespace": U1, "metadata": {"kind": "taste", "rank": 5}},
        {"id": "u1-job1", "text": "Tom works at Acme", "entities": ["Tom"], "namespace": U1},
        {"id": "u1-job2", "text": "Tom works at Initech", "entities": ["Tom"],
         "namespace": U1},
        {"id": "u2-tea", "text": "Alice prefers black coffee", "entities": ["Alice"],
         "namespace": U2, "metadata": {"kind": "taste", "rank": 6}},
        {"id": "u2-dup1", "text": "the same sentence twice", "namespace": U2},
        {"id": "u2-dup2", "text": "the same sentence twice", "namespace": U2},
    ])


def recall_and_explain(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    q = "Alice lives Berlin Paris"
    assert [r.id for r in log("default", m.recall(q))][:1] == ["a2"]
    assert len(log("k", m.recall(q, k=1))) == 1
    assert "a1" in [r.id for r in log("as_of", m.recall(q, as_of=1500))]
    log("as_of datetime", m.recall(q, as_of=dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=dt.UTC)))
    assert log("known_at before any write", m.recall(q, known_at=1)) == []
    log("known_at now", m.recall(q, known_at=2**61))
    assert {r.status for r in log("history all", m.recall(q, history="all"))} >= \
        {"current", "superseded"}
    assert {r.status for r in log("historical", m.recall("Alice", history="historical",
                                                         k=20))} <= {"superseded", "expired"}
    assert {r.id for r in log("subject", m.recall(q, subject="alice/city",
                                                  history="all"))} == {"a1", "a2"}
    assert {r.id for r in log("entities", m.recall("Alice", entities=["Bob"]))} == {"a3"}
    assert [r.id for r in log("embedding", m.recall("Alice", embedding=[0.0, 1.0, 0.0]))
            ][:1] == ["a3"]
    explained = log("explain option", m.recall(q, explain=True, k=2))
    assert all(r.explanation is not None for r in explained)
    log("candidate_limit", m.recall(q, candidate_limit=1))
    assert {r.id for r in log("namespace", m.recall("Alice prefers", namespace=U1))} == \
        {"u1-tea"}
    assert {r.id for r in log("namespace tuple", m.recall("prefers", namespace=tuple(
        ["users"])))} == {"u1-tea", "u2-tea"}
    assert {r.id for r in log("filter", m.recall("Alice", k=20, filter={
        "metadata": {"kind": {"$in": ["city", "event"]}}}))} == {"a2", "a3"}
    assert {r.id for r in log("filter or/not", m.recall("Alice", k=20, filter={
        "$or": [{"metadata": {"rank": {"$gte": 5}}}, {"$not": {"metadata": {
            "kind": {"$exists": True}}}}]}))} == {"u1-tea", "u2-tea"}
    assert {r.id for r in log("filter event time", m.recall("Alice", k=20, filter={
        "eventAfter": dt.datetime(1970, 1, 1, 0, 0, 2, tzinfo=dt.UTC)}))} == {"a3"}
    log("filter ingested", m.recall("Alice", k=20, filter={"ingestedAfter": 1,
                                                            "ingestedBefore": 2**61}))
    log("options object", m.recall(q, RecallOptions(k=3, history="all")))
    log("options dict", m.recall(q, {"k": 3, "asOf": 1500}))
    log("everything at once", m.recall(
        q, k=5, as_of=2600, known_at=2**61, history="all", subject=None, entities=["Alice"],
        embedding=[1.0, 0.0, 0.0], explain=True, candidate_limit=50, namespace=[],
        filter={"metadata": {"kind": {"$ne": "taste"}}}))
    e = log("explain", m.explain(q, "a1"))
    assert e.retrieved is False and e.status == "superseded"
    assert log("explain as_of", m.explain(q, "a1", as_of=1500)).retrieved
    log("explain with options", m.explain("Alice", "a3", {"history": "all"}, k=2))
    log("explain in its namespace", m.explain("prefers", "u1-tea", namespace=U1))
    log.error("explain outside the namespace",
              lambda: m.explain("prefers", "u2-tea", namespace=U1), NotFoundError)
    log.error("explain a missing fact", lambda: m.explain(q, "missing"), NotFoundError)
    log.error("k zero", lambda: m.recall(q, k=0), InvalidError)
    log.error("k too big", lambda: m.recall(q, k=1001), InvalidError)
    log.error("too many words", lambda: m.recall(" ".join(f"w{i}" for i in range(1025))),
              LimitError)
    log.error("not a query", lambda: m.recall(42), InvalidError)
    log.error("bad history", lambda: m.recall(q, history="sometimes"), InvalidError)
    log.error("bad operator", lambda: m.recall(q, filter={"metadata": {"a": {"$near": 1}}}),
              InvalidError)
    log.error("bad namespace", lambda: m.recall(q, namespace="users//u1"), InvalidError)
    log.error("wrong dimension", lambda: m.recall(q, embedding=[1.0, 0.0]), InvalidError)


def listing(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    everything = log("list", m.list())
    assert len(everything.facts) == 10 and everything.next_cursor is None
    pages, cursor = [], None
    while True:
        page = log("a page", m.list(cursor=cursor, limit=3))
        pages += [f.id for f in page.facts]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert pages == [f.id for f in everything.facts]
    assert {f.id for f in log("subject", m.list(filter={"subject": "alice/city"})).facts} \
        == {"a1", "a2"}
    assert {f.id for f in log("entity", m.list(filter={"entity": "Bob"})).facts} == {"a3"}
    assert [f.id for f in log("status", m.list(filter={"status": "expired"})).facts] == \
        ["a4"]
    log("current", m.list(history="current"))
    assert {f.id for f in log("historical", m.list(history="historical")).facts} == \
        {"a1", "a4"}
    assert {f.id for f in log("namespace", m.list(namespace=["users"])).facts} == \
        {"u1-tea", "u1-job1", "u1-job2", "u2-tea", "u2-dup1", "u2-dup2"}
    assert [f.id for f in log("metadata", m.list(filter={"metadata": {"rank": {
        "$gte": 2, "$lt": 6}}})).facts] == ["a2", "a3", "u1-tea"]
    log("filters together", m.list(filter={"entity": "Alice", "status": "current",
                                           "$not": {"metadata": {"kind": "taste"}}},
                                   namespace=[]))
    log("time bounds", m.list(filter={"eventBefore": 3000, "ingestedAfter": 1}))
    log("namespaces", m.list_namespaces())
    assert [(n.namespace, n.facts) for n in log("namespaces under", m.list_namespaces(
        prefix=["users"])).namespaces] == [(U1, 3), (U2, 3)]
    assert [n.namespace for n in log("depth", m.list_namespaces(max_depth=1)).namespaces] \
        == [[], ["users"]]
    first = log("a namespace page", m.list_namespaces(limit=1))
    log("the next page", m.list_namespaces(limit=1, cursor=first.next_cursor))
    log.error("a forged cursor", lambda: m.list(cursor="bm90IGEgY3Vyc29y"), InvalidError)
    log.error("limit zero", lambda: m.list(limit=0), InvalidError)
    log.error("bad history", lambda: m.list(history="old"), InvalidError)
    log.error("bad filter", lambda: m.list(filter={"colour": "red"}), InvalidError)
    log.error("bad status", lambda: m.list(filter={"status": "lost"}), InvalidError)
    log.error("a bad prefix string", lambda: m.list_namespaces(prefix="users/"),
              InvalidError)
    log.error("a long cursor", lambda: m.list(cursor="x" * 2000), LimitError)


def _imported(m: Any) -> Any:
    """Facts with times of the scenario's own (import keeps ingest and link times)."""
    return m.import_([
        {"id": "c-old", "text": "Carol lived in Oslo", "ingestTime": 5000,
         "namespace": ["imp"], "subject": "carol/city", "validFrom": 100},
        {"id": "c-new", "text": "Carol lives in Rome", "ingestTime": 6000,
         "namespace": ["imp"], "subject": "carol/city", "validFrom": 200,
         "links": [{"supersedes": "c-old", "knownAt": 6000}]},
        {"id": "c-visa", "text": "Carol's visa ran out", "ingestTime": 5500,
         "namespace": ["imp"], "validTo": 3000},
        {"id": "c-dup1", "text": "Carol likes jazz", "ingestTime": 7000,
         "namespace": ["imp"]},
        {"id": "c-dup2", "text": "Carol likes jazz", "ingestTime": 7001,
         "namespace": ["imp"]},
    ])


def forgetting(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    log("import", _imported(m))
    m.remember_many([{"id": "d1", "text": "Dan drives a van", "entities": ["Dan"],
                      "metadata": {"src": "chat"}, "eventTime": 10},
                     {"id": "d2", "text": "Dan drives a bus", "entities": ["Dan"],
                      "subject": "dan/car", "eventTime": 20},
                     {"id": "d3", "text": "Dan drives a car", "subject": "dan/car",
                      "validFrom": 30}])

    def ids() -> list[str]:
        return [f.id for f in m.list(limit=1000).facts]

    dry = log("ids, dry run", m.forget({"ids": ["a3", "missing"]}, dry_run=True))
    assert dry.dry_run and dry.removed == ["a3"] and "a3" in ids()
    assert log("ids", m.forget({"ids": ["a3"]})).removed == ["a3"]
    assert log("idempotent", m.forget({"ids": ["a3"]})).removed == []
    log("include_chain", m.forget({"ids": ["a2"]}, include_chain=True, dry_run=True))
    log("options object", m.forget({"ids": ["a2"]}, {"include_chain": True,
                                                     "dry_run": True}))
    assert set(log("subject", m.forget({"subject": "dan/car"})).removed) == {"d2", "d3"}
    assert log("entity", m.forget({"entity": "Dan"})).removed == ["d1"]
    log("event_before", m.forget({"event_before": 1600}, dry_run=True))
    assert log("ingested_before", m.forget({"ingested_before": 5600},
                                           within=["imp"])).removed == ["c-old", "c-visa"]
    log("after the times", ids())
    assert log("metadata", m.forget({"metadata": {"kind": "document"}})).removed == ["a4"]
    assert set(log("within", m.forget({"entity": "Alice"}, within=U1)).removed) == \
        {"u1-tea"}
    purged = log("namespace with purge", m.forget({"namespace": U2}, purge=True))
    assert purged.purged and set(purged.removed) == {"u2-tea", "u2-dup1", "u2-dup2"}
    log("what is left", ids())
    log("namespaces left", m.list_namespaces())
    assert set(log("the whole store, dry", m.forget({"namespace": []},
                                                    dry_run=True)).removed) == set(ids())
    log.error("no scope", lambda: m.forget({}), InvalidError)
    log.error("two scopes", lambda: m.forget({"ids": ["a1"], "subject": "x"}), InvalidError)
    log.error("too many ids", lambda: m.forget({"ids": ["x"] * 100_001}), LimitError)
    log.error("bad within", lambda: m.forget({"ids": ["a1"]}, within="/users"), InvalidError)
    log.error("unknown option", lambda: m.forget({"ids": ["a1"]}, gently=True), InvalidError)


def feedback_and_confidence(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    log("helpful", m.feedback("a2", True))
    log("unhelpful with a note", m.feedback("a2", False, note="it was Paris"))
    report = log("helpful again", m.feedback("a2", helpful=True))
    assert (report.helpful, report.unhelpful) == (2, 1) and report.multiplier != 1.0
    record = log("the record", m.get("a2"))
    assert [f.helpful for f in record.feedback] == [True, False, True]
    assert log("set_confidence", m.set_confidence("a3", 0.25)).confidence == 0.25
    log("recall sees both", m.recall("Alice Berlin", explain=True))
    log.error("feedback on nothing", lambda: m.feedback("missing", True), NotFoundError)
    log.error("helpful is a bool", lambda: m.feedback("a2", "yes"), InvalidError)
    log.error("confidence range", lambda: m.set_confidence("a2", 1.5), InvalidError)
    log.error("confidence of nothing", lambda: m.set_confidence("missing", 0.5),
              NotFoundError)


def maintenance(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    log("import", _imported(m))
    planned = log("forgetting, dry run", m.apply_forgetting(namespace=["imp"]))
    assert planned.dry_run and set(planned.removed) == {"c-old", "c-visa"}
    log("forgetting, options object", m.apply_forgetting({"dry_run": True,
                                                          "include_chain": True}))
    done = log("forgetting", m.apply_forgetting(dry_run=False, namespace=["imp"]))
    assert set(done.removed) == {"c-old", "c-visa"}
    plan = log("consolidate, dry run", m.consolidate())
    assert {tuple(g.sources) for g in plan.groups} == {("u2-dup1", "u2-dup2"),
                                                       ("c-dup1", "c-dup2")}
    log("consolidate one namespace", m.consolidate(namespace=U2))
    merged = log("consolidate", m.consolidate(dry_run=False, namespace=["imp"]))
    assert len(merged.added) == 1
    log("the summary", m.get(merged.added[0]))
    assert log("again adds nothing", m.consolidate(dry_run=False, namespace=["imp"])
               ).added == []
    log("destructive, not configured", m.consolidate({"dry_run": True,
                                                      "allow_destructive": True}))
    log.error("unknown option", lambda: m.apply_forgetting(soon=True), InvalidError)
    log.error("bad namespace", lambda: m.consolidate(namespace=[""]), InvalidError)


def holographic(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    assert "a3" in [h.id for h in log("probe", m.probe("Bob")).results]
    log("probe k", m.probe("Alice", k=2))
    log("probe namespace", m.probe("Alice", namespace=U1))
    assert "Bob" in [h.entity for h in log("related", m.related("Alice", k=5)).results]
    log("related namespace", m.related("Tom", 3, U1))
    assert [h.id for h in log("reason", m.reason(["Alice", "Bob"])).results] == ["a3"]
    log("reason namespace", m.reason(("Alice",), k=3, namespace=U2))
    pairs = log("contradict", m.contradict(k=10))
    assert ("u1-job1", "u1-job2") in [(p.a, p.b) for p in pairs.pairs]
    log("contradict subject", m.contradict(subject="alice/city"))
    log("contradict entity", m.contradict(entity="Tom", namespace=U1))
    log("contradict filter", m.contradict(filter={"metadata": {"kind": "taste"}}))
    first = log("contradict bounded", m.contradict(max_pairs=1))
    assert first.bound_hit and first.next_cursor is not None
    log("contradict continued", m.contradict(max_pairs=1, cursor=first.next_cursor))
    log.error("probe k zero", lambda: m.probe("Alice", k=0), InvalidError)
    log.error("reason of nothing", lambda: m.reason([]), InvalidError)
    log.error("reason of too many", lambda: m.reason([f"e{i}" for i in range(33)]),
              LimitError)
    log.error("reason of a string", lambda: m.reason("Alice"), InvalidError)
    log.error("contradict max_pairs", lambda: m.contradict(max_pairs=1_000_001), InvalidError)
    log.error("contradict cursor", lambda: m.contradict(cursor="nope"), InvalidError)


def export_and_import(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    _stock(m)
    m.feedback("a2", True, note="yes")
    m.set_confidence("a3", 0.5)
    log("import", _imported(m))
    records = log("export", list(m.export()))
    assert len(records) == 15 and records[1]["links"][0]["supersedes"] == "a1"
    assert [r["id"] for r in log("export a namespace", list(m.export(["users"])))] == \
        ["u1-tea", "u1-job1", "u1-job2", "u2-tea", "u2-dup1", "u2-dup2"]
    target = fresh()
    steps: list[int] = []
    report = log("import into another", target.import_(records, batch_size=4,
                                                       progress=steps.append))
    assert (report.imported, report.unchanged, report.unresolved_links) == (15, 0, 0)
    log("progress", steps)
    assert list(target.export()) == records  # every fact, time, link and vote, exactly
    log("recall there", target.recall("Alice lives Berlin", history="all", explain=True))
    lines = [json.dumps(r) for r in records]
    assert log("again, as JSON lines", target.import_(["", *lines, " "])).unchanged == 15
    changed = [*records[:4], {**records[4], "text": "something else"}]
    log.error("a changed record", lambda: target.import_(changed, batch_size=2),
              ConflictError)
    log.error("a malformed record", lambda: target.import_([records[0], {"id": "x"}]),
              InvalidError)
    log.error("a bad time", lambda: target.import_([{**records[0], "ingestTime": -1}]),
              InvalidError)
    log.error("not records", lambda: target.import_("records"), InvalidError)
    log.error("batch_size zero", lambda: target.import_(records, batch_size=0), InvalidError)
    log.error("batch_size too big", lambda: target.import_(records, batch_size=10_001),
              LimitError)
    log.error("bad namespace", lambda: list(m.export("users\\x")), InvalidError)
    # A link to a fact that comes later in the input, and one to a fact that never does.
    later = fresh()
    ahead = [{"id": "n-new", "text": "Nina lives in Lyon", "ingestTime": 9000,
              "subject": "nina/city", "links": [{"supersedes": "n-old", "knownAt": 9000}]},
             {"id": "n-old", "text": "Nina lived in Nice", "ingestTime": 8000,
              "subject": "nina/city"},
             {"id": "n-lost", "text": "Nina's ghost", "ingestTime": 8500,
              "links": [{"supersedes": "never", "knownAt": 8500}]}]
    assert log("links ahead", later.import_(ahead, batch_size=1)).unresolved_links == 1
    assert [f.id for f in log("their history", later.history("n-new"))] == \
        ["n-old", "n-new"]
    log("their ids", sorted(r["id"] for r in later.export()))
    embedded = fresh()
    log("drop embeddings", embedded.import_(records[:3], drop_embeddings=True))
    assert [r["embedding"] for r in log("dropped", list(embedded.export()))] == [None] * 3


def info_and_call(m: Any, fresh: Callable[[], Any], log: Log) -> None:
    empty = log("info, empty", m.info())
    assert empty.facts == 0 and empty.config.supersession == "latest-by-subject"
    _stock(m)
    assert log("info", m.info()).facts == 10
    assert log("call remember", m.call("remember", {"text": "Eve keeps bees",
                                                   "id": "e1"}))["remembered"][0]["created"]
    hits = log("call recall", m.call("recall", {"query": "Alice", "k": 3, "history": "all",
                                                "filter": {"metadata": {"kind": "city"}}}))
    assert {r["id"] for r in hits["results"]} == {"a1", "a2"}
    log("call get", m.call("get", {"id": "e1"}))
    log("call list", m.call("list", {"limit": 2, "namespace": ["users"]}))
    log("call info", m.call("info", {}))
    page = log("call export", m.call("export", {"limit": 4}))
    log("call export, next", m.call("export", {"limit": 4, "cursor": page["nextCursor"]}))
    log("call listNamespaces", m.call("listNamespaces", {"maxDepth": 1}))
    block = m.render_context(m.recall("Alice lives", k=2))
    log("render_context", re.sub(r"MEMORY [0-9a-f]+|ingested [0-9T:Z-]+", "<varies>",
                                 block))
    assert "Alice lives in Berlin" in block
    log.error("unknown op", lambda: m.call("teleport", {}), InvalidError)
    log.error("an op's typo", lambda: m.call("recall", {"query": "x", "kk": 1}),
              InvalidError)
    log.error("not an object", lambda: m.call("get", ["a1"]), InvalidError)
    log.error("a wrong type", lambda: m.call("recall", {"query": 1}), InvalidError)
    log.error("nested too deep", lambda: m.call("recall", {"query": "x", "filter": json.loads(
        '{"$not":' * 70 + "{}" + "}" * 70)}), LimitError)
    log.error("too many records", lambda: m.call("import", {"records": [{}] * 1001}),
              LimitError)
    log.error("a forged export cursor", lambda: m.call("export", {"cursor": "e30="}),
              InvalidError)
    log.error("an export page too big", lambda: m.call("export", {"limit": 1001}),
              InvalidError)
    log.error("info takes nothing", lambda: m.call("info", {"verbose": True}), InvalidError)
    log.error("get nothing", lambda: m.call("history", {"id": "nope"}), NotFoundError)
    log.error("conflict", lambda: m.call("remember", {"text": "Eve keeps wasps", "id": "e1"}),
              ConflictError)


SCENARIOS: dict[str, Callable[[Any, Callable[[], Any], Log], None]] = {
    f.__name__: f for f in (remember_and_read, recall_and_explain, listing, forgetting,
                            feedback_and_confidence, maintenance, holographic,
                            export_and_import, info_and_call)}


class Answers:
    """Each scenario's log per implementation, run once each, when first asked for."""

    def __init__(self, root: Path, server: Server) -> None:
        self.root, self.server = root, server
        self.done: dict[tuple[str, str], list[tuple[str, Any]] | BaseException] = {}

    def of(self, scenario: str, kind: str) -> list[tuple[str, Any]]:
        key = (scenario, kind)
        if key not in self.done:
            maker = Maker(kind, self.root / kind, self.server, scenario)
            log = Log()
            try:
                SCENARIOS[scenario](maker(), maker, log)
                self.done[key] = log.entries
            except (AssertionError, Exception) as exc:
                self.done[key] = exc
            finally:
                maker.close()
        got = self.done[key]
        if isinstance(got, BaseException):
            raise got
        return got


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Answers]:
    root = tmp_path_factory.mktemp("everywhere")
    config = root / "config.json"
    config.write_text(json.dumps(CONFIG))
    srv = start(root / "data", "--memory-config", str(config))
    try:
        yield Answers(root, srv)
    finally:
        srv.stop()


@pytest.mark.parametrize("kind", IMPLEMENTATIONS)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_implementation_answers_the_contract_as_memory_does(
        answers: Answers, scenario: str, kind: str) -> None:
    got = answers.of(scenario, kind)
    if kind == "Memory":
        assert got  # the scenario ran, and its own assertions held
        return
    want = answers.of(scenario, "Memory")
    assert [label for label, _ in got] == [label for label, _ in want]
    for (label, mine), (_, memory) in zip(got, want, strict=True):
        assert mine == memory, label
