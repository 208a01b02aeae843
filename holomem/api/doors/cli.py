"""The ``holomem`` command line (also ``python -m holomem``); the reference is docs/cli.md.

Owns: argument parsing (help on every option), opening a store for a command, the exit
statuses, and forget's confirmation. Every memory command goes through the JSON
contract (``Memory.call``), so the CLI answers exactly what HTTP and Python do; how
answers are printed is :mod:`holomem.api.doors.cliprint`'s. Imports the memory API,
the engine's ``Store`` and the file layer.

    holomem remember STORE --text T [--namespace NS] [--id I] [--subject S] ...
    holomem recall STORE QUERY [--namespace NS] [--filter JSON] [--k N] [--as-of W] ...
    holomem explain STORE QUERY ID        holomem get | history STORE ID
    holomem forget STORE (--id I... | --subject S | --entity E | --ingested-before W |
                          --event-before W | --metadata JSON | --namespace NS)
                         [--within NS] [--include-chain] [--dry-run] [--purge] [--yes]
    holomem list STORE [--limit N] [--cursor C | --all] [--namespace NS] [--filter JSON]
    holomem list-namespaces STORE [--prefix NS] [--max-depth N] [--all]
    holomem info | config | export | import STORE ...    holomem fsck STORE [...]
    holomem serve | mcp | demo | hermes install

W is milliseconds since the epoch or an ISO 8601 date or date and time (UTC unless it
gives an offset). ``--json`` prints one indented document, ``--jsonl`` one object per
line. Exit status (every command but fsck, which keeps e2fsck's): 0 success; 1 not
found (also ``get`` of an unknown id) or refused (a conflict, a declined forget); 2 bad
usage, input or configuration; 3 the store cannot be opened.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from holomem.api import validate
from holomem.api.doors import cliprint
from holomem.api.engine import Store
from holomem.api.memory import Memory
from holomem.api.types import MemoryConfig, config_from_json, config_to_json
from holomem.api.validate import to_ms
from holomem.errors import ConflictError, HolomemError, InvalidError, NotFoundError
from holomem.log import fs

#: The exit statuses (docs/cli.md "Exit status"); argparse's own usage errors exit 2 too.
EXIT_OK, EXIT_NOT_FOUND, EXIT_USAGE, EXIT_STORE = 0, 1, 2, 3

EPILOG = """\
times (W): milliseconds since the Unix epoch (1735689600000) or ISO 8601:
  2025-01-01, 2025-01-01T09:30, 2025-01-01T09:30:00+02:00, 2025-01-01T09:30Z
  (no offset means UTC)
namespaces (NS): parts joined by "/" (users/ann) or a JSON array
  ('["users", "ann"]', for parts holding a "/"); "" is the root
exit status: 0 success; 1 not found (an unknown id, get included) or refused
  (a conflict, a declined forget); 2 bad usage, input or configuration;
  3 the store cannot be opened (missing, locked by a writer, wrong key, damage,
  I/O). holomem fsck exits as python -m holomem.fsck does (0, 1, 4, 8).
reference: docs/cli.md"""

TIME_HELP = ("W: milliseconds since the epoch or ISO 8601 (2025-01-01T09:30Z; UTC if no "
             "offset)")
NS_HELP = 'parts joined by "/" (users/ann) or a JSON array \'["users", "ann"]\'; "" is the root'


class _Failure(Exception):
    """Ends a command: the message goes to stderr, ``status`` is the exit status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _status(exc: HolomemError) -> int:
    """The exit status of an error a memory call raised on an open store."""
    if isinstance(exc, InvalidError):  # invalid_request and limit
        return EXIT_USAGE
    if isinstance(exc, (NotFoundError, ConflictError)):
        return EXIT_NOT_FOUND
    return EXIT_STORE  # damage, I/O, a closed store: the store cannot be used


# -- argument types ------------------------------------------------------------------------
def _when(text: str) -> int:
    """Milliseconds from an integer (ms since the epoch) or an ISO 8601 date or date and
    time (naive means UTC)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (milliseconds since the epoch, or ISO 8601 such as "
            "2025-01-01 or 2025-01-01T09:30Z)") from exc
    if value.utcoffset() is None:
        value = value.replace(tzinfo=dt.UTC)
    try:
        return to_ms(value, "time") or 0
    except InvalidError as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc.message}") from exc


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


def _json_object(text: str) -> dict[str, Any]:
    """A JSON object given as an option's value (metadata, a filter)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object: {text!r}")
    return value


