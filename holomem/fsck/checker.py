"""The store checker: :func:`check` finds every problem of a store, and repairs some.

Owns: the check (docs/guarantees.md §7) -- the journal frame by frame, its events, the
watermark, the text segment against the journal, leftovers and pending purges -- and the
repair. Imports the log, the events and the projections that lay out derived files;
``repair`` rebuilds derived files by opening the store (``holomem.api.engine.Store``),
the same code that builds them on every open, rather than a second copy of it. The
advice attached to each finding is :mod:`holomem.fsck.advice`'s; the findings and the
report are :mod:`holomem.fsck.findings`'s. The table of finding kinds is in
:mod:`holomem.fsck`.

Nothing is ever dropped silently: a repair that cuts bytes saves them first and
says where. Run it on a closed store; ``repair`` takes the writer's lock.
"""

from __future__ import annotations

import os
import sys
import time

from holomem.errors import (
    CorruptError,
    HolomemError,
    KeyRequiredError,
    NotFoundError,
    UnexpectedKeyError,
    WrongKeyError,
)
from holomem.events import PurgeRequested
from holomem.events import decode as decode_event
from holomem.fsck.advice import Advisor
from holomem.fsck.checkpoints import CheckpointCheck
from holomem.fsck.findings import (
    EXIT_CLEAN,
    EXIT_CORRECTED,
    EXIT_OPERATIONAL,
    EXIT_UNCORRECTED,
    Finding,
    Report,
)
from holomem.log import fs
from holomem.log.backup import backup_dir as default_backup_dir
from holomem.log.backup import cut_tail
from holomem.log.envelope import Envelope, key_check, validate_key
from holomem.log.format import (
    FRAME_CHECKSUMMED,
    FRAME_HEADER_SIZE,
    GEN_RE,
    GEN_TMP_RE,
    LOCK_NAME,
    SEGMENT_FLAG_ENCRYPTED,
    TEXT_FILE,
    WATERMARK_FILE,
    generation_name,
)
from holomem.log.frame import BadBody, FrameCodec, parse_header
from holomem.log.reader import Problem as LogProblem
from holomem.log.reader import scan_generation
from holomem.log.recordfile import RecordFile
from holomem.log.segment import list_segments, read_file
from holomem.log.writer import Segment
from holomem.projections.catalog import Catalog
from holomem.projections.text import TextSegment

__all__ = ["EXIT_CLEAN", "EXIT_CORRECTED", "EXIT_OPERATIONAL", "EXIT_UNCORRECTED",
           "Finding", "Report", "check"]


class _Progress:
    """A progress line on stderr, only when it is a terminal and the store is large."""

    def __init__(self, total: int) -> None:
        self.on = sys.stderr.isatty() and total > 20_000_000
        self.total = total
        self.done = 0
        self._last = 0.0

    def add(self, n: int, what: str) -> None:
        self.done += n
        now = time.monotonic()
        if self.on and now - self._last > 0.1:
            self._last = now
            pct = 100 * self.done / max(1, self.total)
            bar = "#" * int(pct / 5)
            print(f"\rfsck {what:<10} [{bar:<20}] {pct:5.1f}%", end="", file=sys.stderr)

    def close(self) -> None:
        if self.on:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)


def _generations(path: str) -> tuple[list[int], list[str]]:
    live: list[int] = []
    tmp: list[str] = []
    for name in sorted(fs.listdir(path)):
        m = GEN_RE.match(name)
        if m and os.path.isdir(os.path.join(path, name)):
            live.append(int(m.group(1)))
        elif GEN_TMP_RE.match(name):
            tmp.append(name)
    return sorted(live), tmp


def check(path: str, *, key: bytes | None = None, repair: bool = False,
          backup_dir: str | None = None, key_file: str | None = None) -> Report:
    """Check (and with ``repair``, repair) the store at ``path``; never raises for damage.

    Every finding left unrepaired carries its ``next_step``, and the report one for the
    whole store (or for the error that stopped the check); ``key_file`` is only named in
    the commands they suggest.
    """
    t0 = time.monotonic()
    report = Report(store=os.path.abspath(path))
    try:
        _check(report, key, repair, backup_dir)
    except HolomemError as exc:
        report.error, report.error_code = f"{exc.code}: {exc}", exc.code
    except OSError as exc:
        report.error, report.error_code = f"io: {exc}", "io"
    report.seconds = round(time.monotonic() - t0, 3)
    if report.error is not None:
        report.exit_code = EXIT_OPERATIONAL
    elif any(not f.repaired for f in report.findings):
        report.exit_code = EXIT_UNCORRECTED
    elif report.findings:
        report.exit_code = EXIT_CORRECTED
    advise(report, key_file=key_file, encrypted=key is not None, tried=repair)
    return report


