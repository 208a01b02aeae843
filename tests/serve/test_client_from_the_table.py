"""The clients are made from the op table (issue 28, item 4): a call's request is the
inverse of its row's ``args``, and a row added to the table is a method of both
clients without a line of client code.

- For random valid arguments of recall (options as a Struct, a dict, camelCase keys,
  keywords), remember (a string, a dict, a RememberInput, keywords), why and
  compile_context, the request the client sends, decoded by the contract, runs the
  call Memory runs for the same arguments: the same options, and the same answer (or
  the same error). The "server" is ``Memory.call`` behind an httpx mock transport, so
  the test sees every request.
- Every row of the table but the Python-only ones is served by the generic path:
  Memory's own method (signature and docstring) on both clients; a row added to the
  table (with its Memory method) appears on both after a reload of the client module.
- A time argument takes an aware datetime, and a naive one is refused before anything
  is sent, as Memory refuses it.
- Each transport (written once per flavour) follows the tenant's writer with its own
  headers, at most twice, and only to an http(s) URL.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import importlib
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import holomem.client
from holomem import HolomemError, InvalidError, ManualClock, Memory, RecallOptions, Store
from holomem.api.memory import contract, ops
from holomem.api.memory import requests as rq
from holomem.api.memory.recall import rank
from holomem.api.memory.types import FactRecord, RememberInput
from holomem.api.memory.window.budget import ContextFragment
from holomem.client import PYTHON_ONLY, AsyncClient, Client

NOW = 1_700_000_000_000
Asked = list[tuple[str, dict[str, Any]]]


def served_by(memory: Memory, asked: Asked) -> httpx.MockTransport:
    """A transport whose server is ``memory.call``; every request it gets is in ``asked``."""
    def handle(request: httpx.Request) -> httpx.Response:
        op = request.url.path.rsplit("/", 1)[1]
        body = json.loads(request.content)
        asked.append((op, body))
        try:
            return httpx.Response(200, json=memory.call(op, body))
        except HolomemError as exc:
            return httpx.Response(422, json={"error": {"code": exc.code,
                                                       "message": exc.message}})

    return httpx.MockTransport(handle)


def outcome(call: Callable[[], Any]) -> Any:
    """What a call answered, as plain data, or its error's class, code and message."""
    try:
        return msgspec.to_builtins(call())
    except HolomemError as exc:
        return (type(exc).__name__, exc.code, exc.message)


class Pair:
    """A Memory, and a Client whose server is another Memory over a copy of its facts."""

    def __init__(self, root: Path) -> None:
        self.stores = [Store.open(root / name, sync="none") for name in ("direct", "served")]
        self.direct, self.served = (Memory(s, clock=ManualClock(NOW)) for s in self.stores)
        self.asked: Asked = []
        self.client = Client("http://holomem.test",
                             transport=served_by(self.served, self.asked))
        for m in (self.direct, self.served):
            m.remember_many([
                {"id": "a1", "text": "alice lives in paris", "subject": "alice/city",
                 "entities": ["Alice", "Paris"], "metadata": {"kind": "city", "rank": 1},
                 "validFrom": 1000},
                {"id": "a2", "text": "alice lives in berlin", "subject": "alice/city",
                 "entities": ["Alice", "Berlin"], "metadata": {"kind": "city", "rank": 2},
                 "validFrom": 2000, "supersedes": ["a1"]},
                {"id": "u1", "text": "alice drinks tea in paris", "entities": ["Alice"],
                 "metadata": {"kind": "habit", "rank": 3}, "namespace": ["users", "u1"]},
                {"id": "b1", "text": "bob drinks tea with alice", "entities": ["Bob"],
                 "metadata": {"kind": "habit"}, "eventTime": 1500}])
            m.relate("a1", "b1", "mentions")
            m.relate("a2", "a1", "explained_by")

    def close(self) -> None:
        self.client.close()
        for s in self.stores:
            s.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    p = Pair(tmp_path_factory.mktemp("pair"))
    yield p
    p.close()


AWARE = st.datetimes(min_value=dt.datetime(1970, 1, 2), max_value=dt.datetime(2100, 1, 1),
                     timezones=st.sampled_from([dt.UTC, dt.timezone(dt.timedelta(hours=2))]))
