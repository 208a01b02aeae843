"""One lock rule through every door: a store another process holds for writing is read
through a follower, and a write to it is refused naming that process.

Another process really holds the store (a child that opened it as its writer and
writes when told), and each door is driven by its real client: a real ``holomem serve``
on 127.0.0.1 through httpx (its contract route, its document search, and ``/mcp``
through the MCP SDK's streamable-HTTP client), the ``holomem`` command, and a
``holomem mcp`` through the SDK's stdio client.

What the tests prove: every door answers reads of the held store, caught up with its
writer's later writes (the server answered them 423 before); a write through any door
is refused, nothing written, naming the same holder — ``process PID (command line)``
(HTTP: 423 ``locked`` with ``holder`` in the body; the CLI: exit 3; MCP: a tool error);
once the holder lets go the server becomes the writer, and the others then name it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from holomem import Memory, Store
from tests import web

from ..cli.run import holomem
from ._readme import ROOT
from .conftest import Server, headers, start
from .test_mcp import Session, error_code, fenced, ok, serving
from .test_mcp_http import mcp

#: The other process: it opens the store as its writer, says so, then remembers each
#: ``ID TEXT`` line it reads, and lets go when its input ends.
HOLDER = """
import sys
from holomem import Memory, Store
store = Store.open(sys.argv[1])
memory = Memory(store)
print("holding", flush=True)
for line in sys.stdin:
    fid, _, text = line.strip().partition(" ")
    memory.remember(id=fid, text=text)
    print("wrote", fid, flush=True)
store.close()
"""


class Holder:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        assert self.readline() == "holding"

    def readline(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def write(self, fid: str, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{fid} {text}\n")
        self.proc.stdin.flush()
        assert self.readline() == f"wrote {fid}"

    def let_go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


@contextmanager
def holding(store: Path) -> Iterator[Holder]:
    store.parent.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen([sys.executable, "-c", HOLDER, str(store)], cwd=ROOT, text=True,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proc:
        try:
            yield Holder(proc)
        finally:
            if proc.poll() is None:
                proc.kill()


@contextmanager
def serving_data(data: Path) -> Iterator[Server]:
    server = start(data)
    try:
        yield server
    finally:
        server.stop()


def ids(block: str) -> list[str]:
    return sorted(line[3:].split("]")[0] for line in fenced(block) if line != "(no facts)")


def http(server: Server, op: str, body: dict[str, Any]) -> httpx.Response:
    return web.post(f"{server.url}/api/v1/memory/{op}", json=body, headers=headers(),
                    timeout=60)


def recalled_over_http(server: Server) -> list[str]:
    r = http(server, "recall", {"query": "Alice"})
    assert r.status_code == 200, r.text
    return sorted(hit["id"] for hit in r.json()["results"])


def recalled_by_cli(store: Path) -> list[str]:
    done = holomem("recall", str(store), "Alice", "--json")
    assert done.returncode == 0, done.stderr
    return sorted(hit["id"] for hit in json.loads(done.stdout)["results"])


def recalled_by_mcp(session: Session) -> list[str]:
    (block,) = ok(session.call("recall", {"query": "Alice"}))
    return ids(block)


def message(result: object) -> str:
    text: str = json.loads(result.content[0].text)["error"]["message"]  # type: ignore[attr-defined]
    return text


def test_every_door_reads_a_store_another_process_holds(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = data / "tenants" / "default"
    with holding(store) as holder, serving_data(data) as server, \
            serving(store) as stdio, mcp(server) as remote:
        holder.write("h1", "Alice lives in Paris")
        readers = {"http": lambda: recalled_over_http(server),
                   "cli": lambda: recalled_by_cli(store),
                   "mcp": lambda: recalled_by_mcp(stdio),
                   "/mcp": lambda: recalled_by_mcp(remote)}
        assert {door: read() for door, read in readers.items()} == {
            door: ["h1"] for door in readers}
        holder.write("h2", "Alice keeps bees")  # after every door began to follow
        assert {door: read() for door, read in readers.items()} == {
            door: ["h1", "h2"] for door in readers}
        r = web.post(f"{server.url}/api/v1/documents/search", headers=headers(),
                     json={"query": "Alice", "k": 5}, timeout=60)
        assert r.status_code == 200, r.text  # the document routes read through it too
        assert sorted(hit["id"] for hit in r.json()["hits"]) == ["h1", "h2"]


def test_a_write_to_a_held_store_names_its_holder_through_every_door(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = data / "tenants" / "default"
    with holding(store) as holder, serving_data(data) as server:
        holder.write("h1", "Alice lives in Paris")
        r = http(server, "remember", {"id": "x1", "text": "Alice moved to Berlin"})
        assert r.status_code == 423, r.text
        error = r.json()["error"]
        assert error["code"] == "locked"
        named = error["holder"]
        assert named.startswith(f"process {holder.proc.pid} (") and sys.executable in named
        assert named in error["message"]

        done = holomem("remember", str(store), "--id", "x2", "--text", "Alice moved")
        assert done.returncode == 3, done.stderr
        assert done.stderr.startswith("error: locked: ") and named in done.stderr

        with serving(store) as stdio:
            refused = stdio.call("remember", {"id": "x3", "text": "Alice moved"})
            assert error_code(refused) == "read_only" and named in message(refused)
        with mcp(server) as remote:
            refused = remote.call("remember", {"id": "x4", "text": "Alice moved"})
            assert error_code(refused) == "locked" and named in message(refused)

        holder.let_go()
        # The server takes over at its next write; the others now name it.
        r = http(server, "remember", {"id": "s1", "text": "Alice moved to Rome"})
        assert r.status_code == 200, r.text
        done = holomem("remember", str(store), "--id", "x5", "--text", "Alice moved")
        assert done.returncode == 3
        assert f"process {server.proc.pid} (" in done.stderr and "holomem serve" in done.stderr
        assert recalled_over_http(server) == ["h1", "s1"]
    with Store.open(store) as closed:  # nothing refused was written
        assert [Memory(closed).get(f"x{i}") for i in range(1, 6)] == [None] * 5