class _Deprecated(argparse.Action):
    """An old option name that still works, and says on stderr which one to use."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str,
                 **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        print(f"warning: {option_string} is deprecated; use {self.new}", file=sys.stderr)
        setattr(namespace, self.dest, values)


# -- opening a store -------------------------------------------------------------------------
def _option_file(path: str, option: str) -> bytes:
    """The bytes of a file named by an option: one that cannot be read is bad usage."""
    try:
        return fs.read_file(path)
    except HolomemError as exc:
        raise _Failure(EXIT_USAGE, f"{option} {path}: {exc.message}") from exc


def _key(args: argparse.Namespace) -> bytes | None:
    path = getattr(args, "key_file", None)
    return _option_file(path, "--key-file") if path else None


def _config_file(path: str | None, option: str = "--config") -> MemoryConfig | None:
    if not path:
        return None
    try:
        return validate.memory_config(config_from_json(_option_file(path, option)))
    except InvalidError as exc:
        raise _Failure(EXIT_USAGE, f"{option} {path}: {exc.message}") from exc


@contextlib.contextmanager
def _memory(args: argparse.Namespace, *, write: bool = False, create: bool = False,
            config: MemoryConfig | None = None, persist: bool = False) -> Iterator[Memory]:
    """A Memory over ``args.store``, closed afterwards. Reads open a follower, so they
    work while a server, an MCP client or an agent holds the store's writer lock.

    The store's own configuration applies (docs/contract.md §4c); ``config`` (from
    ``--config``) must be the store's, or seeds a store that has none.
    """
    key = _key(args)
    try:
        store = Store.open(args.store, key=key, create=create, read_only=not write)
    except HolomemError as exc:
        raise _Failure(EXIT_STORE, f"{exc.code}: {exc.message}") from exc
    except OSError as exc:
        raise _Failure(EXIT_STORE, f"{args.store}: {exc}") from exc
    try:
        try:
            memory = Memory(store, config, persist=persist)
        except (InvalidError, ConflictError) as exc:
            # A configuration the store refuses (or cannot apply: custom policies).
            raise _Failure(EXIT_USAGE, f"{exc.code}: {exc.message} (holomem config "
                           f"{args.store} shows the recorded one, --set records another)"
                           ) from exc
        except HolomemError as exc:
            raise _Failure(EXIT_STORE, f"{exc.code}: {exc.message}") from exc
        yield memory
    finally:
        store.close()


# -- remember, recall, explain, get, history -------------------------------------------------
def _request(args: argparse.Namespace) -> dict[str, Any]:
    if args.command == "remember":
        req: dict[str, Any] = {"text": args.text}
        for name, key in (("id", "id"), ("subject", "subject"), ("event_time", "eventTime"),
                          ("valid_from", "validFrom"), ("valid_to", "validTo"),
                          ("confidence", "confidence"), ("metadata", "metadata"),
                          ("namespace", "namespace")):
            if getattr(args, name) is not None:
                req[key] = getattr(args, name)
        if args.entity:
            req["entities"] = args.entity
        if args.supersedes:
            req["supersedes"] = args.supersedes
        return req
    if args.command in ("recall", "explain"):
        req = {"query": args.query, "k": args.k, "history": args.history}
        if args.command == "explain":
            req["id"] = args.id
        elif args.explain:
            req["explain"] = True
        for name, key in (("as_of", "asOf"), ("known_at", "knownAt"), ("subject", "subject"),
                          ("namespace", "namespace"), ("filter", "filter")):
            if getattr(args, name) is not None:
                req[key] = getattr(args, name)
        return req
    return {"id": args.id}


#: The records a --jsonl answer has one line each of.
_ROWS = {"recall": "results", "history": "history"}


def _memory_command(args: argparse.Namespace) -> int:
    request = _request(args)
    write = args.command == "remember"
    config = _config_file(args.config)
    with _memory(args, write=write, create=write, config=config) as memory:
        response = memory.call(args.command, request)
        if args.command == "get" and response["fact"] is None:
            raise _Failure(EXIT_NOT_FOUND, f"not_found: no fact {args.id!r}")
        if args.json:
            cliprint.emit_json(response)
        elif getattr(args, "jsonl", False):
            cliprint.emit_jsonl(response[_ROWS[args.command]])
        else:
            cliprint.print_response(args.command, response)
    return EXIT_OK


# -- forget ------------------------------------------------------------------------------------
def _forget_scope(args: argparse.Namespace) -> dict[str, Any]:
    for name, key in (("ids", "ids"), ("subject", "subject"), ("entity", "entity"),
                      ("ingested_before", "ingestedBefore"), ("event_before", "eventBefore"),
                      ("metadata", "metadata"), ("namespace", "namespace")):
        if getattr(args, name) is not None:
            return {key: getattr(args, name)}
    raise AssertionError("argparse requires one scope")  # a required exclusive group


def _interactive() -> bool:
    return sys.stdin is not None and sys.stdin.isatty()


def _confirm(question: str) -> bool:
    """Ask on stderr, read the answer from stdin: only y or yes agrees."""
    print(question, end="", file=sys.stderr, flush=True)
    try:
        answer = sys.stdin.readline()
    except KeyboardInterrupt:
        answer = ""
    if not answer.endswith("\n"):
        print(file=sys.stderr)
    return answer.strip().lower() in ("y", "yes")


def _forget(args: argparse.Namespace) -> int:
    """A dry run (a follower: nothing changes), or the writer's forget, confirmed on a
    terminal after the dry-run report unless --yes. The plan and the removal run under
    one writer lock, so what is removed is what was shown."""
    request: dict[str, Any] = {"scope": _forget_scope(args),
                               "includeChain": args.include_chain, "purge": args.purge}
    if args.within is not None:
        request["within"] = args.within
    if args.dry_run:
        with _memory(args) as memory:
            report = memory.call("forget", {**request, "dryRun": True})
    else:
        if not args.yes and not _interactive():
            raise _Failure(EXIT_USAGE, "forget asks for confirmation and stdin is not a "
                           "terminal: pass --yes to forget without asking (--dry-run shows "
                           "what would go)")
        with _memory(args, write=True) as memory:
            if not args.yes:
                plan = memory.call("forget", {**request, "dryRun": True})
                if plan["removed"] or args.purge:
                    shown = [memory.call("get", {"id": fid})["fact"]
                             for fid in plan["removed"][:cliprint.PREVIEW]]
                    print(cliprint.forget_preview(plan, shown, args.purge), file=sys.stderr)
                    n = len(plan["removed"])
                    if not _confirm(f"forget {n} fact{'s' if n != 1 else ''}"
                                    f"{' and purge' if args.purge else ''}? [y/N] "):
                        raise _Failure(EXIT_NOT_FOUND, "declined: nothing was forgotten")
            report = memory.call("forget", {**request, "dryRun": False})
    if args.json:
        cliprint.emit_json(report)
    else:
        print(cliprint.forget_done(report))
    return EXIT_OK


# -- list, list-namespaces ---------------------------------------------------------------------
def _pages(memory: Memory, op: str, request: dict[str, Any], cursor: str | None,
           every: bool) -> Iterator[dict[str, Any]]:
    """The pages of a listing from ``cursor`` (one page, or with ``every`` all of them)."""
    while True:
        page = memory.call(op, {**request, "cursor": cursor} if cursor else request)
        yield page
        cursor = page["nextCursor"]
        if cursor is None or not every:
            return


def _paged(args: argparse.Namespace, op: str, request: dict[str, Any], rows: str) -> int:
    with _memory(args) as memory:
        pages = _pages(memory, op, request, args.cursor, args.all)
        if args.json:
            if not args.all:
                cliprint.emit_json(next(pages))
                return EXIT_OK
            whole: dict[str, Any] = {rows: [], "nextCursor": None}
            for page in pages:
                whole[rows] += page[rows]
                if "scanned" in page:
                    whole["scanned"] = whole.get("scanned", 0) + page["scanned"]
            cliprint.emit_json(whole)
            return EXIT_OK
        shown, cursor = 0, None
        for page in pages:
            shown += len(page[rows])
            if args.jsonl:
                cliprint.emit_jsonl(page[rows])
            elif rows == "facts":
                cliprint.print_facts(page[rows])
            else:
                cliprint.print_namespaces(page[rows])
            cursor = page["nextCursor"]
    if cursor is not None:
        sys.stdout.flush()  # the page first, then where it goes on
        print(f"more: pass --cursor {cursor} (or --all)", file=sys.stderr)
    elif not shown and not args.jsonl:
        print("(none)")
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"limit": args.limit, "history": args.history}
    if args.namespace is not None:
        request["namespace"] = args.namespace
    if args.filter is not None:
        request["filter"] = args.filter
    return _paged(args, "list", request, "facts")


def _list_namespaces(args: argparse.Namespace) -> int:
    request: dict[str, Any] = {"limit": args.limit}
    if args.prefix is not None:
        request["prefix"] = args.prefix
    if args.max_depth is not None:
        request["maxDepth"] = args.max_depth
    return _paged(args, "listNamespaces", request, "namespaces")


# -- config, info, export, import --------------------------------------------------------------
def _config(args: argparse.Namespace) -> int:
    """Print the store's configuration (the defaults when nothing is recorded yet);
    with --set, record another one (docs/contract.md §4c)."""
    config = _config_file(args.set, "--set")
    with _memory(args, write=config is not None, create=config is not None, config=config,
                 persist=True) as memory:
        shown = memory.config
    print(json.dumps(json.loads(config_to_json(shown)), indent=2))
    return EXIT_OK


def _info(args: argparse.Namespace) -> int:
    """What a store is: id, generation, facts, bytes, embedder, configuration. Opens a
    follower, so it works while a server holds the store."""
    with _memory(args) as memory:
        stats = memory.store.stats()
        info = memory.info()
    out = {"store": os.path.abspath(args.store), "storeId": stats.store_id,
           "generation": stats.generation, "revision": stats.revision,
           "facts": info.facts, "documents": stats.documents, "namespaces": info.namespaces,
           "encrypted": stats.encrypted, "journalBytes": stats.journal_bytes,
           "textBytes": stats.text_bytes, "indexBytes": stats.index_bytes,
           "embedder": info.embedder, "reembedPending": info.reembed_pending,
           "config": msgspec.to_builtins(info.config)}
    if args.json:
        print(json.dumps(out, indent=2))
        return EXIT_OK
    width = max(len(k) for k in out)
    for name, value in out.items():
        shown = json.dumps(value) if isinstance(value, (dict, list)) else value
        print(f"{name:<{width}}  {shown if value is not None else '(none)'}")
    return EXIT_OK


def _export(args: argparse.Namespace) -> int:
    """Every fact at or under --namespace as JSON Lines, to --output (written whole and
    synced, or not at all) or to stdout."""
    if args.output and not os.path.isdir(os.path.dirname(os.path.abspath(args.output))):
        raise _Failure(EXIT_USAGE, f"--output {args.output}: no such directory")
    progress = cliprint.Progress("exported")
    with _memory(args) as memory:
        try:
            chunks = cliprint.jsonl_chunks(memory.export(args.namespace), progress)
            if args.output:
                fs.write_file_atomic(args.output, chunks)
            else:
                sys.stdout.flush()
                for chunk in chunks:
                    sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
        finally:
            progress.close()
    return EXIT_OK


def _file_lines(path: str, size: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a file, read ``size`` bytes at a time (opened now, so a missing file
    is an error before anything else happens)."""
    try:
        fd = fs.open_ro(path)
    except HolomemError as exc:
        raise _Failure(EXIT_USAGE, f"{path}: {exc.message}") from exc

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
    config = _config_file(args.config)
    lines = iter(sys.stdin.buffer) if args.file == "-" else _file_lines(args.file)
    progress = cliprint.Progress("imported")
    with _memory(args, write=True, create=True, config=config) as memory:
        try:
            report = memory.import_(lines, batch_size=args.batch_size, progress=progress)
        finally:
            progress.close()
    if report.unresolved_links:
        print(f"warning: {report.unresolved_links} links name facts that were not "
              "imported; they were not written", file=sys.stderr)
    print(json.dumps(msgspec.to_builtins(report)))
    return EXIT_OK


