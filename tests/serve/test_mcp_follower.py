"""``holomem mcp`` on a store another process writes: a read-only follower, driven by the
MCP SDK's own stdio client, beside a real ``holomem serve`` (or a writer in this process).

What the tests prove: a second MCP server on a store a server holds starts anyway and
answers reads — the writer's later writes too — while a write is a ``read_only`` tool
error naming the writer's process and how to reach it; with ``--server`` (and
``--api-key-file``) writes go to that server as contract calls, confined to the stdio
server's ``--namespace``, and errors of the server (a wrong key, a server gone) come
back as tool errors; a ``--server`` that keeps the tenant's store elsewhere is found
out at the first write; ``--server`` needs a tenant store of that server; a follower
becomes the writer once the writer lets go.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from holomem import Memory, Store
from holomem.errors import StoreLockedError
from tests import web

from ._readme import ROOT
from .conftest import API_KEY, Server, headers
from .test_mcp import error_code, fenced, ok, serving


def ids(block: str) -> list[str]:
    return sorted(line[3:].split("]")[0] for line in fenced(block) if line != "(no facts)")


def contract(server: Server, op: str, body: dict[str, object]) -> dict[str, object]:
    response = web.post(f"{server.url}/api/v1/memory/{op}", json=body, headers=headers(),
                        timeout=30)
    assert response.status_code == 200, response.text
    answer: dict[str, object] = response.json()
    return answer


def message(result: object) -> str:
    text: str = json.loads(result.content[0].text)["error"]["message"]  # type: ignore[attr-defined]
    return text


@pytest.fixture
def held(server: Server) -> Path:
    """The default tenant's store, created and held (written) by ``server``."""
    contract(server, "remember", {"id": "s1", "text": "Alice lives in Paris"})
    store = server.data / "tenants" / "default"
    with pytest.raises(StoreLockedError):
        Store.open(store)  # the server is its writer
    return store


def test_a_second_mcp_on_a_store_a_server_holds_reads_and_refuses_writes(
        server: Server, held: Path) -> None:
    with serving(held) as s:
        (block,) = ok(s.call("recall", {"query": "where does Alice live"}))
        assert ids(block) == ["s1"]
        contract(server, "remember", {"id": "s2", "text": "Alice keeps bees"})
        (block,) = ok(s.call("recall", {"query": "Alice bees Paris"}))
        assert ids(block) == ["s1", "s2"]  # the writer's later writes are read too
        (body,) = ok(s.call("forget", {"scope": {"ids": ["s1"]}}))  # a dry run: a read
        assert json.loads(body)["removed"] == ["s1"] and json.loads(body)["dryRun"] is True

        for tool, args in (("remember", {"text": "Alice moved to Berlin"}),
                           ("forget", {"scope": {"ids": ["s1"]}, "dryRun": False})):
            refused = s.call(tool, args)
            assert error_code(refused) == "read_only"
            said = message(refused)
            assert f"process {server.proc.pid} (" in said and "holomem serve" in said
            assert "--server" in said  # how to reach the writer from here
    for fid in ("s1", "s2"):
        assert contract(server, "get", {"id": fid})["fact"] is not None  # nothing changed
    said = (held.parent / f"{held.name}-mcp.log").read_text()  # the MCP server's stderr
    assert "following it read-only" in said and f"process {server.proc.pid}" in said
    assert "Traceback" not in said


def key_file(tmp_path: Path, key: str = API_KEY) -> str:
    path = tmp_path / f"key-{len(list(tmp_path.iterdir()))}"
    path.write_text(key + "\n")
    return str(path)


