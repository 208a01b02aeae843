"""The journal's checksum: xxh3-64.

Owns: how checksums are computed. Imports only xxhash. FORMAT.md ("Checksums")
gives the test vectors that ``tests/format/`` checks.
"""

from __future__ import annotations

import xxhash

_xxh3 = xxhash.xxh3_64_intdigest


#: :func:`checksum` with no Python call around it, for a loop over many records.
xxh3 = _xxh3


def checksum(data: bytes | memoryview, seed: int = 0) -> int:
    """xxh3-64 of ``data`` with ``seed``, as an unsigned 64-bit integer."""
    return _xxh3(data, seed)


def checksum_parts(head: bytes | memoryview, body: bytes | memoryview, seed: int) -> int:
    """xxh3-64 of ``head`` followed by ``body``, without joining them."""
    h = xxhash.xxh3_64(head, seed)
    h.update(body)
    return h.intdigest()
