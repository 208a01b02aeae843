"""The state a purge leaves in memory is the state its new generation replays to
(docs/guarantees.md §6).

A purge switches the writer to a new generation and answers from the projections it
built while writing it, without replaying it. Those projections must be exactly what
any later open of the purged store builds from its journal: otherwise the writer and
a follower (or the writer after a restart) would answer differently, and a
checkpoint written from the writer's state would not match its own journal. Compared
attribute for attribute (as a checkpoint's restore is), over random workloads of
remember, supersede, relate, feedback, delete and forget, plain and encrypted.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holomem import ManualClock, Memory, Store
from holomem.errors import HolomemError
from holomem.log.recordfile import RecordFile
from holomem.projections.state import ProjectionState
from tests.memory import test_reopen as reopen
from tests.store.test_checkpoints import assert_same

WORDS = ["river", "stone", "lamp", "moon", "cat", "garden", "window", "bread", "tea", "violin"]

_ids = st.integers(0, 11)
_op = st.one_of(
    st.tuples(st.just("remember"), _ids, st.lists(st.sampled_from(WORDS), min_size=1,
                                                    max_size=6),
              st.sampled_from([None, "s0", "s1"])),
    st.tuples(st.just("supersede"), _ids, _ids),
    st.tuples(st.just("relate"), _ids, _ids, st.sampled_from(["knows", "near"])),
    st.tuples(st.just("feedback"), _ids, st.booleans()),
    st.tuples(st.just("forget"), _ids),
    st.tuples(st.just("delete"), _ids),
)
#: the last op is always a purge (of one fact, or a compaction with purge)
WORKLOAD = st.tuples(st.lists(_op, min_size=1, max_size=25), _ids, st.booleans())

PARTS = (*ProjectionState.PARTS, "purge_pending", "memory_config", "embedder",
         "reembed_target", "reembed_cursor")


def _run(memory: Memory, op: tuple[Any, ...], n: int) -> None:
    kind = op[0]
    try:
        if kind == "remember":
            _, i, words, subject = op
            memory.remember(id=f"f{i}-{n}", text=" ".join(words), subject=subject,
                            entities=[f"E{i % 3}"], metadata={"n": i})
        elif kind == "supersede":
            _, i, j = op
            memory.remember(id=f"v{i}-{n}", text=f"{WORDS[i % 10]} replaced again",
                            supersedes=[_existing(memory, j)])
        elif kind == "relate":
            _, i, j, rel = op
            memory.relate(_existing(memory, i), _existing(memory, j), rel)
        elif kind == "feedback":
            memory.feedback(_existing(memory, op[1]), op[2])
        elif kind == "forget":
            memory.forget({"ids": [_existing(memory, op[1])]})
        elif kind == "delete":
            memory.store.delete_document(_existing(memory, op[1]))
    except (HolomemError, LookupError):
        pass  # an op on a fact that is not there (or a self-link): nothing written


def _text_salt(store: Store) -> int:
    with store.reading() as view:
        records = view.state.text.store
        assert isinstance(records, RecordFile) and records.version == 2
        return records.salt


def _existing(memory: Memory, i: int) -> str:
    ids = memory.store.ids()
    if not ids:
        raise LookupError("no fact yet")
    return ids[i % len(ids)]


def compare_with_a_fresh_open(store: Store, path: Path, key: bytes | None, *, sealed: bool) -> None:
    """The purged store's state against a writer's fresh open of a copy of its files
    (the writer keeps its lock, so the copy is opened in its place)."""
    copy = path.parent / f"copy-{store.revision}"
    with store.reading() as view:
        store.sync()
        shutil.copytree(path, copy)
        with Store.open(copy, key=key, sync="none", checkpoint_every=None,
                        checkpoint_close_min=1 << 40) as fresh, fresh.reading() as again:
            # Right after the purge nothing is reconciled: its text segment was sealed.
            assert fresh.stats().opened_by == "replay" if sealed else True
            if not sealed:
                # A writer's later commits leave postings in BM25's delta and links in
                # the relations' small delta, where a replay merges them: that changes
                # where they are kept, not an answer (the checkpoint digest does the same).
                for state in (view.state, again.state):
                    state.bm25.merge()
                    state.relations.settle()
            for part in PARTS:
                assert_same(getattr(view.state, part), getattr(again.state, part), part)


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(workload=WORKLOAD, encrypted=st.booleans())
def test_a_purged_stores_state_in_memory_is_what_a_fresh_open_replays(
        tmp_path_factory: Any, workload: tuple[list[tuple[Any, ...]], int, bool],
        encrypted: bool) -> None:
    ops, target, whole = workload
    path = tmp_path_factory.mktemp("purged") / "store"
    key = os.urandom(32) if encrypted else None
    with Store.open(path, key=key, sync="none", checkpoint_every=None,
                    checkpoint_close_min=1 << 40) as store:
        memory = Memory(store, reopen.CONFIG, clock=ManualClock(1_000))
        for n, op in enumerate(ops):
            memory.clock.advance(5)  # type: ignore[attr-defined]
            _run(memory, op, n)
        ids = store.ids()
        salt = _text_salt(store)
        if whole or not ids:
            store.compact(purge=True)
        else:
            memory.forget({"ids": [ids[target % len(ids)]]}, purge=True)
        compare_with_a_fresh_open(store, path, key, sealed=True)
        # the records were carried into a file of the same lineage (FORMAT.md §9.1)
        assert _text_salt(store) == salt
        # and again after a write on top of the purged state
        memory.remember(id="after", text="a fact after the purge", subject="s0")
        compare_with_a_fresh_open(store, path, key, sealed=False)
