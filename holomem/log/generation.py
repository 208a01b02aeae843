"""Generations of a store directory: listing them, writing a new one, making it live.

Owns: the ``gen-N`` / ``gen-N.tmp`` directories (FORMAT.md §1, §8, §9b) -- which ones
exist, creating a generation's first segment in ``gen-N.tmp``, the :class:`Rewrite` a
compaction appends to there, and the switch that renames it into place. Imports the
standard library and the other ``holomem.log`` modules (not the journal, which calls
it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

from holomem.errors import CorruptError
from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.envelope import Envelope, key_check
from holomem.log.format import (
    GEN_RE,
    GEN_TMP_RE,
    GEN_TMP_SUFFIX,
    KEY_CHECK_SIZE,
    READ_VERSION,
    SEGMENT_FLAG_ENCRYPTED,
    WRITE_VERSION,
    generation_name,
)
from holomem.log.frame import FrameCodec
from holomem.log.reader import Problem, scan_generation
from holomem.log.segment import SegmentHeader
from holomem.log.watermark import Watermark, write_watermark
from holomem.log.writer import Appender, Refile, create_segment

P_GEN_CREATED = cp.point(
    "journal.generation.created", "a new generation's directory is complete, not yet renamed")
P_GEN_SWITCHED = cp.point(
    "journal.generation.switched", "a generation was renamed into place, the store dir synced")

#: How many generations in a row a follower gives up because a compaction replaced
#: them while it read them, before it reports the store unavailable (and how many
#: times a listing that raced a switch is taken again).
GENERATION_RACES = 64


def list_generations(path: str) -> tuple[list[int], list[int]]:
    """(live, being built) generation numbers in the store directory, ascending.

    A compaction renames ``gen-N+1.tmp`` into place and then removes ``gen-N``; a
    listing taken between the two can find ``gen-N`` gone by the time it is examined
    and ``gen-N+1`` still under its old name. Such a listing is taken again.
    """
    for _ in range(GENERATION_RACES):
        live: list[int] = []
        tmp: list[int] = []
        raced = False
        for name in fs.listdir(path):
            m = GEN_RE.match(name)
            if m:
                if os.path.isdir(os.path.join(path, name)):
                    live.append(int(m.group(1)))
                else:
                    raced = True
                continue
            m = GEN_TMP_RE.match(name)
            if m:
                tmp.append(int(m.group(1)))
        if live or not raced:
            break
    return sorted(live), sorted(tmp)


def new_segment_header(store_id: bytes, generation: int, first_seq: int,
                        key: bytes | None) -> SegmentHeader:
    return SegmentHeader(
        WRITE_VERSION, READ_VERSION, SEGMENT_FLAG_ENCRYPTED if key else 0, store_id,
        generation, 1, first_seq, int.from_bytes(os.urandom(8), "little"),
        key_check(key, store_id) if key else bytes(KEY_CHECK_SIZE),
    )


def begin_generation(store: str, generation: int, store_id: bytes, first_seq: int,
                     key: bytes | None) -> str:
    """Create ``gen-N.tmp`` with an empty first segment; return its path."""
    tmp = os.path.join(store, generation_name(generation) + GEN_TMP_SUFFIX)
    if os.path.exists(tmp):
        fs.erase_tree(tmp)
    fs.mkdir(tmp)
    fs.sync_dir(store)
    create_segment(tmp, new_segment_header(store_id, generation, first_seq, key))
    return tmp


def commit_generation(store: str, tmp: str) -> str:
    """Make a complete ``gen-N.tmp`` the live generation: sync, rename, sync the store.

    Every file in ``tmp`` must already be synced by whoever wrote it.
    """
    fs.sync_dir(tmp)
    cp.hit(P_GEN_CREATED)
    assert tmp.endswith(GEN_TMP_SUFFIX)
    final = tmp[: -len(GEN_TMP_SUFFIX)]
    fs.rename(tmp, final)
    fs.sync_dir(store)
    cp.hit(P_GEN_SWITCHED)
    return final


def erase(gen_dir: str, *, zero: bool) -> int:
    """Remove a replaced generation's files: overwritten with zeros and synced first when
    ``zero`` (purge), merely unlinked otherwise. Returns the bytes overwritten."""
    if zero:
        return fs.erase_tree(gen_dir)
    fs.remove_tree(gen_dir)
    return 0


class Rewrite:
    """A new generation being written by compaction, in ``gen-N.tmp``; see
    :meth:`holomem.log.journal.Journal.begin_rewrite`."""

    def __init__(self, tmp: str, generation: int, store_id: bytes, appender: Appender) -> None:
        self.dir = tmp
        self.generation = generation
        self.store_id = store_id
        self._appender = appender

    @classmethod
    def begin(cls, store: str, generation: int, store_id: bytes, first_seq: int, *,
              key: bytes | None, envelope: Envelope | None, compress: bool,
              segment_size: int) -> Rewrite:
        """Create ``gen-N.tmp`` in ``store`` for generation ``generation``, empty, its
        first sequence number ``first_seq``. Errors: ``corrupt``, ``io``."""
        tmp = begin_generation(store, generation, store_id, first_seq, key)
        problems: list[Problem] = []
        segments = scan_generation(tmp, generation, problems.append)
        if problems or len(segments) != 1:
            raise CorruptError("a new generation did not read back", path=tmp, offset=0)
        codec = FrameCodec(store_id=store_id, envelope=envelope, compress=compress)
        appender = Appender(gen_dir=tmp, segments=segments, codec=codec, sync="none",
                            segment_size=segment_size)
        return cls(tmp, generation, store_id, appender)

    @property
    def last_seq(self) -> int:
        return self._appender.last_seq

    def append(self, payloads: Sequence[bytes]) -> int:
        """Append a transaction to the new generation (synced when it is switched in)."""
        return self._appender.append(list(payloads))

    def refile(self, frames: Iterable[Refile]) -> list[int]:
        """Append each of ``frames`` (of the generation this one replaces: see
        :meth:`holomem.log.journal.Journal.refile`) as the next transaction, its bytes
        taken over; return their new sequence numbers. Errors: ``corrupt`` (a frame does
        not verify), ``corrupt.auth``, ``io``."""
        return self._appender.refile(frames)

    def derived_path(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def finish(self) -> str:
        """Make this generation live: sync its last segment, write its watermark (all of
        it is durable), then rename ``gen-N.tmp`` into place (:func:`commit_generation`);
        return the new directory. Every derived file in it must already be synced."""
        self._appender.close()  # drains and fsyncs the last segment
        seg = self._appender.segments[-1]
        write_watermark(self.dir, Watermark(self.store_id, self.generation, seg.number,
                                            seg.last_seq, seg.end))
        return commit_generation(os.path.dirname(self.dir), self.dir)

    def abandon(self) -> None:
        """Give up: erase what was written (it may hold text)."""
        self._appender.close()
        fs.erase_tree(self.dir)
