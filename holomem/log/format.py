"""Byte layouts of a store's files, mirrored from FORMAT.md.

Owns: every constant, name and struct layout of the files of a store: the directory
layout, the journal's segments and frames, the watermark, the text segment (the
derived record file) and the backups of cut bytes. Imports only the standard library.
FORMAT.md at the repository root is the prose twin of this module; ``tests/format/``
checks its tables against these structs and decodes golden files with them, so the two
cannot drift apart.

All integers are little-endian.
"""

from __future__ import annotations

import re
import struct

# -- versions ---------------------------------------------------------------------
#: The format this build writes. A file whose read version is higher than
#: READ_VERSION cannot be read by this build; one whose write version is higher
#: than WRITE_VERSION can be read but not appended to (SQLite's two version bytes).
WRITE_VERSION = 1
READ_VERSION = 1

# -- directory layout ---------------------------------------------------------------
LOCK_NAME = "LOCK"
GEN_PREFIX = "gen-"
GEN_TMP_SUFFIX = ".tmp"
#: A file being replaced atomically is written under its name plus this, then renamed.
TMP_SUFFIX = ".tmp"
SEGMENT_PREFIX = "seg-"
SEGMENT_SUFFIX = ".hlj"
# A name is one of these only when it is exactly the pattern: ASCII digits (\d would also
# take other scripts' digits, which int() reads) and nothing after (``$`` would also take
# a final line break), so that a stray file such as "seg-00000001.hlj\n" is no segment.
GEN_RE = re.compile(r"\Agen-([0-9]{8})\Z")
GEN_TMP_RE = re.compile(r"\Agen-([0-9]{8})\.tmp\Z")
SEGMENT_RE = re.compile(r"\Aseg-([0-9]{8})\.hlj\Z")
#: The text segment, the one derived file (in the generation directory; FORMAT.md §9).
TEXT_FILE = "text.seg"
#: The watermark: the last transaction known durable (in the generation directory; §7.1).
WATERMARK_FILE = "watermark"
#: Checkpoints (derived; in the generation directory; FORMAT.md §9.2):
#: ``checkpoint-<sequence number, 16 digits>.hck``.
CHECKPOINT_PREFIX = "checkpoint-"
CHECKPOINT_SUFFIX = ".hck"
CHECKPOINT_RE = re.compile(r"\Acheckpoint-([0-9]{16})\.hck\Z")
#: Beside the store directory: where bytes cut by recovery or fsck are kept (§7).
BACKUP_SUFFIX = ".fsck-backup"
#: A backup file's name ends in this.
BACKUP_FILE_SUFFIX = ".bin"


def generation_name(generation: int) -> str:
    return f"{GEN_PREFIX}{generation:08d}"


def segment_name(number: int) -> str:
    return f"{SEGMENT_PREFIX}{number:08d}{SEGMENT_SUFFIX}"


def checkpoint_name(seq: int) -> str:
    return f"{CHECKPOINT_PREFIX}{seq:016d}{CHECKPOINT_SUFFIX}"


def backup_name(file: str, offset: int, unix_time: int, counter: int = 0) -> str:
    """The name of the backup of the bytes of ``file`` from ``offset`` cut at ``unix_time``:
    ``<file>.<offset>.<unix time>.bin``, or with ``.<counter>`` before ``.bin`` when that
    name is taken (a backup is never overwritten)."""
    stem = f"{file}.{offset}.{unix_time}"
    return f"{stem}.{counter}{BACKUP_FILE_SUFFIX}" if counter else stem + BACKUP_FILE_SUFFIX


# -- segment header -----------------------------------------------------------------
SEGMENT_MAGIC = b"HOLOJNL\x00"
#: magic, write version, read version, flags, reserved, store id, generation,
#: segment number, first sequence number, checksum salt, key check value,
#: reserved, header checksum.
SEGMENT_HEADER = struct.Struct("<8sBBH4s16sQQQQ16s8sQ")
SEGMENT_HEADER_SIZE = 96
SEGMENT_FLAG_ENCRYPTED = 0x0001
SEGMENT_FLAGS_KNOWN = SEGMENT_FLAG_ENCRYPTED
#: The header checksum covers bytes [0, SEGMENT_CHECKSUMMED).
SEGMENT_CHECKSUMMED = 88

