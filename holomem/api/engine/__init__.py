"""The engine tier: the journal wired to the projections (docs/contract.md §2).

- :mod:`.core` — :class:`Engine`: open, ``commit(build)``, ``reading()``/``read()``,
  followers, compaction's switch, close: the state and locks its collaborators share;
- :mod:`.checkpointing` — which checkpoint an open trusts, and the writer's checkpoints;
- :mod:`.deferral` — ``deferring`` blocks, and when listeners hear of a commit;
- :mod:`.following` — a follower catching up with the writer;
- :mod:`.store` — :class:`Store`: the document calls on top of it;
- :mod:`.view` — :class:`View`: the read handle of one revision, the only way up;
- :mod:`.replay` and :mod:`.compaction` — building a generation, and rewriting one;
- :mod:`.types` — the document engine's Structs;
- :mod:`.holder` — who holds a store's writer lock, for a door to name it.

Imports the log, the events, the projections and :mod:`holomem.api.engine.validate`;
nothing in the engine imports the memory API or a door.
"""

from holomem.api.engine.core import Engine
from holomem.api.engine.holder import lock_holder
from holomem.api.engine.store import Store
from holomem.api.engine.types import Document, DocumentInput, Hit, StoreCounters, StoreStats
from holomem.api.engine.view import View

__all__ = ["Document", "DocumentInput", "Engine", "Hit", "Store", "StoreCounters",
           "StoreStats", "View", "lock_holder"]