# -- fsck, demo, servers, integrations ---------------------------------------------------------
def _fsck(argv: Sequence[str]) -> int:
    """``python -m holomem.fsck`` with the same arguments, its output and exit status.

    A child process: the recovery tool reads the log beneath the memory API, which no
    door imports (tests/test_layers.py).
    """
    try:
        return subprocess.run([sys.executable, "-m", "holomem.fsck", *argv],
                              check=False).returncode
    except KeyboardInterrupt:
        return 130


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
        if args.config:
            try:
                config = validate.memory_config(config_from_json(_read(args.config)))
            except HolomemError as exc:
                raise InvalidError(f"--config {args.config}: {exc}") from exc
        app = create_app(args.data, host=args.host, port=args.port, api_key=api_key,
                         config=config, key=key, max_tenants=args.max_tenants,
                         allowed_hosts=args.allow_host, allowed_origins=args.allow_origin,
                         max_tenant_stores=args.max_tenant_stores)
    except (OSError, UnicodeDecodeError, HolomemError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    run(app, host=args.host, port=args.port)
    return 0


def _read(path: str) -> bytes:
    return fs.read_file(path)


def _mcp(args: argparse.Namespace) -> int:
    """Options first (fast, clear errors), then the MCP SDK (slow to import; missing
    without the serve extra), then the store: nothing is created before all three hold.
    A store another process writes is followed read-only (:mod:`.follower`)."""
    from holomem.api.doors.scoping import Scope

    try:
        scope = Scope(args.namespace or ())
        key = _read(args.key_file) if args.key_file else None
        config = config_from_json(_read(args.config)) if args.config else None
        api_key = _read(args.api_key_file).decode().strip() if args.api_key_file else None
        if api_key is not None and args.server is None:
            raise InvalidError("--api-key-file is the key of --server; give --server too")
    except (OSError, UnicodeDecodeError, HolomemError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        from holomem.api.doors.follower import Served, served_tenant
        from holomem.api.doors.mcp import serve
        from holomem.client import Client  # httpx: --server forwards writes with it
    except ImportError as exc:
        print("error: the MCP server needs the serve extra (pip install 'holomem-db[serve]'): "
              f"{exc}", file=sys.stderr)
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


def _hermes(args: argparse.Namespace) -> int:
    from holomem.integrations.hermes_plugin import main as hermes_main

    return hermes_main(args)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("holomem-db")  # the distribution's name; the package is holomem
    except PackageNotFoundError:
        return "(not installed: pip install -e .)"


# -- the parser ---------------------------------------------------------------------------------
def _store_options(p: argparse.ArgumentParser, *, created: bool = False) -> None:
    p.add_argument("store", metavar="STORE",
                   help="the store directory" + (" (created if missing)" if created else ""))
    p.add_argument("--key-file", metavar="F",
                   help="a file holding the store's 32-byte encryption key")


def _config_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--config", metavar="F.json",
                   help=f"a MemoryConfig JSON file (camelCase) {what}")
    p.add_argument("--memory-config", metavar="F.json", dest="config", action=_Deprecated,
                   new="--config", help="deprecated: the old name of --config")


def _output_options(p: argparse.ArgumentParser, *, jsonl: bool) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true",
                       help="print the answer as one indented JSON document")
    if jsonl:
        group.add_argument("--jsonl", action="store_true",
                           help="print JSON Lines: one compact JSON object per line "
                           "(for scripts)")


