"""Scanning a node's files for a marker: raw bytes, and inside every zstd frame."""

from __future__ import annotations

import os

import zstandard

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def _inside_zstd(data: bytes, marker: bytes) -> bool:
    d = zstandard.ZstdDecompressor()
    at = data.find(ZSTD_MAGIC)
    while at >= 0:
        try:
            out = d.decompressobj().decompress(data[at:at + (1 << 22)])
            if marker in out:
                return True
        except zstandard.ZstdError:
            pass
        at = data.find(ZSTD_MAGIC, at + 1)
    return False


def files_with(root: str, marker: bytes) -> list[str]:
    """Every file under ``root`` holding ``marker``, plainly or zstd-compressed."""
    found = []
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if marker in data or _inside_zstd(data, marker):
                found.append(path)
    return found
