"""Named crash points on the write path, and the switch that fires them.

Owns: the registry of crash points and the decision to abort at one. Imports only
the standard library, and writes no file: the trace below is appended by the sink
that :mod:`holomem.log.fs` installs at its import (:func:`trace_to`), so that every
file operation stays in the file layer.

Every step of the write path where a crash matters calls :func:`hit` with a name
registered here. In normal use the environment variables below are unset and
``hit`` is a function that returns at once. The crash-injection harness
(``python -m holomem.crashtest``) starts a child process with

- ``HOLOMEM_CRASH_AT=name:N`` — ``os.abort()`` the N-th time (1-based) ``name`` is
  reached;
- ``HOLOMEM_CRASH_TRACE=path`` — append every reached name to ``path`` (one per
  line), so a test can prove that every registered point was exercised.

Both are read at import, and again by :func:`configure`: the harness forks its children
from a process that imported holomem already (:mod:`holomem.crashtest.forkserver`), and
each child arms the switch from its own environment that way.
"""

from __future__ import annotations

import os
from collections.abc import Callable

#: name -> what happens at that moment.
REGISTRY: dict[str, str] = {}


def point(name: str, description: str) -> str:
    """Register crash point ``name`` and return it (registration is idempotent)."""
    known = REGISTRY.get(name)
    if known is not None and known != description:
        raise ValueError(f"crash point {name!r} registered twice with different meanings")
    REGISTRY[name] = description
    return name


def _parse(spec: str) -> tuple[str, int]:
    name, _, count = spec.rpartition(":")
    if not name or not count.isdigit() or int(count) < 1:
        raise ValueError(f"HOLOMEM_CRASH_AT must be 'name:N' with N >= 1, got {spec!r}")
    return name, int(count)


#: The file every reached point is appended to (``HOLOMEM_CRASH_TRACE``), or "".
TRACE = ""
_target: tuple[str, int] | None = None
_counts: dict[str, int] = {}
_trace: Callable[[bytes], None] | None = None


def trace_to(sink: Callable[[bytes], None]) -> None:
    """Append each reached point's name, one line each, with ``sink`` (when
    :data:`TRACE` is set; the file layer calls this at its import)."""
    global _trace
    _trace = sink


def _armed_hit(name: str) -> None:
    if TRACE:
        # Every module with crash points imports the file layer, which set the sink.
        assert _trace is not None, "holomem.log.fs installs the trace sink at import"
        _trace(name.encode() + b"\n")
    if _target is not None and name == _target[0]:
        n = _counts.get(name, 0) + 1
        _counts[name] = n
        if n == _target[1]:
            os.abort()


def _idle_hit(name: str) -> None:
    return None


#: Reach crash point ``name``: a no-op unless the harness armed it.
hit: Callable[[str], None] = _idle_hit


def configure(spec: str, trace: str) -> None:
    """Arm the switch as ``HOLOMEM_CRASH_AT=spec`` and ``HOLOMEM_CRASH_TRACE=trace`` say
    ("" for unset), with no point reached yet and no trace sink (the file layer sets it:
    :func:`holomem.log.fs.arm_from_environment`). Done at import from the environment."""
    global TRACE, _target, _trace, hit
    target = _parse(spec) if spec else None
    TRACE, _target, _trace = trace, target, None
    _counts.clear()
    hit = _armed_hit if (target is not None or trace) else _idle_hit


configure(os.environ.get("HOLOMEM_CRASH_AT", ""), os.environ.get("HOLOMEM_CRASH_TRACE", ""))


def armed() -> bool:
    """True when this process was started by the crash harness."""
    return _target is not None or bool(TRACE)
