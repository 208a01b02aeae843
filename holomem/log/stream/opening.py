"""Opening a ``nats://`` store: the writer's lease and the generation record it finds.

Owns: how many replicas a store gets when its address names none, taking the writer's
lease (and starting its renewals), and settling the generation record an opener finds:
creating a new store's record and first stream, checking the key against the record,
and, for a writer, writing the record again at once -- so that a writer that held the
lease before can no longer switch the store to a generation it compacted -- and erasing
what an interrupted purge or compaction left. Coroutines, run on the connection's loop.
Imports the standard library, ``nats`` and the log.
"""

from __future__ import annotations

import os

from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from holomem.errors import NotFoundError
from holomem.log.envelope import check_store_key, key_check
from holomem.log.stream import lease as leases
from holomem.log.stream import record, streams
from holomem.log.stream.lease import Lease
from holomem.log.stream.loop import Connection
from holomem.log.stream.url import Address


def default_replicas(conn: Connection) -> int:
    """3 when the servers known to the connection make a cluster of three or more, else 1."""
    nc = conn.nc
    assert nc is not None
    known = set(conn.servers) | {str(u) for u in nc.discovered_servers}
    return 3 if len(known) >= 3 else 1


async def take_lease(js: JetStreamContext, address: Address, replicas: int,
                     where: str) -> Lease:
    """The writer's lease, taken and renewing. Errors: ``locked``."""
    kv = await leases.bucket(js, address.lease_bucket, address.lease, replicas)
    ttl = (await kv.status()).ttl or address.lease
    lease = await Lease.take(kv, ttl, address.wait, where, address.advertise)
    lease.start()
    return lease


async def settle_record(js: JetStreamContext, address: Address, meta: KeyValue, *,
                        key: bytes | None, writer: bool, create: bool, replicas: int,
                        where: str) -> tuple[record.Record, int]:
    """The generation record and its revision, as the opener may use them. Errors:
    ``not_found`` (no store, and a follower or ``create=False``), ``key.*``,
    ``locked`` (another writer changed the record), ``unavailable``."""
    found = await record.read(meta, where)
    if found is None:
        if not writer or not create:
            raise NotFoundError(f"no holomem store at {where!r}")
        store_id = os.urandom(16)
        rec = record.Record(1, 1, store_id, key is not None,
                            b"" if key is None else key_check(key, store_id))
        await streams.create(js, address.stream(1), address.subject(1), 1, replicas)
        revision = await record.write(meta, rec, 0, where)
    else:
        rec, revision = found
    check_store_key(key, encrypted=rec.encrypted, store_id=rec.store_id,
                    check=rec.key_check, where=where)
    if writer:
        # Written first at every writer's open, even unchanged: the revision moves,
        # so a writer that held the lease before this one can no longer switch the
        # store to a generation it compacted (its compare-and-set names the old
        # revision) while the streams below are erased.
        revision = await record.write(meta, rec, revision, where)
        for old in rec.erase:  # a purge switched, then stopped before erasing
            await streams.erase(js, address.stream(old))
        # A compaction that stopped before the switch left its new stream.
        await streams.erase(js, address.stream(rec.generation + 1))
        if rec.erase:
            rec = rec._replace(erase=())
            revision = await record.write(meta, rec, revision, where)
    return rec, revision
