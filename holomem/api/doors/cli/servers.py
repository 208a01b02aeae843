"""The CLI's servers and integrations: ``serve``, ``mcp``, ``ui``, ``hermes install``, ``demo``,
and ``fsck`` (a child ``python -m holomem.fsck``). Each imports what it runs only when
it runs, so that ``holomem`` works without the serve extra.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Sequence

from holomem.api.doors.cli.opening import api_key_file, key_file
from holomem.api.memory import checks
from holomem.api.memory.config import MemoryConfig, config_from_json
from holomem.errors import HolomemError, InvalidError
from holomem.log import fs


def fsck(argv: Sequence[str]) -> int:
    """``python -m holomem.fsck`` with the same arguments, its output and exit status.

    A child process: the recovery tool reads the log beneath the memory API, which no
    door imports (tests/test_layers.py).
    """
    try:
        return subprocess.run([sys.executable, "-m", "holomem.fsck", *argv],
                              check=False).returncode
    except KeyboardInterrupt:
        return 130


def demo(args: argparse.Namespace) -> int:
    from holomem.api.doors.cli.demo import run

    base = args.dir or fs.make_temp_dir("holomem-demo-")
    return run(os.path.join(base, "store"))


def serve(args: argparse.Namespace) -> int:
    """Every option, the key and the whole memory configuration are checked before the
    server listens; a bad one exits 2 with a message naming it."""
    try:
        from holomem.api.doors.http.server import create_app, run
    except ImportError as exc:  # it names the serve extra (errors.missing_extra)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        api_key = api_key_file(args.api_key_file) if args.api_key_file else None
        key = key_file(args.key_file) if args.key_file else None
        config = MemoryConfig()
        if args.config:
            try:
                config = checks.memory_config(config_from_json(_read(args.config)))
            except HolomemError as exc:
                raise InvalidError(f"--config {args.config}: {exc}") from exc
        app = create_app(args.data, host=args.host, port=args.port, api_key=api_key,
                         config=config, key=key, max_tenants=args.max_tenants,
                         allowed_hosts=args.allow_host, allowed_origins=args.allow_origin,
                         max_tenant_stores=args.max_tenant_stores,
                         journal=_journal(args.journal, args.data,
                                          _advertise(args)))
    except (OSError, UnicodeDecodeError, HolomemError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run(app, host=args.host, port=args.port)
    return 0


def _journal(journal: str | None, data: str, advertise: str | None = None) -> str | None:
    """``--journal nats://...``, checked, with this node's local files under DATA and
    this server's ``advertise`` URL (recorded beside each lease it takes)."""
    if journal is None:
        if advertise is not None and advertise != "":
            raise InvalidError("--advertise is where other servers send writes: it needs "
                               "--journal")
        return None
    if not journal.startswith("nats://"):
        raise InvalidError(f"--journal must be a nats://HOST:PORT/PREFIX address, not "
                           f"{journal!r}")
    if "local=" not in journal:
        journal += ("&" if "?" in journal else "?") + \
            f"local={os.path.join(os.path.abspath(data), 'local')}"
    if advertise and "advertise=" not in journal:
        journal += ("&" if "?" in journal else "?") + \
            f"advertise={urllib.parse.quote(advertise, safe=':/[]')}"
    return journal


def _advertise(args: argparse.Namespace) -> str | None:
    """This server's base URL for the others: ``--advertise``, else ``http://HOST:PORT``
    (the machine's name for a wildcard host; nothing for port 0, unknown until bound)."""
    given: str | None = getattr(args, "advertise", None)
    if given is not None:
        if not given.startswith(("http://", "https://")):
            raise InvalidError(f"--advertise must be an http:// or https:// URL, not "
                               f"{given!r}")
        return given.rstrip("/")
    if args.journal is None or args.port == 0:
        return None
    host = args.host
    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{args.port}"


def _read(path: str) -> bytes:
    return fs.read_file(path)


def mcp(args: argparse.Namespace) -> int:
    """Options first (fast, clear errors), then the MCP SDK (slow to import; missing
    without the serve extra), then the store: nothing is created before all three hold.
    A store another process writes is followed read-only (:mod:`.follower`)."""
    from holomem.api.doors.scoping import Scope

    try:
        scope = Scope(args.namespace or ())
        key = key_file(args.key_file) if args.key_file else None
        config = config_from_json(_read(args.config)) if args.config else None
        api_key = api_key_file(args.api_key_file) if args.api_key_file else None
        if api_key is not None and args.server is None:
            raise InvalidError("--api-key-file is the key of --server; give --server too")
    except (OSError, UnicodeDecodeError, HolomemError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        from holomem.api.doors.follower import Served, served_tenant
        from holomem.api.doors.mcp.server import serve
        from holomem.client import Client  # httpx: --server forwards writes with it
    except ImportError as exc:  # it names the serve extra (errors.missing_extra)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        client = None if args.server is None else \
            Client(args.server, api_key=api_key, tenant=served_tenant(args.data))
    except HolomemError as exc:  # a bad URL; a store that is none of its tenants'
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        served = Served.open(args.data, key=key, config=config, scope=scope, client=client,
                             server=args.server)
    except (OSError, HolomemError) as exc:
        print(f"error: {args.data}: {exc}", file=sys.stderr)
        return 3
    if served.following:
        print(served.describe(), file=sys.stderr)
    serve(served)
    return 0


def ui(args: argparse.Namespace) -> int:
    """The inspector for one store (:mod:`holomem.api.doors.ui.running`)."""
    from holomem.api.doors.ui.running import run

    return run(args)


def hermes(args: argparse.Namespace) -> int:
    from holomem.integrations.hermes_plugin import main as hermes_main

    return hermes_main(args)
