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
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import msgspec

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


def _namespace(text: str) -> list[str]:
    """A namespace on the command line: a JSON array (``'["users", "ann"]'``), or its
    parts joined by "/" (``users/ann``; "" is the root)."""
    if text.startswith("["):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise argparse.ArgumentTypeError(f"not a JSON array: {exc}") from exc
        if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
            raise argparse.ArgumentTypeError("a namespace is an array of strings")
        return value
    return [part for part in text.split("/") if part]


class _Progress:
    """Records done, on stderr: a line rewritten in place on a terminal, else one line
    per ``every`` records (so a log stays short)."""

    def __init__(self, verb: str, every: int = 50_000) -> None:
        self.verb, self.every = verb, every
        self.tty = sys.stderr.isatty()
        self.start = time.monotonic()
        self.shown = 0

    def __call__(self, done: int) -> None:
        rate = done / max(time.monotonic() - self.start, 1e-9)
        if self.tty:
            print(f"\r{self.verb} {done:,} facts ({rate:,.0f}/s)", end="", file=sys.stderr,
                  flush=True)
        elif done - self.shown >= self.every:
            print(f"{self.verb} {done:,} facts ({rate:,.0f}/s)", file=sys.stderr, flush=True)
            self.shown = done

    def close(self) -> None:
        if self.tty:
            print(file=sys.stderr)


def _chunks(records: Iterable[dict[str, Any]], progress: _Progress,
            size: int = 1 << 20) -> Iterator[bytes]:
    """JSON Lines of ``records``, about ``size`` bytes at a time."""
    encoder = msgspec.json.Encoder()
    buf = bytearray()
    done = 0
    for record in records:
        encoder.encode_into(record, buf, len(buf))
        buf += b"\n"
        done += 1
        if len(buf) >= size:
            yield bytes(buf)
            buf.clear()
            progress(done)
    if buf:
        yield bytes(buf)
    progress(done)


def _export(args: argparse.Namespace) -> int:
    """Every fact at or under --namespace as JSON Lines, to --output (written whole and
    synced, or not at all) or to stdout."""
    try:
        key = fs.read_file(args.key_file) if args.key_file else None
        store = Store.open(args.store, key=key, create=False, read_only=True)
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    progress = _Progress("exported")
    try:
        chunks = _chunks(Memory(store).export(args.namespace), progress)
        if args.output:
            fs.write_file_atomic(args.output, chunks)
        else:
            for chunk in chunks:
                sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidError) else 3
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    finally:
        progress.close()
        store.close()
    return 0


