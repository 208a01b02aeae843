"""The ``holomem`` command line (also ``python -m holomem``).

Owns: argument parsing and printing. Every memory command goes through the JSON
contract (``Memory.call``), so the CLI answers exactly what HTTP and Python do.

    holomem demo [--dir D]
    holomem remember STORE --text T [--id I] [--subject S] [--entity E]... [--valid-from W] ...
    holomem recall STORE QUERY [--k N] [--as-of W] [--known-at W] [--history H] [--explain]
    holomem explain STORE QUERY ID
    holomem get STORE ID
    holomem history STORE ID
    holomem mcp --data DIR [--key-file F] [--memory-config F.json]
    holomem hermes install [--hermes-home DIR]

W is milliseconds since the epoch or an ISO 8601 date/time (UTC unless it says
otherwise). ``--json`` prints the contract's response; ``--key-file`` opens an
encrypted store; ``--config`` reads a MemoryConfig (camelCase JSON).
Exit status: 0 success, 1 not found or conflict, 2 invalid input or usage,
3 the store could not be opened.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from holomem.api import validate
from holomem.api.engine import Store
from holomem.api.memory import Memory
from holomem.api.render import format_time
from holomem.api.types import MemoryConfig, config_from_json, config_to_json
from holomem.api.validate import to_ms
from holomem.errors import HolomemError, InvalidError, NotFoundError
from holomem.log import fs


def _when(text: str) -> int:
    """Milliseconds from an integer or an ISO 8601 date/time (naive means UTC)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a time: {text!r}") from exc
    if value.utcoffset() is None:
        value = value.replace(tzinfo=dt.UTC)
    return to_ms(value, "time") or 0


def _open(args: argparse.Namespace) -> Memory:
    key = None
    if getattr(args, "key_file", None):
        key = fs.read_file(args.key_file)
    # Without --config, the store's own configuration applies (SPEC §4c); with one, it
    # must be the store's (a conflict otherwise), or a new store records it.
    config = None
    if getattr(args, "config", None):
        config = config_from_json(fs.read_file(args.config))
    # Only remember writes: the read commands open a follower, so they work while a
    # server, an MCP client or an agent holds the store's writer lock.
    writes = args.command == "remember"
    store = Store.open(args.store, key=key, create=writes, read_only=not writes)
    return Memory(store, config)


# -- printing --------------------------------------------------------------------------
def _fact_line(fact: dict[str, Any]) -> str:
    when = []
    if fact.get("validFrom") is not None or fact.get("validTo") is not None:
        when.append(f"valid {format_time(fact.get('validFrom'))} .. "
                    f"{format_time(fact.get('validTo'))}")
    if fact.get("eventTime") is not None:
        when.append(f"event {format_time(fact['eventTime'])}")
    when.append(f"ingested {format_time(fact['ingestTime'])}")
    subject = f" [{fact['subject']}]" if fact.get("subject") else ""
    return f"{fact['id']}{subject} ({fact['status']}; {', '.join(when)}): {fact['text']}"


def _print(op: str, response: dict[str, Any]) -> None:
    if op == "remember":
        for r in response["remembered"]:
            sup = f", supersedes {', '.join(r['superseded'])}" if r["superseded"] else ""
            print(f"{'stored' if r['created'] else 'already stored'} {r['id']}{sup}")
    elif op == "recall":
        if not response["results"]:
            print("(nothing)")
        for i, r in enumerate(response["results"], start=1):
            print(f"{i}. {r['score']:.4f}  {_fact_line(r['fact'])}")
            if "explanation" in r:
                _print_explanation(r["explanation"], indent="     ")
    elif op == "explain":
        _print_explanation(response["explanation"], indent="")
    elif op == "get":
        print(_fact_line(response["fact"]) if response["fact"] else "(no such fact)")
    elif op == "history":
        for fact in response["history"]:
            print(_fact_line(fact))


def _print_explanation(e: dict[str, Any], indent: str) -> None:
    terms = ", ".join(f"{t['term']} ({t['score']:.3f})" for t in e["matchedTerms"]) or "none"
    print(f"{indent}{e['id']}: {e['reason']}; rank {e['rank']}, status {e['status']}")
    print(f"{indent}  bm25 {e['lexicalScore']:.4f}, matched {terms}; recency x"
          f"{e['recencyMultiplier']:.3f}, history x{e['historyMultiplier']:.3f}")
    if len(e["chain"]) > 1:
        chain = " -> ".join(f"{c['id']} ({c['status']})" for c in e["chain"])
        print(f"{indent}  chain: {chain}")


