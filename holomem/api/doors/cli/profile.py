"""The ``holomem profile`` command (docs/cli.md): what a store knows about a name.

Owns: the command's arguments, its contract request (``entityProfile``: the CLI answers
what ``Memory.call`` does), walking its pages (``--all``) and its text form. Imports
the CLI's argument types, opening and printing helpers.

    holomem profile STORE NAME [--as-of W] [--known-at W] [--namespace NS]
                    [--limit N] [--cursor C | --all] [--json]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from holomem.api.doors.cli import printing
from holomem.api.doors.cli.args import NS_HELP, TIME_HELP, namespace_parts, when_ms
from holomem.api.doors.cli.opening import EXIT_OK, memory_of
from holomem.api.memory.window.render import format_time


def add_command(command: Callable[..., argparse.ArgumentParser],
                store_options: Callable[..., None],
                output_options: Callable[..., None]) -> None:
    """Add ``profile`` through the parser's ``command``, with its shared option builders
    (:mod:`.parser` hands them in)."""
    p = command("profile", "what the store knows about a name: the facts that mention "
                "it (current first), its subjects' current values, who mentions it, the "
                "sessions it appears in and its links")
    store_options(p)
    p.add_argument("name", metavar="NAME", help="the name: an entity as facts spell it "
                   "(Alice); its subjects (alice/city) match whatever the case")
    p.add_argument("--as-of", type=when_ms, metavar="W",
                   help=f"what held at this time (default: now); {TIME_HELP}")
    p.add_argument("--known-at", type=when_ms, metavar="W",
                   help=f"ignore what was ingested after this time; {TIME_HELP}")
    p.add_argument("--namespace", type=namespace_parts, metavar="NS",
                   help=f"only facts at or under this namespace: {NS_HELP}")
    p.add_argument("--limit", type=int, default=20, metavar="N",
                   help="facts per page (1 to 100; default 20)")
    pos = p.add_mutually_exclusive_group()
    pos.add_argument("--cursor", metavar="C",
                     help="continue where a page ended (the cursor it printed)")
    pos.add_argument("--all", action="store_true", help="walk every page to the end")
    output_options(p, jsonl=False)


def request(args: argparse.Namespace) -> dict[str, Any]:
    """The contract request of a ``profile`` line (its first page, or ``--cursor``'s)."""
    req: dict[str, Any] = {"name": args.name, "limit": args.limit}
    for name, key in (("as_of", "asOf"), ("known_at", "knownAt"), ("namespace", "namespace"),
                      ("cursor", "cursor")):
        if getattr(args, name) is not None:
            req[key] = getattr(args, name)
    return req


def run(args: argparse.Namespace) -> int:
    """Run ``holomem profile`` (a read: a follower of the store)."""
    req = request(args)
    pages: list[dict[str, Any]] = []
    with memory_of(args) as memory:
        while True:
            page = memory.call("entityProfile", req)
            pages.append(page)
            if page["nextCursor"] is None or not args.all:
                break
            req = {**req, "cursor": page["nextCursor"]}
    first, last = pages[0], pages[-1]
    if args.json:
        whole = first if len(pages) == 1 else {
            **first, "facts": [f for p in pages for f in p["facts"]],
            "links": [k for p in pages for k in p["links"]],
            "linksCut": any(p["linksCut"] for p in pages), "nextCursor": None}
        printing.emit_json(whole)
        return EXIT_OK
    print_summary(first)
    facts = [f for p in pages for f in p["facts"]]
    if facts:
        print("facts:")
        printing.print_facts(facts)
    links = [k for p in pages for k in p["links"]]
    if links:
        print("links:")
        for k in links:
            print(f"  {k['fromId']} -[{k['relation']}]-> {k['toId']}")
    if not facts and first["summary"] is not None and not _anything(first["summary"]):
        print(f"(nothing known about {args.name})")
    if last["nextCursor"] is not None:
        sys.stdout.flush()  # the page first, then where it goes on
        print(f"more: pass --cursor {last['nextCursor']} (or --all)", file=sys.stderr)
    return EXIT_OK


def _anything(summary: dict[str, Any]) -> bool:
    return bool(summary["subjects"] or summary["speakers"] or summary["sessions"])


def print_summary(page: dict[str, Any]) -> None:
    """The first page's summary: the subjects' current values, speakers and sessions."""
    summary = page["summary"]
    if summary is None:
        return
    print(f"{page['name']}: {page['total']} facts ({summary['current']} current) "
          f"as of {format_time(page['asOf'])}")
    for sv in summary["subjects"]:
        where = f" [{'/'.join(sv['namespace'])}]" if sv["namespace"] else ""
        values = "; ".join(f"{v['text']} (since {format_time(v['since'])})"
                           for v in sv["current"]) or "(no current value)"
        print(f"  {sv['subject']}{where}: {values}")
    _more("subjects", summary["subjects"], summary["subjectsTotal"])
    for s in summary["speakers"]:
        print(f"  mentioned by {s['speaker']}: {s['facts']}")
    _more("speakers", summary["speakers"], summary["speakersTotal"])
    for s in summary["sessions"]:
        where = f" [{'/'.join(s['namespace'])}]" if s["namespace"] else ""
        print(f"  session {s['session']}{where}: {s['mentions']} mentions, {s['said']} said")
    _more("sessions", summary["sessions"], summary["sessionsTotal"])


def _more(what: str, shown: list[Any], total: int) -> None:
    if total > len(shown):
        print(f"  ... and {total - len(shown)} more {what} (--json for the counts)")
