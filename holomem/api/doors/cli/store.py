"""The CLI's store commands: ``config``, ``info``, ``export`` and ``import`` (docs/cli.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator

import msgspec

from holomem.api.doors.cli import printing
from holomem.api.doors.cli.opening import EXIT_OK, EXIT_USAGE, Failure, config_file, memory_of
from holomem.api.memory.config import config_to_json
from holomem.api.memory.progress import ProgressLines
from holomem.api.memory.transfer import exchange
from holomem.errors import HolomemError
from holomem.log import fs


def config(args: argparse.Namespace) -> int:
    """Print the store's configuration (the defaults when nothing is recorded yet);
    with --set, record another one (docs/contract.md §4c)."""
    config = config_file(args.set, "--set")
    with memory_of(args, write=config is not None, create=config is not None, config=config,
                 persist=True) as memory:
        shown = memory.config
    print(json.dumps(json.loads(config_to_json(shown)), indent=2))
    return EXIT_OK


def info(args: argparse.Namespace) -> int:
    """What a store is: id, generation, facts, bytes, embedder, configuration. Opens a
    follower, so it works while a server holds the store."""
    with memory_of(args) as memory:
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


def export(args: argparse.Namespace) -> int:
    """Every fact at or under --namespace as JSON Lines, to --output (written whole and
    synced, or not at all) or to stdout."""
    if args.output:
        _writable_output(args.output)
    with memory_of(args) as memory, ProgressLines("export", every=args.progress_every) as progress:
        chunks = printing.jsonl_chunks(memory.export(args.namespace), progress)
        if args.output:
            fs.write_file_atomic(args.output, chunks)
        else:
            sys.stdout.flush()
            for chunk in chunks:
                sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
    return EXIT_OK


def _writable_output(path: str) -> None:
    """Refuse (usage) an --output the export cannot replace whole: in a missing
    directory, a directory itself, or one whose temp file (``PATH.tmp``, written first)
    is a file of the caller's, which is never overwritten."""
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise Failure(EXIT_USAGE, f"--output {path}: no such directory")
    if os.path.isdir(path):
        raise Failure(EXIT_USAGE, f"--output {path}: a directory, not a file")
    if os.path.lexists(fs.atomic_temp(path)):
        raise Failure(EXIT_USAGE, f"--output {path}: {fs.atomic_temp(path)} is in the way "
                                  "(the export is written there first); move it or choose "
                                  "another path")


def file_lines(path: str, size: int = 1 << 20) -> Iterator[bytes]:
    """The lines of a file, read ``size`` bytes at a time (opened now, so a missing file
    is an error before anything else happens)."""
    if os.path.isdir(path):
        raise Failure(EXIT_USAGE, f"{path}: a directory, not a file")
    try:
        fd = fs.open_ro(path)
    except HolomemError as exc:
        raise Failure(EXIT_USAGE, f"{path}: {exc.message}") from exc

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


def import_(args: argparse.Namespace) -> int:
    """JSON Lines from FILE (or - for stdin) into the store, in atomic batches."""
    config = config_file(args.config)
    exchange.batch_size(args.batch_size)  # (before the store is opened: nothing made)
    lines = iter(sys.stdin.buffer) if args.file == "-" else file_lines(args.file)
    with (memory_of(args, write=True, create=True, config=config) as memory,
          ProgressLines("import", every=args.progress_every) as progress):
        report = memory.import_(lines, batch_size=args.batch_size, progress=progress)
    if report.unresolved_links:
        print(f"warning: {report.unresolved_links} links name facts that were not "
              "imported; they were not written", file=sys.stderr)
    if report.unresolved_relations:
        print(f"warning: {report.unresolved_relations} relations name facts that are "
              "not in the store; they were not written", file=sys.stderr)
    print(json.dumps(msgspec.to_builtins(report)))
    return EXIT_OK