def advise(report: Report, *, key_file: str | None, encrypted: bool, tried: bool) -> None:
    """Attach the next step to every finding of ``report`` and to the report."""
    advisor = Advisor(report.store, key_file=key_file, encrypted=encrypted)
    blocked = any(not f.repairable for f in report.findings)
    for f in report.findings:
        f.next_step = advisor.for_finding(f, blocked=blocked, tried=tried)
    report.next_step = advisor.for_report(report, tried=tried)


def _check(report: Report, key: bytes | None, repair: bool, backup_dir: str | None) -> None:
    path = report.store
    if not os.path.isdir(path):
        raise NotFoundError(f"no store directory at {path!r}")
    key = validate_key(key)
    lock_fd = fs.lock(os.path.join(path, LOCK_NAME)) if repair else None
    try:
        _scan(report, path, key)
        fixable = repair and report.findings and all(f.repairable for f in report.findings)
        if fixable:
            for f in report.findings:
                if f.code == "leftover":
                    fs.erase_tree(f.path)
                elif f.code == "journal.torn" or _is_watermark(f.path):
                    f.backup = cut_tail(f.path, f.offset if f.code == "journal.torn" else 0,
                                        os.path.abspath(backup_dir or default_backup_dir(path)))
            for f in report.findings:
                if f.code.startswith("text."):
                    fs.erase(f.path)  # it may hold stale text: zeroed, synced, unlinked
                    fs.sync_dir(os.path.dirname(f.path))
                    break
            for f in report.findings:
                if f.code.startswith("checkpoint."):
                    fs.erase(f.path)  # it may hold removed text: zeroed, synced, unlinked
                    fs.sync_dir(os.path.dirname(f.path))
    finally:
        if lock_fd is not None:
            fs.unlock(lock_fd)
    if not fixable:
        return
    # Derived files are rebuilt, and a pending purge finished, by the code that does
    # it on every open: open the store as its writer.
    from holomem.api.engine import Store

    with Store.open(path, key=key) as store:
        if any(f.code.startswith("checkpoint.") for f in report.findings):
            store.checkpoint()  # a fresh one, from the journal
    after = Report(store=path)
    _scan(after, path, key)
    left = {(f.code, f.path) for f in after.findings}
    for f in report.findings:
        f.repaired = (f.code, f.path) not in left
    report.findings.extend(f for f in after.findings
                           if (f.code, f.path) not in {(g.code, g.path) for g in report.findings})


def _scan(report: Report, path: str, key: bytes | None) -> None:
    live, tmp = _generations(path)
    if not live:
        raise NotFoundError(f"{path!r} holds no holomem generation (not a store?)")
    for name in tmp + [generation_name(g) for g in live[:-1]]:
        report.findings.append(Finding(
            "leftover", os.path.join(path, name), 0, 0,
            "left by an interrupted compaction; it may hold removed text", True))
    report.generation = live[-1]
    gen_dir = os.path.join(path, generation_name(live[-1]))
    problems: list[LogProblem] = []
    segments = scan_generation(gen_dir, live[-1], problems.append)
    report.segments = len(segments)
    # A damaged watermark alone loses nothing; beside any other problem of the journal,
    # it leaves unknown whether a torn-looking tail was acknowledged.
    alone = all(_is_watermark(p.path) for p in problems)
    for p in problems:
        # A torn tail is everything from its offset to the end of its file (what
        # --repair cuts and --salvage leaves out), not the size a frame header there
        # claims.
        length = max(fs.path_size(p.path) - p.offset, 0) if p.tail else p.length
        report.findings.append(Finding(
            "journal.torn" if p.tail else p.code, p.path, p.offset, length,
            _explain_log(p, alone), p.tail or (alone and _is_watermark(p.path)),
            durable=p.durable))
    if segments:
        _check_key(segments[0], key)
        journal_ok = not any(not p.tail for p in problems)
        # Damage that stops the scan of the last segment file (valid frames after it,
        # a header that does not read) may hide transactions past the last one scanned:
        # where the journal ends is then unknown.
        last_file = list_segments(gen_dir)[-1][1]
        end_known = not any(p.path == last_file and not (p.tail or p.durable)
                            for p in problems)
        _check_frames_and_text(report, gen_dir, segments, key, journal_ok, end_known)
    elif not problems:  # (open refuses such a store: it is not clean)
        report.findings.append(Finding(
            "corrupt.empty", gen_dir, 0, 0,
            "the live generation holds no segment: the journal, and every transaction it "
            "held, is gone, and the store cannot be opened", False))


def _is_watermark(path: str) -> bool:
    return os.path.basename(path) == WATERMARK_FILE


