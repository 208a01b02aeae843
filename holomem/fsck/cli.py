"""The command line: ``python -m holomem.fsck STORE [--repair | --salvage DEST] ...``.

Owns: the options (:func:`parser`), running the check, the repair or the salvage they
ask for, and what is printed: every finding with where it is, what it means and what to
do next, then the salvage's account of what it copied and what it lost; or, with
``--json``, the same as JSON. Imports the checker and the salvage (and the file layer,
for the key file). The exit status is the check's (``--repair``) or the salvage's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

from holomem.errors import HolomemError
from holomem.fsck.advice import Advisor
from holomem.fsck.checker import check
from holomem.fsck.findings import EXIT_OPERATIONAL, Report
from holomem.fsck.losses import Loss
from holomem.fsck.salvage import SalvageReport, salvage
from holomem.log import fs


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m holomem.fsck",
        description="check a holomem store; repair what can be repaired, or salvage what "
        "is intact into a new store. Exit status: 0 clean, 1 errors corrected (or salvaged), "
        "4 errors left uncorrected, 8 operational error (nothing changed).")
    ap.add_argument("store", metavar="STORE", help="the store directory (holding LOCK and "
                    "gen-NNNNNNNN/)")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--repair", action="store_true",
                      help="repair what can be repaired (it changes nothing while an "
                      "unrepairable finding remains); takes the writer's lock")
    mode.add_argument("--salvage", metavar="DEST",
                      help="copy every intact transaction, before and after any damage, "
                      "into a new store at DEST (which must not exist, or be an empty "
                      "directory), and report exactly what could not be copied; STORE is "
                      "never modified")
    ap.add_argument("--json", action="store_true", help="print the report as JSON")
    ap.add_argument("--key-file", metavar="FILE",
                    help="file holding the store's 32-byte key (an encrypted store; a "
                    "salvaged store is encrypted with the same key)")
    ap.add_argument("--backup-dir", metavar="DIR", help="where --repair saves the bytes it "
                    "cuts (default: STORE.fsck-backup beside the store)")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    key = None
    if args.key_file:
        try:
            key = fs.read_key_file(args.key_file)  # 33 bytes at most, whatever its size
        except HolomemError as exc:
            print(f"cannot use the key file {args.key_file}: {exc}", file=sys.stderr)
            print(f"next: {Advisor(args.store).for_error(exc.code, exc.message)}",
                  file=sys.stderr)
            return EXIT_OPERATIONAL
    report = check(args.store, key=key, repair=args.repair, backup_dir=args.backup_dir,
                   key_file=args.key_file)
    if args.salvage is None:
        print(json.dumps(report.to_json(), indent=2) if args.json else text(report))
        return report.exit_code
    saved = salvage(args.store, args.salvage, key=key, key_file=args.key_file)
    if args.json:
        print(json.dumps({"check": report.to_json(), "salvage": saved.to_json()}, indent=2))
    else:
        print(text(report, salvaging=True))
        print(salvage_text(saved))
    return saved.exit_code


def text(report: Report, *, salvaging: bool = False) -> str:
    """The check's report in plain words; ``salvaging``: a salvage follows (so the
    exit status and the advice for the whole store are the salvage's)."""
    lines = [f"holomem fsck {report.store}"]
    if report.error:
        lines.append(f"  cannot check: {report.error}")
    else:
        lines.append(f"  generation {report.generation}: {report.segments} segments, "
                     f"{report.transactions} transactions, {report.documents} live documents")
        for f in report.findings:
            state = ("repaired" if f.repaired
                     else "repairable" if f.repairable else "NOT repairable")
            where = f"{f.path} at offset {f.offset}" if os.path.isfile(f.path) else f.path
            lines.append(f"  [{state}] {f.code}: {where} ({f.length} bytes): {f.message}")
            if f.backup:
                lines.append(f"      cut bytes saved to {f.backup}")
            if f.next_step and not salvaging:
                same = f.next_step == report.next_step
                lines.append("      next: see what to do, below" if same
                             else f"      next: {f.next_step}")
        if report.clean:
            lines.append("  clean")
    if not salvaging:
        if report.next_step:
            lines.append(f"  what to do: {report.next_step}")
        lines.append(f"  exit {report.exit_code} ({report.seconds:.3f} s)")
    return "\n".join(lines)


def _held(loss: Loss) -> str:
    """What a loss held, in words: its (original) transaction numbers."""
    if loss.open_ended and not loss.count:
        return f"transactions from {loss.first_seq} on (how many is unknown)"
    if loss.count == 0:
        return "no transaction"
    held = (f"transaction {loss.first_seq}" if loss.count == 1
            else f"transactions {loss.first_seq} to {loss.last_seq}")
    after = ", and any written after it" if loss.count == 1 else ", and any written after them"
    return held + (after if loss.open_ended else "")


def _count(n: int) -> str:
    return f"{n} transaction" + ("" if n == 1 else "s")


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}-{last}"


def salvage_text(r: SalvageReport) -> str:
    """The salvage's account in plain words."""
    lines = [f"holomem fsck --salvage {r.dest}"]
    if r.error:
        lines.append(f"  nothing written: {r.error}")
    else:
        key = "; encrypted with the same key" if r.encrypted else ""
        lines.append(f"  a new store (id {r.new_store_id}; the damaged store's is "
                     f"{r.store_id}{key}); {r.store} was not modified")
        runs = ", ".join(f"{_span(x.first, x.last)} -> "
                         f"{_span(x.new_first, x.new_first + x.last - x.first)}"
                         for x in r.renumbered)
        lines.append(f"  recovered {_count(r.recovered)}, renumbered from 1 in their "
                     f"order (original -> new): {runs or 'none'}")
        unknown = ", and an unknown number after them" if r.lost_unknown else ""
        lines.append(f"  lost {_count(r.lost_transactions)}{unknown}; every byte range "
                     "not copied:" if r.losses else "  lost nothing")
        for loss in r.losses:
            where = f"{loss.path} at offset {loss.offset}, {loss.length} bytes"
            lines.append(f"    - {_held(loss)}: {where}: {loss.reason}")
        lines += [f"  note: {n}" for n in r.notes]
        lines.append(f"  {r.dest} opens and fsck finds it clean: {r.documents} live "
                     "documents")
    if r.next_step:
        lines.append(f"  what to do: {r.next_step}")
    lines.append(f"  exit {r.exit_code} ({r.seconds:.3f} s)")
    return "\n".join(lines)
