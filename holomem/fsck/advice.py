"""What to do next: the advice fsck gives with every finding and every error.

Owns: the next step for each kind of finding (:func:`for_finding`), for a report as a
whole (:func:`for_report`) and for an error that stopped the check (:func:`for_error`),
each a sentence or two in plain words naming the command to run or the file to look
at. Imports the standard library, :mod:`holomem.log.format` (file names) and
:mod:`holomem.fsck.findings`.

The rule it follows: a finding that ``--repair`` fixes says so; one that it cannot fix
says how to get the store back (a backup) and what ``--salvage DEST`` keeps of it; and
one that is repairable but blocked (``--repair`` changes nothing while an unrepairable
finding remains) says that too.
"""

from __future__ import annotations

import os
import shlex

from holomem.fsck.findings import Finding, Report
from holomem.log.backup import backup_dir
from holomem.log.format import LOCK_NAME, WATERMARK_FILE

#: The command that installs holomem (for a store written by a newer build).
UPGRADE = "python -m pip install -U holomem-db"


def command(store: str, *args: str, key_file: str | None = None,
            encrypted: bool = False) -> str:
    """The fsck command line for ``store`` with ``args`` (and the key file, if any)."""
    parts = ["python", "-m", "holomem.fsck", shlex.quote(store), *args]
    if key_file is not None:
        parts += ["--key-file", shlex.quote(key_file)]
    elif encrypted:
        parts += ["--key-file", "KEY_FILE"]
    return " ".join(parts)


def salvage_dest(store: str) -> str:
    """The destination fsck suggests for a salvage: ``STORE.salvaged`` beside the store."""
    return os.path.abspath(store).rstrip("/") + ".salvaged"


