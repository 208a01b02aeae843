"""A namespace written as one string is the namespace of its list, through every door
(docs/contract.md §4a; issue 27, item 8).

``"users/alice"`` is ``["users", "alice"]``; inside a string, ``\\/`` is a ``/`` and
``\\\\`` a ``\\``. The grammar round-trips (Hypothesis, below); every call that takes a
namespace or a prefix answers the same for either form — in ``Memory``,
``AsyncMemory``, ``Memory.call`` (JSON), the HTTP door and the Python client — with a
namespace whose strings hold a ``/`` and a ``\\`` among the ones used, so the escapes
cross every door; a string that breaks the grammar is ``invalid_request`` naming its
field, everywhere, and writes nothing. The command line reads and prints the same form.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from holomem import AsyncMemory, HolomemError, InvalidError, Memory, Store
from holomem.api.engine import nspath, validate
from holomem.api.memory.types import RememberInput
from holomem.client import Client
from tests import web

from .conftest import API_KEY, Server, headers, start

ALICE = ["users", "alice"]
BOB = ["users", "bob"]
USERS = ["users"]
#: Strings holding the two characters the string form escapes.
ODD = ["team/x", "back\\slash"]
AS_LIST: Callable[[list[str]], Any] = list
AS_STRING: Callable[[list[str]], Any] = nspath.format
#: Strings the grammar refuses: empty strings between, before and after "/", and a
#: "\" that escapes nothing (or ends the string).
BAD = ["users//alice", "/users", "users/", "/", "users\\alice", "users/alice\\"]


# -- the grammar ------------------------------------------------------------------------------
#: A string the contract allows in a namespace (validate.doc_id), rich in "/" and "\".
part = st.text(st.sampled_from("ab/\\é-")
               | st.characters(min_codepoint=0x20, exclude_characters="\x7f",
                               exclude_categories=("Cs",)),
               min_size=1, max_size=12)


@given(st.lists(part, max_size=validate.MAX_NAMESPACE_DEPTH))
def test_every_namespace_the_contract_allows_reads_back_from_its_string(
        parts: list[str]) -> None:
    text = nspath.format(parts)
    assert nspath.parse(text) == parts
    assert validate.namespace(text) == validate.namespace(parts) == tuple(parts)
    assert RememberInput(text="x", namespace=text).namespace == parts


@given(st.text(st.sampled_from("ab/\\"), max_size=16))
def test_every_string_that_parses_is_the_one_spelling_of_its_namespace(text: str) -> None:
    try:
        parts = nspath.parse(text)
    except InvalidError as exc:
        assert exc.code == "invalid_request" and exc.message.startswith(f"namespace {text!r}")
        return
    assert nspath.format(parts) == text
    assert all(parts)


def test_the_string_form_escapes_only_a_slash_and_a_backslash() -> None:
    assert nspath.parse("") == []
    assert nspath.parse("users/u-42") == ["users", "u-42"]
    assert nspath.parse("a\\/b/c\\\\d") == ["a/b", "c\\d"]
    assert nspath.format(["a/b", "c\\d", "x y"]) == "a\\/b/c\\\\d/x y"


@pytest.mark.parametrize("text", BAD)
def test_a_string_that_breaks_the_grammar_is_invalid_naming_its_field(text: str) -> None:
    with pytest.raises(InvalidError) as caught:
        validate.namespace(text, "scope.namespace")
    assert caught.value.code == "invalid_request"
    assert caught.value.message.startswith(f"scope.namespace {text!r} has ")


def test_a_string_too_long_for_any_namespace_is_refused_before_it_is_read() -> None:
    longest = nspath.format(["\\" * validate.MAX_ID_CHARS] * validate.MAX_NAMESPACE_DEPTH)
    assert len(longest) == validate.MAX_NAMESPACE_CHARS
    assert len(validate.namespace(longest)) == validate.MAX_NAMESPACE_DEPTH
    with pytest.raises(HolomemError) as caught:
        validate.namespace(longest + "/x")
    assert caught.value.code == "limit"


# -- the Python API: Memory, AsyncMemory, Client --------------------------------------------
def seed(m: Any) -> None:
    """Facts of Alice, Bob and an odd namespace, a link and a working context, each
    written with lists."""
    m.remember(id="a1", text="Alice lives in Paris", subject="alice/city",
               entities=["Alice", "Paris"], namespace=ALICE)
    m.remember(id="a2", text="Alice works at Acme in Paris", entities=["Alice"],
               namespace=ALICE)
    m.remember_many([{"id": "b1", "text": "Bob lives in Rome", "entities": ["Bob"],
                      "namespace": BOB},
                     {"text": "The odd team meets in Paris", "namespace": ODD}])
    m.relate("a1", "a2", "part_of", namespace=ALICE)
    m.save_working_context(ALICE, "s1", {"step": 1})


def timeless(value: Any) -> Any:
    """``value`` with every time of day (ms since the epoch, from 2001 on) as "<clock>":
    an answer about "now" (``validAt``) differs from one call to the next."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items()}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    if type(value) is int and value >= 10**12:
        return "<clock>"
    return value


