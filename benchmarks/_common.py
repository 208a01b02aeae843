"""Shared by the benchmarks: machine description, medians, targets, and saving results.

Every benchmark prints one JSON document with the machine and the conditions it ran
under and each of its targets as met or missed (:func:`check`), and writes it under
benchmarks/results/ only when run with ``--save`` (:func:`emit`), so that running a
benchmark never changes the checkout and figures quoted in notes can be traced to a run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import operator
import os
import platform
import resource
import statistics
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _filesystem(path: str) -> str:
    path = os.path.realpath(path)
    best = ("", "?")
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 3 and path.startswith(parts[1]) and len(parts[1]) > len(best[0]):
                    best = (parts[1], f"{parts[2]} on {parts[0]} mounted at {parts[1]}")
    except OSError:
        pass
    return best[1]


def machine(workdir: str) -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = "?"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (0.0, 0.0, 0.0)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False,
                                cwd=os.path.dirname(RESULTS)).stdout.strip()
    except OSError:
        commit = ""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "host": platform.node(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "loadavg": [round(x, 2) for x in load],
        "filesystem": _filesystem(workdir),
        "commit": commit,
    }


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def percentile(xs: Sequence[float], p: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))
    return s[k]


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_rss_mib() -> float:
    with open("/proc/self/statm", encoding="utf-8") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)


def strace_counts(text: str) -> dict[str, int]:
    """Syscall name -> calls, from ``strace -c`` output."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        # % time, seconds, usecs/call, calls, [errors,] syscall
        if len(parts) >= 5 and parts[0].replace(".", "").isdigit() and parts[3].isdigit():
            counts[parts[-1]] = int(parts[3])
    return counts


def save(name: str, result: dict[str, Any]) -> str:
    """Print ``result`` as JSON and save it as benchmarks/results/<name>.json."""
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    text = json.dumps(result, indent=2, sort_keys=False)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    print(text)
    return path


_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def check(value: float | None, op: str, bound: float) -> dict[str, Any]:
    """One target: the value measured, the bound it must meet, and ``status`` "met",
    "missed" or "not measured" (no value: a run that did not include it)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        status = "not measured"
    else:
        status = "met" if _OPS[op](value, bound) else "missed"
    return {"value": value, "target": f"{op} {bound}", "status": status}


def add_save(ap: argparse.ArgumentParser, name: str) -> None:
    ap.add_argument("--save", action="store_true",
                    help=f"also write benchmarks/results/{name}.json (default: print only)")


def emit(name: str, result: dict[str, Any], save_it: bool) -> None:
    """Print ``result`` as JSON, and a line per target on stderr; write
    benchmarks/results/<name>.json only when ``save_it`` (the ``--save`` flag)."""
    if save_it:
        save(name, result)
    else:
        print(json.dumps(result, indent=2, sort_keys=False))
    for key, targets in result.items():
        if key.startswith("targets") and isinstance(targets, dict):
            for what, t in targets.items():
                if isinstance(t, dict) and "status" in t:
                    print(f"target {what}: {t['status']} ({t['value']} {t['target']})",
                          file=sys.stderr)
