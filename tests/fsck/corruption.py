"""A small store to damage, and byte surgery on it (not tests themselves).

Layouts come from FORMAT.md and are written out here, so that finding where to
damage a file does not rely on the code under test.
"""

from __future__ import annotations

import os
import struct
from typing import Any, NamedTuple

import msgspec
import xxhash

from holomem import ManualClock, Memory, Store

SEGMENT_SIZE = 4096
SEGMENT_HEADER_SIZE = 96
FRAME_HEADER = struct.Struct("<IHBBQQ")  # length, flags, kind, reserved, seq, checksum
FRAME_HEADER_SIZE = 24
TEXT_HEADER_SIZE = 64
RECORD_HEADER = struct.Struct("<IHHQQ")  # body length, flags, reserved, seq, checksum
RECORD_HEADER_SIZE = 24
#: The watermark (FORMAT.md §7.1): magic, write version, read version, flags, reserved,
#: store id, generation, segment number, sequence number, end offset, checksum.
WATERMARK = struct.Struct("<8sBBH4s16sQQQQQ")
WATERMARK_CHECKSUMMED = 64
CLOCK_START = 1_700_000_000_000
#: The fact removed by the builder's forget (its text record is zeroed).
FORGOTTEN = "fact-05"
#: The facts of the last transaction, the only ones a torn tail may lose.
TAIL = ["tail-0", "tail-1", "tail-2"]


class Frame(NamedTuple):
    offset: int
    length: int  # body bytes
    seq: int

    @property
    def end(self) -> int:
        return self.offset + FRAME_HEADER_SIZE + self.length


class Built(NamedTuple):
    path: str
    key: bytes | None
    facts: dict[str, Any]  # every live fact's get(), as plain data
    text_before_forget: bytes  # the text segment before FORGOTTEN was forgotten


def fact_inputs() -> list[dict[str, Any]]:
    return [{"id": f"fact-{i:02d}",
             "text": f"fact {i}: the lantern by the harbor was lit {i * 3} times at dusk",
             "subject": f"topic-{i % 5}", "entities": [f"Keeper{i % 4}"],
             "metadata": {"i": i, "note": "x" * (i % 7)}} for i in range(30)]


def build(path: str, key: bytes | None = None) -> Built:
    """A closed store: 31 facts one per transaction, a forget, then a 3-fact batch,
    over 2-3 journal segments of 4 KiB."""
    store = Store.open(path, key=key, segment_size=SEGMENT_SIZE)
    memory = Memory(store, clock=ManualClock(CLOCK_START))
    for fact in fact_inputs():
        memory.remember(fact)
    memory.remember(id="fact-v2", text="the lantern moved to the pier", subject="topic-1",
                    supersedes=["fact-01"])
    text_before = read(text_segment(path))
    memory.forget({"ids": [FORGOTTEN]})
    memory.remember_many([{"id": t, "text": f"the last batch, fact {t}", "subject": "tail"}
                          for t in TAIL])
    facts = snapshot_facts(memory)
    store.close()
    return Built(path, key, facts, text_before)


def snapshot_facts(memory: Memory) -> dict[str, Any]:
    ids = [f["id"] for f in fact_inputs()] + ["fact-v2", *TAIL]
    out = {}
    for i in ids:
        rec = memory.get(i)
        if rec is not None:
            out[i] = msgspec.to_builtins(rec)
    return out


def open_facts(path: str, key: bytes | None) -> dict[str, Any]:
    store = Store.open(path, key=key, segment_size=SEGMENT_SIZE)
    try:
        return snapshot_facts(Memory(store, clock=ManualClock(CLOCK_START)))
    finally:
        store.close()


# -- files ---------------------------------------------------------------------------------
def read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def overwrite(path: str, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


def flip_bit(path: str, offset: int, bit: int = 3) -> None:
    data = read(path)
    overwrite(path, offset, bytes([data[offset] ^ (1 << bit)]))


def live_generation(store: str) -> str:
    gens = sorted(n for n in os.listdir(store) if n.startswith("gen-") and "." not in n)
    return os.path.join(store, gens[-1])


def segments(store: str) -> list[str]:
    gen = live_generation(store)
    return sorted(os.path.join(gen, n) for n in os.listdir(gen)
                  if n.startswith("seg-") and n.endswith(".hlj"))


def text_segment(store: str) -> str:
    return os.path.join(live_generation(store), "text.seg")


def watermark(store: str) -> str:
    return os.path.join(live_generation(store), "watermark")


def crash_after_last_frame(store: str) -> None:
    """Rewrite the watermark of a closed store as a writer leaves it that opened the
    store after every transaction but the last and died right after appending that
    one: the last frame becomes one that may have been torn (FORMAT.md §7.1)."""
    seg = segments(store)[-1]
    last = frames(seg)[-1]
    fields = list(WATERMARK.unpack(read(watermark(store))))
    fields[7] = int(os.path.basename(seg)[4:12])  # segment number
    fields[8], fields[9], fields[10] = last.seq - 1, last.offset, 0
    raw = WATERMARK.pack(*fields)
    head = raw[:WATERMARK_CHECKSUMMED]
    overwrite(watermark(store), 0,
              head + xxhash.xxh3_64_intdigest(head).to_bytes(8, "little"))


def frames(path: str) -> list[Frame]:
    data = read(path)
    out = []
    off = SEGMENT_HEADER_SIZE
    while off + FRAME_HEADER_SIZE <= len(data):
        length, _flags, kind, _res, seq, _ck = FRAME_HEADER.unpack_from(data, off)
        if kind != 1 or off + FRAME_HEADER_SIZE + length > len(data):
            break
        out.append(Frame(off, length, seq))
        off += FRAME_HEADER_SIZE + length
    return out


def reseal(path: str, frame: Frame) -> None:
    """Recompute ``frame``'s checksum (xxh3-64 of header[0:16] and the body, seeded with
    the segment's salt), so that damage to it only authentication can catch."""
    data = read(path)
    salt = int.from_bytes(data[56:64], "little")
    h = xxhash.xxh3_64(data[frame.offset : frame.offset + 16], salt)
    h.update(data[frame.offset + FRAME_HEADER_SIZE : frame.end])
    overwrite(path, frame.offset + 16, h.intdigest().to_bytes(8, "little"))


def text_records(path: str) -> list[tuple[int, int]]:
    """(offset, size) of the records of a text segment, skipping zeroed ranges."""
    data = read(path)
    out = []
    off = TEXT_HEADER_SIZE
    while off + RECORD_HEADER_SIZE <= len(data):
        length, _flags, _res, _seq, _ck = RECORD_HEADER.unpack_from(data, off)
        # Zeroed: skip to the next non-zero byte. (Not by the sequence number, which a
        # version 2 record (FORMAT.md §9.1) keeps at 0; a record's body is never empty.)
        if length == 0:
            nxt = next((i for i in range(off, len(data)) if data[i]), len(data))
            off = nxt
            continue
        out.append((off, RECORD_HEADER_SIZE + length))
        off += RECORD_HEADER_SIZE + length
    return out


def tree(store: str) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under ``store``, and beside it."""
    out: dict[str, bytes | None] = {}
    for root, dirs, files in os.walk(store):
        for d in dirs:
            out[os.path.relpath(os.path.join(root, d), store)] = None
        for f in files:
            out[os.path.relpath(os.path.join(root, f), store)] = read(os.path.join(root, f))
    return out
