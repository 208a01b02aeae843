"""The log: a segmented, checksummed, durable journal of opaque payloads.

Knows nothing of what the payloads mean (leveldb's log never sees a WriteBatch).
May import only the standard library, xxhash, zstandard, cryptography and
:mod:`holomem.errors`. FORMAT.md documents every byte it writes.
"""

from holomem.log.follower import Refreshed
from holomem.log.journal import Journal, JournalStats
from holomem.log.opening import Recovery

__all__ = ["Journal", "JournalStats", "Recovery", "Refreshed"]
