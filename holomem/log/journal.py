"""The journal: a store directory of segmented, checksummed, durable transactions.

Owns: opening a store directory (lock, live generation, recovery), replay, reads
by sequence number, follower refresh, and the writer's public calls. Imports the
standard library and the other ``holomem.log`` modules; it stores opaque payloads
and knows nothing of what they mean. FORMAT.md documents every file.

A follower (read-only) keeps every segment of its generation open, so that a
compaction that unlinks them does not take them away mid-read; when it moves to a
new generation (:meth:`Journal.refresh`), the old one's segments stay readable by
sequence number until :meth:`Journal.release_retired`. A read that fails because the
generation was replaced under it (a purge zeroes the old files before unlinking
them) is ``unavailable``, never ``corrupt``: the store is healthy, and the next
refresh moves to the new generation.

    with Journal.open(path) as j:
        seq = j.append([b"one payload", b"another, same transaction"])
        for seq, payloads in j.replay():
            ...
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from holomem.errors import (
    AuthenticationError,
    ClosedError,
    CorruptError,
    FormatVersionError,
    HolomemError,
    InvalidError,
    KeyRequiredError,
    NotFoundError,
    ReadOnlyError,
    StorageIOError,
    UnavailableError,
    UnexpectedKeyError,
    WrongKeyError,
)
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.backup import backup_dir, cut_tail
from holomem.log.envelope import Envelope, key_check, validate_key
from holomem.log.format import (
    DEFAULT_SEGMENT_SIZE,
    FRAME_CHECKSUMMED,
    FRAME_HEADER_SIZE,
    LOCK_NAME,
    MIN_SEGMENT_SIZE,
    SEGMENT_FLAG_ENCRYPTED,
    SEGMENT_HEADER_SIZE,
    WRITE_VERSION,
    generation_name,
)
from holomem.log.frame import BadBody, Binding, FrameCodec, frame_checksum, parse_header
from holomem.log.generation import (
    GENERATION_RACES,
    begin_generation,
    commit_generation,
    list_generations,
)
from holomem.log.reader import Problem, scan_generation
from holomem.log.segment import (
    SegmentHeader,
    list_segments,
    scan_frames,
    unpack_header,
)
from holomem.log.watermark import Watermark, read_watermark, write_watermark
from holomem.log.writer import SYNC_MODES, Appender, Segment

log = logging.getLogger("holomem.log")

P_TAIL_TRUNCATED = cp.point("journal.recovery.truncated", "a torn tail was truncated and synced")


class Recovery(NamedTuple):
    """What opening the journal had to repair (nothing, for a clean store).

    ``backups`` holds, for each truncated tail, the file its cut bytes were saved to
    (FORMAT.md §7), or None when nothing was cut.
    """

    truncated: tuple[Problem, ...]
    erased_leftovers: tuple[str, ...]
    backups: tuple[str | None, ...] = ()


class Refreshed(NamedTuple):
    """What a follower's refresh found: ``reset`` means the generation changed."""

    reset: bool
    from_seq: int


class JournalStats(NamedTuple):
    generation: int
    segments: int
    first_seq: int
    last_seq: int
    bytes: int
    encrypted: bool
    sync: str


class Rewrite:
    """A new generation being written by compaction; see :meth:`Journal.begin_rewrite`."""

    def __init__(self, journal: Journal, tmp: str, generation: int, appender: Appender) -> None:
        self.journal = journal
        self.dir = tmp
        self.generation = generation
        self._appender = appender

    @property
    def last_seq(self) -> int:
        return self._appender.last_seq

    def append(self, payloads: Sequence[bytes]) -> int:
        """Append a transaction to the new generation (synced when it is switched in)."""
        return self._appender.append(list(payloads))

    def derived_path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def abandon(self) -> None:
        """Give up: erase what was written (it may hold text)."""
        self._appender.close()
        fs.erase_tree(self.dir)


