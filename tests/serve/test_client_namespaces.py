"""Namespaces and filters through the Python client: one tenant, two users, nothing of
one reaches the other — on every op, over a real ``holomem serve`` process.

Each test runs twice, on an embedded ``Memory`` and on a ``Client``'s ``.memory``
against a server on 127.0.0.1, with the same code: the client takes every
namespace and filter argument ``Memory`` takes, and answers the same. Alice and Bob
share one tenant (one store); every fact and every string of Alice's carries the
word "alice", so "nothing of Alice reaches Bob" is checked on the whole encoded
answer of each of Bob's calls, not only on the ids it names.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from holomem import InvalidError, LimitError, Memory, NotFoundError, Store
from holomem.api.memory.config import config_from_json
from holomem.client import AsyncClient, Client

from .conftest import API_KEY, Server, start

ALICE = ["users", "alice"]
BOB = ["users", "bob"]
CONFIG = {"supersession": "latest-by-subject",
          "forgetting": {"supersededForLongerThanMs": 0},
          "consolidation": {"duplicates": {"nearThreshold": 1.0}}}
#: A word only each user's secret holds, to look for in every file of the store.
MARKER = {"alice": "zqxalicemarker", "bob": "zqxbobmarker"}
QUERY = "Lisa lives Paris Berlin Tom works Acme Initech sentence code"


class Place:
    """Where a test's memory lives: an embedded store, or a served one."""

    def __init__(self, memory: Any, files: Path, server: Server | None = None) -> None:
        self.memory, self.files, self.server = memory, files, server

    def disk(self) -> bytes:
        """Every byte of every file of the store(s)."""
        return b"".join(p.read_bytes() for p in sorted(self.files.rglob("*")) if p.is_file())


