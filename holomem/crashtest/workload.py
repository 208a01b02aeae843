"""The crash harness's workload: what the child does, and how it says what it acknowledged.

Owns: the fixed, deterministic workload (:func:`plan`, run by :func:`run_workload` on a
:class:`~holomem.ManualClock`), the few writes a process started after a crash makes
(:func:`resume_workload`, fault kind ``restart``), and the acknowledgement protocol
between the child and the parent. Imports the memory API and :mod:`holomem.log` (the
crash-point registry it reports, and the file layer, through which it writes its
acknowledgements and leaves a torn tail the way a crash would); nothing else of the
harness.

The workload: single remembers, ``remember_many`` batches, supersessions, forgets, two
purges, enough writes to rotate 4 KiB journal segments, a compaction, two checkpoints
(the reopen restores the first; the second replaces it and holds a marker the last
purge must erase), and a reopen that has to cut a torn tail. Before each step the child
writes a ``begin`` line and after the step returns an ``ack`` line (JSON, one
``write()`` to an ``O_APPEND`` file, so a line survives the process the moment it is
written), so the parent knows exactly which steps were acknowledged and which one was
running (:func:`read_acks`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import holomem
from holomem import ForgetScope, ManualClock, Memory, MemoryConfig, RememberInput, Store
from holomem.log import crashpoints, fs
from holomem.log.format import GEN_RE, SEGMENT_RE

#: Journal segment size of the workload's store: small, so that it rotates.
SEGMENT_SIZE = 4096
#: The workload's clock: step i runs at BASE_MS + i * STEP_MS.
BASE_MS = 1_700_000_000_000
STEP_MS = 60_000
MARKERS = ("zqx-purge-marker-alpha-7f3a", "zqx-purge-marker-beta-91c2")
CONFIG = MemoryConfig(supersession="latest-by-subject")

_VOCAB = (
    "amber basin cedar delta ember fjord glacier harbor island juniper kestrel lagoon "
    "meadow nectar orchard pebble quarry ravine saffron tundra umber valley willow "
    "yarrow zephyr anchor beacon canyon dune estuary falcon granite heron inlet jasper "
    "kelp lantern marsh nimbus otter prairie quartz reef summit thicket upland vortex"
).split()


# -- the steps ------------------------------------------------------------------------
def _text(i: int) -> str:
    words = [_VOCAB[(i * 7 + k * 11 + k * k) % len(_VOCAB)] for k in range(14)]
    return f"note {i:03d} records {' '.join(words)} item{i:03d}"


def _fact(i: int, **extra: Any) -> dict[str, Any]:
    return {"id": f"f{i:03d}", "text": _text(i), **extra}


def _batch(name: str, facts: list[dict[str, Any]]) -> dict[str, Any]:
    for f in facts:
        f["metadata"] = {"batch": name, "of": len(facts)}
    return {"kind": "remember_many", "batch": name, "facts": facts}


def plan() -> list[dict[str, Any]]:
    """The workload's steps, the same in the child and the parent."""
    steps: list[dict[str, Any]] = [{"kind": "open"}]

    def single(fact: dict[str, Any]) -> None:
        steps.append({"kind": "remember", "facts": [fact]})

    def chain(who: str, subject: str, places: Sequence[str]) -> None:
        for n, place in enumerate(places, start=1):
            single({"id": f"{who}-{n}", "subject": subject,
                    "text": f"{who.title()} lives in {place} now, version {n} of {who}"})

    for i in range(1, 7):
        single(_fact(i))
    single({"text": _text(7)})  # an id derived from the content
    single(_fact(1))  # a retry: same id, same payload, nothing written
    steps.append(_batch("b1", [_fact(i, id=f"b1-{i}") for i in range(8, 12)]))
    chain("alice", "alice/city", ("Paris", "Berlin", "Rome"))
    steps.append({"kind": "forget", "ids": ["f003"]})
    single({"id": "p1", "text": f"secret {MARKERS[0]} to be purged"})
    steps.append({"kind": "forget", "ids": ["p1"], "purge": True, "marker": MARKERS[0]})
    for i in range(12, 30):  # enough to rotate segments
        single(_fact(i))
    steps.append(_batch("b2", [_fact(i) for i in range(30, 34)] + [
        {"id": "bob-1", "subject": "bob/job", "text": "Bob works as a baker in town"},
        {"id": "bob-2", "subject": "bob/job", "text": "Bob works as a pilot for an airline"},
    ]))
    steps.append({"kind": "forget", "ids": ["alice-2"]})  # a middle version: re-linked
    steps.append({"kind": "compact"})
    for i in range(34, 38):
        single(_fact(i))
    steps.append(_batch("b3", [_fact(i) for i in range(38, 41)]))
    steps.append({"kind": "forget", "subject": "bob/job"})
    steps.append({"kind": "checkpoint"})
    steps.append({"kind": "reopen_torn"})
    for i in range(41, 45):
        single(_fact(i))
    steps.append(_batch("b4", [_fact(i) for i in range(45, 48)]))
    steps.append({"kind": "forget", "ids": ["f010", "b1-9"]})
    single({"id": "p2", "text": f"another secret {MARKERS[1]} to be purged"})
    steps.append({"kind": "checkpoint"})
    steps.append({"kind": "forget", "ids": ["p2"], "purge": True, "marker": MARKERS[1]})
    chain("carol", "carol/city", ("Oslo", "Lima"))
    for i in range(48, 51):
        single(_fact(i))
    steps.append({"kind": "close"})
    return steps