# -- frame --------------------------------------------------------------------------
#: body length, flags, kind, reserved, sequence number, checksum.
FRAME_HEADER = struct.Struct("<IHBBQQ")
FRAME_HEADER_SIZE = 24
#: The frame checksum covers header bytes [0, FRAME_CHECKSUMMED) and the body.
FRAME_CHECKSUMMED = 16
FRAME_KIND_TRANSACTION = 1
FRAME_FLAG_COMPRESSED = 0x0001
FRAME_FLAG_ENCRYPTED = 0x0002
FRAME_FLAGS_KNOWN = FRAME_FLAG_COMPRESSED | FRAME_FLAG_ENCRYPTED
#: Largest body a frame may carry (after compression and encryption).
MAX_FRAME_BODY = 1 << 30

# -- watermark ----------------------------------------------------------------------
WATERMARK_MAGIC = b"HOLOWMK\x00"
#: magic, write version, read version, flags, reserved, store id, generation,
#: segment number, sequence number, end offset, checksum.
WATERMARK = struct.Struct("<8sBBH4s16sQQQQQ")
WATERMARK_SIZE = 72
#: The watermark checksum covers bytes [0, WATERMARK_CHECKSUMMED).
WATERMARK_CHECKSUMMED = 64

# -- text segment (the derived record file, §9.1) ------------------------------------
RECORD_FILE_MAGIC = b"HOLOREC\x00"
#: magic, write version, read version, flags, reserved, store id, generation, salt,
#: synced sequence number, header checksum.
RECORD_FILE_HEADER = struct.Struct("<8sBBH4s16sQQQQ")
RECORD_FILE_HEADER_SIZE = 64
#: The file header's checksum covers bytes [0, RECORD_FILE_HEADER_CHECKSUMMED).
RECORD_FILE_HEADER_CHECKSUMMED = 56
#: File header flag: the records are sealed (an encrypted store). Record flag: this
#: record's body is sealed.
RECORD_FLAG_SEALED = 0x0001
#: body length, flags, reserved, sequence number, checksum.
RECORD = struct.Struct("<IHHQQ")
RECORD_SIZE = 24
#: A record's checksum covers its bytes [0, RECORD_CHECKSUMMED) and its body.
RECORD_CHECKSUMMED = 16
#: RECORD with the fields a version 2 plaintext record leaves zero (flags, reserved,
#: seq) as padding: the bytes it checksums, from its body's length; and the whole
#: header, from the length and the checksum (records packed without a call per field).
RECORD_V2_PLAIN_CHECKSUMMED = struct.Struct(f"<I{RECORD_CHECKSUMMED - 4}x")
RECORD_V2_PLAIN = struct.Struct(f"<I{RECORD_CHECKSUMMED - 4}xQ")
#: Associated data of a sealed record in a version 1 file: store id, generation,
#: offset, sequence number.
RECORD_AAD = struct.Struct("<16sQQQ")
#: Associated data of a sealed record in a version 2 file: store id and the file's
#: salt (which a compaction's copy of the file keeps), nothing a new generation changes.
RECORD_AAD_V2 = struct.Struct("<16sQ")
#: The text segment's format version this build writes (its read version too), and
#: the ones it reads. Version 1 binds every record to its generation, offset and
#: sequence number; version 2 to the store and the file's salt only (FORMAT.md §9.1).
RECORD_FILE_VERSION = 2
RECORD_FILE_VERSIONS = (1, 2)

# -- checkpoint (derived, §9.2) -----------------------------------------------------
CHECKPOINT_MAGIC = b"HOLOCKP\x00"
#: The checkpoint format this build writes (its read version too). Version 1 files
#: (the journal's version) carry no journal digest: they are ignored and the journal
#: replayed, as a file of a newer read version is.
CHECKPOINT_VERSION = 2
#: magic, write version, read version, flags, schema version, store id, generation,
#: sequence number, salt, payload length, journal digest, header checksum.
CHECKPOINT_HEADER = struct.Struct("<8sBBHI16sQQQQ16sQ")
CHECKPOINT_HEADER_SIZE = 88
#: The header checksum covers bytes [0, CHECKPOINT_CHECKSUMMED).
CHECKPOINT_CHECKSUMMED = 80
#: The journal digest a checkpoint is bound to: xxh3-128 of the generation's first
#: segment salt and the stored checksum of every frame up to its sequence number.
CHECKPOINT_DIGEST_SIZE = 16
CHECKPOINT_FLAG_SEALED = 0x0001
#: The journal was fsynced through the checkpoint's sequence number before the file
#: was written, whatever the store's sync mode: a checkpoint carrying it proves that
#: every transaction up to that number was durable (FORMAT.md §9.2). Files of builds
#: before the flag lack it (they may be ahead of the journal after a power cut in
#: ``sync="none"`` mode).
CHECKPOINT_FLAG_JOURNAL_SYNCED = 0x0002
CHECKPOINT_FLAGS_KNOWN = CHECKPOINT_FLAG_SEALED | CHECKPOINT_FLAG_JOURNAL_SYNCED
#: stored length, payload length, flags, block index, checksum.
CHECKPOINT_BLOCK = struct.Struct("<IIIIQ")
CHECKPOINT_BLOCK_SIZE = 24
#: A block's checksum covers its header bytes [0, CHECKPOINT_BLOCK_CHECKSUMMED) and body.
CHECKPOINT_BLOCK_CHECKSUMMED = 16
CHECKPOINT_BLOCK_COMPRESSED = 0x0001
CHECKPOINT_BLOCK_SEALED = 0x0002
CHECKPOINT_BLOCK_LAST = 0x0004
CHECKPOINT_BLOCK_FLAGS_KNOWN = (CHECKPOINT_BLOCK_COMPRESSED | CHECKPOINT_BLOCK_SEALED
                                | CHECKPOINT_BLOCK_LAST)
