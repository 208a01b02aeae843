"""Several ``holomem mcp`` processes on one store, no server: the second forwards its writes
to the first through the store's local socket. Driven by the MCP SDK's own stdio client,
with real ``holomem mcp`` processes.

What the tests prove: a write through the second is acknowledged, read back through the
second at once (read-your-writes), seen by the first, and durable (in the store once
both have exited); the first's errors come back with their codes; when the first exits,
the second's next write makes it the writer and it shares the store in turn; a socket
file a killed writer left behind is replaced by the next writer.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from holomem import Memory, Store
from holomem.api.doors.mcp.share import socket_path
from holomem.errors import StoreLockedError

from ._readme import ROOT
from .test_mcp import error_code, fenced, ok, serving


@pytest.fixture
def runtime() -> Iterator[dict[str, str]]:
    """A runtime directory of its own (short: a socket's path is bounded), as the
    environment of the MCP processes."""
    with tempfile.TemporaryDirectory(prefix="hm-") as directory:
        yield {"XDG_RUNTIME_DIR": directory}


def ids(block: str) -> list[str]:
    return sorted(line[3:].split("]")[0] for line in fenced(block) if line != "(no facts)")


def stored(data: Path, fid: str) -> bool:
    with Store.open(data) as store:
        return Memory(store).get(fid) is not None


def test_a_write_through_a_second_mcp_is_acknowledged_read_back_and_durable(
        tmp_path: Path, runtime: dict[str, str]) -> None:
    data = tmp_path / "store"
    with serving(data, env=runtime) as first:
        first.remember(id="a1", text="Alice keeps bees")
        with serving(data, env=runtime) as second:
            got = second.remember(id="b1", text="Bob rows on the lake", subject="bob/sport")
            assert got["id"] == "b1" and got["created"] is True
            block, body = ok(second.call("get", {"id": "b1"}))  # read-your-writes
            assert ids(block) == ["b1"] and json.loads(body)["fact"]["id"] == "b1"
            (block,) = ok(second.call("recall", {"query": "Bob lake bees"}))
            assert ids(block) == ["a1", "b1"]
            block, _ = ok(first.call("get", {"id": "b1"}))  # the writer took it
            assert ids(block) == ["b1"]

            # Batches, forgets and the writer's errors, with the writer's codes.
            (body,) = ok(second.call("remember", {"facts": [
                {"id": "b2", "text": "Bob sails"}, {"id": "b3", "text": "Bob swims"}]}))
            assert [r["id"] for r in json.loads(body)["remembered"]] == ["b2", "b3"]
            (body,) = ok(second.call("forget", {"scope": {"ids": ["b3"]}, "dryRun": False}))
            assert json.loads(body)["removed"] == ["b3"]
            assert ok(second.call("get", {"id": "b3"})) == ['{"fact": null}']
            assert error_code(second.call("remember", {"id": "b1", "text": "not Bob's"})) \
                == "conflict"
            assert error_code(second.call("relate", {"fromId": "b1", "toId": "nobody",
                                                     "relation": "likes"})) == "not_found"
            again = second.remember(id="b1", text="Bob rows on the lake", subject="bob/sport")
            assert again["created"] is False  # an idempotent retry, as on the writer
    assert stored(data, "b1") and stored(data, "b2") and not stored(data, "b3")
    said = (tmp_path / "store-mcp.log").read_text()
    assert "is written by holomem mcp process" in said and "Traceback" not in said


def test_the_second_mcp_writes_on_when_the_first_exits(tmp_path: Path,
                                                       runtime: dict[str, str]) -> None:
    data = tmp_path / "store"
    with serving(data, env=runtime) as second:
        with serving(data, env=runtime) as first:  # started last: the second is the writer
            first.remember(id="f1", text="through the writer")
        # The writer is gone: the follower's next write makes it the writer.
        assert second.remember(id="f2", text="after the writer left")["created"] is True
        with pytest.raises(StoreLockedError):
            Store.open(data)
        with serving(data, env=runtime) as third:  # and it shares the store in turn
            third.remember(id="f3", text="through the new writer")
            (block,) = ok(second.call("recall", {"query": "writer left"}))
            assert ids(block) == ["f1", "f2", "f3"]
    assert all(stored(data, fid) for fid in ("f1", "f2", "f3"))


def test_a_socket_left_by_a_killed_writer_is_replaced(tmp_path: Path,
                                                     runtime: dict[str, str]) -> None:
    data = tmp_path / "store"
    sock = socket_path(str(data), runtime)
    # A writer whose client keeps its stdin open (it is killed before it could close it).
    with subprocess.Popen([sys.executable, "-m", "holomem", "mcp", "--data", str(data)],
                          cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL, env={**os.environ, **runtime}) as killed:
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(sock):  # it is the writer once its socket is there
                assert killed.poll() is None and time.monotonic() < deadline
                time.sleep(0.05)
            with serving(data, env=runtime) as second:
                second.remember(id="k1", text="through the writer that is killed next")
                killed.send_signal(signal.SIGKILL)
                killed.wait(timeout=30)
                assert os.path.exists(sock)  # nobody unlinked it
                assert second.remember(id="k2", text="after the kill")["created"] is True
                with serving(data, env=runtime) as third:  # the new socket answers
                    third.remember(id="k3", text="through the socket that replaced it")
        finally:
            killed.kill()
    assert all(stored(data, fid) for fid in ("k1", "k2", "k3"))
    assert not os.path.exists(sock)  # the last writer unlinked its own socket


def test_a_write_is_refused_when_the_writer_shares_nothing(tmp_path: Path,
                                                          runtime: dict[str, str]) -> None:
    data = tmp_path / "store"
    with Store.open(data) as writer:  # a writer that is no holomem mcp: no socket
        Memory(writer).remember(id="w1", text="by another program")
        with serving(data, env=runtime) as s:
            assert error_code(s.call("remember", {"text": "refused"})) == "read_only"
            (block,) = ok(s.call("recall", {"query": "program"}))
            assert ids(block) == ["w1"]
