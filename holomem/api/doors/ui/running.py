"""``holomem ui STORE``: the inspector for one store, on uvicorn.

Owns the command's checks and its serving: a host that is not loopback needs an API
key (``--api-key-file``); the socket is bound before the store is announced, so the
line on stderr names the real port (``--port 0``: one the system picks):
``holomem ui listening on http://HOST:PORT/; ...`` (it listens already then). The
application sits behind the HTTP door's Guard (Host and Origin checks, bounded request
heads), its own pages allowed as an origin. Imports the HTTP door's guard, the
inspector's routes and source, uvicorn (the serve extra).
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import socket
import sys

from holomem.api.doors.cli.opening import (
    EXIT_STORE,
    EXIT_USAGE,
    Failure,
    api_key_file,
    config_file,
    key_file,
)
from holomem.errors import HolomemError


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address only this machine reaches."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    # Listening now, before the line that names the port: a client that reads it and
    # connects at once waits in the backlog instead of being refused.
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def run(args: argparse.Namespace) -> int:
    """Check the options, open the store, bind, serve until interrupted."""
    try:
        import uvicorn

        from holomem.api.doors.http.webguard import Guard, Hosts, bounded_httptools
        from holomem.api.doors.http.webguard import origins as allowed_origins
        from holomem.api.doors.ui.routes import create_ui
        from holomem.api.doors.ui.source import OneStore
    except ImportError as exc:  # it names the serve extra
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.port <= 65535:
        raise Failure(EXIT_USAGE, f"--port must be from 0 to 65535, not {args.port}")
    api_key = None
    if args.api_key_file:
        api_key = api_key_file(args.api_key_file)
    if not is_loopback(args.host) and api_key is None:
        raise Failure(EXIT_USAGE, f"--host {args.host} is reachable from other machines: "
                      "give --api-key-file F (the key every request, or the sign-in "
                      "form, must give)")
    try:
        hosts = Hosts(args.host, None, args.allow_host)
        origins = allowed_origins(args.allow_origin)
    except HolomemError as exc:
        raise Failure(EXIT_USAGE, exc.message) from exc
    key = key_file(args.key_file) if args.key_file else None
    config = config_file(args.config)
    try:
        source = OneStore(args.store, key=key, key_path=args.key_file, config=config,
                          read_only=args.read_only)
    except (HolomemError, OSError) as exc:
        raise Failure(EXIT_STORE, f"{args.store}: {exc}") from exc
    try:
        try:
            sock = _bind(args.host, args.port)
        except OSError as exc:
            raise Failure(EXIT_USAGE, f"cannot listen on {args.host}:{args.port}: "
                          f"{exc.strerror or exc}") from exc
        port = sock.getsockname()[1]
        hosts.port = port  # the Host a browser sends names the port really bound
        app = Guard(create_ui(source, api_key=api_key), hosts=hosts, origins=origins,
                    own_pages="/")
        shown = f"[{args.host}]" if ":" in args.host else args.host
        print(f"holomem ui listening on http://{shown}:{port}/; {source.describe()}; "
              f"key {'required' if api_key else 'not required (loopback)'}",
              file=sys.stderr, flush=True)
        protocol = bounded_httptools()
        config_ = uvicorn.Config(app, log_level="warning", lifespan="off", ws="none",
                                 http=protocol if protocol is not None else "h11")
        server = uvicorn.Server(config_)
        with contextlib.suppress(KeyboardInterrupt):
            server.run(sockets=[sock])
    finally:
        source.close()
    return 0
