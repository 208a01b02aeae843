"""The encryption envelope: AES-256-GCM with nonces that never repeat under one key.

Owns: sealing and opening bytes with the store key, the key check value, and the
refusal of a key that does not open a store.
Imports the standard library, ``cryptography`` and :mod:`holomem.errors`. FORMAT.md
("Encryption envelope") documents the layout.

A sealed blob is ``nonce(12) || ciphertext || tag(16)``. The nonce is an 8-byte
random *epoch*, drawn when the envelope is created (so at every open of the store
for writing), followed by a 4-byte counter; a new epoch is drawn when the counter
runs out. Nonces are never derived from sequence numbers or offsets: recovery
truncates a torn tail and writes the same sequence numbers again, and a text
record slot is rewritten in place, so anything positional would repeat.

The associated data is chosen by the caller and binds the blob to where it lives
(store id, generation, segment, sequence number for a frame; the record's slot for
a text record), so a blob moved, replayed or spliced from another store fails.
"""

from __future__ import annotations

import hmac
import os
import threading
from hashlib import sha256

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from holomem.errors import InvalidError, KeyRequiredError, UnexpectedKeyError, WrongKeyError
from holomem.log.format import (
    KEY_CHECK_LABEL,
    KEY_CHECK_SIZE,
    KEY_SIZE,
    NONCE,
    NONCE_SIZE,
    TAG_SIZE,
)

OVERHEAD = NONCE_SIZE + TAG_SIZE


class OpenFailed(Exception):
    """Authentication failed: wrong key, tampered bytes, or a blob out of place."""


def validate_key(key: object) -> bytes | None:
    """Check a caller's key: ``None`` or exactly 32 bytes."""
    if key is None:
        return None
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidError("key must be 32 raw bytes (or None for a plaintext store)")
    raw = bytes(key)
    if len(raw) != KEY_SIZE:
        raise InvalidError(f"key must be exactly {KEY_SIZE} bytes, got {len(raw)}")
    return raw


def key_check(key: bytes, store_id: bytes) -> bytes:
    """The 16-byte key check value stored in every segment header of an encrypted store.

    HMAC-SHA256 under the key, so it reveals nothing about the key, and bound to
    the store id, so two stores with one key have different values.
    """
    return hmac.new(key, KEY_CHECK_LABEL + store_id, sha256).digest()[:KEY_CHECK_SIZE]


def check_store_key(key: bytes | None, *, encrypted: bool, store_id: bytes, check: bytes,
                    where: str) -> None:
    """Refuse ``key`` unless it opens the store at ``where``: ``encrypted`` or not, with
    id ``store_id`` and key check value ``check``. Errors: ``key.required``,
    ``key.unexpected``, ``key.wrong``."""
    if encrypted and key is None:
        raise KeyRequiredError(f"the store at {where!r} is encrypted; pass its key")
    if not encrypted and key is not None:
        raise UnexpectedKeyError(f"the store at {where!r} is not encrypted, but a key was given")
    if key is not None and key_check(key, store_id) != check:
        raise WrongKeyError(f"the key does not open the store at {where!r}")


class Envelope:
    """Seals and opens blobs with one key. Thread safe."""

    __slots__ = ("_aead", "_counter", "_epoch", "_mu")

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)
        self._mu = threading.Lock()
        self._epoch = os.urandom(8)
        self._counter = 0

    def _nonce(self) -> bytes:
        with self._mu:
            if self._counter > 0xFFFFFFFF:
                self._epoch = os.urandom(8)
                self._counter = 0
            nonce = NONCE.pack(self._epoch, self._counter)
            self._counter += 1
            return nonce

    def seal(self, plain: bytes | memoryview, aad: bytes) -> bytes:
        nonce = self._nonce()
        return nonce + self._aead.encrypt(nonce, bytes(plain), aad)

    def open(self, blob: bytes | memoryview, aad: bytes) -> bytes:
        view = memoryview(blob)
        if len(view) < OVERHEAD:
            raise OpenFailed("sealed blob shorter than nonce and tag")
        try:
            return self._aead.decrypt(bytes(view[:NONCE_SIZE]), bytes(view[NONCE_SIZE:]), aad)
        except InvalidTag as exc:
            raise OpenFailed("authentication failed") from exc
