"""The ``holomem relate``, ``unrelate``, ``links`` and ``why`` commands (docs/cli.md):
typed links and the evidence walk over them, from the command line.

Owns: the commands' arguments, their contract requests (``relate``, ``unrelate``,
``links``, ``why``: the CLI answers what ``Memory.call`` does), running them and their
text form. The parser
hands in its shared option builders; opening the store and the exit statuses are
:mod:`.opening`'s. Imports the CLI's argument types, opening and printing helpers.

    holomem relate STORE FROM TO RELATION [--metadata JSON] [--namespace NS]
    holomem unrelate STORE FROM TO RELATION [--namespace NS]
    holomem links STORE ID [--relation R] [--direction out|in|both] [--as-of W] ...
    holomem why STORE QUERY_OR_ID [--max-hops N] [--relation R ...] [--filter JSON] ...
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from holomem.api.doors.cli import printing
from holomem.api.doors.cli.args import NS_HELP, TIME_HELP, json_object, namespace_parts, when_ms
from holomem.api.doors.cli.opening import memory_of
from holomem.api.memory.window.render import format_time


def add_commands(command: Callable[..., argparse.ArgumentParser],
                 store_options: Callable[[argparse.ArgumentParser], None],
                 output_options: Callable[..., None]) -> None:
    """Add ``relate``, ``unrelate``, ``links`` and ``why`` through the parser's
    ``command``, with its shared option builders (:mod:`.parser` hands them in)."""
    for name, what in (("relate", "link two facts of one namespace with a typed, directed "
                                  "relation (again with the same metadata: no change)"),
                       ("unrelate", "remove a typed link (none there: no change)")):
        p = command(name, what)
        store_options(p)
        p.add_argument("from_id", metavar="FROM", help="the id of the fact the link leaves")
        p.add_argument("to_id", metavar="TO", help="the id of the fact the link enters")
        p.add_argument("relation", metavar="RELATION", help="the link's type, e.g. cites")
        if name == "relate":
            p.add_argument("--metadata", type=json_object, metavar="JSON",
                           help="a JSON object kept with the link (at most 4 KiB)")
        p.add_argument("--namespace", type=namespace_parts, metavar="NS",
                       help=f"both facts must be at or under this namespace: {NS_HELP}")
        output_options(p, jsonl=False)
    lnk = command("links", "the typed links of a fact (out, in or both), in the order "
                  "they were made")
    store_options(lnk)
    lnk.add_argument("id", metavar="ID", help="the fact's id")
    lnk.add_argument("--relation", metavar="R", help="only links of this relation")
    lnk.add_argument("--direction", choices=("out", "in", "both"), default="out",
                     help="links leaving the fact (out, the default), entering it (in) "
                     "or both")
    _times_and_namespace(lnk)
    output_options(lnk, jsonl=True)

    why = command("why", "the evidence subgraph around a fact, or around a query's best "
                  "match, over typed links")
    store_options(why)
    why.add_argument("query", metavar="QUERY_OR_ID",
                     help="a fact's id, or a query whose best match starts the walk")
    why.add_argument("--max-hops", type=int, default=2, metavar="N",
                     help="how many links away to walk (0 to 4; default 2)")
    why.add_argument("--relation", action="append", metavar="R",
                     help="only links of this relation (repeatable)")
    why.add_argument("--filter", type=json_object, metavar="JSON",
                     help="only facts this filter object holds for (docs/contract.md §4b)")
    _times_and_namespace(why)
    output_options(why, jsonl=False)


def _times_and_namespace(p: argparse.ArgumentParser) -> None:
    p.add_argument("--as-of", type=when_ms, metavar="W",
                   help=f"only links made by this time; {TIME_HELP}")
    p.add_argument("--known-at", type=when_ms, metavar="W",
                   help=f"ignore what was ingested after this time; {TIME_HELP}")
    p.add_argument("--namespace", type=namespace_parts, metavar="NS",
                   help=f"only facts at or under this namespace: {NS_HELP}")


def request(args: argparse.Namespace) -> dict[str, Any]:
    """The contract request of a ``relate``, ``unrelate``, ``links`` or ``why`` line."""
    if args.command in ("relate", "unrelate"):
        req: dict[str, Any] = {"fromId": args.from_id, "toId": args.to_id,
                               "relation": args.relation}
        if getattr(args, "metadata", None) is not None:
            req["metadata"] = args.metadata
        if args.namespace is not None:
            req["namespace"] = args.namespace
        return req
    if args.command == "links":
        req = {"id": args.id, "direction": args.direction}
        if args.relation is not None:
            req["relation"] = args.relation
    else:
        req = {"query": args.query, "maxHops": args.max_hops}
        if args.relation:
            req["relation"] = args.relation
        if args.filter is not None:
            req["filter"] = args.filter
    for name, key in (("as_of", "asOf"), ("known_at", "knownAt"), ("namespace", "namespace")):
        if getattr(args, name) is not None:
            req[key] = getattr(args, name)
    return req


def run(args: argparse.Namespace) -> int:
    """Run ``holomem relate`` / ``unrelate`` (writes: the store's writer) or ``holomem
    links`` / ``why`` (reads: a follower of the store)."""
    writes = args.command in ("relate", "unrelate")
    with memory_of(args, write=writes) as memory:
        response = memory.call(args.command, request(args))
    if args.json:
        printing.emit_json(response)
    elif getattr(args, "jsonl", False):
        printing.emit_jsonl(response["links"])
    elif args.command == "relate":
        print("made" if response["created"] else "already there (nothing written)")
        print_links({"links": [response["link"]]})
    elif args.command == "unrelate":
        print("removed" if response["removed"] else "no such link (nothing written)")
    elif args.command == "links":
        print_links(response)
    else:
        print_why(response)
    return 0


def print_links(response: dict[str, Any]) -> None:
    if not response["links"]:
        print("(no links)")
    for link in response["links"]:
        meta = (f"  {json.dumps(link['metadata'], ensure_ascii=False, sort_keys=True)}"
                if link.get("metadata") else "")
        print(f"{link['fromId']} -[{link['relation']}]-> {link['toId']}  "
              f"(made {format_time(link['time'])}){meta}")


def print_why(response: dict[str, Any]) -> None:
    if response["start"] is None:
        print("(nothing matches)")
        return
    for node in response["nodes"]:
        print(f"{'  ' * node['hop']}[{node['hop']}] {node['id']} ({node['status']}) "
              f"{node['text']}")
    for edge in response["edges"]:
        print(f"  {edge['fromId']} -[{edge['relation']}]-> {edge['toId']}")
    if response["truncated"]:
        print(f"truncated: the walk stopped at its {response['bound']} bound")
