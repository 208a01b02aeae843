"""Starting crash children from a process that imported holomem once.

Owns: the fork server, both sides. A fresh ``python -m holomem.crashtest --child`` spends
most of a run importing holomem (about half a second of CPU, the workload a tenth of
that), and the harness starts hundreds of children. So :func:`run` hands
``python -m MODULE ARGS`` to a server (``python -m holomem.crashtest --fork-server FD
[PRELOAD...]``, :class:`ForkServer`), which imports what a child imports, touches
nothing, and forks once per run (:func:`serve`). Each forked child then goes on exactly
as a fresh ``python -m MODULE ARGS`` would: it moves to the run's directory, takes the
run's environment, arms the crash points and the recorder from it
(:func:`holomem.log.fs.arm_from_environment`: they are otherwise read at import), runs
``MODULE`` as ``__main__`` with ``ARGS`` (:func:`run_forked`) and leaves the interpreter
the same way, by ``os.abort()`` at its crash point or by a normal exit. The server
reports how it ended (its exit status, a signal as a negative number, as
:mod:`subprocess` does) and what it printed. With ``HOLOMEM_CRASH_FRESH=1`` every child
is a fresh interpreter instead. The tests' own crash children (a purge cut short) are
started the same way.

A server answers one request at a time, on a socket its starter holds the other end of,
and ends when that end closes; a process keeps as many as it ran children at once, and
closes them at exit, waiting for each. Imports the standard library and
:mod:`holomem.log.fs`.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from holomem.log import fs

#: Set to 1 in the harness's environment: every child is a fresh interpreter.
FRESH_ENV = "HOLOMEM_CRASH_FRESH"
#: The option the server is started with (then the socket's file descriptor, then the
#: modules it imports before it serves).
OPTION = "--fork-server"


class ForkServer:
    """A server process started with ``env`` (in which nothing is armed) that imported
    ``preload``, and the socket to it. :meth:`run` is one child; one at a time."""

    def __init__(self, env: dict[str, str], preload: Sequence[str] = ()) -> None:
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "holomem.crashtest", OPTION, str(theirs.fileno()),
                 *preload],
                env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = mine
        self._replies = mine.makefile("rb")
        self._lock = threading.Lock()

    def run(self, module: str, argv: Sequence[str], env: dict[str, str], cwd: str,
            timeout: float) -> subprocess.CompletedProcess[str]:
        """Fork a child that runs ``python -m module argv...`` in ``cwd`` with ``env``,
        wait for it (``timeout`` seconds at most: then it is killed and
        :class:`subprocess.TimeoutExpired` raised, as :func:`subprocess.run` does), and
        return how it ended, as :func:`subprocess.run` would."""
        cmd = [sys.executable, "-m", module, *argv]
        request = {"module": module, "argv": list(argv), "env": env, "cwd": cwd,
                   "timeout": timeout}
        with self._lock:
            self.sock.sendall(json.dumps(request).encode() + b"\n")
            # The server kills the child at its deadline; this one is only against a
            # server that stopped answering.
            self.sock.settimeout(timeout + 60.0)
            line = self._replies.readline()
        if not line:
            raise RuntimeError(f"the fork server ended (exit {self.proc.poll()})")
        reply = json.loads(line)
        if reply["timed_out"]:
            raise subprocess.TimeoutExpired(cmd, timeout, reply["stdout"], reply["stderr"])
        return subprocess.CompletedProcess(cmd, reply["returncode"], reply["stdout"],
                                           reply["stderr"])

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        """End the server (it sees its socket close) and wait for it."""
        self._replies.close()
        self.sock.close()
        self.proc.wait(timeout=30)


#: This process's idle servers, by how they were started; the pid they belong to.
_idle: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], list[ForkServer]] = {}
_owner = -1
_guard = threading.Lock()


def fresh() -> bool:
    """True when the children are to be fresh interpreters (``HOLOMEM_CRASH_FRESH=1``)."""
    return os.environ.get(FRESH_ENV, "") == "1"


def run(module: str, argv: Sequence[str], *, env: dict[str, str], cwd: str,
        timeout: float, server_env: dict[str, str], preload: Sequence[str] = ()
        ) -> subprocess.CompletedProcess[str]:
    """``python -m module argv...`` in ``cwd`` with ``env``, waited for (``timeout``
    seconds at most), as :func:`subprocess.run` with its output captured as text: forked
    from an idle server of this process started with ``server_env`` and ``preload``
    imported (one is started when none is idle), or with ``HOLOMEM_CRASH_FRESH=1`` a
    fresh interpreter."""
    if fresh():
        return subprocess.run([sys.executable, "-m", module, *argv], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout, check=False)
    global _owner
    key = (tuple(sorted(server_env.items())), tuple(preload))
    with _guard:
        if _owner != os.getpid():  # none of these are this process's
            _idle.clear()
            _owner = os.getpid()
            atexit.register(_stop)
        idle = _idle.setdefault(key, [])
        server = idle.pop() if idle else None
    if server is None or not server.alive():
        server = ForkServer(server_env, preload)
    try:
        return server.run(module, argv, env, cwd, timeout)
    finally:
        with _guard:
            if server.alive():
                _idle[key].append(server)


def _stop() -> None:
    """At exit: end this process's servers and wait for them (so that they, and the CPU
    time of their children, are accounted to this process)."""
    with _guard:
        servers = [s for idle in _idle.values() for s in idle] if _owner == os.getpid() \
            else []
        _idle.clear()
    for server in servers:
        server.close()


def serve(fd: int, preload: Sequence[str]) -> dict[str, Any] | None:
    """Be the server, on the socket at file descriptor ``fd``, having imported
    ``preload``: answer each request until the socket closes (then return None). In each
    forked child, return its request (for :func:`run_forked`), set up as a fresh child
    would be."""
    for name in preload:
        importlib.import_module(name)
    conn = socket.socket(fileno=fd)
    requests = conn.makefile("rb")
    while True:
        line = requests.readline()
        if not line:
            return None
        request: dict[str, Any] = json.loads(line)
        out_r, out_w = socket.socketpair()
        err_r, err_w = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            requests.close()
            conn.close()
            out_r.close()
            err_r.close()
            _become_child(request, out_w, err_w)
            return request
        out_w.close()
        err_w.close()
        reply = _wait(pid, out_r, err_r, float(request["timeout"]))
        conn.sendall(json.dumps(reply).encode() + b"\n")


def run_forked(request: dict[str, Any]) -> int:
    """In a forked child: run the request's module as ``__main__`` with its arguments,
    as ``python -m`` does; its exit status when it returns (a ``SystemExit`` it raises
    ends the interpreter as it would have)."""
    sys.argv = [sys.argv[0], *request["argv"]]
    runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
    return 0


def _become_child(request: dict[str, Any], out: socket.socket, err: socket.socket) -> None:
    """In the forked child: what the run asks for, in place of what the server had."""
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # What Python code prints goes to the starter; stderr line by line, as a fresh
    # interpreter's does, stdout when flushed (lost in an abort, as it would be).
    sys.stdout = out.makefile("w", encoding="utf-8", errors="backslashreplace")
    sys.stderr = err.makefile("w", buffering=1, encoding="utf-8",
                              errors="backslashreplace")
    fs.arm_from_environment()


def _wait(pid: int, out: socket.socket, err: socket.socket, timeout: float
          ) -> dict[str, Any]:
    """Collect what child ``pid`` prints until it ends (or kill it at ``timeout``);
    how it ended."""
    deadline = time.monotonic() + timeout
    chunks: dict[socket.socket, list[bytes]] = {out: [], err: []}
    timed_out = False
    with selectors.DefaultSelector() as sel:
        for s in chunks:
            sel.register(s, selectors.EVENT_READ)
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                break
            for key, _ in sel.select(left):
                source = key.fileobj
                assert isinstance(source, socket.socket)
                data = source.recv(65536)
                if data:
                    chunks[source].append(data)
                else:
                    sel.unregister(source)
    out.close()
    err.close()
    _, status = os.waitpid(pid, 0)

    def text(s: socket.socket) -> str:
        return b"".join(chunks[s]).decode("utf-8", "replace")

    return {"returncode": os.waitstatus_to_exitcode(status), "stdout": text(out),
            "stderr": text(err), "timed_out": timed_out}
