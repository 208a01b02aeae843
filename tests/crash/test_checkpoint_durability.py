"""A checkpoint is never ahead of the journal on disk, in every sync mode: with
``sync="none"`` (nothing waits for an fsync) writing one syncs the journal first, so a
power cut can take the writes after it but never the ones it holds (docs/guarantees.md
§6a, FORMAT.md §9.2). That is what lets a checkpoint past the journal's end prove a
loss (tests/store/test_lost_tail.py).

The store is written in this process with the file layer recorded, as a power-loss
child records it; then the power-loss model of the crash harness builds what a power
cut could leave (unsynced bytes dropped, cut or garbled, unsynced entries lost), once
per seed, and each is checked.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

from holomem import Journal, Store
from holomem import crashtest as ct
from holomem.log import checkpoint as ckfile

from .recording import recording

SEEDS = range(8)


def test_with_sync_none_no_power_cut_leaves_a_checkpoint_ahead_of_the_journal(
        tmp_path: Path) -> None:
    store_path = tmp_path / "store"
    with recording(tmp_path / ct.FAULT_LOG):
        store = Store.open(store_path, sync="none", segment_size=4096, checkpoint_every=None,
                           checkpoint_close_min=1 << 40)
        try:
            for i in range(40):
                store.add_document(f"d{i}", f"document {i} written before the checkpoint")
            done = store.checkpoint()
            assert done is not None
            # One transaction after it, never synced (with several, a cut that garbles
            # one and keeps a later one is damage the journal refuses: sync="none"
            # promises nothing of them).
            store.add_document("after", "written after the checkpoint, never synced")
        except BaseException:
            store.close()
            raise
    # The power fails here: the store is never closed (a close would sync everything).
    try:
        notes = []
        for seed in SEEDS:
            cut = tmp_path / f"cut-{seed}"
            notes.append(ct.power_loss(str(tmp_path), str(store_path), str(cut), seed))
            (ck,) = glob.glob(str(cut / "gen-*" / "checkpoint-*.hck"))
            with Journal.open(cut, read_only=True) as journal:
                assert ckfile.vouches(ck, store_id=journal.store_id,
                                      generation=journal.generation, envelope=None) == done.seq
                assert journal.last_seq >= done.seq, (seed, notes[-1])
            with Store.open(cut, sync="none") as reopened:
                assert reopened.stats().opened_by.startswith("checkpoint")
                assert reopened.revision >= done.seq
                assert reopened.has_document("d39")
        # The faults landed: the write after the checkpoint was unsynced, and some cuts
        # took it.
        assert any("paths differ" in " ".join(n) for n in notes), notes
    finally:
        store.close()
    assert os.path.isdir(store_path)
