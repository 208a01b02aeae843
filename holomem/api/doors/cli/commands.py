"""The ``holomem`` command line (also ``python -m holomem``); the reference is docs/cli.md.

Owns: running one command (``main``: the parse, the dispatch, the exit status) and the
fact commands (remember, recall, explain, get, history, forget with its confirmation,
list, list-namespaces). Every memory command goes through the JSON contract
(``Memory.call``), so the CLI answers exactly what HTTP and Python do. The parser is
:mod:`.parser`'s, opening a store and the exit statuses :mod:`.opening`'s, the store
commands :mod:`.store`'s, the servers and integrations :mod:`.servers`'s, and how
answers are printed :mod:`.printing`'s.

    holomem remember STORE --text T [--namespace NS] [--id I] [--subject S] ...
    holomem remember-conversation STORE [FILE | -] --session S [--namespace NS] ...
    holomem recall STORE QUERY [--namespace NS] [--filter JSON] [--k N] [--as-of W] ...
    holomem explain STORE QUERY ID        holomem get | history STORE ID
    holomem forget STORE (--id I... | --subject S | --entity E | --ingested-before W |
                          --event-before W | --metadata JSON | --namespace NS)
                         [--within NS] [--include-chain] [--dry-run] [--purge] [--yes]
    holomem list STORE [--limit N] [--cursor C | --all] [--namespace NS] [--filter JSON]
    holomem list-namespaces STORE [--prefix NS] [--max-depth N] [--all]
    holomem relate STORE FROM TO RELATION [--metadata JSON] [--namespace NS]
    holomem unrelate STORE FROM TO RELATION [--namespace NS]
    holomem links STORE ID [--relation R] [--direction out|in|both]
    holomem why STORE QUERY_OR_ID [--max-hops N] [--relation R ...] [--filter JSON]
    holomem profile STORE NAME [--as-of W] [--namespace NS] [--cursor C | --all]
    holomem info | config | export | import STORE ...    holomem fsck STORE [...]
    holomem migrate {langgraph-sqlite,chroma,mem0} ... STORE ...
    holomem serve | mcp | demo | hermes install
    holomem ui STORE [--port P] [--host H] [--api-key-file F] [--read-only]

W is milliseconds since the epoch or an ISO 8601 date or date and time (UTC unless it
gives an offset). ``--json`` prints one indented document, ``--jsonl`` one object per
line. Exit status (every command but fsck, which keeps e2fsck's): 0 success; 1 not
found (also ``get`` of an unknown id) or refused (a conflict, a declined forget); 2 bad
usage, input or configuration; 3 the store cannot be opened.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from holomem.api.doors.cli import (
    conversation,
    graph,
    migrate,
    printing,
    profile,
    servers,
    store,
)
from holomem.api.doors.cli.opening import (
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_STORE,
    EXIT_USAGE,
    Failure,
    config_file,
    exit_status,
    memory_of,
)
from holomem.api.doors.cli.parser import EPILOG, build_parser
from holomem.api.memory.memory import Memory
from holomem.errors import HolomemError
from holomem.log import fs

__all__ = ["EPILOG", "EXIT_NOT_FOUND", "EXIT_OK", "EXIT_STORE", "EXIT_USAGE", "build_parser",
           "main"]


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
    config = config_file(args.config)
    with memory_of(args, write=write, create=write, config=config) as memory:
        response = memory.call(args.command, request)
        if args.command == "get" and response["fact"] is None:
            raise Failure(EXIT_NOT_FOUND, f"not_found: no fact {args.id!r}")
        if args.json:
            printing.emit_json(response)
        elif getattr(args, "jsonl", False):
            printing.emit_jsonl(response[_ROWS[args.command]])
        else:
            printing.print_response(args.command, response)
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
        with memory_of(args) as memory:
            report = memory.call("forget", {**request, "dryRun": True})
    else:
        if not args.yes and not _interactive():
            raise Failure(EXIT_USAGE, "forget asks for confirmation and stdin is not a "
                           "terminal: pass --yes to forget without asking (--dry-run shows "
                           "what would go)")
        with memory_of(args, write=True) as memory:
            if not args.yes:
                plan = memory.call("forget", {**request, "dryRun": True})
                if plan["removed"] or args.purge:
                    shown = [memory.call("get", {"id": fid})["fact"]
                             for fid in plan["removed"][:printing.PREVIEW]]
                    print(printing.forget_preview(plan, shown, args.purge), file=sys.stderr)
                    n = len(plan["removed"])
                    if not _confirm(f"forget {n} fact{'s' if n != 1 else ''}"
                                    f"{' and purge' if args.purge else ''}? [y/N] "):
                        raise Failure(EXIT_NOT_FOUND, "declined: nothing was forgotten")
            report = memory.call("forget", {**request, "dryRun": False})
    if args.json:
        printing.emit_json(report)
    else:
        print(printing.forget_done(report))
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
    with memory_of(args) as memory:
        pages = _pages(memory, op, request, args.cursor, args.all)
        if args.json:
            if not args.all:
                printing.emit_json(next(pages))
                return EXIT_OK
            whole: dict[str, Any] = {rows: [], "nextCursor": None}
            for page in pages:
                whole[rows] += page[rows]
                if "scanned" in page:
                    whole["scanned"] = whole.get("scanned", 0) + page["scanned"]
            printing.emit_json(whole)
            return EXIT_OK
        shown, cursor = 0, None
        for page in pages:
            shown += len(page[rows])
            if args.jsonl:
                printing.emit_jsonl(page[rows])
            elif rows == "facts":
                printing.print_facts(page[rows])
            else:
                printing.print_namespaces(page[rows])
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


#: What runs each command (``args.command``; the parser is :mod:`.parser`'s).
HANDLERS: dict[str, Callable[[argparse.Namespace], int]] = {
    "remember": _memory_command, "recall": _memory_command, "explain": _memory_command,
    "get": _memory_command, "history": _memory_command, "forget": _forget, "list": _list,
    "list-namespaces": _list_namespaces, "links": graph.run, "why": graph.run,
    "relate": graph.run, "unrelate": graph.run,
    "remember-conversation": conversation.run, "profile": profile.run,
    "info": store.info, "config": store.config,
    "export": store.export, "import": store.import_, "migrate": migrate.run,
    "fsck": lambda args: servers.fsck(args.args), "serve": servers.serve,
    "mcp": servers.mcp, "ui": servers.ui, "hermes": servers.hermes, "demo": servers.demo,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (see the module docstring)."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["fsck"]:  # every argument is fsck's own, --help included
        return servers.fsck(words[1:])
    args = build_parser().parse_args(words)
    try:
        status: int = HANDLERS[args.command](args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (holomem list S --jsonl | head -1): it had what it wanted.
        # Later writes, and the interpreter's final flush, go to the null device.
        fs.discard_output(sys.stdout.fileno())
        return EXIT_OK
    except Failure as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.status
    except HolomemError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return exit_status(exc)
    return status


if __name__ == "__main__":
    sys.exit(main())
