"""Every op's work is bounded by documented limits on its request (issue 11, item 2).

For each limit: a request just over it is refused with ``limit`` (a LimitError,
which is an InvalidError) before any work, and a request exactly at it is answered.
Through ``Memory.call`` (the contract every door uses) and the Python calls alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from holomem import InvalidError, LimitError, ManualClock, Memory, MemoryConfig, Store
from holomem.api.engine import nesting, validate
from holomem.api.memory import binding
from holomem.api.memory import memory as memory_module
from holomem.api.memory.facts import listing
from holomem.api.memory.forget import removal
from holomem.api.memory.holographic import algebra, contradiction
from holomem.api.memory.recall import rank
from holomem.errors import HolomemError


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[Memory]:
    store = Store.open(tmp_path / "s", sync="none")
    m = Memory(store, MemoryConfig(supersession="latest-by-subject", entity_extractor="regex"),
               clock=ManualClock(1_000_000))
    m.remember_many([
        {"id": "a", "text": "Alice lives in Paris", "subject": "alice/city"},
        {"id": "b", "text": "Alice lives in Berlin", "subject": "alice/city"},
        {"id": "c", "text": "Bob owes Alice 10 EUR"},
    ])
    yield m
    store.close()


def refused(run: Callable[[], Any]) -> None:
    with pytest.raises(LimitError) as info:
        run()
    assert info.value.code == "limit" and info.value.status == 422


def out_of_range(run: Callable[[], Any]) -> None:
    """A number past its documented maximum (k, candidateLimit, limit, maxPairs)."""
    with pytest.raises(HolomemError) as info:
        run()
    assert info.value.code == "invalid_request"


def answered(run: Callable[[], Any]) -> None:
    try:
        run()
    except HolomemError as exc:  # at the limit: anything but a limit error is a bug here
        raise AssertionError(f"refused at the limit: {exc.code}: {exc}") from exc


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


# -- remember ---------------------------------------------------------------------------------
def test_remember_many_takes_at_most_max_facts(memory: Memory) -> None:
    n = memory_module.MAX_FACTS
    refused(lambda: memory.remember_many({"text": f"fact {i}"} for i in range(n + 1)))
    refused(lambda: memory.call("remember", {"facts": [{"text": f"f {i}"}
                                                       for i in range(n + 1)]}))
    assert len(memory.store) == 3  # nothing written
    answered(lambda: memory.call("remember", {"facts": [{"text": f"f {i}"} for i in range(n)]}))
    assert len(memory.store) == 3 + n


def test_supersedes_names_at_most_max_ids(memory: Memory) -> None:
    n = validate.MAX_IDS
    refused(lambda: memory.remember(text="Alice moved", supersedes=["a"] * (n + 1)))
    answered(lambda: memory.remember(text="Alice moved", supersedes=["a"] * n))


# -- recall and explain -----------------------------------------------------------------------
def test_a_query_has_at_most_max_query_terms_distinct_words(memory: Memory) -> None:
    n = validate.MAX_QUERY_TERMS
    for op, extra in (("recall", {}), ("explain", {"id": "a"})):
        refused(lambda op=op, extra=extra: memory.call(op, {"query": words(n + 1), **extra}))
        answered(lambda op=op, extra=extra: memory.call(
            op, {"query": words(n) + " " + words(n), **extra}))
    refused(lambda: memory.store.search_documents(words(n + 1)))
    answered(lambda: memory.store.search_documents(words(n)))


def test_recall_k_and_candidate_limit_are_bounded(memory: Memory) -> None:
    for field, n in (("k", rank.MAX_RECALL_K),
                     ("candidateLimit", rank.MAX_CANDIDATES)):
        out_of_range(lambda field=field, n=n: memory.call("recall", {"query": "Alice",
                                                                     field: n + 1}))
        answered(lambda field=field, n=n: memory.call("recall", {"query": "Alice", field: n,
                                                                 "explain": True}))


def test_a_recall_filter_names_at_most_max_entities(memory: Memory) -> None:
    n = validate.MAX_ENTITIES
    names = [f"E{i}" for i in range(n + 1)]
    refused(lambda: memory.call("recall", {"query": "Alice", "entities": names}))
    answered(lambda: memory.call("recall", {"query": "Alice", "entities": names[:n]}))


# -- forget -----------------------------------------------------------------------------------
def test_a_forget_scope_names_at_most_max_forget_ids(memory: Memory) -> None:
    n = removal.MAX_IDS
    ids = [f"x{i}" for i in range(n + 1)]
    refused(lambda: memory.call("forget", {"scope": {"ids": ids}, "dryRun": True}))
    refused(lambda: memory.forget({"ids": ids}))
    answered(lambda: memory.call("forget", {"scope": {"ids": ids[:n]}, "dryRun": True}))


def test_search_ids_are_bounded(memory: Memory) -> None:
    n = validate.MAX_IDS
    ids = [f"x{i}" for i in range(n + 1)]
    refused(lambda: memory.store.search_documents("Alice", ids=ids))
    refused(lambda: memory.store.similar_documents("Alice", ids=ids))
    answered(lambda: memory.store.search_documents("Alice", ids=ids[:n]))
    answered(lambda: memory.store.similar_documents("Alice", ids=ids[:n]))


# -- holographic operations -------------------------------------------------------------------
def test_holographic_k_is_bounded(memory: Memory) -> None:
    n = algebra.MAX_K
    for op, request in (("probe", {"entity": "Alice"}), ("related", {"entity": "Alice"}),
                        ("reason", {"entities": ["Alice"]}), ("contradict", {})):
        out_of_range(lambda op=op, request=request: memory.call(op, {**request, "k": n + 1}))
        answered(lambda op=op, request=request: memory.call(op, {**request, "k": n}))


def test_reason_takes_at_most_max_reason_entities(memory: Memory) -> None:
    """Regression: 6,000 entities in one reason call took a server from 77 MB to 3.3 GB."""
    n = algebra.MAX_REASON_ENTITIES
    refused(lambda: memory.call("reason", {"entities": ["Alice"] * (n + 1)}))
    refused(lambda: memory.reason([f"E{i}" for i in range(6000)]))
    answered(lambda: memory.call("reason", {"entities": ["Alice"] * n}))


def test_contradict_max_pairs_and_cursor_are_bounded(memory: Memory) -> None:
    n = contradiction.MAX_PAIRS_LIMIT
    out_of_range(lambda: memory.call("contradict", {"maxPairs": n + 1}))
    answered(lambda: memory.call("contradict", {"maxPairs": n}))
    refused(lambda: memory.call("contradict", {"cursor": "x" * (validate.MAX_CURSOR_CHARS + 1)}))


# -- list -------------------------------------------------------------------------------------
def test_list_limit_and_cursor_are_bounded(memory: Memory) -> None:
    out_of_range(lambda: memory.call("list", {"limit": listing.MAX_LIMIT + 1}))
    answered(lambda: memory.call("list", {"limit": listing.MAX_LIMIT}))
    refused(lambda: memory.call("list", {"cursor": "x" * (validate.MAX_CURSOR_CHARS + 1)}))


def test_a_list_page_examines_at_most_max_scan_facts(memory: Memory,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A status filter few facts pass cannot make one page walk the whole store."""
    monkeypatch.setattr(listing, "MAX_SCAN", 2)
    memory.remember_many([{"text": f"filler {i}"} for i in range(7)])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = memory.list(cursor=cursor, filter={"status": "superseded"})
        assert page.scanned <= 2
        seen += [f.id for f in page.facts]
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ["a"] and pages == 5  # 10 facts, 2 examined per page


