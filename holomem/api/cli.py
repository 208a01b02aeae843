"""The ``holomem`` command line.

Owns: argument parsing and printing for ``holomem`` / ``python -m holomem``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence

from holomem.log import Journal


def _demo(args: argparse.Namespace) -> int:
    base = args.dir or tempfile.mkdtemp(prefix="holomem-demo-")
    path = os.path.join(base, "journal")
    print(f"holomem demo: a durable journal in {path}")
    with Journal.open(path, sync="full") as j:
        for text in (b"Alice lives in Paris", b"Alice moved to Berlin", b"Bob owes Alice 10 EUR"):
            seq = j.append([text])
            print(f"  appended transaction {seq}: {text.decode()}")
        seq = j.append([b"one transaction", b"with two payloads"])
        print(f"  appended transaction {seq}: two payloads, atomic")
    with Journal.open(path, read_only=True) as j:
        print("reopened read-only; replay:")
        for seq, payloads in j.replay():
            print(f"  {seq}: {[p.decode() for p in payloads]}")
        print(f"  {j.stats()}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="holomem", description="holomem: agent memory you can trust")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the whole story on an embedded store")
    demo.add_argument("--dir", help="where to put the demo store (default: a new temp dir)")
    demo.set_defaults(func=_demo)
    args = parser.parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