class Advisor:
    """The next steps for the findings of one store (the key file is named in commands)."""

    def __init__(self, store: str, *, key_file: str | None = None,
                 encrypted: bool = False) -> None:
        self.store = store
        self.key_file = key_file
        self.encrypted = encrypted

    def _cmd(self, *args: str) -> str:
        return command(self.store, *args, key_file=self.key_file, encrypted=self.encrypted)

    @property
    def repair(self) -> str:
        return self._cmd("--repair")

    @property
    def salvage(self) -> str:
        return self._cmd("--salvage", shlex.quote(salvage_dest(self.store)))

    def _restore_or_salvage(self) -> str:
        return (f"If you have a backup of the store from before the damage, restore it "
                f"(replace {self.store} with the copy while nothing has the store open). "
                f"Otherwise run `{self.salvage}`: it copies every intact transaction, before "
                f"and after the damage, into a new store and lists exactly what it could "
                f"not copy; {self.store} itself is left as it is.")

    def for_finding(self, f: Finding, *, blocked: bool, tried: bool) -> str:
        """The next step for ``f``. ``blocked``: another finding is unrepairable, so
        ``--repair`` changes nothing; ``tried``: ``--repair`` ran and left ``f``."""
        if f.repaired:
            return ""
        if f.repairable and tried:
            return (f"`--repair` did not fix it (a second check still finds it). "
                    f"{self._restore_or_salvage()}")
        if f.repairable and blocked:
            return ("`--repair` fixes this, but it changes nothing while an unrepairable "
                    "finding remains: follow their next steps first (a salvage leaves "
                    "this behind with the damaged store).")
        if f.repairable:
            return self._repairable(f)
        return self._unrepairable(f)

    def _repairable(self, f: Finding) -> str:
        run = f"Run `{self.repair}`"
        later = " (the next open for writing does the same)"
        if f.code == "leftover":
            return f"{run}: it overwrites {f.path} with zeros and removes it{later}."
        if f.code == "journal.torn":
            return (f"{run}: it cuts the torn bytes off, saving them first to "
                    f"{backup_dir(self.store)}/{later}. Nothing acknowledged is lost.")
        if os.path.basename(f.path) == WATERMARK_FILE:
            return (f"{run}: it removes the watermark, keeping a copy in "
                    f"{backup_dir(self.store)}/; the next open for writing writes a new one.")
        if f.code.startswith("text."):
            return f"{run}: it rebuilds {f.path} from the journal{later}."
        if f.code == "purge.pending":
            return f"{run}: it finishes the purge{later}."
        if f.code == "checkpoint.mismatch":
            return (f"{run} before the store is opened again: it overwrites {f.path} with "
                    "zeros, removes it and writes a fresh checkpoint from the journal. Until "
                    "then open restores this checkpoint (it is bound to this journal), so "
                    "answers come from it rather than from the journal. Nothing is lost: a "
                    "checkpoint is derived.")
        if f.code == "checkpoint.replaced":
            return (f"{run}: it overwrites {f.path} with zeros and removes it{later}. "
                    "Nothing is lost: open restores the newest checkpoint bound to this "
                    "journal, and a checkpoint is derived.")
        if f.code.startswith("checkpoint."):
            return (f"{run}: it overwrites {f.path} with zeros, removes it and writes a "
                    f"fresh checkpoint from the journal{later}. Nothing is lost: a "
                    "checkpoint is derived, and open does not use this one.")
        return f"{run}."

    def _unrepairable(self, f: Finding) -> str:
        if os.path.basename(f.path) == WATERMARK_FILE:
            return (f"{self._restore_or_salvage()} Or, to accept losing whatever the damage "
                    f"reported beside it hides, delete {f.path} and run `{self.repair}` "
                    "again.")
        if f.code == "corrupt.missing":
            first = (f"The file {f.path} is gone: if a backup or snapshot holds it, copy it "
                     f"back to exactly that path and run `{self._cmd()}` again. ")
        elif f.code == "corrupt.auth":
            first = ("The key opens the store, yet this frame fails authentication: its "
                     "bytes were altered, or copied here from another place or store. ")
        elif f.code == "event.undecodable":
            first = (f"If a newer holomem wrote this store, check it with that version "
                     f"(`{UPGRADE}`). ")
        elif f.code == "corrupt.lost_tail":
            first = ("If a backup or snapshot holds the journal's lost end (its missing "
                     "segment files, or a longer copy of its last one), copy it back into "
                     f"{os.path.dirname(f.path)} and run `{self._cmd()}` again. ")
        else:
            first = ""
        step = first + self._restore_or_salvage()
        if f.code == "corrupt.lost_tail":
            step += (f" Or, to give up the lost transactions and go on with the journal as "
                     f"it is, delete {f.path} (a checkpoint is derived: the next open "
                     "replays the journal).")
        if f.durable:
            mark = os.path.join(os.path.dirname(f.path), WATERMARK_FILE)
            step += (f" Or, to give up every transaction from offset {f.offset} of "
                     f"{f.path} on (a salvage keeps the intact ones after it), delete the "
                     f"watermark {mark} and run `{self.repair}`, which cuts them off and "
                     f"saves the cut bytes in {backup_dir(self.store)}/.")
        return step

    def for_report(self, report: Report, *, tried: bool) -> str:
        """The next step for the store as a whole (``tried``: ``--repair`` ran)."""
        if report.error is not None:
            return self.for_error(report.error_code or "error", report.error)
        left = [f for f in report.findings if not f.repaired]
        if not left:
            return ""
        if all(f.repairable for f in left) and not tried:
            return f"Run `{self.repair}`."
        return self._restore_or_salvage()

    def for_error(self, code: str, message: str) -> str:
        """The next step when the check could not run (``code`` is the error's)."""
        if code == "locked":
            return (f"A process has the store open for writing (holomem serve, holomem mcp, "
                    f"Hermes, or a program holding a Memory or Store): stop it, then run "
                    f"this again (`lsof {os.path.join(self.store, LOCK_NAME)}` names it).")
        if code == "key.required":
            return ("The store is encrypted: run again with --key-file FILE, the file "
                    "holding its 32-byte key.")
        if code == "key.wrong":
            which = self.key_file or "the key file"
            return (f"{which} does not hold this store's key: pass the file with the key "
                    "the store was created with.")
        if code == "key.unexpected":
            return "The store is not encrypted: run again without --key-file."
        if code == "format.version":
            return f"A newer holomem wrote this store: check it with that version (`{UPGRADE}`)."
        if code == "not_found":
            return (f"Check the path: a store is the directory holding {LOCK_NAME} and "
                    "gen-NNNNNNNN/ (the path given to Store.open, or a tenant's directory "
                    "under holomem serve's data directory).")
        if code == "invalid_request":
            return "The key file must hold exactly 32 raw bytes (the store's key)."
        if code.startswith("io"):
            return ("The operating system refused a read or a write (see the message): "
                    "check the permissions on the path and the health of the disk "
                    "(`dmesg` shows I/O errors).")
        return f"See the message: {message}"
