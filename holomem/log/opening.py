"""Opening a store directory: its checks, its creation, loading a generation, recovery.

Owns: what the journal's open does before anything is read or appended (FORMAT.md §1,
§7): refusing what is not a store, creating a new one, taking the writer's lock,
erasing the leftovers of an interrupted compaction, loading a generation (scan,
versions, key), cutting a torn tail (its bytes saved first), settling what a crashed
writer left unsynced, and recording the watermark. Imports the standard library,
:mod:`holomem.errors` and the other ``holomem.log`` modules; the journal
(:mod:`holomem.log.journal`) calls it, never the other way round.
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from holomem.errors import (
    CorruptError,
    FormatVersionError,
    InvalidError,
    NotFoundError,
)
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.backup import backup_dir, cut_tail
from holomem.log.envelope import Envelope, check_store_key
from holomem.log.format import (
    GEN_TMP_SUFFIX,
    LOCK_NAME,
    SEGMENT_FLAG_ENCRYPTED,
    WRITE_VERSION,
    generation_name,
)
from holomem.log.frame import FrameCodec
from holomem.log.generation import begin_generation, commit_generation, list_generations
from holomem.log.reader import Problem, scan_generation
from holomem.log.replay import pin
from holomem.log.segment import SegmentHeader
from holomem.log.watermark import Watermark, read_watermark, write_watermark
from holomem.log.writer import Appender, Segment

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


class Loaded(NamedTuple):
    """A generation as loaded: its directory and segments, the torn tails found (and, for
    the writer, where the bytes it cut were saved), how to decode it, a follower's open
    segment files, the writer's watermark."""

    gen_dir: str
    segments: list[Segment]
    problems: list[Problem]
    backups: list[str | None]
    store_id: bytes
    encrypted: bool
    envelope: Envelope | None
    codec: FrameCodec
    pinned: dict[str, int]
    watermark: Watermark | None


def prepare(path: str, *, read_only: bool, create: bool) -> int | None:
    """Check (or create) the store directory ``path``; for the writer, take its lock and
    return the lock's fd (None for a follower).

    Errors: ``invalid`` (not a directory, or a non-empty one holding no store),
    ``not_found``, ``locked``, ``io``.
    """
    if not os.path.isdir(path):
        if os.path.lexists(path):
            raise InvalidError(f"{path!r} is not a directory")
        if read_only or not create:
            raise NotFoundError(f"no holomem store at {path!r}")
        # Every directory created here is durable (its parent synced, up to one that
        # existed) before anything is acknowledged in it.
        fs.make_dirs(path)
    if read_only:
        return None
    lock_path = os.path.join(path, LOCK_NAME)
    if not os.path.exists(lock_path) and not any(list_generations(path)):
        # Not a store (its LOCK exists before its first generation does): refuse
        # before creating the lock file, so that a refused open leaves the directory
        # exactly as it found it.
        if not create:
            raise NotFoundError(f"no holomem store at {path!r}")
        refuse_non_empty(path)
    return fs.lock(lock_path)


def refuse_non_empty(path: str) -> None:
    """Refuse to create a store in a directory that holds anything but a lock file."""
    if [e for e in fs.listdir(path) if e != LOCK_NAME]:
        raise InvalidError(
            f"{path!r} is not empty and holds no holomem store; refusing to create one there")


def erase_leftovers(path: str, live: list[int], tmp: list[int]) -> list[str]:
    """Writer: erase what an interrupted compaction or purge left -- a generation being
    built, or an old one whose erasure did not finish; return their names."""
    erased: list[str] = []
    for name in ([generation_name(g) + GEN_TMP_SUFFIX for g in tmp]
                 + [generation_name(g) for g in live[:-1]]):
        fs.erase_tree(os.path.join(path, name))
        erased.append(name)
    if erased:
        log.warning("erased leftovers of an interrupted compaction: %s", ", ".join(erased))
    return erased


def initialize(path: str, key: bytes | None) -> None:
    """Create a new store's first generation in the empty directory ``path``."""
    refuse_non_empty(path)
    tmp = begin_generation(path, 1, os.urandom(16), 1, key)
    commit_generation(path, tmp)


