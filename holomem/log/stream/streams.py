"""The streams of a store's generations: creating one, reading it, erasing it.

Owns: the stream configuration (file storage, replicas, first sequence number equal to
the generation's first holomem sequence number, a duplicate window for idempotent
publishing), reading messages by sequence (one, or a range through an ordered
consumer), and erasing a replaced generation: every message deleted with the
server's secure-erase delete (its bytes overwritten on every replica) before the
stream itself is deleted. Coroutines, run on the connection's loop. Imports the
standard library, ``nats`` and :mod:`holomem.errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

import nats.errors
import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy, DiscardPolicy, StorageType, StreamConfig

from holomem.errors import UnavailableError

#: Seconds within which a resent message is recognised as a duplicate.
DUPLICATE_WINDOW = 120.0
#: Messages an ordered consumer may deliver ahead of the reader.
PENDING = 4096


async def create(js: JetStreamContext, name: str, subject: str, first_seq: int,
                 replicas: int) -> None:
    """Create the stream of a generation (nothing happens if it exists as configured)."""
    await js.add_stream(StreamConfig(
        name=name, subjects=[subject], storage=StorageType.FILE, num_replicas=replicas,
        first_seq=first_seq, duplicate_window=DUPLICATE_WINDOW, discard=DiscardPolicy.NEW,
        max_msgs=-1, max_bytes=-1, max_age=0, allow_direct=False, deny_delete=False))


async def last_seq(js: JetStreamContext, name: str) -> tuple[int, int, int]:
    """(first, last, bytes) of the stream: last is first - 1 when it holds nothing."""
    info = await js.stream_info(name)
    state = info.state
    first = info.config.first_seq or 1
    if not state.messages:
        return first, max(first - 1, state.last_seq), 0
    return state.first_seq, state.last_seq, state.bytes


async def exists(js: JetStreamContext, name: str) -> bool:
    try:
        await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        return False
    return True


async def get(js: JetStreamContext, name: str, seq: int) -> bytes | None:
    """Message ``seq``'s bytes, or None if the stream holds no such message."""
    try:
        msg = await js.get_msg(name, seq)
    except nats.js.errors.NotFoundError:
        return None
    return msg.data or b""


async def messages(js: JetStreamContext, name: str, subject: str, start: int, stop: int,
                   timeout: float) -> AsyncGenerator[tuple[int, bytes], None]:
    """(stream seq, bytes) of every message from ``start`` to ``stop``, in order, through
    an ordered consumer (deleted messages are skipped). Errors: ``unavailable``."""
    if start > stop:
        return
    sub = await js.subscribe(
        subject, stream=name, ordered_consumer=True,
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        config=ConsumerConfig(opt_start_seq=start), pending_msgs_limit=PENDING)
    try:
        while True:
            try:
                msg = await sub.next_msg(timeout)
            except nats.errors.TimeoutError:
                raise UnavailableError(
                    f"stream {name}: message {start}.. did not arrive within {timeout:g} s"
                ) from None
            seq = msg.metadata.sequence.stream
            if seq > stop:
                return
            yield seq, msg.data
            if seq >= stop:
                return
    finally:
        with contextlib.suppress(asyncio.TimeoutError, nats.errors.Error):
            await asyncio.wait_for(sub.unsubscribe(), 2.0)


async def erase(js: JetStreamContext, name: str) -> int:
    """Securely delete every message of stream ``name``, then delete the stream; return
    how many messages were erased. A missing stream is already erased."""
    try:
        info = await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        return 0
    erased = 0
    if info.state.messages:
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            try:
                # No "no_erase" in the request: the server overwrites the message's
                # bytes on every replica before it answers.
                await js.delete_msg(name, seq)
                erased += 1
            except nats.js.errors.NotFoundError:
                continue  # deleted by an erase that was interrupted
            except nats.js.errors.APIError as exc:
                if exc.err_code == 10057:  # no message found
                    continue
                raise
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await js.delete_stream(name)
    return erased