# -- feedback and the contract itself ---------------------------------------------------------
def test_a_feedback_note_is_bounded_like_a_text(memory: Memory) -> None:
    refused(lambda: memory.call("feedback", {"id": "a", "helpful": True,
                                             "note": "x" * (validate.MAX_TEXT_BYTES + 1)}))
    answered(lambda: memory.call("feedback", {"id": "a", "helpful": True,
                                              "note": "x" * validate.MAX_TEXT_BYTES}))
    for blank in ("", " \t\n"):  # as a fact's text: not blank
        with pytest.raises(InvalidError, match="empty or only whitespace"):
            memory.call("feedback", {"id": "a", "helpful": True, "note": blank})


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


def test_a_request_nests_at_most_max_request_depth_levels(memory: Memory) -> None:
    n = nesting.MAX_REQUEST_DEPTH
    # The request object is level 1; metadata's value adds one level per dict.
    with pytest.raises(LimitError, match="the request nests"):
        memory.call("remember", {"text": "deep", "metadata": nested(n)})
    with pytest.raises(LimitError, match="metadata"):  # metadata's own limit (32) still holds
        memory.call("remember", {"text": "deep", "metadata": nested(n - 1)})
    answered(lambda: memory.call("remember", {"text": "deep",
                                              "metadata": nested(validate.MAX_METADATA_DEPTH)}))


def test_arguments_that_do_not_fit_a_call_are_invalid_on_every_call(memory: Memory) -> None:
    """An unknown keyword (or a missing or extra argument) is ``invalid_request`` on
    every method of Memory, as any other wrong argument is, and writes nothing."""
    calls = [name for name, attr in vars(memory_module.Memory).items()
             if isinstance(attr, (binding.Call, binding.Derived))]
    assert len(calls) > 30
    revision = memory.store.revision
    for name in calls:
        with pytest.raises(InvalidError, match=name):
            result = getattr(memory, name)(zz_not_an_argument=1)
            if hasattr(result, "__next__"):  # (a lazy iterator: its first item runs it)
                next(result)
    with pytest.raises(InvalidError, match="too many positional"):
        memory.get("a", "b", "c", "d", "e", "f")  # type: ignore[call-arg]
    assert memory.store.revision == revision