#: Payload bytes per block (the last may hold fewer).
CHECKPOINT_BLOCK_PAYLOAD = 4 * 1024 * 1024
#: Associated data of a sealed block: store id, generation, sequence number, journal
#: digest, schema version, block index, block flags.
CHECKPOINT_AAD = struct.Struct("<16sQQ16sIII")

# -- transaction body (after decryption and decompression) --------------------------
TX_COUNT = struct.Struct("<I")
TX_LENGTH = struct.Struct("<I")
MAX_PAYLOADS = (1 << 32) - 1

# -- encryption envelope ------------------------------------------------------------
KEY_SIZE = 32
NONCE_SIZE = 12
TAG_SIZE = 16
KEY_CHECK_SIZE = 16
#: associated data: store id, generation, segment number, frame header bytes [0, 16).
AAD = struct.Struct("<16sQQ16s")
NONCE = struct.Struct("<8sI")
KEY_CHECK_LABEL = b"holomem/key-check/v1"

# -- compression --------------------------------------------------------------------
#: Bodies shorter than this are never compressed (zstd cannot pay for its header).
COMPRESS_MIN = 256
#: A compressed body is kept only if it is at most this fraction of the original.
COMPRESS_KEEP_RATIO = 0.9
#: Level 1: half the time of level 3 on a 10,000-fact transaction for ~4 % more bytes;
#: the level is the writer's choice (every level decodes alike).
ZSTD_LEVEL = 1
#: A body of at least COMPRESS_PROBE_MIN bytes whose first COMPRESS_PROBE bytes level 1
#: leaves above COMPRESS_PROBE_RATIO of their size (float vectors, which barely
#: compress: the rest of the body is mostly the same) is compressed at this fast level
#: instead: on 384-d vector facts, 0.38x the time of level 1 for a body 9 % larger.
ZSTD_FAST_LEVEL = -5
COMPRESS_PROBE_MIN = 1 << 20
COMPRESS_PROBE = 1 << 16
COMPRESS_PROBE_RATIO = 0.6

# -- defaults -----------------------------------------------------------------------
DEFAULT_SEGMENT_SIZE = 64 * 1024 * 1024
MIN_SEGMENT_SIZE = 4096

assert SEGMENT_HEADER.size == SEGMENT_HEADER_SIZE, SEGMENT_HEADER.size
assert FRAME_HEADER.size == FRAME_HEADER_SIZE, FRAME_HEADER.size
assert WATERMARK.size == WATERMARK_SIZE, WATERMARK.size
assert RECORD_FILE_HEADER.size == RECORD_FILE_HEADER_SIZE, RECORD_FILE_HEADER.size
assert RECORD.size == RECORD_SIZE, RECORD.size
assert RECORD_V2_PLAIN.pack(7, 9) == RECORD.pack(7, 0, 0, 0, 9)
assert RECORD_V2_PLAIN_CHECKSUMMED.pack(7) == RECORD.pack(7, 0, 0, 0, 0)[:RECORD_CHECKSUMMED]
assert RECORD_AAD.size == 40
assert RECORD_AAD_V2.size == 24
assert AAD.size == 48
assert NONCE.size == NONCE_SIZE
assert CHECKPOINT_HEADER.size == CHECKPOINT_HEADER_SIZE, CHECKPOINT_HEADER.size
assert CHECKPOINT_BLOCK.size == CHECKPOINT_BLOCK_SIZE, CHECKPOINT_BLOCK.size
assert CHECKPOINT_AAD.size == 60