def _file_lines(path: str, size: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a file, read ``size`` bytes at a time (opened now, so a missing file
    is an error before anything else happens)."""
    fd = fs.open_ro(path)

    def lines() -> Iterator[bytes]:
        try:
            offset, rest = 0, b""
            while chunk := fs.read_at(fd, size, offset, path):
                offset += len(chunk)
                *whole, rest = (rest + chunk).split(b"\n")
                yield from whole
            if rest:
                yield rest
        finally:
            fs.close(fd)

    return lines()


def _import(args: argparse.Namespace) -> int:
    """JSON Lines from FILE (or - for stdin) into the store, in atomic batches."""
    try:
        key = fs.read_file(args.key_file) if args.key_file else None
        config = config_from_json(fs.read_file(args.config)) if args.config else None
        lines = iter(sys.stdin.buffer) if args.file == "-" else _file_lines(args.file)
        store = Store.open(args.store, key=key)
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidError) else 3
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    progress = _Progress("imported")
    try:
        memory = Memory(store, config)
        report = memory.import_(lines, batch_size=args.batch_size, progress=progress)
    except HolomemError as exc:
        progress.close()
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InvalidError) else 1 if exc.status < 500 else 3
    finally:
        store.close()
    progress.close()
    if report.unresolved_links:
        print(f"warning: {report.unresolved_links} links name facts that were not "
              "imported; they were not written", file=sys.stderr)
    print(json.dumps(msgspec.to_builtins(report)))
    return 0


def _info(args: argparse.Namespace) -> int:
    """What a store is: id, generation, facts, bytes, embedder, configuration. Opens a
    follower, so it works while a server holds the store."""
    try:
        key = fs.read_file(args.key_file) if args.key_file else None
        store = Store.open(args.store, key=key, create=False, read_only=True)
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 3
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 3
    try:
        stats = store.stats()
        info = Memory(store).info()
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc}", file=sys.stderr)
        return 3
    finally:
        store.close()
    out = {"store": os.path.abspath(args.store), "storeId": stats.store_id,
           "generation": stats.generation, "revision": stats.revision,
           "facts": info.facts, "documents": stats.documents, "namespaces": info.namespaces,
           "encrypted": stats.encrypted, "journalBytes": stats.journal_bytes,
           "textBytes": stats.text_bytes, "indexBytes": stats.index_bytes,
           "embedder": info.embedder, "reembedPending": info.reembed_pending,
           "config": msgspec.to_builtins(info.config)}
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    width = max(len(k) for k in out)
    for name, value in out.items():
        shown = json.dumps(value) if isinstance(value, (dict, list)) else value
        print(f"{name:<{width}}  {shown if value is not None else '(none)'}")
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
        print(f"error: serving needs the serve extra (pip install 'holomem-db[serve]'): {exc}",
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
    from holomem.api.doors.scoping import Scope

    try:
        scope = Scope(args.namespace or ())
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
        extra = "the MCP server needs the serve extra (pip install 'holomem-db[serve]'): " \
            if isinstance(exc, ImportError) else ""
        print(f"error: {extra}{exc}", file=sys.stderr)
        return 2
    serve(memory, scope)
    return 0


def _hermes(args: argparse.Namespace) -> int:
    from holomem.integrations.hermes_plugin import main as hermes_main

    return hermes_main(args)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("holomem-db")  # the distribution's name; the package is holomem
    except PackageNotFoundError:
        return "(not installed: pip install -e .)"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="holomem",
                                     description="holomem: agent memory you can trust")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print the installed version (holomem-db) and exit")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the whole story on an embedded store")
    demo.add_argument("--dir", help="where to put the demo store (default: a new temp dir)")
    demo.set_defaults(func=_demo)
    mcp = sub.add_parser("mcp", help="serve one store to an MCP client over stdio")
    mcp.add_argument("--data", required=True, help="the store directory (created if missing)")
    mcp.add_argument("--key-file", help="file holding the 32-byte encryption key")
    mcp.add_argument("--memory-config",
                     help="a MemoryConfig JSON file for a store that has recorded none yet")
    mcp.add_argument("--namespace", action="append", metavar="PART",
                     help="confine every call to this namespace, one string per flag "
                     "(--namespace users --namespace u-42); tools' namespaces are under it")
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
    inf = sub.add_parser("info", help="a store's id, generation, facts, bytes, embedder "
                         "and configuration")
    inf.add_argument("store", help="the store directory")
    inf.add_argument("--json", action="store_true", help="print JSON")
    inf.add_argument("--key-file", help="a file holding the store's 32-byte key")
    inf.set_defaults(func=_info)
    exp = sub.add_parser("export", help="write every fact as JSON Lines (with history)")
    exp.add_argument("store", help="the store directory")
    exp.add_argument("--namespace", type=_namespace, default=[],
                     help='only facts at or under it: a/b or a JSON array \'["a", "b"]\'')
    exp.add_argument("--output", "-o", help="the file to write (default: stdout)")
    exp.add_argument("--key-file", help="a file holding the store's 32-byte key")
    exp.set_defaults(func=_export)
    imp = sub.add_parser("import", help="restore facts from JSON Lines, in atomic batches")
    imp.add_argument("store", help="the store directory (created if missing)")
    imp.add_argument("file", nargs="?", default="-", help="the JSON Lines file (- : stdin)")
    imp.add_argument("--batch-size", type=int, default=1000, help="facts per transaction")
    imp.add_argument("--config", help="a MemoryConfig JSON file for a new store")
    imp.add_argument("--key-file", help="a file holding the store's 32-byte key")
    imp.set_defaults(func=_import)
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
