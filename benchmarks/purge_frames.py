"""Prototype of a frame-level purge: what refiling surviving frames' bytes costs.

    python benchmarks/purge_frames.py [--facts 100000] [--batch 100] [--encrypted]

Issue 16 asks purge to be at most 5x copying the journal. Today a purge reads every
live record back and writes one event per live document again, and renumbers the old
projections instead of applying those events
(:func:`holomem.api.engine.compaction.rewrite`,
:meth:`holomem.projections.state.ProjectionState.compacted`). A frame-level purge would
copy every frame that holds nothing purged, as bytes, into the new generation instead.
This script measures the log-level half of that design on a real store, beside the
copy and the purge of today, in one run:

- ``copy``: the journal's segments copied and fsynced (purge_bench's ``copy``);
- ``refile``: every transaction of the live generation refiled into a new generation
  by :meth:`holomem.log.Journal.refile` (issue 33), on a copy of the store, from the
  new generation begun to it switched in: each frame verified and given a new
  sequence number, its new segment's salt, so a new header and xxh3 checksum; for
  an encrypted store the body opened under the old associated data (store id,
  generation, segment, header) and sealed under the new one, AES-GCM over the
  compressed bytes, nothing decompressed or decoded; then synced and renamed in;
- ``carry``: every live text-segment record carried into a new generation's text
  file as bytes. The text segment's version 2 (FORMAT.md §9.1) binds a record to the
  store and the file's salt only, so a new file with the same salt takes the records
  unchanged: the runs of adjacent live records are copied with one read and one write
  each, back to back, and the file is fsynced and sealed -- no Python step per record.
  (In version 1 every record named its transaction's sequence number and, sealed, its
  generation and offset: each had to be encoded and sealed again, ~26x a copy at
  100,000 facts.) Today's purge copies the records too, but one by one, after
  verifying each (it reads every record for the new journal's events anyway);
- ``erase``: a copy of the live generation (journal, text segment) overwritten with
  zeros, synced and unlinked, as every compaction does to the generation it replaces;
- ``scan``: every frame read, checked, decompressed (opened, when encrypted) and its
  events decoded: the least a frame filter must do to know which frames name a removed
  fact (a feedback's note, a link's metadata, a re-embedded vector: only the frame
  says whom it is about);
- ``words``: the live texts' distinct words listed in the order a replay meets them
  (:class:`holomem.projections.firstwords.FirstWords`; the texts taken from the
  records, which the scan's events would give);
- ``renumber``: the live state renumbered into fresh projections
  (:meth:`ProjectionState.compacted`, as a purge does today): what the state half costs;
- ``purge``: ``Memory.forget(..., purge=True)`` of one fact, as today.

``floor_over_copy`` is (refile + carry + erase) / copy: what a frame-level purge
would cost with an in-memory renumbering that cost nothing, in this format;
``frames_over_copy`` adds the scan, the words and today's renumbering: a frame-level
purge that reads every frame and renumbers as cheaply as today. (Today's
renumbering equals a replay of one event per live document; for filtered frames it
would have to equal a replay of the surviving history instead: see
benchmarks/README.md.) Prints JSON; nothing is saved.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import emit, machine, median
from benchmarks.purge_bench import copy_journal, erase_cost
from benchmarks.search_bench import corpus
from holomem import Memory, Store
from holomem import events as ev
from holomem.log import Journal
from holomem.log.envelope import Envelope
from holomem.log.format import (
    TEXT_FILE,
)
from holomem.log.recordfile import RecordFile
from holomem.projections.base import Kept
from holomem.projections.firstwords import FirstWords
from holomem.projections.state import ProjectionState


def refile(path: str, key: bytes | None, scratch: str) -> tuple[float, int]:
    """Every transaction of the store at ``path`` refiled into a new generation by
    :meth:`Journal.refile` (the log's primitive), on a copy of the store: seconds from
    the new generation begun to it switched in (created, written, synced, renamed), and
    the bytes of its journal."""
    shutil.copytree(path, scratch)
    try:
        with Journal.open(scratch, key=key, sync="full") as journal:
            seqs = list(range(journal.first_seq, journal.last_seq + 1))
            t = time.perf_counter()
            target = journal.begin_rewrite()
            journal.refile(target, seqs)
            journal.switch(target)
            elapsed = time.perf_counter() - t
            written = journal.stats().bytes
    finally:
        shutil.rmtree(scratch)
    return elapsed, written


def carry(store: Store, envelope: Envelope | None, dest: str, shift: int
          ) -> tuple[float, float, int]:
    """Every live record of ``store``'s (version 2) text segment copied as bytes into a
    next generation's file in ``dest``; seconds, CPU seconds and bytes."""
    os.makedirs(dest, exist_ok=True)
    with store.reading() as view:
        state = view.state
        old = state.text.store
        assert isinstance(old, RecordFile) and old.version == 2
        slots = np.flatnonzero(state.catalog.alive.view())
        offs = state.text.offset.view()[slots]
        ends = offs + state.text.size.view()[slots]
        last = int(state.catalog.seq.view()[slots].max()) + shift if len(slots) else 0
        t, cpu = time.perf_counter(), time.process_time()
        new = RecordFile(os.path.join(dest, TEXT_FILE), store_id=old.store_id,
                         generation=old.generation + 1, envelope=envelope,
                         read_only=False, salt=old.salt)
        assert new.carries(old)
        # runs of adjacent live records: one read and one write each
        breaks = np.flatnonzero(offs[1:] != ends[:-1]) + 1
        starts = np.concatenate([[0], breaks]).astype(np.int64)
        stops = np.concatenate([breaks, [len(slots)]]).astype(np.int64) - 1
        at = new.first_offset
        for lo, hi in zip(offs[starts].tolist(), ends[stops].tolist(), strict=True):
            new.write(at, old.read_span(lo, hi - lo))
            at += hi - lo
        new.seal(last)
        new.close()
        elapsed, cpu = time.perf_counter() - t, time.process_time() - cpu
    shutil.rmtree(dest)
    return elapsed, cpu, at - RecordFile.first_offset


def scan(journal: Journal) -> float:
    """Seconds to read, check, decompress and decode every event of ``journal``."""
    t = time.perf_counter()
    for seq, payloads in journal.replay(journal.first_seq):
        ev.decode_all(payloads, seq=seq)
    return time.perf_counter() - t


def renumber(store: Store) -> tuple[float, float]:
    """Seconds to list the live texts' words, and to renumber the live state into fresh
    projections (no file), as a compaction does."""
    with store.reading() as view:
        source = view.state
        kept = Kept.live(source.catalog.alive.view())
        texts = [r.text for r in view.records(kept.slots)]
        t = time.perf_counter()
        words = FirstWords()
        for start in range(0, len(texts), 1024):
            words.add(texts[start:start + 1024])
        words_s = time.perf_counter() - t
        t = time.perf_counter()
        state = ProjectionState(None)
        state.text.place(0, [b""] * len(kept.slots))  # (placements, as the writing gives)
        state.entities.add_lists(0, [()] * len(kept.slots))
        state.compacted(source, kept, np.zeros(len(kept.slots), dtype=np.int64), words.words)
        return words_s, time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--facts", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=100, help="facts per remember_many call")
    ap.add_argument("--compact", action="store_true",
                    help="compact the store before measuring (as purge_bench's rounds do)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--encrypted", action="store_true")
    args = ap.parse_args()
    key = os.urandom(32) if args.encrypted else None
    rows = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "store")
        texts = corpus(args.facts, seed=5)
        with Store.open(path, sync="none", key=key) as store:
            memory = Memory(store)
            for i in range(0, args.facts, args.batch):
                memory.remember_many([{"id": f"f{j}", "text": texts[j]}
                                      for j in range(i, min(args.facts, i + args.batch))])
        with Store.open(path, sync="full", key=key) as store:
            memory = Memory(store)
            if args.compact:
                store.compact()
            for r in range(args.rounds):
                copy_s = copy_journal(path, os.path.join(d, "copy"))
                refile_s, nbytes = refile(path, key, os.path.join(d, "refile"))
                with Journal.open(path, key=key, read_only=True) as journal:  # a follower
                    shift = journal.last_seq + 1 - journal.first_seq
                    carry_s, carry_cpu_s, text_bytes = carry(store, journal.envelope,
                                                             os.path.join(d, "carry"), shift)
                    scan_s = scan(journal)
                words_s, renumber_s = renumber(store)
                erase_s, _ = erase_cost(path, os.path.join(d, "scratch"))
                t, cpu = time.perf_counter(), time.process_time()
                memory.forget({"ids": [f"f{r}"]}, purge=True)
                purge_s, purge_cpu_s = time.perf_counter() - t, time.process_time() - cpu
                rows.append({"copy_s": copy_s, "refile_s": refile_s, "carry_s": carry_s,
                             "carry_cpu_s": carry_cpu_s, "purge_cpu_s": purge_cpu_s,
                             "erase_s": erase_s, "purge_s": purge_s, "bytes": nbytes,
                             "text_bytes": text_bytes, "scan_s": scan_s, "words_s": words_s,
                             "renumber_s": renumber_s,
                             "floor_s": refile_s + carry_s + erase_s,
                             "frames_s": refile_s + carry_s + erase_s + scan_s + words_s
                             + renumber_s})
    emit("purge_frames", {
        "benchmark": "purge_frames (prototype)", "machine": machine(tempfile.gettempdir()),
        "conditions": {"facts": args.facts, "facts_per_transaction": args.batch,
                       "encrypted": args.encrypted, "rounds": args.rounds,
                       "compacted_first": args.compact},
        "median_s": {k: round(median([r[k] for r in rows]), 4)
                     for k in ("copy_s", "refile_s", "carry_s", "carry_cpu_s", "erase_s",
                               "scan_s", "words_s", "renumber_s", "floor_s", "frames_s",
                               "purge_s", "purge_cpu_s")},
        "median_ratios": {
            "refile_over_copy": round(median([r["refile_s"] / r["copy_s"] for r in rows]), 2),
            "carry_over_copy": round(median([r["carry_s"] / r["copy_s"] for r in rows]), 2),
            "erase_over_copy": round(median([r["erase_s"] / r["copy_s"] for r in rows]), 2),
            "floor_over_copy": round(median([r["floor_s"] / r["copy_s"] for r in rows]), 2),
            "scan_over_copy": round(median([r["scan_s"] / r["copy_s"] for r in rows]), 2),
            "words_over_copy": round(median([r["words_s"] / r["copy_s"] for r in rows]), 2),
            "renumber_over_copy": round(median([r["renumber_s"] / r["copy_s"]
                                                for r in rows]), 2),
            "frames_over_copy": round(median([r["frames_s"] / r["copy_s"] for r in rows]), 2),
            "purge_over_copy": round(median([r["purge_s"] / r["copy_s"] for r in rows]), 1)},
        "journal_bytes": rows[-1]["bytes"], "text_bytes": rows[-1]["text_bytes"],
        "rounds": rows,
    }, False)


if __name__ == "__main__":
    main()
