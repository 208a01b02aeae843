"""Purge on a stream store: after it returns, and after a crash at every step of it and
the next open, no node's JetStream directory (nor any node's local files) holds the
removed text -- plaintext, compressed, or (for an encrypted store) at all."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from holomem import Memory, Store
from holomem.log.stream.rewrite import CRASH_POINTS

from .cluster import Cluster, needs_server
from .purge_child import MARKER
from .scan import files_with

pytestmark = needs_server
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The engine's purge steps, then the stream's own.
POINTS = ("store.compact.begin", "store.compact.written", *CRASH_POINTS,
          "store.compact.done")


def _marked(cluster: Cluster) -> list[str]:
    found = [f for d in cluster.store_dirs() for f in files_with(d, MARKER.encode())]
    return found + files_with(os.environ["HOLOMEM_NATS_LOCAL"], MARKER.encode())


def test_purge_on_a_3_node_cluster_leaves_the_text_on_no_node(three: Cluster) -> None:
    url = three.url("purge3")
    with Store.open(url) as writer, Store.open(three.node_url(2, "purge3"),
                                               read_only=True) as follower:
        memory = Memory(writer)
        fid = memory.remember(f"the {MARKER} booms in the reeds " * 4).id
        keep = [memory.remember(f"keep {i}").id for i in range(4)]
        assert _marked(three)  # the scan sees the text while it is there
        memory.forget({"ids": [fid]}, {"purge": True})
        assert writer.generation == 2
        assert _marked(three) == []
        deadline = time.monotonic() + 10  # bounded: the follower looks every 0.25 s
        while follower.generation != 2 and time.monotonic() < deadline:
            follower.refresh()
            time.sleep(0.05)
        assert follower.generation == 2
        assert sorted(follower.ids()) == sorted(keep)
    assert _marked(three) == []


@pytest.mark.parametrize(("point", "encrypted"), [
    *((p, False) for p in POINTS), *((p, True) for p in CRASH_POINTS)])
def test_a_crash_anywhere_in_a_purge_is_finished_by_the_next_open(
        single: Cluster, point: str, encrypted: bool) -> None:
    key = os.urandom(32) if encrypted else None
    store = f"crash-{point.replace('.', '-')}-{int(encrypted)}"
    url = single.url(store, lease=1)
    env = dict(os.environ, PYTHONPATH=ROOT, HOLOMEM_CRASH_AT=f"{point}:1")
    args = [sys.executable, "-m", "tests.stream.purge_child", url]
    if key is not None:
        args.append(key.hex())
    child = subprocess.run(args, env=env, cwd=ROOT, capture_output=True, text=True,
                           timeout=60)
    assert child.returncode != 0 and "acked" in child.stdout, child.stderr[-2000:]
    assert "purged" not in child.stdout
    fid = child.stdout.split()[1]
    with Store.open(single.url(store, lease=1, wait=10), key=key) as again:
        memory = Memory(again)
        assert memory.get(fid) is None
        assert len(again) == 5
        assert again.generation == 2
    assert _marked(single) == []
