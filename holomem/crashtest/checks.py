"""What the harness verifies after every crash.

Owns: the state the acknowledgements promise (:class:`_Expected`, from the workload's
steps and the results the child acknowledged), what the reopened store holds
(:class:`_Observed`), and :func:`verify`, which compares them and checks the rest.
Imports the memory API, fsck and the events (to read a journal before the reopen), the
workload's constants and :mod:`holomem.crashtest.scan`.

The checks: the store opens with :meth:`holomem.Store.open` and no manual repair; fsck
finds nothing right after the open (before any read, which would heal a bad
text-segment record); every acknowledged remember is there with its text, every
acknowledged forget is gone (``get`` is None, recall never returns it), every
acknowledged supersession link holds (``get``, ``history``, status) and no other
appears; no batch is there in part; the step that was running is wholly there or
wholly absent; after an acknowledged purge its marker is in no file; no text segment
holds the text of a forgotten fact; an encrypted store holds no plaintext; and after
closing, fsck reports the store clean.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator
from typing import Any

import holomem
from holomem import ForgetScope, ManualClock, Memory, Store
from holomem import fsck as fsck_mod
from holomem.crashtest.scan import scan_files
from holomem.crashtest.workload import BASE_MS, CONFIG, SEGMENT_SIZE
from holomem.events import DocumentAdded, DocumentReplaced, PurgeRequested
from holomem.events import decode as decode_event
from holomem.log import Journal
from holomem.log.format import TEXT_FILE

#: The checker's clock: long after every step, so that every link is in effect.
CHECK_MS = BASE_MS + 10**9


@dataclasses.dataclass
class _Expected:
    """What the store must hold once the acknowledged steps are applied."""

    facts: dict[str, str] = dataclasses.field(default_factory=dict)
    links: set[tuple[str, str]] = dataclasses.field(default_factory=set)
    removed: set[str] = dataclasses.field(default_factory=set)
    purged: list[str] = dataclasses.field(default_factory=list)
    opened: bool = False

    def apply(self, step: dict[str, Any], result: Any) -> None:
        kind = step["kind"]
        if kind == "open":
            self.opened = True
        elif kind in ("remember", "remember_many"):
            for inp, r in zip(step["facts"], result, strict=True):
                if not r["created"]:
                    continue
                self.facts[r["id"]] = inp["text"]
                self.links.update((r["id"], p) for p in r["superseded"])
        elif kind == "forget":
            gone = set(result["removed"])
            for fid in gone:
                self.facts.pop(fid, None)
            self.removed |= gone
            self.links = {(s, p) for s, p in self.links if s not in gone and p not in gone}
            self.links.update((s, p) for s, p in result["relinked"])
            if step.get("purge"):
                self.purged.append(step["marker"])


def _expected(steps: list[dict[str, Any]], results: list[Any], upto: int) -> _Expected:
    e = _Expected()
    for i in range(upto):
        e.apply(steps[i], results[i])
    return e


@dataclasses.dataclass
class _Observed:
    """What the reopened store holds, read through the memory API."""

    texts: dict[str, str]
    links: set[tuple[str, str]]
    #: fact id -> the batch its metadata tags it with
    batches: dict[str, str]
    problems: list[str]


def _observe(memory: Memory) -> _Observed:
    texts: dict[str, str] = {}
    links: set[tuple[str, str]] = set()
    back: set[tuple[str, str]] = set()
    batches: dict[str, str] = {}
    problems: list[str] = []
    for fid in memory.store.ids():
        rec = memory.get(fid)
        if rec is None:
            problems.append(f"{fid} is listed by the store but get() returns None")
            continue
        texts[fid] = rec.text
        if rec.metadata and "batch" in rec.metadata:
            batches[fid] = rec.metadata["batch"]
        links.update((fid, p) for p in rec.supersedes)
        back.update((s, fid) for s in rec.superseded_by)
        superseded = bool(rec.superseded_by)
        want = "superseded" if superseded else "current"
        if rec.status != want:
            problems.append(f"{fid} has status {rec.status}, {want} expected")
    if links != back:
        problems.append(f"supersedes and superseded_by disagree: {sorted(links ^ back)}")
    for s, p in sorted(links):
        chain = [h.id for h in memory.history(s)]
        if p not in chain:
            problems.append(f"history({s}) lacks {p}, which it supersedes")
    return _Observed(texts, links, batches, problems)


def _compare(e: _Expected, o: _Observed) -> list[str]:
    out = []
    for fid in sorted(set(e.facts) - set(o.texts)):
        out.append(f"acknowledged fact {fid} is missing")
    for fid in sorted(set(o.texts) - set(e.facts)):
        what = "an acknowledged forget" if fid in e.removed else "nothing acknowledged"
        out.append(f"fact {fid} is present, but {what} says it should not be")
    for fid in sorted(set(e.facts) & set(o.texts)):
        if e.facts[fid] != o.texts[fid]:
            out.append(f"fact {fid} has the wrong text: {o.texts[fid][:40]!r}")
    for s, p in sorted(e.links - o.links):
        out.append(f"acknowledged link {s} supersedes {p} is missing")
    for s, p in sorted(o.links - e.links):
        out.append(f"unexpected link {s} supersedes {p}")
    return out


def partial_batches(steps: list[dict[str, Any]], tags: dict[str, str],
                    results: list[Any]) -> list[str]:
    """A batch is all or nothing: either every member is there, tagged with its batch
    (but those a forget removed later), or none is. ``tags``: fact id -> batch tag."""
    out = []
    for i, step in enumerate(steps):
        if step["kind"] != "remember_many" or i >= len(results):
            continue
        members = [r["id"] for r in results[i] if r["created"]]
        present = [m for m in members if tags.get(m) == step["batch"]]
        if present and len(present) < len(members):
            forgotten = {fid for j, s in enumerate(steps) if s["kind"] == "forget"
                         and j < len(results) and results[j] is not None
                         for fid in results[j]["removed"]}
            missing = [m for m in members if m not in present and m not in forgotten]
            if missing:
                out.append(f"partial transaction: batch {step['batch']} has "
                           f"{len(present)} of {len(members)} members (missing {missing})")
    return out


def _needles(e: _Expected, steps: list[dict[str, Any]], encrypted: bool) -> dict[str, bytes]:
    """What no file may hold: purged markers, and any plaintext in an encrypted store."""
    needles = {f"purged marker {m}": m.encode() for m in e.purged}
    if encrypted:
        for step in steps:
            for f in step.get("facts", ()):
                needles[f"plaintext of {f.get('id', 'a fact')}"] = f["text"].encode()
    return needles


def _forgotten(e: _Expected, steps: list[dict[str, Any]], reference: list[Any]
               ) -> dict[str, bytes]:
    """Texts of forgotten facts: zeroed and synced in the text segment before forget
    returned (docs/guarantees.md §6), so no text segment may hold them, even after a power cut."""
    out = {}
    for text, fid in _queries(steps, reference):
        if fid in e.removed and fid not in e.facts:
            out[f"text of forgotten {fid}"] = text.encode()
    return out


def _scan_all(store_dir: str, e: _Expected, steps: list[dict[str, Any]],
              reference: list[Any], key: bytes | None) -> list[str]:
    """Purged markers in no file (seen through compression and the key); in an
    encrypted store, no plaintext (raw or compressed); forgotten text in no text
    segment."""
    purged = {f"purged marker {m}": m.encode() for m in e.purged}
    plain = _needles(e, steps, key is not None)
    for name in purged:
        plain.pop(name, None)
    return (scan_files(store_dir, purged, key=key) + scan_files(store_dir, plain)
            + scan_files(store_dir, _forgotten(e, steps, reference), only=TEXT_FILE, key=key))


class _LogCatcher(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _catch_logs() -> Iterator[list[str]]:
    catcher = _LogCatcher()
    logger = logging.getLogger("holomem")
    logger.addHandler(catcher)
    old = logger.propagate
    logger.propagate = False
    try:
        yield catcher.messages
    finally:
        logger.propagate = old
        logger.removeHandler(catcher)


@dataclasses.dataclass
class Verdict:
    violations: list[str]
    inflight: str  # "" (none), "present" or "absent"
    notes: list[str]


def verify(store_dir: str, key: bytes | None, steps: list[dict[str, Any]],
           reference: list[Any], acked: int, begun: int,
           extra: dict[str, str] | None = None) -> Verdict:
    """Reopen the crashed store and check every guarantee; see the module docstring.

    ``acked`` steps were acknowledged and ``begun`` started; ``extra`` are facts a
    later process acknowledged (id -> text).
    """
    before = _expected(steps, reference, acked)
    after = _expected(steps, reference, begun) if begun > acked else None
    for e in (before, after):
        if e is not None and extra:
            e.facts.update(extra)
            e.opened = True
    violations: list[str] = []
    notes: list[str] = []
    violations += [f"before reopen: {v}" for v in
                   _scan_all(store_dir, before, steps, reference, key)]
    purge = steps[acked] if begun > acked and steps[acked].get("purge") else None
    recorded = _purge_record(store_dir, key, purge["ids"][0]) if purge is not None else None
    pre = fsck_mod.check(store_dir, key=key)
    if not pre.clean:
        notes.append("fsck before reopen: " + ", ".join(
            sorted({f.code for f in pre.findings} | ({"error"} if pre.error else set()))))
    with _catch_logs() as logs:
        try:
            store = Store.open(store_dir, key=key, segment_size=SEGMENT_SIZE,
                               create=not before.opened)
        except holomem.HolomemError as exc:
            return Verdict([f"the store does not open without manual repair: {exc!r}"], "",
                           notes)
        try:
            # Before any read: a read of a damaged text-segment record heals it, which
            # would hide a text segment that the open trusted but should not have.
            violations += _fsck("fsck right after the open", store_dir, key)
            if purge is not None and recorded is not None and (recorded[0] or not recorded[1]):
                # The purge was recorded, or its compaction had already switched
                # generations: the open must have finished it.
                violations += [f"after the open finished an interrupted purge: {v}" for v in
                               scan_files(store_dir, marker_needle(purge), key=key)]
            memory = Memory(store, CONFIG, clock=ManualClock(CHECK_MS))
            observed = _observe(memory)
            violations += observed.problems
            violations += partial_batches(steps, observed.batches, reference[:begun])
            diff = _compare(before, observed)
            inflight = ""
            if after is not None and (after.facts, after.links) == (before.facts,
                                                                     before.links):
                after = None  # the step that was running changes nothing visible
            if after is not None:
                diff_after = _compare(after, observed)
                if not diff:
                    inflight = "absent"
                elif not diff_after:
                    inflight, diff = "present", []
                else:
                    diff.append(f"(and against the state with step {acked} applied: "
                                f"{'; '.join(diff_after)})")
            violations += diff
            # Recall never returns a fact that is gone (asked with the text of every
            # fact that is not there), and finds the ones that are (a sample).
            for n, (text, fid) in enumerate(_queries(steps, reference)):
                if fid in observed.texts and n % 4:
                    continue
                got = [r.id for r in memory.recall(text, k=10, history="all")]
                ghosts = [g for g in got if g not in observed.texts]
                if ghosts:
                    violations.append(f"recall returns removed facts {ghosts}")
                if fid in observed.texts and fid not in got:
                    violations.append(f"recall of its own text does not find {fid}")
            if purge is not None:
                # A forget cut short is finished by the same call (docs/contract.md §4).
                memory.forget(ForgetScope(ids=purge["ids"]), purge=True)
        finally:
            store.close()
    notes += [f"open: {m}" for m in logs]
    final = after if inflight == "present" and after is not None else before
    violations += [f"after reopen: {v}" for v in
                   _scan_all(store_dir, final, steps, reference, key)]
    if purge is not None:
        violations += [f"after repeating the interrupted purge: {v}" for v in
                       scan_files(store_dir, marker_needle(purge), key=key)]
    violations += _fsck("fsck after the checks and close", store_dir, key)
    return Verdict(violations, inflight, notes)


def marker_needle(step: dict[str, Any]) -> dict[str, bytes]:
    """What no file may hold after the purge ``step``: its marker."""
    return {f"purged marker {step['marker']}": step["marker"].encode()}


def _purge_record(store_dir: str, key: bytes | None, fid: str) -> tuple[bool, bool] | None:
    """Before the reopen: (a purge is recorded in the live generation, the text of
    ``fid`` is in it), or None if the journal cannot be read without a repair."""
    try:
        journal = Journal.open(store_dir, key=key, read_only=True)
    except holomem.HolomemError:
        return None
    requested = written = False
    try:
        for seq, payloads in journal.replay():
            for payload in payloads:
                event = decode_event(payload, seq=seq)
                if isinstance(event, PurgeRequested):
                    requested = True
                elif isinstance(event, (DocumentAdded, DocumentReplaced)) and event.id == fid:
                    written = True
    except holomem.HolomemError:
        return None
    finally:
        journal.close()
    return requested, written


def _fsck(when: str, store_dir: str, key: bytes | None) -> list[str]:
    report = fsck_mod.check(store_dir, key=key)
    if report.exit_code == 0 and report.clean:
        return []
    return [f"{when}: exit {report.exit_code}, " + "; ".join(
        [f"{f.code} {os.path.relpath(f.path, store_dir)}@{f.offset}: {f.message}"
         for f in report.findings] + ([report.error] if report.error else []))]


def _queries(steps: list[dict[str, Any]], reference: list[Any]) -> Iterator[tuple[str, str]]:
    for step, result in zip(steps, reference, strict=False):
        if step["kind"] in ("remember", "remember_many"):
            for f, r in zip(step["facts"], result, strict=True):
                yield f["text"], r["id"]