TIME = st.one_of(st.integers(0, NOW * 2), AWARE)
NAMESPACE = st.lists(st.sampled_from(["users", "u1", "u2"]), max_size=2).flatmap(
    lambda ns: st.sampled_from([ns, tuple(ns)]))
FILTER = st.one_of(
    st.just({"metadata": {"kind": {"$in": ["city", "habit"]}}}),
    st.builds(lambda t, r: {"$or": [{"ingestedAfter": t}, {"metadata": {"rank": {"$gte": r}}}]},
              AWARE, st.integers(0, 3)),
    st.builds(lambda t: {"$not": {"eventBefore": t}}, TIME))
RECALL = st.fixed_dictionaries({}, optional={
    "k": st.integers(1, 20), "as_of": TIME, "known_at": TIME,
    "history": st.sampled_from(["current", "all", "historical"]),
    "subject": st.just("alice/city"), "entities": st.lists(st.sampled_from(["Alice", "Bob"])),
    "explain": st.booleans(), "candidate_limit": st.integers(1, 50), "namespace": NAMESPACE,
    "filter": FILTER})
QUERY = st.lists(st.sampled_from(["alice", "lives", "paris", "tea", "bob", "berlin"]),
                 min_size=1, max_size=4).map(" ".join)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w.title() for w in rest)