# -- commands ------------------------------------------------------------------------------
def _request(args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "remember":
        req: dict[str, Any] = {"text": args.text}
        for name, key in (("id", "id"), ("subject", "subject"), ("event_time", "eventTime"),
                          ("valid_from", "validFrom"), ("valid_to", "validTo")):
            if getattr(args, name) is not None:
                req[key] = getattr(args, name)
        if args.entity:
            req["entities"] = args.entity
        if args.supersedes:
            req["supersedes"] = args.supersedes
        if args.metadata:
            req["metadata"] = json.loads(args.metadata)
        return req
    if args.command in ("recall", "explain"):
        req = {"query": args.query, "k": args.k, "history": args.history}
        if args.command == "explain":
            req["id"] = args.id
        elif args.explain:
            req["explain"] = True
        for name, key in (("as_of", "asOf"), ("known_at", "knownAt"), ("subject", "subject")):
            if getattr(args, name) is not None:
                req[key] = getattr(args, name)
        return req
    return {"id": args.id}


def _memory_command(args: argparse.Namespace) -> int:
    try:
        request = _request(args)
    except json.JSONDecodeError as exc:
        print(f"error: --metadata is not JSON: {exc}", file=sys.stderr)
        return 2
    try:
        memory = _open(args)
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 3
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    try:
        response = memory.call(args.command, request)
    except InvalidError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1 if isinstance(exc, NotFoundError) or exc.status < 500 else 3
    finally:
        memory.store.close()
    if args.json:
        print(json.dumps(response, indent=2, ensure_ascii=False))
    else:
        _print(args.command, response)
    return 0


def _config(args: argparse.Namespace) -> int:
    """Print the store's configuration (the defaults when nothing is recorded yet);
    with --set, record another one (SPEC §4c)."""
    try:
        key = fs.read_file(args.key_file) if args.key_file else None
        config = config_from_json(fs.read_file(args.set)) if args.set else None
        store = Store.open(args.store, key=key, create=config is not None,
                           read_only=config is None)
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidError) else 3
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    try:
        memory = Memory(store, config, persist=True)
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidError) else 3
    finally:
        store.close()
    print(json.dumps(json.loads(config_to_json(memory.config)), indent=2))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from holomem.api.doors.demo import run

    base = args.dir or fs.make_temp_dir("holomem-demo-")
    return run(os.path.join(base, "store"))


