"""fsck's check of checkpoints: each one against a replay of the journal up to it.

Owns: :class:`CheckpointCheck`, fed every transaction of the live generation by the
checker's one pass over the journal. It replays them into a full set of projections
and, at each checkpoint's sequence number, takes a digest of that state
(:func:`holomem.projections.checkpoint.digest`); at the end it reads every checkpoint
back as open does (its journal digest included), restores it and compares digests.
Findings: ``checkpoint.damaged`` (does not read back: checksum, authentication,
layout), ``checkpoint.stale`` (written for another journal: another store, generation,
schema or format version, a copy of this store whose journal diverged, or a sequence
number outside the journal), ``checkpoint.mismatch`` (bound to this journal, so open
would use it, but its state differs from the replay), ``checkpoint.replaced`` (an
older one beside the newest) and ``checkpoint.leftover`` (an interrupted write). Each
message says what open does with the file. All are repaired by erasing the file and
writing a fresh checkpoint from the journal. One more finding is damage to the journal,
proven by a checkpoint: ``corrupt.lost_tail``, a checkpoint past the journal's end that
was written once its transactions were durable (:func:`holomem.log.checkpoint.vouches`):
acknowledged transactions are gone from the journal's end; the writer's open refuses
the store, and the file, the evidence, is never erased. It is looked for only when the
journal's end is known: beside damage that stops the scan of a segment (a damaged
frame, a segment header), transactions past the last one read may still be in the
files, and that damage is what is reported. Imports the log and the projections.
"""

from __future__ import annotations

import contextlib

from holomem.events import Event
from holomem.fsck.findings import Finding, Report
from holomem.log import checkpoint as ckfile
from holomem.log import fs
from holomem.log.envelope import Envelope
from holomem.log.writer import Segment
from holomem.projections import checkpoint as codec
from holomem.projections.base import RecordStore
from holomem.projections.state import ProjectionState


class CheckpointCheck:
    """The checkpoints of one generation, checked while its journal is replayed."""

    def __init__(self, gen_dir: str, *, generation: int, store_id: bytes,
                 envelope: Envelope | None, records: RecordStore,
                 segments: list[Segment], end_known: bool) -> None:
        #: ``segments`` end where the journal's files do: no damage stopped the scan
        #: of the last segment file before its end (or left it out: its header), where
        #: transactions past the last one scanned may still be.
        self.end_known = end_known
        self.gen_dir = gen_dir
        self.generation = generation
        self.store_id = store_id
        self.envelope = envelope
        self.records = records
        self.segments = segments
        self.found = ckfile.listing(gen_dir)
        self.leftovers = ckfile.leftovers(gen_dir)
        self.first_seq = segments[0].first_seq
        self.digests: dict[int, str] = {}
        self._wanted = {seq for seq, _ in self.found}
        self._state: ProjectionState | None = None
        self._bulk = contextlib.ExitStack()
        if self._wanted:
            self._state = ProjectionState(records, writes_text=False)
            self._bulk.enter_context(self._state.replaying())
            self._at(self.first_seq - 1)

    @property
    def active(self) -> bool:
        return self._state is not None

    def _at(self, seq: int) -> None:
        if seq in self._wanted and self._state is not None:
            self.digests[seq] = codec.digest(self._state)

    def apply(self, seq: int, events: list[Event]) -> None:
        if self._state is None:
            return
        for event in events:
            self._state.apply(seq, event)
        self._at(seq)

    def finish(self, report: Report, *, last_seq: int, journal_ok: bool) -> None:
        """Add the findings; with a damaged journal the replay proves nothing, and
        only the files' own checks are reported."""
        self._bulk.close()
        newest = max((seq for seq, _ in self.found), default=0)
        for path in self.leftovers:
            report.findings.append(Finding(
                "checkpoint.leftover", path, 0, 0,
                "a checkpoint whose writing was interrupted; it may hold removed text", True))
        for seq, path in self.found:
            finding = self._verdict(seq, path, newest, last_seq, journal_ok)
            if finding is not None:
                report.findings.append(finding)

    def _verdict(self, seq: int, path: str, newest: int, last_seq: int,
                 journal_ok: bool) -> Finding | None:
        def found(code: str, message: str) -> Finding:
            return Finding(code, path, 0, fs.path_size(path), message, True)

        ignored = "open does not use it: it replays the journal (or uses an older checkpoint)"
        end = self.segments[-1].last_seq  # (last_seq: the last that decoded, before damage)
        if seq > end and self.end_known:
            proven = ckfile.vouches(path, store_id=self.store_id, generation=self.generation,
                                    envelope=self.envelope)
            if proven is not None and proven > end:
                lost = (f"transaction {proven} was acknowledged and is gone"
                        if proven == end + 1 else
                        f"transactions {end + 1} to {proven} were acknowledged and are gone")
                return Finding(
                    "corrupt.lost_tail", path, 0, fs.path_size(path),
                    f"the journal ends at transaction {end}, but this checkpoint holds the "
                    f"state after transaction {proven} and was written only once every "
                    f"transaction up to it was durable: {lost} (the journal's last "
                    "segment file, or its last frames, deleted or lost). Open refuses the "
                    "store; this file is the evidence, and --repair leaves it", False)
        # Beside damage in the journal, where it begins and ends and its digest are
        # unknown: the file's own checks only.
        if journal_ok and seq > last_seq:
            return found("checkpoint.stale",
                         f"it holds the state after transaction {seq}, past the journal's "
                         f"last, {last_seq}; {ignored}")
        if journal_ok and seq < self.first_seq - 1:
            return found("checkpoint.stale",
                         f"transaction {seq} is before this generation's first, "
                         f"{self.first_seq}; {ignored}")
        digest = ckfile.journal_digest(self.segments, seq) if journal_ok else None
        try:
            _, payload = ckfile.read(path, store_id=self.store_id, generation=self.generation,
                                     digest=digest, schema=codec.SCHEMA, envelope=self.envelope)
        except ckfile.Invalid as exc:
            code = "checkpoint.stale" if isinstance(exc, ckfile.Stale) else "checkpoint.damaged"
            return found(code, f"{exc}; {ignored}")
        if seq < newest:
            return found("checkpoint.replaced",
                         f"replaced by the checkpoint of transaction {newest}, not erased yet "
                         "(an interrupted checkpoint write); it may hold removed text")
        try:
            restored = codec.restore(self.records, payload, writes_text=False)
        except ValueError as exc:
            return found("checkpoint.damaged",
                         f"its projections do not fit together: {exc}; {ignored}")
        if journal_ok and codec.digest(restored) != self.digests.get(seq):
            return found("checkpoint.mismatch",
                         f"it differs from a replay of the journal up to transaction {seq}, "
                         "yet it is bound to this journal (its journal digest matches): open "
                         "restores it, and answers from it, not from the journal")
        return None
