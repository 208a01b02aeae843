"""``--salvage DEST``: copy every intact transaction of a damaged store into a new store.

Owns: the salvage (docs/guarantees.md §7) -- the destination it may write, the new
store (built, opened, checked, moved into place), the copy of each intact transaction
into it and the report (:class:`SalvageReport`). The read of the damaged journal past
any damage is :mod:`holomem.fsck.intact`'s; the account of every byte and sequence
number that could not be copied (:class:`~holomem.fsck.losses.Loss`) is
:mod:`holomem.fsck.losses`'s. Imports the log (to lock the damaged store and to write
the new one), those two modules, the engine (the new store's derived files are built
by opening it, as on every open) and the checker (the new store must check clean).

What the new store is:

- **a new store, with a new id.** Its history is not the damaged store's (transactions
  are missing), so nothing that knew the old store -- a follower, a server's open
  handle, a backup, an encrypted frame's associated data -- may take it for the same
  one. The damaged store is never modified (its lock is held while it is read);
- **renumbered**: its transactions are numbered 1, 2, 3 ... in their original order
  (a journal's sequence numbers have no gaps); :attr:`SalvageReport.renumbered` maps the
  old numbers to the new;
- **encrypted with the same key** if the damaged store was (the key is needed to read
  it: ``--key-file``);
- **complete or absent**: it is built in ``DEST.salvage.tmp``, opened (which builds its
  text segment), checked by fsck, and only then renamed to ``DEST``. ``DEST`` must not
  exist, or be an empty directory, outside the store.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from holomem.errors import CorruptError, HolomemError, InvalidError, NotFoundError
from holomem.fsck.advice import Advisor
from holomem.fsck.checker import check
from holomem.fsck.findings import EXIT_CLEAN, EXIT_CORRECTED, EXIT_OPERATIONAL
from holomem.fsck.intact import IntactReader, reference_header
from holomem.fsck.losses import Ledger, Loss
from holomem.log import Journal, fs
from holomem.log.envelope import Envelope, validate_key
from holomem.log.format import LOCK_NAME, generation_name
from holomem.log.frame import FrameCodec
from holomem.log.generation import list_generations
from holomem.log.opening import check_key
from holomem.log.segment import list_segments, read_file

#: Beside DEST: where the new store is built before it is renamed into place.
TMP_SUFFIX = ".salvage.tmp"


@dataclass
class Run:
    """Original transactions ``first`` to ``last`` are ``new_first`` on in the new store."""

    first: int
    last: int
    new_first: int


@dataclass
class SalvageReport:
    """What a salvage copied, what it could not, and where the new store is."""

    store: str
    dest: str
    generation: int = 0
    store_id: str = ""
    new_store_id: str = ""
    encrypted: bool = False
    #: transactions copied into the new store
    recovered: int = 0
    #: transactions known to be lost (the sum of the losses' counts)
    lost_transactions: int = 0
    #: a loss is open-ended: more transactions may be lost than counted
    lost_unknown: bool = False
    losses: list[Loss] = field(default_factory=list)
    renumbered: list[Run] = field(default_factory=list)
    #: live documents (facts included) in the new store, as its fsck counted them
    documents: int = 0
    notes: list[str] = field(default_factory=list)
    error: str | None = None
    error_code: str | None = None
    exit_code: int = EXIT_CLEAN
    seconds: float = 0.0
    next_step: str = ""

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        for loss, raw in zip(self.losses, out["losses"], strict=True):
            raw["count"] = loss.count
        return out


def salvage(path: str, dest: str, *, key: bytes | None = None,
            key_file: str | None = None) -> SalvageReport:
    """Copy every intact transaction of the store at ``path`` into a new store at
    ``dest``; never raises for damage, and never modifies the store at ``path``.

    ``key_file`` is only named in the advice. On an error nothing is left at ``dest``.
    """
    t0 = time.monotonic()
    report = SalvageReport(store=os.path.abspath(path), dest=os.path.abspath(dest))
    advisor = Advisor(report.store, key_file=key_file, encrypted=key is not None)
    try:
        _Salvage(report, validate_key(key)).run()
    except _Refused as exc:
        report.error, report.error_code = f"{exc.code}: {exc}", exc.code
        report.next_step = exc.next_step
    except HolomemError as exc:
        report.error, report.error_code = f"{exc.code}: {exc}", exc.code
        report.next_step = advisor.for_error(exc.code, exc.message)
    except OSError as exc:
        report.error, report.error_code = f"io: {exc}", "io"
        report.next_step = advisor.for_error("io", str(exc))
    report.seconds = round(time.monotonic() - t0, 3)
    report.lost_transactions = sum(loss.count for loss in report.losses)
    report.lost_unknown = any(loss.open_ended for loss in report.losses)
    if report.error is not None:
        report.exit_code = EXIT_OPERATIONAL
    elif report.losses:
        report.exit_code = EXIT_CORRECTED
        report.next_step = (f"Open {report.dest} instead of {report.store} (point your "
                            f"program, server or Hermes at it); keep {report.store} until "
                            "you are sure nothing more can be recovered from it.")
    else:
        report.next_step = (f"Nothing was lost: {report.dest} holds every transaction of "
                            f"{report.store}.")
    return report


class _Refused(InvalidError):
    """A destination salvage will not write to (the advice says which one will do)."""

    def __init__(self, message: str, next_step: str) -> None:
        super().__init__(message)
        self.next_step = next_step


def _check_dest(store: str, dest: str) -> str:
    """Refuse a destination that exists and is not empty, or is inside the store (or
    holds it); return the temporary directory the new store is built in."""
    pick = ("Choose a DEST that does not exist yet (or is an empty directory), outside "
            "the store; salvage never writes over anything.")
    real_store, real_dest = os.path.realpath(store), os.path.realpath(dest)
    if os.path.commonpath([real_store, real_dest]) in (real_store, real_dest):
        raise _Refused(f"{dest!r} is the store, inside it, or holds it", pick)
    if os.path.lexists(dest):
        if not os.path.isdir(dest):
            raise _Refused(f"{dest!r} exists and is not a directory", pick)
        if fs.listdir(dest):
            raise _Refused(f"{dest!r} exists and is not empty", pick)
    tmp = dest.rstrip("/") + TMP_SUFFIX
    if os.path.lexists(tmp):
        raise _Refused(f"{tmp!r} exists: an interrupted salvage left it",
                       f"Remove {tmp} (it holds nothing the damaged store lacks), then "
                       "run the salvage again.")
    return tmp


class _Salvage:
    """One salvage: reads the damaged store, writes the new one, fills the report."""

    def __init__(self, report: SalvageReport, key: bytes | None) -> None:
        self.report = report
        self.key = key
        self.journal: Journal | None = None

    def run(self) -> None:
        r = self.report
        if not os.path.isdir(r.store):
            raise NotFoundError(f"no store directory at {r.store!r}")
        live, _ = list_generations(r.store)
        if not live:
            raise NotFoundError(f"{r.store!r} holds no holomem generation (not a store?)")
        tmp = _check_dest(r.store, r.dest)
        r.generation = live[-1]
        gen_dir = os.path.join(r.store, generation_name(live[-1]))
        lock = fs.lock(os.path.join(r.store, LOCK_NAME))  # no writer while it is read
        try:
            files = [(n, p, read_file(p)) for n, p in list_segments(gen_dir)]
            if not files:
                raise CorruptError("the live generation holds no segment: nothing to "
                                   "salvage", path=gen_dir, offset=0)
            ref = reference_header(files)
            check_key(ref, self.key, r.store)
            r.store_id, r.encrypted = ref.store_id.hex(), self.key is not None
            codec = FrameCodec(store_id=ref.store_id, compress=False,
                               envelope=Envelope(self.key) if self.key else None)
            fs.make_dirs(os.path.dirname(r.dest.rstrip("/")) or ".")
            self.journal = Journal.open(tmp, key=self.key, sync="none")
            try:
                r.new_store_id = self.journal.store_id.hex()
                reader = IntactReader(Ledger(r.losses, r.notes, envelope=codec.envelope),
                                      codec, self._copy)
                reader.read(gen_dir, live[-1], ref, files)
                self.journal.close()
                self._finish(tmp)
            except BaseException:
                self.journal.close()
                with contextlib.suppress(HolomemError):
                    fs.erase_tree(tmp)  # it may hold text: zeroed, never merely unlinked
                raise
        finally:
            fs.unlock(lock)
        if len(live) > 1:
            r.notes.append(f"older generations ({', '.join(map(generation_name, live[:-1]))}) "
                           "were left by an interrupted compaction and were not read")

    def _copy(self, seq: int, payloads: list[bytes]) -> None:
        """Append intact transaction ``seq`` to the new store, numbered in order."""
        assert self.journal is not None
        new = self.journal.append(payloads)
        runs = self.report.renumbered
        if runs and runs[-1].last == seq - 1:
            runs[-1].last = seq
        else:
            runs.append(Run(seq, seq, new))
        self.report.recovered += 1

    def _finish(self, tmp: str) -> None:
        """Open the new store (building its derived files), check it, move it in place."""
        from holomem.api.engine import Store

        r = self.report
        Store.open(tmp, key=self.key).close()
        after = check(tmp, key=self.key)
        if after.exit_code != EXIT_CLEAN:
            raise CorruptError(
                "the salvaged store does not check clean (a holomem bug: please report it): "
                + "; ".join([*(f"{f.code}: {f.message}" for f in after.findings),
                             *([after.error] if after.error else [])]))
        r.documents = after.documents
        fs.rename(tmp, r.dest)
        fs.sync_dir(os.path.dirname(r.dest.rstrip("/")) or ".")
