"""How far a reader travels to follow one call: the holomem/api files in which code runs
during a recall with the embedder and during a forget with purge (issue 28).

Prints JSON: for each call, the distinct files entered, in order, and the returns to a
file already left (a file entered again after the call moved on to another). Measured
with ``sys.setprofile`` on a small store, after a warm-up call, so that imports and
lazily built indexes are not counted. Not a timing: the numbers are the same on any
machine. ``--save`` writes benchmarks/results/call_path.json.

    python benchmarks/call_path.py [--save]

The issue's target is fewer files and fewer returns than before the redesign (recall
with the embedder: 10 files, 24 returns; forget with purge: 11 files, 36 returns,
measured at 38232dd with the same method).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
from collections.abc import Callable
from types import FrameType
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import holomem
from benchmarks._common import add_save, check, emit, machine
from holomem import ManualClock, Memory, Store

API = os.path.join(os.path.dirname(holomem.__file__), "api")


def trace(call: Callable[[], object]) -> dict[str, Any]:
    """The api files ``call`` runs code in, and how often it comes back to one."""
    entered: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(API):
            here = os.path.relpath(name, os.path.dirname(API))
            if not entered or entered[-1] != here:
                entered.append(here)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    left: set[str] = set()
    returns = 0
    for before, after in itertools.pairwise(entered):
        left.add(before)
        returns += after in left
    files = list(dict.fromkeys(entered))
    return {"files": len(files), "returns": returns, "path": files}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_save(parser, "call_path")
    args = parser.parse_args()
    out: dict[str, Any] = {"benchmark": "call_path", "holomem": holomem.__version__}
    with tempfile.TemporaryDirectory() as tmp:
        out["machine"] = machine(tmp)
        try:
            from holomem.embedders import MiniLM
            embedder: Any = MiniLM()
        except holomem.HolomemError as exc:  # the model package is not installed
            print(f"recall with the embedder skipped: {exc}", file=sys.stderr)
            embedder = None
        with Store.open(os.path.join(tmp, "s")) as store:
            memory = Memory(store, clock=ManualClock(1000), embedder=embedder)
            memory.remember_many([{"id": f"f{i}", "text": f"Alice fact {i} about Paris"}
                                  for i in range(20)])
            memory.recall("warm up")
            if embedder is not None:
                out["recall_with_embedder"] = trace(
                    lambda: memory.recall("where does Alice live", k=5))
            out["forget_with_purge"] = trace(
                lambda: memory.forget({"ids": ["f3"]}, purge=True))
    recall, forget = out.get("recall_with_embedder"), out["forget_with_purge"]
    out["targets"] = {
        "recall files (< 10 before)": check(recall["files"] if recall else None, "<", 10),
        "recall returns (< 24 before)": check(recall["returns"] if recall else None, "<", 24),
        "forget files (< 11 before)": check(forget["files"], "<", 11),
        "forget returns (< 36 before)": check(forget["returns"], "<", 36),
    }
    emit("call_path", out, args.save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
