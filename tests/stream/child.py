"""A writer process for the fault tests: remembers facts and reports each acknowledged one.

    python -m tests.stream.child URL COUNT TAG

prints ``ok N`` after remember N returned, ``err CODE`` when one failed (then stops),
and ``done`` at the end; with COUNT 0 it remembers until stdin closes... line by line:
each line read from stdin is one remember of that text.
"""

from __future__ import annotations

import sys

from holomem import Memory, Store
from holomem.errors import HolomemError


def main() -> None:
    url, count, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    store = Store.open(url)
    memory = Memory(store)
    print("open", flush=True)
    texts = (f"{tag} fact {i}" for i in range(count)) if count else (
        line.strip() for line in sys.stdin)
    for i, text in enumerate(texts):
        try:
            memory.remember(text)
        except HolomemError as exc:
            print("err", exc.code, flush=True)
            return
        print("ok", i, flush=True)
    print("done", flush=True)
    store.close()


if __name__ == "__main__":
    main()
