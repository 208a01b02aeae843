"""The checkpoint file of FORMAT.md §9.2, byte by byte: a golden checkpoint decoded by
hand from the document's tables (not by holomem's reader), read back by holomem, and
written again bit for bit by this build.

If a change to a projection's state makes the last test fail, the payload's schema
changed: bump ``holomem.projections.checkpoint.SCHEMA`` (an older checkpoint is then
ignored and the journal replayed), update FORMAT.md §9.2 and regenerate the file with
``python tests/format/make_golden.py``.
"""

from __future__ import annotations

import hashlib
import os
import struct

import msgspec
import numpy as np
import xxhash
import zstandard

from holomem.log import checkpoint as ckfile
from holomem.projections import checkpoint as codec

from .make_golden import CHECKPOINT_NAME, SALT, STORE_ID, build_checkpoint

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", CHECKPOINT_NAME)
HEADER = struct.Struct("<8sBBHI16sQQQQQ")  # FORMAT.md §9.2, the header table
BLOCK = struct.Struct("<IIIIQ")  # stored, length, flags, index, checksum


def _raw() -> bytes:
    with open(GOLDEN, "rb") as f:
        return f.read()


def _by_hand(raw: bytes) -> tuple[tuple[object, ...], bytes]:
    """The header fields and the payload, following FORMAT.md alone."""
    fields = HEADER.unpack_from(raw, 0)
    assert xxhash.xxh3_64_intdigest(raw[:64], 0) == fields[-1]
    payload, pos, index = b"", 72, 0
    while True:
        stored, length, flags, bindex, check = BLOCK.unpack_from(raw, pos)
        body = raw[pos + 24 : pos + 24 + stored]
        assert bindex == index and len(body) == stored
        assert xxhash.xxh3_64_intdigest(raw[pos : pos + 16] + body, fields[8]) == check
        piece = zstandard.ZstdDecompressor().decompress(body, max_output_size=length) \
            if flags & 1 else body
        assert len(piece) == length and not flags & 2
        payload += piece
        pos, index = pos + 24 + stored, index + 1
        if flags & 4:
            break
    assert pos == len(raw)
    return fields, payload


def test_the_golden_checkpoint_decodes_by_the_documented_layout() -> None:
    fields, payload = _by_hand(_raw())
    magic, wver, rver, flags, schema, store_id, generation, seq, salt, length, _ = fields
    assert (magic, wver, rver, flags) == (b"HOLOCKP\x00", 1, 1, 0)
    assert (schema, store_id, generation, seq, salt) == (5, STORE_ID, 1, 3, SALT)
    assert length == len(payload)
    n = int.from_bytes(payload[:4], "little")
    manifest = msgspec.msgpack.decode(payload[4 : 4 + n])
    values, pos = {}, 4 + n
    for part, name, kind, dtype, shape, size in manifest:
        data = payload[pos : pos + size]
        pos += size
        values[f"{part}.{name}"] = (np.frombuffer(data, dtype=dtype).reshape(shape) if kind == 1
                                    else msgspec.msgpack.decode(data))
    assert pos == len(payload)
    assert values["catalog.ids"] == ["a", None, "c"]
    assert values["catalog.alive"].tolist() == [True, False, True]
    assert values["catalog.seq"].dtype == np.dtype("<i8")
    assert values["catalog.seq"].tolist() == [1, 2, 3]
    keys = [int.from_bytes(hashlib.blake2b(i.encode(), digest_size=8).digest(), "little")
            for i in ("a", "c")]
    order = sorted(range(2), key=keys.__getitem__)
    assert values["catalog.table_keys"].tolist() == [keys[k] for k in order]
    assert values["catalog.table_slots"].tolist() == [[0, 2][k] for k in order]
    assert values["facts.ns.member_counts"].tolist() == [1]
    assert values["facts.ns.members"].tolist() == [0]
    assert values["bm25.terms"] == ["amber", "river", "stone", "basalt", "cedar"]
    assert values["entities.names"] == ["Ann"]
    assert values["facts.subject_names"] == ["place"]
    assert values["facts.col.is_fact"].tolist() == [True, False, False]


def test_holomem_reads_the_golden_checkpoint_and_restores_its_state() -> None:
    header, payload = ckfile.verify(_raw(), name=CHECKPOINT_NAME, store_id=STORE_ID,
                                    generation=1, schema=codec.SCHEMA, envelope=None)
    assert header.seq == 3
    state = codec.restore(None, payload)
    assert state.catalog.live_ids() == ["a", "c"]
    assert state.facts.subject_members("place") == ["a"]
    assert [int(s) for s in state.entities.slots("Ann")] == [0]
    slots, _ = state.bm25.score("river")
    assert slots.tolist() == [0]


def test_this_build_writes_the_golden_checkpoint_bit_for_bit() -> None:
    assert build_checkpoint() == _raw()