def _serve(args: argparse.Namespace) -> int:
    """Every option, the key and the whole memory configuration are checked before the
    server listens; a bad one exits 2 with a message naming it."""
    try:
        from holomem.api.doors.http import create_app, run
    except ImportError as exc:
        print(f"error: serving needs the serve extra (pip install 'holomem[serve]'): {exc}",
              file=sys.stderr)
        return 2
    try:
        api_key = _read(args.api_key_file).decode().strip() if args.api_key_file else None
        key = _read(args.key_file) if args.key_file else None
        config = MemoryConfig()
        if args.memory_config:
            try:
                config = validate.memory_config(config_from_json(_read(args.memory_config)))
            except HolomemError as exc:
                raise InvalidError(f"--memory-config {args.memory_config}: {exc}") from exc
        app = create_app(args.data, host=args.host, port=args.port, api_key=api_key,
                         config=config, key=key, max_tenants=args.max_tenants,
                         allowed_hosts=args.allow_host, allowed_origins=args.allow_origin)
    except (OSError, UnicodeDecodeError, HolomemError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run(app, host=args.host, port=args.port)
    return 0


def _read(path: str) -> bytes:
    return fs.read_file(path)


def _mcp(args: argparse.Namespace) -> int:
    """Options and the store first (fast, clear errors), then the MCP SDK (slow to import)."""
    try:
        key = _read(args.key_file) if args.key_file else None
        config = config_from_json(_read(args.memory_config)) if args.memory_config \
            else None
    except (OSError, HolomemError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        store = Store.open(args.data, key=key, sync="batch")
    except (OSError, HolomemError) as exc:
        print(f"error: {args.data}: {exc}", file=sys.stderr)
        return 3
    try:
        # The store's configuration; --memory-config for a store that has none yet.
        memory = Memory(store, initial=config)
        from holomem.api.doors.mcp import serve
    except (HolomemError, ImportError) as exc:
        store.close()
        extra = "the MCP server needs the serve extra (pip install 'holomem[serve]'): " \
            if isinstance(exc, ImportError) else ""
        print(f"error: {extra}{exc}", file=sys.stderr)
        return 2
    serve(memory)
    return 0


def _hermes(args: argparse.Namespace) -> int:
    from holomem.integrations.hermes_plugin import main as hermes_main

    return hermes_main(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="holomem",
                                     description="holomem: agent memory you can trust")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the whole story on an embedded store")
    demo.add_argument("--dir", help="where to put the demo store (default: a new temp dir)")
    demo.set_defaults(func=_demo)
    mcp = sub.add_parser("mcp", help="serve one store to an MCP client over stdio")
    mcp.add_argument("--data", required=True, help="the store directory (created if missing)")
    mcp.add_argument("--key-file", help="file holding the 32-byte encryption key")
    mcp.add_argument("--memory-config",
                     help="a MemoryConfig JSON file for a store that has recorded none yet")
    mcp.set_defaults(func=_mcp)
    hermes = sub.add_parser("hermes", help="Hermes Agent integration")
    hermes_sub = hermes.add_subparsers(dest="hermes_command", required=True)
    install = hermes_sub.add_parser(
        "install", help="write the holomem memory-provider plugin into $HERMES_HOME/plugins/")
    install.add_argument("--hermes-home", help="Hermes' home (default: $HERMES_HOME, else "
                         "~/.hermes)")
    install.set_defaults(func=_hermes)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("store", help="the store directory")
        p.add_argument("--json", action="store_true", help="print the JSON response")
        p.add_argument("--key-file", help="a file holding the store's 32-byte key")
        p.add_argument("--config", help="a MemoryConfig JSON file (camelCase)")
        p.set_defaults(func=_memory_command)

    rem = sub.add_parser("remember", help="store one fact")
    common(rem)
    rem.add_argument("--text", required=True)
    rem.add_argument("--id")
    rem.add_argument("--subject")
    rem.add_argument("--entity", action="append", help="an entity (repeatable)")
    rem.add_argument("--metadata", help="a JSON object")
    rem.add_argument("--event-time", type=_when)
    rem.add_argument("--valid-from", type=_when)
    rem.add_argument("--valid-to", type=_when)
    rem.add_argument("--supersedes", action="append", help="an id it supersedes (repeatable)")
    for name in ("recall", "explain"):
        p = sub.add_parser(name, help=f"{name} facts for a query")
        common(p)
        p.add_argument("query")
        if name == "explain":
            p.add_argument("id")
        else:
            p.add_argument("--explain", action="store_true", help="explain every result")
        p.add_argument("--k", type=int, default=10)
        p.add_argument("--as-of", type=_when)
        p.add_argument("--known-at", type=_when)
        p.add_argument("--subject")
        p.add_argument("--history", choices=("current", "all", "historical"), default="current")
    cfg = sub.add_parser("config", help="print the store's configuration, or record one")
    cfg.add_argument("store", help="the store directory")
    cfg.add_argument("--set", metavar="FILE",
                     help="record this MemoryConfig JSON file as the store's configuration")
    cfg.add_argument("--key-file", help="a file holding the store's 32-byte key")
    cfg.set_defaults(func=_config)
    srv = sub.add_parser("serve", help="serve the JSON contract over HTTP, with tenants")
    srv.add_argument("--data", required=True, help="directory holding the tenants' stores")
    srv.add_argument("--host", default="127.0.0.1")
    srv.add_argument("--port", type=int, default=8080)
    srv.add_argument("--api-key-file", help="file holding the API key clients must send")
    srv.add_argument("--memory-config", help="a MemoryConfig JSON file for tenants that have "
                     "recorded none yet (validated at start)")
    srv.add_argument("--key-file", help="file holding the 32-byte encryption key")
    srv.add_argument("--max-tenants", type=int, default=64, help="stores kept open at once")
    srv.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                     help="another Host name clients may use (repeatable; besides IP "
                     "addresses, localhost and --host)")
    srv.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                     help="a browser origin allowed to call the API, e.g. "
                     "https://app.example (repeatable; none by default)")
    srv.set_defaults(func=_serve)
    for name in ("get", "history"):
        p = sub.add_parser(name, help=f"{name} of one fact")
        common(p)
        p.add_argument("id")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
