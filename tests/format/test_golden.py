"""FORMAT.md and holomem/log/format.py describe the same bytes, and old files stay readable."""

from __future__ import annotations

import os
import re
import shutil
import struct

import pytest
import xxhash

from holomem.errors import ChecksumError
from holomem.log import Journal
from holomem.log.format import (
    FRAME_HEADER,
    FRAME_HEADER_SIZE,
    SEGMENT_CHECKSUMMED,
    SEGMENT_HEADER,
    SEGMENT_HEADER_SIZE,
    SEGMENT_MAGIC,
    WATERMARK,
    WATERMARK_CHECKSUMMED,
    WATERMARK_FILE,
    WATERMARK_MAGIC,
    WATERMARK_SIZE,
    generation_name,
    segment_name,
)
from holomem.log.segment import scan_frames, unpack_header
from holomem.log.watermark import Watermark, unpack_watermark

from .make_golden import KEY, SALT, STORE_ID, TRANSACTIONS, build, build_watermark

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(ROOT, "tests", "format", "golden")
FORMAT_MD = os.path.join(ROOT, "FORMAT.md")


def _doc() -> str:
    with open(FORMAT_MD, encoding="utf-8") as f:
        return f.read()


def _golden(name: str) -> bytes:
    with open(os.path.join(GOLDEN, name), "rb") as f:
        return f.read()


def _install(tmp_path: object, name: str) -> str:
    store = os.path.join(str(tmp_path), "store")
    gen = os.path.join(store, generation_name(1))
    os.makedirs(gen)
    shutil.copy(os.path.join(GOLDEN, name), os.path.join(gen, segment_name(1)))
    return store


def _table_offsets(section: str) -> list[tuple[int, int]]:
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|", section, re.M)
    return [(int(o), int(s)) for o, s in rows]


def _struct_offsets(layout: struct.Struct) -> list[tuple[int, int]]:
    sizes = [struct.calcsize("<" + f)
             for f in re.findall(r"\d*[a-zA-Z]", layout.format.lstrip("<"))]
    expected = []
    pos = 0
    for size in sizes:
        expected.append((pos, size))
        pos += size
    return expected


def test_segment_header_table_in_format_md_matches_the_struct() -> None:
    section = _doc().split("## 2. Segment header", 1)[1].split("## 3.", 1)[0]
    offsets = _table_offsets(section)
    assert offsets == _struct_offsets(SEGMENT_HEADER)
    assert sum(offsets[-1]) == SEGMENT_HEADER_SIZE
    assert offsets[-1][0] == SEGMENT_CHECKSUMMED


def test_watermark_table_in_format_md_matches_the_struct() -> None:
    section = _doc().split("### 7.1 The watermark", 1)[1].split("## 8.", 1)[0]
    offsets = _table_offsets(section.split("**A watermark is valid iff**", 1)[0])
    assert offsets == _struct_offsets(WATERMARK)
    assert sum(offsets[-1]) == WATERMARK_SIZE
    assert offsets[-1][0] == WATERMARK_CHECKSUMMED
    assert "`48 4F 4C 4F 57 4D 4B 00`" in section and WATERMARK_MAGIC == b"HOLOWMK\x00"
    assert f"`gen-N/{WATERMARK_FILE}`" in _doc()


def test_frame_grammar_in_format_md_matches_the_struct() -> None:
    section = _doc().split("## 3. Frame", 1)[1].split("## 4.", 1)[0]
    fields = re.findall(r"(\w+): (u8|u16|u32|u64)", section.split("body     :=", 1)[0])
    widths = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q"}
    assert "<" + "".join(widths[t] for _, t in fields) == FRAME_HEADER.format
    assert FRAME_HEADER_SIZE == 24


def test_checksum_test_vectors_in_format_md_hold() -> None:
    doc = _doc()
    assert "0x9f7845b5c4cd4301" in doc and "0x24011ad6b5391821" in doc
    assert xxhash.xxh3_64_intdigest(b"holomem") == 0x9F7845B5C4CD4301
    assert xxhash.xxh3_64_intdigest(b"holomem", 0x0123456789ABCDEF) == 0x24011AD6B5391821


def _hex_dump(section: str) -> bytes:
    dump = re.findall(r"^[0-9a-f]{8}: ((?:[0-9a-f]{2,4} ?)+)", section, re.M)
    return bytes.fromhex("".join(line.replace(" ", "") for line in dump))


def test_worked_hex_example_in_format_md_is_the_golden_file() -> None:
    section = _doc().split("## 10. Worked example", 1)[1]
    segment, watermark = section.split("Its watermark", 1)
    assert _hex_dump(segment) == _golden("plain-seg-00000001.hlj")
    assert _hex_dump(watermark) == _golden("plain-watermark")