@st.composite
def with_options(draw: st.DrawFn, fields: dict[str, Any]
                 ) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The same options given each way Memory takes them: (positional options, keywords)."""
    how = draw(st.sampled_from(["keywords", "dict", "camel dict", "struct", "split"]))
    if how == "keywords":
        return (), fields
    if how == "struct":
        return (RecallOptions(**fields),), {}
    if how == "split":
        names = sorted(fields)
        cut = draw(st.integers(0, len(names)))
        return ({n: fields[n] for n in names[:cut]},), {n: fields[n] for n in names[cut:]}
    return ({camel(k) if how == "camel dict" else k: v for k, v in fields.items()},), {}


def meant(options: Any, fields: dict[str, Any]) -> Any:
    """What Memory runs a recall with: its checked options, the filter compiled (a time
    in it a datetime or milliseconds alike)."""
    o, where = rank.checked(options, fields)
    return msgspec.structs.replace(o, filter=None), where


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), query=QUERY, fields=RECALL)
def test_a_recall_asks_for_the_very_call_memory_runs(pair: Pair, data: st.DataObject,
                                                     query: str, fields: dict[str, Any]
                                                     ) -> None:
    options, keywords = data.draw(with_options(fields))
    direct = outcome(lambda: pair.direct.recall(query, *options, **keywords))
    served = outcome(lambda: pair.client.recall(query, *options, **keywords))
    assert served == direct
    op, request = pair.asked[-1]
    inv = contract.decode(op, request)
    assert (inv.method, inv.args[0]) == ("recall", query)
    assert meant(inv.args[1], {}) == meant(options[0] if options else None, keywords)
    explained = outcome(lambda: pair.client.explain(query, "a1", *options, **keywords))
    assert explained == outcome(lambda: pair.direct.explain(query, "a1", *options,
                                                            **keywords))


REMEMBER = st.fixed_dictionaries({"text": st.sampled_from(["carol sings", "dan runs far"])},
                                 optional={
    "id": st.sampled_from(["c1", "c2"]), "subject": st.just("carol/hobby"),
    "entities": st.lists(st.sampled_from(["Carol", "Dan"]), unique=True),
    "metadata": st.dictionaries(st.sampled_from(["kind", "n"]), st.integers(0, 3)),
    "event_time": TIME, "valid_from": TIME, "confidence": st.sampled_from([0.25, 1.0]),
    "namespace": NAMESPACE})


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fields=REMEMBER, how=st.sampled_from(["str", "keywords", "dict", "camel dict",
                                              "struct"]))
def test_a_remember_of_a_string_a_dict_or_a_struct_stores_what_memory_stores(
        pair: Pair, fields: dict[str, Any], how: str) -> None:
    args: tuple[Any, ...] = ()
    keywords: dict[str, Any] = {}
    if how == "str":
        args, keywords = (fields["text"],), {k: v for k, v in fields.items() if k != "text"}
    elif how == "keywords":
        keywords = fields
    elif how == "struct":
        args = (RememberInput(**fields),)
    else:
        args = ({camel(k) if how == "camel dict" else k: v for k, v in fields.items()},)
    direct = outcome(lambda: pair.direct.remember(*args, **keywords))
    assert outcome(lambda: pair.client.remember(*args, **keywords)) == direct
    if isinstance(direct, dict):
        assert msgspec.to_builtins(pair.served.get(direct["id"])) == \
            msgspec.to_builtins(pair.direct.get(direct["id"]))
        op, request = pair.asked[-1]
        assert (op, contract.decode(op, request).method) == ("remember", "remember")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(start=st.sampled_from(["a1", "b1", "alice paris", "bob tea"]),
       hops=st.integers(1, 3),
       relation=st.one_of(st.none(), st.sampled_from(["mentions", "explained_by"]),
                          st.lists(st.sampled_from(["mentions", "explained_by"]),
                                   min_size=1).map(tuple)),
       times=st.fixed_dictionaries({}, optional={"as_of": TIME, "known_at": TIME}),
       namespace=st.one_of(st.none(), NAMESPACE))
def test_why_asks_with_query_for_query_or_id_and_answers_as_memory(
        pair: Pair, start: str, hops: int, relation: Any, times: dict[str, Any],
        namespace: Any) -> None:
    def why(m: Any) -> Any:
        return outcome(lambda: m.why(start, hops, relation, namespace=namespace, **times))

    assert why(pair.client) == why(pair.direct)
    op, request = pair.asked[-1]
    inv = contract.decode(op, request)
    assert (inv.method, inv.args, request["maxHops"]) == ("why", (start,), hops)


FRAGMENT = st.builds(
    lambda i, text, time, kind: (
        ContextFragment(id=f"f{i}", text=text, time=time) if kind == "struct"
        else {"id": f"f{i}", "text": text, "time": time, "pinned": kind == "pinned"}),
    st.integers(0, 9), st.sampled_from(["plan the trip", "alice likes trains"]),
    st.one_of(st.none(), st.integers(0, NOW)), st.sampled_from(["struct", "dict", "pinned"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=QUERY, budget=st.integers(60, 400),
       fragments=st.one_of(st.none(), st.lists(FRAGMENT, max_size=3, unique_by=lambda f: (
           f.id if isinstance(f, ContextFragment) else f["id"]))),
       k=st.integers(1, 10), namespace=st.one_of(st.none(), NAMESPACE),
       recall=st.one_of(st.none(), st.fixed_dictionaries({}, optional={
           "as_of": TIME, "known_at": TIME, "history": st.sampled_from(["current", "all"]),
           "filter": FILTER})))
def test_compile_context_flattens_its_recall_options_and_answers_as_memory(
        pair: Pair, query: str, budget: int, fragments: Any, k: int, namespace: Any,
        recall: Any) -> None:
    def compiled(m: Any) -> Any:
        return outcome(lambda: m.compile_context(query, budget, namespace, fragments, k=k,
                                                 recall=recall))

    assert compiled(pair.client) == compiled(pair.direct)
    op, request = pair.asked[-1]
    assert contract.decode(op, request)[:2] == ("compile_context", (query, budget))
    assert "recall" not in request and all(camel(key) in request for key in recall or {})


def test_every_row_of_the_table_is_memorys_own_method_on_both_clients() -> None:
    for row in [*ops.OPS.values(), ops.REMEMBER_MANY]:
        if row.method in PYTHON_ONLY:
            continue
        memorys = getattr(Memory, row.method)
        for cls in (Client, AsyncClient):
            ours = getattr(cls, row.method)
            assert ours.__wrapped__ is memorys and ours.__doc__ == memorys.__doc__, row.name
            assert inspect.signature(ours) == inspect.signature(memorys), row.name
        assert inspect.iscoroutinefunction(getattr(AsyncClient, row.method)), row.name


def test_a_row_added_to_the_table_is_served_by_both_clients_without_client_code(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def earliest(self: Memory, /, id: str) -> list[FactRecord]:
        """The first version of a fact's chain."""
        return self.history(id)[:1]

    row = ops.Op("earliest", "earliest", rq.IdRequest, list[FactRecord], "history", False,
                 "id", "The first version of a fact's chain")
    monkeypatch.setattr(Memory, "earliest", earliest, raising=False)
    monkeypatch.setitem(ops.OPS, row.name, row)
    fresh = importlib.reload(holomem.client)
    try:
        with Store.open(tmp_path / "s", sync="none") as store:
            memory = Memory(store, clock=ManualClock(NOW))
            memory.remember("alice lives in paris", id="p")
            memory.remember("alice lives in rome", id="r", supersedes=["p"])
            asked: Asked = []
            with fresh.Client("http://holomem.test",
                              transport=served_by(memory, asked)) as client:
                assert [f.id for f in client.earliest("r")] == ["p"]
                assert client.earliest.__doc__ == earliest.__doc__

            async def run() -> list[str]:
                async with fresh.AsyncClient("http://holomem.test",
                                             transport=served_by(memory, asked)) as ac:
                    return [f.id for f in await ac.earliest(id="r")]

            assert asyncio.run(run()) == ["p"]
            assert asked == [("earliest", {"id": "r"})] * 2
    finally:
        monkeypatch.undo()
        importlib.reload(holomem.client)