def check_key(head: SegmentHeader, key: bytes | None, path: str) -> None:
    """Refuse ``key`` unless it opens the store whose first segment header is ``head``.
    Errors: ``key.required``, ``key.unexpected``, ``key.wrong``."""
    check_store_key(key, encrypted=bool(head.flags & SEGMENT_FLAG_ENCRYPTED),
                    store_id=head.store_id, check=head.key_check, where=path)


def load(path: str, generation: int, *, key: bytes | None, compress: bool,
         writer: bool) -> Loaded:
    """Load generation ``generation`` of the store ``path``: scan it and check it can be
    opened (nothing but torn tails wrong, a version this build may read and, for the
    ``writer``, append to, the right key); then the writer cuts the torn tails
    (:func:`repair_tail`) and reads the watermark, and a follower opens every segment
    (:func:`holomem.log.replay.pin`).

    Errors: ``corrupt.*``, ``format.version``, ``key.*``, ``io``.
    """
    gen_dir = os.path.join(path, generation_name(generation))
    problems: list[Problem] = []
    segments = scan_generation(gen_dir, generation, problems.append)
    for p in problems:
        if not p.tail:
            raise p.error()
    if not segments:
        raise CorruptError("the live generation holds no valid segment", path=gen_dir, offset=0)
    head = segments[0].header
    if head.write_version > WRITE_VERSION and writer:
        raise FormatVersionError(
            f"{gen_dir}: written with format version {head.write_version}; this build "
            f"writes version {WRITE_VERSION} and may only open it read-only")
    check_key(head, key, path)
    envelope = Envelope(key) if key is not None else None
    codec = FrameCodec(store_id=head.store_id, envelope=envelope, compress=compress)
    backups: list[str | None] = []
    watermark, pinned = None, {}
    if writer:
        watermark = read_watermark(gen_dir)
        if problems:
            backups = repair_tail(path, segments, problems)
    else:
        pinned = pin(segments)
    return Loaded(gen_dir, segments, problems, backups, head.store_id,
                  bool(head.flags & SEGMENT_FLAG_ENCRYPTED), envelope, codec, pinned, watermark)


def repair_tail(path: str, segments: list[Segment], problems: list[Problem]
                ) -> list[str | None]:
    """Writer: cut the torn tails ``problems`` found in ``segments`` of the store
    ``path``, keeping the cut bytes in a backup file beside the store; return the
    backups' paths (None where nothing was cut)."""
    saved: list[str | None] = []
    target = backup_dir(path)
    for p in problems:
        assert p.tail  # anything else refused the open
        last = segments[-1] if segments else None
        # A torn frame is cut off; a rotated-in segment whose header never reached the
        # disk is removed whole.
        at = p.offset if last is not None and last.path == p.path else 0
        backup = cut_tail(p.path, at, target)
        saved.append(backup)
        log.warning(
            "truncated a torn tail (a write that never completed, never acknowledged): "
            "%s at offset %d: %s; %s", p.path, at, p.reason,
            f"the cut bytes are saved in {backup}" if backup else "no bytes were cut")
        cp.hit(P_TAIL_TRUNCATED)
    return saved


def settle(appender: Appender, gen_dir: str, path: str) -> None:
    """Writer: make durable what a crashed writer may have left unsynced, before anything
    is acknowledged on top of it: the bytes at the end of the last segment, and the
    names of the segments, of the live generation and of the store directory.

    Without this, a writer that crashed after creating a segment (or renaming a
    generation into place, or creating the store directory) but before syncing the
    directory leaves a name that only the page cache holds; the next writer appends to
    it, fsyncs the file and acknowledges, and a power cut then takes the name away
    with every acknowledged write in it.
    """
    appender.sync()
    fs.sync_dir(gen_dir)
    fs.sync_dir(path)
    fs.sync_dir(os.path.dirname(path))


def mark_durable(gen_dir: str, store_id: bytes, generation: int, last: Segment,
                 known: Watermark | None) -> Watermark:
    """Writer: record in the watermark of ``gen_dir`` that every transaction up to the end
    of ``last`` is on disk (FORMAT.md §7.1), unless ``known`` says so already; return
    the watermark. Call only when that is true: after the open's settling, at close once
    the last sync returned, in a compaction's new generation before the switch."""
    mark = Watermark(store_id, generation, last.number, last.last_seq, last.end)
    if mark != known:
        write_watermark(gen_dir, mark)
    return mark
