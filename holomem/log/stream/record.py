"""The generation record: which stream holds a store's live generation.

Owns: the small JSON record under key ``generation`` in the store's metadata bucket
(FORMAT.md §11), reading it, and replacing it by compare-and-set, so two writers can
never both switch a store. Imports the standard library, ``nats`` and
:mod:`holomem.errors`.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StorageType
from nats.js.kv import KeyValue

from holomem.errors import CorruptError, FormatVersionError, StoreLockedError

KEY = "generation"
#: 2: a stream message may hold several consecutive transactions (FORMAT.md §11); a
#: version-1 store's streams (one transaction per message) read alike, and its first
#: writer of this build writes the record again as version 2 at its open.
VERSION = 2


class Record(NamedTuple):
    generation: int
    #: the holomem sequence number of the generation's first transaction (and the
    #: number of the stream's first message: the two are equal)
    first_seq: int
    store_id: bytes
    encrypted: bool
    #: HMAC of the key and the store id (empty for a plaintext store)
    key_check: bytes
    #: streams of replaced generations still to be erased (a purge that crashed)
    erase: tuple[int, ...] = ()

    def encode(self) -> bytes:
        return json.dumps({
            "version": VERSION, "generation": self.generation, "first_seq": self.first_seq,
            "store_id": self.store_id.hex(), "encrypted": self.encrypted,
            "key_check": self.key_check.hex(), "erase": list(self.erase)},
            sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes, where: str) -> Record:
        try:
            d = json.loads(raw)
            version = d["version"]
            if version > VERSION:
                raise FormatVersionError(
                    f"{where}: generation record version {version}; this build reads "
                    f"up to {VERSION}")
            return cls(int(d["generation"]), int(d["first_seq"]), bytes.fromhex(d["store_id"]),
                       bool(d["encrypted"]), bytes.fromhex(d["key_check"]),
                       tuple(int(g) for g in d.get("erase", ())))
        except FormatVersionError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptError(f"{where}: the generation record does not parse: {exc}") from exc


async def existing_bucket(js: JetStreamContext, name: str) -> KeyValue | None:
    """The bucket ``name``, or None when the server has none (none is created: an
    open that may not create a store leaves nothing behind)."""
    try:
        return await js.key_value(name)
    except nats.js.errors.BucketNotFoundError:
        return None


async def bucket(js: JetStreamContext, name: str, replicas: int) -> KeyValue:
    """The bucket ``name``, created (``replicas``, file storage) if it is missing."""
    found = await existing_bucket(js, name)
    if found is not None:
        return found
    try:
        return await js.create_key_value(KeyValueConfig(
            bucket=name, history=1, replicas=replicas, storage=StorageType.FILE))
    except nats.js.errors.BadRequestError:
        return await js.key_value(name)


async def read(kv: KeyValue, where: str) -> tuple[Record, int] | None:
    """The record and its revision, or None when the store does not exist."""
    try:
        entry = await kv.get(KEY)
    except nats.js.errors.KeyNotFoundError:
        return None
    assert entry.revision is not None
    return Record.decode(entry.value or b"", where), entry.revision


async def write(kv: KeyValue, record: Record, revision: int, where: str) -> int:
    """Replace the record at ``revision`` (0: create it); return the new revision.
    Errors: ``locked`` when another writer changed it first."""
    try:
        if revision == 0:
            return await kv.create(KEY, record.encode())
        return await kv.update(KEY, record.encode(), last=revision)
    except nats.js.errors.KeyWrongLastSequenceError:
        raise StoreLockedError(f"{where}: another writer changed the generation record") from None
