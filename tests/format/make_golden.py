"""Regenerate the golden journal segments under tests/format/golden/.

Run only when the format version changes (the committed files are the reference a
newer build must still read):

    python tests/format/make_golden.py

Everything random in a real segment (store id, salt, nonce epoch) is fixed here.
"""

from __future__ import annotations

import os
import struct
import tempfile

import msgspec
import xxhash
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from holomem import events as ev
from holomem.log import checkpoint as ckfile
from holomem.log.envelope import Envelope, key_check
from holomem.log.format import (
    KEY_CHECK_SIZE,
    READ_VERSION,
    SEGMENT_FLAG_ENCRYPTED,
    WRITE_VERSION,
)
from holomem.log.frame import Binding, FrameCodec
from holomem.log.segment import SegmentHeader
from holomem.log.watermark import Watermark
from holomem.projections import checkpoint as codec
from holomem.projections.state import ProjectionState

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
STORE_ID = bytes(range(16))
SALT = 0x0123456789ABCDEF
KEY = bytes(range(32))
#: The transactions in every golden segment: seq 1 and seq 2.
TRANSACTIONS = [
    [b"hello"],
    [b"first payload", b"second payload " + b"holomem " * 40],
]


def build(encrypted: bool) -> bytes:
    header = SegmentHeader(
        WRITE_VERSION, READ_VERSION, SEGMENT_FLAG_ENCRYPTED if encrypted else 0, STORE_ID,
        1, 1, 1, SALT, key_check(KEY, STORE_ID) if encrypted else bytes(KEY_CHECK_SIZE),
    )
    envelope = None
    if encrypted:
        envelope = Envelope(KEY)
        envelope._epoch = bytes(8)  # fixed nonces: golden files only, never in a store
    codec = FrameCodec(store_id=STORE_ID, envelope=envelope, compress=True)
    where = Binding(STORE_ID, 1, 1, SALT)
    frames = [codec.encode(seq, tx, where) for seq, tx in enumerate(TRANSACTIONS, start=1)]
    return header.pack() + b"".join(frames)


def build_watermark(encrypted: bool) -> bytes:
    """The watermark a clean close leaves beside the golden segment: both transactions
    durable, the last one ending at the end of the file."""
    return Watermark(STORE_ID, 1, 1, len(TRANSACTIONS), len(build(encrypted))).pack()


#: The state in the golden checkpoint: three documents, one a fact with a subject,
#: one deleted; the checkpoint holds the state after transaction 3.
CHECKPOINT_EVENTS: list[list[ev.Event]] = [
    [ev.DocumentAdded(id="a", text="amber river stones", entities=("Ann",)),
     ev.FactAdded(id="a", ingest_time=1_000, subject="place")],
    [ev.DocumentAdded(id="b", text="basalt river", metadata=b'{"n":1}')],
    [ev.DocumentAdded(id="c", text="cedar"), ev.DocumentDeleted(id="b")],
]
CHECKPOINT_NAME = "checkpoint-0000000000000003.hck"
#: The journal digest the golden checkpoint carries (it stands beside no journal).
CHECKPOINT_DIGEST = bytes(range(16, 32))
#: The version 1 checkpoint of the same state (no journal digest), as this script wrote
#: it before version 2: kept as it was, the file a build must ignore.
CHECKPOINT_V1_NAME = "checkpoint-v1.hck"


def checkpoint_state() -> ProjectionState:
    state = ProjectionState(None)
    for seq, events in enumerate(CHECKPOINT_EVENTS, start=1):
        for e in events:
            state.apply(seq, e)
    return state


def build_checkpoint() -> bytes:
    """The plaintext checkpoint of :data:`CHECKPOINT_EVENTS` (store id, generation 1,
    the fixed salt and journal digest), as the file layer writes it after the journal's
    fsync (the journal-synced flag set)."""
    with tempfile.TemporaryDirectory() as d:
        written = ckfile.write(d, store_id=STORE_ID, generation=1, seq=3,
                               digest=CHECKPOINT_DIGEST, schema=codec.SCHEMA, envelope=None,
                               payload=codec.encode(checkpoint_state().snapshot()),
                               journal_synced=True, salt=SALT)
        with open(written.path, "rb") as f:
            return f.read()


#: The documents in the golden version 1 text segments (FORMAT.md §9.1): (transaction,
#: id, text, metadata, entities), placed back to back from offset 64.
TEXT_RECORDS = [
    (1, "a", "amber river stones", b"", ["Ann"]),
    (2, "b", "basalt river", b'{"n":1}', []),
]
TEXT_V1_NAMES = {False: "text-v1-plain.seg", True: "text-v1-sealed.seg"}


def text_file_v1(store_id: bytes, generation: int, salt: int, synced_seq: int,
                 records: list[tuple[int, int, bytes]], key: bytes | None = None) -> bytes:
    """A version 1 text segment packed from FORMAT.md §9.1 alone (not by holomem's
    RecordFile, which writes only version 2 files): ``records`` are (offset, seq,
    text_record body), back to back from offset 64; a sealed body's nonce is the
    fixed epoch 0 and a counter from 0 (golden files only, never in a store)."""
    head = struct.pack("<8sBBH4s16sQQQ", b"HOLOREC\0", 1, 1, 1 if key else 0, bytes(4),
                       store_id, generation, salt, synced_seq)
    out = [head + xxhash.xxh3_64_intdigest(head, 0).to_bytes(8, "little")]
    for n, (offset, seq, body) in enumerate(records):
        flags = 0
        if key is not None:
            nonce = bytes(8) + struct.pack("<I", n)
            aad = struct.pack("<16sQQQ", store_id, generation, offset, seq)
            body = nonce + AESGCM(key).encrypt(nonce, body, aad)
            flags = 1
        rec = struct.pack("<IHHQ", len(body), flags, 0, seq)
        out.append(rec + xxhash.xxh3_64_intdigest(rec + body, salt).to_bytes(8, "little")
                   + body)
    return b"".join(out)


def text_body(doc_id: str, text: str, metadata: bytes, entities: list[str]) -> bytes:
    """A text_record: the msgpack array [id, text, metadata (bin), entities]."""
    return msgspec.msgpack.encode([doc_id, text, metadata, entities])


def build_text_v1(encrypted: bool) -> bytes:
    records, offset = [], 64
    for seq, doc_id, text, metadata, entities in TEXT_RECORDS:
        body = text_body(doc_id, text, metadata, entities)
        records.append((offset, seq, body))
        offset += 24 + len(body) + (28 if encrypted else 0)
    return text_file_v1(STORE_ID, 1, SALT, len(TEXT_RECORDS), records,
                        KEY if encrypted else None)


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    for name, encrypted in (("plain", False), ("encrypted", True)):
        with open(os.path.join(HERE, f"{name}-seg-00000001.hlj"), "wb") as f:
            f.write(build(encrypted))
    # Added with the watermark (issue 11); the segments above are kept as they were.
    with open(os.path.join(HERE, "plain-watermark"), "wb") as f:
        f.write(build_watermark(False))
    # Added with checkpoints (issue 17); version 2, with the journal digest (issue 27);
    # the journal-synced flag set since checkpoints prove their transactions durable.
    with open(os.path.join(HERE, CHECKPOINT_NAME), "wb") as f:
        f.write(build_checkpoint())
    # Added with the text segment's version 2 (issue 16): the version 1 files it reads.
    for encrypted, name in TEXT_V1_NAMES.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(build_text_v1(encrypted))


if __name__ == "__main__":
    main()
