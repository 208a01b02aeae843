"""Every on-disk layout lives in holomem/log/format.py, and FORMAT.md describes the same
bytes: the text segment's header and records, and the names of backup files (issue 12).

A struct layout defined anywhere else could change without FORMAT.md's tests noticing,
so the last test walks the package with ``ast`` for ``struct`` layouts outside
format.py.
"""

from __future__ import annotations

import ast
import os
import re
import struct

from holomem.log.format import (
    BACKUP_SUFFIX,
    CHECKPOINT_AAD,
    CHECKPOINT_BLOCK,
    CHECKPOINT_BLOCK_CHECKSUMMED,
    CHECKPOINT_BLOCK_COMPRESSED,
    CHECKPOINT_BLOCK_LAST,
    CHECKPOINT_BLOCK_PAYLOAD,
    CHECKPOINT_BLOCK_SEALED,
    CHECKPOINT_CHECKSUMMED,
    CHECKPOINT_DIGEST_SIZE,
    CHECKPOINT_FLAG_SEALED,
    CHECKPOINT_HEADER,
    CHECKPOINT_HEADER_SIZE,
    CHECKPOINT_MAGIC,
    CHECKPOINT_VERSION,
    RECORD,
    RECORD_AAD,
    RECORD_AAD_V2,
    RECORD_CHECKSUMMED,
    RECORD_FILE_HEADER,
    RECORD_FILE_HEADER_CHECKSUMMED,
    RECORD_FILE_HEADER_SIZE,
    RECORD_FILE_MAGIC,
    RECORD_FLAG_SEALED,
    RECORD_SIZE,
    backup_name,
    checkpoint_name,
)
from tests import sourcetree

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "holomem")
WIDTHS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q"}


def _doc() -> str:
    with open(os.path.join(ROOT, "FORMAT.md"), encoding="utf-8") as f:
        return f.read()


def _text_segment_section() -> str:
    return _doc().split("### 9.1 The text segment", 1)[1].split("### 9.2", 1)[0]


def _checkpoint_section() -> str:
    return _doc().split("### 9.2 Checkpoints", 1)[1].split("## 9b.", 1)[0]


def _struct_offsets(layout: struct.Struct) -> list[tuple[int, int]]:
    out, pos = [], 0
    for field in re.findall(r"\d*[a-zA-Z]", layout.format.lstrip("<")):
        size = struct.calcsize("<" + field)
        out.append((pos, size))
        pos += size
    return out


def _grammar(rule: str) -> str:
    """The struct format of a ``name := field: type ...`` rule of FORMAT.md."""
    out = "<"
    for _name, kind, count in re.findall(r"(\w+): (u8|u16|u32|u64|byte\[(\d+)\])", rule):
        out += f"{count}s" if count else WIDTHS[kind]
    return out


def test_the_text_segment_header_table_matches_format_py() -> None:
    section = _text_segment_section()
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|", section, re.M)
    assert [(int(o), int(s)) for o, s in rows] == _struct_offsets(RECORD_FILE_HEADER)
    assert RECORD_FILE_HEADER.size == RECORD_FILE_HEADER_SIZE == 64
    assert int(rows[-1][0]) == RECORD_FILE_HEADER_CHECKSUMMED
    assert f"of bytes [0, {RECORD_FILE_HEADER_CHECKSUMMED})" in section
    assert '`"HOLOREC\\0"`' in section and RECORD_FILE_MAGIC == b"HOLOREC\x00"
    assert "bit 0: records are sealed" in section and RECORD_FLAG_SEALED == 1


def test_the_record_grammar_matches_format_py() -> None:
    section = _text_segment_section()
    record = section.split("record   :=", 1)[1].split("body     :=", 1)[0]
    assert _grammar(record) == RECORD.format and RECORD.size == RECORD_SIZE
    assert f"record[0:{RECORD_CHECKSUMMED}]" in record
    aad = section.split("aad      :=", 1)[1].split("\n", 1)[0]
    assert _grammar(aad) == RECORD_AAD.format
    aad_v2 = section.split("aad_v2   :=", 1)[1].split("\n", 1)[0]
    assert _grammar(aad_v2) == RECORD_AAD_V2.format


def test_the_checkpoint_header_table_matches_format_py() -> None:
    section = _checkpoint_section()
    rows = re.findall(r"^\|\s*(\d+)\s*\|\s*(\d+)\s*\|", section, re.M)
    assert [(int(o), int(s)) for o, s in rows] == _struct_offsets(CHECKPOINT_HEADER)
    assert CHECKPOINT_HEADER.size == CHECKPOINT_HEADER_SIZE == 88
    assert CHECKPOINT_DIGEST_SIZE == 16 and CHECKPOINT_VERSION == 2
    assert int(rows[-1][0]) == CHECKPOINT_CHECKSUMMED
    assert f"of bytes [0, {CHECKPOINT_CHECKSUMMED})" in section
    assert '`"HOLOCKP\\0"`' in section and CHECKPOINT_MAGIC == b"HOLOCKP\x00"
    assert "bit 0: the blocks are sealed" in section and CHECKPOINT_FLAG_SEALED == 1
    assert f"from offset {CHECKPOINT_HEADER_SIZE}" in section
    assert CHECKPOINT_BLOCK_PAYLOAD == 4 << 20 and "pieces\nof 4 MiB" in section
    assert checkpoint_name(42) == "checkpoint-0000000000000042.hck"
    assert "(`gen-N/checkpoint-<seq>.hck`)" in section


def test_the_checkpoint_block_grammar_matches_format_py() -> None:
    section = _checkpoint_section()
    block = section.split("block    :=", 1)[1].split("body     :=", 1)[0]
    assert _grammar(block) == CHECKPOINT_BLOCK.format
    assert f"block[0:{CHECKPOINT_BLOCK_CHECKSUMMED}]" in block
    flags = (CHECKPOINT_BLOCK_COMPRESSED, CHECKPOINT_BLOCK_SEALED, CHECKPOINT_BLOCK_LAST)
    assert flags == (1, 2, 4)
    assert "bit 0: compressed (zstd), bit 1: sealed, bit 2: last block" in block
    aad = section.split("aad      :=", 1)[1].split("\n", 1)[0]
    assert _grammar(aad) == CHECKPOINT_AAD.format


def test_backup_names_are_the_ones_format_md_gives() -> None:
    section = _doc().split("**What is cut is kept.**", 1)[1]
    assert f"`STORE{BACKUP_SUFFIX}/<file>.<offset>.<unix time>.bin`" in section
    assert "a counter\n  is added before `.bin`" in section
    assert backup_name("seg-00000001.hlj", 130, 1700000000) == "seg-00000001.hlj.130.1700000000.bin"
    assert backup_name("f", 0, 5, 2) == "f.0.5.2.bin"


def _layouts_outside_format_py() -> list[str]:
    """Every ``struct.Struct(...)``, every ``struct.pack``/``unpack`` with a literal
    format string and every ``from struct import`` in holomem/, outside
    holomem/log/format.py."""
    found = []
    for path in sourcetree.files("holomem"):
        if path == os.path.join(PACKAGE, "log", "format.py"):
            continue
        for node in ast.walk(sourcetree.tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module == "struct":
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "struct"):
                continue
            literal = bool(node.args) and isinstance(node.args[0], ast.Constant)
            if node.func.attr == "Struct" or literal:
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    return found


def test_no_byte_layout_is_defined_outside_format_py() -> None:
    assert _layouts_outside_format_py() == []