def build_parser() -> argparse.ArgumentParser:
    """The ``holomem`` argument parser: every command, option and argument with its help."""
    shape: dict[str, Any] = {"formatter_class": argparse.RawDescriptionHelpFormatter,
                             "epilog": EPILOG}
    parser = argparse.ArgumentParser(prog="holomem",
                                     description="holomem: agent memory you can trust",
                                     **shape)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}",
                        help="print the installed version (holomem-db) and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="what to do (holomem COMMAND --help lists its options)")

    def command(name: str, summary: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=summary, **shape, **kwargs)

    # -- facts
    rem = command("remember", "store one fact")
    _store_options(rem, created=True)
    rem.add_argument("--text", required=True, help="the fact (required)")
    rem.add_argument("--namespace", type=_namespace, metavar="NS",
                     help=f"the namespace the fact lives in (default: the root): {NS_HELP}")
    rem.add_argument("--id", help="its id (default: derived from the content)")
    rem.add_argument("--subject", help="its subject slot, e.g. alice/city (supersession "
                     "policies act on it)")
    rem.add_argument("--entity", action="append", metavar="E",
                     help="an entity it is about (repeatable)")
    rem.add_argument("--metadata", type=_json_object, metavar="JSON",
                     help='a JSON object, e.g. \'{"source": "chat"}\'')
    rem.add_argument("--event-time", type=_when, metavar="W",
                     help=f"when it happened; {TIME_HELP}")
    rem.add_argument("--valid-from", type=_when, metavar="W",
                     help=f"when it starts to hold; {TIME_HELP}")
    rem.add_argument("--valid-to", type=_when, metavar="W",
                     help=f"when it stops holding; {TIME_HELP}")
    rem.add_argument("--supersedes", action="append", metavar="ID",
                     help="an id this fact supersedes (repeatable)")
    rem.add_argument("--confidence", type=float, metavar="X",
                     help="what the agent believes of it, in [0, 1] (default 1)")
    _output_options(rem, jsonl=False)
    _config_options(rem, "for this store: it must be the store's, or seeds a new store")
    rem.set_defaults(func=_memory_command)

    for name, what in (("recall", "the facts relevant to a query, best first"),
                       ("explain", "whether and why a fact comes back for a query")):
        p = command(name, what)
        _store_options(p)
        p.add_argument("query", metavar="QUERY", help="the query text")
        if name == "explain":
            p.add_argument("id", metavar="ID", help="the fact to explain")
        else:
            p.add_argument("--explain", action="store_true",
                           help="explain every result (scores, matched terms, chain)")
        p.add_argument("--namespace", type=_namespace, metavar="NS",
                       help=f"only facts at or under this namespace: {NS_HELP}")
        p.add_argument("--filter", type=_json_object, metavar="JSON",
                       help="only facts this filter object holds for (docs/contract.md "
                       "§4b), e.g. '{\"metadata\": {\"source\": \"chat\"}}'")
        p.add_argument("--k", type=int, default=10, metavar="N",
                       help="how many results (1 to 1000; default 10)")
        p.add_argument("--as-of", type=_when, metavar="W",
                       help=f"evaluate every status at this time (default: now); {TIME_HELP}")
        p.add_argument("--known-at", type=_when, metavar="W",
                       help=f"ignore what was ingested after this time; {TIME_HELP}")
        p.add_argument("--subject", help="only facts of this subject")
        p.add_argument("--history", choices=("current", "all", "historical"),
                       default="current", help="which versions: current (default), all, "
                       "or historical (superseded, expired, not yet valid)")
        _output_options(p, jsonl=name == "recall")
        _config_options(p, "for this store: it must be the store's")
        p.set_defaults(func=_memory_command)

    for name, what in (("get", "one fact, with its status now (exit 1 if unknown)"),
                       ("history", "every version of a fact's supersession chain, in "
                        "effect order")):
        p = command(name, what)
        _store_options(p)
        p.add_argument("id", metavar="ID", help="the fact's id")
        _output_options(p, jsonl=name == "history")
        _config_options(p, "for this store: it must be the store's")
        p.set_defaults(func=_memory_command)

    fgt = command("forget", "remove facts (one scope); asks first unless --yes")
    _store_options(fgt)
    scope = fgt.add_argument_group("scope (exactly one)").add_mutually_exclusive_group(
        required=True)
    scope.add_argument("--id", dest="ids", action="extend", nargs="+", metavar="ID",
                       help="these facts (several after one --id, or repeat it)")
    scope.add_argument("--subject", help="every fact of this subject")
    scope.add_argument("--entity", metavar="E", help="every fact carrying this entity")
    scope.add_argument("--ingested-before", type=_when, metavar="W",
                       help=f"facts ingested before this time; {TIME_HELP}")
    scope.add_argument("--event-before", type=_when, metavar="W",
                       help=f"facts whose event time is before this time; {TIME_HELP}")
    scope.add_argument("--metadata", type=_json_object, metavar="JSON",
                       help="facts whose metadata has every given key equal to the given "
                       "value, e.g. '{\"source\": \"import\"}'")
    scope.add_argument("--namespace", type=_namespace, metavar="NS",
                       help=f"every fact at or under this namespace ({NS_HELP}: every "
                       "fact of the store)")
    fgt.add_argument("--within", type=_namespace, metavar="NS",
                     help=f"only facts of the scope at or under this namespace: {NS_HELP}")
    fgt.add_argument("--include-chain", action="store_true",
                     help="also every fact linked to a matched one by supersession, "
                     "both ways")
    fgt.add_argument("--dry-run", action="store_true",
                     help="remove nothing: report what would go (needs no confirmation "
                     "and works while a server holds the store)")
    fgt.add_argument("--purge", action="store_true",
                     help="then compact the store so that no file keeps the removed text")
    fgt.add_argument("--yes", "-y", action="store_true",
                     help="do not ask for confirmation (required when stdin is not a "
                     "terminal)")
    _output_options(fgt, jsonl=False)
    fgt.set_defaults(func=_forget)

    lst = command("list", "every stored fact in write order, a page at a time")
    _store_options(lst)
    lst.add_argument("--limit", type=int, default=100, metavar="N",
                     help="facts per page (1 to 1000; default 100)")
    pos = lst.add_mutually_exclusive_group()
    pos.add_argument("--cursor", metavar="C",
                     help="continue where a page ended (the cursor it printed)")
    pos.add_argument("--all", action="store_true", help="walk every page to the end")
    lst.add_argument("--namespace", type=_namespace, metavar="NS",
                     help=f"only facts at or under this namespace: {NS_HELP}")
    lst.add_argument("--filter", type=_json_object, metavar="JSON",
                     help="a filter object (docs/contract.md §4b; its times as the JSON contract "
                     "takes them), "
                     "which also takes subject, entity and status, e.g. "
                     "'{\"status\": \"current\", \"metadata\": {\"n\": {\"$gt\": 2}}}'")
    lst.add_argument("--history", choices=("all", "current", "historical"), default="all",
                     help="which facts by status: all (default), current, or historical")
    _output_options(lst, jsonl=True)
    lst.set_defaults(func=_list)

    lns = command("list-namespaces", "the namespaces that hold facts, with their counts")
    _store_options(lns)
    lns.add_argument("--prefix", type=_namespace, metavar="NS",
                     help=f"only namespaces at or under this one: {NS_HELP}")
    lns.add_argument("--max-depth", type=int, metavar="N",
                     help="cut each namespace to its first N parts (adding up the counts)")
    lns.add_argument("--limit", type=int, default=100, metavar="N",
                     help="namespaces per page (default 100)")
    pos = lns.add_mutually_exclusive_group()
    pos.add_argument("--cursor", metavar="C", help="continue where a page ended")
    pos.add_argument("--all", action="store_true", help="walk every page to the end")
    _output_options(lns, jsonl=True)
    lns.set_defaults(func=_list_namespaces)

    # -- the store
    inf = command("info", "a store's id, generation, facts, bytes, embedder and "
                  "configuration")
    _store_options(inf)
    _output_options(inf, jsonl=False)
    inf.set_defaults(func=_info)
    cfg = command("config", "print the store's configuration, or record one")
    _store_options(cfg)
    cfg.add_argument("--set", metavar="F.json",
                     help="record this MemoryConfig JSON file as the store's configuration "
                     "(creating the store if needed)")
    cfg.set_defaults(func=_config)
    exp = command("export", "write every fact as JSON Lines (with its history)")
    _store_options(exp)
    exp.add_argument("--namespace", type=_namespace, default=[], metavar="NS",
                     help=f"only facts at or under it (default: all): {NS_HELP}")
    exp.add_argument("--output", "-o", metavar="FILE",
                     help="the file to write, whole and synced or not at all (default: "
                     "stdout)")
    exp.set_defaults(func=_export)
    imp = command("import", "restore facts from JSON Lines, in atomic batches")
    _store_options(imp, created=True)
    imp.add_argument("file", nargs="?", default="-", metavar="FILE",
                     help="the JSON Lines file (default -: stdin)")
    imp.add_argument("--batch-size", type=int, default=1000, metavar="N",
                     help="facts per transaction (1 to 10000; default 1000)")
    _config_options(imp, "for a new store (an existing one must have recorded the same)")
    imp.set_defaults(func=_import)
    fsk = command("fsck", "check (and repair) a store: python -m holomem.fsck",
                  add_help=False)
    fsk.add_argument("args", nargs=argparse.REMAINDER, metavar="...",
                     help="fsck's arguments: STORE [--repair | --salvage DEST] [--json] "
                     "[--key-file F] [--backup-dir DIR] (holomem fsck --help lists them)")
    fsk.set_defaults(func=lambda args: _fsck(args.args))

    # -- servers, integrations, the demo
    srv = command("serve", "serve the JSON contract over HTTP, with tenants")
    srv.add_argument("--data", required=True, metavar="DIR",
                     help="directory holding the tenants' stores")
    srv.add_argument("--host", default="127.0.0.1", help="the address to bind "
                     "(default 127.0.0.1)")
    srv.add_argument("--port", type=int, default=8080, help="the port (default 8080)")
    srv.add_argument("--api-key-file", metavar="F",
                     help="file holding the API key clients must send")
    _config_options(srv, "for tenants that have recorded none yet (validated at start)")
    srv.add_argument("--key-file", metavar="F",
                     help="file holding the 32-byte encryption key of every tenant's store")
    srv.add_argument("--max-tenants", type=int, default=64, metavar="N",
                     help="stores kept open at once (default 64)")
    srv.add_argument("--max-tenant-stores", type=int, default=1000, metavar="N",
                     help="tenant stores that may exist; a new tenant past it is refused "
                     "(limit, HTTP 507) and the others are served (default 1000)")
    srv.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                     help="another Host name clients may use (repeatable; besides IP "
                     "addresses, localhost and --host)")
    srv.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                     help="a browser origin allowed to call the API, e.g. "
                     "https://app.example (repeatable; none by default)")
    srv.set_defaults(func=_serve)
    mcp = command("mcp", "serve one store to an MCP client over stdio (several clients: "
                  "holomem serve's /mcp)")
    mcp.add_argument("--data", required=True, metavar="DIR",
                     help="the store directory (created if missing); when another process "
                     "is its writer, it is followed read-only")
    mcp.add_argument("--key-file", metavar="F", help="file holding the 32-byte encryption key")
    _config_options(mcp, "for a store that has recorded none yet")
    mcp.add_argument("--namespace", action="append", metavar="PART",
                     help="confine every call to this namespace, one string per flag "
                     "(--namespace users --namespace u-42); tools' namespaces are under it")
    mcp.add_argument("--server", metavar="URL",
                     help="the holomem serve that writes this store (e.g. "
                     "http://127.0.0.1:8080): follow --data read-only and send writes "
                     "there; --data must be that server's DATA/tenants/<tenant>")
    mcp.add_argument("--api-key-file", metavar="F",
                     help="file holding the API key of --server")
    mcp.set_defaults(func=_mcp)
    hermes = command("hermes", "Hermes Agent integration")
    hermes_sub = hermes.add_subparsers(dest="hermes_command", required=True, metavar="ACTION",
                                       help="install: write the plugin")
    install = hermes_sub.add_parser(
        "install", help="write the holomem memory-provider plugin into $HERMES_HOME/plugins/")
    install.add_argument("--hermes-home", metavar="DIR",
                         help="Hermes' home (default: $HERMES_HOME, else ~/.hermes)")
    install.set_defaults(func=_hermes)
    demo = command("demo", "run the whole story on an embedded store")
    demo.add_argument("--dir", metavar="DIR",
                      help="where to put the demo store (default: a new temp dir)")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (see the module docstring)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["fsck"]:  # every argument is fsck's own, --help included
        return _fsck(words[1:])
    args = build_parser().parse_args(words)
    try:
        status: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (holomem list S --jsonl | head -1): it had what it wanted.
        # Later writes, and the interpreter's final flush, go to the null device.
        fs.discard_output(sys.stdout.fileno())
        return EXIT_OK
    except _Failure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return _status(exc)
    return status


if __name__ == "__main__":
    sys.exit(main())
