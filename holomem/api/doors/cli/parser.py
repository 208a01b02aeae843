"""The ``holomem`` argument parser: every command, option and argument with its help
(docs/cli.md); the argument types are :mod:`.args`'.

Owns the words a user types, not what a command does: :mod:`holomem.api.doors.cli.commands` runs
the command ``args.command`` names.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from holomem.api.doors.cli import conversation, graph, migrate, profile
from holomem.api.doors.cli.args import (
    NS_HELP,
    TIME_HELP,
    Deprecated,
    json_object,
    namespace_parts,
    seconds,
    when_ms,
)
from holomem.api.memory.about import holomem_version

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

def _store_options(p: argparse.ArgumentParser, *, created: bool = False) -> None:
    p.add_argument("store", metavar="STORE",
                   help="the store directory" + (" (created if missing)" if created else ""))
    p.add_argument("--key-file", metavar="F",
                   help="a file holding the store's 32-byte encryption key")


def _config_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--config", metavar="F.json",
                   help=f"a MemoryConfig JSON file (camelCase) {what}")
    p.add_argument("--memory-config", metavar="F.json", dest="config", action=Deprecated,
                   new="--config", help="deprecated: the old name of --config")


def _output_options(p: argparse.ArgumentParser, *, jsonl: bool) -> None:
    group = p.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true",
                       help="print the answer as one indented JSON document")
    if jsonl:
        group.add_argument("--jsonl", action="store_true",
                           help="print JSON Lines: one compact JSON object per line "
                           "(for scripts)")


def _progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress-every", type=seconds, default=None, metavar="S",
                   help="seconds between progress lines on stderr when it is not a terminal "
                   "(default 2; 0: a line at every step)")


def build_parser() -> argparse.ArgumentParser:
    """The ``holomem`` argument parser: every command, option and argument with its help."""
    shape: dict[str, Any] = {"formatter_class": argparse.RawDescriptionHelpFormatter,
                             "epilog": EPILOG}
    parser = argparse.ArgumentParser(prog="holomem",
                                     description="holomem: agent memory you can trust",
                                     **shape)
    parser.add_argument("--version", action="version", version=f"%(prog)s {holomem_version()}",
                        help="print the installed version (holomem-db) and exit")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                help="what to do (holomem COMMAND --help lists its options)")

    def command(name: str, summary: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=summary, **shape, **kwargs)

    _fact_commands(command)
    graph.add_commands(command, _store_options, _output_options)
    conversation.add_command(command, _store_options, _output_options)
    profile.add_command(command, _store_options, _output_options)
    _store_commands(command)
    migrate.add_command(command, _store_options, _config_options, _progress_option)
    _server_commands(command)
    return parser


#: Adds one subcommand: its name, its one-line summary, argparse's keyword arguments.
Command = Callable[..., argparse.ArgumentParser]


def _fact_commands(command: Command) -> None:
    """remember, recall, explain, get, history, forget, list, list-namespaces."""
    rem = command("remember", "store one fact")
    _store_options(rem, created=True)
    rem.add_argument("--text", required=True, help="the fact (required)")
    rem.add_argument("--namespace", type=namespace_parts, metavar="NS",
                     help=f"the namespace the fact lives in (default: the root): {NS_HELP}")
    rem.add_argument("--id", help="its id (default: derived from the content)")
    rem.add_argument("--subject", help="its subject slot, e.g. alice/city (supersession "
                     "policies act on it)")
    rem.add_argument("--entity", action="append", metavar="E",
                     help="an entity it is about (repeatable)")
    rem.add_argument("--metadata", type=json_object, metavar="JSON",
                     help='a JSON object, e.g. \'{"source": "chat"}\'')
    rem.add_argument("--event-time", type=when_ms, metavar="W",
                     help=f"when it happened; {TIME_HELP}")
    rem.add_argument("--valid-from", type=when_ms, metavar="W",
                     help=f"when it starts to hold; {TIME_HELP}")
    rem.add_argument("--valid-to", type=when_ms, metavar="W",
                     help=f"when it stops holding; {TIME_HELP}")
    rem.add_argument("--supersedes", action="append", metavar="ID",
                     help="an id this fact supersedes (repeatable)")
    rem.add_argument("--confidence", type=float, metavar="X",
                     help="what the agent believes of it, in [0, 1] (default 1)")
    _output_options(rem, jsonl=False)
    _config_options(rem, "for this store: it must be the store's, or seeds a new store")

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
        p.add_argument("--namespace", type=namespace_parts, metavar="NS",
                       help=f"only facts at or under this namespace: {NS_HELP}")
        p.add_argument("--filter", type=json_object, metavar="JSON",
                       help="only facts this filter object holds for (docs/contract.md "
                       "§4b), e.g. '{\"metadata\": {\"source\": \"chat\"}}'")
        p.add_argument("--k", type=int, default=10, metavar="N",
                       help="how many results (1 to 1000; default 10)")
        p.add_argument("--as-of", type=when_ms, metavar="W",
                       help=f"evaluate every status at this time (default: now); {TIME_HELP}")
        p.add_argument("--known-at", type=when_ms, metavar="W",
                       help=f"ignore what was ingested after this time; {TIME_HELP}")
        p.add_argument("--subject", help="only facts of this subject")
        p.add_argument("--history", choices=("current", "all", "historical"),
                       default="current", help="which versions: current (default), all, "
                       "or historical (superseded, expired, not yet valid)")
        _output_options(p, jsonl=name == "recall")
        _config_options(p, "for this store: it must be the store's")

    for name, what in (("get", "one fact, with its status now (exit 1 if unknown)"),
                       ("history", "every version of a fact's supersession chain, in "
                        "effect order")):
        p = command(name, what)
        _store_options(p)
        p.add_argument("id", metavar="ID", help="the fact's id")
        _output_options(p, jsonl=name == "history")
        _config_options(p, "for this store: it must be the store's")

    fgt = command("forget", "remove facts (one scope); asks first unless --yes")
    _store_options(fgt)
    scope = fgt.add_argument_group("scope (exactly one)").add_mutually_exclusive_group(
        required=True)
    scope.add_argument("--id", dest="ids", action="extend", nargs="+", metavar="ID",
                       help="these facts (several after one --id, or repeat it)")
    scope.add_argument("--subject", help="every fact of this subject")
    scope.add_argument("--entity", metavar="E", help="every fact carrying this entity")
    scope.add_argument("--ingested-before", type=when_ms, metavar="W",
                       help=f"facts ingested before this time; {TIME_HELP}")
    scope.add_argument("--event-before", type=when_ms, metavar="W",
                       help=f"facts whose event time is before this time; {TIME_HELP}")
    scope.add_argument("--metadata", type=json_object, metavar="JSON",
                       help="facts whose metadata has every given key equal to the given "
                       "value, e.g. '{\"source\": \"import\"}'")
    scope.add_argument("--namespace", type=namespace_parts, metavar="NS",
                       help=f"every fact at or under this namespace ({NS_HELP}: every "
                       "fact of the store)")
    fgt.add_argument("--within", type=namespace_parts, metavar="NS",
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

    lst = command("list", "every stored fact in write order, a page at a time")
    _store_options(lst)
    lst.add_argument("--limit", type=int, default=100, metavar="N",
                     help="facts per page (1 to 1000; default 100)")
    pos = lst.add_mutually_exclusive_group()
    pos.add_argument("--cursor", metavar="C",
                     help="continue where a page ended (the cursor it printed)")
    pos.add_argument("--all", action="store_true", help="walk every page to the end")
    lst.add_argument("--namespace", type=namespace_parts, metavar="NS",
                     help=f"only facts at or under this namespace: {NS_HELP}")
    lst.add_argument("--filter", type=json_object, metavar="JSON",
                     help="a filter object (docs/contract.md §4b; its times as the JSON contract "
                     "takes them), "
                     "which also takes subject, entity and status, e.g. "
                     "'{\"status\": \"current\", \"metadata\": {\"n\": {\"$gt\": 2}}}'")
    lst.add_argument("--history", choices=("all", "current", "historical"), default="all",
                     help="which facts by status: all (default), current, or historical")
    _output_options(lst, jsonl=True)

    lns = command("list-namespaces", "the namespaces that hold facts, with their counts")
    _store_options(lns)
    lns.add_argument("--prefix", type=namespace_parts, metavar="NS",
                     help=f"only namespaces at or under this one: {NS_HELP}")
    lns.add_argument("--max-depth", type=int, metavar="N",
                     help="cut each namespace to its first N parts (adding up the counts)")
    lns.add_argument("--limit", type=int, default=100, metavar="N",
                     help="namespaces per page (default 100)")
    pos = lns.add_mutually_exclusive_group()
    pos.add_argument("--cursor", metavar="C", help="continue where a page ended")
    pos.add_argument("--all", action="store_true", help="walk every page to the end")
    _output_options(lns, jsonl=True)



def _store_commands(command: Command) -> None:
    """info, config, export, import, fsck."""
    inf = command("info", "a store's id, generation, facts, bytes, embedder and "
                  "configuration")
    _store_options(inf)
    _output_options(inf, jsonl=False)
    cfg = command("config", "print the store's configuration, or record one")
    _store_options(cfg)
    cfg.add_argument("--set", metavar="F.json",
                     help="record this MemoryConfig JSON file as the store's configuration "
                     "(creating the store if needed)")
    exp = command("export", "write every fact as JSON Lines (with its history)")
    _store_options(exp)
    exp.add_argument("--namespace", type=namespace_parts, default=[], metavar="NS",
                     help=f"only facts at or under it (default: all): {NS_HELP}")
    exp.add_argument("--output", "-o", metavar="FILE",
                     help="the file to write, whole and synced or not at all (default: "
                     "stdout)")
    _progress_option(exp)
    imp = command("import", "restore facts from JSON Lines, in atomic batches")
    _store_options(imp, created=True)
    imp.add_argument("file", nargs="?", default="-", metavar="FILE",
                     help="the JSON Lines file (default -: stdin)")
    imp.add_argument("--batch-size", type=int, default=1000, metavar="N",
                     help="facts per transaction (1 to 10000; default 1000)")
    _progress_option(imp)
    _config_options(imp, "for a new store (an existing one must have recorded the same)")
    fsk = command("fsck", "check (and repair) a store: python -m holomem.fsck",
                  add_help=False)
    fsk.add_argument("args", nargs=argparse.REMAINDER, metavar="...",
                     help="fsck's arguments: STORE [--repair | --salvage DEST] [--json] "
                     "[--key-file F] [--backup-dir DIR] (holomem fsck --help lists them)")



def _server_commands(command: Command) -> None:
    """serve, mcp, ui, hermes install, demo."""
    srv = command("serve", "serve the JSON contract over HTTP, with tenants")
    srv.add_argument("--data", required=True, metavar="DIR",
                     help="directory holding the tenants' stores")
    srv.add_argument("--journal", metavar="nats://HOST:PORT/PREFIX",
                     help="keep every tenant's journal on a NATS JetStream stream "
                     "PREFIX-<tenant> (docs/scale-out.md); DATA then holds only this "
                     "node's local files")
    srv.add_argument("--advertise", metavar="URL",
                     help="with --journal: the base URL other servers send this one's "
                     "writes to (default http://HOST:PORT, the machine's name for a "
                     "wildcard --host)")
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
    mcp = command("mcp", "serve one store to an MCP client over stdio (several of them "
                  "share one store; or holomem serve's /mcp)")
    mcp.add_argument("--data", required=True, metavar="DIR",
                     help="the store directory (created if missing); when another process "
                     "is its writer, it is followed read-only (writes go to that writer "
                     "when it is another holomem mcp of this user)")
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
    ui = command("ui", "serve the inspector: web pages over one store (docs/ui.md)")
    _store_options(ui)
    ui.add_argument("--host", default="127.0.0.1", help="the address to bind (default "
                    "127.0.0.1; any other that is not loopback needs --api-key-file)")
    ui.add_argument("--port", type=int, default=8765, help="the port (default 8765; 0: "
                    "one the system picks, printed on stderr)")
    ui.add_argument("--api-key-file", metavar="F",
                    help="file holding the key a browser signs in with (or a client "
                    "sends as X-API-Key)")
    ui.add_argument("--read-only", action="store_true",
                    help="never write, even when no other process writes the store "
                    "(forget is refused)")
    _config_options(ui, "for this store: it must be the store's")
    ui.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                    help="another Host name browsers may use (repeatable)")
    ui.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                    help="another browser origin allowed to post forms (repeatable; "
                    "none by default)")
    hermes = command("hermes", "Hermes Agent integration")
    hermes_sub = hermes.add_subparsers(dest="hermes_command", required=True, metavar="ACTION",
                                       help="install: write the plugin")
    install = hermes_sub.add_parser(
        "install", help="write the holomem memory-provider plugin into $HERMES_HOME/plugins/")
    install.add_argument("--hermes-home", metavar="DIR",
                         help="Hermes' home (default: $HERMES_HOME, else ~/.hermes)")
    demo = command("demo", "run the whole story on an embedded store")
    demo.add_argument("--dir", metavar="DIR",
                      help="where to put the demo store (default: a new temp dir)")