def python_calls(m: Any, ns: Callable[[list[str]], Any]) -> list[Any]:
    """Every call of the Python API that takes a namespace or a prefix, repeatable on
    one store (reads, dry runs and writes that are already done), with namespaces
    written by ``ns``; each answer as plain JSON, or the error's code and message."""
    calls: list[Callable[[], Any]] = [
        lambda: m.remember(id="a1", text="Alice lives in Paris", subject="alice/city",
                           entities=["Alice", "Paris"], namespace=ns(ALICE)),
        lambda: m.remember("The odd team meets in Paris", namespace=ns(ODD)),
        lambda: m.remember_many([{"id": "b1", "text": "Bob lives in Rome",
                                  "entities": ["Bob"], "namespace": ns(BOB)}]),
        lambda: m.recall("Paris lives", namespace=ns(USERS)),
        lambda: m.recall("Paris", {"namespace": ns(ODD)}),
        lambda: m.explain("Paris", "a1", namespace=ns(ALICE)),
        lambda: m.explain("Rome", "b1", namespace=ns(ALICE)),
        lambda: m.list(namespace=ns(USERS)),
        lambda: m.list_namespaces(prefix=ns(USERS)),
        lambda: m.list_namespaces(prefix=ns(ODD[:1])),
        lambda: m.probe("Alice", namespace=ns(ALICE)),
        lambda: m.related("Alice", namespace=ns(USERS)),
        lambda: m.reason(["Alice", "Paris"], namespace=ns(ALICE)),
        lambda: m.contradict(namespace=ns(USERS)),
        lambda: m.forget({"namespace": ns(ALICE)}, dry_run=True),
        lambda: m.forget({"subject": "alice/city"}, within=ns(BOB), dry_run=True),
        lambda: m.apply_forgetting(namespace=ns(USERS)),
        lambda: m.consolidate(namespace=ns(ODD)),
        lambda: m.relate("a1", "a2", "part_of", namespace=ns(ALICE)),
        lambda: m.relate_many([{"fromId": "a1", "toId": "a2", "relation": "part_of"}],
                              namespace=ns(ALICE)),
        lambda: m.unrelate("a2", "a1", "part_of", namespace=ns(ALICE)),
        lambda: m.links("a1", namespace=ns(ALICE)),
        lambda: m.links("a1", namespace=ns(BOB)),
        lambda: m.why("a1", namespace=ns(ALICE)),
        lambda: m.compile_context("Alice Paris", 200, namespace=ns(ALICE)),
        lambda: m.explain_context("Alice Paris", 200, "a1", namespace=ns(ALICE)),
        lambda: m.load_working_context(ns(ALICE), "s1"),
        lambda: m.list_working_contexts(ns(ALICE)),
        lambda: list(m.export(ns(ODD))),
    ]
    out: list[Any] = []
    for call in calls:
        try:
            out.append(timeless(msgspec.to_builtins(call())))
        except HolomemError as exc:
            out.append([exc.code, exc.message])
    return out