#: What the process started after a crash writes (fault kind ``restart``).
RESUMED: list[dict[str, Any]] = [
    {"id": f"r{i}", "text": f"written after the restart, fact {i} of three"} for i in range(1, 4)]


# -- the acknowledgement protocol -----------------------------------------------------
class _Acks:
    """The child's side of the acknowledgement channel: one JSON line per event."""

    def __init__(self, path: str) -> None:
        self._log = fs.LogFile(path)

    def put(self, record: dict[str, Any]) -> None:
        # One write() per line: once it returns, the line is in the page cache and
        # survives the process (appends are not recorded for the power-loss model: the
        # file stands for what the client saw, not for the store's disk).
        self._log.append(json.dumps(record, sort_keys=True).encode() + b"\n")


def _lines(path: str) -> list[str]:
    return (fs.read_file_or_none(path) or b"").decode().splitlines()


def read_acks(path: str) -> tuple[list[str], list[Any], int, bool]:
    """(registry, results of acknowledged steps, steps begun, finished)."""
    registry: list[str] = []
    results: list[Any] = []
    begun = 0
    done = False
    for line in _lines(path):
        rec = json.loads(line)
        if rec["t"] == "registry":
            registry = rec["points"]
        elif rec["t"] == "begin":
            begun = rec["i"] + 1
        elif rec["t"] == "ack":
            assert rec["i"] == len(results)
            results.append(rec["result"])
        elif rec["t"] == "done":
            done = True
    return registry, results, begun, done


def read_resumed_acks(path: str) -> list[str]:
    """The ids of the facts :func:`resume_workload` acknowledged, in order."""
    return [json.loads(line)["id"] for line in _lines(path)]


# -- running it -----------------------------------------------------------------------
def _result(value: object) -> Any:
    if isinstance(value, list):
        return [_result(v) for v in value]
    if isinstance(value, holomem.Remembered):
        return {"id": value.id, "created": value.created, "superseded": list(value.superseded),
                "ingest_time": value.ingest_time}
    if isinstance(value, holomem.ForgetReport):
        return {"removed": list(value.removed), "purged": value.purged,
                "relinked": [[r.successor, r.predecessor] for r in value.relinked]}
    return value


def _torn_tail(store_path: str) -> None:
    """Append zeros to the live generation's last segment: the remains of a torn write."""
    gen = max(n for n in fs.listdir(store_path) if GEN_RE.match(n))
    last = os.path.join(store_path, gen, max(n for n in fs.listdir(os.path.join(store_path, gen))
                                             if SEGMENT_RE.match(n)))
    fd = fs.open_rw(last)
    try:
        fs.write_at(fd, bytes(40), fs.size(fd, last), last)
        fs.sync(fd, last)
    finally:
        fs.close(fd)


def run_workload(store_path: str, acks_path: str, key: bytes | None, sync: str = "full"
                 ) -> None:
    """The child's workload (also usable in-process, e.g. by the harness's own tests)."""
    acks = _Acks(acks_path)
    acks.put({"t": "registry", "points": sorted(crashpoints.REGISTRY)})
    clock = ManualClock(BASE_MS)
    store: Store | None = None
    memory: Memory | None = None

    def reopen() -> tuple[Store, Memory]:
        s = Store.open(store_path, key=key, segment_size=SEGMENT_SIZE, sync=sync)
        return s, Memory(s, CONFIG, clock=clock)

    for i, step in enumerate(plan()):
        clock.set(BASE_MS + i * STEP_MS)
        acks.put({"t": "begin", "i": i, "kind": step["kind"]})
        kind = step["kind"]
        result: Any = None
        if kind == "open":
            # The store creates its directory, and any missing parent, itself.
            store, memory = reopen()
        else:
            assert store is not None and memory is not None
            if kind == "remember":
                result = [memory.remember(RememberInput(**step["facts"][0]))]
            elif kind == "remember_many":
                result = memory.remember_many([RememberInput(**f) for f in step["facts"]])
            elif kind == "forget":
                scope = (ForgetScope(subject=step["subject"]) if "subject" in step
                         else ForgetScope(ids=step["ids"]))
                result = memory.forget(scope, purge=step.get("purge", False))
            elif kind == "compact":
                store.compact()
            elif kind == "checkpoint":
                store.checkpoint()
            elif kind == "reopen_torn":
                store.close()
                _torn_tail(store_path)
                store, memory = reopen()
            elif kind == "close":
                store.close()
            else:  # pragma: no cover - plan() and this function are written together
                raise AssertionError(kind)
        acks.put({"t": "ack", "i": i, "result": _result(result)})
    acks.put({"t": "done"})


def resume_workload(store_path: str, acks_path: str, key: bytes | None, sync: str,
                    create: bool) -> None:
    """After a crash: open the store, acknowledge a few remembers, and die (the power
    fails right after, so nothing may be synced on the way out)."""
    acks = _Acks(acks_path)
    store = Store.open(store_path, key=key, segment_size=SEGMENT_SIZE, sync=sync,
                       create=create)
    memory = Memory(store, CONFIG, clock=ManualClock(BASE_MS + 1000 * STEP_MS))
    for fact in RESUMED:
        memory.remember(RememberInput(**fact))
        acks.put({"t": "ack", "id": fact["id"]})
    os.abort()
