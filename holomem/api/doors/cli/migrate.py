"""The ``holomem migrate`` command (docs/cli.md, docs/migrate.md): another library's
memory moved into a store, idempotently, with progress on stderr and the report as
JSON on stdout.

Owns: the command's three sources and their arguments, reaching each peer before the
store is opened (so a wrong path, a missing collection or a bad Mem0 config writes
nothing, not even a new store), and the run. The migrations themselves are
:mod:`holomem.integrations.migrate`'s. Imports the CLI's argument types and opening,
and the migration integration.

    holomem migrate langgraph-sqlite SQLITE_FILE STORE [--prefix NS] [--fields P ...]
    holomem migrate chroma CHROMA_DIR STORE --collection C [--collection C ...]
    holomem migrate mem0 STORE --mem0-config F.json (--user-id U | --agent-id A |
                                                     --run-id R) ...
      each also: [--namespace NS] [--vectors auto|keep|drop] [--batch-size N]
                 [--config F.json] [--key-file F] [--progress-every S] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from holomem.api.doors.cli.args import NS_HELP, namespace_parts
from holomem.api.doors.cli.opening import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    Failure,
    config_file,
    memory_of,
    option_file,
)
from holomem.api.engine import validate
from holomem.api.memory.progress import ProgressLines
from holomem.errors import InvalidError, NotFoundError

SOURCES = ("langgraph-sqlite", "chroma", "mem0")


def add_command(command: Callable[..., argparse.ArgumentParser],
                store_options: Callable[..., None], config_options: Callable[..., None],
                progress_option: Callable[..., None]) -> None:
    """Add ``migrate`` and its sources through the parser's ``command``, with its shared
    option builders (:mod:`.parser` hands them in)."""
    p = command("migrate", "move another library's memory into a store (LangGraph "
                "SQLite store, Chroma, Mem0): idempotent, the report as JSON")
    sub = p.add_subparsers(dest="source", required=True, metavar="SOURCE",
                           help="where the memory is: " + ", ".join(SOURCES))

    def source(name: str, summary: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=summary)

    lg = source("langgraph-sqlite", "every item of a LangGraph SqliteStore (read-only)")
    lg.add_argument("sqlite", metavar="SQLITE_FILE", help="the SqliteStore's database file")
    store_options(lg, created=True)
    lg.add_argument("--prefix", type=namespace_parts, default=[], metavar="NS",
                    help=f"only the items at or under this LangGraph namespace: {NS_HELP}")
    lg.add_argument("--fields", nargs="+", metavar="PATH",
                    help="the value fields whose text recall searches, as HolomemStore's "
                    "index fields (default: $, the whole value)")

    ch = source("chroma", "every record of Chroma collections (a persistent directory)")
    ch.add_argument("chroma", metavar="CHROMA_DIR", help="the Chroma persistent directory")
    store_options(ch, created=True)
    ch.add_argument("--collection", action="append", required=True, metavar="C",
                    help="a collection to move (repeatable; required)")

    m0 = source("mem0", "the memories of Mem0 users, agents or runs, with their history")
    store_options(m0, created=True)
    m0.add_argument("--mem0-config", required=True, metavar="F.json",
                    help="a JSON file holding the config mem0.Memory.from_config takes "
                    "(its vector store, embedder and history_db_path)")
    m0.add_argument("--user-id", action="append", default=[], metavar="U",
                    help="move this user's memories (repeatable)")
    m0.add_argument("--agent-id", action="append", default=[], metavar="A",
                    help="move this agent's memories (repeatable)")
    m0.add_argument("--run-id", action="append", default=[], metavar="R",
                    help="move this run's memories (repeatable)")

    for q in (lg, ch, m0):
        q.add_argument("--namespace", type=namespace_parts, default=[], metavar="NS",
                       help=f"the holomem namespace the memory goes under (default: the "
                       f"root): {NS_HELP}")
        q.add_argument("--vectors", choices=("auto", "keep", "drop"), default="auto",
                       help="the peer's vectors: auto (default) keeps them when the store's "
                       "embedder is the peer's model, keep always, drop never")
        q.add_argument("--batch-size", type=int, default=500, metavar="N",
                       help="facts per transaction (1 to 10000; default 500)")
        q.add_argument("--json", action="store_true",
                       help="print the report indented (default: one line)")
        progress_option(q)
        config_options(q, "for a new store (e.g. its embedder); an existing one must "
                       "have recorded the same")


@contextlib.contextmanager
def _peer(args: argparse.Namespace) -> Iterator[Any]:
    """The peer the command reads, reached (and checked) before the store opens."""
    from holomem.integrations import migrate

    try:
        if args.source == "langgraph-sqlite":
            with migrate.open_langgraph_sqlite(args.sqlite) as store:
                yield store
        elif args.source == "chroma":
            client = migrate.open_chroma(args.chroma)
            migrate.collections(client, args.collection)
            yield client
        else:
            if not (args.user_id or args.agent_id or args.run_id):
                raise Failure(EXIT_USAGE, "mem0: give --user-id, --agent-id or --run-id "
                              "(Mem0 lists memories only by them)")
            try:
                config = json.loads(option_file(args.mem0_config, "--mem0-config"))
            except (ValueError, RecursionError) as exc:  # (nested past the decoder)
                raise Failure(EXIT_USAGE, f"--mem0-config {args.mem0_config}: not JSON: "
                              f"{exc}") from exc
            yield migrate.open_mem0(config)
    except ModuleNotFoundError as exc:  # the peers extra (the message says how)
        raise Failure(EXIT_USAGE, str(exc)) from exc
    except NotFoundError as exc:
        raise Failure(EXIT_NOT_FOUND, f"{exc.code}: {exc.message}") from exc
    except InvalidError as exc:
        raise Failure(EXIT_USAGE, f"{exc.code}: {exc.message}") from exc


def run(args: argparse.Namespace) -> int:
    from holomem.integrations import migrate
    from holomem.integrations.migrate import writer

    config = config_file(args.config)
    # The options the library checks, checked before the store is opened: a refused
    # run leaves no new store behind.
    writer.batch_size(args.batch_size)
    validate.namespace(args.namespace)
    with (_peer(args) as peer,
          memory_of(args, write=True, create=True, config=config) as memory,
          ProgressLines(f"migrate {args.source}", every=args.progress_every) as progress):
        common: dict[str, Any] = {"namespace": args.namespace, "vectors": args.vectors,
                                  "batch_size": args.batch_size, "progress": progress}
        if args.source == "langgraph-sqlite":
            report = migrate.from_langgraph_store(peer, memory, args.prefix,
                                                  fields=args.fields, **common)
        elif args.source == "chroma":
            report = migrate.from_chroma(peer, args.collection, memory, **common)
        else:
            report = migrate.from_mem0(peer, memory, user_ids=args.user_id,
                                       agent_ids=args.agent_id, run_ids=args.run_id,
                                       **common)
    print(f"migrate {args.source}: {report.created} created, {report.unchanged} already "
          f"there, {report.superseded} superseded, {report.skipped} skipped; vectors "
          f"{report.vectors}", file=sys.stderr)
    print(json.dumps(report.to_dict(), indent=2 if args.json else None))
    return EXIT_OK
