"""The checkpoint file of FORMAT.md §9.2, byte by byte: a golden checkpoint decoded by
hand from the document's tables (not by holomem's reader), read back by holomem, and
written again bit for bit by this build; the journal digest it is bound to, computed by
hand from the golden journal segment; the journal-synced flag, which makes the file
evidence of durable transactions, and the same file without it (as builds before the
flag wrote it), read as before but evidence of nothing; and the version 1 checkpoint,
which this build ignores.

If a change to a projection's state makes the last test fail, the payload's schema
changed: bump ``holomem.projections.checkpoint.SCHEMA`` (an older checkpoint is then
ignored and the journal replayed), update FORMAT.md §9.2 and regenerate the file with
``python tests/format/make_golden.py``.
"""

from __future__ import annotations

import hashlib
import os
import struct
from pathlib import Path

import msgspec
import numpy as np
import pytest
import xxhash
import zstandard

from holomem.log import checkpoint as ckfile
from holomem.log.segment import scan_frames, unpack_header
from holomem.log.writer import Segment
from holomem.projections import checkpoint as codec

from .make_golden import (
    CHECKPOINT_DIGEST,
    CHECKPOINT_NAME,
    CHECKPOINT_V1_NAME,
    SALT,
    STORE_ID,
    build_checkpoint,
)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
HEADER = struct.Struct("<8sBBHI16sQQQQ16sQ")  # FORMAT.md §9.2, the header table
BLOCK = struct.Struct("<IIIIQ")  # stored, length, flags, index, checksum


def _raw(name: str = CHECKPOINT_NAME) -> bytes:
    with open(os.path.join(HERE, name), "rb") as f:
        return f.read()


def _by_hand(raw: bytes) -> tuple[tuple[object, ...], bytes]:
    """The header fields and the payload, following FORMAT.md alone."""
    fields = HEADER.unpack_from(raw, 0)
    assert xxhash.xxh3_64_intdigest(raw[:80], 0) == fields[-1]
    payload, pos, index = b"", 88, 0
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
    magic, wver, rver, flags, schema, store_id, generation, seq, salt, length, digest, _ = fields
    assert (magic, wver, rver, flags) == (b"HOLOCKP\x00", 2, 2, 2)  # bit 1: journal synced
    assert (schema, store_id, generation, seq, salt) == (6, STORE_ID, 1, 3, SALT)
    assert digest == CHECKPOINT_DIGEST
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
                                    generation=1, digest=CHECKPOINT_DIGEST, schema=codec.SCHEMA,
                                    envelope=None)
    assert header.seq == 3
    state = codec.restore(None, payload)
    assert state.catalog.live_ids() == ["a", "c"]
    assert state.facts.subject_members("place") == ["a"]
    assert [int(s) for s in state.entities.slots("Ann")] == [0]
    slots, _ = state.bm25.score("river")
    assert slots.tolist() == [0]


def test_this_build_writes_the_golden_checkpoint_bit_for_bit() -> None:
    assert build_checkpoint() == _raw()


def test_the_journal_digest_is_computed_as_documented_from_the_golden_segment() -> None:
    """FORMAT.md §9.2: xxh3-128 (canonical bytes) of the first segment's salt, then the
    stored checksum of every frame up to the sequence number."""
    data = _raw("plain-seg-00000001.hlj")
    header = unpack_header(data, "golden")
    scan = scan_frames(data, header)
    segment = Segment(1, "golden", header, scan.offsets, scan.end, scan.checksums)
    salt = SALT.to_bytes(8, "little")
    checksums = [data[off + 16 : off + 24] for off in (96, 133)]  # the two frames' headers
    assert list(scan.offsets) == [96, 133]
    for seq in (0, 1, 2):
        by_hand = xxhash.xxh3_128(salt + b"".join(checksums[:seq])).digest()
        assert ckfile.journal_digest([segment], seq) == by_hand
    documented = ckfile.journal_digest([segment], 2).hex()
    with open(os.path.join(HERE, "..", "..", "..", "FORMAT.md"), encoding="utf-8") as f:
        assert f"`{documented}`" in f.read()


def _without_journal_synced_flag(raw: bytes) -> bytes:
    """The file as a build before the journal-synced flag wrote it (flags 0)."""
    head = raw[:10] + (0).to_bytes(2, "little") + raw[12:80]
    return head + xxhash.xxh3_64_intdigest(head, 0).to_bytes(8, "little") + raw[88:]


def test_the_journal_synced_flag_makes_the_golden_checkpoint_evidence_of_its_transactions(
        tmp_path: Path) -> None:
    """FORMAT.md §9.2, flag bit 1: an authentic checkpoint carrying it proves every
    transaction up to its sequence number durable; one without it (from a build before
    the flag) proves nothing, and is read as before."""
    old = _without_journal_synced_flag(_raw())
    for raw, proves in ((_raw(), 3), (old, None)):
        path = str(tmp_path / CHECKPOINT_NAME)
        Path(path).write_bytes(raw)
        assert ckfile.vouches(path, store_id=STORE_ID, generation=1, envelope=None) == proves
        for other in ({"store_id": bytes(16), "generation": 1},
                      {"store_id": STORE_ID, "generation": 2}):
            assert ckfile.vouches(path, envelope=None, **other) is None
        header, payload = ckfile.verify(raw, name=CHECKPOINT_NAME, store_id=STORE_ID,
                                        generation=1, digest=CHECKPOINT_DIGEST,
                                        schema=codec.SCHEMA, envelope=None)
        assert header.seq == 3 and codec.restore(None, payload).catalog.live_ids() == ["a", "c"]


def test_a_checkpoint_with_another_journal_digest_is_refused_as_stale() -> None:
    with pytest.raises(ckfile.Stale, match="written for another journal"):
        ckfile.verify(_raw(), name=CHECKPOINT_NAME, store_id=STORE_ID, generation=1,
                      digest=bytes(16), schema=codec.SCHEMA, envelope=None)


def test_a_version_1_checkpoint_is_refused_as_stale_whatever_it_holds() -> None:
    """Version 1 carries no journal digest: nothing binds it to a journal, so it is
    ignored (and the journal replayed), never read."""
    raw = _raw(CHECKPOINT_V1_NAME)
    assert raw[:10] == b"HOLOCKP\x00\x01\x01"
    with pytest.raises(ckfile.Stale, match="format read version 1, from an older holomem"):
        ckfile.verify(raw, name=CHECKPOINT_NAME, store_id=STORE_ID, generation=1,
                      digest=CHECKPOINT_DIGEST, schema=codec.SCHEMA, envelope=None)