def test_a_time_takes_an_aware_datetime_and_a_naive_one_is_refused_before_sending(
        pair: Pair) -> None:
    when = dt.datetime(2024, 5, 1, 12, tzinfo=dt.UTC)
    ms = int(when.timestamp() * 1000)
    assert outcome(lambda: pair.client.links("a1", as_of=when)) == \
        outcome(lambda: pair.direct.links("a1", as_of=ms))
    assert pair.asked[-1][1]["asOf"] == ms
    naive = dt.datetime(2024, 5, 1, 12)
    sent = len(pair.asked)
    calls = [lambda m: m.links("a1", as_of=naive), lambda m: m.why("a1", known_at=naive),
             lambda m: m.compile_context("alice", 200, recall={"as_of": naive}),
             lambda m: m.compile_context("alice", 200, fragments=[
                 {"id": "f", "text": "x", "time": naive}]),
             lambda m: m.contradict(filter={"$or": [{"eventAfter": naive}]})]
    for call in calls:
        with pytest.raises(InvalidError, match="timezone-aware") as info:
            call(pair.client)
        with pytest.raises(InvalidError) as local:
            call(pair.direct)
        assert info.value.message == local.value.message
    assert len(pair.asked) == sent  # none of them was sent


def test_both_transports_follow_the_writers_redirect_with_their_own_headers() -> None:
    seen: list[tuple[str, str | None, str | None]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers.get("authorization"),
                     request.headers.get("x-tenant-id")))
        hops = {"a.test": "http://b.test", "b.test": "http://writer.test",
                "loop.test": "http://loop.test", "odd.test": "ftp://writer.test"}
        if request.url.host in hops:
            return httpx.Response(307, headers={
                "location": f"{hops[request.url.host]}{request.url.path}"})
        return httpx.Response(200, json={"fact": None})

    transport = httpx.MockTransport(handle)
    with Client("http://a.test", api_key="k", tenant="t", transport=transport) as client:
        assert client.get("x") is None
        with pytest.raises(HolomemError, match="moved more than 2 times") as info:
            Client("http://loop.test", transport=transport).get("x")
        assert info.value.code == "locked"
        with pytest.raises(HolomemError, match="not an http"):
            Client("http://odd.test", transport=transport).get("x")
    assert seen[:3] == [(host, "Bearer k", "t") for host in ("a.test", "b.test",
                                                             "writer.test")]

    async def run() -> Any:
        async with AsyncClient("http://a.test", api_key="k", tenant="t",
                               transport=transport) as ac:
            return await ac.get("x")

    seen.clear()
    assert asyncio.run(run()) is None
    assert seen == [(host, "Bearer k", "t") for host in ("a.test", "b.test", "writer.test")]
