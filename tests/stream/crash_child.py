"""The crash workload on a stream store: remembers, a forget, a purge, more remembers.

    python -m tests.stream.crash_child URL

prints ``ok TEXT`` after each remember returned, ``forgot ID`` after the forget, and
``done``; the harness's ``HOLOMEM_CRASH_AT`` aborts it at one named point.
"""

from __future__ import annotations

import sys

from holomem import Memory, Store


def main() -> None:
    with Store.open(sys.argv[1]) as store:
        memory = Memory(store)
        first = ""
        for i in range(6):
            text = f"the crash workload's fact {i}"
            fid = memory.remember(text).id
            first = first or fid
            print("ok", text, flush=True)
        memory.forget({"ids": [first]}, {"purge": True})
        print("forgot", first, flush=True)
        for i in range(6, 9):
            text = f"the crash workload's fact {i}"
            memory.remember(text)
            print("ok", text, flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
