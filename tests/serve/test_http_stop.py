"""A stop of ``holomem serve`` (SIGTERM, SIGINT), against a real server process on 127.0.0.1.

What the tests prove: once asked to stop, the server refuses new connections, lets the
request in flight finish with its answer, closes every store (the next open has nothing
to recover), says so on stderr when the stop begins and when it ends, and exits with
status 0; a client that stalls in the middle of its request cannot hold the stop.

A request is known to be in flight without any timing: it asks ``Expect: 100-continue``,
and the server's ``100 Continue`` says the application is reading its body.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from holomem import Memory, Store
from tests import web

from .conftest import API_KEY, Server, headers, start

#: How long anything here may take before the test fails as hung (no timing is asserted).
HUNG = 20.0


def port(server: Server) -> int:
    return int(server.url.rsplit(":", 1)[1])


def begin(server: Server, body: bytes) -> socket.socket:
    """A remember whose head has reached the application, which now waits for ``body``."""
    conn = socket.create_connection(("127.0.0.1", port(server)), timeout=HUNG)
    conn.sendall(b"POST /api/v1/memory/remember HTTP/1.1\r\n"
                 b"Host: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                 b"Authorization: Bearer %s\r\nContent-Length: %d\r\n"
                 b"Expect: 100-continue\r\n\r\n" % (port(server), API_KEY.encode(), len(body)))
    assert read_until(conn, b"\r\n\r\n").startswith(b"HTTP/1.1 100 Continue")
    return conn


def read_until(conn: socket.socket, end: bytes) -> bytes:
    got = b""
    while end not in got:
        chunk = conn.recv(65536)
        if not chunk:
            break
        got += chunk
    return got


def write(server: Server, fid: str) -> None:
    r = web.post(f"{server.url}/api/v1/memory/remember", headers=headers(),
                 json={"id": fid, "text": f"written as {fid}"}, timeout=HUNG)
    assert r.status_code == 200, r.text


def wait_for_log(server: Server, text: str) -> None:
    deadline = time.monotonic() + HUNG
    while text not in server.log():
        assert server.proc.poll() is None, f"exited without {text!r}:\n{server.log()}"
        assert time.monotonic() < deadline, f"hung: no {text!r} in the log"
        time.sleep(0.01)


def stopped(server: Server) -> int:
    try:
        return server.proc.wait(timeout=HUNG)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        server.proc.wait()
        pytest.fail(f"hung: the server did not stop\n{server.log()}")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_stop_finishes_the_request_in_flight_closes_the_stores_and_exits_0(
        tmp_path: Path, sig: signal.Signals) -> None:
    server = start(tmp_path / "data")
    try:
        write(server, "before")
        body = json.dumps({"id": "during", "text": "written across the stop"}).encode()
        conn = begin(server, body)

        server.proc.send_signal(sig)
        wait_for_log(server, f"holomem serve stopping on {sig.name}")
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port(server)), timeout=HUNG).close()

        conn.sendall(body)
        answer = read_until(conn, b"}]}")
        conn.close()
        head, _, payload = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 "), answer
        assert json.loads(payload)["remembered"][0]["id"] == "during"

        assert stopped(server) == 0
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    log = server.log()
    assert "holomem serve stopped in " in log and "every store closed" in log, log
    assert "Traceback" not in log and "ERROR" not in log, log

    # Closed cleanly: the next open trusts the store's files, with nothing to recover.
    with Store.open(tmp_path / "data" / "tenants" / "default") as store:
        assert store.stats().opened_by == "replay"
        assert [Memory(store).get(i) is not None for i in ("before", "during")] == [True, True]


def test_a_client_that_stalls_in_its_request_cannot_hold_the_stop(tmp_path: Path) -> None:
    server = start(tmp_path / "data")
    try:
        write(server, "before")
        conn = begin(server, b'{"text": "never sent whole"}')  # the body never comes
        server.proc.send_signal(signal.SIGTERM)
        assert stopped(server) == 0
        assert read_until(conn, b"never") == b""  # its connection was cut, unanswered
        conn.close()
    finally:
        if server.proc.poll() is None:
            server.proc.kill()
    log = server.log()
    assert "every store closed" in log and "Traceback" not in log, log
    with Store.open(tmp_path / "data" / "tenants" / "default") as store:
        assert store.stats().opened_by == "replay" and len(store) == 1
