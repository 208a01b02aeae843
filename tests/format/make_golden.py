"""Regenerate the golden journal segments under tests/format/golden/.

Run only when the format version changes (the committed files are the reference a
newer build must still read):

    python tests/format/make_golden.py

Everything random in a real segment (store id, salt, nonce epoch) is fixed here.
"""

from __future__ import annotations

import os
import tempfile

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


def checkpoint_state() -> ProjectionState:
    state = ProjectionState(None)
    for seq, events in enumerate(CHECKPOINT_EVENTS, start=1):
        for e in events:
            state.apply(seq, e)
    return state


def build_checkpoint() -> bytes:
    """The plaintext checkpoint of :data:`CHECKPOINT_EVENTS` (store id, generation 1,
    the fixed salt), as the file layer writes it."""
    with tempfile.TemporaryDirectory() as d:
        written = ckfile.write(d, store_id=STORE_ID, generation=1, seq=3, schema=codec.SCHEMA,
                               envelope=None, payload=codec.encode(checkpoint_state().snapshot()),
                               salt=SALT)
        with open(written.path, "rb") as f:
            return f.read()


def main() -> None:
    os.makedirs(HERE, exist_ok=True)
    for name, encrypted in (("plain", False), ("encrypted", True)):
        with open(os.path.join(HERE, f"{name}-seg-00000001.hlj"), "wb") as f:
            f.write(build(encrypted))
    # Added with the watermark (issue 11); the segments above are kept as they were.
    with open(os.path.join(HERE, "plain-watermark"), "wb") as f:
        f.write(build_watermark(False))
    # Added with checkpoints (issue 17).
    with open(os.path.join(HERE, CHECKPOINT_NAME), "wb") as f:
        f.write(build_checkpoint())


if __name__ == "__main__":
    main()
