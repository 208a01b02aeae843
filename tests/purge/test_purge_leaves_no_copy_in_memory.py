"""After a purge, nothing the process keeps holds what was removed (docs/guarantees.md §6).

The files are scanned by test_forget_erases; this searches the objects instead: every
object reachable from the store, the memory and holomem's own modules (their globals,
caches kept by functions, class attributes) for the marker's words, after the marked
facts were removed with ``purge=True``. Before the purge every lazily built index and
cache (HRR vectors, entity probes, metadata filters, contradiction candidates, BM25's
kept contributions) was filled from the marked facts, so a cache that outlives the
purged generation, or is shared by every generation of the process, is found here.
"""

from __future__ import annotations

import gc
import sys
import types
from pathlib import Path

import numpy as np

from tests.purge import workload as w

#: Two words of the marker no unrelated fact has (the tokenizer splits it at "-").
WORDS = ("zqxv", "7f3a")


def _holding(roots: list[object]) -> list[str]:
    """Where a string, bytes or array reachable from ``roots`` holds one of ``WORDS``
    (a path of type names; each string once, however many hold it). Another
    library's modules are not entered, nor code."""
    foreign = {id(vars(m)) for name, m in list(sys.modules.items())
               if m is not None and not name.startswith("holomem")}
    found: list[str] = []
    seen: set[int] = set()
    stack: list[tuple[object, str]] = [(r, type(r).__name__) for r in roots]
    while stack:
        obj, where = stack.pop()
        if id(obj) in seen or id(obj) in foreign:
            continue
        seen.add(id(obj))
        if isinstance(obj, str):
            if any(word in obj.lower() for word in WORDS):
                found.append(f"{where}: {obj[:60]!r}")
            continue
        if isinstance(obj, (bytes, bytearray, memoryview)):
            if any(word.encode() in bytes(obj) for word in WORDS):
                found.append(f"{where}: bytes")
            continue
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind == "U" and any(word in str(obj.tolist()).lower()
                                             for word in WORDS):
                found.append(f"{where}: array")
            # (A word table's keys are a short word's bytes in integers.)
            elif obj.dtype.kind != "O" and any(word.encode() in obj.tobytes()
                                               for word in WORDS):
                found.append(f"{where}: array of {obj.dtype}")
            if obj.dtype.kind != "O":
                continue
        if isinstance(obj, (types.ModuleType, types.CodeType)):
            continue
        if isinstance(obj, type) and not obj.__module__.startswith("holomem"):
            continue
        for ref in gc.get_referents(obj):
            stack.append((ref, f"{where} > {type(ref).__name__}"))
    return found


def test_after_a_purge_no_object_the_process_keeps_holds_a_removed_facts_words(
        tmp_path: Path) -> None:
    store, memory = w.open_memory(str(tmp_path / "s"), None)
    try:
        w.remember_all(memory)
        # A batch large enough for BM25's bulk path, which keeps short words' keys.
        memory.remember_many([{"id": f"gone-bulk-{i}", "text": f"bulk {w.MARKER} {i}",
                               "subject": w.MARKED_SUBJECT} for i in range(16)])
        # Every lazily built index and cache, filled while the marked facts are stored.
        entity = w.marked_facts()[0].entities[0]  # type: ignore[index]
        memory.probe(entity)
        memory.related(entity)
        memory.related("Person1")
        memory.reason([entity, "Person1"])
        memory.contradict()
        for query in w.QUERIES:
            memory.recall(query, {"k": 10, "filter": {"metadata": {"tag": "keep"}}})
            store.search_documents(query, 10)
        modules = [m for name, m in list(sys.modules.items())
                   if name.startswith("holomem") and m is not None]
        assert _holding([store, memory, *modules]), "the search does not find the words"

        memory.forget({"subject": w.MARKED_SUBJECT}, purge=True)

        assert _holding([store, memory, *modules]) == []
    finally:
        store.close()
