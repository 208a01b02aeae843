"""Namespaces through the MCP door: ``holomem mcp --namespace PART ...``, driven by the MCP
SDK's own stdio client.

What the tests prove: a server given a namespace confines every tool to it — a
tool's ``namespace`` (forget's ``within`` and ``scope.namespace`` too) is taken under
the server's, a fact outside is answered as one that does not exist, and no
argument reaches past it, so two users served from one store by two servers never
see each other's facts; without ``--namespace`` a tool's namespace is absolute; the
tools' schemas describe the fields; a bad ``--namespace`` stops the server before
it starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from holomem import Memory, MemoryConfig, Store

from ._readme import ROOT
from .test_mcp import error_code, fenced, ok, serving

ALICE = ["users", "alice"]
BOB = ["users", "bob"]


def ids(block: str) -> list[str]:
    return sorted(line[3:].split("]")[0] for line in fenced(block))


def seed(data: Path) -> None:
    """Both users' facts, written by the library beside the MCP server's own writes."""
    with Store.open(data) as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"))
        for who, ns in (("alice", ALICE), ("bob", BOB)):
            memory.remember(id=f"{who}-city-1", text=f"{who} lives in Paris", subject="city",
                            namespace=ns, valid_from=1000)
            memory.remember(id=f"{who}-city-2", text=f"{who} lives in Berlin", subject="city",
                            namespace=ns, valid_from=2000)
            memory.remember(id=f"{who}-tea", text=f"{who} drinks green tea",
                            metadata={"kind": "taste"}, namespace=ns)
        memory.remember(id="root-fact", text="everyone lives somewhere, alice and bob too")


def test_a_servers_namespace_confines_every_tool(tmp_path: Path) -> None:
    data = tmp_path / "store"
    seed(data)
    everything = "alice bob lives Paris Berlin green tea somewhere note"
    with serving(data, "--namespace", "users", "--namespace", "alice") as s:
        # remember: under the server's namespace, a tool's namespace under that.
        s.remember(id="alice-note", text="alice keeps a note", namespace=["notes"])
        s.remember(id="alice-plain", text="alice lives with a cat")
        up = s.remember(text="alice tries to climb out", namespace=["..", "bob"])
        assert error_code(s.call("remember", {"text": "x", "namespace": ["n"] * 7})) == "limit"
        assert error_code(s.call("remember", {"text": "x", "namespace": "users/"})) == \
            "invalid_request"
        refused = s.call("remember", {"text": "alice moves", "supersedes": ["bob-city-2"]})
        assert error_code(refused) == "invalid_request"  # never links into another namespace

        # recall and explain: only facts under the server's namespace, whatever is asked.
        (block,) = ok(s.call("recall", {"query": everything, "k": 50, "history": "all"}))
        assert ids(block) == sorted(["alice-city-1", "alice-city-2", "alice-tea", "alice-note",
                                     "alice-plain", up["id"]])
        (block,) = ok(s.call("recall", {"query": everything, "namespace": ["notes"]}))
        assert ids(block) == ["alice-note"]
        (block,) = ok(s.call("recall", {"query": everything, "namespace": ["users", "bob"]}))
        assert fenced(block) == ["(no facts)"]  # relative: users/alice/users/bob is empty
        (block,) = ok(s.call("recall", {"query": "green tea", "filter": {
            "metadata": {"kind": "taste"}}}))
        assert ids(block) == ["alice-tea"]
        (body,) = ok(s.call("explain", {"query": "Paris", "id": "alice-city-1"}))
        assert json.loads(body)["explanation"]["id"] == "alice-city-1"

        # A fact outside is answered exactly as a fact that does not exist.
        for outside in ("bob-city-1", "root-fact"):
            assert ok(s.call("get", {"id": outside})) == ok(s.call("get", {"id": "nope"})) \
                == ['{"fact": null}']
            for tool, args in (("history", {"id": outside}),
                               ("explain", {"query": "Paris lives", "id": outside})):
                result = s.call(tool, args)
                assert error_code(result) == "not_found"
                assert json.loads(result.content[0].text)["error"]["message"] == \
                    f"no fact {outside!r}"

        # forget: every scope stays under the server's namespace.
        (body,) = ok(s.call("forget", {"scope": {"ids": ["bob-tea", "alice-plain"]},
                                       "dryRun": False}))
        assert json.loads(body)["removed"] == ["alice-plain"]
        (body,) = ok(s.call("forget", {"scope": {"subject": "city"}, "dryRun": True}))
        assert sorted(json.loads(body)["removed"]) == ["alice-city-1", "alice-city-2"]
        (body,) = ok(s.call("forget", {"scope": {"ids": ["alice-tea", "alice-note"]},
                                       "within": ["notes"], "dryRun": True}))
        assert json.loads(body)["removed"] == ["alice-note"]
        (body,) = ok(s.call("forget", {"scope": {"namespace": ["notes"]}, "purge": True,
                                       "dryRun": False}))
        assert json.loads(body)["removed"] == ["alice-note"]
        (body,) = ok(s.call("forget", {"scope": {"namespace": []}, "dryRun": True}))
        assert sorted(json.loads(body)["removed"]) == sorted(
            ["alice-city-1", "alice-city-2", "alice-tea", up["id"]])

    with Store.open(data) as store:  # what the server wrote, and what it left alone
        memory = Memory(store)
        placed = memory.get(up["id"])
        assert placed is not None and placed.namespace == [*ALICE, "..", "bob"]
        assert memory.get("alice-note") is None and memory.get("alice-plain") is None
        assert sorted(f.id for f in memory.list(namespace=BOB).facts) == \
            ["bob-city-1", "bob-city-2", "bob-tea"]
        assert memory.get("bob-city-2").status == "current"  # type: ignore[union-attr]
        assert memory.get("root-fact") is not None

    # Bob's own server, on the same store: nothing of Alice's reaches him.
    with serving(data, "--namespace", "users", "--namespace", "bob") as s:
        (block,) = ok(s.call("recall", {"query": everything, "k": 50, "history": "all"}))
        assert ids(block) == ["bob-city-1", "bob-city-2", "bob-tea"]
        assert ok(s.call("get", {"id": "alice-tea"})) == ['{"fact": null}']
        (body,) = ok(s.call("forget", {"scope": {"namespace": []}, "purge": True,
                                       "dryRun": False}))
        assert sorted(json.loads(body)["removed"]) == ["bob-city-1", "bob-city-2", "bob-tea"]
    marker = b"bob drinks green tea"
    assert not any(marker in p.read_bytes() for p in data.rglob("*") if p.is_file())
    with Store.open(data) as store:
        memory = Memory(store)
        assert memory.list(namespace=BOB).facts == []
        assert memory.get("alice-tea") is not None and memory.get("root-fact") is not None


def test_without_a_servers_namespace_a_tools_namespace_is_absolute(tmp_path: Path) -> None:
    data = tmp_path / "store"
    seed(data)
    with serving(data) as s:
        (block,) = ok(s.call("recall", {"query": "lives tea", "k": 50, "namespace": BOB}))
        assert ids(block) == ["bob-city-2", "bob-tea"]
        (block,) = ok(s.call("recall", {"query": "lives", "k": 50}))
        assert ids(block) == ["alice-city-2", "bob-city-2", "root-fact"]
        fact = s.remember(text="carol joins", namespace=["users", "carol"])
        (block, _) = ok(s.call("get", {"id": "bob-tea"}))
        assert ids(block) == ["bob-tea"]
    with Store.open(data) as store:
        placed = Memory(store).get(fact["id"])
        assert placed is not None and placed.namespace == ["users", "carol"]


def test_the_tools_describe_namespace_within_and_filter(tmp_path: Path) -> None:
    with serving(tmp_path / "store", "--namespace", "team") as s:
        schemas = {t.name: t.input_schema for t in s.tools()}
    assert "Where the fact lives" in schemas["remember"]["properties"]["namespace"]["description"]
    for tool in ("recall", "explain"):
        props = schemas[tool]["properties"]
        assert props["namespace"]["description"].startswith("Only facts at or under")
        assert "$gte" in props["filter"]["description"]
    forget = schemas["forget"]["properties"]
    assert "namespace" in forget["within"]["description"]
    assert forget["scope"]["properties"]["namespace"]["description"].startswith("Every fact")


def test_a_bad_namespace_option_stops_the_server_with_a_message(tmp_path: Path) -> None:
    for args, word in ((["--namespace", ""], b"namespace"),
                       (["--namespace", "a\tb"], b"control"),
                       ([arg for i in range(9) for arg in ("--namespace", f"p{i}")], b"8")):
        done = subprocess.run([sys.executable, "-m", "holomem", "mcp", "--data",
                               str(tmp_path / "s"), *args], input=b"", capture_output=True,
                              timeout=60, cwd=ROOT)
        assert done.returncode == 2 and word in done.stderr, done.stderr
        assert not (tmp_path / "s").exists()  # refused before the store was opened


def test_a_servers_namespace_confines_the_context_tools(tmp_path: Path) -> None:
    data = tmp_path / "store"
    seed(data)
    with Store.open(data) as store:
        Memory(store).save_working_context(BOB, "plan", {"goal": "bob's secret goal"})
    with serving(data, "--namespace", "users", "--namespace", "alice") as s:
        # Absent namespace: the server's own; a given one: under it.
        (body,) = ok(s.call("save_working_context", {"session": "plan",
                                                     "state": {"goal": "alice's goal"}}))
        assert json.loads(body)["workingContext"]["namespace"] == []
        ok(s.call("save_working_context", {"session": "deep", "state": [1],
                                           "namespace": ["notes"]}))
        block, meta = ok(s.call("load_working_context", {"session": "plan"}))
        assert "alice's goal" in block and "bob" not in block
        assert json.loads(meta)["namespace"] == []
        (body,) = ok(s.call("list_working_contexts", {"namespace": ["notes"]}))
        assert json.loads(body)["namespace"] == ["notes"]
        assert [x["session"] for x in json.loads(body)["sessions"]] == ["deep"]
        # Bob's namespace cannot be named: a namespace is taken under the server's.
        missing = s.call("load_working_context", {"session": "plan",
                                                  "namespace": ["..", "bob"]})
        assert error_code(missing) == "not_found"
        message = json.loads(missing.content[0].text)["error"]["message"]
        assert "['..', 'bob']" in message and "users" not in message
        block, decisions = ok(s.call("compile_context", {
            "query": "alice bob lives Paris Berlin green tea", "budgetTokens": 2000,
            "history": "all"}))
        kept = {d["id"] for d in json.loads(decisions)["decisions"]}
        assert kept == {"alice-city-1", "alice-city-2", "alice-tea"}
        assert "bob" not in block
    with Store.open(data) as store:  # where the server saved them
        memory = Memory(store)
        assert memory.load_working_context(ALICE, "plan").state == {"goal": "alice's goal"}
        assert memory.load_working_context([*ALICE, "notes"], "deep").state == [1]
        assert memory.load_working_context(BOB, "plan").state == {"goal": "bob's secret goal"}
