"""Generations of a store directory: listing them, and making a new one live.

Owns: the ``gen-N`` / ``gen-N.tmp`` directories (FORMAT.md §1, §8, §9b) -- which ones
exist, creating a generation's first segment in ``gen-N.tmp``, and the switch that
renames it into place. Imports the standard library and the other ``holomem.log``
modules.
"""

from __future__ import annotations

import os

from holomem.log import crashpoints as cp
from holomem.log import fs
from holomem.log.envelope import key_check
from holomem.log.format import (
    GEN_RE,
    GEN_TMP_RE,
    KEY_CHECK_SIZE,
    READ_VERSION,
    SEGMENT_FLAG_ENCRYPTED,
    WRITE_VERSION,
    generation_name,
)
from holomem.log.segment import SegmentHeader
from holomem.log.writer import create_segment

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
    tmp = os.path.join(store, generation_name(generation) + ".tmp")
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
    final = tmp[: -len(".tmp")]
    fs.rename(tmp, final)
    fs.sync_dir(store)
    cp.hit(P_GEN_SWITCHED)
    return final
