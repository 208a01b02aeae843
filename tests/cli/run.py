"""Running the real ``holomem`` command line in child processes, as a user's shell does.

Every child gets stdin from the null device unless a test gives it input, so a
command that asks for confirmation never inherits the terminal pytest may run in.
Independent commands run side by side (each child spends most of its time starting
Python), and stores are set up through the library, which is not what is tested here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from holomem import Memory, Store

ROOT = Path(__file__).resolve().parents[2]
#: Children started at once by :func:`holomem_all`.
PARALLEL = 4

Done = subprocess.CompletedProcess[str]


def holomem(*args: str, stdin: str | None = None, timeout: float = 120) -> Done:
    """``python -m holomem ARGS`` with stdout and stderr captured (text)."""
    return subprocess.run([sys.executable, "-m", "holomem", *args], cwd=ROOT,
                          input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, text=True, timeout=timeout, check=False)


#: Commands that open their store as its writer (unless they only look: a dry run).
WRITERS = {"remember", "import", "forget", "config", "relate", "unrelate"}


def _writes(args: Sequence[str]) -> bool:
    looks = "--dry-run" in args or (args[:1] == ["config"] and "--set" not in args)
    return bool(args) and args[0] in WRITERS and not looks


def holomem_all(commands: Iterable[Sequence[str]]) -> list[Done]:
    """Several independent commands; the results in the same order. Readers run side by
    side; writers one after another, after them (two writers of one store at once
    would see each other's lock, which is not what these tests are about)."""
    cases = [list(c) for c in commands]
    done: dict[int, Done] = {}
    readers = [i for i, c in enumerate(cases) if not _writes(c)]
    with ThreadPoolExecutor(PARALLEL) as pool:
        for i, result in zip(readers, pool.map(lambda i: holomem(*cases[i]), readers),
                             strict=True):
            done[i] = result
    for i, c in enumerate(cases):
        if i not in done:
            done[i] = holomem(*c)
    return [done[i] for i in range(len(cases))]


def jsonl(text: str) -> list[Any]:
    """JSON Lines: every line must be one JSON value."""
    return [json.loads(line) for line in text.splitlines()]


def make_store(path: Path, facts: list[dict[str, Any]], config: Any = None) -> list[str]:
    """A store holding ``facts`` (one transaction); returns their ids."""
    with Store.open(path) as store:
        return [r.id for r in Memory(store, config).remember_many(facts)]
