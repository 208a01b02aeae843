"""holomem as a LangGraph checkpointer (issue 32, item 3): ``HolomemSaver`` passes
LangGraph's own conformance suite (``langgraph-checkpoint-conformance``, every base and
extended capability), a compiled StateGraph resumes its thread in a new process, an
encrypted store keeps every checkpoint as ciphertext, and ``delete_thread`` erases a
thread's bytes from every file of the store.

A checkpoint is stored base64-encoded (README, "LangGraph checkpoints"), so a scan for a
marker string looks for its base64 forms as well as its plain bytes: before a delete the
scan must find it (the scan works), after it nothing may.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.conformance.report import ProgressCallbacks
from langgraph.checkpoint.serde.types import ERROR

from holomem import InvalidError, Memory, MemoryConfig, Store
from holomem.integrations.langgraph import HolomemSaver, HolomemStore
from tests.purge import markers

KEY = bytes(range(32))
ROOT = Path(__file__).resolve().parents[2]


def forms(marker: bytes) -> list[bytes]:
    """``marker`` itself and the base64 text that holds it at each of the three
    alignments a serialized value may put it at (only the groups of its own bytes)."""
    out = [marker]
    for k in range(3):
        enc = base64.b64encode(b"\0" * k + marker)
        first = -(-k // 3)
        last = (k + len(marker) - 3) // 3
        out.append(enc[4 * first:4 * (last + 1)])
    return out


def found(path: Path, marker: bytes, key: bytes | None = None) -> dict[str, list[str]]:
    """Every file under ``path`` holding ``marker`` in any of its forms."""
    out: dict[str, list[str]] = {}
    for form in forms(marker):
        for name, how in markers.files_with(str(path), form, key).items():
            out.setdefault(name, []).extend(how)
    return out


def config(thread: str, checkpoint_id: str | None = None, ns: str = "") -> dict[str, object]:
    conf: dict[str, object] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def put(saver: HolomemSaver, thread: str, value: object, *, parent: str | None = None,
        ns: str = "") -> dict[str, object]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": value}
    cp["channel_versions"] = {"messages": 1}
    stored = saver.put(config(thread, parent, ns), cp, {"source": "loop", "step": 0},  # type: ignore[arg-type]
                       {"messages": 1})
    return dict(stored)


def put_chain(saver: HolomemSaver, thread: str, n: int) -> list[str]:
    """``n`` checkpoints of ``thread``, each the child of the one before; their ids."""
    ids: list[str] = []
    parent = None
    for value in range(n):
        stored = put(saver, thread, value, parent=parent)
        parent = str(stored["configurable"]["checkpoint_id"])  # type: ignore[index]
        ids.append(parent)
    return ids


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[HolomemSaver]:
    store = Store.open(tmp_path / "store")
    try:
        yield HolomemSaver(store)
    finally:
        store.close()


def test_langgraph_conformance_suite_passes_every_base_and_extended_capability(
        tmp_path: Path) -> None:
    made: list[Store] = []

    @checkpointer_test(name="HolomemSaver")
    async def holomem_saver() -> AsyncIterator[HolomemSaver]:
        store = Store.open(tmp_path / f"store-{len(made)}")
        made.append(store)
        try:
            yield HolomemSaver(store)
        finally:
            store.close()

    report = asyncio.run(validate(holomem_saver, progress=ProgressCallbacks.verbose()))
    report.print_report()
    assert {name for name, r in report.results.items() if r.detected} == \
        {c.value for c in ALL_CAPABILITIES}
    assert report.passed_all(), report.to_dict()
    assert report.conformance_level() == "FULL"
    assert all(r.tests_failed == 0 and r.tests_passed > 0 for r in report.results.values())


GRAPH = textwrap.dedent('''
    import json, operator, sys
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from holomem import Store
    from holomem.integrations.langgraph import HolomemSaver

    class State(TypedDict):
        log: Annotated[list[str], operator.add]

    def ask(state: State) -> dict:
        return {"log": ["asked"]}

    def answer(state: State) -> dict:
        return {"log": ["answered"]}

    graph = (StateGraph(State).add_node(ask).add_node(answer)
             .add_edge(START, "ask").add_edge("ask", "answer").add_edge("answer", END))
    with Store.open(sys.argv[1]) as store:
        app = graph.compile(checkpointer=HolomemSaver(store), interrupt_before=["answer"])
        cfg = {"configurable": {"thread_id": "conversation-1"}}
        if sys.argv[2] == "start":
            app.invoke({"log": ["start"]}, cfg)
        else:
            app.invoke(None, cfg)  # resume the interrupted thread
        state = app.get_state(cfg)
        print(json.dumps({"log": state.values["log"], "next": list(state.next),
                          "history": len(list(app.get_state_history(cfg)))}))
''')


def _run_graph(store: Path, step: str) -> dict[str, object]:
    import json
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", GRAPH, str(store), step], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def test_a_state_graph_resumes_its_thread_after_the_process_restarts(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = _run_graph(store, "start")
    assert first["log"] == ["start", "asked"] and first["next"] == ["answer"]
    second = _run_graph(store, "resume")  # a new process, the same store
    assert second["log"] == ["start", "asked", "answered"] and second["next"] == []
    assert second["history"] > first["history"]  # type: ignore[operator]


def test_an_encrypted_store_keeps_checkpoints_and_writes_as_ciphertext(tmp_path: Path) -> None:
    path = tmp_path / "store"
    marker = b"ENCRYPTED-CHECKPOINT-MARKER-0123456789"
    written = b"ENCRYPTED-WRITE-MARKER-9876543210-abcdef"
    with Store.open(path, key=KEY) as store:
        saver = HolomemSaver(store)
        stored = put(saver, "thread-1", marker.decode())
        saver.put_writes(stored, [("messages", written.decode())], "task-1")  # type: ignore[arg-type]
        got = saver.get_tuple(config("thread-1"))
        assert got is not None and got.checkpoint["channel_values"]["messages"] == marker.decode()
        assert got.pending_writes == [("task-1", "messages", written.decode())]
    for m in (marker, written):
        assert found(path, m) == {}
        assert found(path, m, KEY) != {}  # with the key the scan finds it: it works


def test_delete_thread_erases_the_thread_from_every_file_of_the_store(tmp_path: Path) -> None:
    path = tmp_path / "store"
    gone = b"DELETED-THREAD-MARKER-0123456789-abcdefgh"
    kept = b"KEPT-THREAD-MARKER-0123456789-abcdefghijk"
    with Store.open(path) as store:
        saver = HolomemSaver(store)
        first = put(saver, "user-1", gone.decode() + " one")
        second = put(saver, "user-1", gone.decode() + " two", ns="child:1")
        saver.put_writes(first, [("messages", gone.decode())], "task-1")  # type: ignore[arg-type]
        saver.put_writes(second, [(ERROR, gone.decode())], "task-2")  # type: ignore[arg-type]
        put(saver, "user-2", kept.decode())
        assert found(path, gone) != {}
        saver.delete_thread("user-1")
        assert found(path, gone) == {}
        assert saver.get_tuple(config("user-1")) is None
        assert list(saver.list(config("user-1"))) == []
        assert saver.get_tuple(config("user-2")) is not None
    assert found(path, gone) == {}
    assert found(path, kept) != {}
    with Store.open(path) as store:
        assert HolomemSaver(store).get_tuple(config("user-1")) is None


def test_prune_and_delete_for_runs_erase_what_they_remove(tmp_path: Path) -> None:
    path = tmp_path / "store"
    pruned = b"PRUNED-CHECKPOINT-MARKER-0123456789-abcd"
    run_gone = b"DELETED-RUN-MARKER-0123456789-abcdefghij"
    with Store.open(path) as store:
        saver = HolomemSaver(store)
        old = put(saver, "t", pruned.decode())
        saver.put_writes(old, [("messages", pruned.decode())], "task")  # type: ignore[arg-type]
        put(saver, "t", "newest", parent=str(old["configurable"]["checkpoint_id"]))  # type: ignore[index]
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": run_gone.decode()}
        saver.put(config("u"), cp, {"source": "loop", "step": 0, "run_id": "run-7"}, {})  # type: ignore[arg-type]
        assert found(path, pruned) != {} and found(path, run_gone) != {}
        saver.prune(["t"])
        assert found(path, pruned) == {}
        saver.delete_for_runs(["run-7"])
        assert found(path, run_gone) == {}
        assert saver.get_tuple(config("u")) is None
        assert len(list(saver.list(config("t")))) == 1


def test_without_purge_a_deleted_thread_is_gone_at_once_and_its_bytes_at_the_next_purge(
        tmp_path: Path) -> None:
    path = tmp_path / "store"
    gone = b"UNPURGED-THREAD-MARKER-0123456789-abcdef"
    with Store.open(path) as store:
        saver = HolomemSaver(store, purge=False)
        put(saver, "user-1", gone.decode())
        saver.delete_thread("user-1")
        assert saver.get_tuple(config("user-1")) is None
        assert set(found(path, gone)) <= {n for n in found(path, gone)
                                          if markers.is_journal_segment(n)}
        store.compact(purge=True)
        assert found(path, gone) == {}


def test_a_checkpoint_larger_than_a_fact_round_trips_and_prune_removes_its_parts(
        saver: HolomemSaver) -> None:
    big = "x" * 300_000 + "END"
    first = put(saver, "t", big)
    latest = put(saver, "t", "small", parent=str(first["configurable"]["checkpoint_id"]))  # type: ignore[index]
    saver.put_writes(first, [("messages", "y" * 100_000)], "task")  # type: ignore[arg-type]
    got = saver.get_tuple(first)  # type: ignore[arg-type]
    assert got is not None and got.checkpoint["channel_values"]["messages"] == big
    assert got.pending_writes == [("task", "messages", "y" * 100_000)]
    memory = saver.memory
    before = {tuple(n.namespace): n.facts for n in memory.list_namespaces().namespaces}
    saver.prune(["t"])
    after = {tuple(n.namespace): n.facts for n in memory.list_namespaces().namespaces}
    # Before: 2 heads, 6 more slices of the big checkpoint, a write and its 2 parts;
    # after: the small checkpoint's head, which holds it whole.
    assert sum(before.values()) == 11 and sum(after.values()) == 1
    kept = saver.get_tuple(config("t"))
    assert kept is not None and kept.config == latest


def test_a_retried_write_is_kept_and_a_special_write_is_replaced(saver: HolomemSaver) -> None:
    stored = put(saver, "t", "v")
    saver.put_writes(stored, [("a", 1), (ERROR, "first")], "task")  # type: ignore[arg-type]
    saver.put_writes(stored, [("a", 2), (ERROR, "second")], "task")  # type: ignore[arg-type]
    got = saver.get_tuple(stored)  # type: ignore[arg-type]
    assert got is not None
    assert sorted(got.pending_writes or []) == [("task", ERROR, "second"), ("task", "a", 1)]


def test_checkpoints_are_hidden_from_other_doors_of_the_same_store(saver: HolomemSaver) -> None:
    put(saver, "t", "a langgraph checkpoint about tea")
    memory = Memory(saver.memory.store)
    assert memory.recall("langgraph checkpoint tea") == []
    assert memory.list().facts == []
    assert HolomemStore(memory).search(("langgraph",)) == []


def test_a_put_returns_the_config_that_names_it_and_list_goes_newest_first(
        saver: HolomemSaver) -> None:
    ids = put_chain(saver, "t", 3)
    listed = [t.config["configurable"]["checkpoint_id"] for t in saver.list(config("t"))]
    assert listed == ids[::-1]
    assert [t.config["configurable"]["checkpoint_id"]
            for t in saver.list(None, limit=2)] == ids[::-1][:2]
    got = saver.get_tuple(config("t", ids[1]))
    assert got is not None and got.parent_config == config("t", ids[0])


def test_a_namespace_s_heads_are_one_chain_whose_current_head_is_the_newest(
        saver: HolomemSaver) -> None:
    ids = put_chain(saver, "t", 4)
    heads = saver.memory.list(filter={"subject": "holomem:langgraph/checkpoint"},
                              history="current").facts
    assert [h.metadata["checkpoint_id"] for h in heads] == [ids[-1]]  # type: ignore[index]
    assert len(saver.memory.history(heads[0].id)) == 4
    saver.delete_for_runs([])  # nothing
    newest = saver.memory.list(filter={"subject": "holomem:langgraph/checkpoint"}).facts[-1]
    saver.memory.forget({"ids": [newest.id]})  # the newest gone: the one before is current
    got = saver.get_tuple(config("t"))
    assert got is not None and got.checkpoint["id"] == ids[-2]
    put(saver, "t", "again", parent=ids[-2])
    assert len(list(saver.list(config("t")))) == 4


def test_the_latest_checkpoint_stays_right_whoever_else_writes_to_the_store(
        saver: HolomemSaver) -> None:
    """get_tuple of the latest remembers each namespace's newest head while no other
    write touches the store; other doors' writes, forgets by hand, a second saver and
    puts out of order must never make it answer an old or a gone checkpoint."""
    first = put(saver, "t", "one")
    cid1 = str(first["configurable"]["checkpoint_id"])  # type: ignore[index]
    got = saver.get_tuple(config("t"))
    assert got is not None and got.checkpoint["id"] == cid1
    # Another door writes; then a second saver over the same Store puts the next one.
    Memory(saver.memory.store).remember("an unrelated fact")
    other = HolomemSaver(saver.memory.store)
    second = put(other, "t", "two", parent=cid1)
    cid2 = str(second["configurable"]["checkpoint_id"])  # type: ignore[index]
    for s in (saver, other):
        got = s.get_tuple(config("t"))
        assert got is not None and got.checkpoint["id"] == cid2
    # A checkpoint put out of order (an older id) does not become the latest.
    late = empty_checkpoint()
    late["id"] = "00000000-0000-6000-8000-000000000000"
    saver.put(config("t"), late, {"source": "fork", "step": 9}, {})  # type: ignore[arg-type]
    got = saver.get_tuple(config("t"))
    assert got is not None and got.checkpoint["id"] == cid2
    # The newest head forgotten by hand: the one before it is the latest again.
    saver.memory.forget({"ids": [saver.threads.latest(saver._where(config("t"))[0]).id]})  # type: ignore[union-attr]
    got = saver.get_tuple(config("t"))
    assert got is not None and got.checkpoint["id"] == cid1
    assert saver.get_tuple(config("nobody")) is None
    put(saver, "nobody", "now someone")
    assert saver.get_tuple(config("nobody")) is not None


def test_a_follower_s_saver_sees_new_checkpoints_after_refresh(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with Store.open(path) as store:
        writer = HolomemSaver(store)
        first = put(writer, "t", "one")
        with Store.open(path, read_only=True) as follower_store:
            follower = HolomemSaver(Memory(follower_store))
            got = follower.get_tuple(config("t"))
            assert got is not None and got.config == first
            second = put(writer, "t", "two",
                         parent=str(first["configurable"]["checkpoint_id"]))  # type: ignore[index]
            follower_store.refresh()
            got = follower.get_tuple(config("t"))
            assert got is not None and got.config == second


def test_the_memory_s_policies_do_not_touch_the_saver_s_facts(tmp_path: Path) -> None:
    with Store.open(tmp_path / "store") as store:
        memory = Memory(store, MemoryConfig(supersession="latest-by-subject",
                                            entity_extractor="regex"))
        saver = HolomemSaver(memory)
        first = put(saver, "t", "Alice met Bob in Paris")
        put(saver, "t", "Alice left", parent=str(first["configurable"]["checkpoint_id"]))  # type: ignore[index]
        put(saver, "t", "a subgraph", ns="child:1")
        assert len(list(saver.list(config("t")))) == 2
        assert len(list(saver.list({"configurable": {"thread_id": "t"}}))) == 3
        heads = memory.list(filter={"subject": "holomem:langgraph/checkpoint"},
                            history="all").facts
        assert all(not h.entities for h in heads)
        assert sorted(h.status for h in heads) == ["current", "current", "superseded"]


@pytest.mark.parametrize("bad", [
    {}, {"configurable": {}}, {"configurable": {"thread_id": ""}},
    {"configurable": {"thread_id": "t", "checkpoint_ns": 3}},
    {"configurable": {"thread_id": "t", "checkpoint_id": 7}}])
def test_a_bad_config_is_an_invalid_request(saver: HolomemSaver, bad: dict[str, object]) -> None:
    with pytest.raises(InvalidError):
        saver.get_tuple(bad)  # type: ignore[arg-type]


def test_bad_arguments_are_invalid_requests(saver: HolomemSaver, tmp_path: Path) -> None:
    with pytest.raises(InvalidError):
        HolomemSaver("not a store")  # type: ignore[arg-type]
    with pytest.raises(InvalidError):
        HolomemSaver(saver.memory, namespace=("a",) * 7)
    with pytest.raises(InvalidError):
        saver.prune(["t"], strategy="keep_oldest")
    with pytest.raises(InvalidError):
        saver.delete_for_runs("run-1")
    with pytest.raises(InvalidError):
        list(saver.list(config("t"), limit=-1))
    with pytest.raises(InvalidError):
        saver.put_writes(config("t"), [("a", 1)], "task")  # type: ignore[arg-type]
