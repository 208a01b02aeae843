"""How long ``python -m holomem.fsck`` takes on a large store.

    python benchmarks/fsck_bench.py [--facts 100000] [--rounds 3] [--encrypted]

Builds a store of that many facts (24-word texts, one fact per 5,000-fact batch
transaction and a tail of single-fact transactions), closes it, then runs the
full check (every frame's checksum and authentication, every event decoded,
every text record verified, every unused byte of the text segment checked for
zero) in a fresh process, round by round. Target: under 10 s at 100,000 facts ("not
measured" at another size), printed as met or missed; writes
benchmarks/results/fsck_bench.json only with ``--save``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import add_save, check, emit, machine, median
from benchmarks.search_bench import corpus
from holomem import Memory, Store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--encrypted", action="store_true")
    add_save(ap, "fsck_bench")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "store")
        key = os.urandom(32) if args.encrypted else None
        key_file = os.path.join(d, "key")
        if key:
            with open(key_file, "wb") as f:
                f.write(key)
        texts = corpus(args.facts, seed=9)
        with Store.open(path, sync="none", key=key) as store:
            memory = Memory(store)
            bulk = args.facts - 1000
            for i in range(0, bulk, 5000):
                memory.remember_many([{"id": f"f{j}", "text": texts[j]}
                                      for j in range(i, min(bulk, i + 5000))])
            for j in range(bulk, args.facts):
                memory.remember(id=f"f{j}", text=texts[j])
        size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
        times = []
        for _ in range(args.rounds):
            cmd = [sys.executable, "-m", "holomem.fsck", path, "--json"]
            if key:
                cmd += ["--key-file", key_file]
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            times.append(time.perf_counter() - t)
            if proc.returncode != 0:
                raise RuntimeError(f"fsck exit {proc.returncode}: {proc.stdout[-500:]}")
    seconds = round(median(times), 3)
    emit("fsck_bench" + ("_encrypted" if args.encrypted else ""), {
        "benchmark": "fsck_bench", "machine": machine(tempfile.gettempdir()),
        "conditions": {"facts": args.facts, "encrypted": args.encrypted, "store_bytes": size,
                       "rounds": args.rounds, "process": "fresh python -m holomem.fsck"},
        "median_seconds": seconds,
        "targets": {"seconds_at_100000_facts": check(
            seconds if args.facts == 100_000 else None, "<", 10)},
        "rounds_seconds": [round(t, 3) for t in times],
    }, args.save)


if __name__ == "__main__":
    main()
