"""The store's local socket (holomem.api.doors.mcp.share), its two ends in one process.

What the tests prove: the socket is bound to the store (one path per real store path,
another store's follower is refused) and to the user (a private directory, mode 0600,
and a peer of another uid refused by either end, with nothing written); a forwarded
write is answered only once the follower shows it (read-your-writes without another
refresh); the writer's errors come back as the same HolomemError; frames, connections
and idle connections are bounded; a socket file left behind is replaced, anything else
in its way is refused, and a writer unlinks only its own.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from holomem import Memory, Store
from holomem.api.doors.mcp.share import (
    MAX_CONNECTIONS,
    MAX_REQUEST_BYTES,
    MAX_SOCKET_PATH,
    PROTOCOL,
    Forwarder,
    Listener,
    NotListening,
    recv_frame,
    send_frame,
    socket_path,
)
from holomem.errors import (
    ConflictError,
    InvalidError,
    LimitError,
    StorageIOError,
    UnavailableError,
)
from holomem.log import fs


@pytest.fixture
def short() -> Iterator[Path]:
    """A directory with a short path (a socket's path is bounded)."""
    with tempfile.TemporaryDirectory(prefix="hm-") as directory:
        yield Path(directory)


@pytest.fixture
def pair(tmp_path: Path, short: Path) -> Iterator[tuple[Memory, Store, str]]:
    """A writer's Memory, a follower of the same store, and the socket's path."""
    writer = Store.open(tmp_path / "store", sync="batch")
    follower = Store.open(tmp_path / "store", read_only=True)
    try:
        yield Memory(writer), follower, str(short / "s.sock")
    finally:
        follower.close()
        writer.close()


def raw(path: str) -> socket.socket:
    """A connection to the writer, its hello read."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(30)
    sock.connect(path)
    assert msgspec.json.decode(recv_frame(sock, 1 << 20))["protocol"] == PROTOCOL
    return sock


# -- where the socket is -----------------------------------------------------------------------
def test_the_socket_is_bound_to_the_real_store_path_and_to_the_user(tmp_path: Path,
                                                                   short: Path) -> None:
    env = {"XDG_RUNTIME_DIR": str(short)}
    store = tmp_path / "store"
    store.mkdir()
    (tmp_path / "link").symlink_to(store)
    path = socket_path(str(store), env)
    assert os.path.dirname(path) == str(short / "holomem")
    assert socket_path(str(tmp_path / "link"), env) == path  # one store, one socket
    assert socket_path(str(tmp_path / "other"), env) != path
    assert stat.S_IMODE(os.lstat(short / "holomem").st_mode) == 0o700
    deep = tmp_path / ("d" * 200) / ("e" * 200) / "store"
    assert len(os.fsencode(socket_path(str(deep), env))) <= MAX_SOCKET_PATH
    no_runtime = socket_path(str(store), {"TMPDIR": str(short)})
    assert os.path.dirname(no_runtime) == str(short / f"holomem-{os.getuid()}")


def test_a_directory_open_to_others_or_a_path_too_long_turns_sharing_off(
        tmp_path: Path, short: Path) -> None:
    (short / "holomem").mkdir(mode=0o700)
    os.chmod(short / "holomem", 0o770)
    with pytest.raises(StorageIOError, match="private to this user"):
        socket_path(str(tmp_path / "store"), {"XDG_RUNTIME_DIR": str(short)})
    (short / "elsewhere").mkdir()
    os.symlink(short / "elsewhere", short / "holomem-link")
    with pytest.raises(StorageIOError, match="private to this user"):
        fs.private_dir(str(short / "holomem-link"))
    long = tmp_path / ("r" * 120)
    long.mkdir()
    with pytest.raises(UnavailableError, match="longer than 107 bytes"):
        socket_path(str(tmp_path / "store"), {"XDG_RUNTIME_DIR": str(long)})


def test_a_stale_socket_is_replaced_and_anything_else_is_refused(short: Path) -> None:
    path = str(short / "s.sock")
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)
    left.close()  # a socket file nobody listens on, as a killed writer leaves it
    with fs.listen_unix(path, 1):
        assert stat.S_IMODE(os.lstat(path).st_mode) == 0o600
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(path)  # it listens
        fs.remove_socket(path)
    assert not os.path.exists(path)
    Path(path).write_bytes(b"a file")
    with pytest.raises(StorageIOError, match="no socket"):
        fs.listen_unix(path, 1)
    fs.remove_socket(path)  # only ever a socket
    assert Path(path).read_bytes() == b"a file"


# -- calls ---------------------------------------------------------------------------------------
def test_a_forwarded_write_is_answered_once_the_follower_shows_it(
        pair: tuple[Memory, Store, str]) -> None:
    memory, follower, path = pair
    listener = Listener(path, memory)
    try:
        answer = Forwarder(path, follower).call("remember", {"id": "r1", "text": "Ann sings"})
        assert answer["remembered"][0]["id"] == "r1"
        assert follower.revision == memory.store.revision  # no refresh of its own needed
        assert Memory(follower).get("r1") is not None
    finally:
        listener.close()
    assert not os.path.exists(path)


def test_the_writers_errors_come_back_as_the_same_errors(
        pair: tuple[Memory, Store, str]) -> None:
    memory, follower, path = pair
    memory.remember(id="c1", text="Cid paints")
    listener = Listener(path, memory)
    try:
        forwarder = Forwarder(path, follower)
        with pytest.raises(ConflictError, match="c1"):
            forwarder.call("remember", {"id": "c1", "text": "Cid sculpts"})
        with pytest.raises(InvalidError, match="unknown op"):
            forwarder.call("noSuchOp", {})
        with pytest.raises(LimitError):
            forwarder.call("remember", {"text": "x" * (MAX_REQUEST_BYTES + 1)})
    finally:
        listener.close()
    assert memory.get("c1").text == "Cid paints"  # type: ignore[union-attr]


def test_no_writer_listening_is_told_apart_from_a_failed_call(
        pair: tuple[Memory, Store, str], short: Path) -> None:
    _, follower, path = pair
    with pytest.raises(NotListening):
        Forwarder(path, follower).call("remember", {"text": "nobody there"})
    left = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    left.bind(path)
    left.close()
    with pytest.raises(NotListening):  # a stale socket file: nobody answers
        Forwarder(path, follower).call("remember", {"text": "nobody there"})
    assert Forwarder(path, follower).writer() is None


def test_a_follower_of_another_store_is_refused(pair: tuple[Memory, Store, str],
                                                tmp_path: Path) -> None:
    memory, _, path = pair
    Store.open(tmp_path / "other").close()
    listener = Listener(path, memory)
    try:
        with Store.open(tmp_path / "other", read_only=True) as other, \
                pytest.raises(UnavailableError, match="writes another store"):
            Forwarder(path, other).call("remember", {"id": "o1", "text": "lost"})
    finally:
        listener.close()
    assert memory.get("o1") is None


# -- the user at the other end -------------------------------------------------------------------
def test_the_writer_refuses_a_process_of_another_user(
        pair: tuple[Memory, Store, str], caplog: pytest.LogCaptureFixture) -> None:
    memory, follower, path = pair
    listener = Listener(path, memory, uid=os.getuid() + 1)  # this process is "another user"
    try:
        with caplog.at_level(logging.WARNING, "holomem.mcp"), \
                pytest.raises(UnavailableError):
            Forwarder(path, follower).call("remember", {"id": "u1", "text": "refused"})
    finally:
        listener.close()
    assert memory.get("u1") is None
    assert f"from uid {os.getuid()}" in caplog.text


def test_a_follower_refuses_a_writer_of_another_user(pair: tuple[Memory, Store, str]) -> None:
    memory, follower, path = pair
    listener = Listener(path, memory)
    try:
        forwarder = Forwarder(path, follower, uid=os.getuid() + 1)
        with pytest.raises(UnavailableError, match="not this user's"):
            forwarder.call("remember", {"id": "u2", "text": "never sent"})
        assert forwarder.writer() is None
    finally:
        listener.close()
    assert memory.get("u2") is None


@pytest.mark.skipif(os.getuid() != 0, reason="connecting as another user needs root")
def test_a_real_process_of_another_user_gets_no_answer(pair: tuple[Memory, Store, str],
                                                       short: Path) -> None:
    memory, _, path = pair
    listener = Listener(path, memory)
    try:
        # Open the way the directory and the socket's mode would close, to reach the check.
        os.chmod(short, 0o755)
        os.chmod(path, 0o666)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: nobody, connecting; it says how many bytes came
            try:
                os.setuid(65534)
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                    sock.settimeout(30)
                    sock.connect(path)
                    os.write(write, str(len(sock.recv(100))).encode())
            finally:
                os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as said:
            assert said.read() == b"0"  # closed without a hello
    finally:
        listener.close()


# -- bounds --------------------------------------------------------------------------------------
def test_an_oversized_or_malformed_call_is_refused_and_nothing_is_written(
        pair: tuple[Memory, Store, str]) -> None:
    memory, _, path = pair
    listener = Listener(path, memory)
    try:
        for frame in (struct.pack(">I", MAX_REQUEST_BYTES + 1),
                      struct.pack(">I", 5) + b"[1,2]",
                      struct.pack(">I", 9) + b"not json!",
                      struct.pack(">I", 2) + b"{}"):
            with raw(path) as sock:
                sock.sendall(frame)
                error = msgspec.json.decode(recv_frame(sock, 1 << 20))["error"]
                assert error["code"] in ("limit", "invalid_request"), error
        deep = b'{"op":"remember","request":{"text":"x","metadata":' + b"[" * 100 + \
            b"]" * 100 + b"}}"
        with raw(path) as sock:
            sock.sendall(struct.pack(">I", len(deep)) + deep)
            assert msgspec.json.decode(recv_frame(sock, 1 << 20))["error"]["code"] == "limit"
    finally:
        listener.close()
    assert len(memory.store) == 0


def test_connections_past_the_bound_are_refused(pair: tuple[Memory, Store, str]) -> None:
    memory, follower, path = pair
    listener = Listener(path, memory)
    idle = [raw(path) for _ in range(MAX_CONNECTIONS)]  # each holds a slot, sends nothing
    try:
        with pytest.raises(UnavailableError, match=f"already answers {MAX_CONNECTIONS}"):
            Forwarder(path, follower).call("remember", {"id": "m1", "text": "one too many"})
    finally:
        for sock in idle:
            sock.close()
        listener.close()
    assert memory.get("m1") is None


def test_a_connection_that_sends_no_call_is_closed(pair: tuple[Memory, Store, str]) -> None:
    memory, _, path = pair
    listener = Listener(path, memory, request_timeout=0.2)
    try:
        with raw(path) as sock:
            assert sock.recv(1) == b""  # the writer gave up on it and closed
    finally:
        listener.close()


def test_a_frame_is_a_length_and_json(short: Path) -> None:
    left, right = socket.socketpair()
    with left, right:
        send_frame(left, {"op": "get", "request": {"id": "x"}})
        assert right.recv(4) == struct.pack(">I", len(b'{"op":"get","request":{"id":"x"}}'))
        left.sendall(struct.pack(">I", 10) + b"{}")
        left.shutdown(socket.SHUT_WR)
        right.recv(1 << 16)  # the rest of the first frame
        with pytest.raises(EOFError):
            recv_frame(right, 100)
