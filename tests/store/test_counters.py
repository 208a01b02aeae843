"""``Store.counters()`` tells an operator what a store handle did (docs/contract.md §2).

Every acknowledged write is counted once, with the fsyncs of the journal that made it
durable; the counts only grow, across a compaction's new generation too, and stay
readable after the handle is closed (a server folds a closed tenant's figures into
its totals). The newest checkpoint's time is known whether it was written by this
handle or restored by the open.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from holomem import Store
from holomem.api.engine import DocumentInput, StoreCounters


def _doc(i: int) -> list[DocumentInput]:
    return [DocumentInput(id=f"d{i}", text=f"note number {i}")]


def test_each_acknowledged_write_is_counted_once_with_the_fsyncs_that_made_it_durable(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="full") as store:
        before = store.counters()
        assert before.acknowledged_writes == 0
        for i in range(3):
            store.add_documents(_doc(i))
        after = store.counters()
        assert after.acknowledged_writes == 3
        # sync="full": every write waited for an fsync of its own.
        assert after.fsyncs - before.fsyncs >= 3
        assert after.revision == 3
        assert after.journal_bytes > before.journal_bytes
        assert after.journal_bytes == store.stats().journal_bytes


def test_concurrent_writes_in_batch_mode_are_each_counted_and_share_fsyncs(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        base = store.counters()

        def write(n: int) -> None:
            for i in range(20):
                store.add_documents(_doc(n * 100 + i))

        threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        now = store.counters()
        assert now.acknowledged_writes - base.acknowledged_writes == 80
        assert 1 <= now.fsyncs - base.fsyncs <= 80


def test_counts_only_grow_across_a_compaction_and_stay_readable_after_close(
        tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s", sync="batch")
    for i in range(4):
        store.add_documents(_doc(i))
    seen = store.counters()
    store.compact()  # a new generation, a new appender: the counts go on
    store.add_documents(_doc(9))
    later = store.counters()
    assert later.acknowledged_writes == seen.acknowledged_writes + 1
    assert later.fsyncs > seen.fsyncs
    store.close()
    last = store.counters()
    assert isinstance(last, StoreCounters)
    assert last.acknowledged_writes == later.acknowledged_writes
    assert last.fsyncs >= later.fsyncs  # the close syncs too


def test_the_newest_checkpoint_time_is_known_when_written_and_when_restored(
        tmp_path: Path) -> None:
    with Store.open(tmp_path / "s", sync="batch") as store:
        store.add_documents(_doc(1))
        assert store.counters().checkpoint_time is None
        began = time.time()
        assert store.checkpoint() is not None
        written = store.counters()
        assert written.checkpoint_seq == 1 and written.checkpoint_tail_bytes == 0
        assert written.checkpoint_time is not None and written.checkpoint_time >= began - 1
    with Store.open(tmp_path / "s", sync="batch") as store:
        restored = store.counters()
        assert restored.acknowledged_writes == 0  # counts are this handle's
        assert restored.checkpoint_seq == 1
        assert restored.checkpoint_time is not None
        assert abs(restored.checkpoint_time - written.checkpoint_time) < 5
        store.compact()  # the new generation holds no checkpoint yet
        assert store.counters().checkpoint_time is None
