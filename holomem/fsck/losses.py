"""A salvage's account of what it could not copy: every lost byte and sequence number.

Owns: :class:`Loss` (a range of the damaged store that was not copied, and the
transactions it held) and :class:`Ledger`, which follows the sequence numbers as the
damaged journal is read -- the next one expected, the last one copied, the losses whose
transactions are known only once the sequence resumes -- and, after the last segment,
what the watermark, or a checkpoint written once its transactions were durable
(:func:`holomem.log.checkpoint.vouches`), says was durable past what could be read.
Imports the standard library and the log (the watermark, checkpoints, file names); it
reads no frame itself (:mod:`holomem.fsck.intact` does, and tells it where the sequence
goes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from holomem.errors import HolomemError
from holomem.log import checkpoint as ckfile
from holomem.log.envelope import Envelope
from holomem.log.format import SEGMENT_PREFIX, segment_name
from holomem.log.watermark import Watermark, read_watermark


@dataclass
class Loss:
    """Bytes of the damaged store that were not copied, and the transactions they held.

    The range held transactions ``first_seq`` to ``last_seq`` (original numbers,
    inclusive; none when ``last_seq < first_seq``). ``open_ended``: the damage runs to
    the end of what could be read, so more transactions than those counted may have
    been there (from ``first_seq`` on; how many, nothing left says).
    """

    path: str
    offset: int
    length: int
    reason: str
    first_seq: int = 0
    last_seq: int = -1
    open_ended: bool = False

    @property
    def count(self) -> int:
        return max(0, self.last_seq - self.first_seq + 1)


class Ledger:
    """The sequence numbers of one salvage's read; appends to the report's ``losses``
    and ``notes``. ``envelope``: the damaged store's (its checkpoints are sealed)."""

    def __init__(self, losses: list[Loss], notes: list[str], *,
                 envelope: Envelope | None = None) -> None:
        self.losses = losses
        self.notes = notes
        self.envelope = envelope
        #: the next original sequence number expected, and the last one copied
        self.expected: int | None = None
        self.last_kept = 0
        #: losses whose transactions are counted once the next intact frame (or segment
        #: header) says where the sequence resumes
        self.pending: list[Loss] = []

    def kept(self, seq: int) -> None:
        """Transaction ``seq`` was copied."""
        self.last_kept, self.expected = seq, seq + 1

    def lose(self, path: str, offset: int, length: int, reason: str, first: int = 0,
             last: int = -1) -> Loss:
        """A loss whose transactions are known (``first`` to ``last``; none by default)."""
        if first <= last:
            self.resume(first, path, offset)
            self.expected = last + 1
        loss = Loss(path, offset, length, reason, first, last)
        self.losses.append(loss)
        return loss

    def lose_open(self, path: str, offset: int, length: int, reason: str,
                  first: int | None = None) -> None:
        """A loss that runs until the sequence resumes: what it held is counted when the
        next intact frame (or segment header) says where the sequence resumes. Its first
        number is ``first``, else the one expected; 0 while nothing says (sequence
        numbers start at 1)."""
        start = first if first is not None else self.expected
        loss = Loss(path, offset, length, reason, start or 0, (start or 0) - 1, True)
        self.losses.append(loss)
        self.pending.append(loss)

    def resume(self, seq: int, path: str, offset: int) -> None:
        """The sequence resumes at ``seq``: what the pending losses held is now known (it
        is counted in the first of them), and a jump that no loss accounts for (numbers
        that are in no file) becomes one."""
        pending, self.pending = self.pending, []
        if pending:
            head = pending[0]
            if head.first_seq == 0:
                head.first_seq = seq
                head.reason += f"; how many transactions came before {seq} is unknown"
            else:
                head.open_ended = False
            head.last_seq = max(head.first_seq, seq) - 1
            for loss in pending[1:]:
                loss.first_seq, loss.last_seq, loss.open_ended = seq, seq - 1, False
                loss.reason += (f"; what it held is counted with the loss at {head.path} "
                                f"offset {head.offset}")
        elif self.expected is not None and seq > self.expected:
            self.losses.append(Loss(
                path, offset, 0, f"transactions {self.expected} to {seq - 1} are in no file "
                "(the sequence jumps here)", self.expected, seq - 1))
        self.expected = max(seq, self.expected or 0)

    def _proven(self, gen_dir: str, store_id: bytes, generation: int,
                past: int) -> tuple[int, str] | None:
        """The highest sequence number above ``past`` that a checkpoint of ``gen_dir``
        proves durable, with the checkpoint's name (None: none does)."""
        best: tuple[int, str] | None = None
        for seq, path in ckfile.listing(gen_dir):
            if seq <= max(past, best[0] if best else 0):
                continue
            proven = ckfile.vouches(path, store_id=store_id, generation=generation,
                                    envelope=self.envelope)
            if proven is not None and proven > past:
                best = (proven, os.path.basename(path))
        return best

    def end(self, gen_dir: str, store_id: bytes, generation: int, last_path: str,
            last_size: int) -> None:
        """After the last segment: what the watermark, or a checkpoint, says was durable
        past what was read."""
        mark: Watermark | None = None
        try:
            mark = read_watermark(gen_dir)
        except HolomemError as exc:
            self.notes.append(f"the watermark is unreadable ({exc.message}): how "
                              "many transactions were acknowledged is unknown")
        if mark is not None and (mark.store_id != store_id or mark.generation != generation):
            self.notes.append("the watermark belongs to another store or generation: "
                              "it was not used")
            mark = None
        last_read = (self.expected or 1) - 1
        # A checkpoint counts only where it says more than the watermark.
        proof = self._proven(gen_dir, store_id, generation,
                             max(last_read, mark.seq if mark is not None else 0))
        pending, self.pending = self.pending, []
        if pending:
            head = pending[0]
            if head.first_seq == 0:
                head.first_seq = last_read + 1
                head.last_seq = last_read
            if proof is not None and proof[0] >= head.first_seq:
                head.last_seq = proof[0]
                head.reason += (f"; the checkpoint {proof[1]}, written once every "
                                f"transaction up to {proof[0]} was durable, says they were "
                                "acknowledged")
            elif mark is None:
                head.reason += ("; with nothing valid after it, how many transactions it "
                                "held is unknown")
            elif mark.seq >= head.first_seq:
                head.last_seq = mark.seq
                head.reason += (f"; the watermark says every transaction up to {mark.seq} "
                                "was acknowledged")
            else:
                head.reason += (f"; past the last transaction the watermark says was "
                                f"durable ({mark.seq}): most likely a write that never "
                                "completed (a torn tail), never acknowledged")
            for loss in pending[1:]:
                loss.first_seq, loss.last_seq = head.first_seq, head.first_seq - 1
                loss.reason += (f"; what it held is counted with the loss at {head.path} "
                                f"offset {head.offset}")
        elif proof is not None or (mark is not None and mark.seq > last_read):
            last_number = int(os.path.basename(last_path)[len(SEGMENT_PREFIX):][:8])
            if mark is not None and mark.segment > last_number:
                first, last = last_number + 1, mark.segment
                path, offset = os.path.join(gen_dir, segment_name(first)), 0
                what = f"segment {first}" if first == last else f"segments {first} to {last}"
                where = f"{what} missing: "
            else:
                path, offset, where = last_path, last_size, ""
            if proof is not None:
                durable, says = proof[0], (f"the checkpoint {proof[1]} holds the state after "
                                           "them, and was written once they were durable")
            else:
                assert mark is not None  # (the condition above)
                durable, says = mark.seq, "the watermark says so"
            self.losses.append(Loss(
                path, offset, 0, f"{where}transactions {last_read + 1} to {durable} were "
                f"acknowledged ({says}) but are in no file", last_read + 1, durable))