def test_with_server_the_follower_forwards_writes_to_it(server: Server, held: Path,
                                                        tmp_path: Path) -> None:
    forward = ("--server", server.url, "--api-key-file", key_file(tmp_path))
    with serving(held, *forward) as s:
        s.remember(id="f1", text="Alice moved to Berlin", subject="alice/city")
        fact = contract(server, "get", {"id": "f1"})["fact"]
        assert isinstance(fact, dict) and fact["text"] == "Alice moved to Berlin"
        (block,) = ok(s.call("recall", {"query": "Berlin"}))
        assert ids(block) == ["f1"]  # read back from the store it follows
        (body,) = ok(s.call("remember", {"facts": [{"id": "f2", "text": "Bob rows"},
                                                   {"id": "f3", "text": "Bob sails"}]}))
        assert [r["id"] for r in json.loads(body)["remembered"]] == ["f2", "f3"]
        (body,) = ok(s.call("forget", {"scope": {"ids": ["f2"]}}))  # a dry run stays here
        assert json.loads(body)["dryRun"] is True
        (body,) = ok(s.call("forget", {"scope": {"ids": ["f2"]}, "dryRun": False}))
        assert json.loads(body)["removed"] == ["f2"]
        assert contract(server, "get", {"id": "f2"})["fact"] is None
        assert ok(s.call("get", {"id": "f2"})) == ['{"fact": null}']

    # Confined to --namespace, forwarded writes included.
    with serving(held, *forward, "--namespace", "users", "--namespace", "u1") as s:
        s.remember(id="n1", text="Carol swims", namespace=["notes"])
        (block,) = ok(s.call("recall", {"query": "Alice Bob Carol"}))
        assert ids(block) == ["n1"]
    fact = contract(server, "get", {"id": "n1"})["fact"]
    assert isinstance(fact, dict) and fact["namespace"] == ["users", "u1", "notes"]

    # The server's own answers come back as tool errors.
    with serving(held, "--server", server.url, "--api-key-file",
                 key_file(tmp_path, "wrong")) as s:
        assert error_code(s.call("remember", {"text": "never stored"})) == "unauthorized"
        server.stop()
        gone = s.call("remember", {"text": "never stored"})
        assert error_code(gone) == "unavailable" and server.url in message(gone)
        (block,) = ok(s.call("recall", {"query": "Berlin"}))  # reads go on
        assert ids(block) == ["f1"]


def test_a_server_that_keeps_the_store_elsewhere_is_found_out(server: Server,
                                                              tmp_path: Path) -> None:
    other = tmp_path / "other" / "tenants" / "default"
    Store.open(other).close()  # a store of the same shape, but not the server's
    with serving(other, "--server", server.url, "--api-key-file", key_file(tmp_path)) as s:
        result = s.call("remember", {"id": "x1", "text": "lands on the server"})
        assert error_code(result) == "conflict"
        assert str(other) in message(result) and "does not show it" in message(result)
    assert contract(server, "get", {"id": "x1"})["fact"] is not None


def mcp_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "holomem", "mcp", *args], input=b"",
                          capture_output=True, timeout=60, cwd=ROOT)


def test_server_needs_a_tenant_store_of_that_server(server: Server, tmp_path: Path) -> None:
    done = mcp_cli("--data", str(tmp_path / "plain"), "--server", server.url)
    assert done.returncode == 2 and b"tenants/<tenant>" in done.stderr, done.stderr
    missing = tmp_path / "data" / "tenants" / "nobody"
    done = mcp_cli("--data", str(missing), "--server", server.url)
    assert done.returncode == 3 and b"no holomem store" in done.stderr, done.stderr
    done = mcp_cli("--data", str(tmp_path / "plain"), "--api-key-file", key_file(tmp_path))
    assert done.returncode == 2 and b"--server" in done.stderr, done.stderr
    done = mcp_cli("--data", str(missing), "--server", "ftp://example")
    assert done.returncode == 2
    assert not (tmp_path / "plain").exists() and not missing.exists()


def test_a_follower_becomes_the_writer_once_the_writer_lets_go(tmp_path: Path) -> None:
    data = tmp_path / "store"
    writer = Store.open(data)
    Memory(writer).remember(id="w1", text="written by the first writer")
    try:
        with serving(data) as s:
            refused = s.call("remember", {"id": "w2", "text": "written by the follower"})
            assert error_code(refused) == "read_only"
            assert f"process {os.getpid()} (" in message(refused)
            writer.close()
            s.remember(id="w2", text="written by the follower")
            with pytest.raises(StoreLockedError):
                Store.open(data)  # the MCP server is the writer now
            (block,) = ok(s.call("recall", {"query": "written"}))
            assert ids(block) == ["w1", "w2"]
    finally:
        writer.close()
    with Store.open(data) as store:
        assert Memory(store).get("w2") is not None
