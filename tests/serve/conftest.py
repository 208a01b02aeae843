"""A real ``holomem serve`` process on a free loopback port, for the HTTP tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests import web

API_KEY = "test-key-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Server:
    url: str
    data: Path
    proc: subprocess.Popen[bytes]
    args: list[str]

    def stop(self) -> int:
        """SIGTERM, then wait: a graceful shutdown closes every store, and the status
        is 0."""
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=30)

    def log(self) -> str:
        return (self.data.parent / f"server-{self.url.rsplit(':', 1)[1]}.log").read_text()


def start(data: Path, *extra: str, api_key: str | None = API_KEY) -> Server:
    port = free_port()
    args = [sys.executable, "-m", "holomem", "serve", "--data", str(data), "--port", str(port),
            *extra]
    if api_key is not None:
        data.parent.mkdir(parents=True, exist_ok=True)
        key_file = data.parent / f"api-key-{port}"
        key_file.write_text(api_key)
        args += ["--api-key-file", str(key_file)]
    data.parent.mkdir(parents=True, exist_ok=True)
    with open(data.parent / f"server-{port}.log", "wb") as log:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log,
                                env={**os.environ, "PYTHONWARNINGS": "ignore"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = (data.parent / f"server-{port}.log").read_text()
            raise RuntimeError(f"server exited early: {err[-2000:]}")
        try:
            if web.get(url + "/healthz", timeout=1).status_code == 200:
                return Server(url, data, proc, args)
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not come up")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = start(tmp_path / "data")
    try:
        yield srv
    finally:
        if srv.proc.poll() is None:
            srv.stop()


def headers(tenant: str | None = None, key: str | None = API_KEY) -> dict[str, str]:
    h = {}
    if key is not None:
        h["authorization"] = f"Bearer {key}"
    if tenant is not None:
        h["x-tenant-id"] = tenant
    return h
