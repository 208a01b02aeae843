"""``--salvage DEST``: copy every intact transaction of a damaged store into a new store.

Owns: the salvage (docs/guarantees.md §7) -- reading the live generation of a store
frame by frame past any damage, copying each transaction that reads back whole, and
accounting for every byte and sequence number it could not copy (:class:`Loss`). Imports
the log (to read the damaged journal and to write the new one), the events (a
transaction is copied only if every event in it decodes), the engine (the new store's
derived files are built by opening it, as on every open) and the checker (the new store
must check clean).

How it reads: a segment is scanned as the journal scans it; at the first frame that is
not valid, the scan resumes at the next valid frame that continues the sequence (the
same search the journal uses to tell a torn tail from damage), so a bad frame costs that
frame only. A segment whose header is damaged is read with the salt its header still
holds and the identity of the store's other segments; a missing segment costs its
transactions. Only checksummed frames are copied, and each one only if it decodes (and,
in an encrypted store, authenticates); then its payloads are appended, byte for byte, to
the new journal.

What the new store is:

- **a new store, with a new id.** Its history is not the damaged store's (transactions
  are missing), so nothing that knew the old store -- a follower, a server's open
  handle, a backup, an encrypted frame's associated data -- may take it for the same
  one. The damaged store is never modified (its lock is held while it is read);
- **renumbered**: its transactions are numbered 1, 2, 3 ... in their original order
  (a journal's sequence numbers have no gaps); :attr:`SalvageReport.renumbered` maps the
  old numbers to the new;
- **encrypted with the same key** if the damaged store was (the key is needed to read
  it: ``--key-file``);
- **complete or absent**: it is built in ``DEST.salvage.tmp``, opened (which builds its
  text segment), checked by fsck, and only then renamed to ``DEST``. ``DEST`` must not
  exist, or be an empty directory, outside the store.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from holomem.errors import (
    CorruptError,
    HeaderError,
    HolomemError,
    InvalidError,
    NotFoundError,
)
from holomem.events import decode as decode_event
from holomem.fsck.advice import Advisor
from holomem.fsck.checker import check
from holomem.fsck.findings import EXIT_CLEAN, EXIT_CORRECTED, EXIT_OPERATIONAL
from holomem.log import Journal, fs
from holomem.log.envelope import Envelope, validate_key
from holomem.log.format import (
    FRAME_CHECKSUMMED,
    FRAME_HEADER_SIZE,
    LOCK_NAME,
    SEGMENT_HEADER,
    SEGMENT_HEADER_SIZE,
    SEGMENT_PREFIX,
    generation_name,
    segment_name,
)
from holomem.log.frame import (
    BadBody,
    Binding,
    FrameCodec,
    frame_checksum,
    header_problem,
    parse_header,
)
from holomem.log.generation import list_generations
from holomem.log.opening import check_key
from holomem.log.segment import (
    SegmentHeader,
    list_segments,
    read_file,
    scan_frames,
    unpack_header,
    valid_frame_after,
)
from holomem.log.watermark import Watermark, read_watermark

#: Beside DEST: where the new store is built before it is renamed into place.
TMP_SUFFIX = ".salvage.tmp"


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


@dataclass
class Run:
    """Original transactions ``first`` to ``last`` are ``new_first`` on in the new store."""

    first: int
    last: int
    new_first: int


@dataclass
class SalvageReport:
    """What a salvage copied, what it could not, and where the new store is."""

    store: str
    dest: str
    generation: int = 0
    store_id: str = ""
    new_store_id: str = ""
    encrypted: bool = False
    #: transactions copied into the new store
    recovered: int = 0
    #: transactions known to be lost (the sum of the losses' counts)
    lost_transactions: int = 0
    #: a loss is open-ended: more transactions may be lost than counted
    lost_unknown: bool = False
    losses: list[Loss] = field(default_factory=list)
    renumbered: list[Run] = field(default_factory=list)
    #: live documents (facts included) in the new store, as its fsck counted them
    documents: int = 0
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    error_code: str | None = None
    exit_code: int = EXIT_CLEAN
    seconds: float = 0.0
    next_step: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for loss, raw in zip(self.losses, out["losses"], strict=True):
            raw["count"] = loss.count
        return out


def salvage(path: str, dest: str, *, key: bytes | None = None,
            key_file: str | None = None) -> SalvageReport:
    """Copy every intact transaction of the store at ``path`` into a new store at
    ``dest``; never raises for damage, and never modifies the store at ``path``.

    ``key_file`` is only named in the advice. On an error nothing is left at ``dest``.
    """
    t0 = time.monotonic()
    report = SalvageReport(store=os.path.abspath(path), dest=os.path.abspath(dest))
    advisor = Advisor(report.store, key_file=key_file, encrypted=key is not None)
    try:
        _Salvage(report, validate_key(key)).run()
    except _Refused as exc:
        report.error, report.error_code = f"{exc.code}: {exc}", exc.code
        report.next_step = exc.next_step
    except HolomemError as exc:
        report.error, report.error_code = f"{exc.code}: {exc}", exc.code
        report.next_step = advisor.for_error(exc.code, exc.message)
    except OSError as exc:
        report.error, report.error_code = f"io: {exc}", "io"
        report.next_step = advisor.for_error("io", str(exc))
    report.seconds = round(time.monotonic() - t0, 3)
    report.lost_transactions = sum(loss.count for loss in report.losses)
    report.lost_unknown = any(loss.open_ended for loss in report.losses)
    if report.error is not None:
        report.exit_code = EXIT_OPERATIONAL
    elif report.losses:
        report.exit_code = EXIT_CORRECTED
        report.next_step = (f"Open {report.dest} instead of {report.store} (point your "
                            f"program, server or Hermes at it); keep {report.store} until "
                            "you are sure nothing more can be recovered from it.")
    else:
        report.next_step = (f"Nothing was lost: {report.dest} holds every transaction of "
                            f"{report.store}.")
    return report


class _Refused(InvalidError):
    """A destination salvage will not write to (the advice says which one will do)."""

    def __init__(self, message: str, next_step: str) -> None:
        super().__init__(message)
        self.next_step = next_step


def _check_dest(store: str, dest: str) -> str:
    """Refuse a destination that exists and is not empty, or is inside the store (or
    holds it); return the temporary directory the new store is built in."""
    pick = ("Choose a DEST that does not exist yet (or is an empty directory), outside "
            "the store; salvage never writes over anything.")
    real_store, real_dest = os.path.realpath(store), os.path.realpath(dest)
    if os.path.commonpath([real_store, real_dest]) in (real_store, real_dest):
        raise _Refused(f"{dest!r} is the store, inside it, or holds it", pick)
    if os.path.lexists(dest):
        if not os.path.isdir(dest):
            raise _Refused(f"{dest!r} exists and is not a directory", pick)
        if fs.listdir(dest):
            raise _Refused(f"{dest!r} exists and is not empty", pick)
    tmp = dest.rstrip("/") + TMP_SUFFIX
    if os.path.lexists(tmp):
        raise _Refused(f"{tmp!r} exists: an interrupted salvage left it",
                       f"Remove {tmp} (it holds nothing the damaged store lacks), then "
                       "run the salvage again.")
    return tmp


class _Salvage:
    """One salvage: reads the damaged store, writes the new one, fills the report."""

    def __init__(self, report: SalvageReport, key: bytes | None) -> None:
        self.report = report
        self.key = key
        self.journal: Journal | None = None
        self.codec: FrameCodec | None = None
        #: the next original sequence number expected, and the last one copied
        self.expected: int | None = None
        self.last_kept = 0
        #: losses whose transactions are counted once the next intact frame (or segment
        #: header) says where the sequence resumes
        self.pending: list[Loss] = []

    # -- the whole run ----------------------------------------------------------------
    def run(self) -> None:
        r = self.report
        if not os.path.isdir(r.store):
            raise NotFoundError(f"no store directory at {r.store!r}")
        live, _ = list_generations(r.store)
        if not live:
            raise NotFoundError(f"{r.store!r} holds no holomem generation (not a store?)")
        tmp = _check_dest(r.store, r.dest)
        r.generation = live[-1]
        gen_dir = os.path.join(r.store, generation_name(live[-1]))
        lock = fs.lock(os.path.join(r.store, LOCK_NAME))  # no writer while it is read
        try:
            files = [(n, p, read_file(p)) for n, p in list_segments(gen_dir)]
            if not files:
                raise CorruptError("the live generation holds no segment: nothing to "
                                   "salvage", path=gen_dir, offset=0)
            ref = self._reference(files)
            check_key(ref, self.key, r.store)
            r.store_id, r.encrypted = ref.store_id.hex(), self.key is not None
            self.codec = FrameCodec(store_id=ref.store_id, compress=False,
                                    envelope=Envelope(self.key) if self.key else None)
            fs.make_dirs(os.path.dirname(r.dest.rstrip("/")) or ".")
            self.journal = Journal.open(tmp, key=self.key, sync="none")
            try:
                r.new_store_id = self.journal.store_id.hex()
                self._copy(gen_dir, live[-1], ref, files)
                self.journal.close()
                self._finish(tmp)
            except BaseException:
                self.journal.close()
                with contextlib.suppress(HolomemError):
                    fs.erase_tree(tmp)  # it may hold text: zeroed, never merely unlinked
                raise
        finally:
            fs.unlock(lock)
        if len(live) > 1:
            r.notes.append(f"older generations ({', '.join(map(generation_name, live[:-1]))}) "
                           "were left by an interrupted compaction and were not read")

    def _reference(self, files: list[tuple[int, str, bytes]]) -> SegmentHeader:
        """The header whose store id, flags and key check every segment must share: the
        first one that reads back intact, else the first one's bytes as they are."""
        for _, path, data in files:
            with contextlib.suppress(HeaderError):
                return unpack_header(data, path)
        for _, _, data in files:
            if len(data) >= SEGMENT_HEADER_SIZE:
                return _raw_header(data)
        raise CorruptError("no segment header can be read: nothing to salvage",
                           path=files[0][1], offset=0)

    def _finish(self, tmp: str) -> None:
        """Open the new store (building its derived files), check it, move it in place."""
        from holomem.api.engine import Store

        r = self.report
        Store.open(tmp, key=self.key).close()
        after = check(tmp, key=self.key)
        if after.exit_code != EXIT_CLEAN:
            raise CorruptError(
                "the salvaged store does not check clean (a holomem bug: please report it): "
                + "; ".join([*(f"{f.code}: {f.message}" for f in after.findings),
                             *([after.error] if after.error else [])]))
        r.documents = after.documents
        fs.rename(tmp, r.dest)
        fs.sync_dir(os.path.dirname(r.dest.rstrip("/")) or ".")

    # -- reading the damaged journal --------------------------------------------------
    def _copy(self, gen_dir: str, generation: int, ref: SegmentHeader,
              files: list[tuple[int, str, bytes]]) -> None:
        # A store's first generation starts at 1; a compacted one where its first
        # segment says (unknown if that segment is lost).
        self.expected = 1 if generation == 1 else None
        expected_number = 1
        for number, path, data in files:
            if number != expected_number:
                missing = os.path.join(gen_dir, segment_name(expected_number))
                names = (f"segment {expected_number}" if number == expected_number + 1
                         else f"segments {expected_number} to {number - 1}")
                self._lose_open(missing, 0, 0, f"{names} missing")
            expected_number = number + 1
            self._segment(path, data, generation, number, ref)
        self._end(gen_dir, ref, files[-1][1], len(files[-1][2]))

    def _segment(self, path: str, data: bytes, generation: int, number: int,
                 ref: SegmentHeader) -> None:
        try:
            header = unpack_header(data, path)
        except HeaderError as exc:
            if len(data) < SEGMENT_HEADER_SIZE:
                self._lose_open(path, 0, len(data), f"segment header: {exc.reason}")
                return
            self._lose(path, 0, SEGMENT_HEADER_SIZE, f"segment header: {exc.reason} (its "
                       "frames are read with the salt it holds and the store's identity)")
            damaged = self.report.losses[-1]
            raw = _raw_header(data)
            header = ref._replace(generation=generation, number=number, salt=raw.salt,
                                  first_seq=raw.first_seq)
            before = self.report.recovered
            self._frames(path, data, header, self._first_seq(data, header))
            if self.report.recovered == before and len(data) > SEGMENT_HEADER_SIZE:
                damaged.reason += ("; no frame of this segment checks out with that salt, "
                                   "so the damage may be in the salt itself")
            return
        foreign = _foreign(header, ref, generation, number)
        if foreign is not None:
            self._lose_open(path, 0, len(data), foreign)
            return
        self._resume(header.first_seq, path, 0)
        self._frames(path, data, header, header.first_seq)

    def _first_seq(self, data: bytes, header: SegmentHeader) -> int:
        """The sequence number of the first frame of a segment whose header is damaged:
        the frame's own if it is intact, else the one expected, else the header's."""
        if len(data) >= SEGMENT_HEADER_SIZE + FRAME_HEADER_SIZE:
            fh = parse_header(data, SEGMENT_HEADER_SIZE)
            if (header_problem(fh) is None
                    and SEGMENT_HEADER_SIZE + FRAME_HEADER_SIZE + fh.length <= len(data)
                    and frame_checksum(data, SEGMENT_HEADER_SIZE, fh.length, header.salt)
                    == fh.checksum):
                return fh.seq
        return self.expected if self.expected is not None else header.first_seq

    def _frames(self, path: str, data: bytes, header: SegmentHeader, seq: int) -> None:
        """Copy the intact frames of one segment from its first, past any damage."""
        off = SEGMENT_HEADER_SIZE
        while off < len(data):
            scan = scan_frames(data, header, off, seq)
            for i, at in enumerate(scan.offsets):
                self._frame(path, data, at, seq + i, header)
            seq += len(scan.offsets)
            if scan.problem is None:
                return
            bad = scan.end
            nxt = valid_frame_after(data, header, bad, seq)
            if nxt is None:
                self._lose_open(path, bad, len(data) - bad, scan.problem.reason, seq)
                return
            found = parse_header(data, nxt).seq
            self._lose(path, bad, nxt - bad, scan.problem.reason, seq, found - 1)
            off, seq = nxt, found

    def _frame(self, path: str, data: bytes, off: int, seq: int,
               header: SegmentHeader) -> None:
        assert self.codec is not None and self.journal is not None
        fh = parse_header(data, off)
        size = FRAME_HEADER_SIZE + fh.length
        view = memoryview(data)
        binding = _binding(header)
        try:
            payloads = self.codec.decode_body(fh, view[off : off + FRAME_CHECKSUMMED],
                                              view[off + FRAME_HEADER_SIZE : off + size],
                                              binding)
            for payload in payloads:
                decode_event(payload, seq=seq)
        except BadBody as exc:
            self._lose(path, off, size, f"transaction {seq}: {exc}", seq, seq)
            return
        except CorruptError as exc:
            self._lose(path, off, size, exc.message, seq, seq)
            return
        if seq <= self.last_kept:
            self._lose(path, off, size, f"transaction {seq} again (a duplicate of one "
                       "already copied)")
            return
        if not payloads:
            self._lose(path, off, size, f"transaction {seq} holds no event: nothing to copy",
                       seq, seq)
            return
        self._resume(seq, path, off)
        new = self.journal.append(payloads)
        runs = self.report.renumbered
        if runs and runs[-1].last == seq - 1:
            runs[-1].last = seq
        else:
            runs.append(Run(seq, seq, new))
        self.report.recovered += 1
        self.last_kept, self.expected = seq, seq + 1

    # -- accounting for what is lost --------------------------------------------------
    def _lose(self, path: str, offset: int, length: int, reason: str, first: int = 0,
              last: int = -1) -> None:
        """A loss whose transactions are known (``first`` to ``last``; none by default)."""
        if first <= last:
            self._resume(first, path, offset)
            self.expected = last + 1
        self.report.losses.append(Loss(path, offset, length, reason, first, last))

    def _lose_open(self, path: str, offset: int, length: int, reason: str,
                   first: int | None = None) -> None:
        """A loss that runs until the sequence resumes: what it held is counted when the
        next intact frame (or segment header) says where the sequence resumes. Its first
        number is ``first``, else the one expected; 0 while nothing says (sequence
        numbers start at 1)."""
        start = first if first is not None else self.expected
        loss = Loss(path, offset, length, reason, start or 0, (start or 0) - 1, True)
        self.report.losses.append(loss)
        self.pending.append(loss)

    def _resume(self, seq: int, path: str, offset: int) -> None:
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
            self.report.losses.append(Loss(
                path, offset, 0, f"transactions {self.expected} to {seq - 1} are in no file "
                "(the sequence jumps here)", self.expected, seq - 1))
        self.expected = max(seq, self.expected or 0)

    def _end(self, gen_dir: str, ref: SegmentHeader, last_path: str, last_size: int) -> None:
        """After the last segment: what the watermark says was durable past what was read."""
        mark: Watermark | None = None
        try:
            mark = read_watermark(gen_dir)
        except HolomemError as exc:
            self.report.notes.append(f"the watermark is unreadable ({exc.message}): how "
                                     "many transactions were acknowledged is unknown")
        if mark is not None and (mark.store_id != ref.store_id
                                 or mark.generation != self.report.generation):
            self.report.notes.append("the watermark belongs to another store or generation: "
                                     "it was not used")
            mark = None
        last_read = (self.expected or 1) - 1
        pending, self.pending = self.pending, []
        if pending:
            head = pending[0]
            if head.first_seq == 0:
                head.first_seq = last_read + 1
                head.last_seq = last_read
            if mark is None:
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
        elif mark is not None and mark.seq > last_read:
            last_number = int(os.path.basename(last_path)[len(SEGMENT_PREFIX):][:8])
            if mark.segment > last_number:
                first, last = last_number + 1, mark.segment
                path, offset = os.path.join(gen_dir, segment_name(first)), 0
                what = f"segment {first}" if first == last else f"segments {first} to {last}"
                where = f"{what} missing: "
            else:
                path, offset, where = last_path, last_size, ""
            self.report.losses.append(Loss(
                path, offset, 0, f"{where}transactions {last_read + 1} to {mark.seq} were "
                "acknowledged (the watermark says so) but are in no file",
                last_read + 1, mark.seq))


def _raw_header(data: bytes) -> SegmentHeader:
    """A segment header's fields as its bytes hold them, unverified."""
    (_magic, wver, rver, flags, _res, store_id, gen, number, first_seq, salt, kcv, _res2,
     _sum) = SEGMENT_HEADER.unpack_from(data, 0)
    return SegmentHeader(wver, rver, flags, store_id, gen, number, max(1, first_seq), salt, kcv)


def _foreign(h: SegmentHeader, ref: SegmentHeader, generation: int, number: int) -> str | None:
    if (h.store_id, h.flags, h.key_check) != (ref.store_id, ref.flags, ref.key_check):
        return "segment belongs to another store, or its encryption settings differ"
    if h.generation != generation:
        return f"segment header says generation {h.generation}, its directory {generation}"
    if h.number != number:
        return f"segment header says segment {h.number}, its file name {number}"
    return None


def _binding(header: SegmentHeader) -> Binding:
    return Binding(header.store_id, header.generation, header.number, header.salt)
