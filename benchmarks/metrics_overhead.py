"""What the operators' metrics and traces (issue 31 item 3) cost a request and an op.

In one process, each figure the median of ``--rounds`` rounds of ``--n`` calls:

- ``observe``: counting one HTTP request in ``holomem serve``'s metrics (its counter and
  its histogram: :meth:`holomem.api.doors.http.metrics.Metrics.observe`), per request;
- ``trace_off``: what the tracing wrapper adds to an op when OpenTelemetry is installed
  and no tracer provider is set (the wrapper around a method that does nothing, minus
  the plain call);
- ``trace_on``: the same with an SDK tracer provider and a span processor that drops
  every span (what recording one span with its attributes costs; informative only);
- ``scrape``: one ``/metrics`` exposition with ``--tenants`` tenant stores open, each
  with a few writes.

Targets: observe <= 20 us, trace_off <= 2 us, scrape <= 50 ms at 64 open tenants.
Prints one JSON document (machine, load before and after); ``--save`` writes
benchmarks/results/metrics_overhead.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks._common import add_save, check, emit, machine, median  # noqa: E402
from holomem.api.doors.http.metrics import Metrics  # noqa: E402
from holomem.api.doors.http.tenants import TenantPool  # noqa: E402
from holomem.api.memory import tracing  # noqa: E402
from holomem.api.memory.config import MemoryConfig  # noqa: E402


def per_call_us(fn: Callable[[], Any], n: int, rounds: int) -> float:
    runs = []
    for _ in range(rounds):
        began = time.perf_counter()
        for _ in range(n):
            fn()
        runs.append((time.perf_counter() - began) / n * 1e6)
    return median(runs)


def nothing(holder: Any, x: int) -> int:
    return x


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tenants", type=int, default=64, help="open tenant stores to scrape")
    add_save(ap, "metrics_overhead")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="holomem-metrics-bench-")
    before = machine(work)

    pool = TenantPool(work, key=None, config=MemoryConfig(), max_open=args.tenants)
    metrics = Metrics(pool, version="bench")
    observe = per_call_us(lambda: metrics.observe(
        "POST", "/api/v1/memory/{op}", "remember", 200, 0.0012), args.n, args.rounds)

    plain = per_call_us(lambda: nothing(None, 1), args.n, args.rounds)
    wrapped = tracing.traced("get", nothing)
    trace_off = per_call_us(lambda: wrapped(None, 1), args.n, args.rounds) - plain
    trace_on = None
    if tracing.enabled():
        from opentelemetry.sdk.trace import TracerProvider
        saved = tracing.TRACER
        tracing.TRACER = TracerProvider().get_tracer("holomem")  # no processor: dropped
        try:
            trace_on = per_call_us(lambda: wrapped(None, 1), args.n // 10,
                                   args.rounds) - plain
        finally:
            tracing.TRACER = saved

    for i in range(args.tenants):
        pool.call(f"t{i}", lambda t: [t.memory.memory.remember(f"fact {j} of a tenant")
                                      for j in range(3)], writes=True)
    scrapes = []
    for _ in range(args.rounds):
        began = time.perf_counter()
        body, _ = metrics.exposition("")
        scrapes.append((time.perf_counter() - began) * 1000)
    pool.close()
    result = {
        "benchmark": "metrics_overhead",
        "machine": before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "n": args.n, "rounds": args.rounds, "tenants": args.tenants,
        "observe_us": round(observe, 3),
        "trace_off_us": round(trace_off, 3),
        "trace_on_us": None if trace_on is None else round(trace_on, 3),
        "scrape_ms": round(median(scrapes), 3),
        "scrape_bytes": len(body),
        "targets": {
            "observe_us": check(round(observe, 3), "<=", 20),
            "trace_off_us": check(round(trace_off, 3), "<=", 2),
            "scrape_ms": check(round(median(scrapes), 3) if args.tenants == 64 else None,
                               "<=", 50),
        },
    }
    emit("metrics_overhead", result, args.save)


if __name__ == "__main__":
    main()
