"""``python -m holomem.fsck STORE [--repair | --salvage DEST] [--json] [--key-file F]
[--backup-dir DIR]``: check a store, repair it, or salvage what is intact.

A tool (docs/guarantees.md §7). Imports the log, the events, the projections that lay
out derived files and the engine (``--repair`` and ``--salvage`` build derived files by
opening a store, as every open does). Its modules:

- :mod:`~holomem.fsck.findings`: a finding, a report, the exit statuses;
- :mod:`~holomem.fsck.checker`: the check and the repair (:func:`check`);
- :mod:`~holomem.fsck.advice`: what to do next, for every finding and error;
- :mod:`~holomem.fsck.salvage`: copying every intact transaction into a new store
  (:func:`salvage`), read past the damage by :mod:`~holomem.fsck.intact`, every loss
  accounted for by :mod:`~holomem.fsck.losses`;
- :mod:`~holomem.fsck.cli`: the command line and its text.

What is checked, and what ``--repair`` does about it (every finding left unrepaired
carries a ``next_step``: the command to run or the file to look at):

==========================  =====================================  ==========================
problem                     meaning                                repair
==========================  =====================================  ==========================
``leftover``                a generation left by an interrupted    overwrite with zeros, unlink
                            compaction (``gen-N.tmp`` or an old
                            ``gen-N``)
``journal.torn``            a torn tail: the last write never      cut it (the cut bytes are
                            completed                              saved to a backup first)
``corrupt.*``               damage before the tail: a bad frame,   none: reported, exit 4;
                            a sequence gap, a bad header, a        next step: restore a
                            missing segment, failed authentication; backup, or ``--salvage``
                            or damage in the last frames of a
                            journal whose watermark says they
                            were durable (acknowledged)
``corrupt.header`` on       the watermark is unreadable            remove it (saved to a
the watermark                                                      backup first), if nothing
                                                                   else is wrong with the
                                                                   journal; the writer's open
                                                                   writes a new one
``corrupt.lost_tail``       a checkpoint past the journal's end    none: reported, exit 4,
                            proves that the transactions up to it  the checkpoint kept (it is
                            were acknowledged: the journal's last  the evidence); next step:
                            segment file, or its last frames, are  copy the lost files back,
                            gone (open refuses the store)          restore a backup, or
                                                                   ``--salvage``
``event.undecodable``       a frame holding something that is not  none: reported, exit 4;
                            a holomem event                        next step: a newer build,
                                                                   or ``--salvage``
``text.header``             the text segment is missing, or its    rebuild it from the journal
                            header is unreadable or foreign
``text.record``             a live document's record does not      rebuild
                            read back intact
``text.stale``              bytes that should be zero are not      rebuild (old bytes zeroed)
                            (text of a removed document, or of an
                            unacknowledged write)
``purge.pending``           a purge was requested and its          finish the purge
                            compaction did not finish
``checkpoint.damaged``      a checkpoint does not read back         erase it (zeros, sync,
                            (checksum, authentication, layout);    unlink), write a fresh one
                            open does not use it
``checkpoint.stale``        a checkpoint of another store,         erase, write a fresh one
                            generation, schema or format version,
                            of a copy of the store whose journal
                            diverged (journal digest), or outside
                            the journal; open does not use it
``checkpoint.mismatch``     a checkpoint bound to this journal     erase, write a fresh one
                            that differs from a replay of it up
                            to its sequence number (a digest of
                            the projections' state); open would
                            restore it
``checkpoint.replaced``     an older checkpoint beside the newest  erase it
``checkpoint.leftover``     a checkpoint's interrupted temporary   erase it
                            file
==========================  =====================================  ==========================

Exit statuses follow e2fsck: 0 clean, 1 errors corrected (for ``--salvage``: the new store
was written and some transactions could not be copied), 4 errors left uncorrected, 8
operational error (no store, unreadable, wrong key, locked; for ``--salvage``: nothing was
written).
"""

from __future__ import annotations

from holomem.fsck.checker import check
from holomem.fsck.cli import main, parser
from holomem.fsck.findings import (
    EXIT_CLEAN,
    EXIT_CORRECTED,
    EXIT_OPERATIONAL,
    EXIT_UNCORRECTED,
    Finding,
    Report,
)
from holomem.fsck.losses import Loss
from holomem.fsck.salvage import Run, SalvageReport, salvage

__all__ = [
    "EXIT_CLEAN", "EXIT_CORRECTED", "EXIT_OPERATIONAL", "EXIT_UNCORRECTED",
    "Finding", "Loss", "Report", "Run", "SalvageReport", "check", "main", "parser", "salvage",
]