def test_golden_watermark_decodes_to_what_a_clean_close_records() -> None:
    data = _golden("plain-watermark")
    assert data[:8] == WATERMARK_MAGIC
    assert unpack_watermark(data, "golden") == Watermark(STORE_ID, 1, 1, 2, 217)
    assert len(_golden("plain-seg-00000001.hlj")) == 217
    assert xxhash.xxh3_64_intdigest(data[:64]) == int.from_bytes(data[64:], "little")


def test_a_store_of_the_previous_build_opens_and_its_writer_records_the_golden_watermark(
        tmp_path: object) -> None:
    """Stores written before the watermark existed (no such file) still open, read-only
    and for writing; the writer's open gives them the watermark, byte for byte."""
    store = _install(tmp_path, "plain-seg-00000001.hlj")
    gen = os.path.join(store, generation_name(1))
    with Journal.open(store, read_only=True) as j:
        assert list(j.replay()) == [(1, TRANSACTIONS[0]), (2, TRANSACTIONS[1])]
    assert not os.path.exists(os.path.join(gen, WATERMARK_FILE))  # a follower writes nothing
    with Journal.open(store) as j:
        assert list(j.replay()) == [(1, TRANSACTIONS[0]), (2, TRANSACTIONS[1])]
    with open(os.path.join(gen, WATERMARK_FILE), "rb") as f:
        assert f.read() == _golden("plain-watermark")


def _flip_last_frame(store: str) -> str:
    seg = os.path.join(store, generation_name(1), segment_name(1))
    with open(seg, "r+b") as f:
        f.seek(200)  # inside the last frame's body (frame 2: bytes 0x85-0xd8)
        byte = f.read(1)[0]
        f.seek(200)
        f.write(bytes([byte ^ 0x10]))
    return seg


def test_the_golden_watermark_makes_a_damaged_last_frame_an_error_not_a_torn_tail(
        tmp_path: object) -> None:
    with_mark = _install(tmp_path / "with", "plain-seg-00000001.hlj")  # type: ignore[operator]
    shutil.copy(os.path.join(GOLDEN, "plain-watermark"),
                os.path.join(with_mark, generation_name(1), WATERMARK_FILE))
    seg = _flip_last_frame(with_mark)
    with pytest.raises(ChecksumError) as info:
        Journal.open(with_mark, read_only=True)
    assert (info.value.path, info.value.offset) == (seg, 0x85)
    # Without one (the previous build's store), the rule is the old one: a torn tail.
    without = _install(tmp_path / "without", "plain-seg-00000001.hlj")  # type: ignore[operator]
    _flip_last_frame(without)
    with Journal.open(without, read_only=True) as j:
        assert [p.offset for p in j.recovery.truncated] == [0x85]
        assert list(j.replay()) == [(1, TRANSACTIONS[0])]


def test_golden_plain_segment_decodes_to_its_transactions(tmp_path: object) -> None:
    data = _golden("plain-seg-00000001.hlj")
    header = unpack_header(data, "golden")
    assert data[:8] == SEGMENT_MAGIC
    assert (header.store_id, header.generation, header.number, header.first_seq, header.salt) == (
        STORE_ID, 1, 1, 1, SALT)
    scan = scan_frames(data, header)
    assert scan.problem is None and list(scan.offsets) == [96, 133]
    with Journal.open(_install(tmp_path, "plain-seg-00000001.hlj"), read_only=True) as j:
        assert list(j.replay()) == [(1, TRANSACTIONS[0]), (2, TRANSACTIONS[1])]


def test_golden_encrypted_segment_decodes_with_its_key_only(tmp_path: object) -> None:
    store = _install(tmp_path, "encrypted-seg-00000001.hlj")
    with Journal.open(store, read_only=True, key=KEY) as j:
        assert list(j.replay()) == [(1, TRANSACTIONS[0]), (2, TRANSACTIONS[1])]
    with pytest.raises(Exception) as info:
        Journal.open(store, read_only=True, key=bytes(32))
    assert getattr(info.value, "code", "") == "key.wrong"


def test_this_build_writes_the_golden_bytes_for_the_same_inputs() -> None:
    # Compression output may legitimately change with the zstd version; the
    # uncompressed first frame and the header must not.
    assert build(False)[:133] == _golden("plain-seg-00000001.hlj")[:133]
    assert build(True)[:96] == _golden("encrypted-seg-00000001.hlj")[:96]
    assert build_watermark(False)[:56] == _golden("plain-watermark")[:56]
