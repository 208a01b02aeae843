"""The facts of the purge tests, and the child process the crash tests kill.

Run as ``python -m tests.purge.workload STORE [--key HEX] [--abort-after-forget]``:
it remembers the facts, prints ``remembered``, prints ``forget-started``, forgets
the marked facts with ``purge=True``, prints ``forget-returned`` and closes the
store (or ``os.abort()``s right after the forget returned). Every line is flushed
before the program goes on, so the parent knows exactly what was acknowledged.
When ``HOLOMEM_CRASH_TRACE`` is set, a line ``--forget--`` is appended to the trace
just before the forget and ``--forget-returned--`` just after it, so the parent can
tell the crash points of the forget from those of the writes around it.
With ``--reopen`` it only opens the existing store (which finishes an interrupted
purge), prints ``opened`` and closes it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import msgspec

from holomem import ManualClock, Memory, RememberInput, Store

MARKER = "zqxv-purge-marker-7f3a"
MARKER_BYTES = MARKER.encode()
#: The marked facts all have this subject; the forget scope is the subject.
MARKED_SUBJECT = f"subject-{MARKER}"
CLOCK_START = 1_700_000_000_000
SEGMENT_SIZE = 4096
TRACE_SEPARATOR = "--forget--"
TRACE_RETURNED = "--forget-returned--"
QUERIES = ["river", "lamp moon", "seven cats", "number", "garden stones", MARKER]

_WORDS = ["river", "stone", "lamp", "moon", "cat", "garden", "window", "bread", "violin",
          "harbor", "lantern", "orchard"]


def unrelated_facts() -> list[RememberInput]:
    """Facts that no forget touches; some supersede others, so links must survive."""
    out = []
    for i in range(30):
        w1, w2 = _WORDS[i % len(_WORDS)], _WORDS[(i * 5 + 3) % len(_WORDS)]
        out.append(RememberInput(
            id=f"keep-{i:02d}", text=f"fact number {i}: the {w1} near the {w2}, {i * 7} times",
            subject=f"topic-{i % 4}", entities=[f"Person{i % 5}", f"Place{i % 3}"],
            metadata={"n": i, "tag": "keep", "nested": {"w": w1}},
            event_time=CLOCK_START - 1000 * i))
    # A supersession chain among the unrelated facts.
    out.append(RememberInput(id="keep-v2", text="the lamp is now in the garden",
                             subject="topic-lamp", supersedes=["keep-03"]))
    return out


def marked_facts() -> list[RememberInput]:
    """Facts whose text, subject, entities and metadata all carry the marker."""
    return [RememberInput(
        id=f"gone-{i}", text=f"a secret {MARKER} the user asked to forget, number {i}",
        subject=MARKED_SUBJECT, entities=[f"Entity-{MARKER}-{i}"],
        metadata={"secret": f"{MARKER}-{i}", "list": [MARKER]}) for i in range(5)]


def marked_ids() -> list[str]:
    return [f.id for f in marked_facts() if f.id is not None]


def unrelated_ids() -> list[str]:
    return [f.id for f in unrelated_facts() if f.id is not None]


def open_memory(path: str, key: bytes | None, **store_args: Any) -> tuple[Store, Memory]:
    store = Store.open(path, key=key, segment_size=SEGMENT_SIZE, **store_args)
    return store, Memory(store, clock=ManualClock(CLOCK_START))


def remember_all(memory: Memory) -> None:
    """Interleave marked and unrelated facts over several transactions and segments."""
    keep, gone = unrelated_facts(), marked_facts()
    memory.remember_many(keep[:10])
    memory.remember(gone[0])
    for fact in keep[10:20]:
        memory.remember(fact)
    memory.remember_many(gone[1:3])
    memory.remember_many(keep[20:])
    # A checkpoint holds every marked fact's terms, ids and values (docs/guarantees.md
    # §6a): a purge must erase it with the generation.
    memory.store.checkpoint()
    memory.remember_many(gone[3:])


def forget_marked(memory: Memory, *, purge: bool) -> list[str]:
    report = memory.forget({"subject": MARKED_SUBJECT}, purge=purge)
    return list(report.removed)


def observe(memory: Memory) -> dict[str, Any]:
    """What a caller sees of the unrelated facts: get() of each, and recall results."""
    facts = {i: msgspec.to_builtins(memory.get(i)) for i in unrelated_ids()}
    recalls = {q: msgspec.to_builtins(memory.recall(q, {"k": 50, "history": "all"}))
               for q in QUERIES}
    return {"get": facts, "recall": recalls}


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("--key", default="")
    ap.add_argument("--abort-after-forget", action="store_true")
    ap.add_argument("--reopen", action="store_true", help="only open and close the store")
    args = ap.parse_args()
    key = bytes.fromhex(args.key) if args.key else None
    store, memory = open_memory(args.store, key)
    if args.reopen:
        _say("opened")
        store.close()
        _say("closed")
        return
    remember_all(memory)
    _say("remembered")
    trace = os.environ.get("HOLOMEM_CRASH_TRACE")
    if trace:
        with open(trace, "a") as f:
            f.write(TRACE_SEPARATOR + "\n")
    _say("forget-started")
    removed = forget_marked(memory, purge=True)
    if trace:
        with open(trace, "a") as f:
            f.write(TRACE_RETURNED + "\n")
    _say("forget-returned " + ",".join(removed))
    if args.abort_after_forget:
        os.abort()
    store.close()
    _say("closed")


if __name__ == "__main__":
    main()