@pytest.fixture(params=["local", "remote"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    if request.param == "local":
        store = Store.open(tmp_path / "local", sync="none")
        yield Place(Memory(store, config_from_json(json.dumps(CONFIG))), tmp_path / "local")
        store.close()
        return
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    srv = start(tmp_path / "data", "--memory-config", str(config))
    client = Client(srv.url, api_key=API_KEY, tenant="shared")
    try:
        yield Place(client.memory, srv.data, srv)
    finally:
        client.close()
        srv.stop()


def fill(memory: Any) -> dict[str, list[Any]]:
    """The same story for Alice and Bob, in their own namespaces (ids are store-wide, so
    each user's carry their name); the Remembered answers, per user."""
    out: dict[str, list[Any]] = {}
    for who, ns in (("alice", ALICE), ("bob", BOB)):
        name = who.capitalize()
        out[who] = [
            memory.remember(id=f"{who}-city-1", text="Lisa lives in Paris", subject="lisa/city",
                            entities=["Lisa", "Paris"], valid_from=1000,
                            metadata={"kind": "city", "rank": 1}, namespace=ns),
            memory.remember(id=f"{who}-city-2", text="Lisa lives in Berlin",
                            subject="lisa/city", entities=["Lisa", "Berlin"], valid_from=2000,
                            metadata={"kind": "city", "rank": 2}, namespace=ns),
            *memory.remember_many([
                {"id": f"{who}-job-1", "text": "Tom works at Acme", "entities": ["Tom"],
                 "namespace": ns},
                {"id": f"{who}-job-2", "text": "Tom works at Initech", "entities": ["Tom"],
                 "namespace": ns},
                {"id": f"{who}-dup-1", "text": "the same sentence twice", "namespace": ns},
                {"id": f"{who}-dup-2", "text": "the same sentence twice", "namespace": ns}]),
            memory.remember(f"{who} keeps the code {MARKER[who]} with Lisa",
                            id=f"{who}-secret", entities=["Lisa", name],
                            metadata={"kind": "secret", "owner": who}, namespace=ns),
        ]
    return out


def encoded(answer: Any) -> str:
    return msgspec.json.encode(answer).decode().lower()


def test_nothing_of_one_user_reaches_the_other_on_any_op(place: Place) -> None:
    m = place.memory
    written = fill(m)
    # remember: the same subject in two namespaces is two slots; Bob's Berlin replaced
    # Bob's Paris only.
    assert written["bob"][1].superseded == ["bob-city-1"]
    assert written["alice"][1].superseded == ["alice-city-1"]
    everyone = {r.id for r in m.recall(QUERY, k=50, history="all")}
    assert {i for i in everyone if i.startswith("alice-")} and \
        {i for i in everyone if i.startswith("bob-")}  # the root sees both: they are there

    t0 = dt.datetime(2000, 1, 1, tzinfo=dt.UTC)
    bobs: dict[str, Any] = {
        "remember": written["bob"],
        "recall": m.recall(QUERY, k=50, history="all", namespace=BOB),
        "recall explained": m.recall(QUERY, k=50, explain=True, namespace=BOB),
        "recall filtered": m.recall("Lisa", k=50, namespace=BOB,
                                    filter={"metadata": {"kind": {"$in": ["secret", "city"]}},
                                            "ingestedAfter": t0}),
        "explain": m.explain(QUERY, "bob-city-1", namespace=BOB),
        "list": m.list(namespace=BOB),
        "list filtered": m.list(namespace=BOB, filter={"entity": "Lisa", "metadata": {
            "rank": {"$gte": 1}}}),
        "list_namespaces": m.list_namespaces(prefix=BOB),
        "probe": m.probe("Lisa", k=50, namespace=BOB),
        "related": m.related("Lisa", k=50, namespace=BOB),
        "reason": m.reason(["Lisa", "Bob"], k=50, namespace=BOB),
        "contradict": m.contradict(k=50, namespace=BOB),
        "contradict filtered": m.contradict(k=50, namespace=BOB,
                                            filter={"$not": {"metadata": {"kind": "city"}}}),
        "apply_forgetting": m.apply_forgetting(dry_run=True, namespace=BOB),
        "consolidate": m.consolidate(dry_run=True, namespace=BOB),
        "forget within": m.forget({"entity": "Lisa"}, dry_run=True, within=BOB),
        "forget namespace": m.forget({"namespace": BOB}, dry_run=True),
        "history": m.history("bob-city-2"),
        "get": m.get("bob-secret"),
    }
    for op, answer in bobs.items():
        text = encoded(answer)
        assert "bob" in text, (op, text)  # Bob's own facts did come back...
        assert "alice" not in text, (op, text)  # ...and nothing of Alice's
    # What Bob's answers hold, exactly: his facts, all of them where the op asks for all.
    assert {r.id for r in bobs["recall"]} == {r.id for r in written["bob"]}
    assert {r.id for r in bobs["recall filtered"]} == {"bob-city-2", "bob-secret"}
    assert {f.id for f in bobs["list"].facts} == {r.id for r in written["bob"]}
    assert {f.id for f in bobs["list filtered"].facts} == {"bob-city-1", "bob-city-2"}
    assert [(n.namespace, n.facts) for n in bobs["list_namespaces"].namespaces] == [(BOB, 7)]
    assert [(p.a, p.b) for p in bobs["contradict"].pairs] == [("bob-job-1", "bob-job-2")]
    assert [(p.a, p.b) for p in bobs["contradict filtered"].pairs] == \
        [("bob-job-1", "bob-job-2")]
    assert bobs["apply_forgetting"].removed == ["bob-city-1"]
    assert [g.sources for g in bobs["consolidate"].groups] == [["bob-dup-1", "bob-dup-2"]]
    assert set(bobs["forget within"].removed) == {"bob-city-1", "bob-city-2", "bob-secret"}
    assert set(bobs["forget namespace"].removed) == {r.id for r in written["bob"]}
    assert {h.entity for h in bobs["related"].results} >= {"Bob"}
    # And the other way round, for the ops that narrow by namespace.
    for answer in (m.recall(QUERY, k=50, history="all", namespace=ALICE),
                   m.list(namespace=ALICE), m.contradict(k=50, namespace=ALICE),
                   m.related("Lisa", k=50, namespace=ALICE),
                   m.consolidate(dry_run=True, namespace=ALICE)):
        text = encoded(answer)
        assert "alice" in text and "bob" not in text, text
    # Maintenance run for one user changes nothing of the other's.
    assert m.apply_forgetting(dry_run=False, namespace=BOB).removed == ["bob-city-1"]
    done = m.consolidate(dry_run=False, namespace=BOB)
    assert len(done.added) == 1 and m.get(done.added[0]).namespace == BOB
    assert m.get("alice-city-1") is not None
    assert [n.namespace for n in m.list_namespaces(prefix=["users"]).namespaces] == [ALICE, BOB]
    assert {f.id for f in m.list(namespace=ALICE).facts} == {r.id for r in written["alice"]}


def test_explain_under_one_users_namespace_tells_nothing_of_anothers_fact(place: Place
                                                                           ) -> None:
    fill(place.memory)
    with pytest.raises(NotFoundError) as outside:
        place.memory.explain(f"code {MARKER['alice']}", "alice-secret", namespace=BOB)
    with pytest.raises(NotFoundError) as missing:
        place.memory.explain(f"code {MARKER['alice']}", "no-such-fact", namespace=BOB)
    # The same answer as for an id that does not exist, up to the id itself.
    assert str(outside.value).replace("alice-secret", "X") == \
        str(missing.value).replace("no-such-fact", "X")


def test_forgetting_a_users_namespace_with_purge_erases_them_and_keeps_the_other(
        place: Place) -> None:
    m = place.memory
    written = fill(m)
    assert MARKER["bob"].encode() in place.disk()  # the scan can see it: plaintext store
    report = m.forget({"namespace": BOB}, purge=True)
    assert report.purged and set(report.removed) == {r.id for r in written["bob"]}
    disk = place.disk()
    assert MARKER["bob"].encode() not in disk  # gone from every file, before a restart
    assert MARKER["alice"].encode() in disk
    assert m.recall(QUERY, k=50, history="all", namespace=BOB) == []
    assert m.list_namespaces().namespaces[0].namespace == ALICE
    assert len(m.list_namespaces().namespaces) == 1
    assert {f.id for f in m.list(namespace=ALICE).facts} == {r.id for r in written["alice"]}
    hit = m.recall(MARKER["alice"], namespace=ALICE)
    assert [r.id for r in hit] == ["alice-secret"]
    if place.server is not None:  # and after a restart of the server
        place.server.stop()
        again = start(place.server.data)
        try:
            with Client(again.url, api_key=API_KEY, tenant="shared") as client:
                assert client.memory.recall(MARKER["bob"], history="all") == []
                assert [r.id for r in client.memory.recall(MARKER["alice"])] == ["alice-secret"]
            assert MARKER["bob"].encode() not in place.disk()
        finally:
            again.stop()


def test_namespace_and_filter_arguments_are_taken_and_checked_as_memory_does(
        place: Place) -> None:
    m = place.memory
    fill(m)
    # Tuples for namespaces; datetimes anywhere in a filter, nested too.
    after, before = (dt.datetime(2000, 1, 1, tzinfo=dt.UTC),
                     dt.datetime(2200, 1, 1, tzinfo=dt.UTC))
    nested = {"$or": [{"ingestedAfter": after, "metadata": {"kind": "secret"}},
                      {"$not": {"ingestedBefore": before}}]}
    assert [r.id for r in m.recall("Lisa code", namespace=tuple(BOB), filter=nested)] == \
        ["bob-secret"]
    assert [f.id for f in m.list(namespace=tuple(BOB), filter={
        "ingested_after": after, "$and": [nested]}).facts] == ["bob-secret"]
    assert m.contradict(namespace=tuple(BOB), filter={"eventAfter": after}).pairs == []
    assert [n.namespace for n in m.list_namespaces(prefix=("users",), max_depth=1)
            .namespaces] == [["users"]]
    page = m.list_namespaces(prefix=["users"], limit=1)
    assert [n.namespace for n in page.namespaces] == [ALICE]
    rest = m.list_namespaces(prefix=["users"], limit=1, cursor=page.next_cursor)
    assert [n.namespace for n in rest.namespaces] == [BOB] and rest.next_cursor is None
    # The same errors, with the same classes, from either side.
    bad: list[tuple[Any, type[Exception]]] = [
        (lambda: m.remember(text="x", namespace="users//x"), InvalidError),
        (lambda: m.remember(text="x", namespace=[f"n{i}" for i in range(9)]), LimitError),
        (lambda: m.recall("x", namespace=[""]), InvalidError),
        (lambda: m.recall("x", filter={"metadata": {"rank": {"$gt": [1]}}}), InvalidError),
        (lambda: m.recall("x", filter={"$bogus": 1}), InvalidError),
        (lambda: m.list(filter={"ingestedAfter": dt.datetime(2000, 1, 1)}), InvalidError),
        (lambda: m.list_namespaces(prefix="users/"), InvalidError),
        (lambda: m.list_namespaces(max_depth=0), InvalidError),
        (lambda: m.probe("Lisa", namespace=[1]), InvalidError),
        (lambda: m.reason(["Lisa"], namespace=["a\nb"]), InvalidError),
        (lambda: m.contradict(filter={"metadata": {"k": {"$exists": 1}}}), InvalidError),
        (lambda: m.forget({"namespace": "/users"}), InvalidError),
        (lambda: m.forget({"ids": ["bob-job-1"]}, within=[""]), InvalidError),
        (lambda: m.apply_forgetting(namespace=["x"] * 9), LimitError),
        (lambda: m.consolidate(namespace="us\\ers"), InvalidError),
    ]
    for call, cls in bad:
        with pytest.raises(cls):
            call()
    assert {f.id for f in m.list(namespace=BOB).facts} >= {"bob-job-1"}  # nothing went


def test_the_async_client_takes_the_same_namespaces_and_filters(tmp_path: Path) -> None:
    srv = start(tmp_path / "data")

    async def main() -> None:
        async with AsyncClient(srv.url, api_key=API_KEY, tenant="shared") as client:
            m = client.memory
            await m.remember("alice drinks tea", namespace=ALICE, metadata={"n": 1})
            await m.remember("bob drinks tea", namespace=BOB, metadata={"n": 2})
            hits = await m.recall("drinks tea", namespace=tuple(BOB),
                                  filter={"ingestedAfter": dt.datetime(2000, 1, 1,
                                                                       tzinfo=dt.UTC)})
            assert [h.text for h in hits] == ["bob drinks tea"]
            page = await m.list_namespaces(prefix=["users"])
            assert [n.namespace for n in page.namespaces] == [ALICE, BOB]
            gone = await m.forget({"namespace": ALICE}, purge=True)
            assert gone.purged and len(gone.removed) == 1
            assert [f.text for f in (await m.list(filter={"metadata": {"n": {"$lt": 5}}})
                                     ).facts] == ["bob drinks tea"]

    try:
        asyncio.run(main())
    finally:
        srv.stop()