def _explain_log(p: LogProblem, alone: bool) -> str:
    if p.tail:
        return (f"torn tail: {p.reason}. The last write never completed (a crash or power "
                "loss); it was never acknowledged")
    if _is_watermark(p.path):
        if alone:
            return (f"{p.reason}. The journal itself is intact: --repair removes the "
                    "watermark (keeping a copy) and the next open writes a new one")
        return (f"{p.reason}. With the watermark unreadable it is unknown whether the "
                "damage reported beside it hides acknowledged transactions: restore the "
                "store from a backup, or, to accept losing them, delete this file and run "
                "--repair again")
    if p.durable:
        return (f"{p.reason}. These transactions were acknowledged: the store refuses to "
                "open rather than lose them silently. Restore the store from a backup; "
                "or, to give up everything from this offset on, delete the watermark "
                f"({os.path.join(os.path.dirname(p.path), WATERMARK_FILE)}) and run "
                "--repair, which cuts it off and saves the cut bytes")
    return p.reason


def _check_key(first: Segment, key: bytes | None) -> None:
    encrypted = bool(first.header.flags & SEGMENT_FLAG_ENCRYPTED)
    if encrypted and key is None:
        raise KeyRequiredError("the store is encrypted: pass --key-file")
    if not encrypted and key is not None:
        raise UnexpectedKeyError("the store is not encrypted, but a key was given")
    if key is not None and key_check(key, first.header.store_id) != first.header.key_check:
        raise WrongKeyError("the key does not open this store")


def _check_frames_and_text(report: Report, gen_dir: str, segments: list[Segment],
                           key: bytes | None, journal_ok: bool, end_known: bool) -> None:
    store_id = segments[0].header.store_id
    envelope = Envelope(key) if key is not None else None
    codec = FrameCodec(store_id=store_id, envelope=envelope, compress=False)
    text_path = os.path.join(gen_dir, TEXT_FILE)
    text_file = RecordFile(text_path, store_id=store_id, generation=report.generation,
                           envelope=envelope, read_only=True)
    catalog = Catalog()
    text = TextSegment(text_file, writes=False)  # placements only: fsck never writes
    checkpoints = CheckpointCheck(gen_dir, generation=report.generation, store_id=store_id,
                                  envelope=envelope, records=text_file, segments=segments,
                                  end_known=end_known)
    last_seq = segments[0].first_seq - 1
    purge_pending = False
    progress = _Progress(sum(s.end for s in segments))
    for seg in segments:
        data = read_file(seg.path)
        binding = seg.binding()
        view = memoryview(data)
        for i, off in enumerate(seg.offsets):
            seq = seg.first_seq + i
            fh = parse_header(data, off)
            body = view[off + FRAME_HEADER_SIZE : off + FRAME_HEADER_SIZE + fh.length]
            try:
                payloads = codec.decode_body(fh, view[off : off + FRAME_CHECKSUMMED], body,
                                             binding)
                events = [decode_event(p, seq=seq) for p in payloads]
            except BadBody as exc:
                code = "corrupt.auth" if exc.auth else "corrupt.frame"
                report.findings.append(Finding(code, seg.path, off, FRAME_HEADER_SIZE + fh.length,
                                               f"transaction {seq}: {exc}", False))
                journal_ok = False
                continue
            except CorruptError as exc:
                report.findings.append(Finding("event.undecodable", seg.path, off,
                                               FRAME_HEADER_SIZE + fh.length, exc.message, False))
                journal_ok = False
                continue
            report.transactions += 1
            last_seq = seq
            for event in events:
                change = catalog.apply(seq, event)
                text.apply(seq, event, change)
                purge_pending = purge_pending or isinstance(event, PurgeRequested)
            checkpoints.apply(seq, events)
        progress.add(seg.end, "journal")
    progress.close()
    report.documents = catalog.live
    if purge_pending:
        report.findings.append(Finding(
            "purge.pending", gen_dir, 0, 0,
            "a purge was requested but its compaction did not finish: removed text may "
            "still be in the journal", True))
    checkpoints.finish(report, last_seq=last_seq, journal_ok=journal_ok)
    if not journal_ok:
        text_file.close()
        return  # the placement of derived records cannot be trusted past damage
    if not text_file.available:
        why = "missing" if not os.path.exists(text_path) else "unreadable, damaged or foreign"
        report.findings.append(Finding("text.header", text_path, 0, 0,
                                       f"the text segment is {why}", True))
        return
    raw = text_file.read_all()
    text_file.close()
    for kind, _slot, off, size in text.audit(raw, catalog.alive.view(), catalog.seq.view(),
                                             catalog.ids):
        if kind == "record":
            report.findings.append(Finding(
                "text.record", text_path, off, size,
                "a live document's record does not read back intact", True))
        else:
            report.findings.append(Finding(
                "text.stale", text_path, off, size,
                "bytes that should be zero are not: text of a removed document or of a "
                "write that never completed", True))
    if len(raw) > text.end:
        report.findings.append(Finding(
            "text.stale", text_path, text.end, len(raw) - text.end,
            "bytes past the last record (an unacknowledged write?)", True))
