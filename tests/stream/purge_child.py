"""A writer that remembers a marked fact among others, then forgets it with purge.

    python -m tests.stream.purge_child URL [KEYHEX]

prints ``acked`` once every fact is acknowledged, then purges (the crash harness's
``HOLOMEM_CRASH_AT`` aborts it somewhere in there) and prints ``purged``.
"""

from __future__ import annotations

import sys

from holomem import Memory, Store

MARKER = "bittern-marker"


def main() -> None:
    key = bytes.fromhex(sys.argv[2]) if len(sys.argv) > 2 else None
    with Store.open(sys.argv[1], key=key) as store:
        memory = Memory(store)
        fid = memory.remember(f"the {MARKER} booms in the reeds at dawn " * 4).id
        for i in range(5):
            memory.remember(f"a fact to keep {i}")
        print("acked", fid, flush=True)
        memory.forget({"ids": [fid]}, {"purge": True})
        print("purged", flush=True)


if __name__ == "__main__":
    main()
