"""The ``holomem remember-conversation`` command (docs/cli.md): a conversation from JSON
Lines, one message a line, stored as its turns in one transaction.

Owns: the command's arguments, reading its messages (a line each; blank lines are
skipped) and its contract request (``rememberConversation``: the CLI answers what
``Memory.call`` does), and its text form. Imports the CLI's argument types, opening
and the store commands' line reader.

    holomem remember-conversation STORE [FILE | -] --session S [--namespace NS]
                                  [--time W] [--start N] [--extractor rules] [--json]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from holomem.api.doors.cli import printing
from holomem.api.doors.cli.args import NS_HELP, TIME_HELP, namespace_parts, when_ms
from holomem.api.doors.cli.opening import EXIT_OK, EXIT_USAGE, Failure, memory_of
from holomem.api.doors.cli.store import file_lines
from holomem.api.memory.conversation.calls import MAX_MESSAGES


def add_command(command: Callable[..., argparse.ArgumentParser],
                store_options: Callable[..., None],
                output_options: Callable[..., None]) -> None:
    """Add ``remember-conversation`` through the parser's ``command``, with its shared
    option builders (:mod:`.parser` hands them in)."""
    p = command("remember-conversation", "store a conversation (JSON Lines, one message "
                "a line) as its turns, each linked to the turn it answers, in one "
                "transaction")
    store_options(p, created=True)
    p.add_argument("file", nargs="?", default="-", metavar="FILE",
                   help='the JSON Lines file, one message a line, e.g. {"role": "user", '
                   '"content": "hi"} (default -: stdin)')
    p.add_argument("--session", required=True, help="the conversation's session (required)")
    p.add_argument("--namespace", type=namespace_parts, metavar="NS",
                   help=f"the namespace the turns live in (default: the root): {NS_HELP}")
    p.add_argument("--time", type=when_ms, metavar="W",
                   help=f"the event time of the messages that give none; {TIME_HELP}")
    p.add_argument("--start", type=int, default=0, metavar="N",
                   help="the position of the first message (default 0: the file is the "
                   "conversation from its beginning)")
    p.add_argument("--extractor", metavar="NAME",
                   help="a built-in extractor that also stores the facts the turns state, "
                   "each linked to its turns: 'rules' (offline rules: where someone lives "
                   "or works, likes and dislikes, decisions)")
    output_options(p, jsonl=False)


def _messages(lines: Iterator[bytes]) -> list[Any]:
    out: list[Any] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if len(out) >= MAX_MESSAGES:
            raise Failure(EXIT_USAGE, f"more than {MAX_MESSAGES} messages (the limit of "
                          "one call)")
        try:
            out.append(msgspec.json.decode(line))
        except msgspec.DecodeError as exc:
            raise Failure(EXIT_USAGE, f"line {n} is not JSON: {exc}") from None
        except RecursionError:  # (past any limit of the contract: 64 levels)
            raise Failure(EXIT_USAGE, f"line {n} is JSON nested too deeply") from None
    return out


def run(args: argparse.Namespace) -> int:
    lines = iter(sys.stdin.buffer) if args.file == "-" else file_lines(args.file)
    request: dict[str, Any] = {"messages": _messages(lines), "session": args.session,
                               "start": args.start}
    if args.namespace is not None:
        request["namespace"] = args.namespace
    if args.time is not None:
        request["time"] = args.time
    if args.extractor is not None:
        request["extractor"] = args.extractor
    with memory_of(args, write=True, create=True, config=None) as memory:
        response = memory.call("rememberConversation", request)
    if args.json:
        printing.emit_json(response)
        return EXIT_OK
    for turn in response["turns"]:
        print(f"{'stored' if turn['created'] else 'already stored'} {turn['id']}")
    for position in response["skipped"]:
        print(f"skipped message at position {position} (no words)")
    for fact in response["derived"]:
        print(f"{'extracted' if fact['created'] else 'already extracted'} {fact['id']}")
    print(f"{response['linked']} links written")
    return EXIT_OK