class Synced:
    """An AsyncMemory driven by sync code (each coroutine run to its end)."""

    def __init__(self, target: Any, runner: asyncio.Runner) -> None:
        self._target, self._runner = target, runner

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            out = attr(*args, **kwargs)
            if inspect.isasyncgen(out):
                async def collect() -> list[Any]:
                    return [x async for x in out]
                return self._runner.run(collect())
            return self._runner.run(out) if inspect.iscoroutine(out) else out
        return call


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start(tmp_path_factory.mktemp("served") / "data")
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(params=["Memory", "AsyncMemory", "Client"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "Client":
        srv = request.getfixturevalue("server")
        with Client(srv.url, api_key=API_KEY, tenant=f"py-{tmp_path.name}"[:60]) as client:
            yield client.memory
        return
    with Store.open(tmp_path / "store", sync="none") as store:
        if request.param == "Memory":
            yield Memory(store)
            return
        with asyncio.Runner() as runner:
            yield Synced(AsyncMemory(Memory(store)), runner)


def test_every_python_call_answers_a_string_namespace_as_its_list(memory: Any) -> None:
    seed(memory)
    as_lists = python_calls(memory, AS_LIST)
    assert python_calls(memory, AS_STRING) == as_lists
    # The repeated writes were no-ops: the string named the same namespace (content ids
    # and payload digests included), and nothing was written twice.
    assert [r["created"] for r in as_lists[0:1] + as_lists[1:2] + as_lists[2]] == [False] * 3
    assert as_lists[18]["created"] is False
    assert ["team/x", "back\\slash"] in [n["namespace"] for n in as_lists[9]["namespaces"]]
    assert len(memory.list(history="all").facts) == 4


def test_a_bad_namespace_string_is_invalid_in_every_call_and_writes_nothing(
        memory: Any) -> None:
    seed(memory)
    before = msgspec.to_builtins(memory.list(history="all"))
    for text in BAD:
        answers = python_calls(memory, lambda parts, text=text: text)
        assert {a[0] for a in answers} == {"invalid_request"}, answers
        assert all(f"namespace {text!r} has " in a[1] or f"within {text!r} has " in a[1]
                   or f"prefix {text!r} has " in a[1] for a in answers), answers
    assert msgspec.to_builtins(memory.list(history="all")) == before


# -- the JSON contract: Memory.call and the HTTP door ---------------------------------------
def json_requests(ns: Callable[[list[str]], Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every op's request that carries a namespace or a prefix, repeatable on the
    seeded store, with namespaces written by ``ns``."""
    return [
        ("remember", {"id": "a1", "text": "Alice lives in Paris", "subject": "alice/city",
                      "entities": ["Alice", "Paris"], "namespace": ns(ALICE)}),
        ("remember", {"facts": [{"text": "The odd team meets in Paris",
                                 "namespace": ns(ODD)}]}),
        ("recall", {"query": "Paris lives", "namespace": ns(USERS)}),
        ("explain", {"query": "Paris", "id": "a1", "namespace": ns(ALICE)}),
        ("explain", {"query": "Rome", "id": "b1", "namespace": ns(ALICE)}),
        ("forget", {"scope": {"namespace": ns(ALICE)}, "dryRun": True}),
        ("forget", {"scope": {"subject": "alice/city"}, "within": ns(BOB), "dryRun": True}),
        ("applyForgetting", {"namespace": ns(USERS)}),
        ("consolidate", {"namespace": ns(ODD)}),
        ("probe", {"entity": "Alice", "namespace": ns(ALICE)}),
        ("related", {"entity": "Alice", "namespace": ns(USERS)}),
        ("reason", {"entities": ["Alice", "Paris"], "namespace": ns(ALICE)}),
        ("contradict", {"namespace": ns(USERS)}),
        ("list", {"namespace": ns(USERS)}),
        ("listNamespaces", {"prefix": ns(ODD[:1])}),
        ("relate", {"fromId": "a1", "toId": "a2", "relation": "part_of",
                    "namespace": ns(ALICE)}),
        ("relateMany", {"links": [{"fromId": "a1", "toId": "a2", "relation": "part_of"}],
                        "namespace": ns(ALICE)}),
        ("unrelate", {"fromId": "a2", "toId": "a1", "relation": "part_of",
                      "namespace": ns(ALICE)}),
        ("links", {"id": "a1", "namespace": ns(ALICE)}),
        ("why", {"query": "a1", "namespace": ns(ALICE)}),
        ("compileContext", {"query": "Alice Paris", "budgetTokens": 200,
                            "namespace": ns(ALICE)}),
        ("explainContext", {"query": "Alice Paris", "budgetTokens": 200, "id": "a1",
                            "namespace": ns(ALICE)}),
        ("loadWorkingContext", {"session": "s1", "namespace": ns(ALICE)}),
        ("listWorkingContexts", {"namespace": ns(ALICE)}),
        ("export", {"namespace": ns(ODD)}),
    ]


def json_calls(call: Callable[[str, dict[str, Any]], Any],
               ns: Callable[[list[str]], Any]) -> list[Any]:
    return [call(op, request) for op, request in json_requests(ns)]


def by_memory_call(memory: Memory) -> Callable[[str, dict[str, Any]], Any]:
    def call(op: str, request: dict[str, Any]) -> Any:
        try:
            return timeless(memory.call(op, request))
        except HolomemError as exc:
            return [exc.code, exc.message]
    return call


def by_http(srv: Server, tenant: str) -> Callable[[str, dict[str, Any]], Any]:
    def call(op: str, request: dict[str, Any]) -> Any:
        r = web.post(f"{srv.url}/api/v1/memory/{op}", json=request,
                     headers=headers(tenant), timeout=30)
        body = r.json()
        return [r.status_code, body["error"]["code"], body["error"]["message"]] \
            if r.status_code != 200 else timeless(body)
    return call


def test_memory_call_answers_a_string_namespace_as_its_list(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store", sync="none") as store:
        memory = Memory(store)
        seed(memory)
        call = by_memory_call(memory)
        as_lists = json_calls(call, AS_LIST)
        assert json_calls(call, AS_STRING) == as_lists
        assert as_lists[0]["remembered"][0]["created"] is False
        for text in BAD:
            assert {a[0] for a in json_calls(call, lambda parts, t=text: t)} == \
                {"invalid_request"}
        assert len(memory.list(history="all").facts) == 4


def test_the_http_door_answers_a_string_namespace_as_its_list(server: Server) -> None:
    with Client(server.url, api_key=API_KEY, tenant="http-strings") as client:
        seed(client.memory)
    call = by_http(server, "http-strings")
    as_lists = json_calls(call, AS_LIST)
    assert json_calls(call, AS_STRING) == as_lists
    assert as_lists[1]["remembered"][0]["created"] is False
    assert as_lists[14]["namespaces"] == [{"namespace": ODD, "facts": 1}]
    for text in BAD:
        answers = json_calls(call, lambda parts, t=text: t)
        assert {(a[0], a[1]) for a in answers} == {(422, "invalid_request")}, answers


# -- the command line ---------------------------------------------------------------------
def holomem(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "holomem", *args], capture_output=True,
                          text=True, timeout=120)


def test_the_command_line_reads_and_prints_the_contracts_string(tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    written = holomem("remember", store, "--text", "The odd team meets in Paris",
                      "--namespace", "team\\/x/back\\\\slash", "--json")
    assert written.returncode == 0, written.stderr
    fid = json.loads(written.stdout)["remembered"][0]["id"]
    with Store.open(store) as s:
        assert Memory(s).get(fid).namespace == ODD  # type: ignore[union-attr]
    listed = holomem("list-namespaces", store)
    assert listed.stdout.split() == ["team\\/x/back\\\\slash", "1"]
    again = holomem("list", store, "--namespace", listed.stdout.split()[0], "--json")
    assert [f["id"] for f in json.loads(again.stdout)["facts"]] == [fid]
    for text in BAD:
        refused = holomem("list", store, "--namespace", text)
        assert refused.returncode == 2 and f"namespace {text!r} has " in refused.stderr, \
            refused.stderr
