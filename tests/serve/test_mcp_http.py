"""MCP over streamable HTTP: ``holomem serve``'s ``/mcp``, driven by the MCP SDK's own
streamable-HTTP client against a real server process on 127.0.0.1.

What the tests prove: several MCP clients share one memory through one writer (what one
session writes, the others read at once, and the contract's HTTP routes see the same
store); ``X-Tenant-ID`` keeps tenants apart, and a tenant's store is created only by a
write (reads and dry-run forgets of an unknown tenant create nothing); an
``X-Holomem-Namespace`` confines a session as ``holomem mcp --namespace`` confines the
stdio server, and a bad one is a tool error; the server's API key, Host and Origin
checks and its batch bound apply to ``/mcp`` as to every route; the tools are the
stdio server's, schemas included.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from anyio.from_thread import start_blocking_portal
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tests import web

from ._readme import blocks
from .conftest import Server, free_port, headers, start
from .test_mcp import VENV_BIN, Session, error_code, fenced, ok, serving
from .test_mcp_tools import OFFERED


@asynccontextmanager
async def http_session(url: str, head: dict[str, str]) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers=head, timeout=30) as http, \
            streamable_http_client(url + "/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@contextmanager
def mcp(server: Server, tenant: str | None = None, namespace: list[str] | None = None,
        **extra: str) -> Iterator[Session]:
    """A session of the SDK's streamable-HTTP client with ``server``'s ``/mcp``."""
    head = {**headers(tenant), **{name.lower(): value for name, value in extra.items()}}
    if namespace is not None:
        head["x-holomem-namespace"] = json.dumps(namespace)
    with start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(http_session(server.url, head)) as session:
        yield Session(portal, session)


def ids(block: str) -> list[str]:
    return sorted(line[3:].split("]")[0] for line in fenced(block) if line != "(no facts)")


def contract(server: Server, op: str, body: dict[str, Any], tenant: str | None = None
             ) -> dict[str, Any]:
    response = web.post(f"{server.url}/api/v1/memory/{op}", json=body,
                        headers=headers(tenant), timeout=30)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_two_clients_share_one_memory_through_one_server(server: Server) -> None:
    with mcp(server) as desktop, mcp(server) as ide:
        desktop.remember(id="p", text="Alice lives in Paris", subject="alice/city")
        (block,) = ok(ide.call("recall", {"query": "where does Alice live"}))
        assert ids(block) == ["p"]  # written by one client, read by the other at once
        ide.remember(id="b", text="Alice moved to Berlin", subject="alice/city",
                     supersedes=["p"])
        _, structure = ok(desktop.call("history", {"id": "p"}))
        assert [(f["id"], f["status"]) for f in json.loads(structure)["history"]] == \
            [("p", "superseded"), ("b", "current")]
        (body,) = ok(desktop.call("forget", {"scope": {"ids": ["b"]}, "dryRun": False}))
        assert json.loads(body)["removed"] == ["b"]
        assert ok(ide.call("get", {"id": "b"})) == ['{"fact": null}']
    # One writer, one store: the contract's own route answers from it too.
    assert contract(server, "get", {"id": "p"})["fact"]["status"] == "current"
    assert contract(server, "get", {"id": "b"})["fact"] is None
    assert "POST /mcp tenant=default status=200" in server.log()  # the access log


def test_tenants_are_isolated_and_only_a_write_creates_a_store(server: Server) -> None:
    tenants = server.data / "tenants"
    with mcp(server, tenant="alice") as alice, mcp(server, tenant="bob") as bob:
        alice.remember(id="a1", text="Alice keeps bees", namespace=["garden"])
        (block,) = ok(bob.call("recall", {"query": "Alice bees"}))
        assert ids(block) == []
        assert ok(bob.call("get", {"id": "a1"})) == ['{"fact": null}']
        (body,) = ok(bob.call("list_namespaces", {}))
        assert json.loads(body)["namespaces"] == []
        (body,) = ok(bob.call("forget", {"scope": {"namespace": []}}))  # a dry run
        assert json.loads(body)["removed"] == []
        assert error_code(bob.call("history", {"id": "a1"})) == "not_found"
        assert not (tenants / "bob").exists()  # no read created bob's store
        (body,) = ok(alice.call("list_namespaces", {}))
        assert json.loads(body)["namespaces"] == [{"namespace": ["garden"], "facts": 1}]
        bob.remember(id="b1", text="Bob keeps goats")
        assert (tenants / "bob").is_dir()  # a write did
        (block,) = ok(alice.call("recall", {"query": "keeps goats bees"}))
        assert ids(block) == ["a1"]
    with mcp(server) as default:  # no X-Tenant-ID: the default tenant, with neither
        (block,) = ok(default.call("recall", {"query": "keeps goats bees"}))
        assert ids(block) == []
    assert contract(server, "get", {"id": "b1"}, tenant="bob")["fact"]["text"] == \
        "Bob keeps goats"
    assert contract(server, "get", {"id": "b1"}, tenant="alice")["fact"] is None


def test_a_namespace_header_confines_a_session(server: Server) -> None:
    with mcp(server, namespace=["users", "alice"]) as alice, \
            mcp(server, namespace=["users", "bob"]) as bob, mcp(server) as whole:
        alice.remember(id="an", text="Alice keeps a note", namespace=["notes"])
        alice.remember(id="ap", text="Alice keeps a plant")
        bob.remember(id="bp", text="Bob keeps a plant")
        (body,) = ok(whole.call("list_namespaces", {}))  # without the header: absolute
        assert json.loads(body)["namespaces"] == [
            {"namespace": ["users", "alice"], "facts": 1},
            {"namespace": ["users", "alice", "notes"], "facts": 1},
            {"namespace": ["users", "bob"], "facts": 1}]
        (body,) = ok(alice.call("list_namespaces", {}))  # with it: relative to it
        assert json.loads(body)["namespaces"] == [{"namespace": [], "facts": 1},
                                                  {"namespace": ["notes"], "facts": 1}]
        (block,) = ok(bob.call("recall", {"query": "keeps note plant", "k": 50}))
        assert ids(block) == ["bp"]
        assert ok(bob.call("get", {"id": "an"})) == ['{"fact": null}']
        (block,) = ok(alice.call("recall", {"query": "keeps", "namespace": ["notes"]}))
        assert ids(block) == ["an"]
        (body,) = ok(bob.call("forget", {"scope": {"namespace": []}, "purge": True,
                                         "dryRun": False}))
        assert json.loads(body)["removed"] == ["bp"]  # everything of bob's, nothing else
        (block,) = ok(whole.call("recall", {"query": "keeps note plant", "k": 50}))
        assert ids(block) == ["an", "ap"]
        # The context tools too: a session saved under the header's namespace.
        ok(alice.call("save_working_context", {"session": "s", "state": {"goal": "a"}}))
        (body,) = ok(alice.call("list_working_contexts", {}))
        assert json.loads(body)["namespace"] == []  # relative to the header's
        assert [x["session"] for x in json.loads(body)["sessions"]] == ["s"]
        (body,) = ok(whole.call("list_working_contexts", {"namespace": ["users", "alice"]}))
        assert [x["session"] for x in json.loads(body)["sessions"]] == ["s"]
        assert error_code(bob.call("load_working_context", {"session": "s"})) == "not_found"
        _, decisions = ok(bob.call("compile_context", {"query": "keeps note plant",
                                                       "budgetTokens": 500}))
        assert {d["id"] for d in json.loads(decisions)["decisions"]} <= {"bp"}
        for bad, code in (('["users",', "invalid_request"), ('"users"', "invalid_request"),
                          ('["users", ""]', "invalid_request"),
                          (json.dumps(["n"] * 9), "limit"),
                          ("[" * 3000 + "]" * 3000, "invalid_request")):  # past json's recursion
            with mcp(server, **{"x-holomem-namespace": bad}) as s:
                assert error_code(s.call("recall", {"query": "keeps"})) == code, bad


def test_the_servers_key_host_origin_and_batch_bound_apply_to_mcp(server: Server) -> None:
    async def without_key() -> None:
        async with http_session(server.url, {}):
            pass

    with pytest.raises(ExceptionGroup) as refused:
        anyio.run(without_key)
    assert refused.value.subgroup(MCPError) is not None
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"accept": "application/json, text/event-stream"}
    for head, status, code in (
            ({}, 401, "unauthorized"),
            ({**headers(), "authorization": "Bearer wrong"}, 401, "unauthorized"),
            ({**headers(), "host": "attacker.example"}, 403, "forbidden"),
            ({**headers(), "origin": "https://attacker.example"}, 403, "forbidden")):
        answer = web.post(server.url + "/mcp", json=hello, headers={**accept, **head})
        assert answer.status_code == status, answer.text
        assert answer.json()["error"]["code"] == code
    answer = web.post(server.url + "/mcp", json=hello, headers={**accept, **headers()})
    assert answer.status_code == 200 and answer.json()["result"]["serverInfo"]["name"] == \
        "holomem"
    assert answer.headers["mcp-session-id"]
    assert not (server.data / "tenants").exists()  # nothing of it created a store

    with mcp(server) as s:
        too_many = [{"text": f"fact {i}"} for i in range(1001)]
        assert error_code(s.call("remember", {"facts": too_many})) == "limit"
        said = [{"role": "user", "text": f"turn {i}"} for i in range(1001)]
        assert error_code(s.call("remember_conversation", {"messages": said,
                                                           "session": "s"})) == "limit"
        assert error_code(s.call("remember", {"facts": too_many[:1], "text": "x"})) == \
            "invalid_request"
        # Refused by the memory, not by the request's shape: nothing either.
        assert error_code(s.call("remember", {"text": ""})) == "invalid_request"
        assert error_code(s.call("remember", {"text": "x", "confidence": 2})) == \
            "invalid_request"
    assert not (server.data / "tenants").exists()  # refused writes created nothing


def test_a_post_to_mcp_is_json_and_bounded_as_on_every_route(server: Server) -> None:
    """A POST without Content-Type: application/json is 415, a body over the bound 413
    (declared, or found while reading a chunked one), each with the server's JSON error
    body, before the SDK sees it; a JSON POST within the bound still reaches it."""
    hello = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}}).encode()
    accept = {"accept": "application/json, text/event-stream", **headers()}
    big = b'{"x": "' + b"y" * (1024 * 1024) + b'"}'

    def chunked() -> Iterator[bytes]:
        yield from (big[i:i + 65536] for i in range(0, len(big), 65536))

    for head, body, status, code in (
            ({"content-type": "text/plain"}, hello, 415, "invalid_request"),
            ({"content-type": "application/x-www-form-urlencoded"}, hello, 415,
             "invalid_request"),
            ({}, hello, 415, "invalid_request"),
            ({"content-type": "application/json"}, big, 413, "limit"),
            ({"content-type": "application/json"}, chunked(), 413, "limit")):
        answer = web.post(server.url + "/mcp", content=body, headers={**accept, **head})
        assert answer.status_code == status, answer.text
        assert answer.json()["error"]["code"] == code
    answer = web.post(server.url + "/mcp", content=hello,
                      headers={**accept, "content-type": "application/json; charset=utf-8"})
    assert answer.status_code == 200 and answer.json()["result"]["serverInfo"]["name"] == \
        "holomem"


def test_the_tools_are_the_stdio_servers(server: Server, tmp_path: Path) -> None:
    with mcp(server) as over_http:
        remote = [(t.name, t.description, t.input_schema) for t in over_http.tools()]
    with serving(tmp_path / "store") as over_stdio:
        local = [(t.name, t.description, t.input_schema) for t in over_stdio.tools()]
    assert remote == local


def test_a_server_without_a_key_serves_mcp_to_anyone_local(tmp_path: Path) -> None:
    open_server = start(tmp_path / "data", api_key=None)
    try:
        with mcp(open_server, authorization="") as s:
            s.remember(id="x", text="no key needed here")
            (block, _) = ok(s.call("get", {"id": "x"}))
        assert fenced(block)[0].endswith("no key needed here")
    finally:
        open_server.stop()


def test_readme_http_examples_run(tmp_path: Path) -> None:
    commands, configs, programs = (blocks("MCP server", kind) for kind in ("sh", "json",
                                                                            "python"))
    assert len(commands) == len(configs) == len(programs) == 2  # stdio: test_mcp.py
    command, config, program = commands[1], configs[1], programs[1]
    assert command.startswith("holomem serve ") and "/mcp" in command
    key = "readme-key-0123456789"
    (tmp_path / ".holomem").mkdir()
    (tmp_path / ".holomem" / "api-key").write_text(key)
    port = free_port()
    env = {**os.environ, "HOME": str(tmp_path),
           "PATH": VENV_BIN + os.pathsep + os.environ["PATH"]}
    with open(tmp_path / "serve.log", "wb") as log:
        proc = subprocess.Popen(f"exec {command.splitlines()[0]} --port {port}", shell=True,
                                env=env, stdout=subprocess.DEVNULL, stderr=log, cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, \
                (tmp_path / "serve.log").read_text()
            try:
                if web.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.05)
        entry = json.loads(config)["mcpServers"]["holomem"]
        assert entry["type"] == "http" and entry["url"] == "http://127.0.0.1:8080/mcp"
        configured = Server(url, tmp_path / ".holomem" / "server", proc, [])
        head = {name: value.replace("KEY", key) for name, value in entry["headers"].items()}
        with mcp(configured, **head) as s:
            assert [t.name for t in s.tools()] == list(OFFERED)

        (tmp_path / "example.py").write_text(
            program.replace("Bearer KEY", f"Bearer {key}").replace(":8080", f":{port}"))
        done = subprocess.run([sys.executable, "example.py"], env=env, capture_output=True,
                              timeout=60, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        block, spaces = done.stdout.decode().strip().rsplit("\n", 1)
        assert [line.split("] ")[0] for line in fenced(block)] == ["- [ann-tea", "- [ann-city"]
        assert json.loads(spaces)["namespaces"] == [{"namespace": [], "facts": 1},
                                                    {"namespace": ["places"], "facts": 1}]
        assert (tmp_path / ".holomem" / "server" / "tenants" / "me").is_dir()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
