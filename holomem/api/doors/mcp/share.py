"""Several ``holomem mcp`` processes on one store: the writer's local socket.

Owns: where the socket of a store lives (:func:`socket_path`), the writer's end that
answers on it (:class:`Listener`), the followers' end that forwards writes through it
(:class:`Forwarder`), its frames and its bounds. Imports the memory API, the contract's
depth check, the web guard's body decoding and the file layer; nothing of MCP (what a
tool is, how its answer is shown, is :mod:`.server`'s).

Only the process holding the store's writer lock listens, so at most one does: a socket
file found where it binds was left by a writer that is gone (killed), and is replaced;
the file there while it holds the lock is its own, which it unlinks before it lets go.

The socket: ``$XDG_RUNTIME_DIR/holomem/`` (else ``<temp dir>/holomem-<uid>/``), a
directory of mode 0700 that must belong to this user, holds ``mcp-<hash>.sock``, mode
0600, where the hash is of the store's real path: bound to the store and to the user,
and short (a Unix socket's path holds at most 107 bytes; a longer one turns sharing
off). Both ends check the other's user with ``SO_PEERCRED`` (Linux; elsewhere there is
no sharing): a process of another user is refused.

The wire: one call per connection. The writer greets with a hello frame
``{"protocol", "version", "store", "pid"}`` (the store's id: a follower of another
store is refused) or, when it already answers :data:`MAX_CONNECTIONS` connections, the
contract's error body. The follower sends ``{"op", "request"}``, a contract call
exactly as ``Memory.call`` takes it (already confined to the follower's namespace);
the writer answers ``{"response", "revision"}`` (``Memory.call``'s response, and the
revision every write it made is durable up to) or the contract's error body
``{"error": {"code", "message"}}``, which the follower raises as the same
:class:`~holomem.errors.HolomemError`. A frame is a 4-byte big-endian length, then that
many bytes of JSON: at most :data:`MAX_REQUEST_BYTES` for a call (the HTTP door's body
bound) and :data:`MAX_ANSWER_BYTES` for an answer.

Read-your-writes: the follower answers a forwarded write only once its own store has
caught up with the answer's ``revision`` (:meth:`Forwarder.call`), and reads catch up
before they answer anyway, so a write forwarded and then read back is seen.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import socket
import sys
import tempfile
import threading
from collections.abc import Mapping
from typing import Any

import msgspec

from holomem.api.engine import Store
from holomem.api.engine.nesting import check_depth
from holomem.api.memory.contract import decode_body
from holomem.api.memory.memory import Memory
from holomem.errors import HolomemError, InvalidError, LimitError, UnavailableError, from_code
from holomem.log import fs

log = logging.getLogger("holomem.mcp")

PROTOCOL = "holomem-mcp-share"
VERSION = 1
#: A frame's length prefix: 4 bytes, big-endian.
HEADER_BYTES = 4
#: The largest call a follower sends (the HTTP door's body bound) and answer it takes.
MAX_REQUEST_BYTES = 1 << 20
MAX_ANSWER_BYTES = 16 << 20
#: Connections the writer answers at once; one more is refused (``unavailable``).
MAX_CONNECTIONS = 16
BACKLOG = 16
#: Seconds: the writer's wait for a connection's call; a follower's wait to be connected
#: and greeted, and for the answer to its call.
REQUEST_TIMEOUT = 10.0
CONNECT_TIMEOUT = 5.0
ANSWER_TIMEOUT = 120.0
#: The longest path a Unix socket may have (sun_path, less its terminating NUL).
MAX_SOCKET_PATH = 107
#: struct ucred: pid, uid and gid, each a C int in the machine's byte order.
_CREDENTIALS_BYTES = 12


class NotListening(UnavailableError):
    """Nobody answers on the store's socket (no writer shares the store, or it has gone):
    the call was not sent."""


def socket_path(store: str, environ: Mapping[str, str] = os.environ) -> str:
    """The socket of the store at ``store`` (see the module doc), its directory made and
    checked. Errors: ``unavailable`` (no sharing here: not Linux, a path too long),
    ``io`` (the directory cannot be made, or is not this user's alone)."""
    if not hasattr(socket, "SO_PEERCRED"):
        raise UnavailableError("sharing a store between holomem mcp processes needs Linux "
                               "(SO_PEERCRED tells whose process is at the other end)")
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(runtime) and os.path.isdir(runtime):
        directory = os.path.join(runtime, "holomem")
    else:
        directory = os.path.join(environ.get("TMPDIR") or tempfile.gettempdir(),
                                 f"holomem-{os.getuid()}")
    digest = hashlib.sha256(os.fsencode(os.path.realpath(store))).hexdigest()[:32]
    path = os.path.join(directory, f"mcp-{digest}.sock")
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise UnavailableError(f"the socket path {path!r} is longer than {MAX_SOCKET_PATH} "
                               "bytes: set XDG_RUNTIME_DIR (or TMPDIR) to a shorter directory")
    fs.private_dir(directory)
    return path


def peer_uid(sock: socket.socket) -> int:
    """The user of the process at the other end of the connected Unix socket ``sock``."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CREDENTIALS_BYTES)
    return int.from_bytes(raw[4:8], sys.byteorder, signed=True)


def send_frame(sock: socket.socket, value: object) -> None:
    body = msgspec.json.encode(value)
    sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)


def recv_frame(sock: socket.socket, limit: int) -> bytes:
    """One frame's body. Errors: ``limit`` (longer than ``limit``); ``EOFError`` (the
    other end closed first); ``OSError`` (a timeout, a reset)."""
    length = int.from_bytes(_recv_exactly(sock, HEADER_BYTES), "big")
    if length > limit:
        raise LimitError(f"a frame of {length} bytes; at most {limit} are taken")
    return _recv_exactly(sock, length)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(min(n - len(got), 1 << 16))
        if not chunk:
            raise EOFError
        got += chunk
    return bytes(got)


def _error(exc: HolomemError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message}}


class Listener:
    """The writer's end: answers contract calls of this user's other processes on the
    store's socket, each connection in a thread of its own, at most
    :data:`MAX_CONNECTIONS` at once. ``uid``: the user allowed (this process's)."""

    def __init__(self, path: str, memory: Memory, *, uid: int | None = None,
                 request_timeout: float = REQUEST_TIMEOUT) -> None:
        self.path = path
        self._memory = memory
        self._uid = os.getuid() if uid is None else uid
        self._timeout = request_timeout
        self._hello = {"protocol": PROTOCOL, "version": VERSION,
                       "store": memory.store.stats().store_id, "pid": os.getpid()}
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._mu = threading.Lock()
        self._serving: set[threading.Thread] = set()
        self._sock = fs.listen_unix(path, BACKLOG)
        self._thread = threading.Thread(target=self._accept, name="holomem-mcp-share",
                                        daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            if not self._slots.acquire(blocking=False):
                with conn:
                    conn.settimeout(self._timeout)
                    with contextlib.suppress(OSError):
                        send_frame(conn, _error(UnavailableError(
                            f"the writer of this store already answers {MAX_CONNECTIONS} "
                            "calls of other holomem mcp processes; try again")))
                continue
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True,
                                      name="holomem-mcp-share-call")
            with self._mu:
                self._serving.add(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            with conn:
                conn.settimeout(self._timeout)
                uid = peer_uid(conn)
                if uid != self._uid:
                    log.warning("refused a connection to %s from uid %d (only uid %d may "
                                "write through it)", self.path, uid, self._uid)
                    return
                send_frame(conn, self._hello)
                send_frame(conn, self._answer(conn))
        except (OSError, EOFError):
            pass  # the follower went away, or was too slow to send its call
        finally:
            self._slots.release()
            with self._mu:
                self._serving.discard(threading.current_thread())

    def _answer(self, conn: socket.socket) -> dict[str, Any]:
        try:
            call = decode_body(recv_frame(conn, MAX_REQUEST_BYTES))
            op, request = call.get("op"), call.get("request")
            if not isinstance(op, str) or not isinstance(request, dict):
                raise InvalidError('a call is {"op": string, "request": object}')
            response = self._memory.call(op, request)
            return {"response": response, "revision": self._memory.store.durable_revision}
        except HolomemError as exc:
            return _error(exc)

    def close(self, wait: float = REQUEST_TIMEOUT) -> None:
        """Stop listening, unlink the socket and wait (up to ``wait`` seconds) for the
        calls under way: before the store they write is closed."""
        fs.remove_socket(self.path)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (Linux)
        self._sock.close()
        self._thread.join(wait)
        with self._mu:
            serving = list(self._serving)
        for thread in serving:
            thread.join(wait)


class Forwarder:
    """A follower's way to the writer of its store: ``call(op, request)`` is
    ``Memory.call`` run by the writer, one connection per call, answered once the
    follower's ``store`` shows what it wrote. ``uid``: the user the writer must be."""

    def __init__(self, path: str, store: Store, *, uid: int | None = None) -> None:
        self.path = path
        self._store = store
        self._uid = os.getuid() if uid is None else uid
        self._store_id = store.stats().store_id

    def writer(self) -> int | None:
        """The process id of the writer answering on the socket, or None if none does."""
        try:
            sock, hello = self._connect()
        except HolomemError:
            return None
        sock.close()
        return int(hello["pid"])

    def call(self, op: str, request: Any) -> dict[str, Any]:
        """Errors: those of ``Memory.call``, raised by the writer; ``not_listening``
        (:class:`NotListening`: nothing was sent); ``unavailable``; ``limit`` (a call
        over :data:`MAX_REQUEST_BYTES`)."""
        check_depth(request)
        body = msgspec.json.encode({"op": op, "request": request})
        if len(body) > MAX_REQUEST_BYTES:
            raise LimitError(f"the {op} call is {len(body)} bytes; at most "
                             f"{MAX_REQUEST_BYTES} go to the store's writer")
        sock, hello = self._connect()
        writer = f"the writer of {self._store.path} (holomem mcp process {hello['pid']})"
        with sock:
            try:
                sock.sendall(len(body).to_bytes(HEADER_BYTES, "big") + body)
            except OSError as exc:
                raise UnavailableError(f"{op} could not be sent to {writer}: {exc}") from None
            sock.settimeout(ANSWER_TIMEOUT)
            try:
                answer = msgspec.json.decode(recv_frame(sock, MAX_ANSWER_BYTES))
            except (OSError, EOFError, msgspec.DecodeError, RecursionError,
                    HolomemError) as exc:
                raise UnavailableError(
                    f"{writer} did not answer {op} ({type(exc).__name__}: {exc}); the write "
                    "may still have been applied: retrying it with the same payload is safe"
                    ) from None
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            raise from_code(str(answer["error"].get("code")), str(answer["error"].get("message")))
        if not (isinstance(answer, dict) and isinstance(answer.get("response"), dict)
                and isinstance(answer.get("revision"), int)):
            raise UnavailableError(f"{writer} answered {op} with something that is no answer")
        if self._store.refresh() < answer["revision"]:
            raise UnavailableError(
                f"{writer} took the {op}, but this follower of {self._store.path} does not "
                f"show it yet (revision {self._store.revision} of {answer['revision']})")
        response: dict[str, Any] = answer["response"]
        return response

    def _connect(self) -> tuple[socket.socket, dict[str, Any]]:
        """A connection to the writer, checked, and its hello."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            try:
                sock.connect(self.path)
                uid = peer_uid(sock)
                hello = msgspec.json.decode(recv_frame(sock, MAX_ANSWER_BYTES))
            except (FileNotFoundError, ConnectionRefusedError, ConnectionResetError,
                    EOFError) as exc:
                raise NotListening(f"no writer of {self._store.path} answers on "
                                   f"{self.path} ({type(exc).__name__})") from None
            except (OSError, msgspec.DecodeError, RecursionError, HolomemError) as exc:
                raise UnavailableError(f"the writer's socket {self.path} of "
                                       f"{self._store.path}: {type(exc).__name__}: {exc}"
                                       ) from None
            if uid != self._uid:
                raise UnavailableError(
                    f"the process listening on {self.path} is uid {uid}'s, not this "
                    f"user's (uid {self._uid}): no call goes to it")
            if isinstance(hello, dict) and isinstance(hello.get("error"), dict):
                raise from_code(str(hello["error"].get("code")),
                                str(hello["error"].get("message")))
            if not isinstance(hello, dict) or hello.get("protocol") != PROTOCOL or \
                    hello.get("version") != VERSION or not isinstance(hello.get("pid"), int):
                raise UnavailableError(
                    f"the process listening on {self.path} speaks another protocol than "
                    f"{PROTOCOL} {VERSION} (another holomem version?): restart the MCP "
                    "clients of this store")
            if hello.get("store") != self._store_id:
                raise UnavailableError(
                    f"the process listening on {self.path} writes another store (id "
                    f"{hello.get('store')}) than {self._store.path} (id {self._store_id})")
            return sock, hello
        except BaseException:
            sock.close()
            raise
