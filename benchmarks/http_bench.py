"""HTTP throughput on loopback, and durable remembers over HTTP beside local ones.

    python benchmarks/http_bench.py [--requests 2000] [--clients 8] [--rounds 3]

In one run, round by round:

- ``local_full``: ``Memory.remember`` from one thread on a ``sync="full"`` store
  (every remember fsyncs before it returns) — the local durable rate;
- ``local_batch8``: the same from 8 threads on a ``sync="batch"`` store;
- ``http_remember8``: 8 HTTP clients remembering against ``holomem serve`` (which
  opens its stores with ``sync="batch"``: concurrent requests share fsyncs, and each
  response is sent only after its write is durable);
- ``http_mixed8``: 8 clients, 50 % remember, 40 % recall, 10 % list.

Reports requests per second (median over rounds) and the ratio of durable
remembers over HTTP to local durable remembers. Target (issue 7): at least 0.5, printed as
met or missed; writes benchmarks/results/http_bench.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import random
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import httpx

from benchmarks._common import add_save, check, emit, machine, median
from holomem import Memory, Store
from tests.serve.conftest import API_KEY, headers, start


def local(path: str, n: int, threads: int, sync: str) -> float:
    store = Store.open(path, sync=sync)
    memory = Memory(store)
    per = n // threads
    barrier = threading.Barrier(threads + 1)

    def work(k: int) -> None:
        barrier.wait()
        for i in range(per):
            memory.remember(text=f"thread {k} remembers fact {i} about the local store")

    ts = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    rate = per * threads / (time.perf_counter() - t0)
    store.close()
    shutil.rmtree(path)
    return rate


def http(url: str, n: int, clients: int, mix: bool, tenant: str) -> float:
    rng = random.Random(3)
    plan = [[rng.random() for _ in range(n // clients)] for _ in range(clients)]
    errors: list[int] = []

    def client(c: int) -> None:
        with httpx.Client(base_url=url, headers=headers(tenant), timeout=60) as h:
            for i, roll in enumerate(plan[c]):
                if not mix or roll < 0.5:
                    r = h.post("/api/v1/memory/remember",
                               json={"text": f"client {c} remembers fact {i} over http"})
                elif roll < 0.9:
                    r = h.post("/api/v1/memory/recall", json={"query": f"client {c} fact"})
                else:
                    r = h.post("/api/v1/memory/list", json={"limit": 10})
                if r.status_code != 200:
                    errors.append(r.status_code)

    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests: {errors[:5]}")
    return (n // clients) * clients / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    add_save(ap, "http_bench")
    args = ap.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory() as d:
        from pathlib import Path

        srv = start(Path(d) / "data")
        try:
            for r in range(args.rounds):
                row = {
                    "local_full": local(os.path.join(d, "lf"), args.requests // 4, 1, "full"),
                    "local_batch8": local(os.path.join(d, "lb"), args.requests, args.clients,
                                          "batch"),
                    "http_remember8": http(srv.url, args.requests, args.clients, False,
                                           f"r{r}"),
                    "http_mixed8": http(srv.url, args.requests, args.clients, True, f"m{r}"),
                }
                rounds.append(row)
        finally:
            srv.stop()
    keys = list(rounds[0])
    over_local = round(median([r["http_remember8"] / r["local_full"] for r in rounds]), 2)
    emit("http_bench", {
        "benchmark": "http_bench",
        "machine": machine(tempfile.gettempdir()),
        "conditions": {"requests_per_round": args.requests, "clients": args.clients,
                       "rounds": args.rounds, "server": "holomem serve, loopback, sync=batch",
                       "api_key": bool(API_KEY)},
        "median_per_s": {k: round(median([r[k] for r in rounds])) for k in keys},
        "median_ratios": {
            "http_remember8_over_local_full": over_local,
            "http_remember8_over_local_batch8": round(median(
                [r["http_remember8"] / r["local_batch8"] for r in rounds]), 2),
        },
        # Issue 7: durable remembers over HTTP (8 clients) at least half the rate of
        # local durable remembers.
        "targets": {"http_remember8_over_local_full": check(over_local, ">=", 0.5)},
        "rounds": rounds,
    }, args.save)


if __name__ == "__main__":
    main()