class Journal:
    """A store's journal. Use :meth:`open`; a context manager."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        key: bytes | None = None,
        sync: str = "full",
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        read_only: bool = False,
        create: bool = True,
        compress: bool = True,
    ) -> None:
        """Open (or create) the journal of the store directory ``path``.

        Args:
            key: 32 raw bytes for an encrypted store, or None.
            sync: ``"full"`` (every append fsyncs), ``"batch"`` (group commit) or
                ``"none"`` (no fsync until :meth:`sync` or close; not durable).
            segment_size: bytes after which the writer starts a new segment.
            read_only: open as a follower: no lock, never writes.
            create: create the store if the directory holds none.
            compress: zstd-compress frames when it pays.

        Errors: ``invalid``, ``not_found``, ``locked``, ``key.*``, ``corrupt.*``,
        ``format.version``, ``io``.
        """
        self._key = validate_key(key)
        if sync not in SYNC_MODES:
            raise InvalidError(f"sync must be one of {', '.join(SYNC_MODES)}, got {sync!r}")
        if isinstance(segment_size, bool) or not isinstance(segment_size, int) or (
                segment_size < MIN_SEGMENT_SIZE):
            raise InvalidError(f"segment_size must be an integer >= {MIN_SEGMENT_SIZE}")
        self.path = os.path.abspath(os.fspath(path))
        self.read_only = read_only
        self.sync_mode = sync
        self.segment_size = segment_size
        self._compress = compress
        self._create = create
        self._lock_fd: int | None = None
        self._appender: Appender | None = None
        #: open segment files by path: a follower's pinned ones (every segment of its
        #: generation, and of the generations it retired), the writer's opened on demand
        self._read_fds: dict[str, int] = {}
        #: follower: segments of generations it moved away from, still readable
        self._retired: list[Segment] = []
        #: writer: the watermark as last read or written (FORMAT.md §7.1)
        self._watermark: Watermark | None = None
        self._closed = False
        self.recovery = Recovery((), ())
        self.generation = 0
        self.gen_dir = ""
        self.store_id = b""
        self.encrypted = False
        self.segments: list[Segment] = []
        self._envelope: Envelope | None = None
        self._codec: FrameCodec
        try:
            self._open()
        except BaseException:
            self._release()
            raise

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        key: bytes | None = None,
        sync: str = "full",
        segment_size: int = DEFAULT_SEGMENT_SIZE,
        read_only: bool = False,
        create: bool = True,
        compress: bool = True,
    ) -> Journal:
        """Open (or create) a journal; the same as the constructor."""
        return cls(path, key=key, sync=sync, segment_size=segment_size, read_only=read_only,
                   create=create, compress=compress)

    def _open(self) -> None:
        if not os.path.isdir(self.path):
            if os.path.lexists(self.path):
                raise InvalidError(f"{self.path!r} is not a directory")
            if self.read_only or not self._create:
                raise NotFoundError(f"no holomem store at {self.path!r}")
            # Every directory created here is durable (its parent synced, up to one
            # that existed) before anything is acknowledged in it.
            fs.make_dirs(self.path)
        if not self.read_only:
            lock_path = os.path.join(self.path, LOCK_NAME)
            if not os.path.exists(lock_path) and not any(list_generations(self.path)):
                # Not a store (its LOCK exists before its first generation does):
                # refuse before creating the lock file, so that a refused open
                # leaves the directory exactly as it found it.
                if not self._create:
                    raise NotFoundError(f"no holomem store at {self.path!r}")
                self._refuse_non_empty()
            self._lock_fd = fs.lock(lock_path)
        live, tmp = list_generations(self.path)
        erased: list[str] = []
        if not self.read_only:
            # Leftovers of an interrupted compaction or purge: a generation that was
            # being built, or an old one whose erasure did not finish.
            for g in tmp:
                name = generation_name(g) + ".tmp"
                fs.erase_tree(os.path.join(self.path, name))
                erased.append(name)
            for g in live[:-1]:
                fs.erase_tree(os.path.join(self.path, generation_name(g)))
                erased.append(generation_name(g))
            if erased:
                log.warning("erased leftovers of an interrupted compaction: %s", ", ".join(erased))
        if not live:
            if self.read_only or not self._create:
                raise NotFoundError(f"no holomem store at {self.path!r}")
            self._initialize()
            live = [1]
        self._set_generation(live[-1])
        backups: list[str | None] = []
        if self.read_only:
            truncated = self._load_newest()
        else:
            truncated, backups = self._load()
            self._settle()
            self._mark_durable()
        self.recovery = Recovery(tuple(truncated), tuple(erased), tuple(backups))

    def _set_generation(self, generation: int) -> None:
        self.generation = generation
        self.gen_dir = os.path.join(self.path, generation_name(generation))

    def _settle(self) -> None:
        """Make durable what a crashed writer may have left unsynced, before anything is
        acknowledged on top of it: the bytes at the end of the last segment, and the
        names of the segments, of the live generation and of the store directory.

        Without this, a writer that crashed after creating a segment (or renaming a
        generation into place, or creating the store directory) but before syncing
        the directory leaves a name that only the page cache holds; the next writer
        appends to it, fsyncs the file and acknowledges, and a power cut then takes
        the name away with every acknowledged write in it.
        """
        assert self._appender is not None
        self._appender.sync()
        fs.sync_dir(self.gen_dir)
        fs.sync_dir(self.path)
        fs.sync_dir(os.path.dirname(self.path))

    def _refuse_non_empty(self) -> None:
        entries = [e for e in fs.listdir(self.path) if e != LOCK_NAME]
        if entries:
            raise InvalidError(
                f"{self.path!r} is not empty and holds no holomem store; refusing to create "
                "one there"
            )

    def _initialize(self) -> None:
        self._refuse_non_empty()
        store_id = os.urandom(16)
        tmp = begin_generation(self.path, 1, store_id, 1, self._key)
        commit_generation(self.path, tmp)

    def _load(self) -> tuple[list[Problem], list[str | None]]:
        """Scan the live generation and take it as the journal's state; return the torn
        tails found and, for the writer, where each one's cut bytes were saved."""
        problems: list[Problem] = []
        segments = scan_generation(self.gen_dir, self.generation, problems.append)
        for p in problems:
            if not p.tail:
                raise p.error()
        if not segments:
            raise CorruptError("the live generation holds no valid segment", path=self.gen_dir,
                               offset=0)
        head = segments[0].header
        if head.write_version > WRITE_VERSION and not self.read_only:
            raise FormatVersionError(
                f"{self.gen_dir}: written with format version {head.write_version}; this build "
                f"writes version {WRITE_VERSION} and may only open it read-only"
            )
        self._check_key(head)
        pinned = self._pin(segments) if self.read_only else {}
        self.store_id = head.store_id
        self.encrypted = bool(head.flags & SEGMENT_FLAG_ENCRYPTED)
        envelope = Envelope(self._key) if self._key is not None else None
        self._codec = FrameCodec(store_id=self.store_id, envelope=envelope,
                                 compress=self._compress)
        self._envelope = envelope
        self.segments = segments
        self._read_fds.update(pinned)
        backups: list[str | None] = []
        if not self.read_only:
            self._watermark = read_watermark(self.gen_dir)
            if problems:
                backups = self._repair_tail(problems)
            self._appender = Appender(gen_dir=self.gen_dir, segments=self.segments,
                                      codec=self._codec, sync=self.sync_mode,
                                      segment_size=self.segment_size)
        return problems, backups

    def _pin(self, segments: list[Segment]) -> dict[str, int]:
        """Follower: open every segment, so that an unlink cannot take one away mid-read."""
        pinned: dict[str, int] = {}
        try:
            for seg in segments:
                pinned[seg.path] = fs.open_ro(seg.path)
        except BaseException:
            for fd in pinned.values():
                fs.close(fd)
            raise
        return pinned

    def _load_newest(self) -> list[Problem]:
        """Follower: load the live generation; if a compaction replaces it while it is
        being read (its files unlinked, or zeroed by a purge), load the new one instead.
        Damage is reported only when the generation it was found in is still live."""
        for _ in range(GENERATION_RACES):
            try:
                problems, _ = self._load()
                return problems
            except (CorruptError, StorageIOError):
                newest = self._newest_generation()
                if newest == self.generation and os.path.isdir(self.gen_dir):
                    raise
                self._set_generation(newest)
        raise UnavailableError(
            f"the store at {self.path!r} changed generation {GENERATION_RACES} times while a "
            "follower was reading it (compactions); try again")

    def _newest_generation(self) -> int:
        live, _ = list_generations(self.path)
        if not live:
            raise NotFoundError(f"the store at {self.path!r} disappeared")
        return live[-1]

    def _check_key(self, head: SegmentHeader) -> None:
        encrypted = bool(head.flags & SEGMENT_FLAG_ENCRYPTED)
        if encrypted and self._key is None:
            raise KeyRequiredError(f"the store at {self.path!r} is encrypted; pass its key")
        if not encrypted and self._key is not None:
            raise UnexpectedKeyError(
                f"the store at {self.path!r} is not encrypted, but a key was given"
            )
        if self._key is not None and key_check(self._key, head.store_id) != head.key_check:
            raise WrongKeyError(f"the key does not open the store at {self.path!r}")

    def _repair_tail(self, problems: list[Problem]) -> list[str | None]:
        """Cut a torn tail (the writer's open only), keeping the cut bytes in a backup
        file beside the store; return the backups' paths."""
        saved: list[str | None] = []
        target = backup_dir(self.path)
        for p in problems:
            assert p.tail  # anything else refused the open
            last = self.segments[-1] if self.segments else None
            # A torn frame is cut off; a rotated-in segment whose header never reached
            # the disk is removed whole.
            at = p.offset if last is not None and last.path == p.path else 0
            backup = cut_tail(p.path, at, target)
            saved.append(backup)
            log.warning(
                "truncated a torn tail (a write that never completed, never acknowledged): "
                "%s at offset %d: %s; %s", p.path, at, p.reason,
                f"the cut bytes are saved in {backup}" if backup else "no bytes were cut")
            cp.hit(P_TAIL_TRUNCATED)
        return saved

    def _mark_durable(self) -> None:
        """Writer: record in the watermark that every transaction in the journal is on
        disk (FORMAT.md §7.1). Call only when that is true: after the open's settling,
        and at close once the last sync returned."""
        seg = self.segments[-1]
        mark = Watermark(self.store_id, self.generation, seg.number, seg.last_seq, seg.end)
        if mark != self._watermark:
            write_watermark(self.gen_dir, mark)
            self._watermark = mark

    def _close_fds(self, paths: Iterable[str] | None = None) -> None:
        for path in list(self._read_fds) if paths is None else list(paths):
            fd = self._read_fds.pop(path, None)
            if fd is not None:
                fs.close(fd)

    def _release(self) -> None:
        self._close_fds()
        self._retired.clear()
        if self._lock_fd is not None:
            fs.unlock(self._lock_fd)
            self._lock_fd = None

    # -- properties -------------------------------------------------------------------
    @property
    def first_seq(self) -> int:
        return self.segments[0].first_seq

    @property
    def last_seq(self) -> int:
        """The last appended transaction (0 if none).

        On the writer, the last *acknowledged* one: a frame another thread is still
        writing or syncing is not readable yet (nor counted) until its append returns.
        """
        if self._appender is not None:
            return self._appender.durable_seq
        return self.segments[-1].last_seq

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def failed(self) -> HolomemError | None:
        return self._appender.failed if self._appender is not None else None

    @property
    def key(self) -> bytes | None:
        return self._key

    @property
    def envelope(self) -> Envelope | None:
        return self._envelope

    def stats(self) -> JournalStats:
        return JournalStats(
            self.generation, len(self.segments), self.first_seq, self.last_seq,
            sum(s.end for s in self.segments), self.encrypted, self.sync_mode,
        )

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError("the journal is closed")

    # -- writing ----------------------------------------------------------------------
    def append(self, payloads: Sequence[bytes]) -> int:
        """Append one transaction of ``payloads``; return its sequence number.

        In ``full`` and ``batch`` mode the call returns only after an fsync covering
        the transaction returned. The transaction is atomic: after any crash it is
        wholly present or wholly absent. (``enqueue`` then ``wait``.)

        Errors: ``invalid``, ``closed``, ``read_only``, ``io.fsync``, ``io.failed``, ``io``.
        """
        seq = self.enqueue(payloads)
        self.wait(seq)
        return seq

    def enqueue(self, payloads: Sequence[bytes]) -> int:
        """Give a transaction its sequence number, in order, without waiting for batch mode's
        group sync (``full`` mode still syncs here). Call :meth:`wait` before telling
        anyone it is durable. Errors: as :meth:`append`.
        """
        self._check_open()
        if self._appender is None:
            raise ReadOnlyError("the journal was opened read-only")
        if isinstance(payloads, (bytes, bytearray, memoryview, str)):
            raise InvalidError("append takes a sequence of payloads (bytes), not one payload")
        try:
            it = iter(payloads)
        except TypeError:
            raise InvalidError(
                f"append takes a sequence of payloads (bytes), got {type(payloads).__name__}"
            ) from None
        items: list[bytes] = []
        for p in it:
            if not isinstance(p, (bytes, bytearray, memoryview)):
                raise InvalidError(f"payloads must be bytes, got {type(p).__name__}")
            items.append(bytes(p))
        if not items:
            raise InvalidError("a transaction needs at least one payload")
        try:
            return self._appender.enqueue(items)
        except ValueError as exc:  # the frame codec's size limits
            raise InvalidError(str(exc)) from exc

    def wait(self, seq: int) -> None:
        """Return once transaction ``seq`` is durable; in batch mode, share a group sync.

        Errors: ``io.fsync``, ``io.failed`` (then nothing at or after the failed group is
        durable, and the journal must be reopened).
        """
        if self._appender is not None:
            self._appender.wait(seq)

    @property
    def durable_seq(self) -> int:
        """The last transaction known durable (in ``none`` mode: written)."""
        return self._appender.durable_seq if self._appender is not None else self.last_seq

    def sync(self) -> None:
        """fsync everything appended so far (whatever the sync mode)."""
        self._check_open()
        if self._appender is not None:
            self._appender.sync()

    # -- generations (compaction) -----------------------------------------------------
    def begin_rewrite(self) -> Rewrite:
        """Start the next generation, empty, in ``gen-N.tmp``; its first sequence number
        follows this generation's last, so sequence numbers keep growing.

        The caller appends the live state to it, syncs any derived file it writes in
        ``Rewrite.dir``, then calls :meth:`switch`. Errors: ``read_only``, ``io``.
        """
        self._check_open()
        if self._appender is None:
            raise ReadOnlyError("the journal was opened read-only")
        self._appender.sync()
        generation = self.generation + 1
        tmp = begin_generation(self.path, generation, self.store_id, self.last_seq + 1,
                               self._key)
        problems: list[Problem] = []
        segments = scan_generation(tmp, generation, problems.append)
        if problems or len(segments) != 1:
            raise CorruptError("a new generation did not read back", path=tmp, offset=0)
        codec = FrameCodec(store_id=self.store_id, envelope=self._envelope,
                           compress=self._compress)
        appender = Appender(gen_dir=tmp, segments=segments, codec=codec, sync="none",
                            segment_size=self.segment_size)
        return Rewrite(self, tmp, generation, appender)

    def switch(self, rewrite: Rewrite) -> str:
        """Make ``rewrite`` the live generation, atomically; return the old one's directory.

        Sync every segment, write the new generation's watermark (all of it is durable),
        sync the directory, rename ``gen-N.tmp`` to ``gen-N``, sync the store directory.
        A crash before the rename leaves the old generation live (and the ``.tmp`` a
        leftover the next open erases); after it, the new one. The old generation's
        files are left for :meth:`erase_generation`.
        """
        self._check_open()
        rewrite._appender.close()  # drains and fsyncs the last segment
        seg = rewrite._appender.segments[-1]
        write_watermark(rewrite.dir, Watermark(self.store_id, rewrite.generation, seg.number,
                                               seg.last_seq, seg.end))
        commit_generation(self.path, rewrite.dir)
        old = self.gen_dir
        if self._appender is not None:
            self._appender.close()
            self._appender = None
        self._close_fds()
        self._set_generation(rewrite.generation)
        self._load()
        return old

    def erase_generation(self, gen_dir: str, *, zero: bool) -> int:
        """Remove a replaced generation's files: overwritten with zeros and synced first
        when ``zero`` (purge), merely unlinked otherwise. Returns bytes overwritten."""
        if zero:
            return fs.erase_tree(gen_dir)
        fs.remove_tree(gen_dir)
        return 0

    # -- reading ----------------------------------------------------------------------
    def replay(self, from_seq: int = 0) -> Iterator[tuple[int, list[bytes]]]:
        """Yield ``(seq, payloads)`` for every transaction with ``seq >= from_seq``.

        Errors: ``corrupt.auth`` (a frame fails authentication), ``corrupt``, ``closed``;
        on a follower, ``unavailable`` if a compaction replaced the generation while it
        was being read (refresh, then replay the new one).
        """
        self._check_open()
        last = self.last_seq
        for seg in list(self.segments):
            if seg.last_seq < from_seq or seg.first_seq > last:
                continue
            try:
                data = fs.read_at(self._segment_fd(seg), seg.end, 0, seg.path)
            except StorageIOError as exc:
                raise self._unreadable(seg, exc) from exc
            binding = seg.binding()
            start = max(0, from_seq - seg.first_seq)
            count = min(len(seg.offsets), last - seg.first_seq + 1)
            for i in range(start, count):
                try:
                    payloads = self._decode(data, seg.offsets[i], seg, binding, verify=True)
                except CorruptError as exc:
                    raise self._unreadable(seg, exc) from exc
                yield seg.first_seq + i, payloads

    def read(self, seq: int) -> list[bytes]:
        """The payloads of transaction ``seq``.

        On a follower that moved to a new generation, the transactions of the ones it
        left stay readable until :meth:`release_retired`. Errors: ``not_found``,
        ``corrupt``, ``io``; on a follower, ``unavailable`` (as :meth:`replay`).
        """
        self._check_open()
        segs = self.segments
        if self._retired and seq < self.first_seq:
            segs = self._retired
        elif seq > self.last_seq:
            segs = []
        idx = bisect.bisect_right([s.first_seq for s in segs], seq) - 1
        if idx < 0 or seq > segs[idx].last_seq or seq < 1:
            raise NotFoundError(f"no transaction {seq} in the journal")
        seg = segs[idx]
        off = seg.offsets[seq - seg.first_seq]
        try:
            fd = self._segment_fd(seg)
            head = fs.read_at(fd, FRAME_HEADER_SIZE, off, seg.path)
            if len(head) < FRAME_HEADER_SIZE:
                raise CorruptError("frame cut short on re-read (the file changed under us)",
                                   path=seg.path, offset=off, length=FRAME_HEADER_SIZE)
            length = parse_header(head, 0).length
            data = head + fs.read_at(fd, length, off + FRAME_HEADER_SIZE, seg.path)
            return self._decode(data, 0, seg, seg.binding(), verify=True, where=off)
        except (CorruptError, StorageIOError) as exc:
            raise self._unreadable(seg, exc) from exc

    def _segment_fd(self, seg: Segment) -> int:
        fd = self._read_fds.get(seg.path)
        if fd is None:
            fd = fs.open_ro(seg.path)
            kept = self._read_fds.setdefault(seg.path, fd)  # readers may race to open it
            if kept != fd:
                fs.close(fd)
            fd = kept
        return fd

    def _unreadable(self, seg: Segment, exc: HolomemError) -> HolomemError:
        """The error for a segment that did not read back: on a follower whose generation
        was replaced (the writer unlinks or zeroes the old files), not damage but
        ``unavailable``; otherwise ``exc`` itself."""
        if self.read_only and (seg.header.generation != self.generation or self.replaced()):
            return UnavailableError(
                f"generation {seg.header.generation} of the store at {self.path!r} was "
                f"replaced by a compaction while it was being read ({exc.message}); "
                "refresh, and read again from the new generation")
        return exc

    def replaced(self) -> bool:
        """Follower: True once the writer switched to a newer generation than the one
        loaded (a compaction), so :meth:`refresh` would reset. Two ``stat`` calls."""
        if not self.read_only:
            return False
        successor = os.path.join(self.path, generation_name(self.generation + 1))
        return os.path.isdir(successor) or not os.path.isdir(self.gen_dir)

    def release_retired(self) -> None:
        """Follower: close the generations :meth:`refresh` moved away from; their
        transactions are no longer readable."""
        self._close_fds(s.path for s in self._retired)
        self._retired.clear()

    def _decode(self, data: bytes, off: int, seg: Segment, binding: Binding, *, verify: bool,
                where: int | None = None) -> list[bytes]:
        fh = parse_header(data, off)
        at = off if where is None else where
        if verify and frame_checksum(data, off, fh.length, binding.salt) != fh.checksum:
            raise CorruptError("frame checksum mismatch on re-read (the file changed under us)",
                               path=seg.path, offset=at, length=FRAME_HEADER_SIZE + fh.length)
        start = off + FRAME_HEADER_SIZE
        view = memoryview(data)
        try:
            head = view[off : off + FRAME_CHECKSUMMED]
            return self._codec.decode_body(fh, head, view[start : start + fh.length], binding)
        except BadBody as exc:
            cls = AuthenticationError if exc.auth else CorruptError
            raise cls(str(exc), path=seg.path, offset=at,
                      length=FRAME_HEADER_SIZE + fh.length) from exc

    def refresh(self) -> Refreshed:
        """Follower only: pick up transactions the writer appended since the last look.

        Returns ``Refreshed(reset, from_seq)``: replay from ``from_seq`` to catch up;
        if ``reset`` is True the writer switched to a new generation (compaction) and
        everything must be rebuilt by replaying from ``from_seq`` (the new first). The
        generation left behind stays readable (:meth:`read`) until
        :meth:`release_retired`. Errors: ``not_found``, ``corrupt``, ``io``,
        ``unavailable`` (compactions kept replacing the generation while it was read).
        """
        self._check_open()
        if not self.read_only:
            return Refreshed(False, self.last_seq + 1)
        if self._newest_generation() != self.generation:
            return self._reset()
        before = self.last_seq + 1
        last = self.segments[-1]
        try:
            fd = self._segment_fd(last)
            data = fs.read_at(fd, fs.size(fd, last.path), 0, last.path)
            scan = scan_frames(data, last.header, last.end, last.last_seq + 1)
            last.offsets.extend(scan.offsets)
            last.end = scan.end
            if scan.problem is None or scan.problem.code in ("corrupt.truncated",
                                                              "corrupt.frame"):
                self._refresh_new_segments()
        except (CorruptError, StorageIOError):
            if not self.replaced():
                raise
            return self._reset()
        return Refreshed(False, before)

    def _reset(self) -> Refreshed:
        """Follower: retire the loaded generation and load the live one (if that fails,
        the loaded one stays as it was)."""
        old, generation, retired = self.segments, self.generation, len(self._retired)
        self._retired.extend(old)
        try:
            self._set_generation(self._newest_generation())
            self._load_newest()
        except BaseException:
            del self._retired[retired:]
            self.segments = old
            self._set_generation(generation)
            raise
        return Refreshed(True, self.first_seq)

    def _refresh_new_segments(self) -> None:
        known = self.segments[-1].number
        for number, path in list_segments(self.gen_dir):
            if number <= known:
                continue
            if number != self.segments[-1].number + 1:
                break
            fd = fs.open_ro(path)
            try:
                seg = self._new_segment(fd, number, path)
            except BaseException:
                fs.close(fd)
                raise
            if seg is None:
                fs.close(fd)
                break
            self._read_fds[path] = fd  # pinned, like the others
            self.segments.append(seg)

    def _new_segment(self, fd: int, number: int, path: str) -> Segment | None:
        """A segment the writer rotated to, or None if it is not complete yet."""
        data = fs.read_at(fd, fs.size(fd, path), 0, path)
        if len(data) < SEGMENT_HEADER_SIZE:
            return None  # being created right now
        header = unpack_header(data, path)
        if header.first_seq != self.last_seq + 1:
            return None
        scan = scan_frames(data, header)
        return Segment(number, path, header, scan.offsets, scan.end)

    # -- closing ----------------------------------------------------------------------
    def close(self) -> None:
        """Sync and close (the writer records its watermark). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._appender is not None:
                self._appender.close()
                if self._appender.failed is None:
                    self._mark_durable()  # the close's fsync returned: all of it is durable
        finally:
            self._release()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
