"""The inspector's pages on a large store: how long the facts page of 100 facts takes.

    python benchmarks/ui_page.py [--facts 10000] [--store DIR] [--requests 30] [--save]
    nice -n 19 python benchmarks/ui_page.py --facts 1000000 --store /tmp/ui-1m

Builds a store of ``--facts`` synthetic facts (or reuses ``--store DIR`` when it holds
one: ``DIR/facts``), through the fastest bulk path the repository has
(``Memory.remember_many`` in batches of 5,000, ``sync="none"``, as
benchmarks/scale.py builds its curve): facts of 8-30 words from a Zipf vocabulary, one in
ten with a subject under ``latest-by-subject`` (so some are superseded), in 50
namespaces, each with a small metadata object. Then it starts a real ``holomem ui``
process on the store (``--read-only``, a port the system picks) and times whole HTTP
requests from this process over loopback — the page's store calls, its HTML and the
transfer — with a fresh connection per request:

- ``facts_page_100``: ``GET /?limit=100``, the first page (the target: a median well
  under 200 ms);
- ``facts_page_100_deep``: ``GET /?limit=100&cursor=C`` with a cursor near the end of
  the store (the walk does not start over from the beginning);
- ``facts_page_100_filtered``: a namespace and a metadata filter; ``..._status``: the
  status filter ``current``; ``search_100``: a ``recall`` of 100 results;
- ``fact_page``: one fact's page (chain, links, why, explain).

Each is the median (and p90) of ``--requests`` requests after 3 warm ones. It prints one
JSON document with the machine and its load, and the target met or missed; ``--save``
writes benchmarks/results/ui_page.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
ROOT = os.path.dirname(HERE)

from _common import add_save, check, emit, machine, median, percentile  # noqa: E402
from scale import fact_texts  # noqa: E402

BATCH = 5000
TARGET_MS = 200.0


def build(path: str, n: int) -> float:
    """A store of ``n`` facts at ``path``; the seconds it took."""
    from holomem import Memory, MemoryConfig, Store

    texts = fact_texts(n)
    begun = time.perf_counter()
    with Store.open(path, sync="none") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject"), persist=True)
        for lo in range(0, n, BATCH):
            batch: list[dict[str, Any]] = []
            for i in range(lo, min(n, lo + BATCH)):
                fact: dict[str, Any] = {"id": f"f{i}", "text": texts[i],
                                        "namespace": ["users", f"u{i % 50}"],
                                        "metadata": {"n": i % 100, "source": "bench"}}
                if i % 10 == 0:
                    fact["subject"] = f"s{i // 20}"
                batch.append(fact)
            memory.remember_many(batch)
    return time.perf_counter() - begun


def start(store: str) -> tuple[subprocess.Popen[bytes], str, float]:
    """``holomem ui STORE --read-only --port 0``: the process, its URL, seconds to listen."""
    fd, log_path = tempfile.mkstemp(prefix="holomem-ui-bench-", suffix=".log")
    os.close(fd)
    begun = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    with open(log_path, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "holomem", "ui", store, "--read-only",
                                 "--port", "0"], stdout=subprocess.DEVNULL, stderr=out,
                                env=env)
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)/", text)
        if found:
            return proc, found.group(1), time.perf_counter() - begun
        if proc.poll() is not None:
            raise SystemExit(f"holomem ui exited {proc.returncode}: {text}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("holomem ui did not start in 900 s")


def get(url: str) -> tuple[float, str]:
    """One request: its wall time in ms and the page."""
    begun = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as answer:
        body = answer.read().decode("utf-8")
        status = answer.status
    ms = (time.perf_counter() - begun) * 1000
    if status != 200:
        raise SystemExit(f"{url}: {status}")
    return ms, body


def timed(url: str, requests: int) -> dict[str, Any]:
    for _ in range(3):
        get(url)
    times = [get(url)[0] for _ in range(requests)]
    return {"median_ms": round(median(times), 2), "p90_ms": round(percentile(times, 90), 2),
            "min_ms": round(min(times), 2), "requests": requests}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=10_000)
    ap.add_argument("--store", help="keep the store in DIR/facts (built if missing)")
    ap.add_argument("--requests", type=int, default=30)
    add_save(ap, "ui_page")
    args = ap.parse_args()
    base = args.store or tempfile.mkdtemp(prefix="holomem-ui-bench-")
    path = os.path.join(base, "facts")
    built = None
    if not os.path.exists(path):
        os.makedirs(base, exist_ok=True)
        built = round(build(path, args.facts), 1)
    proc, url, listen_s = start(path)
    try:
        first_ms, page = get(f"{url}/?limit=100")
        rows = page.count('class="fact"')
        deep_cursor = None
        # a cursor near the end: the walk from there, not from the start
        from holomem import Store
        from holomem.api.engine import validate

        with Store.open(path, read_only=True) as store:
            facts = store.stats().documents
            view_gen = store.stats().generation
        deep_cursor = validate.encode_cursor(g=view_gen, s=max(facts - 150, 0),
                                             id=f"f{max(facts - 150, 0)}")
        pages = {
            "facts_page_100": f"{url}/?limit=100",
            "facts_page_100_deep": f"{url}/?limit=100&cursor={deep_cursor}",
            "facts_page_100_filtered": (f"{url}/?limit=100&namespace=users/u7&metadata="
                                        "%7B%22n%22%3A%207%7D"),
            "facts_page_100_status": f"{url}/?limit=100&status=current",
            "search_100": f"{url}/?limit=100&q=" + "+".join(fact_texts(1, seed=11)[0]
                                                           .split()[:3]),
            "fact_page": f"{url}/fact?id=f{facts // 2 // 20 * 20}",
        }
        measured = {name: timed(u, args.requests) for name, u in pages.items()}
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if not args.store:
            shutil.rmtree(base, ignore_errors=True)
    result = {
        "benchmark": "ui_page",
        "how": ("whole HTTP requests (urllib, a new connection each) from this process to "
                "a real `holomem ui --read-only` process over loopback; median of "
                f"{args.requests} after 3 warm"),
        "machine": machine(base),
        "facts": facts,
        "build_s": built,
        "ui_listen_s": round(listen_s, 1),
        "first_request_ms": round(first_ms, 1),
        "rows_on_the_first_page": rows,
        "pages": measured,
        "targets": {"facts_page_100_median_ms": check(
            measured["facts_page_100"]["median_ms"], "<", TARGET_MS)},
    }
    emit("ui_page", result, args.save)


if __name__ == "__main__":
    main()
