"""Starting the harness's children from a process that imported holomem once.

Owns: the fork server, both sides. A fresh ``python -m holomem.crashtest --child`` spends
most of a run importing holomem (about half a second of CPU, the workload a tenth of
that), and the harness starts hundreds of children. So a process that starts children
(:func:`holomem.crashtest.child.spawn`) starts one server
(``python -m holomem.crashtest --fork-server FD``, :class:`ForkServer`), which imports
what a child imports, touches nothing, and forks once per run (:func:`serve`). Each
forked child then goes on exactly as a fresh child would: it moves to the run's
directory, takes the run's environment, arms the crash points and the recorder from it
(:func:`holomem.log.fs.arm_from_environment`: they are otherwise read at import), runs
:func:`holomem.crashtest.child.main` and leaves the interpreter the same way, by
``os.abort()`` at its crash point or by a normal exit. The server reports how it ended
(its exit status, a signal as a negative number, like :mod:`subprocess`) and what it
printed. With ``HOLOMEM_CRASH_FRESH=1`` every child is a fresh interpreter instead.

The server answers one request at a time, on a socket its starter holds the other end
of; it ends when that end closes (its starter closes it at exit, and waits for it).
Imports the standard library and :mod:`holomem.log.fs`.
"""

from __future__ import annotations

import atexit
import json
import os
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
#: The option the server is started with (before the socket's file descriptor).
OPTION = "--fork-server"


class ForkServer:
    """A server process started with ``env`` (in which nothing is armed), and the
    socket to it. :meth:`run` is one child; one at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "holomem.crashtest", OPTION, str(theirs.fileno())],
                env=env, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.sock = mine
        self._replies = mine.makefile("rb")
        self._lock = threading.Lock()

    def run(self, cmd: Sequence[str], argv: Sequence[str], env: dict[str, str], cwd: str,
            timeout: float) -> subprocess.CompletedProcess[str]:
        """Fork a child that runs ``holomem.crashtest.child.main(argv)`` in ``cwd`` with
        ``env``, wait for it (``timeout`` seconds at most: then it is killed and
        :class:`subprocess.TimeoutExpired` raised, as :func:`subprocess.run` does), and
        return how it ended, as if ``cmd`` had been run."""
        request = {"argv": list(argv), "env": env, "cwd": cwd, "timeout": timeout}
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
            raise subprocess.TimeoutExpired(list(cmd), timeout, reply["stdout"],
                                            reply["stderr"])
        return subprocess.CompletedProcess(list(cmd), reply["returncode"], reply["stdout"],
                                           reply["stderr"])

    def close(self) -> None:
        """End the server (it sees its socket close) and wait for it."""
        self._replies.close()
        self.sock.close()
        self.proc.wait(timeout=30)


_server: ForkServer | None = None
_server_pid = -1
_starting = threading.Lock()


def fresh() -> bool:
    """True when the children are to be fresh interpreters (``HOLOMEM_CRASH_FRESH=1``)."""
    return os.environ.get(FRESH_ENV, "") == "1"


def server(env: dict[str, str]) -> ForkServer:
    """This process's server, started with ``env`` the first time (and again if the last
    one ended)."""
    global _server, _server_pid
    with _starting:
        if _server is None or _server_pid != os.getpid() or _server.proc.poll() is not None:
            if _server_pid != os.getpid():
                atexit.register(_stop)
            _server, _server_pid = ForkServer(env), os.getpid()
        return _server


def _stop() -> None:
    """At exit: end this process's server and wait for it (so that it, and the CPU time
    of its children, are accounted to this process)."""
    global _server
    if _server is not None and _server_pid == os.getpid():
        _server.close()
        _server = None


def serve(fd: int) -> list[str] | None:
    """Be the server, on the socket at file descriptor ``fd``: answer each request until
    the socket closes (then return None). In each forked child, return the argv it is to
    run, set up as a fresh child would be."""
    conn = socket.socket(fileno=fd)
    requests = conn.makefile("rb")
    while True:
        line = requests.readline()
        if not line:
            return None
        request = json.loads(line)
        out_r, out_w = socket.socketpair()
        err_r, err_w = socket.socketpair()
        pid = os.fork()
        if pid == 0:
            requests.close()
            conn.close()
            out_r.close()
            err_r.close()
            return _become_child(request, out_w, err_w)
        out_w.close()
        err_w.close()
        reply = _wait(pid, out_r, err_r, float(request["timeout"]))
        conn.sendall(json.dumps(reply).encode() + b"\n")


def _become_child(request: dict[str, Any], out: socket.socket, err: socket.socket
                  ) -> list[str]:
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
    return [str(a) for a in request["argv"]]


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
